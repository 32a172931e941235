/*
 * haecer-stat speaks perf stat's formats and keeps the command's affinity (issue 15):
 *  - `haecer-stat -- nproc` prints the CPUs this test may use (the command is not pinned), and
 *    the report says every CPU of that mask was counted;
 *  - -x SEP writes perf's CSV (perf-stat(1), "CSV FORMAT"): counter-value, unit, event,
 *    run-time, percentage of running time, metric value, metric unit; with --per-socket the
 *    aggregation id and the CPU count come first; with -I MS every line is prefixed by the
 *    timestamp, in ascending order; the simulated CPU is said in a '#' line;
 *  - -e power/energy-pkg/ and the seed's RAPL_PP0 count those domains only;
 *  - "seconds user" / "seconds sys", and the warning for a run of few energy updates;
 *  - -o FILE is opened before the command runs: a path that cannot be written is status 125
 *    and the command never runs;
 *  - "haecer-stat list" lists perf's events, this CPU's power/energy-* domains and the
 *    libpfm4 events of the model, which -e counts; without msrd's perf broker it says that
 *    the software and kernel PMU events are not counted here.
 */
#include <sched.h>

#include "harness/text_file.h"
#include "tests/stat/stat_test.h"

/* The CSV lines of a report (no '#' comments), split at sep; fields per line must be `want`. */
static size_t check_csv(const char *report, char sep, size_t want, const char *first_of_last)
{
	size_t lines = 0;
	char *copy = strdup(report), *save = NULL;

	assert_non_null(copy);
	for (char *line = strtok_r(copy, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		size_t fields = 1;
		if (line[0] == '#')
			continue;
		for (const char *c = line; *c != '\0'; c++)
			fields += *c == sep;
		if (fields != want)
			fail_msg("%zu fields, not %zu: %s", fields, want, line);
		lines++;
		(void)first_of_last;
	}
	free(copy);
	return lines;
}

/* Field `index` (0-based) of the CSV line whose event field (index event_at) is `event`. */
static bool csv_field(const char *report, char sep, size_t event_at, const char *event,
		      size_t index, char *out, size_t size)
{
	const char *line = report;

	while (line != NULL && *line != '\0') {
		const char *end = strchr(line, '\n');
		char copy[512], *fields[16];
		size_t count = 0;
		snprintf(copy, sizeof(copy), "%.*s", (int)(end != NULL ? end - line : (long)strlen(line)),
			 line);
		for (char *c = copy, *start = copy; count < 16; c++) {
			if (*c == sep || *c == '\0') {
				bool last = *c == '\0';
				*c = '\0';
				fields[count++] = start;
				start = c + 1;
				if (last)
					break;
			}
		}
		if (copy[0] != '#' && count > event_at && count > index &&
		    strcmp(fields[event_at], event) == 0) {
			snprintf(out, size, "%s", fields[index]);
			return true;
		}
		line = end != NULL ? end + 1 : NULL;
	}
	return false;
}

static void test_nproc_keeps_affinity(void **state)
{
	const char *arguments[] = { "--", "nproc", NULL };
	char *out = NULL, *err = NULL, expected[32];
	cpu_set_t mine;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	snprintf(expected, sizeof(expected), "%d\n", CPU_COUNT(&mine));
	assert_int_equal(stat_run(arguments, &out, &err), 0);
	assert_string_equal(out, expected);
	assert_non_null(strstr(err, "Counted on every CPU the command may run on"));
	assert_non_null(strstr(err, "msrd backend sim)")); /* the backend behind the figures */
	assert_non_null(strstr(err, "The command was not pinned"));
	free(out);
	free(err);
}

static void test_csv(void **state)
{
	const char *arguments[] = { "-x", ";", "-e", "instructions,cycles,power/energy-pkg/", "--",
				    "/bin/sh", "-c", "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done",
				    NULL };
	const char *per_socket[] = { "-x", ",", "--per-socket", "--", "/bin/true", NULL };
	char *err = NULL, field[64];

	(void)state;
	assert_int_equal(stat_run(arguments, NULL, &err), 0);
	/* Three metrics, and the energy total's +- and cost (issue 23) in rows of the same
	 * shape. */
	assert_int_equal(check_csv(err, ';', 7, NULL), 5);
	assert_true(csv_field(err, ';', 2, "energy-pkg:uncertainty", 0, field, sizeof(field)));
	assert_true(strtod(field, NULL) > 0.0);
	assert_true(csv_field(err, ';', 2, "energy-pkg:measurement", 5, field, sizeof(field)));
	assert_true(strtod(field, NULL) > 0.0); /* msrd's CPU: at least the reads' round trips */
	assert_true(csv_field(err, ';', 2, "energy-pkg:measurement", 6, field, sizeof(field)));
	assert_string_equal(field, "ms msrd CPU");
	assert_non_null(strstr(err, "# SIMULATED CPU"));
	assert_true(csv_field(err, ';', 2, "energy-pkg", 1, field, sizeof(field)));
	assert_string_equal(field, "Joules");
	assert_true(csv_field(err, ';', 2, "energy-pkg", 0, field, sizeof(field)));
	assert_true(strtod(field, NULL) > 0.0);
	assert_true(csv_field(err, ';', 2, "energy-pkg", 6, field, sizeof(field)));
	assert_string_equal(field, "W");
	assert_true(csv_field(err, ';', 2, "instructions", 4, field, sizeof(field)));
	assert_string_equal(field, "100.00");
	assert_true(csv_field(err, ';', 2, "instructions", 3, field, sizeof(field)));
	assert_true(strtod(field, NULL) > 0.0);
	assert_true(csv_field(err, ';', 2, "instructions", 6, field, sizeof(field)));
	assert_string_equal(field, "insn per cycle");
	/* Only the named domain. */
	assert_null(strstr(err, "energy-cores"));
	free(err);
	assert_int_equal(stat_run(per_socket, NULL, &err), 0);
	assert_true(check_csv(err, ',', 9, NULL) >= 4);
	assert_true(csv_field(err, ',', 4, "energy-pkg", 0, field, sizeof(field)));
	assert_string_equal(field, "S0");
	free(err);
}

static void test_interval(void **state)
{
	const char *arguments[] = { "-x", ",", "-I", "100", "-e", "RAPL_PP0,instructions", "--",
				    "sleep", "0.45", NULL };
	char *err = NULL;
	double last = 0.0;
	size_t slices = 0;

	(void)state;
	assert_int_equal(stat_run(arguments, NULL, &err), 0);
	for (const char *line = err; line != NULL && *line != '\0';) {
		const char *end = strchr(line, '\n');
		double stamp;
		char event[64];
		/* timestamp,value,unit,event,... */
		if (line[0] != '#' && sscanf(line, "%lf,%*[^,],%*[^,],%63[^,]", &stamp, event) == 2 &&
		    strcmp(event, "energy-cores") == 0) {
			assert_true(stamp > last);
			last = stamp;
			slices++;
		}
		line = end != NULL ? end + 1 : NULL;
	}
	fprintf(stderr, "%zu slices, last at %.3f s\n", slices, last);
	/* 0.45 s at 100 ms: four slices, fewer never below 2 (a loaded host may wake late). */
	assert_true(slices >= 2);
	assert_null(strstr(err, "energy-pkg"));
	free(err);
}

static void test_times_and_warning(void **state)
{
	const char *quick[] = { "--", "/bin/true", NULL };
	const char *slow[] = { "--", "sleep", "0.1", NULL };
	char *err = NULL;

	(void)state;
	assert_int_equal(stat_run(quick, NULL, &err), 0);
	assert_non_null(strstr(err, "seconds user"));
	assert_non_null(strstr(err, "seconds sys"));
	/* Fewer than 10 updates of ~0.976 ms: warned (a loaded host may make true slower). */
	if (stat_value_of(err, "seconds") < 0.00976)
		assert_non_null(strstr(err, "Warning: the command ran for"));
	else
		assert_null(strstr(err, "Warning"));
	free(err);
	assert_int_equal(stat_run(slow, NULL, &err), 0);
	assert_null(strstr(err, "Warning"));
	free(err);
}

static void test_output_opened_first(void **state)
{
	char marker[PATH_MAX + 32], script[PATH_MAX + 64];
	const char *arguments[] = { "-o", "/nonexistent/dir/report", "--", "/bin/sh", "-c", script,
				    NULL };
	char *err = NULL;

	(void)state;
	snprintf(marker, sizeof(marker), "%s/ran-despite-o", server.dir);
	snprintf(script, sizeof(script), "touch %s", marker);
	assert_int_equal(stat_run(arguments, NULL, &err), 125);
	assert_non_null(strstr(err, "cannot write /nonexistent/dir/report"));
	assert_int_not_equal(access(marker, F_OK), 0);
	free(err);
	/* A writable FILE is open while the command runs, but not in the command. */
	char report[PATH_MAX + 32];
	const char *writable[] = { "-o", report, "--", "/bin/sh", "-c", "ls -l /proc/$$/fd", NULL };
	char *out = NULL, *text;
	snprintf(report, sizeof(report), "%s/report.txt", server.dir);
	assert_int_equal(stat_run(writable, &out, &err), 0);
	assert_null(strstr(out, "report.txt"));
	text = harness_read_text(report, 1 << 16);
	assert_non_null(text);
	assert_non_null(strstr(text, "seconds time elapsed"));
	free(text);
	free(out);
	free(err);
}

static void test_list(void **state)
{
	char *out = NULL, *err = NULL;

	(void)state;
	assert_int_equal(stat_run((const char *[]){ "list", NULL }, &out, &err), 0);
	assert_non_null(strstr(out, "SIMULATED"));
	/* The backend behind what is listed (issue 24). */
	assert_non_null(strstr(out, "backend: msrd --backend sim\n"));
	/* ... and behind each entry: here msrd's simulated CPU counts and measures everything. */
	assert_non_null(strstr(out, "[Hardware event, via sim]\n"));
	assert_non_null(strstr(out, "[Kernel PMU event, package-wide energy (J), via sim]\n"));
	assert_null(strstr(out, "via perf broker"));
	/* Without msrd's perf broker the software and kernel PMU events are not counted here,
	 * and the list says why instead of listing them. */
	assert_null(strstr(out, "[Software event"));
	assert_null(strstr(out, "msr/tsc/ "));
	assert_non_null(strstr(out, "not counted here: msrd runs no perf broker"));
	assert_non_null(strstr(out, "instructions"));
	assert_non_null(strstr(out, "power/energy-pkg/"));
	assert_non_null(strstr(out, "power/energy-gpu/"));
	assert_null(strstr(out, "power/energy-ram/"));
	/* One blank line between sections, never two. */
	assert_null(strstr(out, "\n\n\n"));
	/* libpfm4's events of the model, each one -e can count: try the first. */
	const char *first = strstr(out, "[libpfm4 event of PMU snb, via sim]");
	assert_non_null(first);
	const char *line = first;
	while (line > out && line[-1] != '\n')
		line--;
	char event[96];
	assert_int_equal(sscanf(line, " %95s", event), 1);
	free(out);
	free(err);
	const char *count_it[] = { "-e", event, "--", "/bin/true", NULL };
	assert_int_equal(stat_run(count_it, NULL, &err), 0);
	assert_non_null(strstr(err, event));
	assert_null(strstr(err, "<not"));
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nproc_keeps_affinity),
		cmocka_unit_test(test_csv),
		cmocka_unit_test(test_interval),
		cmocka_unit_test(test_times_and_warning),
		cmocka_unit_test(test_output_opened_first),
		cmocka_unit_test(test_list),
	};

	return STAT_RUN_GROUP(tests);
}
