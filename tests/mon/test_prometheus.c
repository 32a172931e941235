/*
 * The integration test: a real Prometheus server (Debian's /usr/bin/prometheus, its own config
 * and TSDB in a temporary directory, on a free loopback port, scraping every second) scrapes
 * `haecer-mon serve` in front of a real msrd on the simulated CPU. Through Prometheus's HTTP API
 * (curl) the target must be up and the package energy series must arrive and increase, and go
 * on increasing while 1 000 idle half-sent requests hold connections to serve (slowloris).
 *
 * Skipped only when Prometheus is not installed (77), or while msrd still answers ENERGY_READ
 * with -EOPNOTSUPP (an msrd without energy totals, HAECER_FEATURE_ENERGY; a cmocka skip inside):
 * then there is no series to check.
 */
#include "tests/mon/prometheus_test.h"

#include "tests/lib/msrd_group.h"

#define SLOW 1000u
#define ENERGY_QUERY "query=haecer_energy_joules_total{domain=\"energy-pkg\",package=\"0\"}"

static struct msrd_server server;

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

static void test_prometheus_scrapes_energy(void **state)
{
	struct proc serve;
	char *targets;
	double first, later;
	unsigned port;
	pid_t prometheus;
	int status;
	const char *scale = getenv("HAECER_TEST_SCALE");
	unsigned slow_count = scale != NULL && strcmp(scale, "small") == 0 ? SLOW / 10 : SLOW;
	int *slow;

	(void)state;
	/* Asked of the group's msrd: a second msrd start only for this costs seconds under
	 * valgrind. */
	if (energy_api() == -EOPNOTSUPP) {
		print_message("msrd answers ENERGY_READ with -EOPNOTSUPP (issue 5's energy totals "
			      "have not landed); re-run once they have\n");
		skip();
	}
	if (!raise_file_limit(SLOW + 64))
		slow_count = 0;
	snprintf(directory, sizeof(directory), "%s", "/tmp/haecer-prometheus-XXXXXX");
	assert_non_null(mkdtemp(directory));
	port = serve_start(&serve, server.socket_path, "500");
	prometheus = start_prometheus(port);
	prometheus_pid = prometheus;
	wait_ready();
	first = energy_above(0);
	/* Scrapes go on while SLOW idle half-requests hold connections (issue 25 item 5). */
	slow = slowloris_open(port, slow_count);
	later = energy_above(first);
	assert_true(later > first);
	targets = prometheus_get("/api/v1/targets", NULL);
	assert_non_null(targets);
	assert_non_null(strstr(targets, "\"health\":\"up\""));
	free(targets);
	slowloris_close(slow, slow_count);
	assert_int_equal(kill(prometheus, SIGTERM), 0);
	assert_int_equal(waitpid(prometheus, &status, 0), prometheus);
	prometheus_pid = 0;
	serve_stop(&serve, NULL);
}

/* Whatever the test left running, and Prometheus's directory (kept on failure, for its log:
 * HAECER_TEST_KEEP=1). */
static int teardown(void **state)
{
	(void)state;
	prometheus_teardown();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_prometheus_scrapes_energy, teardown),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	if (access(PROMETHEUS, X_OK) != 0 || access("/usr/bin/curl", X_OK) != 0) {
		printf("skip: %s or curl is not installed (scripts/install-deps.sh)\n", PROMETHEUS);
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
}
