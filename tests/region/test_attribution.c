/*
 * Concurrent regions are charged per thread (seed 003 section 4), in every RAPL domain, and the
 * reports say where each region begins and hold the same numbers in every format.
 *
 * msrd runs the ideal simulated Sandy Bridge under a power trace: each domain draws a constant
 * power whatever the host does, and the simulator's ground truth gives it (P, per domain). Two
 * threads open concurrent regions on the one package: "heavy" spins throughout, "light" spins
 * a millisecond and sleeps two. By the method, a region whose thread used c ns of CPU time on a
 * package of N host CPUs is due P x c / N in each domain; each thread measures its own c
 * (CLOCK_THREAD_CPUTIME_ID between its markers, and around them: the markers' own time from the
 * begin's reading to the end's is the region's, which matters only under valgrind). Each
 * region's charge must be within 5 % of that in every domain, so the split between the two is
 * right; together they are charged less than the package drew, and the report shows the rest
 * (idle's: the light thread sleeps) as charged to no region.
 *
 * The Callgrind file names the file and line of each region's begin (fl= and the cost line)
 * and callgrind_annotate shows them; the CSV table is read field by field and the JSON document
 * by Python's strict json parser, and both carry exactly the numbers of the Callgrind file.
 */
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "hw/msr.h"
#include "tests/region/region_test.h"

#define DOMAINS 3
static const char *const domain_columns[DOMAINS] = { "energy-pkg", "energy-cores", "energy-gpu" };
static const char *const domain_events[DOMAINS] = { "Energy_pkg_nJ", "Energy_cores_nJ",
						     "Energy_gpu_nJ" };
static const unsigned domain_ids[DOMAINS] = { RAPL_DOMAIN_PKG, RAPL_DOMAIN_PP0, RAPL_DOMAIN_PP1 };
static const char power_trace[] = "pkg: 3600000 21\npp0: 3600000 13\npp1: 3600000 1.5\n";

struct worker {
	const char *name;
	unsigned busy_ms, idle_ms; /* a period: spin busy_ms, sleep idle_ms */
	uint64_t cpu_ns;           /* its CPU time between the markers */
	uint64_t marked_ns;        /* ... and with the markers (their own time is the region's
				    * from the begin's reading to the end's) */
	unsigned line;             /* of its haecer_region_begin */
	int error;
};

static pthread_barrier_t start_together;
static double seconds = 0.6;

