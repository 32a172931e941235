/*
 * haecer-mon serve's per-process and per-cgroup energy series (tools/mon/serve_attribution.c)
 * in front of a real msrd on the simulated Sandy Bridge, two real processes running (one busy,
 * one mostly asleep) and a real Prometheus scraping:
 *  - both processes get a haecer_process_energy_joules_total series; the busy one's dominates,
 *    and the two energies are in the ratio of the CPU time the kernel counted for them (within
 *    a factor of 2: the snapshots and the CPU-time readings are up to one interval apart);
 *  - cgroups + idle add up to the package energy the attribution split, within the stated ±
 *    (haecer_attribution_error_joules_total{kind="cgroup_bound"}), idle + other do not exceed it;
 *  - Prometheus scrapes the series, and every query of dist/grafana-haecer-energy.json
 *    answers;
 *  - --top 2 --cgroup-depth 0: exactly two process series and one cgroup series ("/"), which
 *    does not go back when a process exits;
 *  - two real cgroups made under the cgroup v2 mount (test_real_cgroups): top --by cgroup and
 *    --by service, serve's cgroup series at two depths and in agreement with top --by cgroup,
 *    a short-lived process in its cgroup's series, a removed cgroup's series that does not go
 *    back and goes once --cgroup-retention is up, and Prometheus scraping them.
 * Named *energy* so scripts/run-tests.sh runs it alone (it measures CPU time).
 */
#include "tests/mon/prometheus_test.h"

#include <sys/prctl.h>
#include <sys/stat.h>

#include "attribution/attribution.h"
#include "common/clock.h"
#include "harness/text_file.h"
#include "tests/lib/msrd_group.h"

static struct msrd_server server;
static pid_t children[3];

static pid_t start_child(unsigned slot, uint64_t spin_ns, useconds_t sleep_us)
{
	pid_t pid = harness_start_duty_cycle(spin_ns, sleep_us);

	assert_true(pid > 0);
	children[slot] = pid;
	return pid;
}

static void stop_children(void)
{
	for (unsigned i = 0; i < 3; i++)
		if (children[i] > 0) {
			kill(children[i], SIGKILL);
			waitpid(children[i], NULL, 0);
			children[i] = 0;
		}
}

/* CPU time of pid in ns: the first field of /proc/PID/schedstat. */
static double cpu_ns(pid_t pid)
{
	char path[64];
	double ns = NAN;
	FILE *file;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	file = fopen(path, "r");
	assert_non_null(file);
	assert_int_equal(fscanf(file, "%lf", &ns), 1);
	fclose(file);
	return ns;
}

static unsigned start_serve_kept(struct proc *serve, const char *top, const char *depth,
				 const char *retention)
{
	const char *arguments[] = { "serve",	      "--listen",	"127.0.0.1:0", "--interval",
				    "500",	      "--top",		top,	       "--cgroup-depth",
				    depth,	      "--cgroup-retention", retention,  NULL };
	char line[128];
	unsigned port = 0;

	mon_start(serve, server.socket_path, arguments);
	serve_test_running = serve->pid;
	assert_true(read_line(serve->out, line, sizeof(line), MON_TEST_TIMEOUT_MS));
	assert_int_equal(sscanf(line, "listening on 127.0.0.1:%u", &port), 1);
	return port;
}

static unsigned start_serve(struct proc *serve, const char *top, const char *depth)
{
	return start_serve_kept(serve, top, depth, "300");
}

/* The scrape's body (malloc'ed) once it has the series `wanted`. */
static char *scrape_with(unsigned port, const char *wanted)
{
	for (int round = 0; round < 200; round++) {
		struct http_reply reply;
		http_get(port, "/metrics", NULL, &reply);
		assert_int_equal(reply.code, 200);
		if (strstr(reply.body, wanted) != NULL) {
			char *body = strdup(reply.body);
			free(reply.text);
			return body;
		}
		free(reply.text);
		usleep(100000);
	}
	fail_msg("no %s in serve's answer", wanted);
	return NULL;
}

