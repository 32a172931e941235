/*
 * tools/stat/report_csv.c — haecer-stat -x SEP, perf stat's CSV: "#" comment lines (the
 * simulated marker, where things were counted), then one line per metric (or per socket, die
 * or CPU) with perf's fields: counter-value, unit, event, run-time (ns), percentage of running
 * time, metric value, metric unit. -I -x prints the same lines after each slice's time.
 */
#include "tools/stat/report.h"

#include <string.h>

void report_csv_comments(FILE *out, const struct stat_session *session)
{
	const struct stat_scope *scope = &session->scope;

	/* perf writes "#" comment lines into its CSV too; the simulated marker must travel with
	 * the numbers. */
	if (strncmp(scope->machine, "simulated ", 10) == 0)
		fprintf(out, "# SIMULATED CPU: every value below is from msrd's simulator (%s), not "
			"from hardware\n", scope->machine);
	fprintf(out, "# counted on %s CPUs %s (%u), %s\n",
		scope->mode == STAT_SCOPE_ALL ? "all" : scope->mode == STAT_SCOPE_PINNED ? "pinned"
											  : "affinity",
		scope->mode == STAT_SCOPE_AFFINITY ? scope->host_cpus : "", scope->cpu_count,
		scope->mode == STAT_SCOPE_PINNED ? "the command pinned there"
						 : "the command not pinned");
}

static void csv_line(FILE *out, const struct stat_options *options,
		     const struct stat_session *session, const struct stat_metric *metric,
		     const char *prefix, const struct report_row *row,
		     const struct report_running *run, double cycles)
{
	const char *sep = options->separator, *unit;
	double metric_value;

	fputs(prefix, out);
	if (options->aggregate != STAT_SUMMED)
		fprintf(out, "%s%s%u%s", row->label, sep, row->cpus, sep);
	if (metric->state != STAT_COUNTED) {
		fprintf(out, "%s%s%s%s%s%s0%s0.00%s%s\n",
			metric->state == STAT_NOT_SUPPORTED ? "<not supported>" : "<not counted>",
			sep, metric->kind == STAT_METRIC_ENERGY ? "Joules" : "", sep, metric->name, sep,
			sep, sep, sep);
		return;
	}
	report_derived(session, metric, row->value, cycles, run->seconds, &metric_value, &unit);
	if (metric->kind == STAT_METRIC_ENERGY)
		fprintf(out, "%.9f%sJoules%s%s", row->value, sep, sep, metric->name);
	else
		fprintf(out, "%.0f%s%s%s", row->value, sep, sep, metric->name);
	fprintf(out, "%s%.0f%s%.2f%s", sep, run->ns, sep, run->percent, sep);
	if (unit[0] != '\0')
		fprintf(out, "%.3f%s%s\n", metric_value, sep, unit);
	else
		fprintf(out, "%s\n", sep);
}

void report_csv_metrics(FILE *out, const struct stat_options *options,
			const struct stat_session *session, bool interval, const char *prefix,
			double run_seconds, double scale)
{
	struct report_row rows[HAECER_MAX_CPUS];
	double cycles = report_cycles(session, interval) * scale;

	for (size_t i = 0; i < session->metric_count; i++) {
		const struct stat_metric *metric = &session->metrics[i];
		struct report_running run =
			report_running_of(session, metric, interval, run_seconds);
		size_t count = report_metric_rows(session, options, metric,
						  interval ? metric->interval : metric->totals,
						  scale, rows, HAECER_MAX_CPUS);
		if (metric->state != STAT_COUNTED || count == 0) {
			struct report_row none = { "", 0, 0.0, NULL };
			csv_line(out, options, session, metric, prefix, &none, &run, cycles);
			continue;
		}
		for (size_t r = 0; r < count; r++)
			csv_line(out, options, session, metric, prefix, &rows[r], &run, cycles);
	}
}

void stat_report_csv(FILE *out, const struct stat_options *options,
		     const struct stat_session *session)
{
	double seconds = report_mean_elapsed(session);
	double scale = session->runs_done > 0 ? 1.0 / (double)session->runs_done : 0.0;

	report_csv_comments(out, session);
	report_csv_metrics(out, options, session, false, "", seconds, scale);
	for (size_t i = 0; i < session->metric_count; i++)
		stat_energy_doubt_csv(out, options, session, &session->metrics[i]);
}
