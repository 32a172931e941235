/*
 * A ring flood does not hide other rings from haecer-mon serve (issue 28, item 4). uid 4601
 * creates FLOOD rings of major 1 (more than serve's 256 producers' rings) before uid 4602
 * creates one of major 2 and root starts a schedule whose ring (major 3) msrd fills:
 *   - serve follows uid 4602's ring and msrd's schedule ring;
 *   - it follows no more of uid 4601's rings than its share (256 split between the two uids);
 *   - its stderr names uid 4601 as the uid past its share.
 */
#include "tests/mon/serve_test.h"

#include "hw/msr.h"
#include "tests/lib/msrd_group.h"

#define FLOOD_UID 4601
#define OTHER_UID 4602
#define FLOOD 300u

static const char policy[] = MON_TEST_RAPL_MSRS
	"  - {match: {uid: 0}, allow: [rapl], create_rings: [3], monitor_rings: [1-3]}\n"
	"  - {match: {uid: 4601}, allow: [rapl], create_rings: [1]}\n"
	"  - {match: {uid: 4602}, allow: [rapl], create_rings: [2]}\n";

static struct msrd_server server;

/* What a ring owner creates: `count` rings of `major` (minors 1 to count). */
struct ring_batch {
	uint16_t major;
	unsigned count;
};

/* Creates the batch of rings, then writes a byte to `told`. */
static int make_rings(struct haecer_conn *conn, int told, void *argument)
{
	const struct ring_batch *batch = argument;
	struct haecer_ring_spec spec = ring_owner_spec(batch->major, 0);
	char byte = 1;
	int fd;

	for (unsigned i = 0; i < batch->count; i++) {
		spec.minor = (uint16_t)(i + 1);
		if (haecer_ring_create(conn, &spec, NULL, &fd) < 0)
			return 2;
		close(fd);
	}
	return write(told, &byte, 1) != 1;
}

/* A child of `uid` that creates `count` rings of `major` and keeps them until ring_owner_end;
 * returns once they exist. */
static void create_rings(struct ring_owner *owner, uid_t uid, uint16_t major, unsigned count)
{
	struct ring_batch batch = { .major = major, .count = count };
	char byte;

	ring_owner_start(owner, server.socket_path, uid, make_rings, &batch);
	assert_int_equal(read(owner->told, &byte, 1), 1);
}

static size_t count_lines(const char *body, const char *prefix)
{
	size_t count = 0, length = strlen(prefix);

	for (const char *line = body; line != NULL && *line != '\0';
	     line = strchr(line, '\n') != NULL ? strchr(line, '\n') + 1 : NULL)
		count += strncmp(line, prefix, length) == 0;
	return count;
}

static void test_flood_hides_nothing(void **state)
{
	struct haecer_msr_op op = { .kind = HAECER_MSR_ENERGY_READ, .cpu = 0,
				    .address = MSR_PKG_ENERGY_STATUS };
	struct haecer_schedule_spec spec = { .period_ns = 50000000, .major = 3, .minor = 1,
					     .capacity = 64 };
	struct ring_owner flood, other;
	struct http_reply reply;
	struct haecer_conn *conn;
	uint32_t schedule, instance;
	struct proc serve;
	char *err = NULL;
	unsigned port;
	size_t flooded;

	(void)state;
	create_rings(&flood, FLOOD_UID, 1, FLOOD);
	create_rings(&other, OTHER_UID, 2, 1);
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_batch_register(conn, &op, 1, &spec.handle), 0);
	assert_int_equal(haecer_schedule_start(conn, &spec, &schedule, &instance), 0);
	port = serve_start(&serve, server.socket_path, "200");
	http_get(port, "/metrics", NULL, &reply);
	flooded = count_lines(reply.body, "haecer_ring_producer_up{major=\"1\",");
	print_message("serve follows %zu of uid %u's %u rings\n", flooded, FLOOD_UID, FLOOD);
	assert_non_null(strstr(reply.body, "haecer_ring_producer_up{major=\"2\","));
	assert_non_null(strstr(reply.body, "haecer_ring_producer_up{major=\"3\","));
	assert_true(flooded >= 1 && flooded <= 256 / 2) /* serve.h: SERVE_MAX_RINGS between two uids */;
	free(reply.text);
	serve_stop(&serve, &err);
	assert_non_null(strstr(err, "uid 4601 lists more rings than its share"));
	free(err);
	assert_int_equal(haecer_schedule_stop(conn, schedule), 0);
	haecer_close(conn);
	ring_owner_end(&other);
	ring_owner_end(&flood);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_flood_hides_nothing, serve_teardown),
	};
	const char *arguments[] = { "--backend", "sim", "--max-rings-per-client", "4096", NULL };

	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