static uint64_t clock_of(clockid_t clock)
{
	struct timespec now;

	clock_gettime(clock, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static volatile double sink;

static void spin_ms(unsigned ms)
{
	uint64_t end = clock_of(CLOCK_MONOTONIC) + ms * 1000000ull;
	double x = 1.0;

	while (clock_of(CLOCK_MONOTONIC) < end)
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 0.5;
	sink = x;
}

static void *work(void *argument)
{
	struct worker *worker = argument;
	uint64_t end;

	/* A thread's first begin opens its counters: done before, outside what is measured. */
	haecer_region_begin("warm-up");
	haecer_region_end("warm-up");
	pthread_barrier_wait(&start_together);
	uint64_t marked = clock_of(CLOCK_THREAD_CPUTIME_ID);
	worker->line = __LINE__; worker->error = haecer_region_begin(worker->name);
	uint64_t cpu = clock_of(CLOCK_THREAD_CPUTIME_ID);
	end = clock_of(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
	while (clock_of(CLOCK_MONOTONIC) < end) {
		spin_ms(worker->busy_ms);
		if (worker->idle_ms > 0)
			nanosleep(&(struct timespec){ .tv_nsec = worker->idle_ms * 1000000L }, NULL);
	}
	worker->cpu_ns = clock_of(CLOCK_THREAD_CPUTIME_ID) - cpu;
	if (worker->error == 0)
		worker->error = haecer_region_end(worker->name);
	worker->marked_ns = clock_of(CLOCK_THREAD_CPUTIME_ID) - marked;
	return NULL;
}

/* Watts of each domain from the simulator's ground truth between two of its readings. */
static void truth_watts(const struct haecer_sim_truth *before, const struct haecer_sim_truth *after,
			double *watts)
{
	for (int d = 0; d < DOMAINS; d++) {
		assert_true(after[d].now_ns > before[d].now_ns);
		watts[d] = (after[d].joules - before[d].joules) /
			   ((double)(after[d].now_ns - before[d].now_ns) / 1e9);
	}
}

static void read_truth(struct haecer_sim_truth *out)
{
	for (int d = 0; d < DOMAINS; d++)
		assert_int_equal(haecer_sim_energy_truth(sim, 0, domain_ids[d], &out[d]), 0);
}

/* ---- CSV, field by field ---- */

#define CSV_FIELDS 64

/* Split one RFC 4180 record at *at (quoted fields, "" inside quotes) into fields; advances. */
static size_t csv_record(const char **at, char fields[CSV_FIELDS][512])
{
	size_t count = 0;
	const char *p = *at;

	while (*p != '\0' && count < CSV_FIELDS) {
		size_t used = 0;
		if (*p == '"') {
			for (p++; *p != '\0'; p++) {
				if (*p == '"' && p[1] == '"')
					p++;
				else if (*p == '"')
					break;
				if (used < 511)
					fields[count][used++] = *p;
			}
			assert_int_equal(*p, '"');
			p++;
		} else {
			while (*p != ',' && *p != '\r' && *p != '\n' && *p != '\0')
				if (used < 511)
					fields[count][used++] = *p++;
		}
		fields[count++][used] = '\0';
		if (*p == ',') {
			p++;
			continue;
		}
		assert_true(*p == '\r' && p[1] == '\n'); /* records end in CRLF */
		p += 2;
		break;
	}
	*at = p;
	return count;
}

static size_t csv_column(char header[CSV_FIELDS][512], size_t count, const char *name)
{
	for (size_t i = 0; i < count; i++)
		if (strcmp(header[i], name) == 0)
			return i;
	fail_msg("no CSV column %s", name);
	return 0;
}

/* The CSV row of region `name`: every numeric field is a plain integer; the energy, time and
 * call fields are what the Callgrind file says. */
static void check_csv(const char *path, const struct cg_file *file, const struct worker *worker)
{
	static char header[CSV_FIELDS][512], row[CSV_FIELDS][512];
	char *text = region_read_text(path);
	const char *at = text;
	size_t columns, got;
	bool found = false;

	assert_non_null(text);
	columns = csv_record(&at, header);
	assert_true(columns > 9);
	assert_string_equal(header[0], "path");
	while (*at != '\0') {
		got = csv_record(&at, row);
		assert_int_equal(got, columns);
		for (size_t i = 9; i < columns; i++) {
			char *end;
			if (row[i][0] == '\0')
				continue;
			strtoull(row[i], &end, 10);
			assert_true(*end == '\0');
		}
		if (strcmp(row[csv_column(header, columns, "name")], worker->name) != 0)
			continue;
		found = true;
		assert_string_equal(row[csv_column(header, columns, "path")], worker->name);
		assert_non_null(strstr(row[csv_column(header, columns, "file")], "test_attribution.c"));
		assert_int_equal(atoi(row[csv_column(header, columns, "line")]), worker->line);
		assert_int_equal(atoi(row[csv_column(header, columns, "calls")]), 1);
		assert_non_null(strstr(row[csv_column(header, columns, "machine")], "simulated"));
		const struct cg_function *function = cg_find(file, worker->name);
		for (int d = 0; d < DOMAINS; d++) {
			char name[64];
			snprintf(name, sizeof(name), "%s_nJ", domain_columns[d]);
			assert_int_equal(strtoull(row[csv_column(header, columns, name)], NULL, 10),
					 function->self[cg_event(file, domain_events[d])]);
		}
		assert_int_equal(strtoull(row[csv_column(header, columns, "pkg-wide_nJ")], NULL, 10),
				 function->self[cg_event(file, "PkgWide_nJ")]);
		assert_int_equal(strtoull(row[csv_column(header, columns, "time_ns_self")], NULL, 10),
				 function->self[cg_event(file, "Time_ns")]);
	}
	assert_true(found);
	free(text);
}

/* ---- JSON through Python's strict parser ---- */

/* Python reads the document (strict: no NaN, no trailing commas, UTF-8) and prints, per region,
 * "name file line calls pkg cores gpu pkgwide" from its inclusive values. */
static const char json_reader[] =
	"import json, sys\n"
	"def no_constants(name):\n"
	"    raise ValueError('not JSON: ' + name)\n"
	"with open(sys.argv[1], encoding='utf-8') as f:\n"
	"    doc = json.load(f, parse_constant=no_constants)\n"
	"assert doc['simulated'] is True and 'simulated' in doc['machine']\n"
	"names = [c['name'] for c in doc['columns']]\n"
	"for want in ('time', 'energy-pkg', 'energy-cores', 'energy-gpu', 'pkg-wide'):\n"
	"    assert want in names, want\n"
	"tops = [r for r in doc['regions'] if len(r['path']) == 1]\n"
	"for name in ('energy-pkg', 'energy-cores', 'energy-gpu'):\n"
	"    span = doc['span'][name]\n"
	"    assert span['charged_nJ'] == sum(r['inclusive'][name] for r in tops), span\n"
	"    assert span['rest_nJ'] == span['package_nJ'] - span['charged_nJ'] > 0, span\n"
	"for r in doc['regions']:\n"
	"    v = r['inclusive']\n"
	"    assert r['path'] == [r['name']]\n"
	"    print(r['name'], r['file'], r['line'], r['calls'], v['energy-pkg'], "
	"v['energy-cores'], v['energy-gpu'], v['pkg-wide'])\n";

static void check_json(const char *path, const struct cg_file *file, const struct worker *worker)
{
	const char *argv[] = { "/usr/bin/python3", "-c", json_reader, path, NULL };
	char *out = NULL, *err = NULL, pattern[64];
	unsigned long long values[4];
	char source[512];
	unsigned line, calls;

	assert_int_equal(access(argv[0], X_OK), 0);
	int status = harness_run(argv, &out, &err);
	if (status != 0)
		fprintf(stderr, "python3 json: %s\n", err);
	assert_int_equal(status, 0);
	snprintf(pattern, sizeof(pattern), "%s ", worker->name);
	const char *row = strstr(out, pattern);
	assert_non_null(row);
	assert_int_equal(sscanf(row + strlen(pattern), "%511s %u %u %llu %llu %llu %llu", source,
				&line, &calls, &values[0], &values[1], &values[2], &values[3]),
			 7);
	assert_non_null(strstr(source, "test_attribution.c"));
	assert_int_equal(line, worker->line);
	assert_int_equal(calls, 1);
	const struct cg_function *function = cg_find(file, worker->name);
	for (int d = 0; d < DOMAINS; d++)
		assert_int_equal(values[d], function->self[cg_event(file, domain_events[d])]);
	assert_int_equal(values[3], function->self[cg_event(file, "PkgWide_nJ")]);
	free(out);
	free(err);
}

/* ---- Callgrind: file and line ---- */

/* `fl=(id) ...test_attribution.c`, then `fn=(id) NAME`, then a cost line at the begin's line. */
static void check_callgrind_position(const char *path, const struct worker *worker)
{
	char *text = region_read_text(path), pattern[64];

	assert_non_null(text);
	snprintf(pattern, sizeof(pattern), ") %s\n", worker->name);
	const char *fn = strstr(text, pattern);
	assert_non_null(fn);
	while (fn > text && strncmp(fn, "\nfn=(", 5) != 0)
		fn--;
	const char *fl = fn;
	while (fl > text && strncmp(fl, "\nfl=(", 5) != 0)
		fl--;
	assert_true(strncmp(fl, "\nfl=(", 5) == 0);
	const char *fl_end = strchr(fl + 1, '\n');
	assert_true(fl_end == fn);
	/* fl=(1) tests/region/test_attribution.c, or fl=(1) when named before */
	assert_non_null(strstr(text, "test_attribution.c\n"));
	const char *costs = strchr(fn + 1, '\n') + 1;
	assert_int_equal(atoi(costs), worker->line);
	free(text);
}

static void test_concurrent_regions_split_by_cpu_time(void **state)
{
	const char *report = region_report_path("split.txt", "");
	const char *callgrind = region_report_path("split.txt", ".callgrind");
	struct worker workers[2] = { { .name = "heavy", .busy_ms = 5, .idle_ms = 0 },
				     { .name = "light", .busy_ms = 1, .idle_ms = 2 } };
	struct haecer_sim_truth before[DOMAINS], after[DOMAINS];
	double watts[DOMAINS], host_cpus = (double)sysconf(_SC_NPROCESSORS_CONF);
	pthread_t threads[2];
	struct cg_file file;
	char *text;

	(void)state;
	if (harness_small_scale())
		seconds = 0.3;
	assert_int_equal(haecer_sim_power_trace(sim, power_trace), 0);
	read_truth(before);
	assert_int_equal(pthread_barrier_init(&start_together, NULL, 2), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&threads[i], NULL, work, &workers[i]), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(pthread_join(threads[i], NULL), 0);
		if (workers[i].error < 0)
			fprintf(stderr, "%s: %s\n", workers[i].name, haecer_error_detail());
		assert_int_equal(workers[i].error, 0);
	}
	pthread_barrier_destroy(&start_together);
	read_truth(after);
	truth_watts(before, after, watts);
	region_expect(haecer_region_report(report), "report");
	text = region_read_text(report);
	assert_non_null(text);
	fprintf(stderr, "%s", text);
	assert_non_null(strstr(text, "simulated sandybridge"));
	assert_non_null(strstr(text, "+-J/call"));
	/* Idle's part (the light thread sleeps) is shown and charged to no one. */
	assert_non_null(strstr(text, "J the rest"));
	assert_non_null(strstr(text, "no region is charged with it"));
	free(text);

	cg_read(callgrind, &file);
	for (int i = 0; i < 2; i++) {
		const struct cg_function *function = cg_find(&file, workers[i].name);
		for (int d = 0; d < DOMAINS; d++) {
			double charged = (double)function->self[cg_event(&file, domain_events[d])] / 1e9;
			double due = watts[d] * (double)workers[i].cpu_ns / 1e9 / host_cpus;
			double due_marked = watts[d] * (double)workers[i].marked_ns / 1e9 / host_cpus;
			fprintf(stderr, "%-6s %-13s CPU %.3f s (%.3f s with the markers): charged "
				"%.4f J, due %.4f..%.4f J (%.3f W / %.0f CPUs)\n", workers[i].name,
				domain_columns[d], (double)workers[i].cpu_ns / 1e9,
				(double)workers[i].marked_ns / 1e9, charged, due, due_marked,
				watts[d], host_cpus);
			assert_true(charged >= 0.95 * due && charged <= 1.05 * due_marked);
		}
		/* Concurrent regions together get less than the package drew: idle's part is
		 * no one's. */
		double pkg_wide = (double)function->self[cg_event(&file, "PkgWide_nJ")];
		double both = (double)(cg_find(&file, "heavy")->self[cg_event(&file, domain_events[0])] +
				       cg_find(&file, "light")->self[cg_event(&file, domain_events[0])]);
		assert_true(both < pkg_wide * 1.01);
	}
	cg_annotate_accepts(callgrind, "test_attribution.c:heavy");
	for (int i = 0; i < 2; i++) {
		check_callgrind_position(callgrind, &workers[i]);
		check_csv(region_report_path("split.txt", ".csv"), &file, &workers[i]);
		check_json(region_report_path("split.txt", ".json"), &file, &workers[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_concurrent_regions_split_by_cpu_time),
	};
	const char *extra[] = { "--sim-ideal", NULL };

	return REGION_RUN_GROUP(extra, tests);
}
