/*
 * A writer that claims a slot and never commits it (helper_ring_stall: the real push path,
 * stopped between claim and payload). Consumers must never return that slot's contents, must
 * wait for it while it may still complete, count it lost once the producers are a lap past it or
 * gone, and keep exact accounting. Other writers must drop (not overwrite) the stalled slot.
 *
 * Everything after the stall is deterministic, so the exact records and losses are asserted.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tests/shm/ring_testing.h"

#define CAPACITY 8

struct stalled_ring {
	struct ring_test_child helper;
	struct ring_consumer consumer;
	struct ring_test_tally tally;
	struct ring_record records[64];
	uint64_t lost; /* reported by the last consume call */
};

static void expect_line(struct stalled_ring *ring, const char *expected)
{
	char line[64];

	assert_int_equal(ring_test_read_line(&ring->helper, line, sizeof(line)), 0);
	assert_string_equal(line, expected);
}

static void stalled_ring_start(struct stalled_ring *ring, uint32_t flags, const char *mode,
			       const char *stall, const char *after)
{
	struct ring_params params = ring_test_params(CAPACITY, flags);
	char *arguments[] = {"helper_ring_stall", (char *)mode, (char *)stall, (char *)after, NULL};

	memset(ring, 0, sizeof(*ring));
	assert_int_equal(ring_test_start(&ring->helper, &params, arguments, &ring->consumer), 0);
	expect_line(ring, "claimed");
}

/* Consume once; returns how many records came back, checks each against `first` onwards. */
static ssize_t consume_expecting(struct stalled_ring *ring, bool final, uint64_t first)
{
	ssize_t count;

	ring->lost = 0;
	count = final ? ring_consume_final(&ring->consumer, ring->records, 64, &ring->lost)
		      : ring_consume(&ring->consumer, ring->records, 64, &ring->lost);
	assert_true(count >= 0);
	for (ssize_t i = 0; i < count; i++) {
		assert_true(ring_test_record_intact(&ring->records[i]));
		assert_int_equal(ring->records[i].value, first + (uint64_t)i);
	}
	ring_test_tally_add(&ring->tally, ring->records, (size_t)count);
	ring->tally.lost += ring->lost;
	return count;
}

static void push_more(struct stalled_ring *ring, const char *count, const char *expected_totals)
{
	assert_int_equal(ring_test_write_line(&ring->helper, count), 0);
	expect_line(ring, expected_totals);
}

static void kill_helper(struct stalled_ring *ring)
{
	struct ring_info info;

	assert_int_equal(kill(ring->helper.pid, SIGKILL), 0);
	assert_int_equal(ring_test_wait(&ring->helper), 128 + SIGKILL);
	ring_consumer_info(&ring->consumer, &info);
	assert_int_equal(info.producer_pid, ring->helper.pid);
	assert_false(ring_producer_alive(&info));
}

static void assert_exact(struct stalled_ring *ring, uint64_t pushed)
{
	struct ring_info info;

	ring_consumer_info(&ring->consumer, &info);
	assert_int_equal(info.pushed, pushed);
	ring_test_expect_accounted(&ring->consumer, &ring->tally, pushed, 1);
	ring_consumer_detach(&ring->consumer);
}

/* Single producer, stalled at position 5 of a fresh ring: 0..4 arrive, 5 is waited for while
 * the producer lives and counted lost once it is dead. */
static void test_single_producer_dies_mid_write(void **state)
{
	struct stalled_ring ring;

	(void)state;
	stalled_ring_start(&ring, RING_SINGLE_PRODUCER, "single", "5", "0");
	assert_int_equal(consume_expecting(&ring, false, 0), 5);
	assert_int_equal(ring.lost, 0);
	assert_int_equal(consume_expecting(&ring, false, 5), 0);
	assert_int_equal(ring.lost, 0);
	assert_int_equal(ring.consumer.position, 5);

	kill_helper(&ring);
	assert_int_equal(consume_expecting(&ring, true, 5), 0);
	assert_int_equal(ring.lost, 1);
	assert_exact(&ring, 6);
}

/*
 * Shared ring, capacity 8, position 11 stalled in slot 3 (which still holds record 3, committed:
 * a stale but intact payload the consumer must not return under position 11).
 *  - 4 more pushed (head 16): the consumer, at 0, finds 0..7 overwritten (lost 8), returns
 *    8, 9, 10 and waits at 11: head 16 is not a lap past it.
 *  - 20 more (16..35, head 36): the pushes at 19, 27 and 35 meet the odd slot and are dropped.
 *    The consumer counts 11..27 lost (head - capacity = 28), returns 28..34, waits at 35.
 *  - The producer is killed: ring_consume_final counts 35 lost.
 */
static void test_shared_writer_stalls_a_lap_later(void **state)
{
	struct stalled_ring ring;
	struct ring_info info;

	(void)state;
	stalled_ring_start(&ring, 0, "shared", "11", "4");
	expect_line(&ring, "pushed");
	assert_int_equal(consume_expecting(&ring, false, 8), 3);
	assert_int_equal(ring.lost, 8);
	assert_int_equal(consume_expecting(&ring, false, 11), 0);
	assert_int_equal(ring.lost, 0);

	push_more(&ring, "20\n", "pushed=36 dropped=3");
	ring_consumer_info(&ring.consumer, &info);
	assert_int_equal(info.producer_dropped, 3);
	assert_int_equal(consume_expecting(&ring, false, 28), 7);
	assert_int_equal(ring.lost, 17);
	assert_int_equal(consume_expecting(&ring, false, 35), 0);
	assert_int_equal(ring.lost, 0);

	kill_helper(&ring);
	assert_int_equal(consume_expecting(&ring, true, 35), 0);
	assert_int_equal(ring.lost, 1);
	assert_exact(&ring, 36);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single_producer_dies_mid_write),
		cmocka_unit_test(test_shared_writer_stalls_a_lap_later),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
