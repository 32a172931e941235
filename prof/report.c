/*
 * prof/report.c — the profile as text, folded stacks (FlameGraph, speedscope, inferno),
 * Callgrind (KCachegrind, callgrind_annotate) and JSON.
 *
 * Every format carries the same numbers: energy of the primary domain (PKG where the machine has
 * it) charged by prof/profile.c; a profile of a simulated CPU says so in every format that has
 * room for it.
 */
#include "prof/prof.h"
#include "common/callgrind.h"
#include "common/json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static long long microjoules(double joules)
{
	return llround(joules * 1e6);
}

static double percent(double part, double whole)
{
	return whole > 0 ? 100.0 * part / whole : 0.0;
}

/* ---- text ---- */

static const struct prof_profile *sort_profile;

static int by_self(const void *a, const void *b)
{
	int d = sort_profile->primary_domain;
	double x = sort_profile->functions[*(const size_t *)a].self_joules[d];
	double y = sort_profile->functions[*(const size_t *)b].self_joules[d];

	return x < y ? 1 : x > y ? -1 : 0;
}

static int by_total(const void *a, const void *b)
{
	int d = sort_profile->primary_domain;
	double x = sort_profile->functions[*(const size_t *)a].total_joules[d];
	double y = sort_profile->functions[*(const size_t *)b].total_joules[d];

	return x < y ? 1 : x > y ? -1 : 0;
}

static size_t *sorted_functions(const struct prof_profile *profile,
				int (*compare)(const void *, const void *))
{
	size_t *order = calloc(profile->function_count + 1, sizeof(*order));

	if (!order)
		return NULL;
	for (size_t i = 0; i < profile->function_count; i++)
		order[i] = i;
	sort_profile = profile;
	qsort(order, profile->function_count, sizeof(*order), compare);
	return order;
}

static void text_header(const struct prof_profile *profile, FILE *out)
{
	int d = profile->primary_domain;

	fprintf(out, "haecer-prof: %s\n", profile->command ? profile->command : "?");
	if (profile->sim_model)
		fprintf(out, "SIMULATED CPU (msrd's sim backend, model %s): these energies come "
			     "from a model, not from hardware\n",
			profile->sim_model);
	if (profile->sampler && strcmp(profile->sampler, "timer") == 0)
		fprintf(out, "sampler: timer (CPU-time timers in the preloaded agent, signal %d; "
			     "they fire on the kernel's tick, so at most its rate per thread)\n",
			profile->timer_signal);
	else
		fprintf(out, "sampler: perf (task clock, opened by %s)\n",
			profile->perf_opened_by && strcmp(profile->perf_opened_by, "msrd") == 0
				? "msrd's perf broker"
				: "haecer-prof");
	fprintf(out, "%" PRIu64 " samples at %u Hz (%" PRIu64 " lost), %.3f s CPU time; ",
		profile->samples, profile->hz, profile->lost_samples, profile->program_ns / 1e9);
	if (profile->unwound_samples)
		fprintf(out, "call chains by CFI unwinding of the copied user stack (%" PRIu64
			     " samples; the rest by frame pointers)",
			profile->unwound_samples);
	else
		fprintf(out, "frame-pointer call chains");
	fprintf(out, ", %" PRIu64 " truncated (no frame pointers or CFI, a stack deeper than "
		     "the copy, or over %u frames)\n",
		profile->truncated_samples, PROF_MAX_FRAMES);
	if (profile->notes[0])
		fprintf(out, "note: %s\n", profile->notes);
	fprintf(out, "energy measured over the run by msrd (backend %s), every package:",
		profile->backend ? profile->backend : "unknown");
	for (unsigned i = 0; i < PROF_MAX_DOMAINS; i++)
		if (profile->domain_mask & (1u << i))
			fprintf(out, " %s %.6f J", prof_domain_name((int)i),
				profile->package_joules[i]);
	fprintf(out, "\n\n");
	fprintf(out, "  %-12s %12s %7s\n", "", prof_domain_name(d), "%");
	fprintf(out, "  %-12s %10.6f J %6.2f%%\n", "program", profile->program_joules[d],
		percent(profile->program_joules[d], profile->package_joules[d]));
	fprintf(out,
		"  %-12s %10.6f J %6.2f%%   (of the host CPUs' time: other processes %.1f %%, "
		"idle %.1f %%)\n",
		"other/idle", profile->other_joules[d],
		percent(profile->other_joules[d], profile->package_joules[d]),
		100.0 * profile->other_busy_share, 100.0 * profile->idle_share);
	fprintf(out, "  %-12s %10.6f J %6.2f%%\n\n", "total", profile->package_joules[d], 100.0);
}