/* Seconds until serve's answer no longer has the series `gone`. */
static double scrape_until_gone(unsigned port, const char *gone)
{
	uint64_t start = clock_monotonic_ns();
	for (int round = 0; round < 200; round++) {
		struct http_reply reply;
		http_get(port, "/metrics", NULL, &reply);
		assert_int_equal(reply.code, 200);
		bool there = strstr(reply.body, gone) != NULL;
		free(reply.text);
		if (!there)
			return (double)(clock_monotonic_ns() - start) / 1e9;
		usleep(100000);
	}
	fail_msg("%s stays in serve's answer", gone);
	return 0;
}

/* The sum of every sample of family `prefix` ("name{"), and how many there were. */
static double sum_samples(const char *body, const char *prefix, unsigned *count)
{
	double sum = 0;

	*count = 0;
	for (const char *line = strstr(body, prefix); line != NULL;
	     line = strstr(line + 1, prefix)) {
		if (line != body && line[-1] != '\n')
			continue;
		const char *value = strchr(line, '}');
		assert_non_null(value);
		sum += strtod(value + 2, NULL);
		(*count)++;
	}
	return sum;
}

static double process_joules(const char *body, pid_t pid)
{
	char prefix[64];
	unsigned count;
	double joules;

	snprintf(prefix, sizeof(prefix), "haecer_process_energy_joules_total{pid=\"%d\",", (int)pid);
	joules = sum_samples(body, prefix, &count);
	assert_int_equal(count, 1);
	return joules;
}

/* A Prometheus query's value, waiting until it has one. */
static double prometheus_value(const char *query)
{
	for (int round = 0; round < 300; round++) {
		char *answer = prometheus_get("/api/v1/query", query);
		double value = query_value(answer);
		free(answer);
		if (!isnan(value))
			return value;
		usleep(200000);
	}
	fail_msg("Prometheus has no value for %s", query);
	return NAN;
}

/* Every "expr" of the shipped Grafana dashboard must answer with a value in Prometheus. */
static void check_dashboard(void)
{
	char path[PATH_MAX], query[1024];
	char *json;
	unsigned checked = 0;

	snprintf(path, sizeof(path), "%s/dist/grafana-haecer-energy.json", harness_source_dir());
	json = harness_read_text(path, 1 << 20);
	assert_non_null(json);
	for (const char *expr = strstr(json, "\"expr\": \""); expr != NULL;
	     expr = strstr(expr + 1, "\"expr\": \"")) {
		size_t length = 0;
		const char *c = expr + 9;
		length = (size_t)snprintf(query, sizeof(query), "query=");
		for (; *c != '"' && length + 1 < sizeof(query); c++) {
			if (*c == '\\')
				c++; /* JSON's \" */
			query[length++] = *c;
		}
		query[length] = '\0';
		double value = prometheus_value(query);
		fprintf(stderr, "dashboard %s = %g\n", query + 6, value);
		assert_true(value >= 0);
		checked++;
	}
	assert_true(checked >= 6);
	free(json);
}

/* The one sample of `prefix` in body. */
static double sample(const char *body, const char *prefix)
{
	unsigned count;
	double value = sum_samples(body, prefix, &count);

	assert_int_equal(count, 1);
	return value;
}

static double package_total(const char *body)
{
	return sample(body, "haecer_attributed_package_energy_joules_total{");
}

static double cgroup_bound(const char *body)
{
	return sample(body, "haecer_attribution_error_joules_total{kind=\"cgroup_bound\"");
}

/* idle + other, what no process was charged, within the package; with cgroup v2, cgroups + idle
 * = package within the cgroup bound (the cgroups come from cpu.stat, the split from PROC/stat). */
