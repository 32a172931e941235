/*
 * tools/stat/report_figures.c — the figures every layout of haecer-stat's report prints (text,
 * CSV, JSON, -I): a metric's rows per socket, die or CPU, perf's derived metrics (W, insn per
 * cycle, GHz), the running time of an event the kernel multiplexed, and whether the run was
 * too short for RAPL's energy.
 */
#include "tools/stat/report.h"

#include <stdlib.h>
#include <string.h>

#include "hw/core_type.h"

/* RAPL updates its energy counters about every millisecond (Intel SDM 14.10.3); fewer updates
 * than this within a run leave the energy of a command mostly quantisation. */
#define FEW_ENERGY_UPDATES 10
#define ENERGY_UPDATE_SECONDS 0.000976

size_t report_runs_of(const struct stat_session *session, const struct stat_metric *metric)
{
	return metric->sample_count < session->runs_done ? metric->sample_count
							 : session->runs_done;
}

double *report_power_samples(const struct stat_session *session,
			     const struct stat_metric *metric, size_t *count)
{
	double *watts;

	*count = report_runs_of(session, metric);
	watts = calloc(*count > 0 ? *count : 1, sizeof(*watts));
	for (size_t i = 0; watts != NULL && i < *count; i++)
		watts[i] = session->elapsed[i] > 0 ? metric->samples[i] / session->elapsed[i] : 0.0;
	return watts;
}

/* A hybrid CPU's core type name (hw/core_type.h), NULL elsewhere. */
static const char *core_type_of(const struct stat_session *session, uint32_t cpu)
{
	const struct haecer_machine_info *machine = haecer_context_machine(session->ctx);

	return cpu < machine->cpu_count ? cpu_core_type_name(machine->cpu_core_type[cpu]) : NULL;
}

/* ---- rows (--per-socket, --per-die, --per-core) ---- */

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

size_t report_metric_rows(const struct stat_session *session, const struct stat_options *options,
			  const struct stat_metric *metric, const double *values, double scale,
			  struct report_row *rows, size_t max)
{
	size_t count = 0;

	if (options->aggregate == STAT_SUMMED) {
		rows[0] = (struct report_row){ "", session->scope.cpu_count, 0.0, NULL };
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

double report_mean_elapsed(const struct stat_session *session)
{
	double seconds = 0.0;

	for (size_t i = 0; i < session->runs_done; i++)
		seconds += session->elapsed[i] / (double)session->runs_done;
	return seconds;
}

/* ---- perf's derived metrics ---- */

void report_derived(const struct stat_session *session, const struct stat_metric *metric,
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

double report_cycles(const struct stat_session *session, bool interval)
{
	double sum = 0.0;

	for (size_t i = 0; i < session->metric_count; i++) {
		const struct stat_metric *metric = &session->metrics[i];
		if (strcmp(metric->name, "cycles") != 0 || metric->state != STAT_COUNTED)
			continue;
		const double *values = interval ? metric->interval : metric->totals;
		for (size_t j = 0; j < metric->count; j++)
			sum += values[j];
		break;
	}
	return sum;
}

/* ---- running time (events the kernel multiplexed) ---- */

struct report_running report_running_of(const struct stat_session *session,
					const struct stat_metric *metric, bool interval,
					double seconds)
{
	double runs = session->runs_done > 0 ? (double)session->runs_done : 1.0;
	double enabled = interval ? metric->interval_enabled : metric->time_enabled / runs;
	double running = interval ? metric->interval_running : metric->time_running / runs;
	struct report_running run = { seconds, seconds * 1e9, 100.0, "" };

	if (!metric->brokered || enabled <= 0)
		return run;
	run.ns = running;
	run.percent = stat_running_percent(enabled, running);
	stat_running_note(enabled, running, run.note, sizeof(run.note));
	return run;
}

/* The short-run warning: fewer RAPL updates than FEW_ENERGY_UPDATES in the mean run. */
bool report_few_updates(const struct stat_session *session, double *updates)
{
	*updates = report_mean_elapsed(session) / ENERGY_UPDATE_SECONDS;
	for (size_t i = 0; i < session->metric_count; i++)
		if (session->metrics[i].kind == STAT_METRIC_ENERGY &&
		    session->metrics[i].state == STAT_COUNTED)
			return *updates < FEW_ENERGY_UPDATES;
	return false;
}
