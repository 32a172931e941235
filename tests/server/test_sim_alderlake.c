/*
 * The simulated Alder Lake (configs/models/alderlake.yaml: i9-12900K with HT off, CPUs 0-7
 * Golden Cove P-cores, 8-15 Gracemont E-cores) through the real msrd. The simulated CPU answers
 * CPUID per CPU as the part does: leaf 07H EDX[15] hybrid, leaf 1AH 40H / 20H, and on every CPU
 * the same leaf 0AH with only the common counters (6 general-purpose, 3 fixed); msrd's core-type
 * probe (backend/probe_cores.c) reads them, and gives a P-core the two general-purpose and one
 * fixed counter more that Linux gives cpu_core. So: MACHINE_INFO names each CPU's type; a P-core
 * lends 8 programmable and 4 fixed counters, an E-core 6 and 3; PMC 6 and 7 on an E-core are
 * refused with a message naming the E-core; a named event on an E-core is encoded from
 * libpfm4's Gracemont table (adl_grt) or, where the installed libpfm4 has no such table (4.13
 * has neither adl_grt nor adl_glc), refused naming that table, never encoded from Golden Cove's.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "haecer/haecer.h"
#include "haecer/msrd.h"
#include "harness/policy_text.h"
#include "tests/lib/core_type_check.h"
#include "tests/lib/msrd_group.h"

#define CPUS 16u
#define P_CORE_GP 8u
#define E_CORE_GP 6u
#define P_CORE_FIXED 4u
#define E_CORE_FIXED 3u

/* POLICY_PMU_MSRS, with Golden Cove's fixed counter 3 (TOPDOWN.SLOTS, 0x30C) and its fields of
 * FIXED_CTR_CTRL and PERF_GLOBAL_CTRL, which configs/policies/default.yaml does not grant. */
static const char policy[] = POLICY_HEADER
	"  - {name: IA32_PMC, range: [0xC1, 0xC8], read: true, write_mask: 0xffffffffffff, "
	"set: pmu}\n"
	"  - {name: IA32_A_PMC, range: [0x4C1, 0x4C8], read: true, write_mask: 0xffffffffffff, "
	"set: pmu}\n"
	"  - {name: IA32_PERFEVTSEL, range: [0x186, 0x18D], read: true, write_mask: 0xffc7ffff, "
	"set: pmu}\n"
	"  - {name: IA32_FIXED_CTR, range: [0x309, 0x30C], read: true, "
	"write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: IA32_FIXED_CTR_CTRL, address: 0x38D, read: true, write_mask: 0x3333, "
	"set: pmu}\n"
	"  - {name: IA32_PERF_GLOBAL_CTRL, address: 0x38F, read: true, write_mask: 0xf000000ff, "
	"set: pmu}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [pmu]\n";

static struct msrd_server server;
static struct haecer_conn *conn;

static bool is_e_core(unsigned cpu)
{
	return cpu >= 8;
}

static void test_core_types(void **state)
{
	struct haecer_machine_info *machine = test_malloc(sizeof(*machine));

	(void)state;
	assert_int_equal(haecer_machine_info(conn, machine), 0);
	assert_string_equal(machine->sim_model, "alderlake");
	assert_int_equal(machine->model, 0x97);
	assert_int_equal(machine->cpu_count, CPUS);
	assert_true(machine->flags & HAECER_MACHINE_HYBRID);
	for (unsigned cpu = 0; cpu < CPUS; cpu++)
		assert_int_equal(machine->cpu_core_type[cpu],
				 is_e_core(cpu) ? HAECER_CORE_TYPE_ATOM : HAECER_CORE_TYPE_CORE);
	/* What every CPU's leaf 0AH says: the common counters. */
	assert_int_equal((machine->cpuid_0a[0] >> 8) & 0xFF, E_CORE_GP);
	assert_true(msrd_log_contains(&server, "8 P-cores (8 programmable counters each), "
					       "8 E-cores (6 each)"));
	test_free(machine);
}

/* How many programmable counters msrd lends on `cpu`: every one it has, and not one more. */
static unsigned lendable_programmable(unsigned cpu)
{
	struct haecer_slot slots[P_CORE_GP + 1];
	unsigned taken = 0;

	while (taken <= P_CORE_GP &&
	       haecer_slot_alloc(conn, cpu, HAECER_SLOT_PROGRAMMABLE, -1, &slots[taken]) == 0)
		taken++;
	for (unsigned i = 0; i < taken; i++)
		assert_int_equal(haecer_slot_free(conn, slots[i].id), 0);
	return taken;
}

/* Fixed counters are asked for by index: the highest index msrd lends on `cpu`, plus one. */
static unsigned lendable_fixed(unsigned cpu)
{
	struct haecer_slot slot;
	unsigned count = 0;

	for (int index = 0; index <= (int)P_CORE_FIXED; index++) {
		if (haecer_slot_alloc(conn, cpu, HAECER_SLOT_FIXED, index, &slot) != 0) {
			print_message("cpu %u, fixed %d: %s\n", cpu, index, haecer_conn_error(conn));
			break;
		}
		assert_int_equal(haecer_slot_free(conn, slot.id), 0);
		count++;
	}
	return count;
}

static void test_counters_per_core_type(void **state)
{
	(void)state;
	for (unsigned cpu = 0; cpu < CPUS; cpu += 5) {
		assert_int_equal(lendable_programmable(cpu), is_e_core(cpu) ? E_CORE_GP : P_CORE_GP);
		assert_int_equal(lendable_fixed(cpu), is_e_core(cpu) ? E_CORE_FIXED : P_CORE_FIXED);
	}
}

/* PMC 6 and 7 exist on a P-core only: asked for on an E-core, the refusal says why. */
static void test_e_core_refuses_pmc_6_and_7(void **state)
{
	struct haecer_slot slot;

	(void)state;
	for (int index = 6; index <= 7; index++) {
		assert_int_equal(haecer_slot_alloc(conn, 9, HAECER_SLOT_PROGRAMMABLE, index, &slot),
				 -EOPNOTSUPP);
		print_message("cpu 9, PMC %d: %s\n", index, haecer_conn_error(conn));
		assert_non_null(strstr(haecer_conn_error(conn), "E-core"));
		assert_int_equal(haecer_slot_alloc(conn, 1, HAECER_SLOT_PROGRAMMABLE, index, &slot),
				 0);
		assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	}
}

/* A named event on an E-core is asked of Gracemont's table, on a P-core of Golden Cove's. */
static void test_event_table_per_core_type(void **state)
{
	struct haecer_context *ctx;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	for (unsigned cpu = 1; cpu < CPUS; cpu += 8)
		assert_core_type_counts(ctx, cpu, is_e_core(cpu));
	haecer_context_close(ctx);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "alderlake",
				    "--sim-virtual-time", "--sim-ideal", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_core_types),
		cmocka_unit_test(test_counters_per_core_type),
		cmocka_unit_test(test_e_core_refuses_pmc_6_and_7),
		cmocka_unit_test(test_event_table_per_core_type),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
