/*
 * CPUID.0AH:EAX[31:24] is how many bits of EBX enumerate architectural events: an event past
 * that length is not available even though its EBX bit reads 0 (SDM vol. 3B 18.2.1). A variant
 * of the Sandy Bridge model whose leaf says 4 counts the first four architectural events (core
 * cycles, instructions, reference cycles, LLC references) and nothing for LLC misses, branches
 * and branch misses; the shipped model (length 7) counts all seven.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

#define USR_OS_EN (PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN)

static const struct {
	uint8_t event, umask;
} arch_events[7] = { { 0x3C, 0x00 }, { 0xC0, 0x00 }, { 0x3C, 0x01 }, { 0x2E, 0x4F },
		     { 0x2E, 0x41 }, { 0xC4, 0x00 }, { 0xC5, 0x00 } };

/* What architectural event i counts in 1 ms of full load on PMC0. */
static uint64_t count_of(struct msr_backend *backend, unsigned i)
{
	uint64_t select = arch_events[i].event | ((uint64_t)arch_events[i].umask << 8) | USR_OS_EN;

	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, 0), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PMC0, 0), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, select), 0);
	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), 0);
	return read_or_die(backend, 0, MSR_IA32_PMC0);
}

static void test_length_four(void **state)
{
	const char *replace[] = { "0x07300403", "0x04300403" };
	struct msr_backend *backend;
	struct machine_info info;

	(void)state;
	write_variant_model(test_root, "snb-len4", "sandybridge", replace, 1, NULL);
	backend = open_virtual_sim_in(test_root, "snb-len4");
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_int_equal(info.cpuid_0a[0] >> 24, 4);
	assert_int_equal(info.cpuid_0a[1], 0);
	assert_int_equal(backend_sim_set_load(backend, -1, 1.0), 0);
	for (unsigned i = 0; i < 7; i++) {
		if (i < 4)
			assert_true(count_of(backend, i) > 0);
		else
			assert_int_equal(count_of(backend, i), 0);
	}
	backend_close(backend);
}

static void test_shipped_length_seven(void **state)
{
	struct msr_backend *backend = open_virtual_sim("sandybridge", 0);

	(void)state;
	assert_int_equal(backend_sim_set_load(backend, -1, 1.0), 0);
	for (unsigned i = 0; i < 7; i++)
		assert_true(count_of(backend, i) > 0);
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_length_four),
		cmocka_unit_test(test_shipped_length_seven),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, test_root_setup, test_root_teardown);
}
