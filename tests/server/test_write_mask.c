/*
 * Write masks and whole-batch checks through the real msrd on the simulated Sandy Bridge:
 * a read-modify-write that keeps the bits outside the mask is allowed; a write that would change
 * one of them is refused whole and nothing is written; a batch is checked whole before any op
 * runs (one refused op: nothing written, the others say "not run"); a later write in a batch is
 * checked against the earlier one; device errors (a register the CPU lacks, a value the CPU
 * refuses) are per-op statuses of a batch that ran. At SIGTERM msrd restores what it changed.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"

#define PERFEVTSEL0 0x186u
#define PERFEVTSEL1 0x187u
#define PKG_POWER_LIMIT 0x610u
#define PKG_POWER_LIMIT_RESET 0x00000000006D8118ull /* the model's reset value */
#define PL1_POWER_MASK 0x7FFFull

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: time}\n"
	"  - {name: PERFEVTSEL0, address: 0x186, read: true, write_mask: 0xFFCFFFFF, set: pmu}\n"
	"  - {name: PERFEVTSEL1, address: 0x187, read: true, write_mask: 0x1FFCFFFFF, set: pmu}\n"
	"  - {name: PKG_POWER_LIMIT, address: 0x610, read: true, write_mask: 0x7FFF, set: pmu}\n"
	"  - {name: DRAM_ENERGY, address: 0x619, read: true, set: pmu}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

static uint64_t read_msr(uint32_t address)
{
	uint64_t value = 0;

	assert_int_equal(haecer_msr_read(conn, 0, address, &value), 0);
	return value;
}

static void test_read_modify_write(void **state)
{
	uint64_t current;

	(void)state;
	current = read_msr(PKG_POWER_LIMIT);
	assert_int_equal(current, PKG_POWER_LIMIT_RESET);
	/* New PL1 power, every other bit (enable, clamp, time window) rewritten as it is. */
	assert_int_equal(haecer_msr_write(conn, 0, PKG_POWER_LIMIT,
					  (current & ~PL1_POWER_MASK) | 0x100),
			 0);
	assert_int_equal(read_msr(PKG_POWER_LIMIT), (current & ~PL1_POWER_MASK) | 0x100);
	/* Rewriting the very same value is fine too. */
	assert_int_equal(haecer_msr_write(conn, 0, PKG_POWER_LIMIT,
					  (current & ~PL1_POWER_MASK) | 0x100),
			 0);
}

static void test_outside_mask_refused(void **state)
{
	uint64_t before;

	(void)state;
	before = read_msr(PKG_POWER_LIMIT);
	/* Clearing bit 15 (PL1 enable) is outside the mask: refused, nothing written. */
	assert_int_equal(haecer_msr_write(conn, 0, PKG_POWER_LIMIT, before & ~0x8000ull), -EACCES);
	assert_non_null(strstr(haecer_conn_error(conn), "outside the mask"));
	assert_int_equal(read_msr(PKG_POWER_LIMIT), before);
	/* Not masked silently either: changing an allowed bit together with a forbidden one. */
	assert_int_equal(haecer_msr_write(conn, 0, PKG_POWER_LIMIT, (before ^ 0x1) | (1ull << 40)),
			 -EACCES);
	assert_int_equal(read_msr(PKG_POWER_LIMIT), before);
	assert_true(msrd_log_contains(&server, "changes bits 0x8000 outside the mask 0x7fff"));
}

static void test_batch_checked_whole(void **state)
{
	uint64_t limit;
	struct haecer_msr_op ops[3];

	(void)state;
	assert_int_equal(haecer_msr_write(conn, 0, PERFEVTSEL0, 0x43003c), 0);
	limit = read_msr(PKG_POWER_LIMIT);
	ops[0] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .address = PERFEVTSEL0,
					 .value = 0x4300c0 };
	ops[1] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .address = PERFEVTSEL0 };
	ops[2] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .address = PKG_POWER_LIMIT,
					 .value = limit & ~0x8000ull };
	assert_int_equal(haecer_msr_batch(conn, ops, 3), -EACCES);
	assert_int_equal(ops[0].status, -ECANCELED);
	assert_int_equal(ops[1].status, -ECANCELED);
	assert_int_equal(ops[2].status, -EACCES);
	assert_int_equal(read_msr(PERFEVTSEL0), 0x43003c);
	assert_int_equal(read_msr(PKG_POWER_LIMIT), limit);

	/* A read the policy does not grant refuses the batch just the same. */
	ops[2] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .address = 0x10 };
	assert_int_equal(haecer_msr_batch(conn, ops, 3), -EPERM);
	assert_int_equal(ops[0].status, -ECANCELED);
	assert_int_equal(ops[2].status, -EPERM);
	assert_int_equal(read_msr(PERFEVTSEL0), 0x43003c);

	/* So does a CPU that does not exist. */
	ops[2] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = 999, .address = 0x186 };
	assert_int_equal(haecer_msr_batch(conn, ops, 3), -ENXIO);
	assert_int_equal(ops[2].status, -ENXIO);
	assert_int_equal(read_msr(PERFEVTSEL0), 0x43003c);
}

