/*
 * Counters advance only while enabled, and reset works: on the simulated Sandy Bridge in virtual
 * time with every CPU fully busy, a fixed core-cycle counter counts exactly core_hz x busy time
 * (2.5 million per ms) while enabled, holds while disabled, and reads 0 after a reset and counts
 * on from there; a programmable counter (branches) likewise holds and resets. Setup starts a
 * counter enabled at 0.
 */
#include "tests/libclient/libclient_test.h"

#define CYCLES_PER_MS 2500000ull /* sandybridge core_hz 2.5 GHz, load 1.0 */

static void advance_ms(unsigned ms)
{
	assert_int_equal(haecer_sim_advance(sim, ms * NS_PER_MS, NULL), 0);
}

static void test_fixed_counter(void **state)
{
	PerfCounter cycles = setupFFCounter(CPU_CLK_UNHALTED_CORE, 0);
	unsigned long long before;

	(void)state;
	libclient_explain("setupFFCounter", cycles.error);
	assert_true(cycles.valid);
	assert_int_equal(readCounter(&cycles), 0);
	advance_ms(1);
	assert_int_equal(readCounter(&cycles), CYCLES_PER_MS);

	disableCounter(&cycles);
	before = readCounter(&cycles);
	advance_ms(3);
	assert_int_equal(readCounter(&cycles), before);

	enableCounter(&cycles);
	advance_ms(2);
	assert_int_equal(readCounter(&cycles), before + 2 * CYCLES_PER_MS);

	resetCounter(&cycles);
	assert_int_equal(readCounter(&cycles), 0);
	advance_ms(1);
	assert_int_equal(readCounter(&cycles), CYCLES_PER_MS);
	freeCounter(&cycles);
}

static void test_programmable_counter(void **state)
{
	PerfCounter branches = setupArchCounter(BRANCH_INS_RETIRED, 0, 0);
	unsigned long long per_ms, held;

	(void)state;
	libclient_explain("setupArchCounter", branches.error);
	assert_true(branches.valid);
	assert_int_equal(readCounter(&branches), 0);
	advance_ms(1);
	per_ms = readCounter(&branches);
	assert_true(per_ms > 0);

	disableCounter(&branches);
	held = readCounter(&branches);
	advance_ms(5);
	assert_int_equal(readCounter(&branches), held);

	enableCounter(&branches);
	advance_ms(1);
	assert_int_equal(readCounter(&branches), held + per_ms);

	/* Reset while disabled: stays 0 until enabled again. */
	disableCounter(&branches);
	resetCounter(&branches);
	advance_ms(1);
	assert_int_equal(readCounter(&branches), 0);
	enableCounter(&branches);
	advance_ms(1);
	assert_int_equal(readCounter(&branches), per_ms);
	freeCounter(&branches);
}

static void test_energy_ignores_control(void **state)
{
	PerfCounter energy = setupEnergyCounter(RAPL_PKG);
	unsigned long long before;

	(void)state;
	assert_true(energy.valid);
	before = readCounter(&energy);
	disableCounter(&energy);
	resetCounter(&energy);
	advance_ms(2);
	assert_true(readCounter(&energy) > before); /* energy always counts (seed 2.3.1) */
	freeCounter(&energy);
}

int main(void)
{
	/* Exact counts: the ideal CPU (a rough one's SMIs take busy time). */
	const char *arguments[] = {"--sim-virtual-time", "--sim-ideal", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_fixed_counter, libclient_full_load),
		cmocka_unit_test_setup(test_programmable_counter, libclient_full_load),
		cmocka_unit_test_setup(test_energy_ignores_control, libclient_full_load),
	};

	return LIBCLIENT_RUN_GROUP("sandybridge", NULL, arguments, tests);
}
