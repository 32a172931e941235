/*
 * haecer-mon serve against a real msrd and real producers, over real HTTP:
 *  - GET /metrics without an Accept header is Prometheus text 0.0.4 that promtool accepts, with
 *    a ring's records, power (10 W for the known sequence), energy total and producer state;
 *  - asked for OpenMetrics it answers application/openmetrics-text; version=1.0.0 in the exact
 *    format (checked line by line below: metadata before samples, one block per family,
 *    counters' samples named _total, UNIT a suffix of the name, # EOF last);
 *  - everything but GET /metrics is 404, a malformed request 400, an oversized head 431, and
 *    the server keeps serving after each;
 *  - a ring created after serve started appears, and its producer leaving shows as down;
 *  - energy: msrd's 64-bit totals per RAPL domain appear and increase, or, while msrd answers
 *    ENERGY_READ with -EOPNOTSUPP, serve says so and exports no energy series;
 *  - the Slurm plugin's step files become job/step/user series, only when root wrote them;
 *  - SIGTERM ends it with status 0.
 */
#include "tests/mon/serve_test.h"

#include <ctype.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "tests/lib/msrd_group.h"

#define POLL_STEP_US 100000
#define POLL_ROUNDS 600 /* a minute: only a hang fails */

static struct msrd_server server;

/* ---- OpenMetrics text, checked line by line ---- */

struct om_family {
	char name[96];
	char type[16];
	bool samples_done; /* another family's sample came after this one's */
};

struct om_check {
	struct om_family families[64];
	size_t count;
	struct om_family *current;
};

static struct om_family *om_find(struct om_check *check, const char *name)
{
	for (size_t i = 0; i < check->count; i++)
		if (strcmp(check->families[i].name, name) == 0)
			return &check->families[i];
	return NULL;
}

static void om_metadata(struct om_check *check, const char *line)
{
	char kind[8], name[96], rest[256] = "";
	struct om_family *family;

	assert_true(sscanf(line, "# %7s %95s %255[^\n]", kind, name, rest) >= 2);
	family = om_find(check, name);
	if (strcmp(kind, "TYPE") == 0) {
		assert_null(family); /* TYPE comes first, once */
		assert_true(check->count < 64);
		family = &check->families[check->count++];
		snprintf(family->name, sizeof(family->name), "%s", name);
		snprintf(family->type, sizeof(family->type), "%s", rest);
		assert_true(strcmp(rest, "counter") == 0 || strcmp(rest, "gauge") == 0);
	} else if (strcmp(kind, "UNIT") == 0) {
		size_t length = strlen(name), unit = strlen(rest);
		assert_non_null(family);
		assert_true(length > unit + 1 && strcmp(name + length - unit, rest) == 0 &&
			    name[length - unit - 1] == '_');
	} else {
		assert_string_equal(kind, "HELP");
	}
	if (family != NULL)
		check->current = family;
}

static void om_labels(const char *labels)
{
	const char *c = labels;

	while (*c != '}') {
		while (isalnum((unsigned char)*c) || *c == '_')
			c++;
		assert_int_equal(*c++, '=');
		assert_int_equal(*c++, '"');
		while (*c != '"') {
			assert_true(*c != '\0' && *c != '\n');
			c += *c == '\\' ? 2 : 1;
		}
		c++;
		if (*c == ',')
			c++;
	}
}

static void om_sample(struct om_check *check, const char *line)
{
	char name[96];
	size_t length = strcspn(line, "{ ");
	struct om_family *family = check->current;
	const char *value;
	char *end;

	assert_true(length < sizeof(name));
	memcpy(name, line, length);
	name[length] = '\0';
	assert_non_null(family);
	assert_false(family->samples_done);
	if (strcmp(family->type, "counter") == 0) {
		assert_true(length == strlen(family->name) + 6);
		assert_memory_equal(name, family->name, strlen(family->name));
		assert_string_equal(name + strlen(family->name), "_total");
	} else {
		assert_string_equal(name, family->name);
	}
	if (line[length] == '{')
		om_labels(line + length + 1);
	value = strchr(line, '\n');
	assert_non_null(value);
	while (value > line && value[-1] != ' ')
		value--;
	strtod(value, &end);
	assert_true(end != value && *end == '\n');
}

