/*
 * The report a program writes at exit (tests/region/helper_regions): into $HAECER_REGION_REPORT
 * (text and .callgrind), on stderr when it is unset, nowhere when it is "none". A forked child's
 * exit does not overwrite its parent's report; a region left open is listed as such. Without
 * msrd the regions still count calls and time and the report says why there is no energy; for
 * a user the policy refuses the PMU, the counters are "-" with the refusal.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "tests/lib/test_check.h"
#include "tests/region/region_test.h"

static char helper[PATH_MAX];

/* Run the helper with HAECER_REGION_REPORT (NULL: unset) and HAECER_SOCKET; its stderr. */
static int run_helper(const char *report, const char *socket_path, char **err)
{
	const char *argv[] = { helper, NULL };
	int status;

	if (report != NULL)
		setenv(HAECER_REGION_REPORT_ENV, report, 1);
	else
		unsetenv(HAECER_REGION_REPORT_ENV);
	setenv(HAECER_SOCKET_ENV, socket_path, 1);
	status = harness_run(argv, NULL, err);
	unsetenv(HAECER_REGION_REPORT_ENV);
	setenv(HAECER_SOCKET_ENV, server.socket_path, 1);
	return status;
}

static void test_report_into_files(void **state)
{
	const char *text_path = region_report_path("exit.txt", "");
	const char *callgrind = region_report_path("exit.txt", ".callgrind");
	char *err = NULL, *text;
	struct cg_file file;

	(void)state;
	assert_int_equal(run_helper(text_path, server.socket_path, &err), 0);
	assert_string_equal(err, "");
	text = region_read_text(text_path);
	assert_non_null(text);
	fprintf(stderr, "%s", text);
	assert_non_null(strstr(text, "\nouter "));
	assert_non_null(strstr(text, "\n  inner "));
	assert_non_null(strstr(text, "(1 open, not counted)"));
	/* Each region's energy states its +- (one update's energy per call). */
	assert_non_null(strstr(text, "+-J/call"));
	assert_null(strstr(text, "child-only"));
	assert_non_null(strstr(text, "haecer regions of pid "));
	cg_read(callgrind, &file);
	assert_int_equal(cg_arc(&file, "outer", "inner")->calls, 3);
	/* Three pauses of 2 ms at least. */
	assert_true(cg_arc(&file, "outer", "inner")->inclusive[cg_event(&file, "Time_ns")] >=
		    6000000u);
	/* The inner regions sleep: the package drew energy, little of it is theirs. */
	assert_true(cg_arc(&file, "outer", "inner")->inclusive[cg_event(&file, "PkgWide_nJ")] > 0);
	assert_true(cg_arc(&file, "outer", "inner")->inclusive[cg_event(&file, "Energy_pkg_nJ")] <
		    cg_arc(&file, "outer", "inner")->inclusive[cg_event(&file, "PkgWide_nJ")]);
	cg_annotate_accepts(callgrind, "helper_regions.c:outer");
	free(text);
	free(err);
}

static void test_report_on_stderr_or_nowhere(void **state)
{
	const char *nothing = region_report_path("none", "");
	char *err = NULL;

	(void)state;
	assert_int_equal(run_helper(NULL, server.socket_path, &err), 0);
	fprintf(stderr, "%s", err);
	assert_non_null(strstr(err, "haecer regions of pid"));
	assert_non_null(strstr(err, "\n  inner "));
	free(err);
	assert_int_equal(run_helper("none", server.socket_path, &err), 0);
	assert_string_equal(err, "");
	assert_int_not_equal(access(nothing, F_OK), 0);
	free(err);
}

static void test_without_msrd(void **state)
{
	const char *text_path = region_report_path("offline.txt", "");
	char *err = NULL, *text;
	struct cg_file file;

	(void)state;
	assert_int_equal(run_helper(text_path, "/nonexistent/msrd.sock", &err), 0);
	text = region_read_text(text_path);
	assert_non_null(text);
	fprintf(stderr, "%s", text);
	assert_non_null(strstr(text, "msrd unreachable"));
	assert_non_null(strstr(text, "CLOCK_MONOTONIC_RAW"));
	cg_read(region_report_path("offline.txt", ".callgrind"), &file);
	assert_int_equal(cg_arc(&file, "outer", "inner")->calls, 3);
	assert_true(cg_arc(&file, "outer", "inner")->inclusive[cg_event(&file, "Time_ns")] >=
		    6000000u);
	assert_false(cg_has_event(&file, "PkgWide_nJ"));
	assert_false(cg_has_event(&file, "Energy_pkg_nJ"));
	free(text);
	free(err);
}

struct denied_run {
	char report[PATH_MAX + 32];
};

/* As a user without the PMU: energy is measured, the counters are refused. */
static int run_without_pmu(void *argument)
{
	struct denied_run *run = argument;
	char *err = NULL, *text;

	CHECK(run_helper(run->report, server.socket_path, &err) == 0);
	text = region_read_text(run->report);
	CHECK(text != NULL);
	fprintf(stderr, "%s", text);
	CHECK(strstr(text, "not counted") != NULL);
	CHECK(strstr(text, "instructions") != NULL);
	CHECK(strstr(text, "denied") != NULL || strstr(text, "policy") != NULL);
	CHECK(strstr(text, "energy: energy-pkg energy-cores energy-gpu of the package") != NULL);
	free(text);
	free(err);
	return 0;
}

static void test_policy_refuses_counters(void **state)
{
	char directory[] = "/tmp/haecer-region-XXXXXX";
	struct denied_run run;

	(void)state;
	assert_non_null(mkdtemp(directory));
	assert_int_equal(chmod(directory, 0777), 0);
	snprintf(run.report, sizeof(run.report), "%s/denied.txt", directory);
	assert_int_equal(run_as(REGION_TEST_ENERGY_ONLY_UID, REGION_TEST_ENERGY_ONLY_UID, NULL, 0,
				run_without_pmu, &run), 0);
	harness_remove_tree(directory);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_into_files),
		cmocka_unit_test(test_report_on_stderr_or_nowhere),
		cmocka_unit_test(test_without_msrd),
		cmocka_unit_test(test_policy_refuses_counters),
	};

	snprintf(helper, sizeof(helper), "%s/tests/region/helper_regions", harness_build_dir());
	return REGION_RUN_GROUP(NULL, tests);
}
