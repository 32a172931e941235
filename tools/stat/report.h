/*
 * tools/stat/report.h — what haecer-stat's three report layouts share, inside tools/stat only:
 * the figures each of them prints (report_figures.c: rows of --per-socket / --per-die /
 * --per-core, perf's derived metrics, running time, the short-run warning), and the CSV
 * writer's parts that -I reuses (report_csv.c). The layouts themselves: text and -I
 * (report.c), CSV (report_csv.c), JSON (report_json.c); their entry points are in stat.h.
 */
#ifndef HAECER_TOOLS_STAT_REPORT_H
#define HAECER_TOOLS_STAT_REPORT_H

#include "tools/stat/stat.h"

/* One row of a metric: summed over the scope, or one socket, die or CPU of it. */
struct report_row {
	char label[32];                   /* "", "S0", "S0-D0-C3" */
	unsigned cpus;                    /* CPUs aggregated */
	double value;
	const char *core_type;            /* hybrid, per CPU: "P-core", "E-core"; else NULL */
};

/* perf stat's run time and percentage of running time of a metric over the mean run (or the
 * last -I slice): a brokered event's kernel times (time_running summed over its counters, as
 * perf sums them over CPUs), else the elapsed time and 100% (counted whenever enabled). */
struct report_running {
	double seconds;   /* the run's or the slice's elapsed time */
	double ns;        /* the event's run time */
	double percent;
	char note[24];    /* "(62.50%)" when scaled, else "" */
};

/* ---- figures (report_figures.c) ---- */

/* Runs a metric has a sample of: the runs done, at most its sample count. */
size_t report_runs_of(const struct stat_session *session, const struct stat_metric *metric);
/* Average power of each run (joules / seconds), malloc'ed; NULL when out of memory. */
double *report_power_samples(const struct stat_session *session,
			     const struct stat_metric *metric, size_t *count);
double report_mean_elapsed(const struct stat_session *session);

/* The rows of a metric: one summed row, or one per socket, or one per CPU (events) with
 * --per-core; energy is package-wide, so it stays per socket there. `values` per counter,
 * each multiplied by `scale`; returns the number of rows (at most max). */
size_t report_metric_rows(const struct stat_session *session, const struct stat_options *options,
			  const struct stat_metric *metric, const double *values, double scale,
			  struct report_row *rows, size_t max);

/* The counted cycles of every run (or of the last -I slice), summed over counters; 0 when
 * cycles are not counted. */
double report_cycles(const struct stat_session *session, bool interval);
/* perf's derived metric of a value: watts for energy, insn per cycle, GHz of one CPU; *unit ""
 * when there is none. */
void report_derived(const struct stat_session *session, const struct stat_metric *metric,
		    double value, double cycles, double seconds, double *out, const char **unit);

struct report_running report_running_of(const struct stat_session *session,
					const struct stat_metric *metric, bool interval,
					double seconds);

/* The short-run warning: true when energy is counted and the mean run saw too few RAPL
 * updates (*updates: about how many it saw). */
bool report_few_updates(const struct stat_session *session, double *updates);

/* ---- CSV (report_csv.c), also the CSV of -I -x ---- */

/* perf's "#" comment lines: the simulated marker and where things were counted. */
void report_csv_comments(FILE *out, const struct stat_session *session);
/* Every metric's lines, each after `prefix` (-I's timestamp); `scale` multiplies values. */
void report_csv_metrics(FILE *out, const struct stat_options *options,
			const struct stat_session *session, bool interval, const char *prefix,
			double run_seconds, double scale);

#endif
