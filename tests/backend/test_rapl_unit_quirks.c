/*
 * The energy unit msrd reports per RAPL domain on real Intel machines, through the msr backend on
 * stand-in trees: Sapphire and Emerald Rapids count DRAM in the register's ESU (the kernel dropped
 * the fixed 2^-16 J DRAM unit for them) and PSYS in whole joules; every model of the quirk table
 * in hw/rapl_quirks.h counts DRAM in 2^-16 J; a client part's DRAM follows the register; an AMD
 * machine never takes an Intel quirk; a VM without RAPL names its hypervisor; Silvermont/Airmont (Bay Trail 0x37, Merrifield 0x4A, Cherry
 * Trail 0x4C, Moorefield 0x5A) count 2^ESU uJ in every domain (powercap's rapl_check_unit_atom):
 * a Bay Trail unit register of 0x505 is 32 uJ per count, not 2^-5 J.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hw/rapl_quirks.h"
#include "tests/backend/backend_test.h"

#define UNIT_ESU_14 0xA0E03ull /* power 1/8 W, energy 2^-14 J, time 2^-10 s */

#define UNIT_BAY_TRAIL 0x505ull /* power 2^5 mW, energy 2^5 uJ (Atom reading), time 2^-0 */

/* A one-CPU Intel family 6 stand-in of `model` with PKG, DRAM and PSYS counting. */
static struct machine_info probe_intel_unit(uint32_t model, uint64_t unit)
{
	uint32_t signature = ((model >> 4) << 16) | (6u << 8) | ((model & 0xF) << 4);
	struct machine_info info;
	char *root = make_temp_dir();

	tree_put_cpuid(root, 0, 0, 0xD, 0x756e6547, 0x6c65746e, 0x49656e69); /* GenuineIntel */
	tree_put_cpuid(root, 0, 1, signature, 0, 0, 0);
	tree_put_msr(root, 0, "msr", MSR_RAPL_POWER_UNIT, unit);
	tree_put_msr(root, 0, "msr", MSR_PKG_ENERGY_STATUS, 0x1000);
	tree_put_msr(root, 0, "msr", MSR_DRAM_ENERGY_STATUS, 0x2000);
	tree_put_msr(root, 0, "msr", MSR_PLATFORM_ENERGY_STATUS, 0x3000);
	info = standin_machine_info(root);
	assert_int_equal(info.model, model);
	assert_true(info.rapl_domains & (1u << RAPL_DOMAIN_DRAM));
	assert_true(info.rapl_domains & (1u << RAPL_DOMAIN_PSYS));
	return info;
}

static struct machine_info probe_intel(uint32_t model)
{
	return probe_intel_unit(model, UNIT_ESU_14);
}

static void test_sapphire_emerald_rapids(void **state)
{
	static const uint32_t models[] = { 0x8F, 0xCF };

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		struct machine_info info = probe_intel(models[i]);

		assert_int_equal(info.rapl_energy_exponent[RAPL_DOMAIN_PKG], 14);
		assert_int_equal(info.rapl_energy_exponent[RAPL_DOMAIN_DRAM], 14); /* the ESU */
		assert_int_equal(info.rapl_energy_exponent[RAPL_DOMAIN_PSYS], 0);  /* joules */
	}
}

static void test_fixed_dram_unit_models(void **state)
{
	static const uint32_t models[] = { 0x3F, 0x4F, 0x56, 0x57, 0x85, 0x55, 0x6A, 0x6C };

	(void)state;
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		struct machine_info info = probe_intel(models[i]);

		assert_int_equal(info.rapl_energy_exponent[RAPL_DOMAIN_DRAM], 16);
		assert_int_equal(info.rapl_energy_exponent[RAPL_DOMAIN_PSYS], 14);
		assert_non_null(rapl_unit_quirk_of(true, 6, models[i], RAPL_DOMAIN_DRAM));
	}
}

/* Haswell desktop (0x3C) and Raptor Lake (0xB7) client parts: every domain in the ESU. */
static void test_client_parts(void **state)
{
	(void)state;
	assert_int_equal(probe_intel(0x3C).rapl_energy_exponent[RAPL_DOMAIN_DRAM], 14);
	assert_int_equal(probe_intel(0xB7).rapl_energy_exponent[RAPL_DOMAIN_PSYS], 14);
}

/* Silvermont/Airmont: msrd reports unit code 0x80 | 5 in every domain, which is exactly 32 uJ a
 * count (the kernel's rapl_check_unit_atom: energy_unit = 1000 * (1 << 5) in its nJ scale); a
 * 2 W Bay Trail thus adds 62500 counts a second, not 2 kW's worth. */
