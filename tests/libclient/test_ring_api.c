/*
 * The public ring API (<haecer/ring.h>, seed 001 §2.2): a monitored counter's ring carries the
 * program's application events beside its readings, and a monitor in another process attaches
 * by (major, minor) through msrd and reads both, in push order, with exact lost counts.
 *  - events beside readings: a monitor sees every reading (the value the read returned, the
 *    counter's id) and every event (its id and value, marked as an event) in the order they
 *    happened; an event's timestamp lies inside its post, a reading's when its value was true
 *    (inside the read, or up to the reading's age before it returned); the ring holds the seed's 3000 entries rounded up to
 *    4096, and the counter's info says so;
 *  - threads: two threads post events while a third reads the counter and a reader thread
 *    follows the ring: nothing is lost in a ring big enough, each thread's events arrive in its
 *    order, the readings in theirs (also run under ThreadSanitizer by scripts/check.sh);
 *  - overrun: a monitor that falls behind is told how many records it lost, read + lost =
 *    posted;
 *  - refusals: posting through a counter without a ring (-ENOTCONN), a freed one (-EBADF), an
 *    id above HAECER_RING_EVENT_ID_MAX (-EINVAL); attaching to a ring that does not exist
 *    (-ENOENT) or one whose major the policy does not let the user monitor (-EPERM).
 */
#include <pthread.h>
#include <time.h>

#include "haecer/haecer.h"
#include "tests/lib/test_check.h"
#include "tests/libclient/libclient_test.h"

#define MAJOR 9
#define READS 200
#define EVENT_EVERY 7
#define FRAME_EVENT 1
#define POSTERS 2
#define POSTS_PER_THREAD 2000
#define THREAD_READS 500

/* What the producer did, in order, for the monitor to compare against. */
struct expected_record {
	bool event;
	uint32_t id;
	uint64_t value;
	uint64_t before, after;
};

static struct {
	struct haecer_counter_info info;
	size_t count;
	struct expected_record records[READS + READS / EVENT_EVERY + 1];
} produced;

/* A monitor process: attach by key alone, read everything, compare. */
static int monitor(void *argument)
{
	static struct haecer_ring_record records[READS * 2];
	struct haecer_ring_reader *reader = NULL;
	struct haecer_ring_info info;
	struct haecer_conn *conn;
	uint64_t lost = 0;
	ssize_t got;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_ring_attach(conn, MAJOR, 1, 0, &reader), 0);
	haecer_close(conn); /* the reader keeps its own mapping */
	haecer_ring_reader_info(reader, &info);
	CHECK_EQ(info.major, MAJOR);
	CHECK_EQ(info.minor, 1);
	CHECK_EQ(info.capacity, 4096);
	CHECK_EQ(info.clock, HAECER_RING_CLOCK_MONOTONIC_RAW);
	CHECK_EQ(info.producer_pid, getppid());
	CHECK_EQ(info.counter_count, 1);
	CHECK_EQ(info.counters[0].id, produced.info.id);
	CHECK_EQ(info.counters[0].kind, HAECER_RING_COUNTER_ENERGY);
	CHECK_EQ(info.counters[0].unit_exponent, produced.info.unit_exponent);
	CHECK(strcmp(info.counters[0].name, produced.info.name) == 0);
	CHECK_EQ(info.pushed, produced.count);
	got = haecer_ring_read(reader, records, sizeof(records) / sizeof(records[0]), &lost);
	CHECK_EQ(got, produced.count);
	CHECK_EQ(lost, 0);
	for (size_t i = 0; i < produced.count; i++) {
		const struct expected_record *expected = &produced.records[i];

		CHECK_EQ(records[i].event, expected->event);
		CHECK_EQ(records[i].id, expected->id);
		CHECK_EQ(records[i].value, expected->value);
		CHECK_EQ(records[i].unit_exponent, expected->event ? 0 : produced.info.unit_exponent);
		CHECK(records[i].timestamp >= expected->before);
		CHECK(records[i].timestamp <= expected->after);
	}
	CHECK_EQ(haecer_ring_read(reader, records, 1, &lost), 0);
	haecer_ring_reader_info(reader, &info);
	CHECK_EQ(info.lost, 0);
	haecer_ring_detach(reader);
	return 0;
}

