/*
 * The arithmetic of haecer-stat -r (tools/stat/stats.c, compiled into this test): mean, sample
 * standard deviation (n - 1), standard error, relative spread and extremes for inputs whose
 * answers are known by hand, and stability where the naive sum of squares cancels; and perf
 * stat's percentage of running time of a multiplexed event, which this machine (no hardware
 * PMU) cannot produce for real: the note a scaled count gets, none for one that ran throughout.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tools/stat/stats.c"

static void assert_near(double actual, double expected)
{
	double scale = fabs(expected) > 1.0 ? fabs(expected) : 1.0;

	if (fabs(actual - expected) > 1e-12 * scale)
		fail_msg("%.17g, expected %.17g", actual, expected);
}

static void test_textbook_sample(void **state)
{
	/* Mean 5; squared deviations sum to 32; sample variance 32/7. */
	const double samples[] = { 2, 4, 4, 4, 5, 5, 7, 9 };
	struct stat_summary summary;

	(void)state;
	stat_summarize(samples, 8, &summary);
	assert_int_equal(summary.count, 8);
	assert_near(summary.mean, 5.0);
	assert_near(summary.stddev, sqrt(32.0 / 7.0));
	assert_near(summary.stderr_mean, sqrt(32.0 / 7.0) / sqrt(8.0));
	assert_near(summary.relative_percent, 100.0 * sqrt(32.0 / 7.0) / 5.0);
	assert_near(summary.min, 2.0);
	assert_near(summary.max, 9.0);
}

static void test_one_sample_has_no_spread(void **state)
{
	const double sample = 19.5;
	struct stat_summary summary;

	(void)state;
	stat_summarize(&sample, 1, &summary);
	assert_near(summary.mean, 19.5);
	assert_near(summary.stddev, 0.0);
	assert_near(summary.stderr_mean, 0.0);
	assert_near(summary.relative_percent, 0.0);
	assert_near(summary.min, 19.5);
	assert_near(summary.max, 19.5);
}

static void test_large_close_values(void **state)
{
	/* Instruction counts of repeated runs: 1e12 + {1, 2, 3}. Mean 1e12 + 2, stddev exactly 1;
	 * summing squares (1e24) would lose every digit of the spread. */
	const double samples[] = { 1e12 + 1, 1e12 + 2, 1e12 + 3 };
	struct stat_summary summary;

	(void)state;
	stat_summarize(samples, 3, &summary);
	assert_near(summary.mean, 1e12 + 2);
	assert_near(summary.stddev, 1.0);
	assert_near(summary.relative_percent, 100.0 / (1e12 + 2));
}

static void test_zero_mean_and_negatives(void **state)
{
	const double samples[] = { -1, 1 };
	struct stat_summary summary;

	(void)state;
	stat_summarize(samples, 2, &summary);
	assert_near(summary.mean, 0.0);
	assert_near(summary.stddev, sqrt(2.0));
	/* No relative spread of a zero mean (it would be infinite). */
	assert_near(summary.relative_percent, 0.0);
	assert_near(summary.min, -1.0);
	assert_near(summary.max, 1.0);
}

static void test_no_samples(void **state)
{
	struct stat_summary summary;

	(void)state;
	memset(&summary, 0xff, sizeof(summary));
	stat_summarize(NULL, 0, &summary);
	assert_int_equal(summary.count, 0);
	assert_near(summary.mean, 0.0);
	assert_near(summary.stddev, 0.0);
}

static void test_running_percentage(void **state)
{
	char note[24];

	(void)state;
	/* Enabled 8 ms, on a counter 5 ms of them: perf stat prints (62.50%). */
	assert_near(stat_running_percent(8e6, 5e6), 62.5);
	stat_running_note(8e6, 5e6, note, sizeof(note));
	assert_string_equal(note, "(62.50%)");
	stat_running_note(3e6, 1e6, note, sizeof(note));
	assert_string_equal(note, "(33.33%)");
	/* Ran whenever enabled, or never enabled: 100%, unscaled, no note. */
	assert_near(stat_running_percent(8e6, 8e6), 100.0);
	assert_near(stat_running_percent(0, 0), 100.0);
	stat_running_note(8e6, 8e6, note, sizeof(note));
	assert_string_equal(note, "");
	stat_running_note(0, 0, note, sizeof(note));
	assert_string_equal(note, "");
	/* Enabled but never on a counter: 0%, as perf says of an event that never ran. */
	stat_running_note(8e6, 0, note, sizeof(note));
	assert_string_equal(note, "(0.00%)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_textbook_sample),
		cmocka_unit_test(test_one_sample_has_no_spread),
		cmocka_unit_test(test_large_close_values),
		cmocka_unit_test(test_zero_mean_and_negatives),
		cmocka_unit_test(test_no_samples),
		cmocka_unit_test(test_running_percentage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
