/*
 * The Zen 3 model's core counters (AMD PPR for family 19h): six PERF_CTL/PERF_CTR pairs at
 * 0xC0010200 + 2x with the legacy 0xC0010000..7 aliases of the first four, 12-bit event selects
 * (bits 35:32 extend bits 7:0), counting only while En and USR/OS are set, 48-bit wrap, reserved
 * bits refused as #GP (EIO). Rates: cycles = busy time * 3.8 GHz, instructions = cycles * 1.8;
 * PMCx02B counts the simulated SMIs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

#define CTL(i) (MSR_AMD_PERF_CTL0 + 2 * (i))
#define CTR(i) (MSR_AMD_PERF_CTR0 + 2 * (i))
#define COUNT_ALL (PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN)
#define CYCLES_PER_MS 3800000ull

static struct msr_backend *backend;

static int setup(void **state)
{
	(void)state;
	/* Exact counts: the ideal CPU, whose clock is core_hz whenever busy (no turbo bins). */
	backend = open_ideal_sim("zen3", 0);
	return backend_sim_set_load(backend, 0, 1.0);
}

static int teardown(void **state)
{
	(void)state;
	backend_close(backend);
	return 0;
}

static uint64_t counted_in_1ms(uint32_t counter)
{
	uint64_t before = read_or_die(backend, 0, CTR(counter));

	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), 0);
	return read_or_die(backend, 0, CTR(counter)) - before;
}

static void test_counting(void **state)
{
	(void)state;
	assert_int_equal(counted_in_1ms(0), 0);
	assert_int_equal(backend_write(backend, 0, CTL(0), 0x76 | COUNT_ALL), 0);
	assert_int_equal(counted_in_1ms(0), CYCLES_PER_MS);
	assert_int_equal(backend_write(backend, 0, CTL(5), 0xC0 | COUNT_ALL), 0);
	assert_int_equal(counted_in_1ms(5), CYCLES_PER_MS * 18 / 10);
	assert_int_equal(backend_write(backend, 0, CTL(5), 0xC0 | PERFEVTSEL_EN), 0);
	assert_int_equal(counted_in_1ms(5), 0);
	assert_int_equal(backend_write(backend, 0, CTL(5), 0xC0 | PERFEVTSEL_EN | PERFEVTSEL_USR),
			 0);
	assert_int_equal(counted_in_1ms(5), CYCLES_PER_MS * 18 / 10 * 9 / 10);
	/* EventSelect[11:8] = 1 makes 0x1C0, an event the model does not count. */
	assert_int_equal(backend_write(backend, 0, CTL(5), (1ull << 32) | 0xC0 | COUNT_ALL), 0);
	assert_int_equal(counted_in_1ms(5), 0);
	assert_int_equal(backend_write(backend, 0, CTL(5), 0xC1 | COUNT_ALL), 0);
	assert_int_equal(counted_in_1ms(5), CYCLES_PER_MS * 18 / 10 * 11 / 10); /* model event */
	assert_int_equal(backend_write(backend, 0, CTL(0), 0), 0);
	assert_int_equal(backend_write(backend, 0, CTL(5), 0), 0);
}

static void test_legacy_aliases(void **state)
{
	(void)state;
	assert_int_equal(backend_write(backend, 0, MSR_AMD_PERF_LEGACY_CTL0 + 3, 0x76 | COUNT_ALL),
			 0);
	assert_int_equal(read_or_die(backend, 0, CTL(3)), 0x76 | COUNT_ALL);
	assert_int_equal(counted_in_1ms(3), CYCLES_PER_MS);
	assert_int_equal(read_or_die(backend, 0, MSR_AMD_PERF_LEGACY_CTR0 + 3),
			 read_or_die(backend, 0, CTR(3)));
	assert_int_equal(backend_write(backend, 0, MSR_AMD_PERF_LEGACY_CTR0 + 3, 5), 0);
	assert_int_equal(read_or_die(backend, 0, CTR(3)), 5);
	assert_int_equal(backend_write(backend, 0, CTL(3), 0), 0);
}

static void test_width_and_reserved_bits(void **state)
{
	uint64_t value;
	static const int reserved[] = { 19, 21, 36, 39, 42, 63 };

	(void)state;
	assert_int_equal(backend_write(backend, 0, CTR(1), (1ull << 48) - 1000), 0);
	assert_int_equal(backend_write(backend, 0, CTL(1), 0x76 | COUNT_ALL), 0);
	assert_int_equal(backend_sim_advance(backend, 1000), 0);
	assert_int_equal(read_or_die(backend, 0, CTR(1)), 3800 - 1000);
	assert_int_equal(backend_write(backend, 0, CTR(1), 1ull << 48), -EIO);
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		assert_int_equal(backend_write(backend, 0, CTL(2), 1ull << reserved[i]), -EIO);
	assert_int_equal(backend_write(backend, 0, CTL(2), 3ull << 40), 0); /* Guest/HostOnly */
	assert_int_equal(backend_read(backend, 0, CTL(6), &value), -EIO);
	assert_int_equal(backend_read(backend, 0, MSR_AMD_PERF_LEGACY_CTR0 + 4, &value), -EIO);
	assert_int_equal(backend_read(backend, 0, MSR_IA32_PERFEVTSEL0, &value), -EIO);
	assert_int_equal(backend_read(backend, 0, MSR_IA32_PMC0, &value), -EIO);
}

/* PMCx02B (SMIs received) counts the simulated SMIs, as MSR_SMI_COUNT does on Intel: every one
 * the machine takes, on an idle CPU too, with either mode filter, nothing while disabled. A
 * variant of the model takes one SMI every 100 ms. */
static void test_smi_received(void **state)
{
	char *dir = make_temp_dir();
	struct msr_backend *smi_backend;
	struct sim_energy_truth before, after;
	uint64_t counted;

	(void)state;
	write_variant_model(dir, "zen3-smi", "zen3", NULL, 0, "smi_period_ms: 100\n");
	smi_backend = open_virtual_sim_in(dir, "zen3-smi");
	assert_int_equal(backend_write(smi_backend, 3, CTL(1), 0x2B | PERFEVTSEL_EN |
				       PERFEVTSEL_OS), 0);
	assert_int_equal(backend_write(smi_backend, 3, CTL(2), 0x2B | PERFEVTSEL_EN), 0);
	assert_int_equal(backend_sim_energy_truth(smi_backend, 0, RAPL_DOMAIN_AMD_PKG, &before), 0);
	counted = read_or_die(smi_backend, 3, CTR(1));
	assert_int_equal(backend_sim_advance(smi_backend, 1000 * NS_PER_MS), 0);
	counted = read_or_die(smi_backend, 3, CTR(1)) - counted;
	assert_int_equal(backend_sim_energy_truth(smi_backend, 0, RAPL_DOMAIN_AMD_PKG, &after), 0);
	assert_true(after.smi_count - before.smi_count >= 9 &&
		    after.smi_count - before.smi_count <= 11);
	assert_int_equal(counted, after.smi_count - before.smi_count);
	assert_int_equal(read_or_die(smi_backend, 3, CTR(2)), 0);
	backend_close(smi_backend);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counting),
		cmocka_unit_test(test_legacy_aliases),
		cmocka_unit_test(test_width_and_reserved_bits),
		cmocka_unit_test(test_smi_received),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, setup, teardown);
}
