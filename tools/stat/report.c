/*
 * tools/stat/report.c — haecer-stat's report, laid out like perf stat's: right-aligned values,
 * the metric's name, a '#' comment (power, insn per cycle, GHz), the relative spread
 * "( +- x.xx% )" with -r, "<not counted>" with the reason for what the policy refused, the
 * elapsed time, and a note on where things were counted. Or the same as one JSON object.
 */
#include "tools/stat/stat.h"

#include <stdlib.h>
#include <string.h>

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
	}
}

static void print_metric(FILE *out, const struct stat_session *session,
			 const struct stat_metric *metric)
{
	const char *unit = metric->kind == STAT_METRIC_ENERGY ? "J" : "";
	char value[64], spread[80] = "", note[160], line[1024];
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
	if (metric->reason[0] != '\0' && used < sizeof(line))
		snprintf(line + used, sizeof(line) - used, " (%s)", metric->reason);
	print_line(out, line);
}

static void print_elapsed(FILE *out, const struct stat_session *session)
{
	struct stat_summary summary;

	stat_summarize(session->elapsed, session->runs_done, &summary);
	if (session->runs_done > 1)
		fprintf(out, "\n%*.6f +- %.6f seconds time elapsed  ( +- %5.2f%% )\n", VALUE_WIDTH,
			summary.mean, summary.stddev, summary.relative_percent);
	else
		fprintf(out, "\n%*.9f seconds time elapsed\n", VALUE_WIDTH, summary.mean);
}

static void print_packages(FILE *out, const struct stat_scope *scope)
{
	for (uint32_t i = 0; i < scope->package_count; i++)
		fprintf(out, "%s%u", i == 0 ? "" : i + 1 < scope->package_count ? ", " : " and ",
			scope->packages[i]);
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
		fprintf(out, "\n Counted on every CPU the command may run on (host CPUs %s, %u model "
			"CPU%s of %s),\n summed; the command was not pinned, and the counters count "
			"everything that ran\n on those CPUs, not only the command.\n",
			scope->host_cpus, scope->cpu_count, scope->cpu_count == 1 ? "" : "s",
			scope->machine);
	fprintf(out, " Energy is package-wide (package%s ", scope->package_count == 1 ? "" : "s");
	print_packages(out, scope);
	fprintf(out, "%s): it includes everything %s ran.\n",
		scope->package_count == 1 ? "" : ", summed",
		scope->package_count == 1 ? "the package" : "they");
	if (session->read_error[0] != '\0')
		fprintf(out, " %s\n", session->read_error);
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
	for (size_t i = 0; i < session->metric_count; i++)
		print_metric(out, session, &session->metrics[i]);
	print_elapsed(out, session);
	print_scope(out, session);
	fprintf(out, "\n");
}

/* ---- JSON ---- */

static void json_string(FILE *out, const char *text)
{
	fputc('"', out);
	for (const unsigned char *c = (const unsigned char *)text; *c != '\0'; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else if (*c < 0x20 || *c == 0x7f)
			fprintf(out, "\\u%04x", *c);
		else
			fputc(*c, out);
	}
	fputc('"', out);
}

/* A number JSON can carry (no NaN or infinity). */
static void json_number(FILE *out, double value)
{
	if (value != value || value > 1e308 || value < -1e308)
		fprintf(out, "null");
	else
		fprintf(out, "%.17g", value);
}

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
		json_number(out, fields[i].value);
		fprintf(out, ", ");
	}
	fprintf(out, "\"samples\": [");
	for (size_t i = 0; i < count; i++) {
		fprintf(out, "%s", i > 0 ? ", " : "");
		json_number(out, samples[i]);
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

static void json_metric(FILE *out, const struct stat_session *session,
			const struct stat_metric *metric)
{
	static const char *const states[] = { "counted", "not counted", "not supported" };

	fprintf(out, "    {\"name\": ");
	json_string(out, metric->name);
	fprintf(out, ", \"kind\": \"%s\", \"unit\": \"%s\", \"state\": \"%s\", \"counted\": %s",
		metric->kind == STAT_METRIC_ENERGY ? "energy" : "event",
		metric->kind == STAT_METRIC_ENERGY ? "J" : "events", states[metric->state],
		metric->state == STAT_COUNTED ? "true" : "false");
	fprintf(out, ", \"counters\": %zu, \"wanted\": %zu", metric->count, metric->wanted);
	if (metric->reason[0] != '\0') {
		fprintf(out, ", \"reason\": ");
		json_string(out, metric->reason);
	}
	if (metric->state == STAT_COUNTED) {
		fprintf(out, ", ");
		json_summary(out, metric->samples, runs_of(session, metric));
		if (metric->kind == STAT_METRIC_ENERGY)
			json_power(out, session, metric);
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
	json_string(out, scope->machine);
	fprintf(out, ", \"energy_is_package_wide\": true, \"counters_are_per_cpu\": true},\n");
}

void stat_report_json(FILE *out, const struct stat_options *options,
		      const struct stat_session *session)
{
	fprintf(out, "{\n  \"command\": [");
	for (int i = 0; i < options->command_count; i++) {
		fprintf(out, "%s", i > 0 ? ", " : "");
		json_string(out, options->command[i]);
	}
	fprintf(out, "],\n  \"runs\": %zu,\n  \"exit_status\": %d,\n", session->runs_done,
		session->exit_status);
	json_scope(out, session);
	fprintf(out, "  \"elapsed\": {\"unit\": \"s\", ");
	json_summary(out, session->elapsed, session->runs_done);
	fprintf(out, "},\n  \"metrics\": [\n");
	for (size_t i = 0; i < session->metric_count; i++) {
		json_metric(out, session, &session->metrics[i]);
		fprintf(out, "%s\n", i + 1 < session->metric_count ? "," : "");
	}
	fprintf(out, "  ]");
	if (session->read_error[0] != '\0') {
		fprintf(out, ",\n  \"error\": ");
		json_string(out, session->read_error);
	}
	fprintf(out, "\n}\n");
}
