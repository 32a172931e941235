/*
 * Counters wrap at their CPUID 0xA width (48 bits on the shipped Intel models), set their
 * PERF_GLOBAL_STATUS overflow bit when they do, and GLOBAL_OVF_CTRL clears it. Values beyond the
 * width cannot be written (#GP).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

#define WIDTH_MASK ((1ull << 48) - 1)

static void check_model(const char *model, uint64_t cycles_per_us)
{
	/* Exact counts: the ideal CPU, whose clock is core_hz whenever busy (no turbo bins). */
	struct msr_backend *backend = open_ideal_sim(model, 0);
	struct machine_info info;
	uint64_t value;

	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_int_equal(CPUID_0A_EAX_GP_WIDTH(info.cpuid_0a[0]), 48);
	assert_int_equal(CPUID_0A_EDX_FIXED_WIDTH(info.cpuid_0a[3]), 48);
	assert_int_equal(backend_sim_set_load(backend, 0, 1.0), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, 0x43003C), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_A_PMC0, WIDTH_MASK - 999), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR_CTRL, 0x30), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL, 0x1ull | 2ull << 32),
			 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR1, WIDTH_MASK - 9), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERF_GLOBAL_STATUS), 0);

	assert_int_equal(backend_sim_advance(backend, 1000), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PMC0), cycles_per_us - 1000);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_A_PMC0), cycles_per_us - 1000);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_FIXED_CTR1), cycles_per_us - 10);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERF_GLOBAL_STATUS), 0x1ull | 2ull << 32);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_OVF_CTRL, 0x1), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERF_GLOBAL_STATUS), 2ull << 32);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_OVF_CTRL, 2ull << 32), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERF_GLOBAL_STATUS), 0);

	assert_int_equal(backend_write(backend, 0, MSR_IA32_A_PMC0, 1ull << 48), -EIO);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR0, 1ull << 48), -EIO);
	assert_int_equal(backend_read(backend, 0, MSR_IA32_FIXED_CTR0, &value), 0);
	assert_true(value <= WIDTH_MASK);
	backend_close(backend);
}

static void test_width_wrap(void **state)
{
	(void)state;
	check_model("sandybridge", 2500);
	check_model("skylake-sp", 2100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_width_wrap),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
