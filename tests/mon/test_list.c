/*
 * haecer-mon list against a real msrd: a ring whose producer is alive and one whose producer
 * exited, both made through the client API by real processes, show their producer pid and
 * state, their owner (uid and pid), counter names from the ring header, records pushed and producer drops; a ring of a
 * major the policy does not let the caller monitor is not shown; the three formats agree; with
 * no server the exit status is 1 with one line saying why.
 */
#include "tests/mon/mon_test.h"

#include "tests/lib/msrd_group.h"

static struct msrd_server server;

/* The JSON line of ring (major, minor); fails when absent. */
static const char *ring_line(char **lines, size_t count, unsigned major, unsigned minor)
{
	char prefix[48];

	snprintf(prefix, sizeof(prefix), "{\"major\":%u,\"minor\":%u,", major, minor);
	for (size_t i = 0; i < count; i++)
		if (strncmp(lines[i], prefix, strlen(prefix)) == 0)
			return lines[i];
	fail_msg("ring %u.%u not listed", major, minor);
	return NULL;
}

static void expect_field(const char *line, const char *key, const char *value)
{
	char field[128];

	assert_true(json_field(line, key, field, sizeof(field)));
	assert_string_equal(field, value);
}

static void expect_number(const char *line, const char *key, long long value)
{
	char field[64];

	assert_true(json_field(line, key, field, sizeof(field)));
	assert_int_equal(strtoll(field, NULL, 10), value);
}

static void test_alive_gone_and_denied(void **state)
{
	const char *json[] = { "list", "--format", "json", NULL };
	const char *text[] = { "list", NULL };
	const char *csv[] = { "list", "-f", "csv", NULL };
	struct producer alive, gone, hidden;
	char *lines[64];
	char *out, *err;
	const char *line;
	size_t count;

	(void)state;
	producer_start(&alive, server.socket_path, 2, 1, 32);
	producer_say(&alive, "burst 7 0 100 16384 1000 1000");
	producer_sync(&alive);
	producer_start(&gone, server.socket_path, 2, 2, 16);
	producer_say(&gone, "burst 3 1 1 1 1 1");
	assert_int_equal(producer_end(&gone, "exit"), 0);
	producer_start(&hidden, server.socket_path, 15, 1, 16); /* created, not monitorable */

	assert_int_equal(mon_run(server.socket_path, json, &out, &err), 0);
	count = split_lines(out, lines, 64);
	line = ring_line(lines, count, 2, 1);
	expect_number(line, "instance", alive.instance);
	expect_number(line, "producer", alive.pid);
	expect_field(line, "state", "alive");
	expect_number(line, "capacity", 32);
	expect_number(line, "records", 7);
	expect_number(line, "lost", 0);
	expect_field(line, "counters", "RAPL_PKG,INSTRUCTIONS,DRAM");
	expect_number(line, "owner_uid", 0);
	expect_number(line, "owner_pid", alive.pid);
	line = ring_line(lines, count, 2, 2);
	expect_number(line, "producer", gone.pid);
	expect_field(line, "state", "gone");
	expect_number(line, "records", 3);
	for (size_t i = 0; i < count; i++)
		assert_null(strstr(lines[i], "{\"major\":15,"));
	free(out);
	free(err);

	assert_int_equal(mon_run(server.socket_path, text, &out, &err), 0);
	count = split_lines(out, lines, 64);
	assert_true(count >= 3);
	assert_non_null(strstr(lines[0], "major minor instance producer state"));
	free(out);
	free(err);
	assert_int_equal(mon_run(server.socket_path, csv, &out, &err), 0);
	count = split_lines(out, lines, 64);
	assert_string_equal(lines[0],
			    "major,minor,instance,producer,state,capacity,records,lost,consumers,"
			    "counters,owner_uid,owner_pid");
	free(out);
	free(err);
	assert_int_equal(producer_end(&alive, "exit"), 0);
	assert_int_equal(producer_end(&hidden, "exit"), 0);
}

static void test_no_server(void **state)
{
	const char *arguments[] = { "list", NULL };
	char path[PATH_MAX + 32];
	char *out, *err;

	(void)state;
	snprintf(path, sizeof(path), "%s/nobody-here.sock", server.dir);
	assert_int_equal(mon_run(path, arguments, &out, &err), 1);
	assert_string_equal(out, "");
	assert_non_null(strstr(err, "cannot connect to msrd"));
	assert_non_null(strchr(err, '\n'));
	assert_int_equal(strchr(err, '\n')[1], '\0');
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alive_gone_and_denied),
		cmocka_unit_test(test_no_server),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
}