static void check_sums(const char *body)
{
	unsigned count;
	double cgroups = sum_samples(body, "haecer_cgroup_energy_joules_total{", &count);
	double idle = sample(body, "haecer_unattributed_energy_joules_total{to=\"idle\"");
	double other = sample(body, "haecer_unattributed_energy_joules_total{to=\"other\"");
	double package = package_total(body);

	fprintf(stderr, "package %.3f J: cgroups %.3f + idle %.3f; other %.3f\n", package, cgroups,
		idle, other);
	assert_true(package > 0);
	assert_true(idle + other <= package * (1 + 1e-9));
	if (count == 0)
		return; /* no cgroup v2: no cgroup series */
	double bound = cgroup_bound(body);
	fprintf(stderr, "cgroups + idle - package = %.3f J, ± %.3f\n", cgroups + idle - package,
		bound);
	assert_true(fabs(cgroups + idle - package) <= bound + 1e-6 * package);
}

/* The group's one Prometheus made to scrape port: started by the first test that needs it,
 * reloaded with the new target by the next. */
static void scrape_by_prometheus(unsigned port)
{
	if (prometheus_pid > 0) {
		retarget_prometheus(port);
		return;
	}
	snprintf(directory, sizeof(directory), "%s", "/tmp/haecer-prometheus-XXXXXX");
	assert_non_null(mkdtemp(directory));
	prometheus_pid = start_prometheus(port);
}

static void test_busy_dominates(void **state)
{
	pid_t busy = start_child(0, 50000000, 0), sleepy = start_child(1, 1000000, 99000);
	double busy_cpu = cpu_ns(busy), sleepy_cpu = cpu_ns(sleepy);
	char query[128], busy_series[96];
	struct proc serve;
	unsigned port;

	(void)state;
	port = start_serve(&serve, "100000", "3");
	scrape_by_prometheus(port);
	wait_ready();
	snprintf(busy_series, sizeof(busy_series), "haecer_process_energy_joules_total{pid=\"%d\",",
		 (int)busy);
	free(scrape_with(port, busy_series));
	busy_cpu = cpu_ns(busy) - busy_cpu;
	sleepy_cpu = cpu_ns(sleepy) - sleepy_cpu;
	sleep(4);
	char *body = scrape_with(port, busy_series);
	double busy_j = process_joules(body, busy), sleepy_j = process_joules(body, sleepy);
	busy_cpu = cpu_ns(busy) - busy_cpu;
	sleepy_cpu = cpu_ns(sleepy) - sleepy_cpu;
	double ratio = (busy_j / sleepy_j) / (busy_cpu / sleepy_cpu);
	fprintf(stderr, "busy %.3f J / %.0f ms CPU, sleepy %.4f J / %.1f ms CPU: ratio %.2f\n",
		busy_j, busy_cpu / 1e6, sleepy_j, sleepy_cpu / 1e6, ratio);
	assert_true(busy_j > 5 * sleepy_j && sleepy_j > 0);
	assert_true(ratio > 0.5 && ratio < 2);
	check_sums(body);
	free(body);
	snprintf(query, sizeof(query), "query=haecer_process_energy_joules_total{pid=\"%d\"}",
		 (int)busy);
	double busy_prometheus = prometheus_value(query);
	snprintf(query, sizeof(query), "query=haecer_process_energy_joules_total{pid=\"%d\"}",
		 (int)sleepy);
	assert_true(busy_prometheus > 5 * prometheus_value(query));
	assert_true(prometheus_value("query=sum(haecer_cgroup_energy_joules_total)") > 0);
	check_dashboard();
	stop_children();
	serve_stop(&serve, NULL);
}

