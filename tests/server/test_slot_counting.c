/*
 * Counter slots count only while enabled; reset clears a count and leaves the running state as it
 * was; a synchronized read stops the slots together, reads them and restarts them. Virtual time
 * with a 1 us step per register access (--sim-access-step-ns) makes the order of register
 * accesses visible: slots enabled together and read synchronized show the same count, read one
 * after the other they do not.
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

#define NS_PER_MS 1000000ull
#define CYCLES_PER_MS 2500000ull /* 2.5 GHz, fully busy */
#define CORE_CYCLES (0x3Cull | PERFEVTSEL_USR | PERFEVTSEL_OS)

static const char policy[] =
	POLICY_HEADER POLICY_PMU_MSRS
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu], capabilities: [sim_control]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;
static uint32_t ids[3]; /* two programmable counters and fixed counter 1, all core cycles */

static void read_slots(uint64_t *values, bool synchronized)
{
	assert_int_equal(haecer_slot_read(conn, ids, 3, values, synchronized), 0);
}

static void test_counts_only_while_enabled(void **state)
{
	struct haecer_slot slot;
	uint64_t first[3], second[3];

	(void)state;
	assert_int_equal(haecer_sim_set_load(conn, 0, 1.0), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, -1, &slot), 0);
		assert_int_equal(haecer_slot_program(conn, slot.id, CORE_CYCLES), 0);
		ids[i] = slot.id;
	}
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_FIXED, 1, &slot), 0);
	assert_int_equal(haecer_slot_program(conn, slot.id, FIXED_CTR_CTRL_OS | FIXED_CTR_CTRL_USR),
			 0);
	ids[2] = slot.id;
	/* A fixed counter's control is four bits; programming does not start anything. */
	assert_int_equal(haecer_slot_program(conn, slot.id, 0x10), -EINVAL);
	assert_int_equal(haecer_slot_control(conn, ids, 3, 9), -EINVAL);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_MS, NULL), 0);
	read_slots(first, false);
	for (int i = 0; i < 3; i++)
		assert_int_equal(first[i], 0);

	assert_int_equal(haecer_slot_control(conn, ids, 3, HAECER_SLOT_ENABLE), 0);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_MS, NULL), 0);
	read_slots(first, true);
	for (int i = 0; i < 3; i++)
		assert_true(first[i] >= CYCLES_PER_MS);

	assert_int_equal(haecer_slot_control(conn, ids, 3, HAECER_SLOT_DISABLE), 0);
	read_slots(first, false);
	assert_int_equal(haecer_sim_advance(conn, 5 * NS_PER_MS, NULL), 0);
	read_slots(second, false);
	for (int i = 0; i < 3; i++)
		assert_int_equal(second[i], first[i]);
}

static void test_reset_keeps_the_running_state(void **state)
{
	uint64_t values[3];

	(void)state;
	/* Stopped: reset gives 0 and it stays 0. */
	assert_int_equal(haecer_slot_control(conn, ids, 3, HAECER_SLOT_RESET), 0);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_MS, NULL), 0);
	read_slots(values, false);
	for (int i = 0; i < 3; i++)
		assert_int_equal(values[i], 0);
	/* Running: reset starts it from 0, and it keeps counting. */
	assert_int_equal(haecer_slot_control(conn, ids, 3, HAECER_SLOT_ENABLE), 0);
	assert_int_equal(haecer_sim_advance(conn, 10 * NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_slot_control(conn, ids, 1, HAECER_SLOT_RESET), 0);
	read_slots(values, true);
	assert_true(values[0] < CYCLES_PER_MS);
	assert_true(values[1] >= 10 * CYCLES_PER_MS);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_MS, NULL), 0);
	read_slots(values, true);
	assert_true(values[0] >= CYCLES_PER_MS);
}

static void test_synchronized_read(void **state)
{
	uint64_t values[3], global;

	(void)state;
	/* Enabled together (one GLOBAL_CTRL write), stopped together: the same count. */
	assert_int_equal(haecer_slot_control(conn, ids, 3, HAECER_SLOT_DISABLE), 0);
	assert_int_equal(haecer_slot_control(conn, ids, 3, HAECER_SLOT_RESET), 0);
	assert_int_equal(haecer_slot_control(conn, ids, 3, HAECER_SLOT_ENABLE), 0);
	assert_int_equal(haecer_sim_advance(conn, 3 * NS_PER_MS, NULL), 0);
	read_slots(values, true);
	assert_true(values[0] > 3 * CYCLES_PER_MS);
	assert_int_equal(values[1], values[0]);
	assert_int_equal(values[2], values[0]);
	/* They run on afterwards (PMC0, PMC1 and fixed counter 1 enabled again)... */
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PERF_GLOBAL_CTRL, &global), 0);
	assert_int_equal(global & 0x200000003, 0x200000003);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_MS, NULL), 0);
	read_slots(values, true);
	assert_true(values[0] > 4 * CYCLES_PER_MS);
	assert_int_equal(values[2], values[0]);
	/* ...and read one after the other, each 1 us access apart, they differ. */
	read_slots(values, false);
	assert_true(values[1] > values[0]);
	assert_true(values[2] > values[1]);
}

int main(void)
{
	/* Exact counts: the ideal CPU (a rough one's SMIs take busy time). */
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-virtual-time", "--sim-access-step-ns", "1000",
				    "--sim-ideal", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts_only_while_enabled),
		cmocka_unit_test(test_reset_keeps_the_running_state),
		cmocka_unit_test(test_synchronized_read),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
