/*
 * A hostile producer rewrites the header and slots after a consumer attached. The consumer
 * keeps its own copy of the capacity, so it never indexes outside its mapping; its counts stay
 * self-consistent (every position it moves past is either returned or counted lost), every call
 * terminates, and header snapshots stay bounded and terminated. A head no honest producer
 * writes (behind what the consumer saw, or further ahead than time since attach allows) or
 * more drops than records make every later consume return RING_CORRUPTED with nothing counted:
 * never ~2^64 lost records (issue 28, item 5).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "tests/shm/ring_testing.h"

#define CAPACITY 64u
#define OFFSET_SLOT_BYTES 16
#define OFFSET_CAPACITY 20
#define OFFSET_COUNTER_COUNT 44
#define OFFSET_HEAD 128
#define OFFSET_DROPPED 256
#define OFFSET_COUNTERS 384
#define HEADER_BYTES 4096u

struct hostile_ring {
	struct ring_producer producer;
	struct ring_consumer consumer;
	unsigned char *raw; /* the producer's writable mapping */
};

static int setup(void **state)
{
	static struct hostile_ring ring;
	struct ring_params params = ring_test_params(CAPACITY, RING_SINGLE_PRODUCER);
	int fd, readonly;

	if (ring_memfd_create(&params, &fd) || ring_producer_attach(&ring.producer, fd))
		return -1;
	readonly = ring_reopen_readonly(fd);
	if (readonly < 0 || ring_consumer_attach(&ring.consumer, readonly))
		return -1;
	close(readonly);
	close(fd);
	for (uint64_t i = 0; i < 100; i++) {
		struct ring_record record = ring_test_record(0, i);

		if (ring_push(&ring.producer, &record))
			return -1;
	}
	ring.raw = ring.producer.mapping;
	*state = &ring;
	return 0;
}

static int teardown(void **state)
{
	struct hostile_ring *ring = *state;

	ring_consumer_detach(&ring->consumer);
	ring_producer_detach(&ring->producer);
	return 0;
}

static void put32(struct hostile_ring *ring, size_t offset, uint32_t value)
{
	memcpy(&ring->raw[offset], &value, sizeof(value));
}

static void put64(struct hostile_ring *ring, size_t offset, uint64_t value)
{
	memcpy(&ring->raw[offset], &value, sizeof(value));
}

/* A few calls: each returns at most max, accounts for every position it passed, and the
 * consumer's own geometry never changes. */
static void consume_and_check(struct hostile_ring *ring, bool final)
{
	struct ring_record records[32];

	for (int call = 0; call < 8; call++) {
		uint64_t before = ring->consumer.position, lost = 0;
		ssize_t count = final ? ring_consume_final(&ring->consumer, records, 32, &lost)
				      : ring_consume(&ring->consumer, records, 32, &lost);

		if (count == RING_CORRUPTED) {
			assert_int_equal(lost, 0);
			assert_int_equal(ring->consumer.position, before);
			assert_true(ring_consumer_corrupted(&ring->consumer));
			continue;
		}
		assert_true(count >= 0 && count <= 32);
		assert_int_equal((uint64_t)count + lost, ring->consumer.position - before);
		assert_int_equal(ring->consumer.capacity, CAPACITY);
		assert_int_equal(ring->consumer.mask, CAPACITY - 1);
	}
}

static void assert_snapshot_bounded(struct hostile_ring *ring)
{
	struct ring_info info;

	ring_consumer_info(&ring->consumer, &info);
	assert_int_equal(info.capacity, CAPACITY);
	assert_true(info.counter_count <= RING_MAX_COUNTERS);
	for (uint32_t i = 0; i < info.counter_count; i++)
		assert_true(strnlen(info.counters[i].name, RING_NAME_MAX) < RING_NAME_MAX);
	(void)ring_consumer_backlog(&ring->consumer);
}

static void test_header_rewritten(void **state)
{
	struct hostile_ring *ring = *state;

	memset(ring->raw, 0xff, 64); /* magic, version, sizes, capacity, ... */
	put32(ring, OFFSET_SLOT_BYTES, 1);
	put32(ring, OFFSET_CAPACITY, RING_MAX_CAPACITY);
	put32(ring, OFFSET_COUNTER_COUNT, UINT32_MAX);
	memset(&ring->raw[OFFSET_COUNTERS], 'Z', RING_MAX_COUNTERS * 52);
	consume_and_check(ring, false);
	assert_snapshot_bounded(ring);
}

static void test_head_far_ahead(void **state)
{
	struct hostile_ring *ring = *state;

	put64(ring, OFFSET_HEAD, UINT64_MAX - 3);
	consume_and_check(ring, false);
	consume_and_check(ring, true);
	assert_snapshot_bounded(ring);
	/* The attack of issue 28: no lost count of about 2^64, but a corrupted ring. */
	assert_true(ring_consumer_corrupted(&ring->consumer));
	assert_true(ring->consumer.lost_total <= 100);
}