static void text_report(const struct prof_profile *profile, FILE *out)
{
	int d = profile->primary_domain;
	double program = profile->program_joules[d];

	text_header(profile, out);
	fprintf(out, "Per thread (%s energy):\n", prof_domain_name(d));
	fprintf(out, "  %8s %-16s %8s %10s %12s %7s\n", "tid", "name", "samples", "cpu s",
		"energy J", "%prog");
	for (size_t i = 0; i < profile->thread_count; i++) {
		const struct prof_thread *thread = &profile->threads[i];
		if (thread->samples == 0)
			continue;
		fprintf(out, "  %8u %-16s %8" PRIu64 " %10.3f %12.6f %6.2f%%\n", thread->tid,
			thread->comm[0] ? thread->comm : "?", thread->samples, thread->cpu_ns / 1e9,
			thread->joules[d], percent(thread->joules[d], program));
	}
	fprintf(out, "\nTop functions by self energy (%% of the program's %s energy):\n",
		prof_domain_name(d));
	fprintf(out, "  %12s %7s %12s %7s %8s  %s\n", "self J", "self%", "incl J", "incl%",
		"samples", "function (file:line)");
	size_t *order = sorted_functions(profile, by_self);
	for (size_t i = 0; order && i < profile->function_count && i < 30; i++) {
		const struct prof_function *function = &profile->functions[order[i]];
		fprintf(out, "  %12.6f %6.2f%% %12.6f %6.2f%% %8" PRIu64 "  %s (%s:%u)\n",
			function->self_joules[d], percent(function->self_joules[d], program),
			function->total_joules[d], percent(function->total_joules[d], program),
			function->self_samples, function->name, function->file, function->line);
	}
	free(order);
	fprintf(out, "\nTop functions by inclusive energy:\n");
	order = sorted_functions(profile, by_total);
	for (size_t i = 0; order && i < profile->function_count && i < 15; i++) {
		const struct prof_function *function = &profile->functions[order[i]];
		fprintf(out, "  %12.6f %6.2f%%  %s\n", function->total_joules[d],
			percent(function->total_joules[d], program), function->name);
	}
	free(order);
	fprintf(out, "  %12.6f %6.2f%%  total (program)\n", program, 100.0);
	fprintf(out, "  %12.6f %7s  other/idle (not charged to the program)\n",
		profile->other_joules[d], "");
}

/* ---- folded ---- */

static void folded_name(const char *name, FILE *out)
{
	for (const char *c = name; *c; c++)
		fputc(*c == ';' ? ':' : *c == '\n' ? ' ' : *c, out);
}

static void folded_path(const struct prof_path_node *node, FILE *out)
{
	if (!node->parent || !node->parent->function) {
		folded_name(node->function, out);
		return;
	}
	folded_path(node->parent, out);
	fputc(';', out);
	folded_name(node->function, out);
}

static void folded_walk(const struct prof_path_node *node, FILE *out)
{
	if (node->function) {
		long long weight = microjoules(node->self_joules);
		if (weight > 0) {
			folded_path(node, out);
			fprintf(out, " %lld\n", weight);
		}
	}
	for (const struct prof_path_node *child = node->child; child; child = child->sibling)
		folded_walk(child, out);
}

/* ---- callgrind ---- */

