/*
 * Bad parameters are refused with -EINVAL before anything is created, one case per test:
 * capacity 0, 1, not a power of two, too big; too many counters; an unterminated counter name;
 * an unknown clock or flag; a TSC clock without its frequency; format into memory of the wrong
 * size. The limits themselves are accepted.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tests/shm/ring_testing.h"

/* Refused by the check and by creation, which must leave *fd_out alone. */
static void assert_refused(const struct ring_params *params)
{
	int fd = -1;

	assert_int_equal(ring_params_check(params), -EINVAL);
	assert_int_equal(ring_memfd_create(params, &fd), -EINVAL);
	assert_int_equal(fd, -1);
}

static void assert_capacity_refused(uint32_t capacity)
{
	struct ring_params params = ring_test_params(capacity, 0);
	size_t bytes = 12345;

	assert_refused(&params);
	assert_int_equal(ring_bytes_for(capacity, &bytes), -EINVAL);
	assert_int_equal(bytes, 12345);
}

static void test_capacity_zero(void **state)
{
	(void)state;
	assert_capacity_refused(0);
}

static void test_capacity_one(void **state)
{
	(void)state;
	assert_capacity_refused(1);
}

static void test_capacity_not_power_of_two(void **state)
{
	(void)state;
	assert_capacity_refused(3);
	assert_capacity_refused(1000);
	assert_capacity_refused((1u << 20) + 1);
	assert_capacity_refused(RING_MAX_CAPACITY - 1);
}

static void test_capacity_too_big(void **state)
{
	(void)state;
	assert_capacity_refused(RING_MAX_CAPACITY * 2);
	assert_capacity_refused(1u << 31);
	assert_capacity_refused(UINT32_MAX);
}

static void test_capacity_limits_accepted(void **state)
{
	struct ring_params params = ring_test_params(RING_MIN_CAPACITY, 0);
	size_t bytes;

	(void)state;
	assert_int_equal(ring_params_check(&params), 0);
	assert_int_equal(ring_bytes_for(RING_MIN_CAPACITY, &bytes), 0);
	assert_int_equal(bytes, 4096 + RING_MIN_CAPACITY * 32);
	params.capacity = RING_MAX_CAPACITY;
	assert_int_equal(ring_params_check(&params), 0);
	assert_int_equal(ring_bytes_for(RING_MAX_CAPACITY, &bytes), 0);
	assert_int_equal(bytes, 4096 + (size_t)RING_MAX_CAPACITY * 32);
}

static void test_too_many_counters(void **state)
{
	struct ring_params params = ring_test_params(64, 0);

	(void)state;
	params.counter_count = RING_MAX_COUNTERS;
	assert_int_equal(ring_params_check(&params), 0);
	params.counter_count = RING_MAX_COUNTERS + 1;
	assert_refused(&params);
	params.counter_count = UINT32_MAX;
	assert_refused(&params);
}

static void test_unterminated_counter_name(void **state)
{
	struct ring_params params = ring_test_params(64, 0);

	(void)state;
	params.counter_count = 2;
	memset(params.counters[1].name, 'x', RING_NAME_MAX);
	assert_refused(&params);
	/* A name beyond counter_count is not part of the ring and not checked. */
	params.counter_count = 1;
	assert_int_equal(ring_params_check(&params), 0);
}

static void test_unknown_clock(void **state)
{
	struct ring_params params = ring_test_params(64, 0);

	(void)state;
	params.clock = 0;
	assert_refused(&params);
	params.clock = 3;
	assert_refused(&params);
}

static void test_tsc_clock_needs_frequency(void **state)
{
	struct ring_params params = ring_test_params(64, 0);

	(void)state;
	params.clock = RING_CLOCK_TSC;
	assert_refused(&params);
	params.tsc_hz = 2100000000;
	assert_int_equal(ring_params_check(&params), 0);
}

static void test_unknown_flag(void **state)
{
	struct ring_params params = ring_test_params(64, 0x2);

	(void)state;
	assert_refused(&params);
}

static void test_missing_arguments(void **state)
{
	struct ring_params params = ring_test_params(64, 0);
	struct ring_info info;

	(void)state;
	assert_int_equal(ring_params_check(NULL), -EINVAL);
	assert_int_equal(ring_memfd_create(NULL, &(int){-1}), -EINVAL);
	assert_int_equal(ring_memfd_create(&params, NULL), -EINVAL);
	assert_int_equal(ring_bytes_for(64, NULL), -EINVAL);
	assert_int_equal(ring_reopen_readonly(-1), -EBADF);
	assert_int_equal(ring_info_from_fd(-1, &info), -EBADF);
	assert_int_equal(ring_consumer_attach(NULL, 0), -EINVAL);
	assert_int_equal(ring_producer_attach(NULL, 0), -EINVAL);
	assert_int_equal(ring_push(NULL, &(struct ring_record){0}), -EINVAL);
	assert_int_equal(ring_consume(NULL, NULL, 0, NULL), -EINVAL);
}

static void test_format_wrong_size(void **state)
{
	struct ring_params params = ring_test_params(64, 0);
	size_t bytes;
	char *memory;

	(void)state;
	assert_int_equal(ring_bytes_for(64, &bytes), 0);
	memory = calloc(1, bytes + 4096);
	assert_non_null(memory);
	assert_int_equal(ring_format(memory, bytes - 1, &params), -EMSGSIZE);
	assert_int_equal(ring_format(memory, bytes + 4096, &params), -EMSGSIZE);
	assert_int_equal(ring_format(NULL, bytes, &params), -EINVAL);
	params.capacity = 63;
	assert_int_equal(ring_format(memory, bytes, &params), -EINVAL);
	/* Nothing was written by any refused call. */
	for (size_t i = 0; i < bytes + 4096; i++)
		assert_int_equal(memory[i], 0);
	free(memory);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capacity_zero),
		cmocka_unit_test(test_capacity_one),
		cmocka_unit_test(test_capacity_not_power_of_two),
		cmocka_unit_test(test_capacity_too_big),
		cmocka_unit_test(test_capacity_limits_accepted),
		cmocka_unit_test(test_too_many_counters),
		cmocka_unit_test(test_unterminated_counter_name),
		cmocka_unit_test(test_unknown_clock),
		cmocka_unit_test(test_tsc_clock_needs_frequency),
		cmocka_unit_test(test_unknown_flag),
		cmocka_unit_test(test_missing_arguments),
		cmocka_unit_test(test_format_wrong_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
