/*
 * The energy unit msrd reports per RAPL domain on real Intel machines, through the msr backend on
 * stand-in trees: Sapphire and Emerald Rapids count DRAM in the register's ESU (the kernel dropped
 * the fixed 2^-16 J DRAM unit for them) and PSYS in whole joules; every model of the quirk table
 * in hw/rapl_quirks.h counts DRAM in 2^-16 J; a client part's DRAM follows the register; an AMD
 * machine never takes an Intel quirk.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hw/rapl_quirks.h"
#include "tests/backend/backend_test.h"

#define UNIT_ESU_14 0xA0E03ull /* power 1/8 W, energy 2^-14 J, time 2^-10 s */

/* A one-CPU Intel family 6 stand-in of `model` with PKG, DRAM and PSYS counting. */
static struct machine_info probe_intel(uint32_t model)
{
	uint32_t signature = ((model >> 4) << 16) | (6u << 8) | ((model & 0xF) << 4);
	struct machine_info info;
	char *root = make_temp_dir();

	tree_put_cpuid(root, 0, 0, 0xD, 0x756e6547, 0x6c65746e, 0x49656e69); /* GenuineIntel */
	tree_put_cpuid(root, 0, 1, signature, 0, 0, 0);
	tree_put_msr(root, 0, "msr", MSR_RAPL_POWER_UNIT, UNIT_ESU_14);
	tree_put_msr(root, 0, "msr", MSR_PKG_ENERGY_STATUS, 0x1000);
	tree_put_msr(root, 0, "msr", MSR_DRAM_ENERGY_STATUS, 0x2000);
	tree_put_msr(root, 0, "msr", MSR_PLATFORM_ENERGY_STATUS, 0x3000);
	info = standin_machine_info(root);
	assert_int_equal(info.model, model);
	assert_true(info.rapl_domains & (1u << RAPL_DOMAIN_DRAM));
	assert_true(info.rapl_domains & (1u << RAPL_DOMAIN_PSYS));
	return info;
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
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