static void test_bounded(void **state)
{
	struct proc serve;
	unsigned port, count;
	double before, after;

	(void)state;
	start_child(2, 20000000, 10000);
	port = start_serve(&serve, "2", "0");
	/* Until "/" has been charged (its first intervals may pass before the children ran on a
	 * busy host): a counter still at 0 could not show that it never goes back. */
	for (int round = 0;; round++) {
		char *body = scrape_with(port, "haecer_process_energy_joules_total{");
		sum_samples(body, "haecer_process_energy_joules_total{", &count);
		assert_int_equal(count, 2);
		before = sum_samples(body, "haecer_cgroup_energy_joules_total{cgroup=\"/\"", &count);
		assert_int_equal(count, 1);
		sum_samples(body, "haecer_cgroup_energy_joules_total{", &count);
		assert_int_equal(count, 1);
		free(body);
		if (before > 0 || round == 100)
			break;
		usleep(100000);
	}
	assert_true(before > 0);
	stop_children(); /* its joules fold into "/": the counter must not go back */
	usleep(1200000);
	char *body = scrape_with(port, "haecer_cgroup_energy_joules_total{");
	after = sum_samples(body, "haecer_cgroup_energy_joules_total{cgroup=\"/\"", &count);
	assert_int_equal(count, 1);
	assert_true(after >= before);
	free(body);
	serve_stop(&serve, NULL);
}

/* ---- real cgroups under the cgroup v2 mount (issue 25 items 1-2) ---- */

/* The test's cgroups under the v2 mount: a slice, a service with the busy process one level
 * deeper (worker: the unit is still the service's), and a scope with the sleepy one. */
enum { SLICE, BUSY_UNIT, BUSY, SLEEPY, CGROUPS };
static char cgroup_dirs[CGROUPS][PATH_MAX];
static char cgroup_paths[CGROUPS][ATTRIBUTION_CGROUP_MAX]; /* as /proc/PID/cgroup has them */
static unsigned cgroups_made;

/* Children first, after their processes are gone: rmdir fails on a cgroup with a process. */
static void remove_cgroups(void)
{
	stop_children();
	while (cgroups_made > 0) {
		const char *dir = cgroup_dirs[--cgroups_made];
		if (rmdir(dir) != 0 && errno != ENOENT)
			fprintf(stderr, "could not remove %s: %s\n", dir, strerror(errno));
	}
}

/* mkdir each cgroup; NULL, or why it cannot (the caller skips). */
static const char *make_cgroups(char *why, size_t size)
{
	static const char *const parents[CGROUPS] = { "", "/haecer-test-%d.slice",
						      "/haecer-test-%d.slice", "/haecer-test-%d.slice" };
	static const char *const names[CGROUPS] = { "/haecer-test-%d.slice",
						    "/haecer-demo-%d.service",
						    "/haecer-demo-%d.service/worker",
						    "/haecer-idle-%d.scope" };
	struct attribution *engine;
	char parent[128], name[128];

	assert_int_equal(attribution_open(&engine, NULL), 0);
	const char *root = attribution_cgroup_root(engine);
	if (root[0] == '\0')
		snprintf(why, size, "no cgroup2 file system in /proc/self/mountinfo");
	for (unsigned i = 0; root[0] != '\0' && i < CGROUPS; i++) {
		snprintf(parent, sizeof(parent), parents[i], (int)getpid());
		snprintf(name, sizeof(name), names[i], (int)getpid());
		snprintf(cgroup_paths[i], sizeof(cgroup_paths[i]), "%s%s", parent, name);
		snprintf(cgroup_dirs[i], sizeof(cgroup_dirs[i]), "%.3000s%s", root, cgroup_paths[i]);
		if (mkdir(cgroup_dirs[i], 0755) != 0) {
			snprintf(why, size, "cannot create %.3000s: %s", cgroup_dirs[i],
				 strerror(errno));
			break;
		}
		cgroups_made++;
	}
	attribution_close(engine);
	return cgroups_made == CGROUPS ? NULL : why;
}

static void move_to(pid_t pid, unsigned cgroup)
{
	char path[PATH_MAX + 16], text[32];
	int length = snprintf(text, sizeof(text), "%d\n", (int)pid);
	int fd;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup_dirs[cgroup]);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, (size_t)length), length);
	close(fd);
}

