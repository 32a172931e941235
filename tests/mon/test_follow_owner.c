/*
 * Ring shadowing (issue 14, item 8). Anyone granted create_rings for a major may publish a newer
 * instance of any (major, minor) of it, and "the newest" then shows their readings. Root's
 * producer fills ring 1.6; uid 4001 then publishes a newer 1.6 with records of its own:
 *   - `haecer-mon list` shows each ring's owner uid and pid;
 *   - a follow of root's 1.6 that is running when the newer instance appears warns on stderr,
 *     naming the newer instance, its owner uid and pid;
 *   - `follow --uid 0 1 6` follows root's ring, not the newer one (whose records differ), and
 *     `--uid 0` on uid 4001's instance by number is refused; without --uid the newest (uid
 *     4001's) is followed.
 */
#include "tests/mon/mon_test.h"

#include "tests/lib/msrd_group.h"

#define OTHER 4001

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: t}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [t], create_rings: [1-9], monitor_rings: [1-9]}\n"
	"  - {match: {uid: 4001}, allow: [t], create_rings: [1-9], monitor_rings: [1-9]}\n";

static struct msrd_server server;

struct shadow {
	struct ring_owner owner;
	uint32_t instance;
};

/* A newer ring 1.6 with records 9000, 9001, 9002; its instance goes to `told`. */
static int make_shadow(struct haecer_conn *conn, int told, void *argument)
{
	struct haecer_ring_spec spec = ring_owner_spec(1, 6);
	struct haecer_ring_entry entry;
	struct ring_producer producer;
	int fd;

	(void)argument;
	if (haecer_ring_create(conn, &spec, &entry, &fd) < 0 ||
	    ring_producer_attach(&producer, fd) < 0)
		return 1;
	for (uint64_t i = 0; i < 3; i++) {
		struct ring_record record = { .value = 9000 + i, .timestamp = 1 + i };
		ring_push(&producer, &record);
	}
	return write(told, &entry.instance, sizeof(entry.instance)) < 0;
}

/* uid 4001's shadow of ring 1.6; it stays until shadow_end. */
static void shadow_start(struct shadow *shadow)
{
	ring_owner_start(&shadow->owner, server.socket_path, OTHER, make_shadow, NULL);
	assert_int_equal(read(shadow->owner.told, &shadow->instance, sizeof(shadow->instance)),
			 sizeof(shadow->instance));
}

/* The "value" fields of a follow's JSON lines, as one comma-separated string. */
static void values_of(char *out, char *values, size_t size)
{
	char *lines[16];
	size_t count = split_lines(out, lines, 16);

	values[0] = '\0';
	for (size_t i = 0; i < count; i++) {
		char value[32];
		if (json_field(lines[i], "value", value, sizeof(value)))
			snprintf(values + strlen(values), size - strlen(values), "%s%s",
				 values[0] != '\0' ? "," : "", value);
	}
}

static void test_owner_shown_chosen_and_warned(void **state)
{
	const char *list[] = { "list", "-f", "json", NULL };
	const char *follow_root[] = { "follow", "--uid", "0", "-f", "json", "--count", "2", "1", "6",
				      NULL };
	const char *follow_newest[] = { "follow", "-f", "json", "--count", "3", "1", "6", NULL };
	const char *watching[] = { "follow", "-f", "json", "--duration", "4", "1", "6", NULL };
	char instance[16], expected[160], values[128], line[512];
	const char *wrong_owner[] = { "follow", "--uid", "0", "1", "6", instance, NULL };
	struct producer producer;
	struct shadow shadow;
	struct proc follower;
	char *out = NULL, *err = NULL;

	(void)state;
	producer_start(&producer, server.socket_path, 1, 6, 16);
	producer_say(&producer, "push 1 11 1");
	producer_say(&producer, "push 1 12 2");
	producer_sync(&producer);
	mon_start(&follower, server.socket_path, watching);
	/* Its first records printed: it has opened root's ring, the newest so far. */
	for (int i = 0; i < 2; i++)
		assert_true(read_line(follower.out, line, sizeof(line), MON_TEST_TIMEOUT_MS));
	shadow_start(&shadow);

	assert_int_equal(proc_finish(&follower, &out, &err, MON_TEST_TIMEOUT_MS), 0);
	snprintf(expected, sizeof(expected), "warning: ring 1.6 has a newer instance %u by uid %d "
		 "(pid %d), not by uid 0", shadow.instance, OTHER, (int)shadow.owner.pid);
	if (strstr(err, expected) == NULL)
		fprintf(stderr, "follow said: %s\n", err);
	assert_non_null(strstr(err, expected));
	free(out);
	free(err);

	assert_int_equal(mon_run(server.socket_path, list, &out, &err), 0);
	snprintf(expected, sizeof(expected), "\"owner_uid\":%d,\"owner_pid\":%d}", OTHER,
		 (int)shadow.owner.pid);
	assert_non_null(strstr(out, expected));
	snprintf(expected, sizeof(expected), "\"owner_uid\":0,\"owner_pid\":%d}", (int)producer.pid);
	assert_non_null(strstr(out, expected));
	free(out);
	free(err);

	assert_int_equal(mon_run(server.socket_path, follow_root, &out, &err), 0);
	values_of(out, values, sizeof(values));
	assert_string_equal(values, "11,12");
	free(out);
	free(err);
	assert_int_equal(mon_run(server.socket_path, follow_newest, &out, &err), 0);
	values_of(out, values, sizeof(values));
	assert_string_equal(values, "9000,9001,9002");
	free(out);
	free(err);
	snprintf(instance, sizeof(instance), "%u", shadow.instance);
	assert_int_equal(mon_run(server.socket_path, wrong_owner, &out, &err), 1);
	assert_non_null(strstr(err, "was created by uid 4001, not by uid 0"));
	free(out);
	free(err);

	ring_owner_end(&shadow.owner);
	assert_int_equal(producer_end(&producer, "exit"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_owner_shown_chosen_and_warned),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