static void check_openmetrics(const char *body)
{
	struct om_check check = { .count = 0 };
	const char *eof = strstr(body, "# EOF\n");

	assert_non_null(eof);
	assert_int_equal(eof[6], '\0'); /* last, once */
	for (const char *line = body; line < eof; line = strchr(line, '\n') + 1) {
		if (line[0] == '#') {
			if (check.current != NULL && strncmp(line, "# TYPE ", 7) == 0)
				check.current->samples_done = true;
			om_metadata(&check, line);
		} else {
			om_sample(&check, line);
		}
	}
	assert_true(check.count > 0);
}

/* ---- the tests ---- */

static bool have_promtool(void)
{
	const char *argv[] = { "/bin/sh", "-c", "command -v promtool", NULL };

	return harness_run(argv, NULL, NULL) == 0;
}

/* `promtool check metrics` (lint included) must accept the body. */
static void check_with_promtool(const char *body)
{
	char path[PATH_MAX + 16], command[PATH_MAX + 64];
	const char *argv[] = { "/bin/sh", "-c", command, NULL };
	char *out = NULL, *err = NULL;
	int status;

	if (!have_promtool())
		return;
	snprintf(path, sizeof(path), "%s/metrics.txt", server.dir);
	snprintf(command, sizeof(command), "promtool check metrics < '%s'", path);
	assert_int_equal(harness_write_file(path, body, 0600), 0);
	status = harness_run(argv, &out, &err);
	if (status != 0)
		fprintf(stderr, "promtool: %s%s\n", out, err);
	assert_int_equal(status, 0);
	free(out);
	free(err);
}

static void ring_series(char *out, size_t size, const char *name, const struct producer *ring,
			const char *counter)
{
	/* msrd runs the simulated CPU: every series says so. */
	snprintf(out, size, "%s{major=\"6\",minor=\"1\",ring_instance=\"%u\"%s,simulated=\"1\"}",
		 name, ring->instance, counter);
}

static void test_formats(void **state)
{
	const char *pkg = ",counter_id=\"0\",domain=\"RAPL_PKG\",package=\"0\"";
	struct producer producer;
	struct http_reply reply;
	struct proc serve;
	char series[256];
	unsigned port;

	(void)state;
	producer_start(&producer, server.socket_path, 6, 1, 64);
	/* 10 W: 16384 units of 2^-14 J every 0.1 s, wrapping 32 bits on the way. */
	producer_say(&producer, "push 0 4294950912 1000000000");
	producer_say(&producer, "push 0 0 1100000000");
	producer_say(&producer, "push 0 16384 1200000000");
	producer_say(&producer, "push 1 777 1200000000");
	producer_sync(&producer);
	port = serve_start(&serve, server.socket_path, "100");

	http_get(port, "/metrics", NULL, &reply);
	assert_int_equal(reply.code, 200);
	assert_string_equal(reply.content_type, "text/plain; version=0.0.4; charset=utf-8");
	check_with_promtool(reply.body);
	ring_series(series, sizeof(series), "haecer_ring_records_total", &producer, "");
	assert_true(sample_value(reply.body, series) == 4);
	ring_series(series, sizeof(series), "haecer_ring_producer_up", &producer, "");
	assert_true(sample_value(reply.body, series) == 1);
	ring_series(series, sizeof(series), "haecer_ring_power_watts", &producer, pkg);
	assert_true(near(sample_value(reply.body, series), 10.0));
	ring_series(series, sizeof(series), "haecer_ring_energy_joules_total", &producer, pkg);
	assert_true(near(sample_value(reply.body, series), (4294950912.0 + 2 * 16384) / 16384));
	ring_series(series, sizeof(series), "haecer_ring_value", &producer,
		    ",counter_id=\"1\",counter=\"INSTRUCTIONS\",cpu=\"0\"");
	assert_true(sample_value(reply.body, series) == 777);
	assert_true(sample_value(reply.body, "haecer_msrd_up{simulated=\"1\"}") == 1);
	/* The backend behind every figure: msrd's simulated CPU. */
	assert_true(sample_value(reply.body,
				 "haecer_backend_info{backend=\"sim\",simulated=\"1\"}") == 1);
	free(reply.text);

	http_get(port, "/metrics",
		 "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
		 "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1", &reply);
	assert_int_equal(reply.code, 200);
	assert_string_equal(reply.content_type,
			    "application/openmetrics-text; version=1.0.0; charset=utf-8");
	check_openmetrics(reply.body);
	assert_non_null(strstr(reply.body, "# TYPE haecer_ring_energy_joules counter\n"));
	assert_non_null(strstr(reply.body, "# UNIT haecer_ring_energy_joules joules\n"));
	free(reply.text);
	serve_stop(&serve, NULL);
	assert_int_equal(producer_end(&producer, "exit"), 0);
}

