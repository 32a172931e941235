/*
 * Hybrid core types without msrd (backend/probe_cores.c), on stand-in trees of two CPUs:
 * - Meteor Lake (06_AA) with CPUID leaf 23H: each CPU's counters come from its sub-leaf 1
 *   bitmaps (P-core: 8 general-purpose, fixed 0-2; E-core: 6, fixed 0-2), not from leaf 0AH;
 * - Alder Lake (06_97) without it: leaf 0AH gives every CPU the common 6 + 3 counters, and a
 *   P-core gets the 2 + 1 more it has (as Linux gives cpu_core);
 * - a hybrid part whose second CPU has no cpuid device: the core types come from the kernel's
 *   sys/devices/cpu_core/cpus and cpu_atom/cpus lists, every CPU keeping CPU 0's leaf 0AH.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hw/core_type.h"
#include "tests/backend/backend_test.h"

static void put_common(char *root, unsigned cpu)
{
	tree_put_msr(root, cpu, "msr", MSR_IA32_TSC, 1000);
	tree_put_cpuid(root, cpu, 0, 0x23, 0x756e6547, 0x6c65746e, 0x49656e69);
	tree_put_cpuid(root, cpu, 1, 0x000A06A4, 0, 0, 0);           /* 06_AA */
	tree_put_cpuid(root, cpu, 7, 0, 0, 0, 1u << 15);              /* hybrid */
	tree_put_cpuid(root, cpu, 0xA, 0x07300805, 0, 0, (48u << 5) | 3u);
}

/* A CPUID record of a sub-leaf: 16 bytes at 16 * ((subleaf << 32) | leaf). */
static void put_subleaf(char *root, unsigned cpu, uint32_t leaf, uint32_t subleaf,
			uint32_t eax, uint32_t ebx)
{
	uint32_t regs[4] = { eax, ebx, 0, 0 };
	char relative[64];

	snprintf(relative, sizeof(relative), "dev/cpu/%u/cpuid", cpu);
	tree_write_at(root, relative, regs, sizeof(regs),
		      (off_t)(16 * (((uint64_t)subleaf << 32) | leaf)));
}

static void test_leaf_23_bitmaps(void **state)
{
	char *root = make_temp_dir();
	struct machine_info info;

	(void)state;
	for (unsigned cpu = 0; cpu < 2; cpu++) {
		put_common(root, cpu);
		tree_put_cpuid(root, cpu, 0x1A, cpu == 0 ? 0x40000000u : 0x20000000u, 0, 0, 0);
		put_subleaf(root, cpu, 0x23, 0, 0x2, 0);                   /* sub-leaf 1 valid */
		put_subleaf(root, cpu, 0x23, 1, cpu == 0 ? 0xFF : 0x3F, 0x7);
	}
	info = standin_machine_info(root);
	assert_true(info.hybrid);
	assert_int_equal(info.cpu_core_type[0], CPU_CORE_TYPE_CORE);
	assert_int_equal(info.cpu_core_type[1], CPU_CORE_TYPE_ATOM);
	assert_int_equal(info.cpu_gp_mask[0], 0xFF);
	assert_int_equal(info.cpu_gp_mask[1], 0x3F);
	assert_int_equal(info.cpu_fixed_mask[1], 0x7);
}

/* Alder Lake (06_97) without leaf 23H: every CPU's leaf 0AH gives only the common counters (6
 * general-purpose, 3 fixed), as the part does; a P-core has 2 and 1 more (Linux's cpu_core). */
static void test_common_leaf_0a(void **state)
{
	char *root = make_temp_dir();
	struct machine_info info;

	(void)state;
	for (unsigned cpu = 0; cpu < 2; cpu++) {
		put_common(root, cpu);
		tree_put_cpuid(root, cpu, 1, 0x00090672, 0, 0, 0);          /* 06_97 */
		tree_put_cpuid(root, cpu, 0xA, 0x07300605, 0, 0, (48u << 5) | 3u);
		tree_put_cpuid(root, cpu, 0x1A, cpu == 0 ? 0x40000000u : 0x20000000u, 0, 0, 0);
	}
	info = standin_machine_info(root);
	assert_true(info.hybrid);
	assert_int_equal(info.cpu_gp_mask[0], 0xFF);
	assert_int_equal(info.cpu_fixed_mask[0], 0xF);
	assert_int_equal(info.cpu_gp_mask[1], 0x3F);
	assert_int_equal(info.cpu_fixed_mask[1], 0x7);
}

static void test_sysfs_lists_without_cpuid(void **state)
{
	char *root = make_temp_dir();
	struct machine_info info;

	(void)state;
	put_common(root, 0);
	tree_put_msr(root, 1, "msr", MSR_IA32_TSC, 1000); /* CPU 1: no cpuid device */
	tree_write_text(root, "sys/devices/cpu_core/cpus", "0\n");
	tree_write_text(root, "sys/devices/cpu_atom/cpus", "1\n");
	info = standin_machine_info(root);
	assert_true(info.hybrid);
	assert_int_equal(info.cpu_core_type[0], CPU_CORE_TYPE_CORE);
	assert_int_equal(info.cpu_core_type[1], CPU_CORE_TYPE_ATOM);
	assert_int_equal(info.cpu_gp_mask[1], 0xFF); /* CPU 0's leaf 0AH: said in the log */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_leaf_23_bitmaps),
		cmocka_unit_test(test_common_leaf_0a),
		cmocka_unit_test(test_sysfs_lists_without_cpuid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
