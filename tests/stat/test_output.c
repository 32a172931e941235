/*
 * What haecer-stat reports: the perf-stat-like table (every energy domain of the simulated
 * Sandy Bridge with joules > 0 and watts, instructions and cycles, the elapsed time, where it
 * counted and that energy is package-wide) on stderr, leaving the command's stdout alone; the
 * command pinned to --cpu and not pinned with -a; and --json, which python's json.tool accepts
 * and whose statistics python's statistics module recomputes from the per-run samples; every
 * energy total with its +- and what measuring it cost (text and JSON).
 */
#include <sched.h>

#include "tests/stat/stat_test.h"

static const char busy_loop[] = "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done";

static void test_table(void **state)
{
	const char *arguments[] = { "--", "/bin/sh", "-c", "echo hello; i=0; while [ $i -lt 20000 ]; "
				    "do i=$((i+1)); done", NULL };
	static const char *const fields[] = { "Energy and counter stats for '/bin/sh -c echo hello",
					      "energy-pkg", "energy-cores", "energy-gpu",
					      " W", "instructions", "cycles",
					      "seconds time elapsed", "seconds user", "seconds sys",
					      "Counted on every CPU the command may run on",
					      "Energy is package-wide",
					      /* issue 23: each energy total's +- and cost */
					      "Energy per run: what it can be off by",
					      "energy-pkg \xc2\xb1 ", " J  measurement ", "msrd CPU " };
	char *out = NULL, *err = NULL;

	(void)state;
	assert_int_equal(stat_run(arguments, &out, &err), 0);
	assert_string_equal(out, "hello\n");
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (strstr(err, fields[i]) == NULL)
			fail_msg("no '%s' in the report", fields[i]);
	assert_true(stat_value_of(err, "energy-pkg") > 0.0);
	assert_true(stat_value_of(err, "energy-cores") > 0.0);
	assert_true(stat_value_of(err, "seconds") > 0.0);
	assert_null(strstr(err, "<not counted>"));
	free(out);
	free(err);
}

/* The CPUs the command may run on, as it sees them. */
static char *allowed_cpus(const char *const *options, char **err)
{
	const char *arguments[8];
	size_t count = 0;
	char *out = NULL;

	for (size_t i = 0; options[i] != NULL; i++)
		arguments[count++] = options[i];
	arguments[count++] = "--";
	arguments[count++] = "/bin/grep";
	arguments[count++] = "Cpus_allowed_list";
	arguments[count++] = "/proc/self/status";
	arguments[count] = NULL;
	assert_int_equal(stat_run(arguments, &out, err), 0);
	return out;
}

/* Our own Cpus_allowed_list line, which a command not pinned inherits. */
static void own_allowed_cpus(char *line, size_t size)
{
	FILE *in = fopen("/proc/self/status", "r");

	assert_non_null(in);
	line[0] = '\0';
	while (fgets(line, (int)size, in) != NULL && strncmp(line, "Cpus_allowed_list:", 18) != 0)
		;
	fclose(in);
	assert_int_equal(strncmp(line, "Cpus_allowed_list:", 18), 0);
}

static void test_pinned_or_all(void **state)
{
	char *out, *err = NULL, expected[256], cpu_text[16];
	cpu_set_t mine;
	int last = -1;

	(void)state;
	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &mine))
			last = cpu;
	snprintf(cpu_text, sizeof(cpu_text), "%d", last);
	out = allowed_cpus((const char *[]){ "--cpu", cpu_text, NULL }, &err);
	snprintf(expected, sizeof(expected), "Cpus_allowed_list:\t%d\n", last);
	assert_string_equal(out, expected);
	snprintf(expected, sizeof(expected), "Counted on CPU %d ", last);
	assert_non_null(strstr(err, expected));
	free(out);
	free(err);
	/* -a: the command keeps our affinity, and every CPU of the model (4) is counted. */
	out = allowed_cpus((const char *[]){ "-a", "--json", NULL }, &err);
	own_allowed_cpus(expected, sizeof(expected));
	assert_string_equal(out, expected);
	assert_non_null(strstr(err, "\"all_cpus\": true"));
	assert_non_null(strstr(err, "\"cpus\": 4,"));
	assert_non_null(strstr(err, "\"counters\": 4, \"wanted\": 4"));
	free(out);
	free(err);
}

