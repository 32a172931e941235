/*
 * haecer-mon serve's per-process and per-cgroup energy series (tools/mon/serve_attribution.c)
 * in front of a real msrd on the simulated Sandy Bridge, two real processes running (one busy,
 * one mostly asleep) and a real Prometheus scraping:
 *  - both processes get a haecer_process_energy_joules_total series; the busy one's dominates,
 *    and the two energies are in the ratio of the CPU time the kernel counted for them (within
 *    a factor of 2: the snapshots and the CPU-time readings are up to one interval apart);
 *  - cgroups + idle + other add up to the package energy the attribution split, within the
 *    stated ± (haecer_attribution_error_joules_total);
 *  - Prometheus scrapes the series, and every query of dist/grafana-haecer-energy.json
 *    answers;
 *  - --top 2 --cgroup-depth 0: exactly two process series and one cgroup series ("/"), which
 *    does not go back when a process exits.
 * Named *energy* so scripts/run-tests.sh runs it alone (it measures CPU time).
 */
#include "tests/mon/prometheus_test.h"

#include <sys/prctl.h>

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

static unsigned start_serve(struct proc *serve, const char *top, const char *depth)
{
	const char *arguments[] = { "serve",   "--listen", "127.0.0.1:0", "--interval", "500",
				    "--top",   top,	   "--cgroup-depth", depth,	NULL };
	char line[128];
	unsigned port = 0;

	mon_start(serve, server.socket_path, arguments);
	serve_test_running = serve->pid;
	assert_true(read_line(serve->out, line, sizeof(line), MON_TEST_TIMEOUT_MS));
	assert_int_equal(sscanf(line, "listening on 127.0.0.1:%u", &port), 1);
	return port;
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

static void check_sums(const char *body)
{
	unsigned count;
	double cgroups = sum_samples(body, "haecer_cgroup_energy_joules_total{", &count);
	double rest = sum_samples(body, "haecer_unattributed_energy_joules_total{", &count);
	double package = sum_samples(body, "haecer_attributed_package_energy_joules_total{", &count);
	double error = sum_samples(body, "haecer_attribution_error_joules_total{", &count);

	fprintf(stderr, "package %.3f J = cgroups %.3f + idle/other %.3f (± %.3f)\n", package,
		cgroups, rest, error);
	assert_true(package > 0);
	assert_true(fabs(cgroups + rest - package) <= error + 1e-6 * package);
}

static void test_busy_dominates(void **state)
{
	pid_t busy = start_child(0, 50000000, 0), sleepy = start_child(1, 1000000, 99000);
	double busy_cpu = cpu_ns(busy), sleepy_cpu = cpu_ns(sleepy);
	char query[128], busy_series[96];
	struct proc serve;
	unsigned port;

	(void)state;
	snprintf(directory, sizeof(directory), "%s", "/tmp/haecer-prometheus-XXXXXX");
	assert_non_null(mkdtemp(directory));
	port = start_serve(&serve, "100000", "3");
	prometheus_pid = start_prometheus(port);
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
	assert_int_equal(kill(prometheus_pid, SIGTERM), 0);
	assert_int_equal(waitpid(prometheus_pid, NULL, 0), prometheus_pid);
	prometheus_pid = 0;
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
	char *body = scrape_with(port, "haecer_process_energy_joules_total{");
	sum_samples(body, "haecer_process_energy_joules_total{", &count);
	assert_int_equal(count, 2);
	before = sum_samples(body, "haecer_cgroup_energy_joules_total{cgroup=\"/\"", &count);
	assert_int_equal(count, 1);
	sum_samples(body, "haecer_cgroup_energy_joules_total{", &count);
	assert_int_equal(count, 1);
	free(body);
	stop_children(); /* its joules fold into "/": the counter must not go back */
	usleep(1200000);
	body = scrape_with(port, "haecer_cgroup_energy_joules_total{");
	after = sum_samples(body, "haecer_cgroup_energy_joules_total{cgroup=\"/\"", &count);
	assert_int_equal(count, 1);
	assert_true(after >= before && after > 0);
	free(body);
	serve_stop(&serve, NULL);
}

static int teardown(void **state)
{
	(void)state;
	stop_children();
	prometheus_teardown();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_busy_dominates, teardown),
		cmocka_unit_test_teardown(test_bounded, teardown),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	if (access(PROMETHEUS, X_OK) != 0 || access("/usr/bin/curl", X_OK) != 0) {
		printf("skip: %s or curl is not installed (scripts/install-deps.sh)\n", PROMETHEUS);
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
}