/* The cgroup's cpu.stat usage_usec. */
static double usage_usec(unsigned cgroup)
{
	char path[PATH_MAX + 16];
	char *text;
	double usec;

	snprintf(path, sizeof(path), "%s/cpu.stat", cgroup_dirs[cgroup]);
	text = harness_read_text(path, 4096);
	assert_non_null(text);
	assert_non_null(strstr(text, "usage_usec "));
	usec = strtod(strstr(text, "usage_usec ") + 11, NULL);
	free(text);
	return usec;
}

/* The watts of `top --by BY` summed over its sets for the rows named busy and sleepy, and the
 * [other] row's watts and stated ± (summed too); every set must have both rows. */
struct by_rows {
	double busy, sleepy, other, other_error, all;
	unsigned sets;
	unsigned root_rows; /* "/" by cgroup, "[no unit]" by service: init's and the kernel's */
};

/* `top --by BY` on ring 7.MINOR (one the policy grants), started; parse_top_by reads it. */
static void start_top_by(struct proc *top, const char *by, const char *minor)
{
	const char *arguments[] = { "top", "--by", by, "--interval", "300", "--count", "3",
				    "--format", "csv", "7", minor, NULL };

	mon_start(top, server.socket_path, arguments);
}

static void parse_top_by(struct proc *top, const char *by, const char *busy, const char *sleepy,
			 struct by_rows *rows)
{
	char *out = NULL, *err = NULL, *save = NULL, *line, header[64];
	unsigned busy_rows = 0, sleepy_rows = 0;

	*rows = (struct by_rows){ 0 };
	if (proc_finish(top, &out, &err, MON_TEST_TIMEOUT_MS) != 0)
		fail_msg("top --by %s failed: %s", by, err != NULL ? err : "");
	snprintf(header, sizeof(header), "seconds,%s,watts,watts_error,source", by);
	line = strtok_r(out, "\n", &save);
	assert_non_null(line);
	assert_string_equal(line, header);
	while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
		double seconds, watts, error;
		char name[PATH_MAX], source[32];
		if (sscanf(line, "%lf,%4095[^,],%lf,%lf,%31s", &seconds, name, &watts, &error,
			   source) != 5)
			fail_msg("unparsable row: %s", line);
		assert_string_equal(source, "simulated");
		assert_true(error >= 0);
		if (strcmp(by, "service") == 0)
			assert_null(strchr(name, '/')); /* units' names, worker's in its service's */
		rows->all += watts;
		if (strcmp(name, busy) == 0) {
			rows->busy += watts;
			busy_rows++;
		} else if (strcmp(name, sleepy) == 0) {
			rows->sleepy += watts;
			sleepy_rows++;
		} else if (strcmp(name, strcmp(by, "service") == 0 ? "[no unit]" : "/") == 0) {
			rows->root_rows++;
		} else if (strcmp(name, "[other]") == 0) {
			rows->other += watts;
			rows->other_error += error;
			rows->sets++;
		} else {
			assert_true(watts >= 0);
		}
	}
	fprintf(stderr, "--by %s: %s %.3f W, %s %.4f W, [other] %.3f ± %.3f W, all %.3f W\n", by,
		busy, rows->busy / 3, sleepy, rows->sleepy / 3, rows->other / 3,
		rows->other_error / 3, rows->all / 3);
	assert_int_equal(rows->sets, 3);
	assert_int_equal(busy_rows, 3);
	assert_int_equal(sleepy_rows, 3);
	assert_int_equal(rows->root_rows, 3);
	free(out);
	free(err);
}

/* The busy cgroup's watts over the sleepy one's, against their cpu.stat usage: within a factor
 * of 2 (the runs' first interval only sets the engine up); cgroups + idle + other = package,
 * [other] within its stated ±. */
static void check_by(const struct by_rows *rows, double busy_usec, double sleepy_usec)
{
	double ratio = (rows->busy / rows->sleepy) / (busy_usec / sleepy_usec);

	fprintf(stderr, "cpu.stat: busy %.0f ms, sleepy %.1f ms: ratio %.2f\n", busy_usec / 1e3,
		sleepy_usec / 1e3, ratio);
	assert_true(rows->sleepy > 0 && rows->busy > 5 * rows->sleepy);
	assert_true(ratio > 0.5 && ratio < 2);
	assert_true(fabs(rows->other) <= rows->other_error + 1e-9);
}

