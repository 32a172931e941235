/*
 * A client cannot touch another's counter slot: slot ids are its own connection's, so another's
 * id is -ENOENT for program, control (enable, disable, reset), read, free and a batch slot read;
 * and a raw WRITE or BATCH write to the registers of a slot another client holds — its counter,
 * its full-width alias, its event select, its bit of IA32_PERF_GLOBAL_CTRL — is refused with
 * -EBUSY and logged, even though the policy's write mask allows it, while reads stay allowed.
 * The holder itself may still write its own registers, and bits of free counters stay writable.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "harness/policy_text.h"

static struct msrd_server server;
static struct haecer_conn *holder;

static void test_ids_are_per_connection(void **state)
{
	struct haecer_conn *other;
	struct haecer_slot mine, theirs;
	struct haecer_msr_op op;
	uint64_t value;

	(void)state;
	assert_int_equal(haecer_slot_alloc(holder, 0, HAECER_SLOT_PROGRAMMABLE, 0, &mine), 0);
	assert_int_equal(haecer_slot_program(holder, mine.id, 0xC0 | PERFEVTSEL_USR), 0);
	assert_int_equal(haecer_connect(server.socket_path, &other), 0);
	assert_int_equal(haecer_slot_program(other, mine.id, 0x3C), -ENOENT);
	assert_int_equal(haecer_slot_control(other, &mine.id, 1, HAECER_SLOT_ENABLE), -ENOENT);
	assert_int_equal(haecer_slot_control(other, &mine.id, 1, HAECER_SLOT_DISABLE), -ENOENT);
	assert_int_equal(haecer_slot_control(other, &mine.id, 1, HAECER_SLOT_RESET), -ENOENT);
	assert_int_equal(haecer_slot_read(other, &mine.id, 1, &value, false), -ENOENT);
	assert_int_equal(haecer_slot_read(other, &mine.id, 1, &value, true), -ENOENT);
	assert_int_equal(haecer_slot_free(other, mine.id), -ENOENT);
	op = (struct haecer_msr_op){ .kind = HAECER_MSR_SLOT_READ, .address = mine.id };
	assert_int_equal(haecer_msr_batch(other, &op, 1), -ENOENT);
	assert_int_equal(op.status, -ENOENT);
	/* The same number on the other connection is that connection's own slot. */
	assert_int_equal(haecer_slot_alloc(other, 0, HAECER_SLOT_PROGRAMMABLE, -1, &theirs), 0);
	assert_int_equal(theirs.id, mine.id);
	assert_int_not_equal(theirs.index, mine.index);
	assert_int_equal(haecer_slot_program(other, theirs.id, 0x3C), 0);
	assert_int_equal(haecer_msr_read(other, 0, MSR_IA32_PERFEVTSEL0, &value), 0);
	assert_int_equal(value, 0xC0 | PERFEVTSEL_USR);
	assert_int_equal(haecer_slot_free(other, theirs.id), 0);
	haecer_close(other);
	assert_int_equal(haecer_slot_free(holder, mine.id), 0);
}

static void test_raw_writes_to_held_registers(void **state)
{
	struct haecer_slot pmc, fixed;
	struct haecer_conn *other;
	struct haecer_msr_op ops[2];
	uint64_t value;

	(void)state;
	assert_int_equal(haecer_slot_alloc(holder, 1, HAECER_SLOT_PROGRAMMABLE, 2, &pmc), 0);
	assert_int_equal(haecer_slot_alloc(holder, 1, HAECER_SLOT_FIXED, 0, &fixed), 0);
	assert_int_equal(haecer_connect(server.socket_path, &other), 0);
	/* Its own registers and its bits of the shared ones. */
	assert_int_equal(haecer_msr_write(other, 1, MSR_IA32_PERFEVTSEL0 + 2, 0x3C), -EBUSY);
	assert_int_equal(haecer_msr_write(other, 1, MSR_IA32_PMC0 + 2, 7), -EBUSY);
	assert_int_equal(haecer_msr_write(other, 1, MSR_IA32_A_PMC0 + 2, 7), -EBUSY);
	assert_int_equal(haecer_msr_write(other, 1, MSR_IA32_FIXED_CTR0, 7), -EBUSY);
	assert_int_equal(haecer_msr_read(other, 1, MSR_IA32_PERF_GLOBAL_CTRL, &value), 0);
	assert_int_equal(value & 0x100000004, 0); /* taken slots start stopped */
	assert_int_equal(haecer_msr_write(other, 1, MSR_IA32_PERF_GLOBAL_CTRL, value | 0x4), -EBUSY);
	assert_int_equal(haecer_msr_write(other, 1, MSR_IA32_PERF_GLOBAL_CTRL,
					  value | 0x100000000),
			 -EBUSY);
	assert_int_equal(haecer_msr_write(other, 1, MSR_IA32_FIXED_CTR_CTRL, 0x3), -EBUSY);
	/* A batch that would do it is refused whole: its harmless write does not happen either. */
	ops[0] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .cpu = 1,
					 .address = MSR_IA32_PMC0 + 3, .value = 99 };
	ops[1] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .cpu = 1,
					 .address = MSR_IA32_PERFEVTSEL0 + 2, .value = 0x3C };
	assert_int_equal(haecer_msr_batch(other, ops, 2), -EBUSY);
	assert_int_equal(ops[0].status, -ECANCELED);
	assert_int_equal(ops[1].status, -EBUSY);
	assert_int_equal(haecer_msr_read(other, 1, MSR_IA32_PMC0 + 3, &value), 0);
	assert_int_not_equal(value, 99);
	/* Reads stay allowed; free counters' registers and bits stay writable. */
	assert_int_equal(haecer_msr_read(other, 1, MSR_IA32_PERFEVTSEL0 + 2, &value), 0);
	assert_int_equal(haecer_msr_write(other, 1, MSR_IA32_PERFEVTSEL0 + 3, 0x3C), 0);
	assert_int_equal(haecer_msr_read(other, 1, MSR_IA32_PERF_GLOBAL_CTRL, &value), 0);
	assert_int_equal(haecer_msr_write(other, 1, MSR_IA32_PERF_GLOBAL_CTRL, value ^ 0x8), 0);
	assert_int_equal(haecer_msr_write(other, 1, MSR_IA32_FIXED_CTR_CTRL, 0x30), 0);
	/* The holder may write its own. */
	assert_int_equal(haecer_msr_write(holder, 1, MSR_IA32_PMC0 + 2, 7), 0);
	assert_true(msrd_log_contains(&server, "a counter slot another client holds uses this "
					       "register"));
	haecer_close(other);
	assert_int_equal(haecer_slot_free(holder, pmc.id), 0);
	assert_int_equal(haecer_slot_free(holder, fixed.id), 0);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ids_are_per_connection),
		cmocka_unit_test(test_raw_writes_to_held_registers),
	};

	return MSRD_RUN_GROUP(&server, POLICY_PMU_FOR_ROOT, arguments, &holder, tests);
}
