/*
 * In real time the simulated CPU follows the host's per-CPU load from /proc/stat (here a
 * stand-in <dev_root>/proc/stat the test rewrites): sim CPU i follows host CPU i mod n, and the
 * package power becomes idle + (max - idle) * mean load once a sample (at most every 100 ms) has
 * been taken. backend_sim_set_load overrides the host for a CPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

static void write_stat(const char *root, unsigned long long busy0, unsigned long long idle0,
		       unsigned long long busy1, unsigned long long idle1)
{
	tree_write_text(root, "proc/stat",
			"cpu  %llu 0 0 %llu 0 0 0 0 0 0\n"
			"cpu0 %llu 0 0 %llu 0 0 0 0 0 0\n"
			"cpu1 %llu 0 0 %llu 0 0 0 0 0 0\n"
			"intr 12345 0 0\nctxt 999\n",
			busy0 + busy1, idle0 + idle1, busy0, idle0, busy1, idle1);
}

static void wait_for_next_sample(void)
{
	struct timespec pause = { .tv_nsec = 150 * NS_PER_MS };

	nanosleep(&pause, NULL);
}

static void test_follows_host_load(void **state)
{
	char *root = make_temp_dir();
	/* The ideal CPU: power exactly idle + span x mean load (the rough one's turbo clock raises
	 * a lone busy core's share: tests/backend/test_sim_clock). */
	struct backend_options options = { .kind = BACKEND_SIM, .models_dir = test_models_dir(),
					   .dev_root = root, .sim_ideal = true };
	struct sim_energy_truth idle, truth;
	struct machine_info info;
	struct msr_backend *backend;
	uint64_t max_uw;

	(void)state;
	write_stat(root, 100, 1000, 100, 1000);
	assert_int_equal(backend_open(&options, &backend, NULL, 0), 0);
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &idle), 0);
	max_uw = (uint64_t)info.rapl_max_power_mw[RAPL_DOMAIN_PKG] * 1000;

	/* Host CPU 0 fully busy, host CPU 1 idle: sim CPUs 0 and 2 busy, 1 and 3 idle. */
	write_stat(root, 600, 1000, 100, 1500);
	wait_for_next_sample();
	read_or_die(backend, 0, MSR_PKG_ENERGY_STATUS);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &truth), 0);
	assert_int_equal(truth.power_microwatts, 4000000 + (max_uw - 4000000) / 2);

	/* Both busy at 25 %. */
	write_stat(root, 700, 1300, 200, 1800);
	wait_for_next_sample();
	read_or_die(backend, 0, MSR_PKG_ENERGY_STATUS);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &truth), 0);
	assert_int_equal(truth.power_microwatts, 4000000 + (max_uw - 4000000) / 4);

	/* Set loads win over the host. */
	assert_int_equal(backend_sim_set_load(backend, -1, 1.0), 0);
	write_stat(root, 700, 2300, 200, 2800);
	wait_for_next_sample();
	read_or_die(backend, 0, MSR_PKG_ENERGY_STATUS);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &truth), 0);
	assert_int_equal(truth.power_microwatts, max_uw);
	assert_true(truth.femtojoules > 0);
	backend_close(backend);
	remove_tree(root);
	free(root);
	(void)idle;
}

/* Without a stand-in, the real /proc/stat is used: opening works and loads are in range. */
static void test_real_proc_stat(void **state)
{
	struct backend_options options = { .kind = BACKEND_SIM, .models_dir = test_models_dir(),
					   .sim_model = "zen3" };
	struct msr_backend *backend;
	struct sim_energy_truth truth;
	struct machine_info info;

	(void)state;
	assert_int_equal(backend_open(&options, &backend, NULL, 0), 0);
	assert_int_equal(backend_machine_info(backend, &info), 0);
	wait_for_next_sample();
	read_or_die(backend, 0, MSR_AMD_PKG_ENERGY_STATUS);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_AMD_PKG, &truth), 0);
	assert_true(truth.power_microwatts >= 22000000);
	assert_true(truth.power_microwatts <= info.rapl_max_power_mw[RAPL_DOMAIN_AMD_PKG] * 1000ull);
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_follows_host_load),
		cmocka_unit_test(test_real_proc_stat),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