/* length 0: strlen(request) */
static void expect_code(unsigned port, const char *request, size_t length, int code)
{
	struct http_reply reply;

	http_exchange(port, request, length > 0 ? length : strlen(request), &reply);
	assert_int_equal(reply.code, code);
	free(reply.text);
}

/* `code`, or the connection closed without a byte of answer (never a hang: the test's own
 * receive timeout bounds it). */
static void expect_code_or_close(unsigned port, const char *request, size_t length, int code)
{
	int fd = http_connect(port);
	char buffer[64] = "";
	struct timeval limit = { .tv_sec = MON_TEST_TIMEOUT_MS / 1000 };
	ssize_t got;
	int answered = 0;

	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit)), 0);
	if (length == 0)
		length = strlen(request);
	assert_int_equal(send(fd, request, length, MSG_NOSIGNAL), (ssize_t)length);
	got = recv(fd, buffer, sizeof(buffer) - 1, 0);
	close(fd);
	assert_true(got >= 0); /* not a timeout */
	if (got > 0)
		assert_int_equal(sscanf(buffer, "HTTP/1.1 %d ", &answered), 1);
	assert_true(got == 0 || answered == code);
}

static void test_only_get_metrics(void **state)
{
	static const char nul_request[] = "GET /metrics\0 HTTP/1.1\r\n\r\n";
	char *huge = malloc(8192);
	struct http_reply reply;
	struct proc serve;
	unsigned port;

	(void)state;
	assert_non_null(huge);
	port = serve_start(&serve, server.socket_path, "1000");
	expect_code(port, "GET / HTTP/1.1\r\n\r\n", 0, 404);
	expect_code(port, "GET /metricsx HTTP/1.1\r\n\r\n", 0, 404);
	expect_code(port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 0, 404);
	expect_code(port, "HEAD /metrics HTTP/1.0\r\n\r\n", 0, 404);
	/* Not HTTP/1.x: 400, or closed unanswered (libmicrohttpd answers an HTTP/0.9-shaped line
	 * so); a NUL byte ends the request target there, as libmicrohttpd parses it. */
	expect_code_or_close(port, "hello\r\n\r\n", 0, 400);
	expect_code(port, "GET /metrics SPDY/3\r\n\r\n", 0, 400);
	expect_code_or_close(port, nul_request, sizeof(nul_request) - 1, 200);
	/* A head that never ends, exactly as long as the bound (so nothing is left unread). */
	memcpy(huge, "GET /metrics HTTP/1.1\r\nX: ", 26);
	memset(huge + 26, 'a', 8192 - 26);
	expect_code(port, huge, 8192, 431);
	free(huge);
	/* Still serving; a query string is ignored, a bare LF ends a head too. */
	http_get(port, "/metrics?x=1", NULL, &reply);
	assert_int_equal(reply.code, 200);
	free(reply.text);
	expect_code(port, "GET /metrics HTTP/1.0\n\n", 0, 200);
	serve_stop(&serve, NULL);
}

