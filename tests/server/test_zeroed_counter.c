/*
 * A counter zeroed behind msrd's back (Linux 5.13+'s perf_clear_dirty_counters writes 0 to a
 * counter a perf event used when an RDPMC-allowed task is scheduled in) is lost, never a wrap:
 * on the simulated Sandy Bridge with --sim-kernel-counters zero0@50 the simulated kernel writes 0
 * to programmable counter 0 at 50 ms of virtual time and leaves its event select alone, so
 * msrd's reprogramming check (control registers) sees nothing; its continuity check must. msrd's
 * own zero (SLOT_RESET) is no loss. The rule the library applies to RDPMC reads is the same
 * header (hw/counter_wrap.h), checked here on the figures of the issue: an instructions count of
 * about 5 001 234 read as 281 474 976 711 890.
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
#include "hw/counter_wrap.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"

#define NS_PER_MS 1000000ull
#define INSTRUCTIONS (0xC0ull | PERFEVTSEL_USR | PERFEVTSEL_OS)
#define MASK_48 ((1ull << 48) - 1)

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: PMC, range: [0xC1, 0xC8], read: true, write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: PERFEVTSEL, range: [0x186, 0x18D], read: true, write_mask: 0xffc7ffff, set: pmu}\n"
	"  - {name: GLOBAL_CTRL, address: 0x38F, read: true, write_mask: 0x7000000ff, set: pmu}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu], capabilities: [sim_control]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

/* The case: 5 000 000 then 1 234 ten milliseconds later is no wrap of a 48-bit counter
 * (it would take 36 minutes at any rate a core reaches); forward moves and real wraps are. */
static void test_the_rule(void **state)
{
	(void)state;
	assert_false(counter_move_plausible(5000000, 1234, MASK_48, 10 * NS_PER_MS));
	assert_true(counter_move_plausible(5000000, 5001234, MASK_48, 10 * NS_PER_MS));
	assert_true(counter_move_plausible(MASK_48 - 1000, 1000, MASK_48, 1000));
	assert_false(counter_move_plausible(MASK_48 - 1000000, 1000, MASK_48, 1000));
	/* Longer than a full wrap at the maximum rate: any value can be a wrap. */
	assert_true(counter_move_plausible(5000000, 1234, MASK_48, 3600ull * 1000 * NS_PER_MS));
	assert_true(counter_move_plausible(1234, 1234, MASK_48, 0));
}

static struct haecer_slot counting_slot(int index)
{
	struct haecer_slot slot;

	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, index, &slot), 0);
	assert_int_equal(haecer_slot_program(conn, slot.id, INSTRUCTIONS), 0);
	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_ENABLE), 0);
	return slot;
}

/* Before 50 ms: msrd's own reset brings the counter back to 0, and that is no loss. */
static void test_own_reset_is_no_loss(void **state)
{
	struct haecer_slot slot;
	uint64_t before, after;

	(void)state;
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	slot = counting_slot(1);
	assert_int_equal(haecer_sim_advance(conn, 10 * NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &before, false), 0);
	assert_true(before > 1000000);
	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_RESET), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &after, false), 0);
	assert_true(after < before);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
}

/* Counter 0 counts instructions from ~10 ms; at 50 ms the simulated kernel zeroes it: the read
 * after is refused as lost (and stays so), never extended by 2^48. */
static void test_zeroed_counter_is_lost(void **state)
{
	struct haecer_msr_op op = { .kind = HAECER_MSR_SLOT_READ };
	struct haecer_slot slot;
	uint64_t value, selection;

	(void)state;
	slot = counting_slot(0);
	assert_int_equal(haecer_sim_advance(conn, 30 * NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &value, false), 0);
	assert_true(value > 10000000);
	assert_int_equal(haecer_sim_advance(conn, 15 * NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &value, false), -EIDRM);
	assert_non_null(strstr(haecer_conn_error(conn), "went back behind msrd's back"));
	assert_true(msrd_log_contains(&server, "more than a wrap explains: its count is lost"));
	/* Every later use says so too. */
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &value, false), -EIDRM);
	op.address = slot.id;
	assert_int_equal(haecer_msr_batch(conn, &op, 1), -EIDRM);
	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_RESET), -EIDRM);
	/* The kernel left the event select alone: it is still msrd's, and freed it is cleared. */
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PERFEVTSEL0, &selection), 0);
	assert_int_equal(selection, INSTRUCTIONS | PERFEVTSEL_EN);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PERFEVTSEL0, &selection), 0);
	assert_false(selection & PERFEVTSEL_EN);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-virtual-time", "--sim-access-step-ns", "1000",
				    "--sim-kernel-counters", "zero0@50", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_the_rule),
		cmocka_unit_test(test_own_reset_is_no_loss),
		cmocka_unit_test(test_zeroed_counter_is_lost),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
