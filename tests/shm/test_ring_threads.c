/*
 * Producers and a consumer as threads of one process (an instrumented program that also reads
 * its own ring). Same checks as the cross-process stress at a smaller scale; this is also the
 * program to build with -fsanitize=thread, which cannot follow memory shared between processes.
 */
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tests/shm/ring_testing.h"

struct producer_thread {
	pthread_t thread;
	struct ring_producer *producer;
	uint32_t index;
	uint64_t records;
	uint64_t dropped;
};

static _Atomic uint32_t producers_running;

static void *produce(void *argument)
{
	struct producer_thread *self = argument;

	for (uint64_t sequence = 0; sequence < self->records; sequence++) {
		struct ring_record record = ring_test_record(self->index, sequence);

		if (ring_push(self->producer, &record) == -EAGAIN)
			self->dropped++;
	}
	producers_running--;
	return NULL;
}

static void run_threads(uint32_t flags, uint32_t threads, uint32_t capacity)
{
	struct ring_params params = ring_test_params(capacity, flags);
	struct producer_thread producers[RING_TEST_MAX_THREADS];
	uint64_t per_thread = ring_test_scaled(1000000, 50000) / threads, dropped = 0;
	struct ring_test_tally tally = {0};
	struct ring_producer producer;
	struct ring_consumer consumer;
	struct ring_record records[256];
	struct ring_info info;
	int fd;

	assert_int_equal(ring_memfd_create(&params, &fd), 0);
	assert_int_equal(ring_producer_attach(&producer, fd), 0);
	assert_int_equal(ring_consumer_attach(&consumer, fd), 0);
	close(fd);
	producers_running = threads;
	for (uint32_t t = 0; t < threads; t++) {
		producers[t] = (struct producer_thread){
			.producer = &producer, .index = t, .records = per_thread};
		assert_int_equal(pthread_create(&producers[t].thread, NULL, produce,
						&producers[t]), 0);
	}
	while (producers_running > 0) {
		ssize_t count = ring_consume(&consumer, records, 256, &tally.lost);

		assert_true(count >= 0);
		ring_test_tally_add(&tally, records, (size_t)count);
		if (count == 0)
			sched_yield();
	}
	for (uint32_t t = 0; t < threads; t++) {
		pthread_join(producers[t].thread, NULL);
		dropped += producers[t].dropped;
	}
	assert_int_equal(ring_test_drain_final(&consumer, &tally), 0);
	ring_consumer_info(&consumer, &info);
	printf("threads %u: received %" PRIu64 " lost %" PRIu64 " dropped %" PRIu64 "\n",
	       threads, tally.received, tally.lost, dropped);
	assert_int_equal(info.pushed, per_thread * threads);
	assert_int_equal(info.producer_dropped, dropped);
	ring_test_expect_accounted(&consumer, &tally, info.pushed, threads);
	ring_consumer_detach(&consumer);
	ring_producer_detach(&producer);
}

static void test_single_producer_thread(void **state)
{
	(void)state;
	run_threads(RING_SINGLE_PRODUCER, 1, 1024);
}

static void test_three_producer_threads(void **state)
{
	(void)state;
	run_threads(0, 3, 256);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single_producer_thread),
		cmocka_unit_test(test_three_producer_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
