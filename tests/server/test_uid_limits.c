/*
 * Per-uid limits (review finding 4): one uid that takes its whole share of connections, ring
 * references, ring memory, registered batches or schedules is refused more (LIMIT, with the
 * option's name in the text and a log line), across all of its connections, while another uid
 * still gets each of them. Its share comes back when it lets go.
 * Limits here: --max-clients-per-uid 4, --max-rings-per-uid 3, --ring-memory-per-uid-mib 1,
 * --max-handles-per-uid 5, --max-schedules-per-uid 2 (server-wide ones left large).
 */
#include <errno.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "proto/wire.h"
#include "shm/ring.h"
#include "tests/lib/msrd_group.h"
#include "harness/raw_client.h"
#include "tests/lib/test_check.h"

#define GREEDY_UID 4401
#define OTHER_UID 4402
#define CONNECTIONS 4
#define MAJOR 5

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: base}\n"
	"rules:\n"
	"  - {match: {any: true}, allow: [base], create_rings: [5], monitor_rings: [5]}\n";

static struct msrd_server server;

static int make_ring(struct haecer_conn *conn, uint16_t minor, uint32_t capacity, int *fd)
{
	struct haecer_ring_spec spec = { .major = MAJOR, .minor = minor, .capacity = capacity,
					 .flags = RING_SINGLE_PRODUCER,
					 .clock = RING_CLOCK_MONOTONIC_RAW };

	return haecer_ring_create(conn, &spec, NULL, fd);
}

static int limit_text(struct haecer_conn *conn, const char *option)
{
	if (strstr(haecer_conn_error(conn), option) == NULL) {
		fprintf(stderr, "'%s' does not name %s\n", haecer_conn_error(conn), option);
		return 1;
	}
	return 0;
}

/* The uid's fifth connection is turned away with a LIMIT error frame. */
static int fifth_connection_refused(void)
{
	struct wire_header header;
	uint8_t reply[256];
	int fd = raw_connect(server.socket_path);

	CHECK(fd >= 0);
	CHECK_EQ(raw_read_frame(fd, reply, sizeof(reply), &header, 30000, NULL), 0);
	CHECK_EQ(header.op, WIRE_OP_ERROR);
	CHECK_EQ(header.status, WIRE_STATUS_LIMIT);
	CHECK_EQ(raw_wait_closed(fd, 30000), 0);
	close(fd);
	return 0;
}

static int rings_and_memory(struct haecer_conn **conns)
{
	struct haecer_ring_entry entry;
	int fds[3], fd;

	/* 1 MiB: one ring of 16384 records (about 512 KiB) fits, a second does not. */
	CHECK_EQ(make_ring(conns[0], 1, 16384, &fds[0]), 0);
	CHECK_EQ(make_ring(conns[1], 2, 16384, &fd), -ENOSPC);
	CHECK_EQ(limit_text(conns[1], "--ring-memory-per-uid-mib"), 0);
	/* Three ring references in all, over two connections. */
	CHECK_EQ(make_ring(conns[1], 3, 64, &fds[1]), 0);
	CHECK_EQ(haecer_ring_open(conns[2], MAJOR, 3, 0, &entry, &fds[2]), 0);
	CHECK_EQ(haecer_ring_open(conns[3], MAJOR, 3, 0, &entry, &fd), -ENOSPC);
	CHECK_EQ(limit_text(conns[3], "--max-rings-per-uid"), 0);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	return 0;
}

static int handles_and_schedules(struct haecer_conn **conns)
{
	const struct haecer_msr_op op = { .kind = HAECER_MSR_READ, .address = MSR_IA32_TSC };
	struct haecer_schedule_spec spec = { .period_ns = 50000000, .major = MAJOR, .capacity = 4 };
	uint32_t handles[5], handle, id, instance;

	for (int i = 0; i < 5; i++)
		CHECK_EQ(haecer_batch_register(conns[i % 2], &op, 1, &handles[i]), 0);
	CHECK_EQ(haecer_batch_register(conns[2], &op, 1, &handle), -ENOSPC);
	CHECK_EQ(limit_text(conns[2], "--max-handles-per-uid"), 0);
	for (int i = 0; i < 2; i++) {
		spec.handle = handles[i];
		spec.minor = (uint16_t)(10 + i);
		CHECK_EQ(haecer_schedule_start(conns[i % 2], &spec, &id, &instance), 0);
	}
	spec.handle = handles[2];
	spec.minor = 12;
	CHECK_EQ(haecer_schedule_start(conns[0], &spec, &id, &instance), -ENOSPC);
	CHECK_EQ(limit_text(conns[0], "--max-schedules-per-uid"), 0);
	return 0;
}