/* python3: the statistics of every counted metric, the elapsed time and the power follow from
 * their samples (statistics.mean / stdev, an independent implementation). */
static const char check_statistics[] =
	"import json, math, statistics, sys\n"
	"report = json.load(open(sys.argv[1]))\n"
	"runs = report['runs']\n"
	"assert runs == 3, runs\n"
	"def close(a, b):\n"
	"    assert abs(a - b) <= 1e-9 * max(1.0, abs(b)), (a, b)\n"
	"def check(s):\n"
	"    xs = s['samples']\n"
	"    assert len(xs) == runs, xs\n"
	"    mean, sd = statistics.mean(xs), statistics.stdev(xs)\n"
	"    close(s['mean'], mean)\n"
	"    close(s['stddev'], sd)\n"
	"    close(s['stderr'], sd / math.sqrt(runs))\n"
	"    close(s['relative_stddev_percent'], 100 * sd / abs(mean) if mean else 0.0)\n"
	"    assert s['min'] == min(xs) and s['max'] == max(xs)\n"
	"check(report['elapsed'])\n"
	"counted = [m for m in report['metrics'] if m['counted']]\n"
	"names = [m['name'] for m in counted]\n"
	"for name in ('energy-pkg', 'energy-cores', 'instructions', 'cycles'):\n"
	"    assert name in names, names\n"
	"for m in counted:\n"
	"    check(m)\n"
	"    if m['kind'] == 'energy':\n"
	"        assert m['mean'] > 0, m\n"
	"        check(m['power'])\n"
	"        for joules, watts, seconds in zip(m['samples'], m['power']['samples'],\n"
	"                                          report['elapsed']['samples']):\n"
	"            close(watts, joules / seconds)\n"
	/* issue 23: the total's +- (a difference of two readings: at least an update interval
	 * at the run's own power) and what measuring cost (msrd's CPU: at least the two reads'
	 * round trips; without a page its energy is an estimate whose +- is itself) */
	"        assert m['uncertainty'] >= m['power']['min'] * 1e-3, m\n"
	"        assert m['measurement_cpu_ns'] > 0, m\n"
	"        assert m['measurement_joules'] >= 0, m\n"
	"        assert m['measurement_uncertainty_joules'] >= 0, m\n"
	"        if not m['measurement_pages_known']:\n"
	"            close(m['measurement_uncertainty_joules'], m['measurement_joules'])\n"
	"print('statistics ok:', ', '.join(names))\n";

static void test_json_statistics(void **state)
{
	char path[PATH_MAX + 32];
	const char *arguments[] = { "-r", "3", "--json", "-o", path, "--", "/bin/sh", "-c",
				    busy_loop, NULL };
	const char *json_tool[] = { "/usr/bin/python3", "-m", "json.tool", path, NULL };
	const char *statistics[] = { "/usr/bin/python3", "-c", check_statistics, path, NULL };
	char *out = NULL, *err = NULL;

	(void)state;
	snprintf(path, sizeof(path), "%s/stat.json", server.dir);
	assert_int_equal(stat_run(arguments, NULL, &err), 0);
	assert_string_equal(err, "");
	free(err);
	assert_int_equal(harness_run(json_tool, NULL, &err), 0);
	free(err);
	assert_int_equal(harness_run(statistics, &out, &err), 0);
	fprintf(stderr, "%s%s", out, err);
	assert_non_null(strstr(out, "statistics ok"));
	free(out);
	free(err);
}

static void test_repeat_table(void **state)
{
	const char *arguments[] = { "-r", "3", "--", "/bin/sh", "-c", busy_loop, NULL };
	char *err = NULL;

	(void)state;
	assert_int_equal(stat_run(arguments, NULL, &err), 0);
	assert_non_null(strstr(err, "(3 runs)"));
	assert_non_null(strstr(err, "( +- "));
	assert_non_null(strstr(err, " +- "));
	assert_non_null(strstr(err, "seconds time elapsed  ( +- "));
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_pinned_or_all),
		cmocka_unit_test(test_json_statistics),
		cmocka_unit_test(test_repeat_table),
	};

	return STAT_RUN_GROUP(tests);
}
