/*
 * A client's memory outlives every completion of the loop turn that ends it (the review's
 * use-after-free, found by ASan in the sanitizer pass):
 *   - many clients each send a READ and shut their sending side down in the same instant, so
 *     msrd sees the request and the end of input in one turn: every one still gets its reply
 *     (a half-closed client is answered, then closed), then msrd closes it;
 *   - the same with clients that close their socket whole right after sending: msrd drops them
 *     and keeps serving;
 *   - SIGTERM while the shared receive buffers are exhausted (--recv-buffers 2 and clients
 *     sending 24 KiB batches), so clients waiting to re-arm their receive are closed in the
 *     turn that queued them: msrd exits 0 with a log free of sanitizer reports.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "proto/wire.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"
#include "harness/raw_client.h"

#define TIMEOUT_MS 120000u
#define HAMMERS 8

static const char policy[] = POLICY_TSC_PKG_FOR_ANYONE;

static unsigned clients;
static struct msrd_server server;
static pid_t children[HAMMERS];

/* Connect them all first, then send and end each in one tight loop. */
static int *connect_and_send(const struct msrd_server *msrd, bool close_whole)
{
	int *fds = calloc(clients, sizeof(int));
	uint8_t frame[64];

	assert_non_null(fds);
	for (unsigned i = 0; i < clients; i++) {
		fds[i] = raw_connect(msrd->socket_path);
		assert_true(fds[i] >= 0);
	}
	for (unsigned i = 0; i < clients; i++) {
		size_t length = raw_read_request(frame, sizeof(frame), i + 1, 0, 0x10);
		assert_int_equal(raw_send(fds[i], frame, length), 0);
		if (close_whole) {
			close(fds[i]);
			fds[i] = -1;
		} else {
			assert_int_equal(shutdown(fds[i], SHUT_WR), 0);
		}
	}
	return fds;
}

static void assert_serves(const struct msrd_server *msrd)
{
	struct haecer_conn *conn;
	uint64_t value;

	assert_int_equal(haecer_connect(msrd->socket_path, &conn), 0);
	assert_int_equal(haecer_msr_read(conn, 0, 0x10, &value), 0);
	haecer_close(conn);
}

/* A failed test leaves nothing running behind it. */
static int teardown(void **state)
{
	(void)state;
	for (unsigned i = 0; i < HAMMERS; i++) {
		if (children[i] > 0) {
			kill(children[i], SIGKILL);
			waitpid(children[i], NULL, 0);
			children[i] = 0;
		}
	}
	if (server.pid > 0)
		msrd_kill(&server);
	return 0;
}

static void test_request_then_end_of_input(void **state)
{
	const char *arguments[] = { "--backend", "sim", NULL };
	struct wire_header header;
	uint8_t reply[256];
	int *fds;

	(void)state;
	assert_int_equal(msrd_start(&server, policy, arguments), 0);
	fds = connect_and_send(&server, false);
	for (unsigned i = 0; i < clients; i++) {
		assert_int_equal(raw_read_frame(fds[i], reply, sizeof(reply), &header, TIMEOUT_MS,
						NULL),
				 0);
		assert_int_equal(header.op, WIRE_OP_READ);
		assert_int_equal(header.status, WIRE_STATUS_OK);
		assert_int_equal(header.request_id, i + 1);
		assert_int_equal(raw_wait_closed(fds[i], TIMEOUT_MS), 0);
		close(fds[i]);
	}
	free(fds);
	fds = connect_and_send(&server, true);
	free(fds);
	assert_serves(&server);
	assert_int_equal(msrd_stop(&server), 0);
}

/* Send 24 KiB batches (twelve 2 KiB receive buffers each) until msrd goes away. */
static int hammer(const char *socket_path)
{
	static struct haecer_msr_op ops[WIRE_MAX_BATCH_OPS];
	struct haecer_conn *conn;

	if (haecer_connect(socket_path, &conn) < 0)
		return 0;
	for (unsigned i = 0; i < WIRE_MAX_BATCH_OPS; i++)
		ops[i] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = i % 4,
						 .address = i % 2 ? 0x10 : 0x611 };
	while (haecer_msr_batch(conn, ops, WIRE_MAX_BATCH_OPS) == 0)
		;
	haecer_close(conn);
	return 0;
}

static void stop_under_buffer_pressure(void)
{
	const char *arguments[] = { "--backend", "sim", "--recv-buffers", "2", "--log-level",
				    "debug", NULL };

	assert_int_equal(msrd_start(&server, policy, arguments), 0);
	for (unsigned i = 0; i < HAMMERS; i++) {
		children[i] = fork();
		assert_true(children[i] >= 0);
		if (children[i] == 0)
			_exit(hammer(server.socket_path));
	}
	assert_true(msrd_wait_log(&server, "receive buffers exhausted", TIMEOUT_MS));
	assert_int_equal(msrd_stop(&server), 0);
	for (unsigned i = 0; i < HAMMERS; i++) {
		int status;
		assert_int_equal(waitpid(children[i], &status, 0), children[i]);
		children[i] = 0;
		assert_true(WIFEXITED(status));
	}
}

static void test_stop_while_receives_wait_for_buffers(void **state)
{
	unsigned rounds = harness_small_scale() ? 1 : 4;

	(void)state;
	for (unsigned round = 0; round < rounds; round++)
		stop_under_buffer_pressure();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_request_then_end_of_input, teardown),
		cmocka_unit_test_teardown(test_stop_while_receives_wait_for_buffers, teardown),
	};

	clients = harness_small_scale() ? 100 : 500;
	if (harness_raise_fd_limit(clients + 64) < clients + 64) {
		fprintf(stderr, "cannot raise RLIMIT_NOFILE for %u clients\n", clients);
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
