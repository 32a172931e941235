/*
 * The msr backend through msrd against a stand-in device tree (--backend msr --dev-root): every
 * read and write goes through msrd's io_uring at offset = address into dev/cpu/N/msr, so the
 * files' bytes are the registers. Reads see the file, writes land in it (and only allowed bits
 * change), a register past the end of the file is the driver's EIO, and SIGTERM writes every
 * register msrd changed back to its original value: the files themselves prove the restore.
 * CPU 2 is offline (its directory without a device): any op naming it refuses the whole
 * request, so a batch that also writes another CPU writes nothing (before, such a batch ran op
 * by op on the loop's thread, past the lock that keeps a write's checked value current).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"

#define FILE_SIZE 0x2000u /* registers at 0 .. 0x1ff8 exist */
#define TSC 0x10u
#define PERFEVTSEL0 0x186u
#define SCRATCH 0x800u /* 256 stand-in registers, 8 bytes apart */
#define MASKED 0x1000u  /* 512 more, writable in bits 7:0 only */

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: base}\n"
	"  - {name: PERFEVTSEL0, address: 0x186, read: true, write_mask: 0xFFCFFFFF, set: base}\n"
	"  - {name: SCRATCH, range: [0x800, 0xFFF], read: true, write_mask: 0xFFFFFFFFFFFFFFFF,\n"
	"     set: base}\n"
	"  - {name: MASKED, range: [0x1000, 0x1FFF], read: true, write_mask: 0xFF, set: base}\n"
	"  - {name: BEYOND, address: 0x2000, read: true, set: base}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [base]}\n";

static struct msrd_server server;
static char tree[PATH_MAX + 16];
static struct haecer_conn *conn;

static uint64_t file_value(unsigned cpu, uint32_t address)
{
	uint64_t value = 0;

	assert_int_equal(harness_standin_read(tree, cpu, address, &value), 0);
	return value;
}

static void test_backend_and_machine(void **state)
{
	struct haecer_machine_info *machine = test_malloc(sizeof(*machine));

	(void)state;
	assert_int_equal(haecer_server_info(conn)->backend, HAECER_BACKEND_MSR);
	assert_int_equal(haecer_machine_info(conn, machine), 0);
	assert_int_equal(machine->cpu_count, 3);
	assert_int_equal(machine->flags & HAECER_MACHINE_SIMULATED, 0);
	test_free(machine);
	/* Simulator control on real hardware is not a policy question: -ENODEV. */
	assert_int_equal(haecer_sim_advance(conn, 1000, NULL), -ENODEV);
	assert_non_null(strstr(haecer_conn_error(conn), "msr backend"));
}

static void test_reads_come_from_the_device(void **state)
{
	uint64_t value = 0;

	(void)state;
	assert_int_equal(haecer_msr_read(conn, 0, TSC, &value), 0);
	assert_int_equal(value, 0x1122334455667788ull);
	assert_int_equal(haecer_msr_read(conn, 1, TSC, &value), 0);
	assert_int_equal(value, 0x99);
	assert_int_equal(haecer_msr_read(conn, 0, 0x2000, &value), -EIO);
	assert_int_equal(haecer_msr_read(conn, 2, TSC, &value), -ENXIO);
	assert_non_null(strstr(haecer_conn_error(conn), "CPU 2 has no MSR device"));
	assert_int_equal(haecer_msr_read(conn, 3, TSC, &value), -ENXIO);
}

static void test_offline_cpu_refuses_the_batch(void **state)
{
	struct haecer_msr_op ops[2] = {
		{ .kind = HAECER_MSR_WRITE, .cpu = 0, .address = SCRATCH + 0x7f8, .value = 0x1234 },
		{ .kind = HAECER_MSR_READ, .cpu = 2, .address = TSC },
	};

	(void)state;
	assert_int_equal(haecer_msr_batch(conn, ops, 2), -ENXIO);
	assert_int_equal(ops[0].status, -ECANCELED);
	assert_int_equal(ops[1].status, -ENXIO);
	assert_int_equal(file_value(0, SCRATCH + 0x7f8), 0);
	ops[1].kind = HAECER_MSR_WRITE;
	assert_int_equal(haecer_msr_batch(conn, ops, 2), -ENXIO);
	assert_int_equal(file_value(0, SCRATCH + 0x7f8), 0);
}

static void test_writes_reach_the_device(void **state)
{
	struct haecer_msr_op ops[3];

	(void)state;
	assert_int_equal(haecer_msr_write(conn, 1, PERFEVTSEL0, 0x43003c), 0);
	assert_int_equal(file_value(1, PERFEVTSEL0), 0x43003c);
	assert_int_equal(file_value(0, PERFEVTSEL0), 0x5);
	/* Bit 20 is outside the mask: refused, the file keeps its bytes. */
	assert_int_equal(haecer_msr_write(conn, 1, PERFEVTSEL0, 0x43003c | (1u << 20)), -EACCES);
	assert_int_equal(file_value(1, PERFEVTSEL0), 0x43003c);
	/* A batch through one io_uring submission, in order, with a per-op device error. */
	ops[0] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .cpu = 0, .address = SCRATCH,
					 .value = 0xabcdef };
	ops[1] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = 0, .address = SCRATCH };
	ops[2] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = 1, .address = 0x2000 };
	assert_int_equal(haecer_msr_batch(conn, ops, 3), 0);
	assert_int_equal(ops[0].status, 0);
	assert_int_equal(ops[1].status, 0);
	assert_int_equal(ops[1].value, 0xabcdef);
	assert_int_equal(ops[2].status, -EIO);
	assert_int_equal(file_value(0, SCRATCH), 0xabcdef);
}

