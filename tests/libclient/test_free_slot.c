/*
 * Freeing a counter releases its slot to other processes: this process takes every programmable
 * counter of CPU 0 (four on the simulated Sandy Bridge), another process then gets -ENOSPC with
 * msrd's reason; after freeCounter of one of them, a new process gets exactly that counter. The
 * freed PerfCounter (and a copy of it) reads -1 and its operations do nothing.
 */
#include <limits.h>
#include <sched.h>

#include "tests/lib/test_check.h"
#include "tests/libclient/libclient_test.h"

#define PROGRAMMABLE_COUNTERS 4 /* sandybridge: CPUID.0AH:EAX[15:8] */

/* In another process: take one programmable counter on CPU 0 through a context of its own. */
static int take_one(void *argument)
{
	int expected_index = *(const int *)argument;
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	struct haecer_counter_info info;
	int error;

	CHECK_EQ(haecer_context_open(server.socket_path, &ctx), 0);
	error = haecer_counter_open_arch(ctx, 0, LL_CACHE_MISSES, 0, 0, &counter);
	if (expected_index < 0) {
		CHECK_EQ(error, -ENOSPC);
		CHECK(strlen(haecer_error_detail()) > 0);
		fprintf(stderr, "as expected: %s\n", haecer_error_detail());
	} else {
		CHECK_EQ(error, 0);
		CHECK_EQ(haecer_counter_info(counter, &info), 0);
		CHECK_EQ(info.hardware_index, expected_index);
		CHECK_EQ(info.kind, HAECER_COUNTER_PROGRAMMABLE);
	}
	haecer_context_close(ctx);
	return 0;
}

static void pin_to_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	assert_int_equal(sched_setaffinity(0, sizeof(set), &set), 0);
}

static void test_free_releases_the_slot(void **state)
{
	PerfCounter counters[PROGRAMMABLE_COUNTERS];
	PerfCounter extra, copy;
	struct haecer_counter_info info;
	uint64_t value;
	int none = -1;
	int index;

	(void)state;
	pin_to_cpu0(); /* host CPU 0 is model CPU 0: the HAECER API counts where it runs */
	for (int i = 0; i < PROGRAMMABLE_COUNTERS; i++) {
		counters[i] = setupArchCounter(LL_CACHE_MISSES, 0, 0);
		libclient_explain("setupArchCounter", counters[i].error);
		assert_true(counters[i].valid);
	}
	extra = setupArchCounter(LL_CACHE_MISSES, 0, 0);
	assert_int_equal(extra.error, -ENOSPC);
	assert_int_equal(run_as(0, 0, NULL, 0, take_one, &none), 0);

	/* Free the third, keeping a copy of it. */
	assert_int_equal(haecer_counter_info(haecer_perf_counter(&counters[2]), &info), 0);
	assert_int_equal(info.cpu, 0);
	index = info.hardware_index;
	copy = counters[2];
	assert_true(readCounter(&counters[2]) != ULLONG_MAX);
	freeCounter(&counters[2]);
	assert_false(counters[2].valid);
	assert_null(haecer_perf_counter(&copy));
	assert_true(readCounter(&copy) == ULLONG_MAX);
	enableCounter(&copy);
	resetCounter(&copy);
	freeCounter(&copy);
	assert_int_equal(haecer_counter_read(copy.counter, &value), -EBADF);

	assert_int_equal(run_as(0, 0, NULL, 0, take_one, &index), 0);
	for (int i = 0; i < PROGRAMMABLE_COUNTERS; i++)
		freeCounter(&counters[i]);
}

int main(void)
{
	const char *arguments[] = {"--sim-virtual-time", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_free_releases_the_slot),
	};

	return LIBCLIENT_RUN_GROUP("sandybridge", NULL, arguments, tests);
}
