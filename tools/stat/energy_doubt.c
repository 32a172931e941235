/*
 * tools/stat/energy_doubt.c — what haecer-stat's energy totals can be off by, and what measuring
 * them cost (issue 23).
 *
 * A run's energy is a difference of two readings of each energy counter (one at the start, one
 * at the end, each a set read through msrd). libhaecer's haecer_energy_span states the bound of
 * such a difference (the same as haecer_counter_read_energy's update_joules: each reading is as
 * old as an update interval, its lateness and the read's round trip, at the domain's maximum
 * power or the power over the run if higher) and what measuring cost: msrd's CPU for the
 * counter's page in the run (when one is held) and the two reads' round trips, a bound. A
 * metric sums its counters (packages, dies): their bounds add, as their errors may.
 */
#include "tools/stat/stat.h"
#include "common/json.h"

#include <math.h>
#include <string.h>

static bool wants_marks(const struct stat_metric *metric)
{
	return metric->kind == STAT_METRIC_ENERGY && metric->state == STAT_COUNTED;
}

int stat_energy_marks_start(struct stat_session *session)
{
	size_t at = 0;

	for (size_t i = 0; i < session->metric_count; i++) {
		struct stat_metric *metric = &session->metrics[i];

		for (size_t j = 0; j < metric->count; j++, at++) {
			if (!wants_marks(metric))
				continue;
			/* A counter whose mark fails (its context gone) states no +- for the run:
			 * read_ns 0 says so. */
			if (haecer_energy_mark(metric->counters[j], session->values[at],
					       session->read_before[at], session->read_after[at],
					       &metric->marks[j]) < 0)
				metric->marks[j].read_ns = 0;
		}
	}
	return 0;
}

/* One run's span of one counter, added to its metric's run +- and cost; false when not known. */
static bool add_span(struct stat_metric *metric, size_t j, const struct haecer_energy_mark *end,
		     double *uncertainty)
{
	struct haecer_energy_span span;

	if (metric->marks[j].read_ns == 0 ||
	    haecer_energy_span(metric->counters[j], &metric->marks[j], end, &span) < 0)
		return false;
	*uncertainty += span.uncertainty_joules;
	metric->measurement_cpu_ns += span.measurement_cpu_ns;
	metric->measurement_j += span.measurement_joules;
	metric->measurement_doubt_j += span.measurement_uncertainty_joules;
	metric->measurement_pages_known |= span.measurement_pages_known;
	return true;
}

int stat_energy_marks_stop(struct stat_session *session)
{
	size_t at = 0;

	for (size_t i = 0; i < session->metric_count; i++) {
		struct stat_metric *metric = &session->metrics[i];
		double uncertainty = 0.0;
		bool all = true;

		for (size_t j = 0; j < metric->count; j++, at++) {
			struct haecer_energy_mark end;

			if (!wants_marks(metric))
				continue;
			all &= haecer_energy_mark(metric->counters[j], session->values[at],
						  session->read_before[at], session->read_after[at],
						  &end) == 0 &&
			       add_span(metric, j, &end, &uncertainty);
		}
		/* A run some counter of which has no +- has none: NAN, left out of the mean. */
		if (wants_marks(metric))
			metric->uncertainty[metric->uncertainty_count++] = all ? uncertainty : NAN;
	}
	return 0;
}

/* The mean stated +- of a run; NAN when no run had one. */
static double mean_uncertainty(const struct stat_metric *metric)
{
	double sum = 0.0;
	size_t count = 0;

	for (size_t r = 0; r < metric->uncertainty_count; r++) {
		if (isnan(metric->uncertainty[r]))
			continue;
		sum += metric->uncertainty[r];
		count++;
	}
	return count > 0 ? sum / (double)count : NAN;
}

static size_t runs_of(const struct stat_metric *metric)
{
	return metric->uncertainty_count > 0 ? metric->uncertainty_count : 1;
}

void stat_energy_doubt_text(FILE *out, const struct stat_session *session)
{
	bool header = false;

	for (size_t i = 0; i < session->metric_count; i++) {
		const struct stat_metric *metric = &session->metrics[i];
		double runs;

		if (!wants_marks(metric) || metric->uncertainty_count == 0)
			continue;
		if (!header)
			fprintf(out, "\n Energy per run: what it can be off by (a difference of two "
				"register readings),\n and what measuring cost (msrd's CPU for it, "
				"the energy that drew, in the total):\n");
		header = true;
		runs = (double)runs_of(metric);
		fprintf(out, "%18s ± %.6f J  measurement %.6f ± %.6f J (msrd CPU %.3f ms%s)\n",
			metric->name, mean_uncertainty(metric), metric->measurement_j / runs,
			metric->measurement_doubt_j / runs,
			(double)metric->measurement_cpu_ns / runs / 1e6,
			metric->measurement_pages_known ? ": its page and round trips"
							: ": round trips, a bound");
	}
}

void stat_energy_doubt_json(FILE *out, const struct stat_metric *metric)
{
	double runs = (double)runs_of(metric);

	if (!wants_marks(metric) || metric->uncertainty_count == 0)
		return;
	fprintf(out, ", \"uncertainty\": ");
	json_write_number(out, mean_uncertainty(metric));
	fprintf(out, ", \"measurement_cpu_ns\": %.0f, \"measurement_joules\": ",
		(double)metric->measurement_cpu_ns / runs);
	json_write_number(out, metric->measurement_j / runs);
	fprintf(out, ", \"measurement_uncertainty_joules\": ");
	json_write_number(out, metric->measurement_doubt_j / runs);
	fprintf(out, ", \"measurement_pages_known\": %s",
		metric->measurement_pages_known ? "true" : "false");
}

void stat_energy_doubt_csv(FILE *out, const struct stat_options *options,
			   const struct stat_session *session, const struct stat_metric *metric)
{
	const char *sep = options->separator;
	double runs = (double)runs_of(metric);
	char aggregate[64] = "";

	if (!wants_marks(metric) || metric->uncertainty_count == 0)
		return;
	/* --per-socket and the like: the totals' rows are of every package in scope. */
	if (options->aggregate != STAT_SUMMED)
		snprintf(aggregate, sizeof(aggregate), "all%s%u%s", sep, session->scope.cpu_count,
			 sep);
	/* perf's seven fields: value, unit, event, run time, percentage, metric, metric unit. */
	fprintf(out, "%s%.9f%sJoules%s%s:uncertainty%s%s%s%s\n", aggregate,
		mean_uncertainty(metric), sep, sep, metric->name, sep, sep, sep, sep);
	fprintf(out, "%s%.9f%sJoules%s%s:measurement%s%s%s%.6f%sms msrd CPU\n", aggregate,
		metric->measurement_j / runs, sep, sep, metric->name, sep, sep, sep,
		(double)metric->measurement_cpu_ns / runs / 1e6, sep);
}