static void test_large_batch(void **state)
{
	static struct haecer_msr_op ops[1024];

	(void)state;
	for (unsigned i = 0; i < 512; i++)
		ops[i] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .cpu = i / 256,
						 .address = SCRATCH + 8 * (i % 256), .value = i * 3 };
	for (unsigned i = 512; i < 1024; i++)
		ops[i] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = (i - 512) / 256,
						 .address = SCRATCH + 8 * (i % 256) };
	assert_int_equal(haecer_msr_batch(conn, ops, 1024), 0);
	for (unsigned i = 512; i < 1024; i++) {
		assert_int_equal(ops[i].status, 0);
		assert_int_equal(ops[i].value, (i - 512) * 3);
	}
}

/* Each write is checked against what the batch's last earlier write to the same register
 * leaves, found in one pass however far apart they are: 512 registers written, then written
 * again in reverse order; the second writes change only masked bits from the first ones. */
static void test_rewrites_in_one_batch(void **state)
{
	static struct haecer_msr_op ops[1024];

	(void)state;
	for (unsigned i = 0; i < 512; i++) {
		uint32_t address = MASKED + 8 * i;
		ops[i] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .cpu = i % 2,
						 .address = address, .value = i & 0xFF };
		ops[1023 - i] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .cpu = i % 2,
							.address = address,
							.value = (i & 0xFF) ^ 0x80 };
	}
	assert_int_equal(haecer_msr_batch(conn, ops, 1024), 0);
	for (unsigned i = 0; i < 512; i++)
		assert_int_equal(file_value(i % 2, MASKED + 8 * i), (i & 0xFF) ^ 0x80);
	/* The last rewrite sets bit 8 over its earlier write: refused whole, nothing written. */
	for (unsigned i = 0; i < 512; i++)
		ops[i].value = 0x11;
	ops[512].value = 0x111;
	assert_int_equal(haecer_msr_batch(conn, ops, 1024), -EACCES);
	assert_int_equal(ops[512].status, -EACCES);
	assert_int_equal(ops[0].status, -ECANCELED);
	assert_int_equal(ops[1023].status, -ECANCELED);
	/* Checked against the earlier write's 0x11, not the register's 0x7f. */
	assert_true(msrd_log_contains(&server, "address 0x1ff8: write 0x111 over 0x11 changes "
					       "bits 0x100 outside the mask 0xff"));
	assert_int_equal(file_value(1, MASKED + 8 * 511), (511 & 0xFF) ^ 0x80);
}

int main(void)
{
	char dev_root[PATH_MAX + 16];
	char offline[PATH_MAX + 32];

	const char *arguments[] = { "--backend", "msr", "--dev-root", dev_root, NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backend_and_machine),
		cmocka_unit_test(test_reads_come_from_the_device),
		cmocka_unit_test(test_offline_cpu_refuses_the_batch),
		cmocka_unit_test(test_writes_reach_the_device),
		cmocka_unit_test(test_large_batch),
		cmocka_unit_test(test_rewrites_in_one_batch),
	};
	int failures;

	if (msrd_prepare(&server, policy) < 0)
		return 1;
	snprintf(tree, sizeof(tree), "%s/root", server.dir);
	snprintf(dev_root, sizeof(dev_root), "%s", tree);
	snprintf(offline, sizeof(offline), "%s/dev/cpu/2", tree);
	if (harness_standin_msr_tree(tree, 2, FILE_SIZE) < 0 || mkdir(offline, 0755) < 0 ||
	    harness_standin_write(tree, 0, TSC, 0x1122334455667788ull) < 0 ||
	    harness_standin_write(tree, 1, TSC, 0x99) < 0 ||
	    harness_standin_write(tree, 0, PERFEVTSEL0, 0x5) < 0 ||
	    msrd_launch(&server, arguments) < 0) {
		msrd_kill(&server);
		return 1;
	}
	if (haecer_connect(server.socket_path, &conn) < 0) {
		msrd_kill(&server);
		return 1;
	}
	failures = cmocka_run_group_tests(tests, NULL, NULL);
	haecer_close(conn);
	if (msrd_signal(&server, SIGTERM) < 0 || !msrd_wait_log(&server, "stopped:", 60000))
		failures++;
	/* Every register msrd wrote holds its original bytes again. */
	{
		uint64_t value = 1;
		harness_standin_read(tree, 1, PERFEVTSEL0, &value);
		failures += value != 0;
		harness_standin_read(tree, 0, PERFEVTSEL0, &value);
		failures += value != 0x5;
		for (unsigned i = 0; i < 512; i++) {
			harness_standin_read(tree, i / 256, SCRATCH + 8 * (i % 256), &value);
			failures += value != 0;
			harness_standin_read(tree, i % 2, MASKED + 8 * i, &value);
			failures += value != 0;
		}
		if (failures > 0)
			fprintf(stderr, "registers were not restored\n");
	}
	if (msrd_stop(&server) < 0)
		failures++;
	return failures == 0 ? 0 : 1;
}
