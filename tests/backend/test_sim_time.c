/*
 * Time: TSC = time * TSC Hz (writable, as on the hardware), MSR_SMI_COUNT counts one simulated
 * SMI per model period where the model has it; virtual time moves only when told, real time
 * follows CLOCK_MONOTONIC_RAW and cannot be advanced by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

static void test_tsc_follows_virtual_time(void **state)
{
	struct msr_backend *backend = open_virtual_sim("sandybridge", 0);
	uint64_t now_ns;

	(void)state;
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_TSC), 0);
	assert_int_equal(backend_sim_advance(backend, 1500 * NS_PER_MS + 3), 0);
	assert_int_equal(backend_sim_now(backend, &now_ns), 0);
	assert_int_equal(now_ns, 1500 * NS_PER_MS + 3);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_TSC), 3750000007ull);
	assert_int_equal(read_or_die(backend, 3, MSR_IA32_TSC), 3750000007ull);
	assert_int_equal(backend_write(backend, 1, MSR_IA32_TSC, 1000), 0);
	assert_int_equal(backend_sim_advance(backend, 1000), 0);
	assert_int_equal(read_or_die(backend, 1, MSR_IA32_TSC), 3500);
	backend_close(backend);
}

static void test_smi_count(void **state)
{
	struct msr_backend *backend = open_virtual_sim("sandybridge", 0);
	struct machine_info info;
	uint64_t value;

	(void)state;
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_true(info.has_smi_count);
	assert_int_equal(backend_sim_advance(backend, 100 * NS_PER_MS), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_SMI_COUNT), 100 / 16);
	backend_close(backend);

	backend = open_virtual_sim("skylake-sp", 0); /* has the MSR, no periodic SMIs */
	assert_int_equal(backend_sim_advance(backend, 100 * NS_PER_MS), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_SMI_COUNT), 0);
	backend_close(backend);

	backend = open_virtual_sim("zen3", 0);
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_false(info.has_smi_count);
	assert_int_equal(backend_read(backend, 0, MSR_SMI_COUNT, &value), -EIO);
	backend_close(backend);
}

static void test_real_time(void **state)
{
	struct backend_options options = { .kind = BACKEND_SIM, .models_dir = test_models_dir() };
	struct timespec pause = { .tv_nsec = 2 * NS_PER_MS };
	struct msr_backend *backend;
	uint64_t first, second, tsc1, tsc2;

	(void)state;
	assert_int_equal(backend_open(&options, &backend, NULL, 0), 0);
	assert_int_equal(backend_sim_now(backend, &first), 0);
	tsc1 = read_or_die(backend, 0, MSR_IA32_TSC);
	nanosleep(&pause, NULL);
	assert_int_equal(backend_sim_now(backend, &second), 0);
	tsc2 = read_or_die(backend, 0, MSR_IA32_TSC);
	assert_true(second >= first + 2 * NS_PER_MS);
	assert_true(tsc2 > tsc1);
	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), -EOPNOTSUPP);
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tsc_follows_virtual_time),
		cmocka_unit_test(test_smi_count),
		cmocka_unit_test(test_real_time),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
