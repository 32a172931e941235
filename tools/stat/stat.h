/*
 * tools/stat/stat.h — haecer-stat's internals: options (args.c), the statistics of repeated
 * runs (stats.c), counters and energy through libhaecer (metrics.c), running the command
 * (run.c) and the report as text and -I (report.c), CSV (report_csv.c) or JSON
 * (report_json.c), from the figures they share (report_figures.c, declared in report.h).
 *
 * Functions return 0 (or a count) on success and -errno on failure, never setting errno;
 * messages for the user are printed by the callers that know the context.
 */
#ifndef HAECER_TOOLS_STAT_H
#define HAECER_TOOLS_STAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <haecer/perfmon.h>

/* Exit statuses of haecer-stat itself; otherwise it exits with the command's status (128 +
 * signal number when a signal killed it, as shells report it). */
#define STAT_EXIT_USAGE 2
#define STAT_EXIT_FAILED 125     /* haecer-stat could not measure (msrd unreachable, ...) */
#define STAT_EXIT_CANNOT_RUN 126 /* the command exists but could not be executed */
#define STAT_EXIT_NOT_FOUND 127  /* no such command */
#define STAT_EXIT_EVENT 129      /* an -e event cannot be counted (perf stat's status) */

#define STAT_MAX_EVENTS 16u
#define STAT_MAX_RUNS 100000u
#define STAT_NAME_MAX 160u
#define STAT_REASON_MAX 320u
/* What the report says of a figure msrd's perf broker counted. */
#define STAT_PERF_BROKER "perf broker"

/* ---- options (args.c) ---- */

struct stat_options {
	unsigned runs;                          /* -r */
	const char *events[STAT_MAX_EVENTS];    /* -e, split at commas */
	size_t event_count;
	char *event_lists[STAT_MAX_EVENTS];     /* copies of the -e lists events[] point into */
	size_t list_count;
	bool json;                              /* --json */
	const char *separator;                  /* -x: perf's CSV with this separator */
	unsigned interval_ms;                   /* -I: print every this many ms, 0: never */
	enum stat_aggregate { STAT_SUMMED, STAT_PER_SOCKET, STAT_PER_CORE, STAT_PER_DIE } aggregate;
	bool list;                              /* "haecer-stat list" */
	bool skip_unavailable;                  /* --skip-unavailable: run without what fails */
	bool all_cpus;                          /* -a */
	int cpu;                                /* --cpu, host CPU; -1: the current one */
	const char *output;                     /* -o, NULL: stderr */
	const char *socket_path;                /* --socket, NULL: $HAECER_SOCKET or default */
	char *const *command;                   /* CMD ARGS, NULL-terminated */
	int command_count;
};

/* Parse argv. 0: run; 1: done (--help or --version printed); STAT_EXIT_USAGE: bad usage
 * (message printed). */
int stat_parse_options(int argc, char **argv, struct stat_options *options);
void stat_options_free(struct stat_options *options);

