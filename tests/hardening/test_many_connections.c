/*
 * One client opens 10 000 connections (2 000 under valgrind) to one msrd, while a bystander
 * client reads through it throughout.
 *   - With limits that allow them, every connection is served: each sends a HELLO and a READ
 *     before any reply is read, and each gets both replies, in order.
 *   - With msrd's default limits (8192 clients, half of them per uid), exactly the connections
 *     within the uid's share are served; every one past it gets an ERROR frame with LIMIT and is
 *     closed, and msrd logs each refusal; a client of another uid is still served.
 * Either way msrd keeps serving, and once the connections are gone its descriptor count is
 * what it was before: nothing of 10 000 clients is left behind.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "proto/wire.h"
#include "tests/hardening/hardening.h"
#include "harness/msrd_harness.h"
#include "harness/raw_client.h"
#include "tests/lib/test_check.h"

#define TIMEOUT_MS 120000u

static unsigned connections;

/* A HELLO and a READ, from client "flood-ID". */
static size_t hello_and_read(uint8_t *frames, uint32_t id)
{
	char name[32];

	snprintf(name, sizeof(name), "flood-%u", id);
	return raw_hello_and_read(frames, name, id);
}

/* Connect them all first, then send, then read: msrd holds every one at once. Returns how many
 * were served; the others must have been refused with LIMIT. The connections stay open. */
static unsigned flood(const struct msrd_server *server, int *fds)
{
	uint8_t frames[256];
	unsigned served = 0;

	for (unsigned i = 0; i < connections; i++) {
		fds[i] = raw_connect(server->socket_path);
		assert_true(fds[i] >= 0);
	}
	for (unsigned i = 0; i < connections; i++) {
		size_t length = hello_and_read(frames, 2 * i + 1);
		/* A refused connection may be closed already: its send fails, that is fine. */
		(void)raw_send(fds[i], frames, length);
	}
	for (unsigned i = 0; i < connections; i++) {
		int replies = raw_read_hello_and_read(fds[i], 2 * i + 1, TIMEOUT_MS);
		assert_true(replies >= 0);
		served += (unsigned)replies;
	}
	return served;
}

static int other_uid_served(void *argument)
{
	struct haecer_conn *conn;
	uint64_t value;

	CHECK_EQ(haecer_connect(argument, &conn), 0);
	CHECK_EQ(haecer_msr_read(conn, 0, 0x10, &value), 0);
	haecer_close(conn);
	return 0;
}

static void run(const char *const *arguments, unsigned expect_served, bool expect_refused)
{
	int *fds = calloc(connections, sizeof(int));
	struct msrd_server server;
	struct bystander bystander;
	int before;

	assert_non_null(fds);
	assert_int_equal(msrd_start(&server, HARDENING_POLICY, arguments), 0);
	assert_int_equal(bystander_start(&bystander, server.socket_path), 0);
	assert_true(bystander_progress(&bystander, 2));
	before = process_fd_count(server.pid);
	assert_int_equal(flood(&server, fds), expect_served);
	if (expect_refused) {
		assert_int_equal(msrd_log_count(&server, "refused a connection (pid "),
				 connections - expect_served);
		assert_true(msrd_log_contains(&server, "(--max-clients-per-uid)"));
	}
	/* While root holds all it may, another uid still gets in and is served. */
	assert_int_equal(run_as(4001, 4001, NULL, 0, other_uid_served, server.socket_path), 0);
	assert_true(bystander_progress(&bystander, 2));
	for (unsigned i = 0; i < connections; i++)
		close(fds[i]);
	free(fds);
	assert_int_equal(process_fd_count_settled(server.pid, before), before);
	assert_true(bystander_stop(&bystander));
	assert_int_equal(msrd_stop(&server), 0);
}

static void test_all_served(void **state)
{
	const char *arguments[] = { "--backend", "sim", "--max-clients", "30000",
				    "--max-clients-per-uid", "30000", NULL };

	(void)state;
	run(arguments, connections, false);
}

/* The default limits: 8192 clients, 4096 per uid; the bystander is one of root's. */
static void test_default_limits(void **state)
{
	const char *small[] = { "--backend", "sim", "--max-clients", "1000", NULL };
	const char *defaults[] = { "--backend", "sim", NULL };
	bool scaled = harness_small_scale();

	(void)state;
	run(scaled ? small : defaults, (scaled ? 500 : 4096) - 1, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_served),
		cmocka_unit_test(test_default_limits),
	};

	connections = harness_small_scale() ? 2000 : 10000;
	if (harness_raise_fd_limit(connections + 200) < connections + 200) {
		printf("cannot raise the descriptor limit to %u\n", connections + 200);
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
