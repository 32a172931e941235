/*
 * tools/stat/stats.c — the statistics of repeated runs: mean, sample standard deviation, its
 * relative size, the standard error of the mean, extremes; and perf stat's percentage of
 * running time of an event the kernel multiplexed.
 *
 * Welford's update keeps the variance exact to rounding even when the samples are large and
 * close together (energy totals, instruction counts), where sum-of-squares would cancel.
 */
#include "tools/stat/stat.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void stat_summarize(const double *samples, size_t count, struct stat_summary *out)
{
	double mean = 0.0, squares = 0.0;

	memset(out, 0, sizeof(*out));
	if (count == 0)
		return;
	out->count = count;
	out->min = out->max = samples[0];
	for (size_t i = 0; i < count; i++) {
		double delta = samples[i] - mean;
		mean += delta / (double)(i + 1);
		squares += delta * (samples[i] - mean);
		if (samples[i] < out->min)
			out->min = samples[i];
		if (samples[i] > out->max)
			out->max = samples[i];
	}
	out->mean = mean;
	out->stddev = count > 1 ? sqrt(squares / (double)(count - 1)) : 0.0;
	out->stderr_mean = out->stddev / sqrt((double)count);
	out->relative_percent = mean != 0.0 ? 100.0 * out->stddev / fabs(mean) : 0.0;
}

double stat_running_percent(double enabled, double running)
{
	return enabled > 0 && running < enabled ? 100.0 * running / enabled : 100.0;
}

void stat_running_note(double enabled, double running, char *out, size_t size)
{
	if (size == 0)
		return;
	out[0] = '\0';
	if (enabled > 0 && running < enabled)
		snprintf(out, size, "(%.2f%%)", stat_running_percent(enabled, running));
}
