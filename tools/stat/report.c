/*
 * tools/stat/report.c — haecer-stat's report, laid out like perf stat's: right-aligned values,
 * the metric's name, a '#' comment (power, insn per cycle, GHz), the relative spread
 * "( +- x.xx% )" with -r, "(62.50%)" of running time for an event the kernel multiplexed
 * (scaled), "<not counted>" with the reason for what the policy refused, the
 * elapsed time, and a note on where things were counted. Or the same as one JSON object.
 */
#include "tools/stat/stat.h"
#include "common/json.h"

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

static size_t runs_of(const struct stat_session *session, const struct stat_metric *metric)
{
	return metric->sample_count < session->runs_done ? metric->sample_count
							 : session->runs_done;
}

/* Average power of each run (joules / seconds), malloc'ed; NULL when out of memory. */
static double *power_samples(const struct stat_session *session, const struct stat_metric *metric,
			     size_t *count)
{
	double *watts;

	*count = runs_of(session, metric);
	watts = calloc(*count > 0 ? *count : 1, sizeof(*watts));
	for (size_t i = 0; watts != NULL && i < *count; i++)
		watts[i] = session->elapsed[i] > 0 ? metric->samples[i] / session->elapsed[i] : 0.0;
	return watts;
}

static void power_summary(const struct stat_session *session, const struct stat_metric *metric,
			  struct stat_summary *out)
{
	size_t count;
	double *watts = power_samples(session, metric, &count);

	memset(out, 0, sizeof(*out));
	if (watts != NULL)
		stat_summarize(watts, count, out);
	free(watts);
}

/* ---- aggregation (--per-socket, --per-core) ---- */

/* RAPL updates its energy counters about every millisecond (Intel SDM 14.10.3); fewer updates
 * than this within a run leave the energy of a command mostly quantisation. */
#define FEW_ENERGY_UPDATES 10
#define ENERGY_UPDATE_SECONDS 0.000976

struct row {
	char label[32];                   /* "", "S0", "S0-D0-C3" */
	unsigned cpus;                    /* CPUs aggregated */
	double value;
	const char *core_type;            /* hybrid, per CPU: "P-core", "E-core"; else NULL */
};