static void callgrind_header(const struct prof_profile *profile, FILE *out)
{
	int d = profile->primary_domain;
	long long total = 0;
	uint64_t samples = 0;

	callgrind_write_preamble(out, "haecer-prof");
	fputs("cmd: ", out);
	callgrind_write_printable(out, profile->command ? profile->command : "?");
	fputc('\n', out);
	if (profile->sim_model)
		fprintf(out, "desc: Simulated CPU: model %s, energies from a model, not hardware\n",
			profile->sim_model);
	fprintf(out, "desc: Energy: %s domain, microjoules, charged by CPU-time share; msrd "
		"backend %s\n", prof_domain_name(d), profile->backend ? profile->backend : "unknown");
	fprintf(out, "positions: line\nevents: uJ Samples\n");
	for (size_t i = 0; i < profile->function_count; i++)
		for (size_t l = 0; l < profile->functions[i].line_count; l++)
			total += microjoules(profile->functions[i].line_joules[l]);
	for (size_t i = 0; i < profile->function_count; i++)
		samples += profile->functions[i].self_samples;
	fprintf(out, "summary: %lld %" PRIu64 "\n\n", total, samples);
}

/* Names compressed by common/callgrind.h: a function's id is its index + 1. */
static int callgrind_report(const struct prof_profile *profile, FILE *out)
{
	struct callgrind_files files = { 0 };
	bool *named = calloc(profile->function_count + 1, sizeof(*named));
	int error = 0;

	if (named == NULL)
		return -ENOMEM;
	callgrind_header(profile, out);
	for (size_t i = 0; i < profile->function_count && error == 0; i++) {
		const struct prof_function *function = &profile->functions[i];
		error = callgrind_write_file(out, "fl", &files, function->file);
		if (error < 0)
			break;
		callgrind_write_function(out, "fn", i + 1, function->name, &named[i]);
		for (size_t l = 0; l < function->line_count; l++) {
			fprintf(out, "%u %lld %" PRIu64 "\n", function->lines[l],
				microjoules(function->line_joules[l]), function->line_samples[l]);
		}
		for (size_t c = 0; c < function->call_count && error == 0; c++) {
			const struct prof_call *call = &function->calls[c];
			const struct prof_function *callee = &profile->functions[call->callee];
			error = callgrind_write_file(out, "cfi", &files, callee->file);
			if (error < 0)
				break;
			callgrind_write_function(out, "cfn", call->callee + 1, callee->name,
						 &named[call->callee]);
			fprintf(out, "calls=%" PRIu64 " %u\n%u %lld %" PRIu64 "\n", call->count,
				callee->line, call->line, microjoules(call->joules), call->count);
		}
		fputc('\n', out);
	}
	callgrind_files_free(&files);
	free(named);
	return error;
}

/* ---- json ---- */

static void json_domains(const struct prof_profile *profile, const double *joules, FILE *out)
{
	bool first = true;

	fputc('{', out);
	for (unsigned i = 0; i < PROF_MAX_DOMAINS; i++) {
		if (!(profile->domain_mask & (1u << i)))
			continue;
		fprintf(out, "%s\"%s\": %.9g", first ? "" : ", ", prof_domain_name((int)i),
			joules[i]);
		first = false;
	}
	fputc('}', out);
}

static void json_paths(const struct prof_path_node *node, bool *first, FILE *out)
{
	if (node->function && node->self_samples > 0) {
		fprintf(out, "%s\n    {\"path\": [", *first ? "" : ",");
		*first = false;
		const struct prof_path_node *chain[PROF_MAX_FRAMES * 2];
		size_t depth = 0;
		for (const struct prof_path_node *up = node; up && up->function &&
							     depth < PROF_MAX_FRAMES * 2;
		     up = up->parent)
			chain[depth++] = up;
		for (size_t i = depth; i-- > 0;) {
			json_write_string(out, chain[i]->function);
			if (i)
				fputs(", ", out);
		}
		fprintf(out, "], \"joules\": %.9g, \"samples\": %" PRIu64 "}", node->self_joules,
			node->self_samples);
	}
	for (const struct prof_path_node *child = node->child; child; child = child->sibling)
		json_paths(child, first, out);
}

