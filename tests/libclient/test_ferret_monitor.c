/*
 * FERRET monitors (seed 2.2.2): counters attached with setupFerretMonitor(ctr, major, minor)
 * publish every readCounter and simultaneousReadCounter into a ring in msrd's directory, and a
 * separate monitor process that opens the ring by (major, minor) reads exactly the values the
 * reads returned, in order, with the counter's id (energy: its unit exponent) and a
 * CLOCK_MONOTONIC_RAW timestamp taken within the read call. The ring header describes the
 * counter (name, kind, unit exponent, package, CPU) and holds 4096 records (the seed's 3000
 * rounded up, as the counter's info says). A second attach is
 * -EEXIST; an invalid counter is -EBADF and creates no ring.
 */
#include <limits.h>
#include <time.h>

#include "shm/ring.h"
#include "tests/lib/test_check.h"
#include "tests/libclient/libclient_test.h"

#define MAJOR 7
#define READS 300

struct expected {
	uint16_t minor;
	struct haecer_counter_info info;
	size_t count;
	uint64_t values[2 * READS];
	uint64_t before[2 * READS], after[2 * READS];
};

static struct expected instructions = {.minor = 1}, energy = {.minor = 2};

static int check_header(const struct ring_info *ring, const struct expected *expected)
{
	const struct ring_counter_info *counter = &ring->counters[0];

	CHECK_EQ(ring->capacity, HAECER_MONITOR_DEFAULT_CAPACITY);
	CHECK_EQ(ring->clock, RING_CLOCK_MONOTONIC_RAW);
	CHECK_EQ(ring->producer_pid, getppid());
	CHECK_EQ(ring->counter_count, 1);
	CHECK(strcmp(counter->name, expected->info.name) == 0);
	CHECK_EQ(counter->id, expected->info.id);
	CHECK_EQ(counter->unit_exponent, expected->info.unit_exponent);
	CHECK_EQ(counter->cpu, expected->info.cpu);
	CHECK_EQ(counter->package, expected->info.package);
	CHECK_EQ(counter->kind, expected->info.kind == HAECER_COUNTER_ENERGY ? RING_COUNTER_ENERGY
									     : RING_COUNTER_FIXED);
	return 0;
}

static int check_ring(struct haecer_conn *conn, const struct expected *expected)
{
	static struct ring_record records[2 * READS + 1];
	struct ring_consumer consumer;
	struct ring_info ring;
	uint64_t lost = 0;
	ssize_t got;
	int fd;

	CHECK_EQ(haecer_ring_open(conn, MAJOR, expected->minor, 0, NULL, &fd), 0);
	CHECK_EQ(ring_consumer_attach(&consumer, fd), 0);
	close(fd);
	ring_consumer_info(&consumer, &ring);
	CHECK_EQ(check_header(&ring, expected), 0);
	got = ring_consume(&consumer, records, 2 * READS + 1, &lost);
	CHECK_EQ(got, expected->count);
	CHECK_EQ(lost, 0);
	for (size_t i = 0; i < expected->count; i++) {
		CHECK_EQ(records[i].value, expected->values[i]);
		CHECK_EQ(records[i].counter_id, expected->info.id);
		CHECK_EQ(records[i].unit_exponent, expected->info.unit_exponent);
		CHECK(records[i].timestamp >= expected->before[i]);
		CHECK(records[i].timestamp <= expected->after[i]);
	}
	ring_consumer_detach(&consumer);
	return 0;
}

/* The monitor: another process, its own connection, nothing but (major, minor). */
static int monitor(void *argument)
{
	struct haecer_conn *conn;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(check_ring(conn, &instructions), 0);
	CHECK_EQ(check_ring(conn, &energy), 0);
	haecer_close(conn);
	return 0;
}

static void note(struct expected *expected, uint64_t value, uint64_t before, uint64_t after)
{
	expected->values[expected->count] = value;
	expected->before[expected->count] = before;
	expected->after[expected->count++] = after;
}

static void attach(PerfCounter *ctr, struct expected *expected)
{
	assert_true(ctr->valid);
	assert_int_equal(setupFerretMonitor(ctr, MAJOR, expected->minor), 0);
	assert_int_equal(haecer_counter_info(haecer_perf_counter(ctr), &expected->info), 0);
	assert_true(expected->info.monitored);
	/* The seed's 3000-entry list, rounded up to a power of two. */
	assert_int_equal(expected->info.ring_capacity, HAECER_MONITOR_DEFAULT_CAPACITY);
	assert_int_equal(setupFerretMonitor(ctr, MAJOR, expected->minor), -EEXIST);
}

static void test_monitor_reads_what_was_read(void **state)
{
	PerfCounter counters[2] = {setupFFCounter(INST_RETIRED_ANY, 0),
				   setupEnergyCounter(RAPL_PKG)};
	unsigned long long both[2];
	uint64_t before, after;

	(void)state;
	attach(&counters[0], &instructions);
	attach(&counters[1], &energy);
	for (int i = 0; i < READS; i++) {
		assert_int_equal(haecer_sim_advance(sim, 137 * 1000 * (uint64_t)(i % 11), NULL), 0);
		before = clock_monotonic_raw_ns();
		uint64_t value = readCounter(&counters[i % 2]);
		after = clock_monotonic_raw_ns();
		note(i % 2 ? &energy : &instructions, value, before, after);
		before = clock_monotonic_raw_ns();
		simultaneousReadCounter(counters, both, 2);
		after = clock_monotonic_raw_ns();
		note(&instructions, both[0], before, after);
		note(&energy, both[1], before, after);
	}
	assert_int_equal(run_as(0, 0, NULL, 0, monitor, NULL), 0);
	freeCounter(&counters[0]);
	freeCounter(&counters[1]);
}

static void test_invalid_counter_gets_no_ring(void **state)
{
	PerfCounter invalid = setupEnergyCounter(RAPL_DRAM); /* not on sandybridge */
	struct haecer_ring_entry entries[8];

	(void)state;
	assert_false(invalid.valid);
	assert_int_equal(setupFerretMonitor(&invalid, MAJOR, 9), -EBADF);
	assert_int_equal(setupFerretMonitor(NULL, MAJOR, 9), -EBADF);
	int count = haecer_ring_list(sim, entries, 8);
	assert_true(count >= 0);
	for (int i = 0; i < count && i < 8; i++)
		assert_false(entries[i].major == MAJOR && entries[i].minor == 9);
}

int main(void)
{
	const char *arguments[] = {"--sim-virtual-time", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_monitor_reads_what_was_read, libclient_full_load),
		cmocka_unit_test(test_invalid_counter_gets_no_ring),
	};

	return LIBCLIENT_RUN_GROUP("sandybridge", NULL, arguments, tests);
}
