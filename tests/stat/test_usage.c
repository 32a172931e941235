/*
 * Bad usage ends haecer-stat with status 2 and a message that says what is wrong (and runs
 * nothing); --help and --version exit 0; msrd unreachable is status 125 with the reason, and
 * the command is not run.
 */
#include <sys/stat.h>

#include <haecer/perfmon.h>

#include "tests/stat/stat_test.h"

struct usage_case {
	const char *arguments[8];
	const char *message;
};

static const struct usage_case cases[] = {
	{ { NULL }, "no command to run" },
	{ { "-r", "0", "--", "/bin/true", NULL }, "-r takes a number of runs" },
	{ { "-r", "many", "--", "/bin/true", NULL }, "-r takes a number of runs" },
	{ { "-r", NULL }, "needs a value" },
	{ { "--cpu", "-1", "--", "/bin/true", NULL }, "--cpu takes a CPU number" },
	{ { "--cpu", "100000", "--", "/bin/true", NULL }, "--cpu takes a CPU number" },
	{ { "--cpu", "1000", "--", "/bin/true", NULL }, "does not exist here" },
	{ { "--cpu", "0", "-a", "--", "/bin/true", NULL }, "exclude each other" },
	{ { "-e", "a,,b", "--", "/bin/true", NULL }, "single commas" },
	{ { "-e", ",a", "--", "/bin/true", NULL }, "single commas" },
	{ { "-e", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "/bin/true", NULL },
	  "at most 16 events" },
	{ { "--no-such-option", "/bin/true", NULL }, "unknown option '--no-such-option'" },
	/* getopt's optopt, not argv[optind - 1] (which named the program or the -x value). */
	{ { "-x,", "-Q", "--", "/bin/true", NULL }, "unknown option '-Q'" },
	{ { "-x", ",", "-Q", "/bin/true", NULL }, "unknown option '-Q'" },
	{ { "-jQ", "/bin/true", NULL }, "unknown option '-Q'" },
	{ { "-x", ",", "--json", "/bin/true", NULL }, "exclude each other" },
	{ { "-I", "5", "/bin/true", NULL }, "-I takes milliseconds" },
	{ { "-I", "100", "--json", "/bin/true", NULL }, "exclude each other" },
	{ { "-x", NULL }, "-x needs a value" },
};

static void test_bad_usage(void **state)
{
	char marker[PATH_MAX + 32];

	(void)state;
	snprintf(marker, sizeof(marker), "%s/ran", server.dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out = NULL, *err = NULL;
		assert_int_equal(stat_run(cases[i].arguments, &out, &err), 2);
		if (strstr(err, cases[i].message) == NULL)
			fail_msg("case %zu: no '%s' in: %s", i, cases[i].message, err);
		assert_non_null(strstr(err, "Try 'haecer-stat --help'"));
		assert_string_equal(out, "");
		free(out);
		free(err);
	}
}

static void test_help_and_version(void **state)
{
	char *out = NULL, *err = NULL;

	(void)state;
	assert_int_equal(stat_run((const char *[]){ "--help", NULL }, &out, &err), 0);
	assert_non_null(strstr(out, "Usage: haecer-stat"));
	free(out);
	free(err);
	assert_int_equal(stat_run((const char *[]){ "--version", NULL }, &out, &err), 0);
	assert_non_null(strstr(out, "haecer-stat "));
	/* The one version of every binary and of the library. */
	assert_non_null(strstr(out, haecer_version()));
	free(out);
	free(err);
}

static void test_msrd_unreachable(void **state)
{
	char marker[PATH_MAX + 32], script[PATH_MAX + 64];
	const char *arguments[] = { "--", "/bin/sh", "-c", script, NULL };
	char *err = NULL;

	(void)state;
	snprintf(marker, sizeof(marker), "%s/ran", server.dir);
	snprintf(script, sizeof(script), "touch %s", marker);
	assert_int_equal(stat_run_on("/nonexistent/msrd.sock", arguments, NULL, &err), 125);
	assert_non_null(strstr(err, "cannot connect to msrd at /nonexistent/msrd.sock"));
	assert_int_not_equal(access(marker, F_OK), 0);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_usage),
		cmocka_unit_test(test_help_and_version),
		cmocka_unit_test(test_msrd_unreachable),
	};

	return STAT_RUN_GROUP(tests);
}
