/*
 * msrd started as root with --user nobody: /proc/PID/status shows it running as nobody with only
 * CAP_SYS_RAWIO (permitted, effective, bounding; nothing inheritable or ambient), no new
 * privileges, and its system call filter on (Seccomp: 2; off under valgrind, see
 * harness/msrd_harness.h). Every op of the protocol works under it (HELLO to SCHEDULE_STOP,
 * rings created and opened through memfds, counter slots, simulator control), and so do a SIGHUP
 * reload and a clean SIGTERM. On the msr backend (stand-in tree) the devices and the journal,
 * opened as root, keep working after the switch, and SIGTERM still restores the registers; the
 * server beside the privileged parent (whose status is the one above) is nobody with no
 * capability at all and its own filter.
 * The socket gets the configured owner, group and mode: a uid outside them cannot connect.
 * A socket directory writable by its group or by others (sticky or not) is refused.
 * (A policy file or directory others can write is refused by test_cli and test_reload.)
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
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "shm/ring.h"
#include "tests/hardening/hardening.h"
#include "harness/msrd_harness.h"
#include "harness/process_figures.h"
#include "harness/raw_client.h"
#include "tests/lib/test_check.h"

#define CAP_SYS_RAWIO_MASK (1ull << 17)
#define NOBODY 65534u
#define WAIT_MS 60000u

/* A field of /proc/PID/status, which must be there. */
static unsigned long long status_field(pid_t pid, const char *name, int base)
{
	char field[32];
	unsigned long long value;

	snprintf(field, sizeof(field), "%s:", name);
	value = harness_process_status_number(pid, field, base);
	assert_true(value != ~0ull);
	return value;
}

/* The server beside msrd's privileged parent: nobody too, no capability at all. */
static void check_server_status(const struct msrd_server *server)
{
	pid_t child = -1;
	int descriptor = -1;

	assert_int_equal(msrd_privsep_server(server, &child, &descriptor), 0);
	assert_int_equal(status_field(child, "Uid", 10), NOBODY);
	assert_int_equal(status_field(child, "CapEff", 16), 0);
	assert_int_equal(status_field(child, "CapPrm", 16), 0);
	assert_int_equal(status_field(child, "CapBnd", 16), 0);
	assert_int_equal(status_field(child, "NoNewPrivs", 10), harness_valgrind() ? 0 : 1);
	assert_int_equal(status_field(child, "Seccomp", 10), harness_valgrind() ? 0 : 2);
}

static void check_status(pid_t pid)
{
	assert_int_equal(status_field(pid, "Uid", 10), NOBODY);
	assert_int_equal(status_field(pid, "Gid", 10), NOBODY);
	assert_int_equal(status_field(pid, "CapEff", 16), CAP_SYS_RAWIO_MASK);
	assert_int_equal(status_field(pid, "CapPrm", 16), CAP_SYS_RAWIO_MASK);
	assert_int_equal(status_field(pid, "CapBnd", 16), CAP_SYS_RAWIO_MASK);
	assert_int_equal(status_field(pid, "CapInh", 16), 0);
	assert_int_equal(status_field(pid, "CapAmb", 16), 0);
	assert_int_equal(status_field(pid, "NoNewPrivs", 10), harness_valgrind() ? 0 : 1);
	assert_int_equal(status_field(pid, "Seccomp", 10), harness_valgrind() ? 0 : 2);
}

static void check_rings(struct haecer_conn *conn)
{
	struct haecer_ring_spec spec = { .major = 1, .minor = 7, .capacity = 64,
					 .clock = RING_CLOCK_MONOTONIC_RAW, .counter_count = 1,
					 .counters = { { .name = "X", .package = -1, .cpu = -1 } } };
	struct haecer_ring_entry entries[8];
	struct ring_producer producer;
	struct ring_consumer consumer;
	struct ring_record record;
	uint64_t lost = 0;
	int fd;

	assert_int_equal(haecer_ring_create(conn, &spec, NULL, &fd), 0);
	assert_int_equal(ring_producer_attach(&producer, fd), 0);
	close(fd);
	assert_int_equal(ring_push(&producer, &(struct ring_record){ .value = 42 }), 0);
	assert_int_equal(haecer_ring_open(conn, 1, 7, 0, NULL, &fd), 0);
	assert_int_equal(ring_consumer_attach(&consumer, fd), 0);
	close(fd);
	assert_int_equal(ring_consume(&consumer, &record, 1, &lost), 1);
	assert_int_equal(record.value, 42);
	assert_true(haecer_ring_list(conn, entries, 8) >= 1);
	ring_consumer_detach(&consumer);
	ring_producer_detach(&producer);
}

