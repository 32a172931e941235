/*
 * common/json.h's one rule for JSON strings, which haecer-stat, haecer-mon, haecer-prof and the
 * region report all write by (issue 30, item 5: four writers whose escaping disagreed): quote and
 * backslash escaped, every control byte and DEL as \u00XX, valid UTF-8 kept, any other byte the
 * replacement character, NULL the empty string; and a number JSON cannot carry is null.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "common/json.h"

/* What json_write_string writes for text. The caller frees it. */
static char *written(const char *text)
{
	char *buffer = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&buffer, &size);

	assert_non_null(out);
	json_write_string(out, text);
	assert_int_equal(fclose(out), 0);
	return buffer;
}

static void expect(const char *text, const char *json)
{
	char *buffer = written(text);

	assert_string_equal(buffer, json);
	free(buffer);
}

static void test_quote_and_backslash(void **state)
{
	(void)state;
	expect("a\"b\\c", "\"a\\\"b\\\\c\"");
}

static void test_control_bytes_and_del(void **state)
{
	(void)state;
	expect("\n\t\x01\x1f\x7f", "\"\\u000a\\u0009\\u0001\\u001f\\u007f\"");
}

static void test_utf8_kept_other_bytes_replaced(void **state)
{
	(void)state;
	expect("caf\xc3\xa9 \xe2\x82\xac", "\"caf\xc3\xa9 \xe2\x82\xac\"");
	expect("a\xff" "b\xc3", "\"a\\ufffdb\\ufffd\"");
	expect("\xc0\xaf", "\"\\ufffd\\ufffd\"");
}

static void test_null_is_empty(void **state)
{
	(void)state;
	expect(NULL, "\"\"");
}

static void test_numbers(void **state)
{
	char *buffer = NULL;
	size_t size = 0;
	FILE *out = open_memstream(&buffer, &size);

	(void)state;
	assert_non_null(out);
	json_write_number(out, 0.5);
	fputc(' ', out);
	json_write_number(out, NAN);
	fputc(' ', out);
	json_write_number(out, -INFINITY);
	assert_int_equal(fclose(out), 0);
	assert_string_equal(buffer, "0.5 null null");
	free(buffer);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quote_and_backslash),
		cmocka_unit_test(test_control_bytes_and_del),
		cmocka_unit_test(test_utf8_kept_other_bytes_replaced),
		cmocka_unit_test(test_null_is_empty),
		cmocka_unit_test(test_numbers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
