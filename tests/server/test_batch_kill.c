/*
 * A client killed with SIGKILL right after sending a large writing batch (msr backend on a
 * stand-in tree, so the batch is in flight in msrd's io_uring when the client dies): msrd
 * finishes or drops the request cleanly, the batch is all-or-nothing (a validated batch runs
 * whole), msrd keeps serving other clients, frees everything the client held (checked by the
 * sanitizer and valgrind runs at shutdown), and SIGTERM still restores every register.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "proto/wire.h"
#include "harness/msrd_harness.h"
#include "harness/raw_client.h"

#define REGISTERS 256u
#define SCRATCH 0x800u
#define ROUNDS 5
#define SENTINEL 0x1000u

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: SCRATCH, range: [0x800, 0xFFF], read: true, write_mask: 0xFFFFFFFFFFFFFFFF,\n"
	"     set: base}\n"
	"  - {name: SENTINEL, address: 0x1000, read: true, write_mask: 0xFF, set: base}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [base]}\n";

static struct msrd_server server;
static char tree[PATH_MAX + 16];

static uint32_t scratch(unsigned index)
{
	return SCRATCH + 8 * (index % REGISTERS);
}

/* The doomed client: one batch of 2 * REGISTERS writes (both CPUs), then SIGKILL. */
static void send_batch_and_die(unsigned round)
{
	static uint8_t frame[WIRE_MAX_FRAME];
	struct wire_writer writer;
	int fd = raw_connect(server.socket_path);
	int length;

	if (fd < 0)
		_exit(2);
	wire_writer_init(&writer, frame + WIRE_HEADER_SIZE, sizeof(frame) - WIRE_HEADER_SIZE);
	wire_put_batch_header(&writer, 2 * REGISTERS);
	for (unsigned i = 0; i < 2 * REGISTERS; i++) {
		struct wire_batch_op op = {
			.kind = WIRE_BATCH_WRITE,
			.cpu = i / REGISTERS,
			.address = scratch(i),
			.value = round * 10000 + i + 1,
		};
		wire_put_batch_op(&writer, &op);
	}
	length = wire_frame_finish(frame, sizeof(frame), WIRE_OP_BATCH, 0, 0, 7, writer.used);
	if (length < 0 || raw_send(fd, frame, (size_t)length) < 0)
		_exit(3);
	raise(SIGKILL);
}

static void test_killed_mid_batch(void **state)
{
	static struct haecer_msr_op ops[2 * REGISTERS + 1];
	char line[64];
	uint64_t previous = 0; /* 0: the registers' original value */

	(void)state;
	for (unsigned round = 1; round <= ROUNDS; round++) {
		struct haecer_conn *conn;
		int status;
		unsigned applied = 0;
		pid_t child = fork();

		assert_true(child >= 0);
		if (child == 0)
			send_batch_and_die(round);
		assert_int_equal(waitpid(child, &status, 0), child);
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

		/* Once msrd has seen the client go, it has all its bytes: the batch was refused,
		 * ran, or waits for the write lock. A batch that writes too queues behind it. */
		snprintf(line, sizeof(line), "pid %d): disconnected", (int)child);
		assert_true(msrd_wait_log(&server, line, 60000));
		/* Another client is served, and sees the batch all or nothing. */
		assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
		ops[0] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .address = SENTINEL,
						 .value = round };
		for (unsigned i = 0; i < 2 * REGISTERS; i++)
			ops[i + 1] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ,
							     .cpu = i / REGISTERS,
							     .address = scratch(i) };
		assert_int_equal(haecer_msr_batch(conn, ops, 2 * REGISTERS + 1), 0);
		assert_int_equal(ops[0].status, 0);
		memmove(ops, ops + 1, sizeof(ops[0]) * 2 * REGISTERS);
		for (unsigned i = 0; i < 2 * REGISTERS; i++) {
			assert_int_equal(ops[i].status, 0);
			if (ops[i].value == round * 10000 + i + 1)
				applied++;
			else if (previous != 0)
				assert_int_equal(ops[i].value, previous * 10000 + i + 1);
			else
				assert_int_equal(ops[i].value, 0);
		}
		assert_true(applied == 0 || applied == 2 * REGISTERS);
		if (applied > 0)
			previous = round;
		haecer_close(conn);
	}
	assert_true(msrd_wait_log(&server, "disconnected", 10000));
}

int main(void)
{
	const char *arguments[] = { "--backend", "msr", "--dev-root", tree, NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_killed_mid_batch),
	};
	int failures;

	if (msrd_prepare(&server, policy) < 0)
		return 1;
	snprintf(tree, sizeof(tree), "%s/root", server.dir);
	if (harness_standin_msr_tree(tree, 2, 0x2000) < 0 || msrd_launch(&server, arguments) < 0) {
		msrd_kill(&server);
		return 1;
	}
	failures = cmocka_run_group_tests(tests, NULL, NULL);
	if (msrd_signal(&server, SIGTERM) < 0 || !msrd_wait_log(&server, "stopped:", 60000))
		failures++;
	for (unsigned i = 0; i < 2 * REGISTERS; i++) {
		uint64_t value = 1;
		harness_standin_read(tree, i / REGISTERS, scratch(i), &value);
		if (value != 0) {
			fprintf(stderr, "cpu %u 0x%x not restored: 0x%llx\n", i / REGISTERS,
				scratch(i), (unsigned long long)value);
			failures++;
			break;
		}
	}
	if (msrd_stop(&server) < 0)
		failures++;
	return failures == 0 ? 0 : 1;
}