static void check_slots(struct haecer_conn *conn)
{
	struct haecer_slot slot;
	uint64_t value;

	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, -1, &slot), 0);
	assert_int_equal(haecer_slot_program(conn, slot.id, 0x4300c0), 0);
	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, 1), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &value, true), 0);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
}

static void check_schedule(struct haecer_conn *conn)
{
	struct haecer_msr_op ops[2] = {
		{ .kind = HAECER_MSR_READ, .address = 0x10 },
		{ .kind = HAECER_MSR_ENERGY_READ, .address = 0x611 },
	};
	struct haecer_schedule_spec spec = { .period_ns = 1000000, .major = 2, .minor = 1,
					     .capacity = 64 };
	struct ring_consumer consumer;
	struct ring_record records[4];
	uint32_t schedule, instance;
	uint64_t lost = 0;
	ssize_t got = 0;
	int fd;

	assert_int_equal(haecer_batch_register(conn, ops, 2, &spec.handle), 0);
	assert_int_equal(haecer_batch_run(conn, spec.handle, ops, 2), 0);
	assert_int_equal(haecer_schedule_start(conn, &spec, &schedule, &instance), 0);
	assert_int_equal(haecer_ring_open(conn, 2, 1, instance, NULL, &fd), 0);
	assert_int_equal(ring_consumer_attach(&consumer, fd), 0);
	close(fd);
	for (unsigned waited = 0; got == 0 && waited < WAIT_MS; waited += 10) {
		got = ring_consume(&consumer, records, 4, &lost);
		usleep(10000);
	}
	assert_true(got > 0);
	ring_consumer_detach(&consumer);
	assert_int_equal(haecer_schedule_stop(conn, schedule), 0);
	assert_int_equal(haecer_batch_release(conn, spec.handle), 0);
}

/* Every op of the protocol, as root's client of an msrd running as nobody. */
static void every_op(const struct msrd_server *server)
{
	struct haecer_machine_info *machine = calloc(1, sizeof(*machine));
	struct haecer_msr_op ops[2] = {
		{ .kind = HAECER_MSR_READ, .address = 0x10 },
		{ .kind = HAECER_MSR_WRITE, .cpu = 1, .address = 0x186, .value = 0x4300c0 },
	};
	struct haecer_server_info info;
	struct haecer_sim_truth truth;
	struct haecer_conn *conn;
	uint64_t value, raw, total;

	assert_non_null(machine);
	assert_int_equal(haecer_connect(server->socket_path, &conn), 0);
	assert_int_equal(haecer_hello(conn, &info), 0);
	assert_int_equal(info.uid, 0); /* the client's identity, not the server's */
	assert_int_equal(haecer_machine_info(conn, machine), 0);
	assert_int_equal(haecer_msr_read(conn, 0, 0x10, &value), 0);
	assert_int_equal(haecer_msr_write(conn, 0, 0x186, 0x4300c0), 0);
	assert_int_equal(haecer_msr_batch(conn, ops, 2), 0);
	assert_int_equal(haecer_energy_read(conn, 0, 0x611, &raw, &total), 0);
	assert_int_equal(haecer_sim_advance(conn, 5000000, &value), 0);
	assert_int_equal(haecer_sim_set_load(conn, -1, 0.5), 0);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, 0, &truth), 0);
	check_rings(conn);
	check_slots(conn);
	check_schedule(conn);
	haecer_close(conn);
	free(machine);
}

static void test_as_nobody(void **state)
{
	const char *arguments[] = { "--backend", "sim", "--sim-virtual-time", "--user", "nobody",
				    NULL };
	struct msrd_server server;
	struct bystander bystander;
	size_t reloads;

	(void)state;
	assert_int_equal(msrd_start(&server, HARDENING_POLICY, arguments), 0);
	assert_true(msrd_log_contains(&server, "running as user nobody (uid 65534 gid 65534)"));
	check_status(server.pid);
	assert_int_equal(bystander_start(&bystander, server.socket_path), 0);
	every_op(&server);
	/* The policy is read again as nobody. */
	reloads = msrd_log_count(&server, "SIGHUP: policy reloaded");
	assert_int_equal(msrd_signal(&server, SIGHUP), 0);
	for (int i = 0; i < 6000 && msrd_log_count(&server, "SIGHUP: policy reloaded") == reloads;
	     i++)
		usleep(10000);
	assert_int_equal(msrd_log_count(&server, "SIGHUP: policy reloaded"), reloads + 1);
	every_op(&server);
	check_status(server.pid);
	assert_true(bystander_stop(&bystander));
	assert_int_equal(msrd_stop(&server), 0);
}