/* Scrape until `series` has a value above `floor` (a minute at most). */
static double scrape_until_above(unsigned port, const char *series, double floor)
{
	double value = NAN;

	for (int round = 0; round < POLL_ROUNDS; round++) {
		struct http_reply reply;
		http_get(port, "/metrics", NULL, &reply);
		value = sample_value(reply.body, series);
		free(reply.text);
		if (!isnan(value) && value > floor)
			return value;
		usleep(POLL_STEP_US);
	}
	fail_msg("%s never went above %g (last %g)", series, floor, value);
	return value;
}

static void test_rings_come_and_go(void **state)
{
	struct producer producer;
	struct proc serve;
	char series[256];
	unsigned port;

	(void)state;
	port = serve_start(&serve, server.socket_path, "100");
	producer_start(&producer, server.socket_path, 6, 1, 64);
	producer_say(&producer, "burst 3 1 5 5 1 1");
	producer_sync(&producer);
	ring_series(series, sizeof(series), "haecer_ring_records_total", &producer, "");
	assert_true(scrape_until_above(port, series, 2) == 3);
	assert_int_equal(producer_end(&producer, "exit"), 0);
	ring_series(series, sizeof(series), "haecer_ring_producer_up", &producer, "");
	for (int round = 0; round < POLL_ROUNDS; round++) {
		struct http_reply reply;
		double up;
		http_get(port, "/metrics", NULL, &reply);
		up = sample_value(reply.body, series);
		free(reply.text);
		if (up == 0)
			break;
		assert_true(up == 1);
		usleep(POLL_STEP_US);
	}
	serve_stop(&serve, NULL);
}

static void test_energy(void **state)
{
	const char *package = "haecer_energy_joules_total{domain=\"energy-pkg\",package=\"0\","
			      "simulated=\"1\"}";
	struct haecer_conn *conn = NULL;
	struct proc serve;
	uint64_t total = 0;
	double first;
	char *err;
	int energy;
	unsigned port;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	energy = haecer_energy_read(conn, 0, 0x611, NULL, &total);
	haecer_close(conn);
	port = serve_start(&serve, server.socket_path, "200");
	if (energy == -EOPNOTSUPP) {
		struct http_reply reply;
		http_get(port, "/metrics", NULL, &reply);
		assert_null(strstr(reply.body, "haecer_energy_joules"));
		free(reply.text);
		serve_stop(&serve, &err);
		assert_non_null(strstr(err, "msrd does not provide energy totals"));
		free(err);
		return;
	}
	assert_int_equal(energy, 0);
	first = scrape_until_above(port, package, 0);
	scrape_until_above(port, package, first);
	scrape_until_above(port, "haecer_power_watts{domain=\"energy-pkg\",package=\"0\",simulated=\"1\"}",
			   0);
	serve_stop(&serve, NULL);
}

/* --listen :PORT listens on every interface, as node_exporter's does: "::" (dual stack, so
 * 127.0.0.1 answers too) or 0.0.0.0 where IPv6 is off; either is said to be non-loopback. */
static void test_listen_every_interface(void **state)
{
	const char *arguments[] = { "serve", "--listen", ":0", NULL };
	struct http_reply reply;
	struct proc serve;
	char line[128], *err = NULL;
	unsigned port = 0;

	(void)state;
	mon_start(&serve, server.socket_path, arguments);
	serve_test_running = serve.pid;
	assert_true(read_line(serve.out, line, sizeof(line), MON_TEST_TIMEOUT_MS));
	if (sscanf(line, "listening on [::]:%u", &port) != 1)
		assert_int_equal(sscanf(line, "listening on 0.0.0.0:%u", &port), 1);
	http_get(port, "/metrics", NULL, &reply);
	assert_int_equal(reply.code, 200);
	assert_non_null(strstr(reply.body, "haecer_energy_joules_total{domain=\"energy-pkg\""));
	free(reply.text);
	serve_stop(&serve, &err);
	assert_non_null(strstr(err, "non-loopback"));
	free(err);
}

