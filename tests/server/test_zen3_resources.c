/*
 * Resource management on the simulated AMD Zen 3, which has no architectural perfmon: six
 * PERF_CTL/PERF_CTR pairs per CPU and no global control, so slots start and stop by their EN
 * bit; a synchronized read stops them, reads them and restarts them; the legacy aliases of
 * a held counter are protected like its own registers; no fixed counters exist. Energy totals
 * cover the package register and the per-core one.
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

#define NS_PER_MS 1000000ull
#define AMD_CYCLES (0x76ull | PERFEVTSEL_USR | PERFEVTSEL_OS)

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: PERF_LEGACY, range: [0xC0010000, 0xC0010007], read: true, write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: PERF_CTL_CTR, range: [0xC0010200, 0xC001020B], read: true, write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: AMD_RAPL_UNIT, address: 0xC0010299, read: true, set: rapl}\n"
	"  - {name: AMD_ENERGY, range: [0xC001029A, 0xC001029B], read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu, rapl], capabilities: [sim_control]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

static void test_six_counters_without_global_control(void **state)
{
	struct haecer_slot slots[6], extra;
	uint32_t ids[2];
	uint64_t values[2], control;

	(void)state;
	for (int i = 0; i < 6; i++) {
		assert_int_equal(haecer_slot_alloc(conn, 2, HAECER_SLOT_PROGRAMMABLE, -1, &slots[i]), 0);
		assert_int_equal(slots[i].index, i);
		assert_int_equal(slots[i].width, 48);
		assert_int_equal(slots[i].counter_address, MSR_AMD_PERF_CTR0 + 2 * i);
		assert_int_equal(slots[i].control_address, MSR_AMD_PERF_CTL0 + 2 * i);
	}
	assert_int_equal(haecer_slot_alloc(conn, 2, HAECER_SLOT_PROGRAMMABLE, -1, &extra), -ENOSPC);
	assert_int_equal(haecer_slot_alloc(conn, 2, HAECER_SLOT_FIXED, 0, &extra), -EOPNOTSUPP);

	assert_int_equal(haecer_sim_set_load(conn, 2, 1.0), 0);
	ids[0] = slots[1].id;
	ids[1] = slots[4].id;
	for (int i = 0; i < 2; i++)
		assert_int_equal(haecer_slot_program(conn, ids[i], AMD_CYCLES), 0);
	assert_int_equal(haecer_slot_control(conn, ids, 2, HAECER_SLOT_ENABLE), 0);
	assert_int_equal(haecer_msr_read(conn, 2, MSR_AMD_PERF_CTL0 + 2, &control), 0);
	assert_int_equal(control, AMD_CYCLES | PERFEVTSEL_EN);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_MS, NULL), 0);
	/* Started one EN write after the other (1 us apart) and, for the synchronized read,
	 * stopped in the same order: both ran exactly as long. */
	assert_int_equal(haecer_slot_read(conn, ids, 2, values, true), 0);
	assert_true(values[0] >= 3800000);
	assert_int_equal(values[1], values[0]);
	assert_int_equal(haecer_msr_read(conn, 2, MSR_AMD_PERF_CTL0 + 8, &control), 0);
	assert_int_equal(control, AMD_CYCLES | PERFEVTSEL_EN); /* running again */
	assert_int_equal(haecer_slot_control(conn, ids, 2, HAECER_SLOT_DISABLE), 0);
	assert_int_equal(haecer_msr_read(conn, 2, MSR_AMD_PERF_CTL0 + 2, &control), 0);
	assert_int_equal(control, AMD_CYCLES);
	for (int i = 0; i < 6; i++)
		assert_int_equal(haecer_slot_free(conn, slots[i].id), 0);
	assert_int_equal(haecer_msr_read(conn, 2, MSR_AMD_PERF_CTL0 + 2, &control), 0);
	assert_int_equal(control, 0);
}

static void test_legacy_aliases_are_protected(void **state)
{
	struct haecer_conn *other;
	struct haecer_slot slot;

	(void)state;
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, 2, &slot), 0);
	assert_int_equal(haecer_connect(server.socket_path, &other), 0);
	assert_int_equal(haecer_msr_write(other, 0, MSR_AMD_PERF_LEGACY_CTL0 + 2, AMD_CYCLES),
			 -EBUSY);
	assert_int_equal(haecer_msr_write(other, 0, MSR_AMD_PERF_LEGACY_CTR0 + 2, 5), -EBUSY);
	assert_int_equal(haecer_msr_write(other, 0, MSR_AMD_PERF_CTL0 + 4, 0), -EBUSY);
	assert_int_equal(haecer_msr_write(other, 0, MSR_AMD_PERF_LEGACY_CTL0 + 3, 0), 0);
	haecer_close(other);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
}

static void test_core_and_package_energy(void **state)
{
	struct haecer_sim_truth truth;
	uint64_t raw, total;

	(void)state;
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	/* 2^32 units of 2^-16 J at 142 W: a package wrap every 7.7 minutes; go for 2 hours. */
	assert_int_equal(haecer_sim_advance(conn, 7200ull * 1000 * NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_energy_read(conn, 0, MSR_AMD_PKG_ENERGY_STATUS, &raw, &total), 0);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_AMD_PKG, &truth), 0);
	assert_int_equal(total, truth.units_at_update);
	assert_true(total >> 32 >= 15);
	assert_int_equal(haecer_energy_read(conn, 0, MSR_AMD_CORE_ENERGY_STATUS, &raw, &total), 0);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_AMD_CORE, &truth), 0);
	assert_int_equal(total, truth.units_at_update);
	assert_int_equal(raw, total & RAPL_ENERGY_COUNTER_MASK);
}

int main(void)
{
	/* The ideal CPU: two counters that ran equally long count equally only at a constant clock
	 * (the rough one's noise differs between any two stretches of busy time). */
	const char *arguments[] = { "--backend", "sim", "--sim-model", "zen3", "--sim-virtual-time",
				    "--sim-access-step-ns", "1000", "--sim-ideal", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_six_counters_without_global_control),
		cmocka_unit_test(test_legacy_aliases_are_protected),
		cmocka_unit_test(test_core_and_package_energy),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