/* The first scrape of port whose package total is not `after`'s (a tick later than it). */
static char *scrape_next_tick(unsigned port, const char *after)
{
	double before = package_total(after);

	for (int round = 0; round < 400; round++) {
		struct http_reply reply;
		http_get(port, "/metrics", NULL, &reply);
		assert_int_equal(reply.code, 200);
		char *body = strdup(reply.body);
		free(reply.text);
		if (package_total(body) != before)
			return body;
		free(body);
		usleep(25000);
	}
	fail_msg("serve's figures did not move");
	return NULL;
}

static double cgroup_joules(const char *body, const char *path);

/* The busy cgroup's share of the package energy in top --by cgroup's sets against serve's over
 * about the same time: within the two stated ± (each as a share of its package energy). */
static void check_serve_agrees(const struct by_rows *rows, const char *before, const char *after)
{
	double package = package_total(after) - package_total(before);
	double serve = (cgroup_joules(after, cgroup_paths[BUSY]) -
			cgroup_joules(before, cgroup_paths[BUSY])) / package;
	double serve_error = (cgroup_bound(after) - cgroup_bound(before)) / package;
	double top = rows->busy / rows->all, top_error = rows->other_error / rows->all;

	fprintf(stderr, "busy cgroup's share: serve %.3f ± %.3f, top --by cgroup %.3f ± %.3f\n",
		serve, serve_error, top, top_error);
	assert_true(fabs(serve - top) <= serve_error + top_error);
}

/* --by cgroup and --by service side by side, over the same interval of cpu.stat, and serve's
 * busy cgroup series (port) scraped meanwhile. */
static void top_by_cgroup_and_service(unsigned port)
{
	char busy_unit[128], sleepy_unit[128];
	struct by_rows cgroup_rows, service_rows;
	struct proc by_cgroup, by_service;
	double busy_usec = usage_usec(BUSY), sleepy_usec = usage_usec(SLEEPY);

	snprintf(busy_unit, sizeof(busy_unit), "haecer-demo-%d.service", (int)getpid());
	snprintf(sleepy_unit, sizeof(sleepy_unit), "haecer-idle-%d.scope", (int)getpid());
	start_top_by(&by_cgroup, "cgroup", "1");
	start_top_by(&by_service, "service", "2");
	char wanted[PATH_MAX + 64];
	snprintf(wanted, sizeof(wanted), "haecer_cgroup_energy_joules_total{cgroup=\"%s\"",
		 cgroup_paths[BUSY]);
	char *before = scrape_with(port, wanted);
	parse_top_by(&by_cgroup, "cgroup", cgroup_paths[BUSY], cgroup_paths[SLEEPY], &cgroup_rows);
	parse_top_by(&by_service, "service", busy_unit, sleepy_unit, &service_rows);
	busy_usec = usage_usec(BUSY) - busy_usec;
	sleepy_usec = usage_usec(SLEEPY) - sleepy_usec;
	check_by(&cgroup_rows, busy_usec, sleepy_usec);
	check_by(&service_rows, busy_usec, sleepy_usec);
	char *after = scrape_next_tick(port, before);
	check_serve_agrees(&cgroup_rows, before, after);
	free(before);
	free(after);
}

static double cgroup_joules(const char *body, const char *path)
{
	char prefix[PATH_MAX + 64];
	unsigned count;
	double joules;

	snprintf(prefix, sizeof(prefix), "haecer_cgroup_energy_joules_total{cgroup=\"%s\"", path);
	joules = sum_samples(body, prefix, &count);
	assert_int_equal(count, 1);
	return joules;
}

/* Busy until this process has had ns of CPU time (a loaded host stretches the wall time). */
static int spin_cpu_ns(uint64_t ns)
{
	struct timespec now;

	do
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
	while ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec < ns);
	return 0;
}

