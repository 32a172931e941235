/*
 * Slow and greedy clients cannot hold up the others. A client that pipelines requests and never
 * reads a reply is throttled (msrd stops reading from it), keeps being refused service while
 * other clients are answered, and is disconnected once its replies could not be sent for
 * --client-timeout-ms. With the shared receive buffers cut down to two (--recv-buffers 2), eight
 * clients reading concurrently and sending 24 KiB batches (frames spanning many buffers) are all
 * served: a receive that finds no buffer is re-armed, not lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "proto/wire.h"
#include "tests/lib/msrd_group.h"
#include "harness/policy_text.h"
#include "harness/raw_client.h"
#include "tests/lib/test_check.h"

#define CHILDREN 8

static const char policy[] = POLICY_TSC_PKG_FOR_ANYONE;

static struct msrd_server server;

static void test_client_that_never_reads(void **state)
{
	struct haecer_conn *good;
	uint8_t frame[64];
	size_t length;
	unsigned sent = 0;
	uint64_t value;
	int greedy = raw_connect(server.socket_path);

	(void)state;
	assert_true(greedy >= 0);
	length = raw_read_request(frame, sizeof(frame), 1, 0, 0x10);
	/* Pipeline requests until msrd takes no more for two seconds: it stopped reading. */
	assert_int_equal(fcntl(greedy, F_SETFL, O_NONBLOCK), 0);
	while (sent < 10000000) {
		struct pollfd writable = { .fd = greedy, .events = POLLOUT };
		if (send(greedy, frame, length, MSG_NOSIGNAL) == (ssize_t)length) {
			sent++;
			continue;
		}
		if (errno != EAGAIN || poll(&writable, 1, 2000) == 0)
			break;
	}
	assert_true(sent < 10000000);
	/* Everyone else is served meanwhile. */
	assert_int_equal(haecer_connect(server.socket_path, &good), 0);
	for (int i = 0; i < 100; i++)
		assert_int_equal(haecer_msr_read(good, 0, 0x10, &value), 0);
	/* And the greedy one is dropped after --client-timeout-ms. */
	assert_true(msrd_wait_log(&server, "its replies could not be sent", 60000));
	assert_int_equal(haecer_msr_read(good, 0, 0x611, &value), 0);
	haecer_close(good);
	close(greedy);
}

static int busy_client(void *argument)
{
	static struct haecer_msr_op ops[WIRE_MAX_BATCH_OPS];
	struct haecer_conn *conn;
	uint64_t value;
	unsigned seed = (unsigned)(uintptr_t)argument;

	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	for (unsigned i = 0; i < WIRE_MAX_BATCH_OPS; i++)
		ops[i] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = (i + seed) % 4,
						 .address = i % 2 ? 0x10 : 0x611 };
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 20; i++)
			CHECK_EQ(haecer_msr_read(conn, seed % 4, 0x611, &value), 0);
		CHECK_EQ(haecer_msr_batch(conn, ops, WIRE_MAX_BATCH_OPS), 0);
		for (unsigned i = 0; i < WIRE_MAX_BATCH_OPS; i++)
			CHECK_EQ(ops[i].status, 0);
	}
	haecer_close(conn);
	return 0;
}

static void test_concurrent_clients_few_buffers(void **state)
{
	pid_t children[CHILDREN];

	(void)state;
	for (unsigned i = 0; i < CHILDREN; i++) {
		children[i] = fork();
		assert_true(children[i] >= 0);
		if (children[i] == 0)
			_exit(busy_client((void *)(uintptr_t)i));
	}
	for (unsigned i = 0; i < CHILDREN; i++) {
		int status;
		assert_int_equal(waitpid(children[i], &status, 0), children[i]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--client-timeout-ms", "500",
				    "--recv-buffers", "2", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_client_that_never_reads),
		cmocka_unit_test(test_concurrent_clients_few_buffers),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
