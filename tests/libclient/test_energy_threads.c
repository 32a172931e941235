/*
 * Energy regions and energy readings from several threads of one context at once: each thread
 * measures its own regions through the default context, for long enough that the precise-edge
 * lease is renewed (a round trip every 75 ms) many times while other threads poll. Every call
 * must succeed and msrd must see only well-formed frames: the lease's and the SMI count's round
 * trips once went out without the context's lock and interleaved with another thread's poll
 * ("malformed frame", the connection closed).
 */
#include <pthread.h>
#include <time.h>

#include "tests/lib/test_check.h"
#include "common/clock.h"
#include "tests/libclient/libclient_test.h"

#define THREADS 4
#define RUN_NS (600 * NS_PER_MS)

struct worker {
	struct haecer_counter *energy;
	unsigned regions;
	int error;
};

static void *measure(void *argument)
{
	struct worker *worker = argument;
	uint64_t until = clock_monotonic_ns() + RUN_NS;

	while (worker->error == 0 && clock_monotonic_ns() < until) {
		struct haecer_energy_region region;
		struct haecer_energy_result result;
		struct haecer_energy_reading reading;

		worker->error = haecer_energy_start(worker->energy, &region);
		if (worker->error == 0)
			worker->error = haecer_energy_end(worker->energy, &region, &result);
		if (worker->error == 0)
			worker->error = haecer_counter_read_energy(worker->energy, &reading);
		if (worker->error == 0)
			worker->regions++;
		else
			fprintf(stderr, "thread: %s (%s)\n", haecer_strerror(worker->error),
				haecer_error_detail());
	}
	return NULL;
}

static void test_threads_share_a_context(void **state)
{
	struct haecer_context *ctx;
	struct worker workers[THREADS] = { 0 };
	pthread_t threads[THREADS];

	(void)state;
	assert_int_equal(haecer_default_context(&ctx), 0);
	for (int i = 0; i < THREADS; i++) {
		int error = haecer_counter_open_energy(ctx, 0, HAECER_ENERGY_PKG, &workers[i].energy);
		libclient_explain("open energy-pkg", error);
		assert_int_equal(error, 0);
	}
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&threads[i], NULL, measure, &workers[i]), 0);
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(threads[i], NULL), 0);
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(workers[i].error, 0);
		assert_true(workers[i].regions > 0);
		haecer_counter_free(workers[i].energy);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_share_a_context),
	};

	return LIBCLIENT_RUN_GROUP("sandybridge", NULL, NULL, tests);
}