/* The other uid, while the greedy one holds its whole share. */
static int other_uid_is_served(void *argument)
{
	const struct haecer_msr_op op = { .kind = HAECER_MSR_READ, .address = MSR_IA32_TSC };
	struct haecer_schedule_spec spec = { .period_ns = 50000000, .major = MAJOR, .minor = 20,
					     .capacity = 4 };
	struct haecer_conn *conn;
	uint32_t id, instance;
	uint64_t value;
	int fd;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_msr_read(conn, 0, MSR_IA32_TSC, &value), 0);
	CHECK_EQ(make_ring(conn, 21, 16384, &fd), 0);
	close(fd);
	CHECK_EQ(haecer_batch_register(conn, &op, 1, &spec.handle), 0);
	CHECK_EQ(haecer_schedule_start(conn, &spec, &id, &instance), 0);
	CHECK_EQ(haecer_schedule_stop(conn, id), 0);
	haecer_close(conn);
	return 0;
}

/* Takes the whole share, says so on `ready`, and holds it until `go` is closed. */
static int greedy_client(int ready, int go)
{
	struct haecer_conn *conns[CONNECTIONS];
	char byte;

	for (int i = 0; i < CONNECTIONS; i++)
		CHECK_EQ(haecer_connect(server.socket_path, &conns[i]), 0);
	CHECK_EQ(fifth_connection_refused(), 0);
	CHECK_EQ(rings_and_memory(conns), 0);
	CHECK_EQ(handles_and_schedules(conns), 0);
	CHECK_EQ(write(ready, "R", 1), 1);
	CHECK_EQ(read(go, &byte, 1), 0);
	for (int i = 0; i < CONNECTIONS; i++)
		haecer_close(conns[i]);
	return 0;
}

/* greedy_client as GREEDY_UID in a child; returns its pid, *ready and *go the other ends. */
static pid_t start_greedy(int *ready, int *go)
{
	int to_parent[2], to_child[2];
	pid_t pid;

	assert_int_equal(pipe(to_parent), 0);
	assert_int_equal(pipe(to_child), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(to_parent[0]);
		close(to_child[1]);
		if (setgroups(0, NULL) < 0 || setgid(GREEDY_UID) < 0 || setuid(GREEDY_UID) < 0)
			_exit(125);
		_exit(greedy_client(to_parent[1], to_child[0]));
	}
	close(to_parent[1]);
	close(to_child[0]);
	*ready = to_parent[0];
	*go = to_child[1];
	return pid;
}

/* Once it has let go, its share is there again. */
static int greedy_again(void *argument)
{
	struct haecer_conn *conns[CONNECTIONS];
	int fd;

	(void)argument;
	for (int i = 0; i < CONNECTIONS; i++) {
		int status = -1;
		for (int attempt = 0; attempt < 1000 && status < 0; attempt++) {
			status = haecer_connect(server.socket_path, &conns[i]);
			if (status < 0)
				usleep(10000); /* the closed ones may not be gone yet */
		}
		CHECK_EQ(status, 0);
	}
	CHECK_EQ(make_ring(conns[0], 30, 64, &fd), 0);
	close(fd);
	for (int i = 0; i < CONNECTIONS; i++)
		haecer_close(conns[i]);
	return 0;
}

static void test_one_uid_cannot_take_all(void **state)
{
	int ready, go, status;
	char byte = 0;
	pid_t greedy;

	(void)state;
	greedy = start_greedy(&ready, &go);
	/* Nothing arrives on `ready` if the greedy client failed: then its exit says why. */
	if (read(ready, &byte, 1) == 1)
		assert_int_equal(run_as(OTHER_UID, OTHER_UID, NULL, 0, other_uid_is_served, NULL),
				 0);
	close(go);
	assert_int_equal(waitpid(greedy, &status, 0), greedy);
	close(ready);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(byte, 'R');
	assert_true(msrd_log_contains(&server, "refused a connection"));
	assert_true(msrd_log_contains(&server, "uid 4401 holds 4 connections, its limit "
					       "(--max-clients-per-uid)"));
	assert_int_equal(run_as(GREEDY_UID, GREEDY_UID, NULL, 0, greedy_again, NULL), 0);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--max-clients-per-uid", "4",
				    "--max-rings-per-uid", "3", "--ring-memory-per-uid-mib", "1",
				    "--max-handles-per-uid", "5", "--max-schedules-per-uid", "2",
				    "--ring-grace-ms", "0", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_uid_cannot_take_all),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
