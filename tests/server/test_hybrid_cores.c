/*
 * Hybrid Alder Lake (06_97): a stand-in of two P-cores (CPUs 0-1, CPUID 1AH core type 40H) and
 * two E-cores (CPUs 2-3, core type 20H), each CPU answering its own CPUID through
 * dev/cpu/N/cpuid, with CPUID 07H EDX[15] (hybrid) set, and leaf 0AH as the part gives it on
 * every CPU: only the common 6 general-purpose counters (Linux adds cpu_core's 2 more).
 * msrd reads each CPU's type and counters (backend/probe_cores.c): a P-core lends all 8
 * counters and an E-core 6 (msrd used to take CPU 0's count for every CPU); MACHINE_INFO names
 * each CPU's type; the library encodes a model-specific event for an E-core from libpfm4's
 * Gracemont table (adl_grt), never from Golden Cove's (adl_glc), and a counter's info names the
 * core type it counts on.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "haecer/haecer.h"
#include "haecer/msrd.h"
#include "harness/policy_text.h"
#include "harness/standin_tree.h"
#include "tests/lib/core_type_check.h"
#include "tests/lib/msrd_group.h"

#define CPUS 4u
#define P_CORE_COUNTERS 8u
#define E_CORE_COUNTERS 6u

static struct msrd_server server;
static struct haecer_conn *conn;
static char tree[PATH_MAX + 16];
static const char *const arguments[] = { "--backend", "msr", "--dev-root", tree, NULL };

static bool is_e_core(unsigned cpu)
{
	return cpu >= 2;
}

static void test_machine_names_core_types(void **state)
{
	struct haecer_machine_info machine;

	(void)state;
	assert_int_equal(haecer_machine_info(conn, &machine), 0);
	assert_true(machine.flags & HAECER_MACHINE_HYBRID);
	for (unsigned cpu = 0; cpu < CPUS; cpu++)
		assert_int_equal(machine.cpu_core_type[cpu],
				 is_e_core(cpu) ? HAECER_CORE_TYPE_ATOM : HAECER_CORE_TYPE_CORE);
}

/* Every counter of the CPU is lent, and not one more. */
static void test_counters_per_core_type(void **state)
{
	(void)state;
	for (unsigned cpu = 1; cpu < CPUS; cpu++) {
		unsigned expected = is_e_core(cpu) ? E_CORE_COUNTERS : P_CORE_COUNTERS;
		struct haecer_slot slots[P_CORE_COUNTERS + 1];
		unsigned taken = 0;

		while (taken <= P_CORE_COUNTERS &&
		       haecer_slot_alloc(conn, cpu, HAECER_SLOT_PROGRAMMABLE, -1, &slots[taken]) == 0)
			taken++;
		assert_int_equal(taken, expected);
		for (unsigned i = 0; i < taken; i++)
			assert_int_equal(haecer_slot_free(conn, slots[i].id), 0);
	}
	/* PMC 7 exists on a P-core only. */
	struct haecer_slot slot;
	assert_int_equal(haecer_slot_alloc(conn, 3, HAECER_SLOT_PROGRAMMABLE, 7, &slot),
			 -EOPNOTSUPP);
}

/* Named events: an E-core's come from Gracemont's table, a P-core's from Golden Cove's. The
 * installed libpfm4 may lack both (they came in 4.14): then the refusal names the table. */
static void test_event_table_per_core_type(void **state)
{
	struct haecer_context *ctx;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	for (unsigned cpu = 1; cpu < CPUS; cpu++)
		assert_core_type_counts(ctx, cpu, is_e_core(cpu));
	haecer_context_close(ctx);
}

static void put_cpu(unsigned cpu)
{
	uint32_t gp = E_CORE_COUNTERS; /* the common counters, on every CPU */
	char path[96];

	tree_put_msr(tree, cpu, "msr", 0x4C8, 0); /* the file spans every PMU register (zeros) */
	tree_put_cpuid(tree, cpu, 0, 0x23, 0x756e6547, 0x6c65746e, 0x49656e69);
	tree_put_cpuid(tree, cpu, 1, 0x00090672, 0, 0, 0);         /* 06_97 stepping 2 */
	tree_put_cpuid(tree, cpu, 7, 0, 0, 0, 1u << 15);            /* hybrid */
	/* leaf 0AH: v5, gp counters of 48 bits, 7 events; 3 fixed of 48 bits */
	tree_put_cpuid(tree, cpu, 0x0A, 0x07300005u | (gp << 8), 0, 0, (48u << 5) | 3u);
	tree_put_cpuid(tree, cpu, 0x1A, is_e_core(cpu) ? 0x20000000u : 0x40000000u, 0, 0, 0);
	snprintf(path, sizeof(path), "sys/devices/system/cpu/cpu%u/topology/physical_package_id",
		 cpu);
	tree_write_text(tree, path, "0\n");
}

static int prepare(const struct msrd_server *prepared)
{
	snprintf(tree, sizeof(tree), "%s/root", prepared->dir);
	mkdir(tree, 0755);
	for (unsigned cpu = 0; cpu < CPUS; cpu++)
		put_cpu(cpu);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_machine_names_core_types),
		cmocka_unit_test(test_counters_per_core_type),
		cmocka_unit_test(test_event_table_per_core_type),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, POLICY_PMU_FOR_ROOT, prepare, arguments, &conn, tests);
}
