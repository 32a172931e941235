/*
 * Thousands of idle connections (4000; 300 under valgrind) against the real msrd: each is set up
 * (its HELLO and a READ answered), then stays idle while one working client makes reads that
 * must all come back right (the TSC, never going back; a register the policy does not name
 * refused). Afterwards every idle client, idle all that time, still gets its READ answered with
 * its own request id. Then they disconnect: msrd logs every one of them leaving and frees them,
 * for --max-clients is only a few more than them, and as many fresh connections are served
 * again (issue 31: a loop turn, a tick and a request cost nothing per idle connection, and the
 * bookkeeping that makes that so loses no one).
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

#include "haecer/msrd.h"
#include "proto/wire.h"
#include "tests/lib/msrd_group.h"
#include "harness/policy_text.h"
#include "harness/raw_client.h"

#define TIMEOUT_MS 120000u
#define TSC 0x10u
#define UNNAMED_MSR 0x611u /* PKG_ENERGY_STATUS: not in the policy */
#define SPARE_CLIENTS 4u   /* --max-clients is the idle ones and these */

static const char policy[] = POLICY_TSC_FOR_ANYONE;

static struct msrd_server server;
static unsigned idle_count;
static unsigned working_reads;
static char max_clients[16];

/* Read one reply on `fd` and check it answers request `id` of kind `op` successfully. */
static void expect_reply(int fd, uint16_t op, uint32_t id)
{
	uint8_t reply[256];
	struct wire_header header;

	assert_int_equal(raw_read_frame(fd, reply, sizeof(reply), &header, TIMEOUT_MS, NULL), 0);
	assert_int_equal(header.op, op);
	assert_int_equal(header.status, WIRE_STATUS_OK);
	assert_int_equal(header.request_id, id);
}

/* `count` connections, each known to msrd once its HELLO and READ are answered. All are sent
 * before any reply is read: msrd has every one of them connected at once. */
static int *connect_clients(unsigned count)
{
	int *fds = calloc(count, sizeof(int));
	uint8_t frames[256];

	assert_non_null(fds);
	for (unsigned i = 0; i < count; i++) {
		size_t length = raw_hello_and_read(frames, "idle", 2 * i + 1);
		fds[i] = raw_connect(server.socket_path);
		assert_true(fds[i] >= 0);
		assert_int_equal(raw_send(fds[i], frames, length), 0);
	}
	for (unsigned i = 0; i < count; i++)
		assert_int_equal(raw_read_hello_and_read(fds[i], 2 * i + 1, TIMEOUT_MS), 1);
	return fds;
}

/* Close them all and wait until msrd has logged every one leaving. */
static void disconnect_clients(int *fds, unsigned count)
{
	size_t before = msrd_log_count(&server, "): disconnected");

	for (unsigned i = 0; i < count; i++)
		close(fds[i]);
	free(fds);
	for (unsigned waited = 0; waited < TIMEOUT_MS; waited += 50) {
		if (msrd_log_count(&server, "): disconnected") >= before + count)
			break;
		usleep(50000);
	}
	/* At least: a connection closed just before (the working client's) may be logged after
	 * `before` was counted (a fresh-clone ASan run saw 8002 for 8001). */
	assert_true(msrd_log_count(&server, "): disconnected") >= before + count);
}

/* One client's reads beside the idle ones: every one answered, and right. */
static void working_client(void)
{
	struct haecer_conn *conn;
	uint64_t value, previous = 0;

	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	for (unsigned i = 0; i < working_reads; i++) {
		assert_int_equal(haecer_msr_read(conn, 0, TSC, &value), 0);
		assert_true(value >= previous);
		assert_true(value != 0);
		previous = value;
		if (i % 256 == 0)
			assert_true(haecer_msr_read(conn, 0, UNNAMED_MSR, &value) < 0);
	}
	haecer_close(conn);
}

static void test_idle_clients(void **state)
{
	uint8_t frame[64];
	int *fds;

	(void)state;
	fds = connect_clients(idle_count);
	working_client();
	/* Idle all this time, each is still served: all asked first, then all answers read. */
	for (unsigned i = 0; i < idle_count; i++) {
		size_t length = raw_read_request(frame, sizeof(frame), 100000 + i, 0, TSC);
		assert_true(length > 0);
		assert_int_equal(raw_send(fds[i], frame, length), 0);
	}
	for (unsigned i = 0; i < idle_count; i++)
		expect_reply(fds[i], WIRE_OP_READ, 100000 + i);
	disconnect_clients(fds, idle_count);
	/* Freed: had msrd kept them, --max-clients would turn these away. */
	fds = connect_clients(idle_count);
	working_client();
	disconnect_clients(fds, idle_count);
}

int main(void)
{
	/* All of them are one uid's: its share is the whole server here. */
	const char *arguments[] = { "--backend", "sim", "--max-clients", max_clients,
				    "--max-clients-per-uid", max_clients, NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_clients),
	};

	idle_count = harness_small_scale() ? 300 : 4000;
	working_reads = harness_small_scale() ? 500 : 5000;
	if (harness_raise_fd_limit(idle_count + 256) < idle_count + 256) {
		fprintf(stderr, "cannot raise RLIMIT_NOFILE for %u clients\n", idle_count);
		return 77;
	}
	snprintf(max_clients, sizeof(max_clients), "%u", idle_count + SPARE_CLIENTS);
	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
