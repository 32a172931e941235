/*
 * The integration test: a real Prometheus server (Debian's /usr/bin/prometheus, its own config
 * and TSDB in a temporary directory, on a free loopback port, scraping every second) scrapes
 * `haecer-mon serve` in front of a real msrd on the simulated CPU. Through Prometheus's HTTP API
 * (curl) the target must be up and the package energy series must arrive and increase.
 *
 * Skipped (77) only when Prometheus is not installed, or while msrd still answers ENERGY_READ
 * with -EOPNOTSUPP (an msrd without energy totals, HAECER_FEATURE_ENERGY): then there is no
 * series to check.
 */
#include "tests/mon/serve_test.h"

#include "tests/lib/msrd_group.h"

#define PROMETHEUS "/usr/bin/prometheus"
#define ENERGY_QUERY "query=haecer_energy_joules_total{domain=\"energy-pkg\",package=\"0\"}"

static struct msrd_server server;
static char directory[PATH_MAX];
static unsigned prometheus_port;
static pid_t prometheus_pid;

static unsigned free_port(void)
{
	struct sockaddr_in address = { .sin_family = AF_INET };
	socklen_t size = sizeof(address);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&address, sizeof(address)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&address, &size), 0);
	close(fd);
	return ntohs(address.sin_port);
}

/* Prometheus in the foreground, its output in DIRECTORY/prometheus.log. */
static pid_t start_prometheus(unsigned target_port)
{
	char config[PATH_MAX + 32], storage[PATH_MAX + 32], log_path[PATH_MAX + 32];
	char config_option[PATH_MAX + 64], storage_option[PATH_MAX + 64], listen_option[64];
	char yaml[512];
	pid_t pid;

	snprintf(config, sizeof(config), "%s/prometheus.yml", directory);
	snprintf(storage, sizeof(storage), "%s/data", directory);
	snprintf(log_path, sizeof(log_path), "%s/prometheus.log", directory);
	snprintf(yaml, sizeof(yaml),
		 "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
		 "  evaluation_interval: 1s\n"
		 "scrape_configs:\n  - job_name: haecer\n    static_configs:\n"
		 "      - targets: ['127.0.0.1:%u']\n", target_port);
	assert_int_equal(harness_write_file(config, yaml, 0644), 0);
	prometheus_port = free_port();
	snprintf(config_option, sizeof(config_option), "--config.file=%s", config);
	snprintf(storage_option, sizeof(storage_option), "--storage.tsdb.path=%s", storage);
	snprintf(listen_option, sizeof(listen_option), "--web.listen-address=127.0.0.1:%u",
		 prometheus_port);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(log_fd, STDOUT_FILENO);
		dup2(log_fd, STDERR_FILENO);
		execl(PROMETHEUS, PROMETHEUS, config_option, storage_option, listen_option,
		      "--log.level=warn", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* curl -s [-G --data-urlencode QUERY] http://127.0.0.1:PORT/PATH; its stdout, or NULL. */
static char *prometheus_get(const char *path, const char *query)
{
	char url[128];
	const char *argv[] = { "/usr/bin/curl", "-sf", "-G", "--data-urlencode", query, url, NULL };
	const char *plain[] = { "/usr/bin/curl", "-sf", url, NULL };
	char *out = NULL;

	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", prometheus_port, path);
	if (harness_run(query != NULL ? argv : plain, &out, NULL) != 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* The sample value in a query answer ("value":[time,"VALUE"]), or NAN when there is none. */
static double query_value(const char *answer)
{
	const char *value = answer != NULL ? strstr(answer, "\"value\":[") : NULL;

	if (value == NULL || (value = strstr(value, ",\"")) == NULL)
		return NAN;
	return strtod(value + 2, NULL);
}

static void wait_ready(void)
{
	for (int round = 0; round < 600; round++) {
		char *answer = prometheus_get("/-/ready", NULL);
		free(answer);
		if (answer != NULL)
			return;
		usleep(100000);
	}
	fail_msg("Prometheus did not get ready (see %s/prometheus.log)", directory);
}

/* Query until the energy series is above floor; a few minutes at most, only a hang fails. */
static double energy_above(double floor)
{
	double value = NAN;

	for (int round = 0; round < 1200; round++) {
		char *answer = prometheus_get("/api/v1/query", ENERGY_QUERY);
		value = query_value(answer);
		free(answer);
		if (!isnan(value) && value > floor)
			return value;
		usleep(200000);
	}
	fail_msg("the energy series never went above %g in Prometheus (last %g)", floor, value);
	return value;
}

static void test_prometheus_scrapes_energy(void **state)
{
	struct proc serve;
	char *targets;
	double first, later;
	unsigned port;
	pid_t prometheus;
	int status;

	(void)state;
	snprintf(directory, sizeof(directory), "%s", "/tmp/haecer-prometheus-XXXXXX");
	assert_non_null(mkdtemp(directory));
	port = serve_start(&serve, server.socket_path, "500");
	prometheus = start_prometheus(port);
	prometheus_pid = prometheus;
	wait_ready();
	first = energy_above(0);
	later = energy_above(first);
	assert_true(later > first);
	targets = prometheus_get("/api/v1/targets", NULL);
	assert_non_null(targets);
	assert_non_null(strstr(targets, "\"health\":\"up\""));
	free(targets);
	assert_int_equal(kill(prometheus, SIGTERM), 0);
	assert_int_equal(waitpid(prometheus, &status, 0), prometheus);
	prometheus_pid = 0;
	serve_stop(&serve, NULL);
}

/* Whatever the test left running, and Prometheus's directory (kept on failure, for its log:
 * HAECER_TEST_KEEP=1). */
static int teardown(void **state)
{
	bool failed = prometheus_pid > 0 || serve_test_running > 0;

	if (prometheus_pid > 0) {
		kill(prometheus_pid, SIGKILL);
		waitpid(prometheus_pid, NULL, 0);
	}
	prometheus_pid = 0;
	serve_teardown(state);
	if (failed && getenv("HAECER_TEST_KEEP") != NULL)
		fprintf(stderr, "kept %s\n", directory);
	else if (directory[0] != '\0')
		harness_remove_tree(directory);
	return 0;
}

/* Whether msrd keeps energy totals (msrd(8), ENERGY_READ). */
static int energy_api(void)
{
	struct haecer_conn *conn = NULL;
	uint64_t total;
	int status = haecer_connect(server.socket_path, &conn);

	if (status == 0)
		status = haecer_energy_read(conn, 0, 0x611, NULL, &total);
	haecer_close(conn);
	return status;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_prometheus_scrapes_energy, teardown),
	};
	const char *arguments[] = { "--backend", "sim", NULL };
	int status;

	if (access(PROMETHEUS, X_OK) != 0 || access("/usr/bin/curl", X_OK) != 0) {
		printf("skip: %s or curl is not installed (scripts/install-deps.sh)\n", PROMETHEUS);
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	if (msrd_start(&server, MON_TEST_POLICY, arguments) != 0)
		return 1;
	status = energy_api();
	if (msrd_stop(&server) != 0)
		return 1;
	if (status == -EOPNOTSUPP) {
		printf("skip: msrd answers ENERGY_READ with -EOPNOTSUPP (issue 5's energy totals "
		       "have not landed); re-run once they have\n");
		return 77;
	}
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
}
