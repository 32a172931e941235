/*
 * tools/stat/report.c — haecer-stat's report, laid out like perf stat's: right-aligned values,
 * the metric's name, a '#' comment (power, insn per cycle, GHz), the relative spread
 * "( +- x.xx% )" with -r, "(62.50%)" of running time for an event the kernel multiplexed
 * (scaled), "<not counted>" with the reason for what the policy refused, the
 * elapsed time, and a note on where things were counted; and -I's lines of each slice. The
 * other layouts: report_csv.c (-x), report_json.c (--json); the figures they share:
 * report_figures.c.
 */
#include "tools/stat/report.h"

#include <stdlib.h>
#include <string.h>

#include "hw/core_type.h"

#define VALUE_WIDTH 18
#define NAME_WIDTH 16
#define SPREAD_WIDTH 12

/* ---- numbers ---- */

/* An event count with thousands separators, as perf prints it. */
static void grouped(double value, char *out, size_t size)
{
	char digits[48];
	size_t length, used = 0;

	snprintf(digits, sizeof(digits), "%.0f", value < 0 ? 0.0 : value);
	length = strlen(digits);
	for (size_t i = 0; i < length && used + 2 < size; i++) {
		if (i > 0 && (length - i) % 3 == 0)
			out[used++] = ',';
		out[used++] = digits[i];
	}
	out[used] = '\0';
}

/* Joules with as many decimals as a short command needs to show anything; a spread gets the
 * decimals of its mean. */
static int joule_decimals(double value)
{
	return value >= 100.0 ? 2 : value >= 1.0 ? 3 : 6;
}

static void format_value(const struct stat_metric *metric, double value, double scale,
			 char *out, size_t size)
{
	if (metric->kind == STAT_METRIC_ENERGY)
		snprintf(out, size, "%.*f", joule_decimals(scale), value);
	else
		grouped(value, out, size);
}

/* Print a line without the padding it may end with. */
static void print_line(FILE *out, char *line)
{
	size_t length = strlen(line);

	while (length > 0 && line[length - 1] == ' ')
		line[--length] = '\0';
	fprintf(out, "%s\n", line);
}

static const struct stat_metric *counted_metric(const struct stat_session *session,
						const char *name)
{
	for (size_t i = 0; i < session->metric_count; i++)
		if (strcmp(session->metrics[i].name, name) == 0 &&
		    session->metrics[i].state == STAT_COUNTED)
			return &session->metrics[i];
	return NULL;
}

static void power_summary(const struct stat_session *session, const struct stat_metric *metric,
			  struct stat_summary *out)
{
	size_t count;
	double *watts = report_power_samples(session, metric, &count);

	memset(out, 0, sizeof(*out));
	if (watts != NULL)
		stat_summarize(watts, count, out);
	free(watts);
}

/* How many CPUs of the scope are of `type` (enum cpu_core_type). */
static unsigned scope_cpus_of_type(const struct stat_session *session, uint8_t type)
{
	const struct haecer_machine_info *machine = haecer_context_machine(session->ctx);
	unsigned count = 0;

	for (uint32_t i = 0; i < session->scope.cpu_count; i++)
		count += machine->cpu_core_type[session->scope.cpus[i]] == type;
	return count;
}

/* ---- text ---- */

static void print_command(FILE *out, const struct stat_options *options)
{
	for (int i = 0; i < options->command_count; i++)
		fprintf(out, "%s%s", i > 0 ? " " : "", options->command[i]);
}

/* perf's derived comments: watts for energy, insn per cycle, GHz of one CPU. */
static void comment(const struct stat_session *session, const struct stat_metric *metric,
		    const struct stat_summary *summary, char *out, size_t size)
{
	const struct stat_metric *cycles = counted_metric(session, "cycles");
	struct stat_summary other, power;
	double seconds = report_mean_elapsed(session);

	out[0] = '\0';
	if (metric->kind == STAT_METRIC_ENERGY) {
		power_summary(session, metric, &power);
		snprintf(out, size, "# %9.3f W", power.mean);
	} else if (strcmp(metric->name, "instructions") == 0 && cycles != NULL) {
		stat_summarize(cycles->samples, report_runs_of(session, cycles), &other);
		if (other.mean > 0)
			snprintf(out, size, "# %9.2f  insn per cycle", summary->mean / other.mean);
	} else if (metric == cycles && session->scope.cpu_count == 1 && seconds > 0) {
		snprintf(out, size, "# %9.3f GHz", summary->mean / seconds / 1e9);
	} else if (metric->brokered) {
		snprintf(out, size, "# %s", STAT_PERF_BROKER);
	}
}