/* Read honestly first, then the head jumps further than any producer pushes in the time. */
static void test_head_jumps_too_far(void **state)
{
	struct hostile_ring *ring = *state;
	struct ring_record records[128];
	uint64_t lost = 0;

	/* 100 pushed into 64 slots: the oldest 36 are lost, honestly. */
	assert_int_equal(ring_consume(&ring->consumer, records, 128, &lost), CAPACITY);
	assert_int_equal(lost, 100 - CAPACITY);
	assert_false(ring_consumer_corrupted(&ring->consumer));
	lost = 0;
	put64(ring, OFFSET_HEAD, 100 + (1ull << 40));
	assert_int_equal(ring_consume(&ring->consumer, records, 128, &lost), RING_CORRUPTED);
	assert_int_equal(lost, 0);
	/* For good: putting the head back does not make the ring trusted again. */
	put64(ring, OFFSET_HEAD, 100);
	assert_int_equal(ring_consume_final(&ring->consumer, records, 128, &lost), RING_CORRUPTED);
	assert_int_equal(lost, 0);
	assert_int_equal(ring->consumer.lost_total, 100 - CAPACITY);
}

/* A head rewritten before the consumer came: more records than pushing since the ring's
 * creation allows. */
static void test_head_lies_before_attach(void **state)
{
	struct hostile_ring *ring = *state;
	struct ring_consumer late;
	struct ring_record records[4];

	put64(ring, OFFSET_HEAD, UINT64_MAX - 5);
	assert_int_equal(ring_consumer_use(&late, ring->raw, ring->producer.mapping_bytes), 0);
	assert_true(ring_consumer_corrupted(&late));
	assert_int_equal(ring_consume(&late, records, 4, NULL), RING_CORRUPTED);
	ring_consumer_detach(&late);
}

/* More records dropped by producers than were ever pushed. */
static void test_dropped_above_head(void **state)
{
	struct hostile_ring *ring = *state;
	struct ring_record records[4];

	put64(ring, OFFSET_DROPPED, 1ull << 62);
	assert_true(ring_consumer_corrupted(&ring->consumer));
	assert_int_equal(ring_consume(&ring->consumer, records, 4, NULL), RING_CORRUPTED);
}

static void test_head_moves_back(void **state)
{
	struct hostile_ring *ring = *state;
	struct ring_record records[4];
	uint64_t lost = 0;

	ring->consumer.position = 100;
	put64(ring, OFFSET_HEAD, 5);
	assert_int_equal(ring_consume(&ring->consumer, records, 4, &lost), RING_CORRUPTED);
	assert_int_equal(ring_consume_final(&ring->consumer, records, 4, &lost), RING_CORRUPTED);
	assert_int_equal(lost, 0);
	assert_int_equal(ring->consumer.position, 100);
	assert_int_equal(ring_consumer_backlog(&ring->consumer), 0);
}

struct runaway_head {
	struct hostile_ring *ring;
	atomic_bool stop;
};

/* The hostile producer keeps moving head ahead as fast as it can. */
static void *run_head_away(void *argument)
{
	struct runaway_head *runaway = argument;
	uint64_t head = 1000;

	while (!atomic_load(&runaway->stop)) {
		head += CAPACITY / 2;
		__atomic_store_n((uint64_t *)&runaway->ring->raw[OFFSET_HEAD], head, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* Without a bound on its steps a final drain would chase such a head forever: every call must
 * return, with every position it passed accounted for. */
static void test_head_keeps_running(void **state)
{
	struct runaway_head runaway = { .ring = *state };
	pthread_t thread;

	assert_int_equal(pthread_create(&thread, NULL, run_head_away, &runaway), 0);
	consume_and_check(runaway.ring, true);
	consume_and_check(runaway.ring, false);
	atomic_store(&runaway.stop, true);
	assert_int_equal(pthread_join(thread, NULL), 0);
}

static void test_slot_words_garbage(void **state)
{
	struct hostile_ring *ring = *state;
	uint64_t seed = 42;

	for (size_t slot = 0; slot < CAPACITY; slot++)
		for (size_t word = 0; word < 4; word++) {
			seed = ring_test_mix(seed);
			/* Every third word claims a committed record of positions 1024..1087. */
			put64(ring, HEADER_BYTES + slot * 32 + word * 8,
			      word == 0 && slot % 3 == 0 ? 2 * (1024 + slot) + 2 : seed);
		}
	ring->consumer.position = 900;
	usleep(2000); /* time for an honest producer to push 1088 records: the head is believed */
	put64(ring, OFFSET_HEAD, 1088);
	consume_and_check(ring, false);
	consume_and_check(ring, true);
	assert_int_equal(ring->consumer.position, 1088);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_header_rewritten, setup, teardown),
		cmocka_unit_test_setup_teardown(test_head_far_ahead, setup, teardown),
		cmocka_unit_test_setup_teardown(test_head_moves_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_head_jumps_too_far, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dropped_above_head, setup, teardown),
		cmocka_unit_test_setup_teardown(test_head_lies_before_attach, setup, teardown),
		cmocka_unit_test_setup_teardown(test_head_keeps_running, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slot_words_garbage, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
