/*
 * Writing a reserved bit raises #GP on the hardware, which the msr driver reports as EIO, and
 * the write has no effect: PERFEVTSEL bits 63:32 (but IN_TX and IN_TXCP on a part with TSX, see
 * test_sim_tsx_bits), FIXED_CTR_CTRL bits beyond the fixed counters,
 * PERF_GLOBAL_CTRL / OVF_CTRL bits beyond the counters, AnyThread before perfmon v3; read-only
 * registers (GLOBAL_STATUS, PERF_CAPABILITIES, SMI count); plain registers outside their write
 * mask. Counters beyond CPUID 0xA's count do not exist.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

static void expect_refused(struct msr_backend *backend, uint32_t address, uint64_t value)
{
	uint64_t before = read_or_die(backend, 0, address);

	assert_int_equal(backend_write(backend, 0, address, value), -EIO);
	assert_int_equal(read_or_die(backend, 0, address), before);
}

static void check_intel(const char *model)
{
	struct msr_backend *backend = open_virtual_sim(model, 0);
	uint64_t value;

	expect_refused(backend, MSR_IA32_PERFEVTSEL0, 1ull << 34);
	expect_refused(backend, MSR_IA32_PERFEVTSEL0 + 3, 0x0043003Cull | (1ull << 63));
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, 0xFFFFFFFFull), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, 0), 0);
	expect_refused(backend, MSR_IA32_FIXED_CTR_CTRL, 1ull << 12); /* a 4th fixed counter */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR_CTRL, 0xFFF), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR_CTRL, 0), 0);
	expect_refused(backend, MSR_IA32_PERF_GLOBAL_CTRL, 1ull << 4);
	expect_refused(backend, MSR_IA32_PERF_GLOBAL_CTRL, 1ull << 35);
	expect_refused(backend, MSR_IA32_PERF_GLOBAL_CTRL, 1ull << 63);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_OVF_CTRL, 1ull << 4), -EIO);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_OVF_CTRL,
				       0xFull | (7ull << 32)), 0);
	expect_refused(backend, MSR_IA32_PERF_GLOBAL_STATUS, 0);
	expect_refused(backend, MSR_IA32_PERF_CAPABILITIES, 0);
	expect_refused(backend, MSR_SMI_COUNT, 0);
	/* PMC4 / PERFEVTSEL4 / FIXED_CTR3 are not there with 4 + 3 counters. */
	assert_int_equal(backend_read(backend, 0, MSR_IA32_PERFEVTSEL0 + 4, &value), -EIO);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0 + 4, 0), -EIO);
	assert_int_equal(backend_read(backend, 0, MSR_IA32_PMC0 + 4, &value), -EIO);
	assert_int_equal(backend_read(backend, 0, MSR_IA32_FIXED_CTR0 + 3, &value), -EIO);
	/* MSR_PKG_POWER_LIMIT: the lock bit is outside the model's write mask. */
	value = read_or_die(backend, 0, MSR_PKG_POWER_LIMIT);
	expect_refused(backend, MSR_PKG_POWER_LIMIT, value | (1ull << 63));
	assert_int_equal(backend_write(backend, 0, MSR_PKG_POWER_LIMIT, value ^ 0x8), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_PKG_POWER_LIMIT), value ^ 0x8);
	backend_close(backend);
}

static void test_reserved_bits_intel(void **state)
{
	(void)state;
	check_intel("sandybridge");
	check_intel("skylake-sp");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reserved_bits_intel),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
