/*
 * Energy registers change only at 1 ms update boundaries (SDM 14.9.3: "updated about every
 * 1 ms"): between boundaries the value stays, crossing one changes it to the ground truth at that
 * boundary. With a step per register access, a loop polling for the next update ends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

static void check_steps(const char *model, uint32_t address, enum rapl_domain domain)
{
	struct msr_backend *backend = open_ideal_sim(model, 0);
	struct sim_energy_truth truth;
	uint64_t previous = read_or_die(backend, 0, address);

	assert_int_equal(backend_sim_set_load(backend, -1, 1.0), 0);
	/* 100 us steps over 20 ms: the value changes exactly when a ms boundary is crossed. */
	for (unsigned step = 1; step <= 200; step++) {
		uint64_t now_ns, value;

		assert_int_equal(backend_sim_advance(backend, 100000), 0);
		value = read_or_die(backend, 0, address);
		assert_int_equal(backend_sim_now(backend, &now_ns), 0);
		assert_int_equal(backend_sim_energy_truth(backend, 0, domain, &truth), 0);
		assert_int_equal(truth.last_update_ns, now_ns - now_ns % NS_PER_MS);
		assert_int_equal(value, truth.units_at_update & RAPL_ENERGY_COUNTER_MASK);
		if (step % 10 == 0)
			assert_true(value != previous); /* busy: more than one unit per ms */
		else
			assert_int_equal(value, previous);
		previous = value;
	}
	backend_close(backend);
}

static void test_update_step_every_model(void **state)
{
	(void)state;
	check_steps("sandybridge", MSR_PKG_ENERGY_STATUS, RAPL_DOMAIN_PKG);
	check_steps("sandybridge", MSR_PP0_ENERGY_STATUS, RAPL_DOMAIN_PP0);
	check_steps("skylake-sp", MSR_DRAM_ENERGY_STATUS, RAPL_DOMAIN_DRAM);
	check_steps("zen3", MSR_AMD_PKG_ENERGY_STATUS, RAPL_DOMAIN_AMD_PKG);
}

/* What a calibrated start-of-measurement does: spin until the register changes. */
static void test_polling_loop_ends_with_access_step(void **state)
{
	struct msr_backend *backend = open_ideal_sim("sandybridge", 1000);
	uint64_t first, value, now_ns;
	unsigned reads = 1;

	(void)state;
	assert_int_equal(backend_sim_advance(backend, 3 * NS_PER_MS + 123000), 0);
	first = read_or_die(backend, 0, MSR_PKG_ENERGY_STATUS);
	do {
		value = read_or_die(backend, 0, MSR_PKG_ENERGY_STATUS);
		reads++;
		assert_true(reads < 10000);
	} while (value == first);
	assert_int_equal(backend_sim_now(backend, &now_ns), 0);
	assert_int_equal(now_ns, 4 * NS_PER_MS); /* exactly at the boundary, 1 us per read */
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_update_step_every_model),
		cmocka_unit_test(test_polling_loop_ends_with_access_step),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
