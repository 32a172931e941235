/*
 * The RAPL unit registers of every shipped model hold the documented values (SDM 14.9.1 and the
 * AMD PPR: power 3:0, energy 12:8, time 19:16, unit = 2^-field), machine_info reports the same
 * exponents (with Skylake-SP's fixed 2^-16 J DRAM unit), and unit, status and power-info
 * registers are read-only (a write is #GP: EIO).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

struct expected_units {
	const char *model;
	uint32_t unit_address;
	unsigned power, energy, time;
	uint32_t domains;
	uint8_t dram_exponent;
};

static const struct expected_units expected[] = {
	{ "sandybridge", MSR_RAPL_POWER_UNIT, 3, 16, 10,
	  (1u << RAPL_DOMAIN_PKG) | (1u << RAPL_DOMAIN_PP0) | (1u << RAPL_DOMAIN_PP1), 0 },
	{ "skylake-sp", MSR_RAPL_POWER_UNIT, 3, 14, 10,
	  (1u << RAPL_DOMAIN_PKG) | (1u << RAPL_DOMAIN_DRAM), 16 },
	{ "zen3", MSR_AMD_RAPL_POWER_UNIT, 3, 16, 10,
	  (1u << RAPL_DOMAIN_AMD_PKG) | (1u << RAPL_DOMAIN_AMD_CORE), 0 },
};

static uint32_t status_address(enum rapl_domain domain)
{
	static const uint32_t addresses[RAPL_DOMAIN_COUNT] = {
		[RAPL_DOMAIN_PKG] = MSR_PKG_ENERGY_STATUS,
		[RAPL_DOMAIN_PP0] = MSR_PP0_ENERGY_STATUS,
		[RAPL_DOMAIN_PP1] = MSR_PP1_ENERGY_STATUS,
		[RAPL_DOMAIN_DRAM] = MSR_DRAM_ENERGY_STATUS,
		[RAPL_DOMAIN_PSYS] = MSR_PLATFORM_ENERGY_STATUS,
		[RAPL_DOMAIN_AMD_CORE] = MSR_AMD_CORE_ENERGY_STATUS,
		[RAPL_DOMAIN_AMD_PKG] = MSR_AMD_PKG_ENERGY_STATUS,
	};
	return addresses[domain];
}

static void check_model(const struct expected_units *want)
{
	struct msr_backend *backend = open_virtual_sim(want->model, 0);
	struct machine_info info;
	uint64_t unit;

	assert_int_equal(backend_machine_info(backend, &info), 0);
	unit = read_or_die(backend, 0, want->unit_address);
	assert_int_equal(RAPL_UNIT_POWER(unit), want->power);
	assert_int_equal(RAPL_UNIT_ENERGY(unit), want->energy);
	assert_int_equal(RAPL_UNIT_TIME(unit), want->time);
	assert_int_equal(info.rapl_power_unit, unit);
	assert_int_equal(info.rapl_domains, want->domains);
	for (int domain = 0; domain < RAPL_DOMAIN_COUNT; domain++) {
		uint64_t value;

		if (!(want->domains & (1u << domain))) {
			assert_int_equal(backend_read(backend, 0, status_address(domain), &value),
					 -EIO);
			continue;
		}
		assert_int_equal(info.rapl_energy_exponent[domain],
				 domain == RAPL_DOMAIN_DRAM ? want->dram_exponent : want->energy);
		assert_true(info.rapl_max_power_mw[domain] > 0);
		assert_int_equal(backend_write(backend, 0, status_address(domain), 0), -EIO);
	}
	assert_int_equal(backend_write(backend, 0, want->unit_address, unit), -EIO);
	assert_int_equal(read_or_die(backend, 0, want->unit_address), unit);
	backend_close(backend);
}

static void test_units_of_every_model(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
		check_model(&expected[i]);
}

/* MSR_PKG_POWER_INFO (Intel only) holds the thermal spec power in power units, read-only. */
static void test_power_info(void **state)
{
	struct msr_backend *backend = open_virtual_sim("skylake-sp", 0);
	uint64_t info = read_or_die(backend, 0, MSR_PKG_POWER_INFO), value;

	(void)state;
	assert_int_equal(info & 0x7FFF, 125 * 8);
	assert_int_equal(backend_write(backend, 0, MSR_PKG_POWER_INFO, info), -EIO);
	backend_close(backend);
	backend = open_virtual_sim("zen3", 0);
	assert_int_equal(backend_read(backend, 0, MSR_PKG_POWER_INFO, &value), -EIO);
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_units_of_every_model),
		cmocka_unit_test(test_power_info),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