static void expect(bool event, uint32_t id, uint64_t value, uint64_t before, uint64_t after)
{
	produced.records[produced.count++] = (struct expected_record){
		.event = event, .id = id, .value = value, .before = before, .after = after,
	};
}

static void test_events_beside_readings(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *energy;
	uint64_t before, after, value, age;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_counter_open_energy(ctx, 0, HAECER_ENERGY_PKG, &energy), 0);
	/* The seed's monitor: a 3000-entry list; rings hold a power of two. */
	assert_int_equal(haecer_counter_monitor(energy, MAJOR, 1, HAECER_FERRET_SEED_CAPACITY), 0);
	assert_int_equal(haecer_counter_info(energy, &produced.info), 0);
	assert_int_equal(produced.info.ring_capacity, 4096);
	for (uint64_t i = 0; i < READS; i++) {
		/* A reading is dated when its value was true: for a reading from msrd's energy
		 * page that is msrd's sample, up to `age` before the call returned. */
		before = clock_monotonic_raw_ns();
		assert_int_equal(haecer_counter_read_aged(energy, &value, &age), 0);
		after = clock_monotonic_raw_ns();
		expect(false, produced.info.id, value, before - age, after);
		if (i % EVENT_EVERY == 0) {
			before = clock_monotonic_raw_ns();
			assert_int_equal(haecer_ring_post(energy, FRAME_EVENT, i), 0);
			after = clock_monotonic_raw_ns();
			expect(true, FRAME_EVENT, i, before, after);
		}
	}
	assert_int_equal(run_as(0, 0, NULL, 0, monitor, NULL), 0);
	haecer_context_close(ctx);
}

/* ---- threads ---- */

struct threaded {
	struct haecer_counter *counter;
	struct haecer_ring_reader *reader;
	uint64_t total;
	uint64_t next_event[POSTERS];
	uint64_t readings, last_reading;
	uint64_t lost;
	int failures;
};

struct poster {
	struct threaded *shared;
	uint32_t id;
};

static void *post_events(void *argument)
{
	struct poster *poster = argument;

	for (uint64_t i = 0; i < POSTS_PER_THREAD; i++)
		if (haecer_ring_post(poster->shared->counter, poster->id, i) != 0)
			__atomic_add_fetch(&poster->shared->failures, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void *read_counter(void *argument)
{
	struct threaded *shared = argument;
	uint64_t value;

	for (int i = 0; i < THREAD_READS; i++)
		if (haecer_counter_read(shared->counter, &value) != 0)
			__atomic_add_fetch(&shared->failures, 1, __ATOMIC_RELAXED);
	return NULL;
}

/* Follow the ring until every record arrived (or 30 s), checking the order per source. */
static void *follow(void *argument)
{
	struct threaded *shared = argument;
	struct haecer_ring_record records[128];
	uint64_t seen = 0, deadline = clock_monotonic_raw_ns() + 30 * NS_PER_S;

	while (seen + shared->lost < shared->total && clock_monotonic_raw_ns() < deadline) {
		ssize_t got = haecer_ring_read(shared->reader, records, 128, &shared->lost);

		for (ssize_t i = 0; i < got; i++) {
			const struct haecer_ring_record *record = &records[i];

			if (record->event && record->id < POSTERS &&
			    record->value == shared->next_event[record->id])
				shared->next_event[record->id]++;
			else if (!record->event && record->value >= shared->last_reading) {
				shared->last_reading = record->value;
				shared->readings++;
			} else
				shared->failures++;
		}
		seen += got > 0 ? (uint64_t)got : 0;
		if (got == 0)
			sched_yield();
	}
	return NULL;
}

static void test_threads_post_while_reading(void **state)
{
	static struct threaded shared = { .total = POSTERS * POSTS_PER_THREAD + THREAD_READS };
	struct poster posters[POSTERS];
	pthread_t threads[POSTERS + 2];
	struct haecer_context *ctx;
	struct haecer_conn *conn;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_counter_open_fixed(ctx, 0, HAECER_FIXED_INST_RETIRED_ANY, 0,
						   &shared.counter), 0);
	assert_int_equal(haecer_counter_monitor(shared.counter, MAJOR, 2, 8192), 0);
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_ring_attach(conn, MAJOR, 2, 0, &shared.reader), 0);
	haecer_close(conn);
	assert_int_equal(pthread_create(&threads[0], NULL, follow, &shared), 0);
	assert_int_equal(pthread_create(&threads[1], NULL, read_counter, &shared), 0);
	for (uint32_t i = 0; i < POSTERS; i++) {
		posters[i] = (struct poster){ .shared = &shared, .id = i };
		assert_int_equal(pthread_create(&threads[2 + i], NULL, post_events, &posters[i]), 0);
	}
	for (size_t i = 0; i < POSTERS + 2; i++)
		assert_int_equal(pthread_join(threads[i], NULL), 0);
	assert_int_equal(shared.failures, 0);
	assert_int_equal(shared.lost, 0);
	assert_int_equal(shared.readings, THREAD_READS);
	for (size_t i = 0; i < POSTERS; i++)
		assert_int_equal(shared.next_event[i], POSTS_PER_THREAD);
	haecer_ring_detach(shared.reader);
	haecer_context_close(ctx);
}