static void test_silvermont_airmont_microjoules(void **state)
{
	static const uint32_t models[] = { 0x37, 0x4A, 0x4C, 0x5A };

	(void)state;
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		struct machine_info info = probe_intel_unit(models[i], UNIT_BAY_TRAIL);

		for (int d = RAPL_DOMAIN_PKG; d <= RAPL_DOMAIN_PSYS; d++) {
			if (!(info.rapl_domains & (1u << d)))
				continue;
			assert_int_equal(info.rapl_energy_exponent[d], 0x85);
			assert_true(rapl_unit_code_joules(info.rapl_energy_exponent[d]) == 32e-6);
		}
		assert_true(2.0 / rapl_unit_code_joules(info.rapl_energy_exponent[0]) == 62500.0);
	}
	/* Avoton (0x4D, Silvermont server) and Goldmont (0x5C) use the core rule. */
	assert_int_equal(probe_intel_unit(0x4D, UNIT_BAY_TRAIL).rapl_energy_exponent[0], 5);
	assert_int_equal(probe_intel_unit(0x5C, UNIT_BAY_TRAIL).rapl_energy_exponent[0], 5);
	assert_false(rapl_unit_is_atom_microjoule(false, 6, 0x37));
	/* The resolution a policy sets in uJ, in counts: 1000 uJ is 31 counts of 32 uJ. */
	assert_true(rapl_unit_code_units_of_uj(0x85, 1000) == 31);
	assert_true(rapl_unit_code_units_of_uj(14, 1000000) == 16384);
}

/* In a VM without RAPL, the hypervisor is named (CPUID 1 ECX[31], leaf 0x40000000). */
static void test_vm_names_hypervisor(void **state)
{
	char *root = make_temp_dir();
	struct machine_info info;

	(void)state;
	tree_put_cpuid(root, 0, 0, 0xD, 0x756e6547, 0x6c65746e, 0x49656e69);
	tree_put_cpuid(root, 0, 1, 0x000506E3, 0, 1u << 31, 0);
	tree_put_cpuid(root, 0, 0x40000000u, 0x40000001u, 0x4b4d564b, 0x564b4d56, 0x0000004d);
	tree_put_msr(root, 0, "msr", MSR_IA32_TSC, 1000);
	info = standin_machine_info(root);
	assert_string_equal(info.hypervisor, "KVMKVMKVM");
	assert_non_null(strstr(info.model_name, "VM under KVMKVMKVM"));
	assert_int_equal(info.rapl_domains, 0);
	root = make_temp_dir();
	tree_put_cpuid(root, 0, 0, 0xD, 0x756e6547, 0x6c65746e, 0x49656e69);
	tree_put_cpuid(root, 0, 1, 0x000506E3, 0, 0, 0);
	tree_put_msr(root, 0, "msr", MSR_IA32_TSC, 1000);
	assert_string_equal(standin_machine_info(root).hypervisor, "");
}

/* Granite Rapids' PSYS is TPMI's: a readable MSR 0x64D is not taken for it. */
static void test_granite_rapids_psys_not_by_msr(void **state)
{
	char *root = make_temp_dir();
	struct machine_info info;

	(void)state;
	tree_put_cpuid(root, 0, 0, 0xD, 0x756e6547, 0x6c65746e, 0x49656e69);
	tree_put_cpuid(root, 0, 1, 0x000A06D1, 0, 0, 0); /* 06_AD */
	tree_put_msr(root, 0, "msr", MSR_RAPL_POWER_UNIT, STANDIN_SNB_ENERGY_UNIT);
	tree_put_msr(root, 0, "msr", MSR_PKG_ENERGY_STATUS, 1000);
	tree_put_msr(root, 0, "msr", MSR_PLATFORM_ENERGY_STATUS, 5000);
	info = standin_machine_info(root);
	assert_int_equal(info.model, 0xAD);
	assert_true(info.rapl_domains & (1u << RAPL_DOMAIN_PKG));
	assert_false((info.rapl_domains | info.rapl_dormant_domains) & (1u << RAPL_DOMAIN_PSYS));
}

/* The table never applies off Intel family 6 (AMD family 19h has model numbers that collide). */
static void test_not_for_amd(void **state)
{
	(void)state;
	assert_null(rapl_unit_quirk_of(false, 6, 0x55, RAPL_DOMAIN_DRAM));
	assert_null(rapl_unit_quirk_of(true, 0x19, 0x55, RAPL_DOMAIN_DRAM));
	for (size_t i = 0; i < sizeof(rapl_unit_quirks) / sizeof(rapl_unit_quirks[0]); i++)
		assert_true(strstr(rapl_unit_quirks[i].source, "rapl.c") != NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sapphire_emerald_rapids),
		cmocka_unit_test(test_fixed_dram_unit_models),
		cmocka_unit_test(test_client_parts),
		cmocka_unit_test(test_not_for_amd),
		cmocka_unit_test(test_silvermont_airmont_microjoules),
		cmocka_unit_test(test_vm_names_hypervisor),
		cmocka_unit_test(test_granite_rapids_psys_not_by_msr),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
