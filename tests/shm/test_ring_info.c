/*
 * What a ring tells its readers and how positions behave, single process, one case per test:
 * the header snapshot (ring_info_from_fd, ring_consumer_info) reports what the creator asked
 * for; records round-trip bit for bit; seek_newest/seek_oldest/backlog; a reattached
 * single producer continues at head; a ring formatted in ordinary memory works without a
 * descriptor; ring_producer_alive follows the process.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <time.h>

#include "tests/shm/ring_testing.h"
#include "common/clock.h"

static struct ring_params energy_params(void)
{
	struct ring_params params = {
		.major = 2,
		.minor = 9,
		.instance = 77,
		.capacity = 8,
		.flags = RING_SINGLE_PRODUCER,
		.clock = RING_CLOCK_TSC,
		.tsc_hz = 2100000000,
		.producer_pid = 4242,
		.counter_count = 2,
		.counters = {
			{.name = "RAPL_PKG", .id = 1, .kind = RING_COUNTER_ENERGY,
			 .unit_exponent = 14, .package = 0, .cpu = -1},
			{.name = "INSTRUCTIONS", .id = 2, .kind = RING_COUNTER_FIXED,
			 .package = -1, .cpu = 1},
		},
	};
	return params;
}

struct test_ring {
	int fd;
	struct ring_producer producer;
	struct ring_consumer consumer;
};

static void open_ring(struct test_ring *ring, const struct ring_params *params)
{
	int readonly;

	assert_int_equal(ring_memfd_create(params, &ring->fd), 0);
	assert_int_equal(ring_producer_attach(&ring->producer, ring->fd), 0);
	readonly = ring_reopen_readonly(ring->fd);
	assert_true(readonly >= 0);
	assert_int_equal(ring_consumer_attach(&ring->consumer, readonly), 0);
	close(readonly);
}

static void close_ring(struct test_ring *ring)
{
	ring_consumer_detach(&ring->consumer);
	ring_producer_detach(&ring->producer);
	close(ring->fd);
}

static void push_sequence(struct ring_producer *producer, uint64_t first, uint64_t count)
{
	for (uint64_t i = first; i < first + count; i++) {
		struct ring_record record = ring_test_record(0, i);

		assert_int_equal(ring_push(producer, &record), 0);
	}
}

/* Consumes and asserts exactly the records first .. first + count - 1 arrive, nothing lost. */
static void expect_sequence(struct ring_consumer *consumer, uint64_t first, uint64_t count)
{
	struct ring_record records[16];
	uint64_t lost = 0;

	assert_int_equal(ring_consume(consumer, records, 16, &lost), count);
	assert_int_equal(lost, 0);
	for (uint64_t i = 0; i < count; i++)
		assert_int_equal(records[i].value, first + i);
}

static void assert_info_matches(const struct ring_info *info, const struct ring_params *params)
{
	assert_int_equal(info->major, params->major);
	assert_int_equal(info->minor, params->minor);
	assert_int_equal(info->instance, params->instance);
	assert_int_equal(info->capacity, params->capacity);
	assert_int_equal(info->record_size, 32);
	assert_int_equal(info->flags, params->flags);
	assert_int_equal(info->clock, params->clock);
	assert_int_equal(info->tsc_hz, params->tsc_hz);
	assert_int_equal(info->producer_pid, params->producer_pid);
	assert_int_equal(info->counter_count, params->counter_count);
	assert_memory_equal(info->counters, params->counters,
			    params->counter_count * sizeof(params->counters[0]));
}

static void test_header_reports_params(void **state)
{
	struct ring_params params = energy_params();
	uint64_t before = clock_monotonic_raw_ns();
	struct test_ring ring;
	struct ring_info info;

	(void)state;
	open_ring(&ring, &params);
	assert_int_equal(ring_info_from_fd(ring.fd, &info), 0);
	assert_info_matches(&info, &params);
	assert_true(info.created_ns >= before && info.created_ns <= clock_monotonic_raw_ns());
	ring_consumer_info(&ring.consumer, &info);
	assert_info_matches(&info, &params);

	push_sequence(&ring.producer, 0, 3);
	assert_int_equal(ring_info_from_fd(ring.fd, &info), 0);
	assert_int_equal(info.pushed, 3);
	assert_int_equal(info.producer_dropped, 0);
	close_ring(&ring);
}

static void test_producer_pid_defaults_to_creator(void **state)
{
	struct ring_params params = ring_test_params(8, 0);
	struct ring_info info;
	int fd;

	(void)state;
	assert_int_equal(ring_memfd_create(&params, &fd), 0);
	assert_int_equal(ring_info_from_fd(fd, &info), 0);
	assert_int_equal(info.producer_pid, getpid());
	assert_true(ring_producer_alive(&info));
	close(fd);
}

