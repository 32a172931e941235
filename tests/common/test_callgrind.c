/*
 * common/callgrind.h, the one Callgrind writer of haecer-prof and the region report (issue 30,
 * item 5): a file or function is named with its id the first time and by its id alone after
 * it, files are found by name, and a control byte in a name cannot end its line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "common/callgrind.h"

static void test_names_compressed_and_printable(void **state)
{
	struct callgrind_files files = { 0 };
	bool named[2] = { false, false };
	char *buffer = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&buffer, &size);

	(void)state;
	assert_non_null(out);
	callgrind_write_preamble(out, "test");
	assert_int_equal(callgrind_write_file(out, "fl", &files, "a.c"), 0);
	callgrind_write_function(out, "fn", 1, "main", &named[0]);
	assert_int_equal(callgrind_write_file(out, "cfi", &files, "b\nc.c"), 0);
	callgrind_write_function(out, "cfn", 2, "work\x7f", &named[1]);
	assert_int_equal(callgrind_write_file(out, "fl", &files, "a.c"), 0);
	callgrind_write_function(out, "fn", 2, "work\x7f", &named[1]);
	assert_int_equal(fclose(out), 0);
	assert_string_equal(buffer, "# callgrind format\nversion: 1\ncreator: test\n"
				    "fl=(1) a.c\nfn=(1) main\ncfi=(2) b?c.c\ncfn=(2) work?\n"
				    "fl=(1)\nfn=(2)\n");
	assert_int_equal(files.count, 2);
	callgrind_files_free(&files);
	free(buffer);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_compressed_and_printable),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
