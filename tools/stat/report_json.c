/*
 * tools/stat/report_json.c — haecer-stat --json: the report as one JSON object: the command,
 * runs and exit status, where things were counted, elapsed / user / sys time and each metric
 * with the statistics of its runs (mean, stddev, stderr, min, max, the samples), power for
 * energy, its +- and cost, a brokered event's running time in perf stat -j's spelling, and
 * the rows of --per-socket / --per-die / --per-core.
 */
#include "tools/stat/report.h"
#include "common/json.h"

#include <stdlib.h>

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
	double *watts = report_power_samples(session, metric, &count);

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
	struct report_running run =
		report_running_of(session, metric, false, report_mean_elapsed(session));

	fprintf(out, ", \"source\": \"%s\", \"event-runtime\": %.0f, \"pcnt-running\": %.2f, "
		"\"time_enabled\": %.0f, \"time_running\": %.0f, \"scaled\": %s", STAT_PERF_BROKER,
		run.ns, run.percent, metric->time_enabled, metric->time_running,
		run.note[0] != '\0' ? "true" : "false");
}

/* The mean of each socket, die or CPU (--per-socket, --per-die, --per-core). */
static void json_rows(FILE *out, const struct stat_options *options,
		      const struct stat_session *session, const struct stat_metric *metric)
{
	struct report_row rows[HAECER_MAX_CPUS];
	size_t runs = session->runs_done > 0 ? session->runs_done : 1;
	size_t count = report_metric_rows(session, options, metric, metric->totals,
					  1.0 / (double)runs, rows, HAECER_MAX_CPUS);

	fprintf(out, ", \"%s\": [", options->aggregate == STAT_PER_SOCKET ? "per_socket"
				     : options->aggregate == STAT_PER_DIE  ? "per_die"
									   : "per_core");
	for (size_t r = 0; r < count; r++) {
		fprintf(out, "%s{\"id\": \"%s\", \"cpus\": %u, ", r > 0 ? ", " : "", rows[r].label,
			rows[r].cpus);
		if (rows[r].core_type)
			fprintf(out, "\"core_type\": \"%s\", ", rows[r].core_type);
		fprintf(out, "\"mean\": ");
		json_write_number(out, rows[r].value);
		fprintf(out, "}");
	}
	fprintf(out, "]");
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
		json_summary(out, metric->samples, report_runs_of(session, metric));
		if (metric->kind == STAT_METRIC_ENERGY)
			json_power(out, session, metric);
		stat_energy_doubt_json(out, metric);
		if (options->aggregate != STAT_SUMMED)
			json_rows(out, options, session, metric);
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
	if (report_few_updates(session, &updates)) {
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
