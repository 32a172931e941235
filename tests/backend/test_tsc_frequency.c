/*
 * The TSC frequency msrd reports on real machines (haecer_energy_result.seconds depends on it),
 * through the msr backend on stand-in trees, and the source it names: Intel CPUID 0x15 (crystal
 * x numerator / denominator), the SDM's crystal of the model x 0x15's ratio when 0x15 lacks the
 * crystal (Skylake/Kaby/Coffee Lake client 24 MHz, Skylake-SP/Cascade Lake 25 MHz, Goldmont
 * 19.2 MHz), CPUID 0x16 (base MHz) for other such models when the TSC cannot be calibrated,
 * MSR_PLATFORM_INFO's ratio x 100 MHz (133.33 MHz on Nehalem), AMD's P0 frequency from
 * MSRC001_0064 (family 17h/19h: 200 MHz x Fid / DfsId; 1Ah: 5 MHz x Fid), and nothing (0,
 * unknown) when none applies and the TSC does not move for a calibration.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

struct tree_facts {
	bool amd;
	uint32_t signature;       /* CPUID 1 EAX */
	uint32_t max_leaf;
	uint32_t leaf_15[3];      /* eax, ebx, ecx */
	uint32_t leaf_16_eax;
	uint64_t platform_info;   /* 0: absent */
	uint64_t pstate0;         /* 0: absent */
};

static struct machine_info probe(const struct tree_facts *facts)
{
	char *root = make_temp_dir();

	if (facts->amd)
		tree_put_cpuid(root, 0, 0, facts->max_leaf, 0x68747541, 0x444D4163, 0x69746E65);
	else
		tree_put_cpuid(root, 0, 0, facts->max_leaf, 0x756e6547, 0x6c65746e, 0x49656e69);
	tree_put_cpuid(root, 0, 1, facts->signature, 0, 0, 0);
	tree_put_cpuid(root, 0, 0x15, facts->leaf_15[0], facts->leaf_15[1], facts->leaf_15[2], 0);
	tree_put_cpuid(root, 0, 0x16, facts->leaf_16_eax, 0, 0, 0);
	tree_put_cpuid(root, 0, 0x80000000u, 0x80000008u, 0, 0, 0);
	tree_put_msr(root, 0, "msr", MSR_IA32_TSC, 1000);
	if (facts->platform_info)
		tree_put_msr(root, 0, "msr", MSR_PLATFORM_INFO, facts->platform_info);
	if (facts->pstate0)
		tree_put_msr(root, 0, "msr", MSR_AMD_PSTATE_DEF0, facts->pstate0);
	return standin_machine_info(root);
}

static void expect(const struct tree_facts *facts, uint64_t hz, unsigned source)
{
	struct machine_info info = probe(facts);

	assert_int_equal(info.tsc_hz, hz);
	assert_int_equal(info.tsc_source, source);
}

static void test_intel(void **state)
{
	/* Skylake client: 24 MHz crystal x 176 / 2. */
	struct tree_facts cpuid_15 = { .signature = 0x000506E3, .max_leaf = 0x16,
				       .leaf_15 = { 2, 176, 24000000 }, .leaf_16_eax = 2100 };
	/* 0x15 without the crystal on a model the SDM's table lacks (Cannon Lake, 06_66), and a
	 * stand-in TSC that does not move: 0x16's base frequency. */
	struct tree_facts cpuid_16 = { .signature = 0x00060663, .max_leaf = 0x16,
				       .leaf_15 = { 2, 176, 0 }, .leaf_16_eax = 2100 };
	/* Sandy Bridge: no leaf 0x15, ratio 34 in MSR_PLATFORM_INFO[15:8]. */
	struct tree_facts platform = { .signature = 0x000206A7, .max_leaf = 0xD,
				       .platform_info = 0x22ull << 8 };
	/* Nehalem: ratio 20 of a 133.33 MHz bus. */
	struct tree_facts nehalem = { .signature = 0x000106A5, .max_leaf = 0xB,
				      .platform_info = 20ull << 8 };

	(void)state;
	expect(&cpuid_15, 2112000000ull, TSC_SOURCE_CPUID_15);
	expect(&cpuid_16, 2100000000ull, TSC_SOURCE_CPUID_16);
	expect(&platform, 3400000000ull, TSC_SOURCE_PLATFORM_INFO);
	expect(&nehalem, 20 * 133333333ull, TSC_SOURCE_PLATFORM_INFO);
}

