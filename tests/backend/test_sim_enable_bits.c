/*
 * Counters advance only while enabled (SDM 18.2): a programmable counter needs PERFEVTSEL.EN, a
 * privilege filter (USR and/or OS) and, on perfmon v2+, its PERF_GLOBAL_CTRL bit; a fixed counter
 * needs OS or USR in its FIXED_CTR_CTRL nibble and GLOBAL_CTRL bit 32+i. While enabled they count
 * exactly: cycles = busy time * core Hz, reference cycles = busy time * TSC Hz, instructions =
 * cycles * IPC (Sandy Bridge model: 2.5 GHz, IPC 1.2, 90 % user time).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

#define EVTSEL(event, umask, bits) ((uint64_t)(event) | ((uint64_t)(umask) << 8) | (bits))
#define CYCLES_PER_MS 2500000ull

static struct msr_backend *backend;

static int setup(void **state)
{
	(void)state;
	backend = open_ideal_sim("sandybridge", 0);
	return backend_sim_set_load(backend, 0, 1.0);
}

static int teardown(void **state)
{
	(void)state;
	backend_close(backend);
	return 0;
}

/* PMC0's increase over 1 ms of full load. */
static uint64_t pmc0_per_ms(void)
{
	uint64_t before = read_or_die(backend, 0, MSR_IA32_PMC0);

	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), 0);
	return read_or_die(backend, 0, MSR_IA32_PMC0) - before;
}

static void test_programmable_counter_enables(void **state)
{
	uint64_t all = PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN;

	(void)state;
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL), 0xF); /* at reset */
	assert_int_equal(pmc0_per_ms(), 0); /* nothing programmed */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, EVTSEL(0x3C, 0, all)), 0);
	assert_int_equal(pmc0_per_ms(), CYCLES_PER_MS);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL, 0xE), 0);
	assert_int_equal(pmc0_per_ms(), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL, 0xF), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0,
				       EVTSEL(0x3C, 0, all & ~PERFEVTSEL_EN)), 0);
	assert_int_equal(pmc0_per_ms(), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0,
				       EVTSEL(0x3C, 0, PERFEVTSEL_EN)), 0);
	assert_int_equal(pmc0_per_ms(), 0); /* neither USR nor OS */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0,
				       EVTSEL(0x3C, 0, PERFEVTSEL_EN | PERFEVTSEL_USR)), 0);
	assert_int_equal(pmc0_per_ms(), CYCLES_PER_MS * 9 / 10);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0,
				       EVTSEL(0x3C, 0, PERFEVTSEL_EN | PERFEVTSEL_OS)), 0);
	assert_int_equal(pmc0_per_ms(), CYCLES_PER_MS / 10);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, EVTSEL(0xC0, 0, all)), 0);
	assert_int_equal(pmc0_per_ms(), CYCLES_PER_MS * 12 / 10); /* instructions, IPC 1.2 */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, EVTSEL(0x3C, 1, all)), 0);
	/* Reference cycles (3CH/01H, REF_XCLK) at 100 MHz, not at the TSC rate (SDM vol. 3B). */
	assert_int_equal(pmc0_per_ms(), 100000);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, EVTSEL(0x77, 7, all)), 0);
	assert_int_equal(pmc0_per_ms(), 0); /* an event the model does not know */
	assert_int_equal(backend_sim_set_load(backend, 0, 0.5), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, EVTSEL(0x3C, 0, all)), 0);
	assert_int_equal(pmc0_per_ms(), CYCLES_PER_MS / 2);
	assert_int_equal(backend_sim_set_load(backend, 0, 1.0), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, 0), 0);
}

static void test_fixed_counter_enables(void **state)
{
	uint64_t before[3], after[3];

	(void)state;
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR_CTRL, 0x333), 0);
	for (int i = 0; i < 3; i++)
		before[i] = read_or_die(backend, 0, MSR_IA32_FIXED_CTR0 + i);
	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(read_or_die(backend, 0, MSR_IA32_FIXED_CTR0 + i), before[i]);

	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL, 0x7ull << 32), 0);
	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), 0);
	for (int i = 0; i < 3; i++)
		after[i] = read_or_die(backend, 0, MSR_IA32_FIXED_CTR0 + i) - before[i];
	assert_int_equal(after[0], CYCLES_PER_MS * 12 / 10);
	assert_int_equal(after[1], CYCLES_PER_MS);
	assert_int_equal(after[2], 2500000);

	/* Counter 1 off in its nibble, counter 2 USR only. */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR_CTRL, 0x203), 0);
	for (int i = 0; i < 3; i++)
		before[i] = read_or_die(backend, 0, MSR_IA32_FIXED_CTR0 + i);
	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_FIXED_CTR0) - before[0],
			 CYCLES_PER_MS * 12 / 10);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_FIXED_CTR1), before[1]);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_FIXED_CTR2) - before[2],
			 2500000 * 9 / 10);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL, 0xF), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR_CTRL, 0), 0);
}

/* Counters are per CPU and count only that CPU's busy time. */
static void test_idle_cpu_counts_nothing(void **state)
{
	uint64_t before;

	(void)state;
	assert_int_equal(backend_write(backend, 1, MSR_IA32_PERFEVTSEL0,
				       EVTSEL(0x3C, 0, PERFEVTSEL_USR | PERFEVTSEL_OS |
							       PERFEVTSEL_EN)), 0);
	before = read_or_die(backend, 1, MSR_IA32_PMC0);
	assert_int_equal(backend_sim_advance(backend, 10 * NS_PER_MS), 0);
	assert_int_equal(read_or_die(backend, 1, MSR_IA32_PMC0), before);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERFEVTSEL0), 0);
}

/* APERF/MPERF count busy core and TSC cycles and can be written. */
static void test_aperf_mperf(void **state)
{
	uint64_t aperf, mperf;

	(void)state;
	assert_int_equal(backend_write(backend, 0, MSR_IA32_APERF, 0), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_MPERF, 0), 0);
	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), 0);
	aperf = read_or_die(backend, 0, MSR_IA32_APERF);
	mperf = read_or_die(backend, 0, MSR_IA32_MPERF);
	assert_int_equal(aperf, CYCLES_PER_MS);
	assert_int_equal(mperf, 2500000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_programmable_counter_enables),
		cmocka_unit_test(test_fixed_counter_enables),
		cmocka_unit_test(test_idle_cpu_counts_nothing),
		cmocka_unit_test(test_aperf_mperf),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, setup, teardown);
}
