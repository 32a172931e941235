/*
 * A hostile producer rewrites its ring's live head while haecer-mon follows it (issue 28, item
 * 5): in text, JSON and CSV alike, follow reports "ring corrupted by its producer" and exits
 * non-zero, where it used to print about 2^64 lost records and exit 0. No line of its output
 * mentions a lost count above the records ever pushed. haecer-mon serve stops exporting such a
 * ring (no lost or dropped count near 2^64 in /metrics) and says why on stderr.
 */
#include "tests/mon/serve_test.h"

#include <inttypes.h>

#include "shm/ring.h"
#include "tests/lib/msrd_group.h"

#define OFFSET_HEAD 128 /* shm/ring.c: head alone on its line after the identity */
#define PUSHED 5u

static const char policy[] = MON_TEST_RAPL_MSRS
	"  - {match: {uid: 0}, allow: [rapl], create_rings: [1], monitor_rings: [1]}\n";

static struct msrd_server server;

/* A ring (1, minor) with PUSHED records, its producer attached in this process. */
static void make_ring(uint16_t minor, struct haecer_conn **conn, struct ring_producer *producer)
{
	struct haecer_ring_spec spec = { .major = 1, .minor = minor, .capacity = 64,
					 .clock = RING_CLOCK_MONOTONIC_RAW, .counter_count = 1 };
	int fd;

	snprintf(spec.counters[0].name, sizeof(spec.counters[0].name), "FAKE");
	spec.counters[0].cpu = -1;
	spec.counters[0].package = -1;
	assert_int_equal(haecer_connect(server.socket_path, conn), 0);
	assert_int_equal(haecer_ring_create(*conn, &spec, NULL, &fd), 0);
	assert_int_equal(ring_producer_attach(producer, fd), 0);
	close(fd);
	for (uint64_t i = 0; i < PUSHED; i++) {
		struct ring_record record = { .value = 100 + i, .timestamp = 1 + i };
		assert_int_equal(ring_push(producer, &record), 0);
	}
}

static void lie_about_head(struct ring_producer *producer)
{
	__atomic_store_n((uint64_t *)((char *)producer->mapping + OFFSET_HEAD), UINT64_MAX - 5,
			 __ATOMIC_RELEASE);
}

static void follow_corrupted(const char *format, uint16_t minor)
{
	char minor_text[8];
	const char *arguments[] = { "follow", "--format", format, "1", minor_text, NULL };
	struct ring_producer producer;
	struct haecer_conn *conn;
	struct proc follower;
	char line[512], *out = NULL, *err = NULL;

	snprintf(minor_text, sizeof(minor_text), "%u", minor);
	make_ring(minor, &conn, &producer);
	mon_start(&follower, server.socket_path, arguments);
	/* Once a record is out, follow is attached: then the producer lies. */
	do
		assert_true(read_line(follower.out, line, sizeof(line), MON_TEST_TIMEOUT_MS));
	while (strstr(line, "100") == NULL);
	lie_about_head(&producer);
	assert_int_not_equal(proc_finish(&follower, &out, &err, MON_TEST_TIMEOUT_MS), 0);
	print_message("%s: %s", format, err);
	assert_non_null(strstr(err, "ring corrupted by its producer"));
	assert_null(strstr(out, "18446744073709551")); /* no count near 2^64 */
	assert_null(strstr(err, "18446744073709551"));
	free(out);
	free(err);
	ring_producer_detach(&producer);
	haecer_close(conn);
}

static void test_text(void **state)
{
	(void)state;
	follow_corrupted("text", 1);
}

static void test_json(void **state)
{
	(void)state;
	follow_corrupted("json", 2);
}

static void test_csv(void **state)
{
	(void)state;
	follow_corrupted("csv", 3);
}

static void test_serve(void **state)
{
	struct ring_producer producer;
	struct haecer_conn *conn;
	struct http_reply reply;
	struct proc serve;
	char *err = NULL;
	unsigned port;

	(void)state;
	make_ring(4, &conn, &producer);
	port = serve_start(&serve, server.socket_path, "100");
	http_get(port, "/metrics", NULL, &reply);
	assert_non_null(strstr(reply.body, "haecer_ring_records_total{major=\"1\",minor=\"4\""));
	free(reply.text);
	lie_about_head(&producer);
	http_get(port, "/metrics", NULL, &reply);
	assert_null(strstr(reply.body, "minor=\"4\""));
	assert_null(strstr(reply.body, "18446744073709551"));
	free(reply.text);
	serve_stop(&serve, &err);
	assert_non_null(strstr(err, "ring corrupted by its producer"));
	free(err);
	ring_producer_detach(&producer);
	haecer_close(conn);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_csv),
		cmocka_unit_test_teardown(test_serve, serve_teardown),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