static void print_metric(FILE *out, const struct stat_session *session,
			 const struct stat_metric *metric)
{
	const char *unit = metric->kind == STAT_METRIC_ENERGY ? "J" : "";
	char value[64], spread[80] = "", note[160], line[1024];
	struct report_running run =
		report_running_of(session, metric, false, report_mean_elapsed(session));
	struct stat_summary summary;
	size_t used;

	if (metric->state != STAT_COUNTED) {
		snprintf(line, sizeof(line), "%*s %-2s %-*s (%s)", VALUE_WIDTH,
			 metric->state == STAT_NOT_SUPPORTED ? "<not supported>" : "<not counted>",
			 unit, NAME_WIDTH, metric->name, metric->reason);
		print_line(out, line);
		return;
	}
	stat_summarize(metric->samples, report_runs_of(session, metric), &summary);
	format_value(metric, summary.mean, summary.mean, value, sizeof(value));
	if (session->runs_done > 1) {
		char deviation[48];
		format_value(metric, summary.stddev, summary.mean, deviation, sizeof(deviation));
		snprintf(spread, sizeof(spread), " +- %-*s", SPREAD_WIDTH, deviation);
	}
	comment(session, metric, &summary, note, sizeof(note));
	used = (size_t)snprintf(line, sizeof(line), "%*s%s %-2s %-*s %-28s", VALUE_WIDTH, value,
				spread, unit, NAME_WIDTH, metric->name, note);
	if (session->runs_done > 1 && used < sizeof(line))
		used += (size_t)snprintf(line + used, sizeof(line) - used, " ( +- %5.2f%% )",
					 summary.relative_percent);
	if (run.note[0] != '\0' && used < sizeof(line))
		used += (size_t)snprintf(line + used, sizeof(line) - used, "  %s", run.note);
	if (metric->reason[0] != '\0' && used < sizeof(line))
		snprintf(line + used, sizeof(line) - used, " (%s)", metric->reason);
	print_line(out, line);
}

static void print_elapsed(FILE *out, const struct stat_session *session)
{
	struct stat_summary summary, user, sys;

	stat_summarize(session->elapsed, session->runs_done, &summary);
	stat_summarize(session->user, session->runs_done, &user);
	stat_summarize(session->sys, session->runs_done, &sys);
	if (session->runs_done > 1)
		fprintf(out, "\n%*.6f +- %.6f seconds time elapsed  ( +- %5.2f%% )\n", VALUE_WIDTH,
			summary.mean, summary.stddev, summary.relative_percent);
	else
		fprintf(out, "\n%*.9f seconds time elapsed\n", VALUE_WIDTH, summary.mean);
	/* perf stat's lines: the command's CPU time (with its children), from wait4. */
	fprintf(out, "\n%*.9f seconds user\n%*.9f seconds sys\n", VALUE_WIDTH, user.mean,
		VALUE_WIDTH, sys.mean);
}

static void print_packages(FILE *out, const struct stat_scope *scope)
{
	for (uint32_t i = 0; i < scope->package_count; i++)
		fprintf(out, "%s%u", i == 0 ? "" : i + 1 < scope->package_count ? ", " : " and ",
			scope->packages[i]);
}

/* A hybrid part: events count on both kinds of core, each with its own encoding. */
static void print_core_types(FILE *out, const struct stat_session *session)
{
	unsigned p_cores = scope_cpus_of_type(session, CPU_CORE_TYPE_CORE);
	unsigned e_cores = scope_cpus_of_type(session, CPU_CORE_TYPE_ATOM);

	if (p_cores + e_cores == 0)
		return;
	fprintf(out, " Hybrid CPU: events counted on %u P-core%s and %u E-core%s, each with its "
		"core type's\n encoding (libpfm4 adl_glc / adl_grt); --per-core names the type of "
		"each row.\n", p_cores, p_cores == 1 ? "" : "s", e_cores, e_cores == 1 ? "" : "s");
}

static void print_scope(FILE *out, const struct stat_session *session)
{
	const struct stat_scope *scope = &session->scope;

	if (scope->mode == STAT_SCOPE_ALL)
		fprintf(out, "\n Counted on all %u CPUs of %s; the command was not pinned, and the "
			"counters count\n everything that ran on them.\n", scope->cpu_count,
			scope->machine);
	else if (scope->mode == STAT_SCOPE_PINNED)
		fprintf(out, "\n Counted on CPU %d (model CPU %u of %s), where the command\n was "
			"pinned: counters count everything that runs on that CPU, not only the "
			"command.\n", scope->host_cpu, scope->model_cpu, scope->machine);
	else
		fprintf(out, "\n Counted on every CPU the command may run on, summed: host CPUs %s\n"
			" (%u model CPU%s of %s). The command was not pinned;\n the counters count "
			"everything that ran on those CPUs, not only the command.\n",
			scope->host_cpus, scope->cpu_count, scope->cpu_count == 1 ? "" : "s",
			scope->machine);
	fprintf(out, " Energy is package-wide (package%s ", scope->package_count == 1 ? "" : "s");
	print_packages(out, scope);
	fprintf(out, "%s): it includes everything %s ran.\n",
		scope->package_count == 1 ? "" : ", summed",
		scope->package_count == 1 ? "the package" : "they");
	print_core_types(out, session);
	if (session->read_error[0] != '\0')
		fprintf(out, " %s\n", session->read_error);
}