static void test_msr_backend_as_nobody(void **state)
{
	static const char policy[] =
		"version: 1\ndefault: deny\nmsrs:\n"
		"  - {name: TSC, address: 0x10, read: true, set: base}\n"
		"  - {name: SCRATCH, range: [0x800, 0x8FF], read: true, write_mask: 0xFFFFFFFF, "
		"set: base}\n"
		"rules:\n  - {match: {uid: 0}, allow: [base]}\n";
	char tree[PATH_MAX + 16];
	const char *arguments[] = { "--backend", "msr", "--dev-root", tree, "--user", "nobody",
				    NULL };
	struct msrd_server server;
	struct haecer_conn *conn;
	uint64_t value = 0;

	(void)state;
	assert_int_equal(msrd_prepare(&server, policy), 0);
	snprintf(tree, sizeof(tree), "%s/root", server.dir);
	assert_int_equal(harness_standin_msr_tree(tree, 2, 0x1000), 0);
	assert_int_equal(harness_standin_write(tree, 1, 0x808, 0x77), 0);
	assert_int_equal(msrd_launch(&server, arguments), 0);
	check_status(server.pid);
	check_server_status(&server);
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_msr_write(conn, 1, 0x808, 0x1234), 0);
	assert_int_equal(haecer_msr_read(conn, 1, 0x808, &value), 0);
	assert_int_equal(value, 0x1234);
	assert_int_equal(harness_standin_read(tree, 1, 0x808, &value), 0);
	assert_int_equal(value, 0x1234);
	haecer_close(conn);
	assert_int_equal(msrd_signal(&server, SIGTERM), 0);
	/* The restore comes before this line. */
	assert_true(msrd_wait_log(&server, "stopped: 1 MSRs restored", WAIT_MS));
	assert_int_equal(harness_standin_read(tree, 1, 0x808, &value), 0);
	assert_int_equal(value, 0x77);
	assert_int_equal(msrd_stop(&server), 0);
}

static int try_connect(void *argument)
{
	int fd = raw_connect(argument);

	if (fd >= 0)
		close(fd);
	return fd >= 0 ? 0 : -fd;
}

static void test_socket_owner_group_mode(void **state)
{
	const char *arguments[] = { "--backend", "sim", "--socket-owner", "nobody",
				    "--socket-group", "nogroup", "--socket-mode", "0660", NULL };
	struct msrd_server server;
	struct stat status;

	(void)state;
	assert_int_equal(msrd_start(&server, HARDENING_POLICY, arguments), 0);
	assert_int_equal(stat(server.socket_path, &status), 0);
	assert_int_equal(status.st_uid, NOBODY);
	assert_int_equal(status.st_gid, NOBODY);
	assert_int_equal(status.st_mode & 07777, 0660);
	assert_int_equal(run_as(NOBODY, NOBODY, NULL, 0, try_connect, server.socket_path), 0);
	assert_int_equal(run_as(4001, 4001, NULL, 0, try_connect, server.socket_path), EACCES);
	assert_int_equal(msrd_stop(&server), 0);
}

static void test_socket_directory_writable_refused(void **state)
{
	static const unsigned modes[] = { 0777, 01777, 0775, 0757 };
	char directory[PATH_MAX + 16], socket_path[PATH_MAX + 32];
	const char *arguments[] = { "--backend", "sim", "--socket", socket_path, NULL };
	struct msrd_server server;

	(void)state;
	assert_int_equal(msrd_prepare(&server, HARDENING_POLICY), 0);
	snprintf(directory, sizeof(directory), "%s/run", server.dir);
	snprintf(socket_path, sizeof(socket_path), "%s/msrd.sock", directory);
	assert_int_equal(mkdir(directory, 0755), 0);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		assert_int_equal(chmod(directory, modes[i]), 0);
		assert_int_equal(msrd_launch(&server, arguments), -1);
		assert_true(msrd_log_contains(&server, "refusing the socket directory"));
	}
	assert_true(msrd_log_contains(&server, "is writable by others (mode 1777)"));
	assert_true(msrd_log_contains(&server, "is writable by its group (mode 0775)"));
	assert_int_equal(chmod(directory, 0755), 0);
	assert_int_equal(msrd_launch(&server, arguments), 0);
	memcpy(server.socket_path, socket_path, sizeof(server.socket_path) - 1);
	assert_int_equal(msrd_stop(&server), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_as_nobody),
		cmocka_unit_test(test_msr_backend_as_nobody),
		cmocka_unit_test(test_socket_owner_group_mode),
		cmocka_unit_test(test_socket_directory_writable_refused),
	};

	if (geteuid() != 0) {
		printf("needs root: msrd must start as root to become nobody\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
