/*
 * A counter that wraps sets its bit in IA32_PERF_GLOBAL_STATUS, whenever the wrap is noticed:
 * also when the next thing that touches the counter is a write of the counter itself, which
 * replaces the wrapped count (the review found the write forgot the wrap). Checked for a
 * programmable counter written through its legacy and its full-width address and for a fixed
 * counter, on Skylake-SP in virtual time; a write without a wrap before it sets nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

#define WIDTH_MASK 0xFFFFFFFFFFFFull /* 48-bit counters */
#define CYCLES (0x3Cull | PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN)
#define FIXED1_BIT (1ull << (GLOBAL_CTRL_FIXED_SHIFT + 1))

static struct msr_backend *counting_backend(void)
{
	struct msr_backend *backend = open_virtual_sim("skylake-sp", 0);

	assert_int_equal(backend_sim_set_load(backend, -1, 1.0), 0);
	/* PMC0 and PMC1 count cycles, fixed counter 1 (core cycles) counts. */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, CYCLES), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0 + 1, CYCLES), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR_CTRL, 0x30), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL, 0x3 | FIXED1_BIT), 0);
	return backend;
}

static void test_wrap_then_counter_write(void **state)
{
	struct msr_backend *backend = counting_backend();

	(void)state;
	/* 10 events from the top, then 1 ms of 2.1 GHz: all three wrap. */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_A_PMC0, WIDTH_MASK - 9), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_A_PMC0 + 1, WIDTH_MASK - 9), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR0 + 1, WIDTH_MASK - 9), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERF_GLOBAL_STATUS), 0);
	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), 0);
	/* Nothing reads the status or touches the controls before the writes. */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PMC0, 5), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_A_PMC0 + 1, 5), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR0 + 1, 5), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERF_GLOBAL_STATUS), 0x3 | FIXED1_BIT);
	/* Cleared, then a write without a wrap before it sets nothing. */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_OVF_CTRL, 0x3 | FIXED1_BIT),
			 0);
	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PMC0, 7), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERF_GLOBAL_STATUS), 0);
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wrap_then_counter_write),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
