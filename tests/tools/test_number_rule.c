/*
 * One rule for the numbers every tool reads (issue 30, item 5): haecer-msr took " 12" and
 * "+12" (strtoull skips blanks and takes a sign), haecer-mon refused them, haecer-prof took
 * " 99" for -F. Now each refuses a number that does not start with a digit, or has anything
 * after it, with status 2 and a message naming the option or argument, before it connects to
 * any msrd (none runs here: a tool that got past its arguments would fail differently).
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness/tool_argv.h"

struct number_case {
	const char *program;
	const char *arguments[10];
	const char *message;
};

static const struct number_case cases[] = {
	{ "haecer-msr", { "--socket", "/nonexistent", "read", " 12", "0x10", NULL },
	  "bad CPU number ' 12'" },
	{ "haecer-msr", { "--socket", "/nonexistent", "read", "0", "+16", NULL },
	  "bad MSR address '+16'" },
	{ "haecer-msr", { "--socket", "/nonexistent", "write", "0", "0x10", " 7", NULL },
	  "bad value ' 7'" },
	{ "haecer-msr", { "--socket", "/nonexistent", "read", "0", "0x10 ", NULL },
	  "bad MSR address '0x10 '" },
	{ "haecer-mon", { "follow", "--count", " 5", "1", "1", NULL }, "--count takes" },
	{ "haecer-mon", { "follow", "--interval", "+5", "1", "1", NULL }, "--interval takes" },
	{ "haecer-mon", { "follow", "--duration", " 1", "1", "1", NULL }, "--duration takes" },
	{ "haecer-stat", { "-r", " 2", "--", "/bin/true", NULL }, "-r takes a number of runs" },
	{ "haecer-stat", { "--cpu", "+0", "--", "/bin/true", NULL }, "--cpu takes a CPU number" },
	{ "haecer-prof", { "record", "-F", " 99", "--", "/bin/true", NULL }, "-F: a rate" },
	{ "haecer-prof", { "record", "-E", "5ms", "--", "/bin/true", NULL },
	  "-E: an energy period" },
	{ "haecer-prof", { "calm", "-n", " 3", "--", "/bin/true", NULL }, "-n: 2 to 1000 runs" },
};

static void test_numbers_refused_with_the_option_named(void **state)
{
	const char *build = getenv("HAECER_BUILD");

	(void)state;
	assert_non_null(build);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char program[PATH_MAX], *out = NULL, *err = NULL;
		int status;

		snprintf(program, sizeof(program), "%s/%s", build, cases[i].program);
		status = harness_run_program(program, cases[i].arguments, &out, &err);
		if (status != 2 || strstr(err, cases[i].message) == NULL)
			fail_msg("case %zu (%s): status %d, no '%s' in: %s", i, cases[i].program,
				 status, cases[i].message, err);
		assert_non_null(strstr(err, cases[i].program));
		free(out);
		free(err);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_numbers_refused_with_the_option_named),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