/* ---- overrun ---- */

static void test_overrun_counts_lost(void **state)
{
	struct haecer_ring_record records[64];
	struct haecer_ring_reader *reader;
	struct haecer_counter_info info;
	struct haecer_context *ctx;
	struct haecer_counter *energy;
	struct haecer_conn *conn;
	uint64_t lost = 0;
	ssize_t got;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_counter_open_energy(ctx, 0, HAECER_ENERGY_PKG, &energy), 0);
	assert_int_equal(haecer_counter_monitor(energy, MAJOR, 3, 10), 0);
	assert_int_equal(haecer_counter_info(energy, &info), 0);
	assert_int_equal(info.ring_capacity, 16);
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_ring_attach(conn, MAJOR, 3, 0, &reader), 0);
	haecer_close(conn);
	for (uint64_t i = 0; i < 100; i++)
		assert_int_equal(haecer_ring_post(energy, 5, i), 0);
	/* What is left is the newest, in order; everything before it is reported lost. */
	got = haecer_ring_read(reader, records, 64, &lost);
	assert_in_range(got, 1, 16);
	for (ssize_t i = 0; i < got; i++) {
		assert_true(records[i].event);
		assert_int_equal(records[i].id, 5);
		assert_int_equal(records[i].value, 100 - (uint64_t)got + (uint64_t)i);
	}
	assert_int_equal((uint64_t)got + lost, 100);
	assert_int_equal(haecer_ring_read(reader, records, 64, &lost), 0);
	assert_int_equal((uint64_t)got + lost, 100);
	haecer_ring_detach(reader);
	haecer_context_close(ctx);
}

/* ---- refusals ---- */

static int attach_denied(void *argument)
{
	struct haecer_ring_reader *reader = NULL;
	struct haecer_conn *conn;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_ring_attach(conn, MAJOR, 4, 0, &reader), -EPERM);
	CHECK(reader == NULL);
	haecer_close(conn);
	return 0;
}

static void test_refusals(void **state)
{
	struct haecer_ring_reader *reader = NULL;
	struct haecer_context *ctx;
	struct haecer_counter *energy;
	struct haecer_conn *conn;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_counter_open_energy(ctx, 0, HAECER_ENERGY_PKG, &energy), 0);
	assert_int_equal(haecer_ring_post(energy, 1, 1), -ENOTCONN);
	assert_non_null(strstr(haecer_error_detail(), "no ring"));
	assert_int_equal(haecer_counter_monitor(energy, MAJOR, 4, 0), 0);
	assert_int_equal(haecer_ring_post(energy, HAECER_RING_EVENT_ID_MAX + 1, 1), -EINVAL);
	assert_int_equal(haecer_ring_post(energy, HAECER_RING_EVENT_ID_MAX, 1), 0);
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_ring_attach(conn, MAJOR, 99, 0, &reader), -ENOENT);
	assert_null(reader);
	haecer_close(conn);
	/* uid 4101 may create rings of majors 1-99 but monitor none. */
	assert_int_equal(run_as(ENERGY_ONLY_UID, ENERGY_ONLY_UID, NULL, 0, attach_denied, NULL),
			 0);
	haecer_counter_free(energy);
	assert_int_equal(haecer_ring_post(energy, 1, 1), -EBADF);
	haecer_context_close(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_events_beside_readings),
		cmocka_unit_test(test_threads_post_while_reading),
		cmocka_unit_test(test_overrun_counts_lost),
		cmocka_unit_test(test_refusals),
	};

	return LIBCLIENT_RUN_GROUP("sandybridge", NULL, NULL, tests);
}