static void test_batch_runs_in_order(void **state)
{
	struct haecer_msr_op ops[4];

	(void)state;
	ops[0] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .address = PERFEVTSEL0,
					 .value = 0x4300c4 };
	ops[1] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .address = PERFEVTSEL0 };
	ops[2] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .address = PERFEVTSEL0,
					 .value = 0x4300c5 };
	ops[3] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .address = PERFEVTSEL0 };
	assert_int_equal(haecer_msr_batch(conn, ops, 4), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(ops[i].status, 0);
	assert_int_equal(ops[1].value, 0x4300c4);
	assert_int_equal(ops[3].value, 0x4300c5);
}

static void test_chained_writes_checked(void **state)
{
	uint64_t limit;
	struct haecer_msr_op ops[2];

	(void)state;
	limit = read_msr(PKG_POWER_LIMIT);
	/* Each write is checked against the value the previous one leaves: the second puts back
	 * a bit the first one would have had to change (and cannot). */
	ops[0] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .address = PKG_POWER_LIMIT,
					 .value = (limit & ~PL1_POWER_MASK) | 0x80 };
	ops[1] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .address = PKG_POWER_LIMIT,
					 .value = ((limit & ~PL1_POWER_MASK) | 0x80) ^ (1ull << 16) };
	assert_int_equal(haecer_msr_batch(conn, ops, 2), -EACCES);
	assert_int_equal(ops[0].status, -ECANCELED);
	assert_int_equal(ops[1].status, -EACCES);
	assert_int_equal(read_msr(PKG_POWER_LIMIT), limit);
}

static void test_device_errors_per_op(void **state)
{
	struct haecer_msr_op ops[3];

	(void)state;
	/* Sandy Bridge has no DRAM RAPL domain: EIO, like the msr driver. Bit 32 of PERFEVTSEL1
	 * is within the policy's mask but reserved in the CPU: the write faults (EIO). */
	ops[0] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .address = 0x619 };
	ops[1] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .address = PERFEVTSEL1,
					 .value = 1ull << 32 };
	ops[2] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .address = PERFEVTSEL0 };
	assert_int_equal(haecer_msr_batch(conn, ops, 3), 0);
	assert_int_equal(ops[0].status, -EIO);
	assert_int_equal(ops[1].status, -EIO);
	assert_int_equal(ops[2].status, 0);
	assert_int_equal(ops[2].value, 0x4300c5);
	assert_int_equal(read_msr(PERFEVTSEL1), 0);
	assert_int_equal(haecer_msr_write(conn, 0, PERFEVTSEL1, 1ull << 32), -EIO);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_modify_write),
		cmocka_unit_test(test_outside_mask_refused),
		cmocka_unit_test(test_batch_checked_whole),
		cmocka_unit_test(test_batch_runs_in_order),
		cmocka_unit_test(test_chained_writes_checked),
		cmocka_unit_test(test_device_errors_per_op),
	};
	int failures;

	if (msrd_start(&server, policy, arguments) < 0)
		return 1;
	if (haecer_connect(server.socket_path, &conn) < 0) {
		msrd_kill(&server);
		return 1;
	}
	failures = cmocka_run_group_tests(tests, NULL, NULL);
	haecer_close(conn);
	/* What msrd changed goes back at SIGTERM, and the log says so. */
	if (msrd_signal(&server, SIGTERM) == 0 &&
	    !msrd_wait_log(&server, "restored cpu 0 MSR 0x610 to 0x6d8118", 60000))
		failures++;
	if (!msrd_log_contains(&server, "restored cpu 0 MSR 0x186 to 0x0"))
		failures++;
	if (msrd_stop(&server) < 0)
		failures++;
	return failures == 0 ? 0 : 1;
}
