/*
 * A ring producer killed with SIGKILL at random points, 100 times (20 under valgrind): the
 * producer (tests/shm/helper_ring_producer, the real push path) runs 1 to 4 threads on a ring of
 * random capacity, single-producer or shared, and dies after a random delay (from before its
 * first push, just after it, or well into overwriting); meanwhile this consumer reads at a
 * random pace. Once it
 * is gone the consumer drains with ring_consume_final. Every run: no torn record, no record out
 * of order per thread, and the accounting is exact: received + lost = positions reserved, the
 * consumer ends at head, and with one thread the gaps in the sequence are exactly the losses.
 * tests/shm/test_ring_producer_killed does this once per shape; this is the randomized repeat.
 * The seed is printed; HAECER_TEST_SEED=N repeats a run.
 */
#include <inttypes.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <time.h>
#include <cmocka.h>

#include "tests/shm/ring_testing.h"
#include "common/clock.h"

#define BATCH 256

static uint64_t random_state;
static unsigned before_first_push, within_first_lap, after_wrapping;

static uint64_t next_random(void)
{
	random_state = random_state * 6364136223846793005ull + 1442695040888963407ull;
	return ring_test_mix(random_state);
}

static uint64_t random_below(uint64_t limit)
{
	return next_random() % limit;
}

static uint64_t now_us(void)
{
	return clock_monotonic_ns() / 1000;
}

/* Read at a random pace until `deadline`: sometimes all there is, sometimes a little, sometimes
 * nothing for a while (so the producer laps us). */
static void consume_until(struct ring_consumer *consumer, struct ring_test_tally *tally,
			  uint64_t deadline)
{
	struct ring_record records[BATCH];

	while (now_us() < deadline) {
		size_t max = 1 + random_below(BATCH);
		ssize_t count = ring_consume(consumer, records, max, &tally->lost);
		assert_true(count >= 0 && (size_t)count <= max);
		ring_test_tally_add(tally, records, (size_t)count);
		if (random_below(4) == 0)
			usleep((useconds_t)random_below(2000));
		else if (count == 0)
			sched_yield();
	}
}

static void one_run(unsigned run)
{
	static char threads_text[4];
	uint32_t threads = 1 + (uint32_t)random_below(4);
	uint32_t capacity = 1u << (6 + random_below(7));
	uint32_t flags = threads == 1 && random_below(2) == 0 ? RING_SINGLE_PRODUCER : 0;
	uint32_t when = (uint32_t)random_below(10);
	uint64_t delay_us = when == 0 ? 0 : when < 3 ? random_below(20) : random_below(20000);
	struct ring_params params = ring_test_params(capacity, flags);
	char *arguments[] = { "../shm/helper_ring_producer", "0", threads_text, NULL };
	struct ring_test_tally tally = { 0 };
	struct ring_test_child producer;
	struct ring_consumer consumer;
	struct ring_info info;
	struct ring_record records[BATCH];
	uint64_t lost_after = 0;

	snprintf(threads_text, sizeof(threads_text), "%u", threads);
	assert_int_equal(ring_test_start(&producer, &params, arguments, &consumer), 0);
	/* One run in ten dies before it may even have attached; the others once pushing. */
	for (uint64_t give_up = now_us() + 60000000;
	     when != 0 && ring_consumer_backlog(&consumer) == 0 && consumer.position == 0;)
		assert_true(now_us() < give_up);
	consume_until(&consumer, &tally, now_us() + delay_us);
	assert_int_equal(kill(producer.pid, SIGKILL), 0);
	assert_int_equal(ring_test_wait(&producer), 128 + SIGKILL);
	ring_consumer_info(&consumer, &info);
	assert_false(ring_producer_alive(&info));
	assert_int_equal(ring_test_drain_final(&consumer, &tally), 0);
	ring_consumer_info(&consumer, &info);
	if (tally.torn != 0 || tally.out_of_order != 0 || tally.received + tally.lost != info.pushed)
		fprintf(stderr, "run %u: %u threads, capacity %u, flags %u, killed after %" PRIu64
				" us: pushed %" PRIu64 " received %" PRIu64 " lost %" PRIu64
				" torn %" PRIu64 " out of order %" PRIu64 "\n",
			run, threads, capacity, flags, delay_us, info.pushed, tally.received,
			tally.lost, tally.torn, tally.out_of_order);
	ring_test_expect_accounted(&consumer, &tally, info.pushed, threads);
	assert_int_equal(ring_consume_final(&consumer, records, BATCH, &lost_after), 0);
	assert_int_equal(lost_after, 0);
	ring_consumer_detach(&consumer);
	if (info.pushed == 0)
		before_first_push++;
	else if (info.pushed <= capacity)
		within_first_lap++;
	else
		after_wrapping++;
}

static void test_random_kills(void **state)
{
	unsigned runs = (unsigned)ring_test_scaled(100, 20);
	const char *seed = getenv("HAECER_TEST_SEED");

	(void)state;
	random_state = seed != NULL ? strtoull(seed, NULL, 10) : (uint64_t)now_us();
	printf("seed %" PRIu64 " (HAECER_TEST_SEED repeats it), %u runs\n", random_state, runs);
	for (unsigned run = 0; run < runs; run++)
		one_run(run);
	printf("killed before the first push %u, within the first lap %u, after wrapping %u\n",
	       before_first_push, within_first_lap, after_wrapping);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_kills),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
