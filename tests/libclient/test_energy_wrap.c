/*
 * Reads are exact across wraps of the hardware counters (virtual time, simulated Sandy Bridge):
 *  - a scripted full load wraps the 32-bit PKG energy register (65536 J at 2^-16 J) several
 *    times between two reads two hours apart, and readCounter's difference still equals the
 *    simulator's count of energy units (msrd's 64-bit totals);
 *  - the 48-bit fixed cycle counter (2^48 cycles: 31 hours at 2.5 GHz) read every 20 hours
 *    counts exactly core_hz x busy time across its wraps (the library's extension).
 */
#include "tests/libclient/libclient_test.h"

#define CYCLES_PER_S 2500000000ull
#define ENERGY_WRAP (1ull << 32)
#define TWO_HOURS_NS (7200ull * NS_PER_S)
#define TWENTY_HOURS_S (20ull * 3600)

/* Busy all the time, in segments of a second. */
static const char script[] = "1000 1.0\n";

static void test_energy_wraps_between_reads(void **state)
{
	PerfCounter pkg = setupEnergyCounter(RAPL_PKG);
	struct haecer_sim_truth before, after;
	unsigned long long first, last;

	(void)state;
	libclient_explain("setupEnergyCounter", pkg.error);
	assert_true(pkg.valid);
	first = readCounter(&pkg);
	assert_int_equal(haecer_sim_energy_truth(sim, 0, RAPL_DOMAIN_PKG, &before), 0);
	assert_int_equal(haecer_sim_advance(sim, TWO_HOURS_NS, NULL), 0);
	last = readCounter(&pkg);
	assert_int_equal(haecer_sim_energy_truth(sim, 0, RAPL_DOMAIN_PKG, &after), 0);
	fprintf(stderr, "two hours: %llu units read, %llu true, %.2f wraps\n", last - first,
		(unsigned long long)(after.units_at_update - before.units_at_update),
		(double)(after.units_at_update - before.units_at_update) / (double)ENERGY_WRAP);
	assert_true(after.units_at_update - before.units_at_update > 3 * ENERGY_WRAP);
	assert_int_equal(last - first, after.units_at_update - before.units_at_update);
	assert_int_equal(last & 0xFFFFFFFFull, after.units_at_update & 0xFFFFFFFFull);
	freeCounter(&pkg);
}

static void test_cycles_wrap_between_reads(void **state)
{
	PerfCounter cycles = setupFFCounter(CPU_CLK_UNHALTED_CORE, 0);
	unsigned long long start;

	(void)state;
	libclient_explain("setupFFCounter", cycles.error);
	assert_true(cycles.valid);
	start = readCounter(&cycles);
	for (unsigned long long step = 1; step <= 4; step++) {
		assert_int_equal(haecer_sim_advance(sim, TWENTY_HOURS_S * NS_PER_S, NULL), 0);
		assert_int_equal(readCounter(&cycles) - start, step * TWENTY_HOURS_S * CYCLES_PER_S);
	}
	/* 80 hours of cycles: 2.5 wraps of the 48-bit counter. */
	assert_true(readCounter(&cycles) - start > 2 * (1ull << 48));
	freeCounter(&cycles);
}

int main(void)
{
	/* Exact counts over hours: the ideal CPU (a rough one's SMIs take busy time). */
	const char *arguments[] = {"--sim-virtual-time", "--sim-ideal", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_energy_wraps_between_reads),
		cmocka_unit_test(test_cycles_wrap_between_reads),
	};

	return LIBCLIENT_RUN_GROUP("sandybridge", script, arguments, tests);
}