static void test_records_round_trip(void **state)
{
	struct ring_params params = energy_params();
	const struct ring_record sent[] = {
		{.value = UINT64_MAX, .timestamp = 0, .counter_id = UINT32_MAX,
		 .unit_exponent = INT16_MIN, .flags = UINT16_MAX},
		{.value = 0, .timestamp = UINT64_MAX, .counter_id = 0, .unit_exponent = -1,
		 .flags = 0},
		{.value = 123456789, .timestamp = 987654321, .counter_id = 1, .unit_exponent = 14,
		 .flags = 0x8001},
	};
	struct ring_record received[4];
	struct test_ring ring;

	(void)state;
	open_ring(&ring, &params);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(ring_push(&ring.producer, &sent[i]), 0);
	assert_int_equal(ring_consume(&ring.consumer, received, 4, NULL), 3);
	assert_memory_equal(received, sent, sizeof(sent));
	close_ring(&ring);
}

static void test_seek_and_backlog(void **state)
{
	struct ring_params params = ring_test_params(8, RING_SINGLE_PRODUCER);
	struct test_ring ring;

	(void)state;
	open_ring(&ring, &params);
	push_sequence(&ring.producer, 0, 10);
	ring_consumer_seek_newest(&ring.consumer);
	assert_int_equal(ring_consumer_backlog(&ring.consumer), 0);
	push_sequence(&ring.producer, 10, 5);
	assert_int_equal(ring_consumer_backlog(&ring.consumer), 5);
	expect_sequence(&ring.consumer, 10, 5);

	ring_consumer_seek_oldest(&ring.consumer);
	assert_int_equal(ring.consumer.position, 15 - 8);
	assert_int_equal(ring_consumer_backlog(&ring.consumer), 8);
	expect_sequence(&ring.consumer, 7, 8);
	close_ring(&ring);
}

static void test_zero_max_reads_nothing(void **state)
{
	struct ring_params params = ring_test_params(8, 0);
	struct test_ring ring;
	uint64_t lost = 0;

	(void)state;
	open_ring(&ring, &params);
	push_sequence(&ring.producer, 0, 3);
	assert_int_equal(ring_consume(&ring.consumer, NULL, 0, &lost), 0);
	assert_int_equal(ring.consumer.position, 0);
	expect_sequence(&ring.consumer, 0, 3);
	close_ring(&ring);
}

static void test_reattached_producer_continues(void **state)
{
	struct ring_params params = ring_test_params(16, RING_SINGLE_PRODUCER);
	struct test_ring ring;

	(void)state;
	open_ring(&ring, &params);
	push_sequence(&ring.producer, 0, 3);
	ring_producer_detach(&ring.producer);
	assert_int_equal(ring_producer_attach(&ring.producer, ring.fd), 0);
	push_sequence(&ring.producer, 3, 2);
	expect_sequence(&ring.consumer, 0, 5);
	close_ring(&ring);
}

/* ring_format must clear whatever the memory held: stale words could pose as records. */
static void test_ring_in_plain_memory(void **state)
{
	struct ring_params params = ring_test_params(16, 0);
	struct ring_producer producer;
	struct ring_consumer consumer;
	void *memory = NULL;
	size_t bytes;

	(void)state;
	assert_int_equal(ring_bytes_for(16, &bytes), 0);
	assert_int_equal(posix_memalign(&memory, 4096, bytes), 0);
	memset(memory, 0xaa, bytes);
	assert_int_equal(ring_format(memory, bytes, &params), 0);
	assert_int_equal(ring_producer_use(&producer, memory, bytes), 0);
	assert_int_equal(ring_consumer_use(&consumer, memory, bytes), 0);
	expect_sequence(&consumer, 0, 0);
	push_sequence(&producer, 0, 4);
	expect_sequence(&consumer, 0, 4);
	ring_consumer_detach(&consumer);
	ring_producer_detach(&producer);
	free(memory);
}

static void test_producer_alive_follows_process(void **state)
{
	struct ring_info info = {.producer_pid = getpid()};
	pid_t child;

	(void)state;
	assert_true(ring_producer_alive(&info));
	child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	assert_int_equal(waitpid(child, NULL, 0), child);
	info.producer_pid = child;
	assert_false(ring_producer_alive(&info));
	info.producer_pid = 0;
	assert_false(ring_producer_alive(&info));
	info.producer_pid = -1;
	assert_false(ring_producer_alive(&info));
	assert_false(ring_producer_alive(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header_reports_params),
		cmocka_unit_test(test_producer_pid_defaults_to_creator),
		cmocka_unit_test(test_records_round_trip),
		cmocka_unit_test(test_seek_and_backlog),
		cmocka_unit_test(test_zero_max_reads_nothing),
		cmocka_unit_test(test_reattached_producer_continues),
		cmocka_unit_test(test_ring_in_plain_memory),
		cmocka_unit_test(test_producer_alive_follows_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