/* A hybrid CPU's core type name (hw/core_type.h), NULL elsewhere. */
static const char *core_type_of(const struct stat_session *session, uint32_t cpu)
{
	const struct haecer_machine_info *machine = haecer_context_machine(session->ctx);

	return cpu < machine->cpu_count ? cpu_core_type_name(machine->cpu_core_type[cpu]) : NULL;
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

/* CPUs of the scope in a package. */
static unsigned cpus_in_package(const struct stat_session *session, uint32_t package)
{
	const struct haecer_machine_info *machine = haecer_context_machine(session->ctx);
	unsigned count = 0;

	for (uint32_t i = 0; i < session->scope.cpu_count; i++)
		count += machine->cpu_package[session->scope.cpus[i]] == package;
	return count;
}

/* CPUs of the scope on die `die` of a package. */
static unsigned cpus_in_die(const struct stat_session *session, uint32_t package, uint32_t die)
{
	const struct haecer_machine_info *machine = haecer_context_machine(session->ctx);
	unsigned count = 0;

	for (uint32_t i = 0; i < session->scope.cpu_count; i++) {
		uint32_t cpu = session->scope.cpus[i];
		count += machine->cpu_package[cpu] == package &&
			 stat_die_in_package(machine, cpu) == die;
	}
	return count;
}

/* The rows of a metric: one summed row, or one per socket, or one per CPU (events) with
 * --per-core; energy is package-wide, so it stays per socket there. `values` per counter. */
static size_t metric_rows(const struct stat_session *session, const struct stat_options *options,
			  const struct stat_metric *metric, const double *values, double scale,
			  struct row *rows, size_t max)
{
	size_t count = 0;

	if (options->aggregate == STAT_SUMMED) {
		rows[0] = (struct row){ "", session->scope.cpu_count, 0.0, NULL };
		for (size_t j = 0; j < metric->count; j++)
			rows[0].value += values[j] * scale;
		return 1;
	}
	for (size_t j = 0; j < metric->count && count < max; j++) {
		bool per_cpu = options->aggregate == STAT_PER_CORE &&
			       metric->kind == STAT_METRIC_EVENT;
		char label[32];
		size_t k;
		bool per_die = options->aggregate == STAT_PER_DIE;
		if (per_cpu)
			snprintf(label, sizeof(label), "S%u-D%u-C%u", metric->packages[j],
				 metric->dies[j], metric->cpus[j]);
		else if (per_die)
			snprintf(label, sizeof(label), "S%u-D%u", metric->packages[j],
				 metric->dies[j]);
		else
			snprintf(label, sizeof(label), "S%u", metric->packages[j]);
		for (k = 0; k < count && strcmp(rows[k].label, label) != 0; k++)
			;
		if (k == count) {
			snprintf(rows[count].label, sizeof(rows[count].label), "%s", label);
			rows[count].core_type = per_cpu ? core_type_of(session, metric->cpus[j]) : NULL;
			rows[count].cpus = per_cpu   ? 1
					   : per_die ? cpus_in_die(session, metric->packages[j],
								   metric->dies[j])
						     : cpus_in_package(session, metric->packages[j]);
			rows[count++].value = 0.0;
		}
		rows[k].value += values[j] * scale;
	}
	return count;
}

static double mean_elapsed(const struct stat_session *session)
{
	double seconds = 0.0;

	for (size_t i = 0; i < session->runs_done; i++)
		seconds += session->elapsed[i] / (double)session->runs_done;
	return seconds;
}

/* perf's derived metric of a value: watts for energy, insn per cycle, GHz of one CPU. */
static void derived(const struct stat_session *session, const struct stat_metric *metric,
		    double value, double cycles, double seconds, double *out, const char **unit)
{
	*unit = "";
	*out = 0.0;
	if (metric->kind == STAT_METRIC_ENERGY && seconds > 0) {
		*out = value / seconds;
		*unit = "W";
	} else if (strcmp(metric->name, "instructions") == 0 && cycles > 0) {
		*out = value / cycles;
		*unit = "insn per cycle";
	} else if (strcmp(metric->name, "cycles") == 0 && session->scope.cpu_count == 1 &&
		   seconds > 0) {
		*out = value / seconds / 1e9;
		*unit = "GHz";
	}
}

static const double *metric_cycles_source(const struct stat_session *session, bool interval,
					  double *sum)
{
	*sum = 0.0;
	for (size_t i = 0; i < session->metric_count; i++) {
		const struct stat_metric *metric = &session->metrics[i];
		if (strcmp(metric->name, "cycles") != 0 || metric->state != STAT_COUNTED)
			continue;
		const double *values = interval ? metric->interval : metric->totals;
		for (size_t j = 0; j < metric->count; j++)
			*sum += values[j];
		return values;
	}
	return NULL;
}

/* ---- running time (events the kernel multiplexed) ---- */

/* perf stat's run time and percentage of running time of a metric over the mean run (or the
 * last -I slice): a brokered event's kernel times (time_running summed over its counters, as
 * perf sums them over CPUs), else the elapsed time and 100% (counted whenever enabled). */
struct running {
	double seconds;   /* the run's or the slice's elapsed time */
	double ns;        /* the event's run time */
	double percent;
	char note[24];    /* "(62.50%)" when scaled, else "" */
};

static struct running running_of(const struct stat_session *session,
				  const struct stat_metric *metric, bool interval, double seconds)
{
	double runs = session->runs_done > 0 ? (double)session->runs_done : 1.0;
	double enabled = interval ? metric->interval_enabled : metric->time_enabled / runs;
	double running = interval ? metric->interval_running : metric->time_running / runs;
	struct running run = { seconds, seconds * 1e9, 100.0, "" };

	if (!metric->brokered || enabled <= 0)
		return run;
	run.ns = running;
	run.percent = stat_running_percent(enabled, running);
	stat_running_note(enabled, running, run.note, sizeof(run.note));
	return run;
}

/* ---- CSV (perf stat -x) ---- */

static void csv_comments(FILE *out, const struct stat_session *session)
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
		     const char *prefix, const struct row *row, const struct running *run,
		     double cycles)
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
	derived(session, metric, row->value, cycles, run->seconds, &metric_value, &unit);
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

