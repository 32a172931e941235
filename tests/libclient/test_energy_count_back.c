/*
 * A blurred closing update is placed by counting whole updates back from a sharp one
 * (libclient/haecer_energy.c, closing_estimate): the count comes from the energy between the two
 * at the measured power, rounded, and is used only when it lands in the blurred update's
 * bracket. haecer__update_count_is_ambiguous says when a count one more or one less would land
 * there too, within the updates' jitter (50 us): then the rounding, not the bracket, would
 * choose, and a power that changed between the updates chose a whole update wrong (a 2.5 ms
 * region on a busy host, its energy one update short of its span, 1.18 x its +-). At 1 GHz one
 * tick is a nanosecond:
 *  - a bracket narrower than an update less twice the jitter holds one count;
 *  - the page sampler's bracket, about an update wide, holds two when the count lands near one
 *    of its ends, one when it lands in its middle;
 *  - the jitter counts: a neighbour 30 us outside the bracket is still a candidate;
 *  - a count of one has only the neighbour above it (no update is counted back zero times),
 *    and a neighbour that would lie before the clock's start is none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "libclient/haecer_internal.h"

#define TSC_HZ 1000000000ull /* a tick is a nanosecond */
#define US 1000ull
#define MS 1000000ull

/* The sharp update counted back from, well after the clock's start. */
#define SHARP (100 * MS)

static bool ambiguous(uint64_t count, uint64_t lo, uint64_t hi)
{
	return haecer__update_count_is_ambiguous(TSC_HZ, SHARP, count, lo, hi);
}

static void test_a_narrow_bracket_holds_one_count(void **state)
{
	(void)state;
	/* Count 3 lands at SHARP - 3 ms, inside a 400 us bracket around it. */
	assert_false(ambiguous(3, SHARP - 3 * MS - 200 * US, SHARP - 3 * MS + 200 * US));
	/* 900 us wide less the jitter on both sides: the neighbours stay outside. */
	assert_false(ambiguous(3, SHARP - 3 * MS - 440 * US, SHARP - 3 * MS + 440 * US));
}

static void test_an_update_wide_bracket_can_hold_two(void **state)
{
	(void)state;
	/* 1 ms wide, count 3 near its upper end: count 4 lands near its lower end. */
	assert_true(ambiguous(3, SHARP - 3 * MS - 980 * US, SHARP - 3 * MS + 20 * US));
	/* Count 3 near its lower end: count 2 lands near its upper end. */
	assert_true(ambiguous(3, SHARP - 3 * MS - 20 * US, SHARP - 3 * MS + 980 * US));
	/* Count 3 in its middle: both neighbours 500 us outside, beyond the jitter. */
	assert_false(ambiguous(3, SHARP - 3 * MS - 500 * US, SHARP - 3 * MS + 500 * US));
}

static void test_the_jitter_widens_the_bracket(void **state)
{
	(void)state;
	/* Count 4 lands 30 us below the bracket: an update may come 50 us off its grid. */
	assert_true(ambiguous(3, SHARP - 3 * MS - 970 * US, SHARP - 3 * MS + 10 * US));
	/* 60 us below: outside the jitter. */
	assert_false(ambiguous(3, SHARP - 3 * MS - 940 * US, SHARP - 3 * MS + 10 * US));
}

static void test_the_ends_of_the_count(void **state)
{
	(void)state;
	/* Count 1 (the update right before the sharp one): count 0 is no candidate even where
	 * the bracket reaches the sharp update itself; count 2 is, near the lower end. */
	assert_false(ambiguous(1, SHARP - 1 * MS - 100 * US, SHARP));
	assert_true(ambiguous(1, SHARP - 2 * MS, SHARP - 1 * MS + 10 * US));
	/* A neighbour before the clock's start is none: counted back from 1.5 ms, count 1
	 * lands at 0.5 ms and count 2 would lie before 0. */
	assert_false(haecer__update_count_is_ambiguous(TSC_HZ, 1500 * US, 1, 0, 1 * MS));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_narrow_bracket_holds_one_count),
		cmocka_unit_test(test_an_update_wide_bracket_can_hold_two),
		cmocka_unit_test(test_the_jitter_widens_the_bracket),
		cmocka_unit_test(test_the_ends_of_the_count),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