/* 0x15 without the crystal on the SDM's models: its crystal, not 0x16's base. */
static void test_sdm_crystal_table(void **state)
{
	/* Core i7-6700K (Skylake, 06_5E): 24 MHz x 334 / 2 = 4008 MHz; its base is 4000. */
	struct tree_facts skylake = { .signature = 0x000506E3, .max_leaf = 0x16,
				      .leaf_15 = { 2, 334, 0 }, .leaf_16_eax = 4000 };
	/* Coffee Lake (06_9E): the same 24 MHz crystal. */
	struct tree_facts coffee = { .signature = 0x000906EA, .max_leaf = 0x16,
				     .leaf_15 = { 2, 300, 0 }, .leaf_16_eax = 3600 };
	/* Xeon Gold 6130 (Skylake-SP, 06_55): 25 MHz x 168 / 2 = 2100 MHz. */
	struct tree_facts skylake_sp = { .signature = 0x00050654, .max_leaf = 0x16,
					 .leaf_15 = { 2, 168, 0 }, .leaf_16_eax = 2100 };
	/* Goldmont (06_5C): 19.2 MHz x 62 = 1190.4 MHz. */
	struct tree_facts goldmont = { .signature = 0x000506C9, .max_leaf = 0x16,
				       .leaf_15 = { 1, 62, 0 }, .leaf_16_eax = 1100 };

	(void)state;
	expect(&skylake, 4008000000ull, TSC_SOURCE_CRYSTAL_TABLE);
	expect(&coffee, 3600000000ull, TSC_SOURCE_CRYSTAL_TABLE);
	expect(&skylake_sp, 2100000000ull, TSC_SOURCE_CRYSTAL_TABLE);
	expect(&goldmont, 1190400000ull, TSC_SOURCE_CRYSTAL_TABLE);
}

/* CPUID 0x80000007 EDX[8]: invariant or not, said; unknown when the leaf is missing. */
static void test_invariant_tsc(void **state)
{
	struct tree_facts facts = { .signature = 0x000506E3, .max_leaf = 0x16,
				    .leaf_15 = { 2, 334, 0 }, .leaf_16_eax = 4000 };
	char *root;

	(void)state;
	assert_int_equal(probe(&facts).tsc_invariant, -1);
	for (uint32_t edx = 0; edx <= 0x100; edx += 0x100) {
		root = make_temp_dir();
		tree_put_cpuid(root, 0, 0, 0x16, 0x756e6547, 0x6c65746e, 0x49656e69);
		tree_put_cpuid(root, 0, 1, facts.signature, 0, 0, 0);
		tree_put_cpuid(root, 0, 0x80000000u, 0x80000008u, 0, 0, 0);
		tree_put_cpuid(root, 0, 0x80000007u, 0, 0, 0, edx);
		tree_put_msr(root, 0, "msr", MSR_IA32_TSC, 1000);
		assert_int_equal(standin_machine_info(root).tsc_invariant, edx ? 1 : 0);
	}
}

static void test_amd(void **state)
{
	/* Zen 3 (19h): Fid 0x98, DfsId 8: 3.8 GHz. */
	struct tree_facts zen3 = { .amd = true, .signature = 0x00A20F10, .max_leaf = 0x10,
				   .pstate0 = AMD_PSTATE_ENABLED | (8ull << 8) | 0x98 };
	/* Zen 5 (1Ah): Fid 0x2EE x 5 MHz: 3.75 GHz. */
	struct tree_facts zen5 = { .amd = true, .signature = 0x00B40F40, .max_leaf = 0x10,
				   .pstate0 = AMD_PSTATE_ENABLED | 0x2EE };
	/* A disabled P-state says nothing. */
	struct tree_facts disabled = { .amd = true, .signature = 0x00A20F10, .max_leaf = 0x10,
				       .pstate0 = (8ull << 8) | 0x98 };

	(void)state;
	expect(&zen3, 3800000000ull, TSC_SOURCE_AMD_P0);
	expect(&zen5, 3750000000ull, TSC_SOURCE_AMD_P0);
	expect(&disabled, 0, TSC_SOURCE_UNKNOWN); /* the stand-in TSC does not move */
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(tsc_source_name(TSC_SOURCE_CPUID_15), "CPUID 0x15");
	assert_string_equal(tsc_source_name(TSC_SOURCE_COUNT), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_intel),
		cmocka_unit_test(test_sdm_crystal_table),
		cmocka_unit_test(test_invariant_tsc),
		cmocka_unit_test(test_amd),
		cmocka_unit_test(test_names),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
