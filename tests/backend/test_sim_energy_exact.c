/*
 * Energy is integrated exactly: with power = idle + (max - idle) * mean load, the ground truth
 * after t ns at constant load is power * t femtojoules to the unit, and the register shows
 * floor(E(last ms boundary) / unit) mod 2^32, on every model and domain, also when the load
 * changes in the middle of a millisecond.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

#define FJ_PER_J 1000000000000000ull

static uint32_t status_address(enum rapl_domain domain)
{
	switch (domain) {
	case RAPL_DOMAIN_PKG: return MSR_PKG_ENERGY_STATUS;
	case RAPL_DOMAIN_PP0: return MSR_PP0_ENERGY_STATUS;
	case RAPL_DOMAIN_PP1: return MSR_PP1_ENERGY_STATUS;
	case RAPL_DOMAIN_DRAM: return MSR_DRAM_ENERGY_STATUS;
	case RAPL_DOMAIN_AMD_CORE: return MSR_AMD_CORE_ENERGY_STATUS;
	default: return MSR_AMD_PKG_ENERGY_STATUS;
	}
}

static uint64_t expected_register(unsigned __int128 femtojoules, uint32_t exponent)
{
	return (uint64_t)((femtojoules << exponent) / FJ_PER_J) & RAPL_ENERGY_COUNTER_MASK;
}

/* Idle for 7.25 ms, then busy for 12.5 ms: check the truth against power * time and the register
 * against the truth at the last boundary. */
static void check_domain(const char *model, enum rapl_domain domain)
{
	struct msr_backend *backend = open_ideal_sim(model, 0);
	struct sim_energy_truth idle, busy, truth;
	struct machine_info info;
	unsigned __int128 at_boundary;
	uint64_t max_uw;

	assert_int_equal(backend_machine_info(backend, &info), 0);
	max_uw = (uint64_t)info.rapl_max_power_mw[domain] * 1000;
	assert_int_equal(backend_sim_energy_truth(backend, 0, domain, &idle), 0);
	assert_true(idle.power_microwatts <= max_uw);
	assert_int_equal(backend_sim_advance(backend, 7250000), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, domain, &truth), 0);
	assert_true(truth.femtojoules == (unsigned __int128)idle.power_microwatts * 7250000);

	assert_int_equal(backend_sim_set_load(backend, -1, 1.0), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, domain, &busy), 0);
	assert_int_equal(busy.power_microwatts, max_uw); /* the shipped maxima are whole mW */
	assert_int_equal(backend_sim_advance(backend, 12500000), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, domain, &truth), 0);
	assert_true(truth.femtojoules == (unsigned __int128)idle.power_microwatts * 7250000 +
						 (unsigned __int128)max_uw * 12500000);
	/* Last boundary: 19 ms, 11.75 ms of it busy. */
	at_boundary = (unsigned __int128)idle.power_microwatts * 7250000 +
		      (unsigned __int128)max_uw * 11750000;
	assert_int_equal(truth.units_at_update,
			 (uint64_t)((at_boundary << truth.energy_exponent) / FJ_PER_J));
	assert_int_equal(read_or_die(backend, 0, status_address(domain)),
			 expected_register(at_boundary, truth.energy_exponent));
	assert_true(truth.joules > 0.0 &&
		    (unsigned __int128)(truth.joules * 1e15 + 0.5) / 1000000 ==
			    truth.femtojoules / 1000000);
	backend_close(backend);
}

static void test_exact_on_every_domain(void **state)
{
	(void)state;
	check_domain("sandybridge", RAPL_DOMAIN_PKG);
	check_domain("sandybridge", RAPL_DOMAIN_PP0);
	check_domain("sandybridge", RAPL_DOMAIN_PP1);
	check_domain("skylake-sp", RAPL_DOMAIN_PKG);
	check_domain("skylake-sp", RAPL_DOMAIN_DRAM);
	check_domain("zen3", RAPL_DOMAIN_AMD_PKG);
	check_domain("zen3", RAPL_DOMAIN_AMD_CORE);
}

/* Half the CPUs of a package busy: power = idle + (max - idle) / 2 (integer µW). Only the CPUs
 * of a package drive it: package 1 of Skylake-SP stays idle. */
static void test_partial_load_and_packages(void **state)
{
	struct msr_backend *backend = open_ideal_sim("skylake-sp", 0);
	struct sim_energy_truth idle, package0, package1;
	struct machine_info info;
	uint64_t max_uw;

	(void)state;
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &idle), 0);
	max_uw = (uint64_t)info.rapl_max_power_mw[RAPL_DOMAIN_PKG] * 1000;
	for (int cpu = 0; cpu < 16; cpu++)
		assert_int_equal(backend_sim_set_load(backend, cpu, 1.0), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &package0), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 1, RAPL_DOMAIN_PKG, &package1), 0);
	assert_int_equal(package0.power_microwatts,
			 idle.power_microwatts + (max_uw - idle.power_microwatts) / 2);
	assert_int_equal(package1.power_microwatts, idle.power_microwatts);
	assert_int_equal(backend_sim_energy_truth(backend, 2, RAPL_DOMAIN_PKG, &package1), -ENXIO);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PP0, &package1), -ENOENT);
	backend_close(backend);
}

/* AMD's core energy is per core: the two threads of core 0 see one register, core 1 another. */
static void test_amd_core_energy_is_per_core(void **state)
{
	struct msr_backend *backend = open_ideal_sim("zen3", 0);
	struct sim_energy_truth core0, core1;

	(void)state;
	assert_int_equal(backend_sim_set_load(backend, 1, 1.0), 0);
	assert_int_equal(backend_sim_advance(backend, 5 * NS_PER_MS), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_AMD_CORE_ENERGY_STATUS),
			 read_or_die(backend, 1, MSR_AMD_CORE_ENERGY_STATUS));
	assert_true(read_or_die(backend, 0, MSR_AMD_CORE_ENERGY_STATUS) >
		    read_or_die(backend, 2, MSR_AMD_CORE_ENERGY_STATUS));
	assert_int_equal(backend_sim_energy_truth_cpu(backend, 0, RAPL_DOMAIN_AMD_CORE, &core0), 0);
	assert_int_equal(backend_sim_energy_truth_cpu(backend, 2, RAPL_DOMAIN_AMD_CORE, &core1), 0);
	assert_true(core0.power_microwatts > core1.power_microwatts);
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_on_every_domain),
		cmocka_unit_test(test_partial_load_and_packages),
		cmocka_unit_test(test_amd_core_energy_is_per_core),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
