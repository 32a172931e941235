/*
 * The 32-bit energy registers wrap, in virtual time with a scripted high load: over 3 simulated
 * hours the register wraps many times, a reader that samples faster than the wrap period (as
 * msrd does) rebuilds the exact 64-bit total of the ground truth, and advancing by an hour is a
 * single cheap call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

static void check_wrap(const char *model, uint32_t address, enum rapl_domain domain)
{
	char *dir = make_temp_dir(), script[PATH_MAX];
	struct msr_backend *backend = open_virtual_sim(model, 0);
	struct sim_energy_truth truth;
	struct machine_info info;
	uint64_t previous, total = 0, wrap_ns, step_ns;
	unsigned wraps = 0;

	snprintf(script, sizeof(script), "%s/load", dir);
	tree_write_text(dir, "load", "# everything busy, then a short idle break, repeated\n"
				     "cpu 0-3: 3000000 1.0\ncpu 0-3: 1000 0.0\n"
				     "3600000 0.9\n");
	assert_int_equal(backend_sim_load_script(backend, script), 0);
	assert_int_equal(backend_machine_info(backend, &info), 0);
	/* Wrap period at maximum power; sample four times per period. */
	wrap_ns = (uint64_t)(((unsigned __int128)1 << 32) * NS_PER_S * 1000 /
			     ((unsigned __int128)info.rapl_max_power_mw[domain] *
			      (1ull << info.rapl_energy_exponent[domain])));
	step_ns = wrap_ns / 4;
	previous = read_or_die(backend, 0, address);
	for (uint64_t elapsed = 0; elapsed < 3 * 3600 * NS_PER_S; elapsed += step_ns) {
		uint64_t value;

		assert_int_equal(backend_sim_advance(backend, step_ns), 0);
		value = read_or_die(backend, 0, address);
		wraps += value < previous;
		total += (value - previous) & RAPL_ENERGY_COUNTER_MASK;
		previous = value;
	}
	assert_int_equal(backend_sim_energy_truth(backend, 0, domain, &truth), 0);
	assert_int_equal(total, truth.units_at_update);
	assert_true(wraps >= 3 * 3600 * NS_PER_S / wrap_ns / 2);
	assert_true(truth.units_at_update > 3 * (1ull << 32));

	/* One hour in one call: the same analytic integration. */
	assert_int_equal(backend_sim_advance(backend, 3600 * NS_PER_S), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, domain, &truth), 0);
	assert_int_equal(read_or_die(backend, 0, address),
			 truth.units_at_update & RAPL_ENERGY_COUNTER_MASK);
	backend_close(backend);
	remove_tree(dir);
	free(dir);
}

static void test_wrap_on_every_model(void **state)
{
	(void)state;
	check_wrap("sandybridge", MSR_PKG_ENERGY_STATUS, RAPL_DOMAIN_PKG);
	check_wrap("skylake-sp", MSR_DRAM_ENERGY_STATUS, RAPL_DOMAIN_DRAM);
	check_wrap("zen3", MSR_AMD_PKG_ENERGY_STATUS, RAPL_DOMAIN_AMD_PKG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrap_on_every_model),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
