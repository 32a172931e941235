/*
 * Cross-process stress: a producer process (helper_ring_producer) pushes millions of
 * self-checking records while this process consumes them through a read-only descriptor.
 * Asserts: no torn record, per-thread order, and received + lost == pushed exactly; with one
 * producer thread, the gaps in the received sequence add up to exactly the reported losses;
 * a consumer forced to fall two laps behind reports losses.
 */
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tests/shm/ring_testing.h"

#define BATCH 1024
#define SLOW_BATCH 64

struct stress {
	uint32_t capacity;
	uint32_t flags;
	uint32_t threads;
	uint64_t total; /* records over all threads */
	bool slow;
};

static bool child_finished(const struct ring_test_child *child)
{
	struct pollfd ready = {.fd = child->from_child, .events = POLLIN};

	return poll(&ready, 1, 0) > 0;
}

/* Deterministic overrun: unless records were lost already (a fast producer), wait until the
 * producers are two laps ahead, so whole laps this consumer never read are overwritten. */
static void fall_behind(struct ring_consumer *consumer, const struct ring_test_tally *tally,
			const struct ring_test_child *producer)
{
	if (tally->lost > 0)
		return;
	while (ring_consumer_backlog(consumer) <= 2 * consumer->capacity) {
		assert_false(child_finished(producer));
		usleep(100);
	}
}

static void consume_live(struct ring_consumer *consumer, struct ring_test_tally *tally,
			 const struct ring_test_child *producer, const struct stress *stress)
{
	static struct ring_record records[BATCH];
	size_t batch = stress->slow ? SLOW_BATCH : BATCH;

	for (;;) {
		ssize_t count = ring_consume(consumer, records, batch, &tally->lost);

		assert_true(count >= 0);
		ring_test_tally_add(tally, records, (size_t)count);
		/* What was returned so far cannot show more gaps than what was reported lost. */
		if (stress->threads == 1)
			assert_true(tally->gaps <= tally->lost);
		if (stress->slow && tally->received == (uint64_t)count && count > 0)
			fall_behind(consumer, tally, producer);
		if (count == 0 && child_finished(producer))
			return;
		if (stress->slow)
			usleep(50);
		else if (count == 0)
			sched_yield();
	}
}

static void run_stress(const struct stress *stress)
{
	struct ring_params params = ring_test_params(stress->capacity, stress->flags);
	char records_arg[32], threads_arg[16], line[128];
	char *arguments[] = {"helper_ring_producer", records_arg, threads_arg, NULL};
	uint64_t per_thread = stress->total / stress->threads, pushed = 0, dropped = 0;
	struct ring_test_tally tally = {0};
	struct ring_test_child producer;
	struct ring_consumer consumer;
	struct ring_info info;

	snprintf(records_arg, sizeof(records_arg), "%" PRIu64, per_thread);
	snprintf(threads_arg, sizeof(threads_arg), "%u", stress->threads);
	assert_int_equal(ring_test_start(&producer, &params, arguments, &consumer), 0);

	consume_live(&consumer, &tally, &producer, stress);
	assert_int_equal(ring_test_read_line(&producer, line, sizeof(line)), 0);
	assert_int_equal(sscanf(line, "pushed=%" SCNu64 " dropped=%" SCNu64, &pushed, &dropped), 2);
	assert_int_equal(ring_test_wait(&producer), 0);
	assert_int_equal(ring_test_drain_final(&consumer, &tally), 0);
	ring_consumer_info(&consumer, &info);

	printf("capacity %u threads %u: pushed %" PRIu64 " received %" PRIu64 " lost %" PRIu64
	       " producer-dropped %" PRIu64 "\n",
	       stress->capacity, stress->threads, pushed, tally.received, tally.lost, dropped);
	assert_int_equal(pushed, per_thread * stress->threads);
	assert_int_equal(info.pushed, pushed);
	assert_int_equal(info.producer_dropped, dropped);
	ring_test_expect_accounted(&consumer, &tally, pushed, stress->threads);
	assert_int_equal(consumer.lost_total, tally.lost);
	if (stress->slow)
		assert_true(tally.lost > 0);
	ring_consumer_detach(&consumer);
}

static uint64_t stress_records(void)
{
	return ring_test_scaled(10000000, 200000);
}

static void test_single_producer(void **state)
{
	(void)state;
	run_stress(&(struct stress){.capacity = 1u << 16, .flags = RING_SINGLE_PRODUCER,
				    .threads = 1, .total = stress_records()});
}

static void test_single_producer_slow_consumer(void **state)
{
	(void)state;
	run_stress(&(struct stress){.capacity = 1024, .flags = RING_SINGLE_PRODUCER,
				    .threads = 1, .total = stress_records(), .slow = true});
}

static void test_four_producer_threads(void **state)
{
	(void)state;
	run_stress(&(struct stress){.capacity = 4096, .threads = 4, .total = stress_records()});
}

static void test_four_producer_threads_slow_consumer(void **state)
{
	(void)state;
	run_stress(&(struct stress){.capacity = 1024, .threads = 4, .total = stress_records(),
				    .slow = true});
}

static void test_shared_mode_one_thread(void **state)
{
	(void)state;
	run_stress(&(struct stress){.capacity = 2048, .threads = 1, .total = stress_records()});
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single_producer),
		cmocka_unit_test(test_single_producer_slow_consumer),
		cmocka_unit_test(test_four_producer_threads),
		cmocka_unit_test(test_four_producer_threads_slow_consumer),
		cmocka_unit_test(test_shared_mode_one_thread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
