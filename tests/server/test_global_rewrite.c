/*
 * The kernel rewrites IA32_PERF_GLOBAL_CTRL whole on every perf enable (Intel
 * __intel_pmu_enable_all writes its own mask of every counter), so a fixed slot stopped only by
 * clearing its global bit would count again wherever perf is active. On the simulated Sandy
 * Bridge with --sim-kernel-counters enableall@20 the simulated kernel sets every global bit at
 * 20 ms of virtual time: a stopped fixed slot has its IA32_FIXED_CTR_CTRL field cleared, keeps
 * its count through the rewrite, and is not declared reprogrammed for a global bit that is now
 * set; started, it counts; stopped again, it holds. And with pmc2@100 a perf session takes
 * programmable counter 2 while a client holds it: freed without a read in between, msrd checks
 * the counter before restoring and leaves the perf session's programming alone.
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
#include "haecer/perfmon.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"

#define NS_PER_MS 1000000ull
#define FIELD_OS_USR 0x3ull

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: FIXED_CTR, range: [0x309, 0x30B], read: true, write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: FIXED_CTR_CTRL, address: 0x38D, read: true, write_mask: 0x333, set: pmu}\n"
	"  - {name: PMC, range: [0xC1, 0xC8], read: true, write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: PERFEVTSEL, range: [0x186, 0x18D], read: true, write_mask: 0xffc7ffff, set: pmu}\n"
	"  - {name: GLOBAL_CTRL, address: 0x38F, read: true, write_mask: 0x7000000ff, set: pmu}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu], capabilities: [sim_control]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

static uint64_t fixed_field(unsigned index)
{
	uint64_t control;

	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_FIXED_CTR_CTRL, &control), 0);
	return (control >> (4 * index)) & 0xF;
}

static void test_stopped_fixed_slot_survives_global_rewrite(void **state)
{
	struct haecer_slot slot;
	uint64_t before, after, global;

	(void)state;
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_FIXED, 0, &slot), 0);
	assert_int_equal(haecer_slot_program(conn, slot.id, FIELD_OS_USR), 0);
	assert_int_equal(fixed_field(0), 0); /* programmed, not started: the field stays clear */
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &before, false), 0);
	assert_int_equal(haecer_sim_advance(conn, 30 * NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PERF_GLOBAL_CTRL, &global), 0);
	assert_true(global & (1ull << 32)); /* the kernel set fixed counter 0's bit */
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &after, false), 0);
	assert_int_equal(after, before);

	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_ENABLE), 0);
	assert_int_equal(fixed_field(0), FIELD_OS_USR);
	assert_int_equal(haecer_sim_advance(conn, 5 * NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &after, false), 0);
	assert_true(after > before + 1000000);

	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_DISABLE), 0);
	assert_int_equal(fixed_field(0), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &before, false), 0);
	assert_int_equal(haecer_sim_advance(conn, 5 * NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &after, false), 0);
	assert_int_equal(after, before);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	assert_false(msrd_log_contains(&server, "reprogrammed outside msrd"));
}

/* At 100 ms the simulated kernel programs counter 2 (instructions) over the slot's cycles. */
static void test_release_checks_before_restoring(void **state)
{
	const uint64_t cycles = 0x3Cull | PERFEVTSEL_USR | PERFEVTSEL_OS;
	const uint64_t perf = 0xC0ull | PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN;
	struct haecer_slot slot;
	uint64_t selection;

	(void)state;
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, 2, &slot), 0);
	assert_int_equal(haecer_slot_program(conn, slot.id, cycles), 0);
	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_ENABLE), 0);
	assert_int_equal(haecer_sim_advance(conn, 70 * NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PERFEVTSEL0 + 2, &selection), 0);
	assert_int_equal(selection, perf);
	assert_true(msrd_log_contains(&server, "was reprogrammed outside msrd"));
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-virtual-time", "--sim-access-step-ns", "1000",
				    "--sim-kernel-counters", "enableall@20,pmc2@100", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stopped_fixed_slot_survives_global_rewrite),
		cmocka_unit_test(test_release_checks_before_restoring),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