/* One after the other, `count` processes that each run busy for ns of CPU time in cgroup and
 * exit: none lives long enough to be in more than a few of serve's process scans. */
static void run_short_lived(unsigned count, uint64_t ns, unsigned cgroup)
{
	char procs[PATH_MAX + 16];
	int status;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgroup_dirs[cgroup]);
	for (unsigned i = 0; i < count; i++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			int fd = open(procs, O_WRONLY | O_CLOEXEC);
			_exit(fd < 0 || write(fd, "0\n", 2) != 2 ? 1 : spin_cpu_ns(ns));
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
}

/* Ten processes that each run busy for 20 ms of CPU time in the sleepy cgroup and exit between
 * two of serve's ticks (summing the processes a scan saw would miss most of them): the
 * cgroup's series grows by their energy, in the same proportion to cpu.stat's usage as the
 * busy cgroup's. Then the sleepy cgroup is removed: its series stays, and does not go back. */
static void check_short_lived_and_removed(unsigned port, unsigned brief_port)
{
	char *last = scrape_with(port, "haecer_attributed_package_energy_joules_total{");
	char *before = scrape_next_tick(port, last); /* cpu.stat read right after a tick */
	double busy_usec = usage_usec(BUSY), sleepy_usec = usage_usec(SLEEPY);

	run_short_lived(10, 20000000, SLEEPY);
	char *ended = scrape_with(port, "haecer_attributed_package_energy_joules_total{");
	char *after = scrape_next_tick(port, ended);
	busy_usec = usage_usec(BUSY) - busy_usec;
	sleepy_usec = usage_usec(SLEEPY) - sleepy_usec;
	double busy_j = cgroup_joules(after, cgroup_paths[BUSY]) -
			cgroup_joules(before, cgroup_paths[BUSY]);
	double sleepy_j = cgroup_joules(after, cgroup_paths[SLEEPY]) -
			  cgroup_joules(before, cgroup_paths[SLEEPY]);
	double ratio = (sleepy_j / busy_j) / (sleepy_usec / busy_usec);
	fprintf(stderr, "short-lived: sleepy cgroup +%.3f J / %.0f ms, busy +%.3f J / %.0f ms: "
		"ratio %.2f\n", sleepy_j, sleepy_usec / 1e3, busy_j, busy_usec / 1e3, ratio);
	assert_true(sleepy_usec >= 200000); /* the short-lived processes' 200 ms are in cpu.stat */
	assert_true(ratio > 0.5 && ratio < 2);

	kill(children[1], SIGKILL);
	waitpid(children[1], NULL, 0);
	children[1] = 0;
	assert_int_equal(rmdir(cgroup_dirs[SLEEPY]), 0);
	char *removed = scrape_next_tick(port, after);
	fprintf(stderr, "removed cgroup: %.4f J, then %.4f J\n",
		cgroup_joules(after, cgroup_paths[SLEEPY]),
		cgroup_joules(removed, cgroup_paths[SLEEPY]));
	assert_true(cgroup_joules(removed, cgroup_paths[SLEEPY]) >=
		    cgroup_joules(after, cgroup_paths[SLEEPY]));
	check_sums(removed);
	/* serve with --cgroup-retention 1: the series stays a retention past the tick the engine
	 * dropped the cgroup (the one after it listed it ended), then goes */
	char series[PATH_MAX + 64];
	snprintf(series, sizeof(series), "haecer_cgroup_energy_joules_total{cgroup=\"%s\"",
		 cgroup_paths[SLEEPY]);
	double gone_after = scrape_until_gone(brief_port, series);
	fprintf(stderr, "removed cgroup's series gone after %.2f s (retention 1 s)\n", gone_after);
	free(last);
	free(before);
	free(ended);
	free(after);
	free(removed);
}