/* "haecer-stat: <message>" on stderr. */
void stat_error(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* ---- statistics of repeated runs (stats.c) ---- */

struct stat_summary {
	size_t count;
	double mean;
	double stddev;           /* sample standard deviation (n - 1); 0 for one sample */
	double stderr_mean;      /* stddev / sqrt(n): what perf stat's "+-" shows */
	double relative_percent; /* 100 * stddev / |mean|; 0 when the mean is 0 */
	double min;
	double max;
};

/* Summarise count (>= 1) samples; *out is all zero for count 0. Numerically stable (Welford). */
void stat_summarize(const double *samples, size_t count, struct stat_summary *out);

/* perf stat's percentage of running time, 100 * running / enabled (ns): below 100 when the
 * kernel multiplexed the event and scaled its count; 100 when it ran whenever enabled (or was
 * never enabled). */
double stat_running_percent(double enabled, double running);
/* perf stat's note after a scaled count in its text report, "(62.50%)"; "" for one that ran
 * the whole time. */
void stat_running_note(double enabled, double running, char *out, size_t size);

/* ---- metrics: what is counted (metrics.c) ---- */

enum stat_metric_kind { STAT_METRIC_ENERGY, STAT_METRIC_EVENT };

/* A brokered perf event's time_enabled / time_running (ns), as the kernel reports them. */
struct stat_event_times {
	uint64_t enabled, running;
};

enum stat_state {
	STAT_COUNTED,
	STAT_NOT_COUNTED,    /* refused (policy, counter taken) or failed while reading */
	STAT_NOT_SUPPORTED,  /* no such event or domain on this CPU */
};

struct stat_metric {
	char name[STAT_NAME_MAX];         /* "energy-pkg", "instructions", a libpfm4 name */
	enum stat_metric_kind kind;
	enum stat_state state;
	bool brokered;                    /* perf events msrd's perf broker opened */
	char reason[STAT_REASON_MAX];     /* why not counted, or why only on some CPUs */
	struct haecer_counter **counters; /* one per CPU or package counted */
	double *units;                    /* per counter: joules per count, or 1 */
	uint64_t *start;                  /* per counter: value when the run started */
	uint64_t *previous;               /* per counter: value at the last -I print */
	double *totals;                   /* per counter: joules or events over every run */
	double *interval;                 /* per counter: joules or events of the last -I slice */
	uint32_t *cpus;                   /* per counter: its model CPU */
	uint32_t *packages;               /* per counter: its package */
	uint32_t *dies;                   /* per counter: its die within the package (0 on a
					   * package of one die) */
	size_t count;
	size_t wanted;                    /* CPUs or packages in scope */
	double *samples;                  /* per run: joules or events */
	size_t sample_count;
	/* Energy only (energy_doubt.c): each counter's reading at the run's start as a mark, and
	 * per run the stated +- of the total (the counters' haecer_energy_span bounds, summed);
	 * what measuring cost over every run: msrd's CPU for it and the energy that drew. */
	struct haecer_energy_mark *marks;
	double *uncertainty;
	size_t uncertainty_count;
	uint64_t measurement_cpu_ns;
	double measurement_j, measurement_doubt_j;
	bool measurement_pages_known;     /* msrd's page counted its part (else round trips) */
	/* Brokered events: the kernel's times, for perf's percentage of running time (the
	 * others count whenever enabled: 100%). */
	struct stat_event_times *time_start;    /* per counter: when the run started */
	struct stat_event_times *time_previous; /* per counter: at the last -I print */
	double time_enabled, time_running;      /* ns over every run, summed over counters */
	double interval_enabled, interval_running; /* ns of the last -I slice */
};

/* Where haecer-stat counts. The default keeps the command's affinity (a measurement must not
 * change what it measures): every CPU the command may run on is counted and summed, as perf
 * stat -a restricted to that mask would. */
enum stat_scope_mode {
	STAT_SCOPE_AFFINITY,              /* default: the CPUs of the command's affinity mask */
	STAT_SCOPE_PINNED,                /* --cpu: the command is pinned there */
	STAT_SCOPE_ALL,                   /* -a: every CPU of the machine */
};

struct stat_scope {
	enum stat_scope_mode mode;
	bool all_cpus;                    /* mode == STAT_SCOPE_ALL */
	int host_cpu;                     /* pinned mode: where the command runs, else -1 */
	uint32_t model_cpu;               /* ... and the model CPU counted there */
	uint32_t cpus[HAECER_MAX_CPUS];   /* model CPUs in scope */
	uint32_t cpu_count;
	uint32_t packages[HAECER_MAX_CPUS]; /* packages in scope, ascending */
	uint32_t package_count;
	char host_cpus[256];              /* affinity mode: the host CPUs, "0-3,6" */
	char machine[192];                /* "simulated sandybridge (4 CPUs, 1 package; msrd
					   * backend sim)" */
};

struct stat_session {
	struct haecer_context *ctx;
	struct stat_scope scope;
	struct stat_metric *metrics;
	size_t metric_count;
	struct haecer_counter **all;      /* every counter of every metric, for set reads */
	uint64_t *values;
	uint64_t *read_before, *read_after; /* per counter: CLOCK_MONOTONIC_RAW around its read */
	size_t all_count;
	double *elapsed;                  /* per run, seconds */
	double *user, *sys;               /* per run: the command's user and system CPU seconds */
	size_t runs_done;
	int exit_status;                  /* of the last run */
	char read_error[STAT_REASON_MAX]; /* a failed read, for the report */
};

/* Connect, choose the scope and open every energy domain and event. Fails only when msrd is
 * unreachable or the CPU does not exist (message printed, *status = exit status); events the
 * policy refuses become metrics in STAT_NOT_COUNTED. */
int stat_session_open(const struct stat_options *options, struct stat_session *session,
		      int *status);
void stat_session_close(struct stat_session *session);

/* Read every counter: start of a run / end of a run (adds one sample per metric) / an -I
 * slice (fills each metric's interval[] since the last slice). */
int stat_metrics_start(struct stat_session *session);
int stat_metrics_stop(struct stat_session *session);
int stat_metrics_interval(struct stat_session *session);

/* "haecer-stat list": perf's generic events and this machine's energy domains. */
int stat_list(const struct stat_options *options);
/* A CPU's die within its package: 0, 1, ... (0 when the machine has one die a package). */
uint32_t stat_die_in_package(const struct haecer_machine_info *machine, uint32_t cpu);

/* ---- energy totals' +- and what measuring cost (energy_doubt.c) ---- */

/* After a start read (session->values, read_before/after): mark every energy counter. After a
 * stop read: the run's +- and cost per energy metric. -ENOMEM, or a mark's error. */
int stat_energy_marks_start(struct stat_session *session);
int stat_energy_marks_stop(struct stat_session *session);
/* Text: one line per counted energy metric, "± J" and "measurement ... J"; JSON: fields of
 * the metric object (", \"uncertainty\": ..."); CSV: rows of perf's shape named
 * NAME:uncertainty and NAME:measurement. */
void stat_energy_doubt_text(FILE *out, const struct stat_session *session);
void stat_energy_doubt_json(FILE *out, const struct stat_metric *metric);
void stat_energy_doubt_csv(FILE *out, const struct stat_options *options,
			   const struct stat_session *session, const struct stat_metric *metric);

/* ---- running the command (run.c) ---- */

struct stat_run_request {
	char *const *command;
	int host_cpu;                     /* pin there when >= 0 (--cpu); else keep the mask */
	unsigned interval_ms;             /* call tick every this many ms while it runs; 0: never */
	void (*tick)(void *arg, double seconds_since_start);
	void *tick_arg;
};

struct stat_times {
	double elapsed;                   /* from just before fork to just after its end */
	double user, sys;                 /* the command's CPU time (wait4's rusage) */
};

/* Fork and exec the command, wait for it; *times its elapsed, user and system time, *status
 * its exit status (128 + signal when killed). -errno (message printed) when it could not be
 * started: then *status is STAT_EXIT_NOT_FOUND or STAT_EXIT_CANNOT_RUN. */
int stat_run_command(const struct stat_run_request *request, struct stat_times *times,
		     int *status);

/* ---- the report (report.c, report_csv.c, report_json.c) ---- */

void stat_report_text(FILE *out, const struct stat_options *options,
		      const struct stat_session *session);
void stat_report_json(FILE *out, const struct stat_options *options,
		      const struct stat_session *session);
/* perf stat -x SEP: one line per metric (or per socket / core), fields counter-value, unit,
 * event, run-time (ns), percentage of running time, metric value, metric unit. */
void stat_report_csv(FILE *out, const struct stat_options *options,
		     const struct stat_session *session);
/* perf stat -I: the slice since the last one, each line prefixed by the time since start. */
void stat_report_interval(FILE *out, const struct stat_options *options,
			  const struct stat_session *session, double seconds,
			  double slice_seconds);

#endif
