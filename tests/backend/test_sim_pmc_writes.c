/*
 * Legacy IA32_PMCx writes set bits 31:0 sign-extended to the counter width (bits 63:32 of the
 * value are ignored); the full-width aliases IA32_A_PMCx (0x4C1+x) exist only when
 * PERF_CAPABILITIES bit 13 says so and set the whole width. The AMD model has neither.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

static void check_intel(const char *model)
{
	struct msr_backend *backend = open_virtual_sim(model, 0);
	struct machine_info info;

	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_true(info.pmc_full_width_writes);
	assert_true(read_or_die(backend, 0, MSR_IA32_PERF_CAPABILITIES) & (1ull << 13));
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(backend_write(backend, 0, MSR_IA32_PMC0 + i, 0x80000000ull), 0);
		assert_int_equal(read_or_die(backend, 0, MSR_IA32_PMC0 + i), 0xFFFF80000000ull);
		assert_int_equal(backend_write(backend, 0, MSR_IA32_PMC0 + i, 0x7FFFFFFFull), 0);
		assert_int_equal(read_or_die(backend, 0, MSR_IA32_PMC0 + i), 0x7FFFFFFFull);
		assert_int_equal(backend_write(backend, 0, MSR_IA32_PMC0 + i, 0x123400000001ull), 0);
		assert_int_equal(read_or_die(backend, 0, MSR_IA32_PMC0 + i), 1);
		assert_int_equal(backend_write(backend, 0, MSR_IA32_A_PMC0 + i, 0x123456789ABCull),
				 0);
		assert_int_equal(read_or_die(backend, 0, MSR_IA32_PMC0 + i), 0x123456789ABCull);
		assert_int_equal(read_or_die(backend, 0, MSR_IA32_A_PMC0 + i), 0x123456789ABCull);
	}
	backend_close(backend);
}

static void test_legacy_and_full_width(void **state)
{
	(void)state;
	check_intel("sandybridge");
	check_intel("skylake-sp");
}

static void test_amd_has_no_intel_counters(void **state)
{
	struct msr_backend *backend = open_virtual_sim("zen3", 0);
	struct machine_info info;
	uint64_t value;

	(void)state;
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_false(info.pmc_full_width_writes);
	assert_int_equal(info.cpuid_0a[0], 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PMC0, 1), -EIO);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_A_PMC0, 1), -EIO);
	assert_int_equal(backend_read(backend, 0, MSR_IA32_A_PMC0, &value), -EIO);
	assert_int_equal(backend_read(backend, 0, MSR_IA32_PERF_CAPABILITIES, &value), -EIO);
	assert_int_equal(backend_read(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL, &value), -EIO);
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_legacy_and_full_width),
		cmocka_unit_test(test_amd_has_no_intel_counters),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