static void csv_metrics(FILE *out, const struct stat_options *options,
			const struct stat_session *session, bool interval, const char *prefix,
			double run_seconds, double scale)
{
	struct row rows[HAECER_MAX_CPUS];
	double cycles;

	metric_cycles_source(session, interval, &cycles);
	cycles *= scale;
	for (size_t i = 0; i < session->metric_count; i++) {
		const struct stat_metric *metric = &session->metrics[i];
		struct running run = running_of(session, metric, interval, run_seconds);
		size_t count = metric_rows(session, options, metric,
					   interval ? metric->interval : metric->totals, scale, rows,
					   HAECER_MAX_CPUS);
		if (metric->state != STAT_COUNTED || count == 0) {
			struct row none = { "", 0, 0.0, NULL };
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
	double seconds = mean_elapsed(session);
	double scale = session->runs_done > 0 ? 1.0 / (double)session->runs_done : 0.0;

	csv_comments(out, session);
	csv_metrics(out, options, session, false, "", seconds, scale);
	for (size_t i = 0; i < session->metric_count; i++)
		stat_energy_doubt_csv(out, options, session, &session->metrics[i]);
}

/* ---- -I ---- */

static void text_rows(FILE *out, const struct stat_options *options,
		      const struct stat_session *session, bool interval, const char *prefix,
		      double seconds, double scale);

void stat_report_interval(FILE *out, const struct stat_options *options,
			  const struct stat_session *session, double seconds,
			  double slice_seconds)
{
	static bool commented;
	char prefix[64];

	if (options->separator != NULL) {
		if (!commented)
			csv_comments(out, session);
		commented = true;
		snprintf(prefix, sizeof(prefix), "%.9f%s", seconds, options->separator);
		csv_metrics(out, options, session, true, prefix, slice_seconds, 1.0);
		return;
	}
	if (!commented && strncmp(session->scope.machine, "simulated ", 10) == 0)
		fprintf(out, "# SIMULATED CPU (%s): the values are msrd's simulator's\n",
			session->scope.machine);
	commented = true;
	snprintf(prefix, sizeof(prefix), "%16.9f ", seconds);
	text_rows(out, options, session, true, prefix, slice_seconds, 1.0);
}

/* The short-run warning: fewer RAPL updates than FEW_ENERGY_UPDATES in the mean run. */
static bool few_updates(const struct stat_session *session, double *updates)
{
	*updates = mean_elapsed(session) / ENERGY_UPDATE_SECONDS;
	for (size_t i = 0; i < session->metric_count; i++)
		if (session->metrics[i].kind == STAT_METRIC_ENERGY &&
		    session->metrics[i].state == STAT_COUNTED)
			return *updates < FEW_ENERGY_UPDATES;
	return false;
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
	double seconds = 0.0;

	out[0] = '\0';
	for (size_t i = 0; i < session->runs_done; i++)
		seconds += session->elapsed[i] / (double)session->runs_done;
	if (metric->kind == STAT_METRIC_ENERGY) {
		power_summary(session, metric, &power);
		snprintf(out, size, "# %9.3f W", power.mean);
	} else if (strcmp(metric->name, "instructions") == 0 && cycles != NULL) {
		stat_summarize(cycles->samples, runs_of(session, cycles), &other);
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
	struct running run = running_of(session, metric, false, mean_elapsed(session));
	struct stat_summary summary;
	size_t used;

	if (metric->state != STAT_COUNTED) {
		snprintf(line, sizeof(line), "%*s %-2s %-*s (%s)", VALUE_WIDTH,
			 metric->state == STAT_NOT_SUPPORTED ? "<not supported>" : "<not counted>",
			 unit, NAME_WIDTH, metric->name, metric->reason);
		print_line(out, line);
		return;
	}
	stat_summarize(metric->samples, runs_of(session, metric), &summary);
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
	struct row rows[HAECER_MAX_CPUS];
	char value[64], aggr[48] = "", line[1024];
	double cycles;

	metric_cycles_source(session, interval, &cycles);
	cycles *= scale;
	for (size_t i = 0; i < session->metric_count; i++) {
		const struct stat_metric *metric = &session->metrics[i];
		const char *unit = metric->kind == STAT_METRIC_ENERGY ? "J" : "";
		struct running run = running_of(session, metric, interval, seconds);
		size_t count = metric->state == STAT_COUNTED
				       ? metric_rows(session, options, metric,
						     interval ? metric->interval : metric->totals,
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
			derived(session, metric, rows[r].value, cycles, seconds, &derived_value,
				&derived_unit);
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

	if (few_updates(session, &updates))
		fprintf(out, "\n Warning: the command ran for %.3f ms, about %.0f RAPL energy "
			"update%s (one every ~1 ms):\n the energy values are coarse. Measure a "
			"longer run, or repeat it with -r.\n", mean_elapsed(session) * 1e3, updates,
			updates >= 0.5 && updates < 1.5 ? "" : "s");
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
		text_rows(out, options, session, false, "", mean_elapsed(session),
			  session->runs_done > 0 ? 1.0 / (double)session->runs_done : 0.0);
	stat_energy_doubt_text(out, session);
	print_elapsed(out, session);
	print_scope(out, session);
	print_warnings(out, session);
	fprintf(out, "\n");
}

/* ---- JSON ---- */

static void json_summary(FILE *out, const double *samples, size_t count)
{
	struct stat_summary summary;

	stat_summarize(samples, count, &summary);
	const struct {
		const char *name;
		double value;
	} fields[] = {
		{ "mean", summary.mean },     { "stddev", summary.stddev },
		{ "stderr", summary.stderr_mean },
		{ "relative_stddev_percent", summary.relative_percent },
		{ "min", summary.min },       { "max", summary.max },
	};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		fprintf(out, "\"%s\": ", fields[i].name);
		json_write_number(out, fields[i].value);
		fprintf(out, ", ");
	}
	fprintf(out, "\"samples\": [");
	for (size_t i = 0; i < count; i++) {
		fprintf(out, "%s", i > 0 ? ", " : "");
		json_write_number(out, samples[i]);
	}
	fprintf(out, "]");
}

static void json_power(FILE *out, const struct stat_session *session,
		       const struct stat_metric *metric)
{
	size_t count;
	double *watts = power_samples(session, metric, &count);

	if (watts == NULL)
		return;
	fprintf(out, ", \"power\": {\"unit\": \"W\", ");
	json_summary(out, watts, count);
	fprintf(out, "}");
	free(watts);
}

/* A brokered event's kernel times, in perf stat -j's spelling ("event-runtime" ns per run,
 * "pcnt-running") and in total, and whether its count was scaled. */
static void json_running(FILE *out, const struct stat_session *session,
			 const struct stat_metric *metric)
{
	struct running run = running_of(session, metric, false, mean_elapsed(session));

	fprintf(out, ", \"source\": \"%s\", \"event-runtime\": %.0f, \"pcnt-running\": %.2f, "
		"\"time_enabled\": %.0f, \"time_running\": %.0f, \"scaled\": %s", STAT_PERF_BROKER,
		run.ns, run.percent, metric->time_enabled, metric->time_running,
		run.note[0] != '\0' ? "true" : "false");
}

static void json_metric(FILE *out, const struct stat_options *options,
			const struct stat_session *session, const struct stat_metric *metric)
{
	static const char *const states[] = { "counted", "not counted", "not supported" };

	fprintf(out, "    {\"name\": ");
	json_write_string(out, metric->name);
	fprintf(out, ", \"kind\": \"%s\", \"unit\": \"%s\", \"state\": \"%s\", \"counted\": %s",
		metric->kind == STAT_METRIC_ENERGY ? "energy" : "event",
		metric->kind == STAT_METRIC_ENERGY ? "J" : "events", states[metric->state],
		metric->state == STAT_COUNTED ? "true" : "false");
	fprintf(out, ", \"counters\": %zu, \"wanted\": %zu", metric->count, metric->wanted);
	if (metric->brokered)
		json_running(out, session, metric);
	if (metric->reason[0] != '\0') {
		fprintf(out, ", \"reason\": ");
		json_write_string(out, metric->reason);
	}
	if (metric->state == STAT_COUNTED) {
		fprintf(out, ", ");
		json_summary(out, metric->samples, runs_of(session, metric));
		if (metric->kind == STAT_METRIC_ENERGY)
			json_power(out, session, metric);
		stat_energy_doubt_json(out, metric);
		if (options->aggregate != STAT_SUMMED) {
			struct row rows[HAECER_MAX_CPUS];
			size_t count = metric_rows(session, options, metric, metric->totals,
						   1.0 / (double)(session->runs_done > 0
									  ? session->runs_done
									  : 1),
						   rows, HAECER_MAX_CPUS);
			fprintf(out, ", \"%s\": [", options->aggregate == STAT_PER_SOCKET ? "per_socket"
						     : options->aggregate == STAT_PER_DIE ? "per_die"
											 : "per_core");
			for (size_t r = 0; r < count; r++) {
				fprintf(out, "%s{\"id\": \"%s\", \"cpus\": %u, ", r > 0 ? ", " : "",
					rows[r].label, rows[r].cpus);
				if (rows[r].core_type)
					fprintf(out, "\"core_type\": \"%s\", ", rows[r].core_type);
				fprintf(out, "\"mean\": ");
				json_write_number(out, rows[r].value);
				fprintf(out, "}");
			}
			fprintf(out, "]");
		}
	}
	fprintf(out, "}");
}

static void json_scope(FILE *out, const struct stat_session *session)
{
	static const char *const modes[] = { "affinity", "pinned", "all" };
	const struct stat_scope *scope = &session->scope;

	fprintf(out, "  \"scope\": {\"mode\": \"%s\", \"all_cpus\": %s, \"pinned\": %s, ",
		modes[scope->mode], scope->mode == STAT_SCOPE_ALL ? "true" : "false",
		scope->mode == STAT_SCOPE_PINNED ? "true" : "false");
	if (scope->mode == STAT_SCOPE_PINNED)
		fprintf(out, "\"host_cpu\": %d, \"model_cpu\": %u, ", scope->host_cpu,
			scope->model_cpu);
	if (scope->mode == STAT_SCOPE_AFFINITY)
		fprintf(out, "\"host_cpus\": \"%s\", ", scope->host_cpus);
	fprintf(out, "\"cpus\": %u, \"model_cpus\": [", scope->cpu_count);
	for (uint32_t i = 0; i < scope->cpu_count; i++)
		fprintf(out, "%s%u", i > 0 ? ", " : "", scope->cpus[i]);
	fprintf(out, "], \"packages\": %u, \"package_list\": [", scope->package_count);
	for (uint32_t i = 0; i < scope->package_count; i++)
		fprintf(out, "%s%u", i > 0 ? ", " : "", scope->packages[i]);
	fprintf(out, "], \"machine\": ");
	json_write_string(out, scope->machine);
	fprintf(out, ", \"energy_is_package_wide\": true, \"counters_are_per_cpu\": true},\n");
}

void stat_report_json(FILE *out, const struct stat_options *options,
		      const struct stat_session *session)
{
	fprintf(out, "{\n  \"command\": [");
	for (int i = 0; i < options->command_count; i++) {
		fprintf(out, "%s", i > 0 ? ", " : "");
		json_write_string(out, options->command[i]);
	}
	fprintf(out, "],\n  \"runs\": %zu,\n  \"exit_status\": %d,\n", session->runs_done,
		session->exit_status);
	json_scope(out, session);
	fprintf(out, "  \"elapsed\": {\"unit\": \"s\", ");
	json_summary(out, session->elapsed, session->runs_done);
	fprintf(out, "},\n  \"user\": {\"unit\": \"s\", ");
	json_summary(out, session->user, session->runs_done);
	fprintf(out, "},\n  \"sys\": {\"unit\": \"s\", ");
	json_summary(out, session->sys, session->runs_done);
	fprintf(out, "},\n");
	double updates;
	if (few_updates(session, &updates)) {
		fprintf(out, "  \"warning\": \"the command ran for about %.0f RAPL energy updates "
			"(one every ~1 ms): the energy values are coarse\",\n", updates);
	}
	fprintf(out, "  \"metrics\": [\n");
	for (size_t i = 0; i < session->metric_count; i++) {
		json_metric(out, options, session, &session->metrics[i]);
		fprintf(out, "%s\n", i + 1 < session->metric_count ? "," : "");
	}
	fprintf(out, "  ]");
	if (session->read_error[0] != '\0') {
		fprintf(out, ",\n  \"error\": ");
		json_write_string(out, session->read_error);
	}
	fprintf(out, "\n}\n");
}
