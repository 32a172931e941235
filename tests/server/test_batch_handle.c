/*
 * Registered batches: a batch checked once survives 10 000 runs by handle (1000 under valgrind)
 * with fresh results each time; after a SIGHUP policy reload the handle is stale (-ESTALE, with
 * the reason in the text) until it is registered again. A write in a registered batch is still
 * checked against the register's value at run time: when another client changed a bit outside
 * the mask meanwhile, the run is refused (-EACCES) and nothing is written. Registration refuses
 * what the policy does not grant; an unknown handle is -ENOENT, a wrong op count -EINVAL, and a
 * connection holds at most 64 handles (-ENOSPC).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: base}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: base}\n"
	"  - {name: IA32_PMC, range: [0xC1, 0xC8], read: true, write_mask: 0xffff, set: base}\n"
	"  - {name: IA32_PERFEVTSEL, range: [0x186, 0x18D], read: true, write_mask: 0xffc7ffff, set: base}\n"
	"  - {name: IA32_PERF_GLOBAL_CTRL, address: 0x38F, read: true, write_mask: 0x7000000ff, set: base}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [base], capabilities: [sim_control]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

static void test_handle_survives_many_runs(void **state)
{
	unsigned runs = harness_small_scale() ? 1000 : 10000;
	struct haecer_slot slot;
	struct haecer_msr_op ops[4];
	uint32_t handle;
	uint64_t last_tsc = 0;

	(void)state;
	assert_int_equal(haecer_slot_alloc(conn, 1, HAECER_SLOT_PROGRAMMABLE, -1, &slot), 0);
	ops[0] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = 0, .address = 0x10 };
	ops[1] = (struct haecer_msr_op){ .kind = HAECER_MSR_ENERGY_READ, .cpu = 0, .address = 0x611 };
	ops[2] = (struct haecer_msr_op){ .kind = HAECER_MSR_SLOT_READ, .address = slot.id };
	ops[3] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .cpu = 2,
					 .address = MSR_IA32_PERFEVTSEL0, .value = 0x3C };
	assert_int_equal(haecer_batch_register(conn, ops, 4, &handle), 0);
	for (unsigned i = 0; i < runs; i++) {
		ops[0].value = 0;
		assert_int_equal(haecer_batch_run(conn, handle, ops, 4), 0);
		for (int j = 0; j < 4; j++)
			assert_int_equal(ops[j].status, 0);
		assert_true(ops[0].value > last_tsc);
		last_tsc = ops[0].value;
		assert_int_equal(ops[1].value, ops[1].total & 0xffffffff);
	}
	assert_int_equal(ops[2].value, 0); /* a taken counter starts at 0, stopped */
	/* A slot read of a slot given up meanwhile fails at run time. */
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	assert_int_equal(haecer_batch_run(conn, handle, ops, 4), -ENOENT);
	assert_int_equal(ops[2].status, -ENOENT);
	assert_int_equal(ops[0].status, -ECANCELED);
	assert_int_equal(haecer_batch_run(conn, handle, ops, 3), -EINVAL);
	assert_int_equal(haecer_batch_run(conn, handle + 1, ops, 4), -ENOENT);
	assert_int_equal(haecer_batch_release(conn, handle), 0);
	assert_int_equal(haecer_batch_release(conn, handle), -ENOENT);
}

static void test_reload_makes_handles_stale(void **state)
{
	struct haecer_msr_op op = { .kind = HAECER_MSR_READ, .cpu = 0, .address = 0x10 };
	uint32_t handle, again;

	(void)state;
	assert_int_equal(haecer_batch_register(conn, &op, 1, &handle), 0);
	assert_int_equal(haecer_batch_run(conn, handle, &op, 1), 0);
	assert_int_equal(msrd_reload(&server, 30000), 0);
	assert_int_equal(haecer_batch_run(conn, handle, &op, 1), -ESTALE);
	assert_non_null(strstr(haecer_conn_error(conn), "register it again"));
	assert_int_equal(haecer_batch_register(conn, &op, 1, &again), 0);
	assert_int_equal(haecer_batch_run(conn, again, &op, 1), 0);
	assert_int_equal(haecer_batch_run(conn, handle, &op, 1), -ESTALE);
	assert_int_equal(haecer_batch_release(conn, handle), 0);
	assert_int_equal(haecer_batch_release(conn, again), 0);
}

static void test_write_mask_checked_at_run_time(void **state)
{
	struct haecer_msr_op ops[2] = {
		{ .kind = HAECER_MSR_WRITE, .cpu = 0, .address = MSR_IA32_PMC0 + 3, .value = 0x1234 },
		{ .kind = HAECER_MSR_READ, .cpu = 0, .address = MSR_IA32_PMC0 + 3 },
	};
	uint64_t value;
	uint32_t handle;

	(void)state;
	/* The mask is the counter's low 16 bits: setting it over a small count is fine. */
	assert_int_equal(haecer_batch_register(conn, ops, 2, &handle), 0);
	assert_int_equal(haecer_batch_run(conn, handle, ops, 2), 0);
	assert_int_equal(ops[1].value, 0x1234);
	/* Let the counter run past 16 bits: the registered write would now clear bits outside
	 * the mask, so the run is refused whole. */
	assert_int_equal(haecer_sim_set_load(conn, 0, 1.0), 0);
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PERFEVTSEL0 + 3,
					  0x3C | PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN),
			 0);
	assert_int_equal(haecer_sim_advance(conn, 1000000, NULL), 0);
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PERFEVTSEL0 + 3, 0), 0);
	assert_int_equal(haecer_batch_run(conn, handle, ops, 2), -EACCES);
	assert_int_equal(ops[0].status, -EACCES);
	assert_int_equal(ops[1].status, -ECANCELED);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PMC0 + 3, &value), 0);
	assert_true(value > 0xffff);
	assert_true(msrd_log_contains(&server, "outside the mask"));
	assert_int_equal(haecer_batch_release(conn, handle), 0);
}

static void test_registration_refusals_and_limits(void **state)
{
	struct haecer_msr_op op = { .kind = HAECER_MSR_READ, .cpu = 0, .address = 0x606 };
	uint32_t handles[64], extra;

	(void)state;
	assert_int_equal(haecer_batch_register(conn, &op, 1, &extra), -EPERM);
	assert_non_null(strstr(haecer_conn_error(conn), "read not granted"));
	op = (struct haecer_msr_op){ .kind = HAECER_MSR_SLOT_READ, .address = 77 };
	assert_int_equal(haecer_batch_register(conn, &op, 1, &extra), -ENOENT);
	op = (struct haecer_msr_op){ .kind = 9, .address = 0x10 };
	assert_int_equal(haecer_batch_register(conn, &op, 1, &extra), -EOPNOTSUPP);
	op = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .address = 0x10 };
	for (int i = 0; i < 64; i++)
		assert_int_equal(haecer_batch_register(conn, &op, 1, &handles[i]), 0);
	assert_int_equal(haecer_batch_register(conn, &op, 1, &extra), -ENOSPC);
	assert_int_equal(haecer_batch_release(conn, handles[10]), 0);
	assert_int_equal(haecer_batch_register(conn, &op, 1, &extra), 0);
	assert_int_equal(extra, handles[10]);
}

int main(void)
{
	/* Virtual time, every register access 100 ns later: the TSC moves between runs. */
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-virtual-time", "--sim-access-step-ns", "100", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handle_survives_many_runs),
		cmocka_unit_test(test_reload_makes_handles_stale),
		cmocka_unit_test(test_write_mask_checked_at_run_time),
		cmocka_unit_test(test_registration_refusals_and_limits),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
