/*
 * simultaneousReadCounter reads a set of counters together (virtual time, simulated Sandy
 * Bridge, full load): the fixed core-cycle counter and UNHALTED_CORE_CYCLES on a programmable
 * counter (the fixed one being taken by the first, setup falls back to a programmable counter;
 * the thread is held on one CPU for the setups, or a migration between them puts the second on
 * another CPU whose fixed counter is free)
 * started at the same virtual instant read exactly the same, again after time passes and after
 * one was paused; the energy counter in the set reads what readCounter reads at that instant;
 * an invalid counter in the set reads -1 and spoils nothing. The haecer_* batch read agrees,
 * and refuses a set mixing contexts.
 */
#include <limits.h>
#include <sched.h>

#include "tests/libclient/libclient_test.h"

#define CYCLES_PER_MS 2500000ull

static void test_set_reads_together(void **state)
{
	struct haecer_counter_info info;
	unsigned long long values[4];
	cpu_set_t saved, here;
	PerfCounter set[4];
	int cpu = sched_getcpu();

	(void)state;
	/* Setup counts on the CPU the thread is on at each call: unpinned, the scheduler may move
	 * it between the two (seen once under valgrind), and set[1] then gets the fixed counter of
	 * the other CPU. Separate statements, since an initializer list's order is unspecified. */
	assert_true(cpu >= 0);
	assert_int_equal(sched_getaffinity(0, sizeof(saved), &saved), 0);
	CPU_ZERO(&here);
	CPU_SET(cpu, &here);
	assert_int_equal(sched_setaffinity(0, sizeof(here), &here), 0);
	set[0] = setupFFCounter(CPU_CLK_UNHALTED_CORE, 0);
	set[1] = setupArchCounter(UNHALTED_CORE_CYCLES, 0, 0);
	set[2] = setupEnergyCounter(RAPL_PKG);
	set[3] = setupEnergyCounter(RAPL_DRAM); /* not on this model: invalid */
	assert_int_equal(sched_setaffinity(0, sizeof(saved), &saved), 0);
	assert_true(set[0].valid && set[1].valid && set[2].valid && !set[3].valid);
	assert_int_equal(haecer_counter_info(haecer_perf_counter(&set[1]), &info), 0);
	assert_int_equal(info.kind, HAECER_COUNTER_PROGRAMMABLE);
	assert_int_equal(haecer_sim_advance(sim, 3 * NS_PER_MS, NULL), 0);
	simultaneousReadCounter(set, values, 4);
	assert_int_equal(values[0], 3 * CYCLES_PER_MS);
	assert_int_equal(values[1], 3 * CYCLES_PER_MS);
	assert_int_equal(values[2], readCounter(&set[2]));
	assert_true(values[3] == ULLONG_MAX);

	disableCounter(&set[1]);
	assert_int_equal(haecer_sim_advance(sim, 2 * NS_PER_MS, NULL), 0);
	simultaneousReadCounter(set, values, 3);
	assert_int_equal(values[0], 5 * CYCLES_PER_MS);
	assert_int_equal(values[1], 3 * CYCLES_PER_MS);
	for (int i = 0; i < 4; i++)
		freeCounter(&set[i]);
}

static void test_batch_read(void **state)
{
	struct haecer_context *ctx, *other;
	struct haecer_counter *counters[3];
	uint64_t values[3];

	(void)state;
	assert_int_equal(haecer_default_context(&ctx), 0);
	assert_int_equal(haecer_context_open(server.socket_path, &other), 0);
	assert_int_equal(haecer_counter_open_fixed(ctx, 1, INST_RETIRED_ANY, 0, &counters[0]), 0);
	assert_int_equal(haecer_counter_open_arch(ctx, 1, INSTRUCTIONS_RETIRED, HAECER_FLAG_EDGE,
						  0, &counters[1]), 0);
	assert_int_equal(haecer_counter_open_energy(ctx, 1, RAPL_PP0, &counters[2]), 0);
	assert_int_equal(haecer_counter_read_many(counters, 3, values, 0), 0);
	assert_int_equal(haecer_counter_read_many(counters, 3, values, HAECER_READ_SYNCHRONIZED),
			 0);
	assert_int_equal(haecer_counter_read_many(counters, 0, values, 0), -EINVAL);
	assert_int_equal(haecer_counter_read_many(counters, 3, values, 0x80), -EINVAL);
	haecer_counter_free(counters[1]);
	assert_int_equal(haecer_counter_open_energy(other, 1, RAPL_PKG, &counters[1]), 0);
	assert_int_equal(haecer_counter_read_many(counters, 3, values, 0), -EINVAL);
	haecer_context_close(other);
	haecer_counter_free(counters[0]);
	haecer_counter_free(counters[2]);
}

int main(void)
{
	const char *arguments[] = {"--sim-virtual-time", "--sim-ideal", NULL}; /* exact counts */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_set_reads_together, libclient_full_load),
		cmocka_unit_test_setup(test_batch_read, libclient_full_load),
	};

	return LIBCLIENT_RUN_GROUP("sandybridge", NULL, arguments, tests);
}