/* Started without --listen, serve listens on loopback only (127.0.0.1:9464, the port
 * registered for OpenTelemetry's Prometheus exporter, tools/mon/serve.h): nobody off the host
 * reaches it unless asked, and it does not warn. Skipped when that port is taken already
 * (another exporter on the host, or a serve of a parallel test run). */
#define DEFAULT_PORT 9464u
static void test_listen_loopback_by_default(void **state)
{
	const char *arguments[] = { "serve", NULL };
	struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons(DEFAULT_PORT) };
	struct http_reply reply;
	struct proc serve;
	char line[128], *err = NULL;
	int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), bound;

	(void)state;
	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(probe >= 0);
	bound = bind(probe, (const struct sockaddr *)&address, sizeof(address));
	close(probe);
	if (bound < 0)
		skip(); /* port DEFAULT_PORT in use on this host */
	mon_start(&serve, server.socket_path, arguments);
	serve_test_running = serve.pid;
	if (!read_line(serve.out, line, sizeof(line), MON_TEST_TIMEOUT_MS)) {
		/* Taken between the probe and serve's own bind: skip; any other end fails. */
		serve_test_running = 0;
		assert_int_not_equal(proc_finish(&serve, NULL, &err, MON_TEST_TIMEOUT_MS), 0);
		assert_non_null(strstr(err, "in use"));
		free(err);
		skip();
	}
	assert_string_equal(line, "listening on 127.0.0.1:9464");
	http_get(DEFAULT_PORT, "/metrics", NULL, &reply);
	assert_int_equal(reply.code, 200);
	free(reply.text);
	serve_stop(&serve, &err);
	assert_null(strstr(err, "non-loopback"));
	free(err);
}

/* The Slurm plugin's step files (tools/mon/serve_slurm.c): a root-owned one is exported with
 * its labels, one owned by another uid is not (anyone could invent jobs), and none is read
 * from a directory others may write. */
static void test_slurm_steps(void **state)
{
	char dir[] = "/tmp/haecer-serve-slurm-XXXXXX", path[64];
	const char *arguments[] = { "serve", "--listen", "127.0.0.1:0", "--interval", "100",
				    "--resolution-uj", "0", "--slurm-dir", dir, NULL };
	const char *own = "haecer_slurm_step_energy_joules_total{slurm_job=\"7\",slurm_step=\"0\","
			  "user=\"alice\",simulated=\"1\"}";
	struct http_reply reply;
	struct proc serve;
	unsigned port;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/7.0", dir);
	assert_int_equal(harness_write_file(path, "job=7\nstep=0\nuser=alice\nuid=1000\n"
					    "joules=12.5\nerror=0.25\ncpu_s=1\nended=0\n", 0644), 0);
	snprintf(path, sizeof(path), "%s/8.0", dir);
	assert_int_equal(harness_write_file(path, "job=8\nstep=0\nuser=mallory\njoules=1e9\n",
					    0644), 0);
	assert_int_equal(chown(path, 65534, 65534), 0);
	port = serve_start_arguments(&serve, server.socket_path, arguments);
	assert_true(scrape_until_above(port, own, 12) == 12.5);
	http_get(port, "/metrics", NULL, &reply);
	assert_null(strstr(reply.body, "mallory"));
	free(reply.text);
	assert_int_equal(chmod(dir, 0777), 0);
	usleep(300000); /* a few ticks */
	http_get(port, "/metrics", NULL, &reply);
	assert_null(strstr(reply.body, "haecer_slurm_step_energy_joules_total{"));
	free(reply.text);
	serve_stop(&serve, NULL);
	harness_remove_tree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_listen_every_interface, serve_teardown),
		cmocka_unit_test_teardown(test_listen_loopback_by_default, serve_teardown),
		cmocka_unit_test_teardown(test_formats, serve_teardown),
		cmocka_unit_test_teardown(test_only_get_metrics, serve_teardown),
		cmocka_unit_test_teardown(test_rings_come_and_go, serve_teardown),
		cmocka_unit_test_teardown(test_energy, serve_teardown),
		cmocka_unit_test_teardown(test_slurm_steps, serve_teardown),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
}