static void json_report(const struct prof_profile *profile, FILE *out)
{
	fprintf(out, "{\n  \"tool\": \"haecer-prof\",\n  \"command\": ");
	json_write_string(out, profile->command);
	fprintf(out, ",\n  \"simulated\": %s,\n  \"sim_model\": ", profile->sim_model ? "true" : "false");
	if (profile->sim_model)
		json_write_string(out, profile->sim_model);
	else
		fputs("null", out);
	fprintf(out, ",\n  \"backend\": ");
	json_write_string(out, profile->backend ? profile->backend : "unknown");
	fprintf(out, ",\n  \"frequency_hz\": %u,\n  \"primary_domain\": \"%s\",\n", profile->hz,
		prof_domain_name(profile->primary_domain));
	fprintf(out, "  \"sampler\": ");
	json_write_string(out, profile->sampler ? profile->sampler : "perf");
	fprintf(out, ",\n  \"perf_opened_by\": ");
	if (profile->perf_opened_by)
		json_write_string(out, profile->perf_opened_by);
	else
		fputs("null", out);
	fprintf(out, ",\n  \"unwound_samples\": %" PRIu64 ",\n", profile->unwound_samples);
	fprintf(out, "  \"samples\": %" PRIu64 ", \"attributed_samples\": %" PRIu64
		     ", \"lost_samples\": %" PRIu64 ", \"truncated_samples\": %" PRIu64 ",\n",
		profile->samples, profile->attributed_samples, profile->lost_samples,
		profile->truncated_samples);
	fprintf(out, "  \"program_cpu_seconds\": %.9g,\n", profile->program_ns / 1e9);
	fprintf(out, "  \"energy_joules\": {\"total\": ");
	json_domains(profile, profile->package_joules, out);
	fprintf(out, ", \"program\": ");
	json_domains(profile, profile->program_joules, out);
	fprintf(out, ", \"other_idle\": ");
	json_domains(profile, profile->other_joules, out);
	fprintf(out, "},\n  \"host_cpu_time_share\": {\"other_processes\": %.6g, \"idle\": %.6g},\n",
		profile->other_busy_share, profile->idle_share);
	fprintf(out, "  \"threads\": [");
	bool first = true;
	for (size_t i = 0; i < profile->thread_count; i++) {
		const struct prof_thread *thread = &profile->threads[i];
		if (thread->samples == 0)
			continue;
		fprintf(out, "%s\n    {\"pid\": %u, \"tid\": %u, \"name\": ", first ? "" : ",",
			thread->pid, thread->tid);
		json_write_string(out, thread->comm);
		fprintf(out, ", \"samples\": %" PRIu64 ", \"cpu_seconds\": %.9g, \"joules\": ",
			thread->samples, thread->cpu_ns / 1e9);
		json_domains(profile, thread->joules, out);
		fputc('}', out);
		first = false;
	}
	fprintf(out, "\n  ],\n  \"functions\": [");
	for (size_t i = 0; i < profile->function_count; i++) {
		const struct prof_function *function = &profile->functions[i];
		fprintf(out, "%s\n    {\"name\": ", i ? "," : "");
		json_write_string(out, function->name);
		fprintf(out, ", \"file\": ");
		json_write_string(out, function->file);
		fprintf(out, ", \"line\": %u, \"self_samples\": %" PRIu64
			     ", \"total_samples\": %" PRIu64 ", \"self_cpu_seconds\": %.9g"
			     ", \"self_joules\": ",
			function->line, function->self_samples, function->total_samples,
			function->self_ns / 1e9);
		json_domains(profile, function->self_joules, out);
		fprintf(out, ", \"total_joules\": ");
		json_domains(profile, function->total_joules, out);
		fputc('}', out);
	}
	fprintf(out, "\n  ],\n  \"paths\": [");
	first = true;
	json_paths(&profile->root, &first, out);
	fprintf(out, "\n  ]\n}\n");
}

int prof_report(const struct prof_profile *profile, enum prof_format format, FILE *out)
{
	int status;

	switch (format) {
	case PROF_TEXT: text_report(profile, out); break;
	case PROF_FOLDED: folded_walk(&profile->root, out); break;
	case PROF_CALLGRIND:
		status = callgrind_report(profile, out);
		if (status < 0)
			return status;
		break;
	case PROF_JSON: json_report(profile, out); break;
	case PROF_SVG: return prof_report_svg(profile, out);
	}
	if (fflush(out) != 0 || ferror(out))
		return -EIO;
	return 0;
}
