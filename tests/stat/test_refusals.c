/*
 * What haecer-stat cannot count: the default events (nobody named them) are shown, not fatal:
 * for a user msrd's policy grants energy but not the PMU, instructions and cycles are
 * "<not counted>" with the policy's reason while energy is measured and the command's status
 * passes through. An event named with -e that the CPU does not have or the policy refuses ends
 * haecer-stat with perf stat's 129 and the reason before the command runs; --skip-unavailable
 * runs it and shows "<not supported>" / "<not counted>" with the reason, in the table and JSON.
 */
#include "tests/lib/test_check.h"
#include "tests/stat/stat_test.h"

struct refused_run {
	int status;
};

static int run_without_pmu(void *argument)
{
	/* 20 ms: a command shorter than one RAPL update (~1 ms, jittered) may rightly show 0 J. */
	const char *arguments[] = { "--", "/bin/sh", "-c", "sleep 0.02; exit 5", NULL };
	const char *json[] = { "--json", "--", "/bin/true", NULL };
	char *err = NULL;

	(void)argument;
	CHECK_EQ(stat_run(arguments, NULL, &err), 5);
	CHECK(strstr(err, "<not counted>") != NULL);
	CHECK(strstr(err, "instructions") != NULL);
	CHECK(strstr(err, "cycles") != NULL);
	CHECK(strstr(err, "denied by policy") != NULL);
	CHECK(stat_value_of(err, "energy-pkg") > 0.0);
	free(err);
	CHECK_EQ(stat_run(json, NULL, &err), 0);
	CHECK(strstr(err, "\"name\": \"instructions\", \"kind\": \"event\", \"unit\": \"events\", "
		      "\"state\": \"not counted\", \"counted\": false") != NULL);
	CHECK(strstr(err, "\"reason\": \"") != NULL);
	CHECK(strstr(err, "\"name\": \"energy-pkg\", \"kind\": \"energy\", \"unit\": \"J\", "
		      "\"state\": \"counted\"") != NULL);
	free(err);
	/* Named with -e: refused before the command runs, with the policy's reason. */
	const char *named[] = { "-e", "instructions", "--", "/bin/sh", "-c", "echo ran", NULL };
	char *out = NULL;
	CHECK_EQ(stat_run(named, &out, &err), 129);
	CHECK(strstr(err, "cannot count 'instructions'") != NULL);
	CHECK(strstr(err, "denied by policy") != NULL);
	CHECK(out != NULL && strcmp(out, "") == 0);
	free(out);
	free(err);
	return 0;
}

static void test_policy_refuses_the_pmu(void **state)
{
	(void)state;
	assert_int_equal(run_as(STAT_TEST_ENERGY_ONLY_UID, STAT_TEST_ENERGY_ONLY_UID, NULL, 0,
				run_without_pmu, NULL), 0);
}

static void test_unknown_event(void **state)
{
	const char *arguments[] = { "-e", "instructions,no_such_event_here", "--skip-unavailable",
				    "--", "/bin/true", NULL };
	const char *strict[] = { "-e", "instructions,no_such_event_here", "--", "/bin/sh", "-c",
				 "echo ran", NULL };
	const char *domain[] = { "-e", "energy-ram", "--", "/bin/sh", "-c", "echo ran", NULL };
	char *out = NULL, *err = NULL;

	(void)state;
	assert_int_equal(stat_run(arguments, NULL, &err), 0);
	assert_non_null(strstr(err, "<not supported>"));
	assert_non_null(strstr(err, "no_such_event_here"));
	assert_null(strstr(err, "<not counted>"));
	free(err);
	assert_int_equal(stat_run(strict, &out, &err), 129);
	assert_string_equal(out, "");
	assert_non_null(strstr(err, "cannot count 'no_such_event_here'"));
	assert_non_null(strstr(err, "--skip-unavailable"));
	free(out);
	free(err);
	/* The simulated Sandy Bridge has no DRAM domain. */
	assert_int_equal(stat_run(domain, &out, &err), 129);
	assert_string_equal(out, "");
	assert_non_null(strstr(err, "this CPU has no energy-ram domain"));
	free(out);
	free(err);
}

static void test_event_kinds(void **state)
{
	/* perf names, an architectural name, a fixed counter, a raw encoding (instructions, C0/00)
	 * and a libpfm4 name of the model: all counted for root. */
	const char *arguments[] = { "-e", "branch-misses,LL_CACHE_MISSES,fixed1,r00c0",
				    "-e", "L1D.REPLACEMENT", "--", "/bin/true", NULL };
	char *err = NULL;

	(void)state;
	assert_int_equal(stat_run(arguments, NULL, &err), 0);
	assert_null(strstr(err, "<not"));
	assert_non_null(strstr(err, " branch-misses"));
	assert_non_null(strstr(err, " LL_CACHE_MISSES"));
	assert_non_null(strstr(err, " fixed1"));
	assert_non_null(strstr(err, " r00c0"));
	assert_non_null(strstr(err, " L1D.REPLACEMENT"));
	assert_null(strstr(err, " instructions "));
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_policy_refuses_the_pmu),
		cmocka_unit_test(test_unknown_event),
		cmocka_unit_test(test_event_kinds),
	};

	return STAT_RUN_GROUP(tests);
}