static void text_rows(FILE *out, const struct stat_options *options,
		      const struct stat_session *session, bool interval, const char *prefix,
		      double seconds, double scale)
{
	struct report_row rows[HAECER_MAX_CPUS];
	char value[64], aggr[48] = "", line[1024];
	double cycles = report_cycles(session, interval) * scale;

	for (size_t i = 0; i < session->metric_count; i++) {
		const struct stat_metric *metric = &session->metrics[i];
		const char *unit = metric->kind == STAT_METRIC_ENERGY ? "J" : "";
		struct report_running run = report_running_of(session, metric, interval, seconds);
		size_t count = metric->state == STAT_COUNTED
				       ? report_metric_rows(session, options, metric,
							    interval ? metric->interval
								     : metric->totals,
							    scale, rows, HAECER_MAX_CPUS)
				       : 0;
		if (count == 0) {
			snprintf(line, sizeof(line), "%s%*s %-2s %-*s (%s)", prefix, VALUE_WIDTH,
				 metric->state == STAT_NOT_SUPPORTED ? "<not supported>"
								     : "<not counted>",
				 unit, NAME_WIDTH, metric->name, metric->reason);
			print_line(out, line);
			continue;
		}
		for (size_t r = 0; r < count; r++) {
			const char *derived_unit;
			double derived_value;
			char note[64] = "";
			report_derived(session, metric, rows[r].value, cycles, seconds,
				       &derived_value, &derived_unit);
			if (derived_unit[0] != '\0')
				snprintf(note, sizeof(note), "# %9.3f %s", derived_value, derived_unit);
			if (options->aggregate != STAT_SUMMED)
				snprintf(aggr, sizeof(aggr), "%-10.31s %3u %s%s", rows[r].label,
					 rows[r].cpus, rows[r].core_type ? rows[r].core_type : "",
					 rows[r].core_type ? " " : "");
			format_value(metric, rows[r].value, rows[r].value, value, sizeof(value));
			snprintf(line, sizeof(line), "%s%s%*s %-2s %-*s %-28s  %s", prefix, aggr,
				 VALUE_WIDTH, value, unit, NAME_WIDTH, metric->name, note, run.note);
			print_line(out, line);
		}
	}
}

static void print_warnings(FILE *out, const struct stat_session *session)
{
	double updates;

	if (report_few_updates(session, &updates))
		fprintf(out, "\n Warning: the command ran for %.3f ms, about %.0f RAPL energy "
			"update%s (one every ~1 ms):\n the energy values are coarse. Measure a "
			"longer run, or repeat it with -r.\n", report_mean_elapsed(session) * 1e3,
			updates, updates >= 0.5 && updates < 1.5 ? "" : "s");
}

void stat_report_text(FILE *out, const struct stat_options *options,
		      const struct stat_session *session)
{
	fprintf(out, "\n Energy and counter stats for '");
	print_command(out, options);
	fprintf(out, "'");
	if (session->runs_done > 1)
		fprintf(out, " (%zu runs)", session->runs_done);
	fprintf(out, ":\n\n");
	if (options->aggregate == STAT_SUMMED)
		for (size_t i = 0; i < session->metric_count; i++)
			print_metric(out, session, &session->metrics[i]);
	else
		text_rows(out, options, session, false, "", report_mean_elapsed(session),
			  session->runs_done > 0 ? 1.0 / (double)session->runs_done : 0.0);
	stat_energy_doubt_text(out, session);
	print_elapsed(out, session);
	print_scope(out, session);
	print_warnings(out, session);
	fprintf(out, "\n");
}

/* ---- -I ---- */

void stat_report_interval(FILE *out, const struct stat_options *options,
			  const struct stat_session *session, double seconds,
			  double slice_seconds)
{
	static bool commented;
	char prefix[64];

	if (options->separator != NULL) {
		if (!commented)
			report_csv_comments(out, session);
		commented = true;
		snprintf(prefix, sizeof(prefix), "%.9f%s", seconds, options->separator);
		report_csv_metrics(out, options, session, true, prefix, slice_seconds, 1.0);
		return;
	}
	if (!commented && strncmp(session->scope.machine, "simulated ", 10) == 0)
		fprintf(out, "# SIMULATED CPU (%s): the values are msrd's simulator's\n",
			session->scope.machine);
	commented = true;
	snprintf(prefix, sizeof(prefix), "%16.9f ", seconds);
	text_rows(out, options, session, true, prefix, slice_seconds, 1.0);
}
