/*
 * A measurement must not change what it measures (issue 15): a program that sets counters up in
 * main and then creates threads (an OpenMP program) must see its whole CPU mask in them.
 *  - setupArchCounter, setupNamedCounter (perf's "cycles:u") and setupEnergyCounter without
 *    HAECER_FLAG_PIN leave the calling thread's mask alone, and a thread created afterwards has
 *    the same mask as main had before;
 *  - with HAECER_FLAG_PIN the thread is pinned to the counted CPU (the explicit request);
 *  - a region with default counters pins only while it is open: after its end the thread, and
 *    a thread created then, have the whole mask again.
 * Skips on a host with one CPU, where no mask can be narrowed.
 */
#include <pthread.h>
#include <sched.h>

#include "haecer/region.h"
#include "tests/libclient/libclient_test.h"

static cpu_set_t original;

static void *report_mask(void *arg)
{
	cpu_set_t *mask = arg;

	if (sched_getaffinity(0, sizeof(*mask), mask) < 0)
		CPU_ZERO(mask);
	return NULL;
}

/* The mask a thread created now starts with. */
static void new_thread_mask(cpu_set_t *mask)
{
	pthread_t thread;

	CPU_ZERO(mask);
	assert_int_equal(pthread_create(&thread, NULL, report_mask, mask), 0);
	assert_int_equal(pthread_join(thread, NULL), 0);
}

static void assert_mask_is_original(void)
{
	cpu_set_t mine, theirs;

	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	assert_true(CPU_EQUAL(&mine, &original));
	new_thread_mask(&theirs);
	assert_true(CPU_EQUAL(&theirs, &original));
}

static int save_mask(void **state)
{
	(void)state;
	if (sched_getaffinity(0, sizeof(original), &original) < 0)
		return -1;
	return 0;
}

static void test_setup_keeps_mask(void **state)
{
	PerfCounter instructions, cycles, energy;

	(void)state;
	instructions = setupArchCounter(INSTRUCTIONS_RETIRED, 0, 0);
	libclient_explain("instructions", instructions.error);
	assert_true(instructions.valid);
	cycles = setupNamedCounter("cycles:u", 0, 0);
	libclient_explain("cycles:u", cycles.error);
	assert_true(cycles.valid);
	energy = setupEnergyCounter(RAPL_PKG);
	assert_true(energy.valid);
	assert_mask_is_original();
	assert_true(readCounter(&instructions) != ULLONG_MAX);
	freeCounter(&instructions);
	freeCounter(&cycles);
	freeCounter(&energy);
}

static void test_pin_on_request(void **state)
{
	PerfCounter pinned;
	cpu_set_t mine, theirs;

	(void)state;
	pinned = setupArchCounter(UNHALTED_CORE_CYCLES, HAECER_FLAG_PIN, 0);
	libclient_explain("pinned cycles", pinned.error);
	assert_true(pinned.valid);
	assert_int_equal(sched_getaffinity(0, sizeof(mine), &mine), 0);
	assert_int_equal(CPU_COUNT(&mine), 1);
	new_thread_mask(&theirs);
	assert_true(CPU_EQUAL(&theirs, &mine));
	freeCounter(&pinned);
	assert_int_equal(sched_setaffinity(0, sizeof(original), &original), 0);
}

static void test_region_gives_mask_back(void **state)
{
	cpu_set_t inside;

	(void)state;
	assert_int_equal(haecer_region_begin("outer"), 0);
	assert_int_equal(haecer_region_begin("inner"), 0);
	assert_int_equal(sched_getaffinity(0, sizeof(inside), &inside), 0);
	assert_int_equal(haecer_region_end("inner"), 0);
	assert_int_equal(haecer_region_end("outer"), 0);
	fprintf(stderr, "CPUs while the region was open: %d\n", CPU_COUNT(&inside));
	assert_mask_is_original();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_setup_keeps_mask, save_mask),
		cmocka_unit_test_setup(test_pin_on_request, save_mask),
		cmocka_unit_test_setup(test_region_gives_mask_back, save_mask),
	};

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || save_mask(NULL) < 0 || CPU_COUNT(&original) < 2)
		return 77;
	setenv("HAECER_REGION_REPORT", "none", 1);
	return LIBCLIENT_RUN_GROUP("sandybridge", NULL, NULL, tests);
}