/* Two real cgroups under the cgroup v2 mount with a busy and a mostly asleep process: top --by
 * cgroup and --by service show both, the busy one's energy dominates in proportion to its CPU
 * time and the rows add up to the package's within the stated ±; serve exports both cgroups
 * (--cgroup-depth 3: their full paths; --cgroup-depth 1: the slice alone) and a real
 * Prometheus scrapes them. Skipped where the v2 mount is not writable. */
static void test_real_cgroups(void **state)
{
	char why[PATH_MAX + 128], query[PATH_MAX + 64], wanted[PATH_MAX + 64];
	struct proc serve, shallow, brief;
	unsigned port, shallow_port, brief_port;

	(void)state;
	if (make_cgroups(why, sizeof(why)) != NULL) {
		fprintf(stderr, "skip: %s\n", why);
		skip();
	}
	move_to(start_child(0, 50000000, 0), BUSY);
	move_to(start_child(1, 1000000, 99000), SLEEPY);
	port = start_serve(&serve, "10", "3");
	shallow_port = start_serve(&shallow, "10", "1");
	brief_port = start_serve_kept(&brief, "10", "3", "1");
	scrape_by_prometheus(port);
	top_by_cgroup_and_service(port);

	snprintf(wanted, sizeof(wanted), "haecer_cgroup_energy_joules_total{cgroup=\"%s\"",
		 cgroup_paths[SLEEPY]);
	char *body = scrape_with(port, wanted);
	double busy_j = cgroup_joules(body, cgroup_paths[BUSY]);
	double sleepy_j = cgroup_joules(body, cgroup_paths[SLEEPY]);
	fprintf(stderr, "serve: busy cgroup %.3f J, sleepy cgroup %.4f J\n", busy_j, sleepy_j);
	assert_true(sleepy_j > 0 && busy_j > 5 * sleepy_j);
	check_sums(body);
	free(body);
	snprintf(wanted, sizeof(wanted), "haecer_cgroup_energy_joules_total{cgroup=\"%s\"",
		 cgroup_paths[SLICE]);
	body = scrape_with(shallow_port, wanted);
	assert_true(cgroup_joules(body, cgroup_paths[SLICE]) > 0);
	snprintf(wanted, sizeof(wanted), "haecer_cgroup_energy_joules_total{cgroup=\"%s/",
		 cgroup_paths[SLICE]);
	assert_null(strstr(body, wanted)); /* nothing below the slice at depth 1 */
	check_sums(body); /* the slice's series folds its cgroups' without counting them twice */
	free(body);

	wait_ready();
	snprintf(query, sizeof(query), "query=haecer_cgroup_energy_joules_total{cgroup=\"%s\"}",
		 cgroup_paths[BUSY]);
	double busy_prometheus = prometheus_value(query);
	snprintf(query, sizeof(query), "query=haecer_cgroup_energy_joules_total{cgroup=\"%s\"}",
		 cgroup_paths[SLEEPY]);
	assert_true(busy_prometheus > 5 * prometheus_value(query));
	snprintf(wanted, sizeof(wanted), "haecer_cgroup_energy_joules_total{cgroup=\"%s\"",
		 cgroup_paths[SLEEPY]);
	free(scrape_with(brief_port, wanted));
	check_short_lived_and_removed(port, brief_port);
	remove_cgroups();
	serve_stop(&brief, NULL);
	serve_stop(&shallow, NULL);
	serve_stop(&serve, NULL);
}

/* A serve a failed test left running is ended; Prometheus lives on for the next test (it takes
 * seconds to start) and ends with the group. */
static int teardown(void **state)
{
	(void)state;
	remove_cgroups();
	serve_teardown(NULL);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_busy_dominates, teardown),
		cmocka_unit_test_teardown(test_bounded, teardown),
		cmocka_unit_test_teardown(test_real_cgroups, teardown),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	if (access(PROMETHEUS, X_OK) != 0 || access("/usr/bin/curl", X_OK) != 0) {
		printf("skip: %s or curl is not installed (scripts/install-deps.sh)\n", PROMETHEUS);
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	int failed = MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
	remove_cgroups();
	prometheus_teardown();
	return failed;
}
