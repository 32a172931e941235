/*
 * libclient/haecer_region_formats.c — the region report's formats for tools and scripts: the
 * Callgrind file KCachegrind and callgrind_annotate read, a CSV table (RFC 4180) and a JSON
 * document, each from the flattened tree haecer_region_report.c builds.
 */
#include "libclient/haecer_region_report.h"
#include "common/callgrind.h"
#include "common/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- Callgrind ---- */

static void identifier(const char *name, char *out, size_t size)
{
	size_t used = 0;

	if (name[0] >= '0' && name[0] <= '9' && size > 2)
		out[used++] = 'E';
	for (size_t i = 0; name[i] != '\0' && used + 1 < size; i++) {
		char c = name[i];
		bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9') || c == '_';
		out[used++] = plain ? c : '_';
	}
	out[used] = '\0';
}

/* Event names are identifiers (letters, digits, '_'); a counter whose name becomes one an
 * earlier column has gets its column number appended. */
static void event_name(unsigned column, char *out, size_t size)
{
	char earlier[HAECER_COUNTER_NAME_MAX + 8];

	if (column == REGION_COLUMN_TIME) {
		snprintf(out, size, "Time_ns");
		return;
	}
	if (column == REGION_COLUMN_ENERGY) {
		snprintf(out, size, "PkgWide_nJ");
		return;
	}
	if (region_column_is_energy(column)) {
		/* energy-pkg -> Energy_pkg_nJ */
		identifier(haecer__region_column_name(column), out, size);
		if (out[0] != '\0')
			out[0] = 'E';
		size_t used = strlen(out);
		snprintf(out + used, size - used, "_nJ");
		return;
	}
	identifier(haecer__region_column_name(column), out, size);
	for (unsigned c = 0; c < column; c++) {
		event_name(c, earlier, sizeof(earlier));
		if (strcmp(earlier, out) == 0) {
			size_t used = strlen(out);
			snprintf(out + used, size - used, "_%u", column);
			return;
		}
	}
}

static void write_costs(FILE *out, const struct flat *flat, unsigned line, const uint64_t *costs)
{
	fprintf(out, "%u", line);
	for (unsigned i = 0; i < flat->shown_count; i++)
		fprintf(out, " %llu", (unsigned long long)costs[flat->shown[i]]);
	fprintf(out, "\n");
}

static void write_callgrind_header(FILE *out, const struct flat *flat)
{
	char command[COMMAND_MAX], name[HAECER_COUNTER_NAME_MAX + 8];
	uint64_t totals[REGION_COLUMNS] = { 0 };

	region_report_command_line(command, sizeof(command));
	callgrind_write_preamble(out, "haecer regions (libhaecer)");
	fprintf(out, "pid: %d\ncmd: %s\npart: 1\npositions: line\n", (int)getpid(), command);
	for (unsigned i = 0; i < flat->shown_count; i++) {
		unsigned c = flat->shown[i];
		event_name(c, name, sizeof(name));
		if (c == REGION_COLUMN_TIME)
			fprintf(out, "event: %s : Time (ns)\n", name);
		else if (c == REGION_COLUMN_ENERGY)
			fprintf(out, "event: %s : energy-pkg of the whole package over the region "
				"(nJ, package-wide RAPL)\n", name);
		else if (region_column_is_energy(c))
			fprintf(out, "event: %s : %s charged to the region (nJ, its thread's CPU "
				"time share)\n", name, haecer__region_column_name(c));
		else
			fprintf(out, "event: %s : %s\n", name, haecer__region_column_name(c));
	}
	fprintf(out, "events:");
	for (unsigned i = 0; i < flat->shown_count; i++) {
		event_name(flat->shown[i], name, sizeof(name));
		fprintf(out, " %s", name);
	}
	fprintf(out, "\n");
	/* The sum of every exclusive cost, which is the outermost regions' inclusive cost, and
	 * stays consistent with the file when a counter went away under an open region. */
	for (size_t i = 0; i < flat->count; i++) {
		uint64_t exclusive[REGION_COLUMNS];
		region_report_exclusive_of(flat->nodes[i], flat->columns, exclusive);
		for (unsigned c = 0; c < flat->columns; c++)
			totals[c] += exclusive[c];
	}
	fprintf(out, "summary:");
	for (unsigned i = 0; i < flat->shown_count; i++)
		fprintf(out, " %llu", (unsigned long long)totals[flat->shown[i]]);
	fprintf(out, "\n\n");
}

/* Callgrind's ids: functions (region names, by index) and files, each named the first time. */
struct ids {
	bool *function_defined;
	struct callgrind_files files;
};

static const char *file_of(const struct flat *flat, size_t name, unsigned *line)
{
	const struct region_node *node = flat->name_node[name];

	*line = node->file != NULL ? node->line : 0;
	return node->file != NULL ? node->file : "???";
}

struct arc {
	uint64_t calls;
	uint64_t inclusive[REGION_COLUMNS];
};

/* One function at its file and line: the exclusive cost of every region of that name, then
 * its calls, summed per callee name, at the callee's line (where the call begins). */
static int write_function_costs(FILE *out, const struct flat *flat, size_t name,
				struct arc *arcs, struct ids *ids)
{
	uint64_t self[REGION_COLUMNS] = { 0 }, exclusive[REGION_COLUMNS];
	unsigned line, callee_line;

	memset(arcs, 0, sizeof(*arcs) * flat->name_count);
	for (size_t i = 0; i < flat->count; i++) {
		if (flat->name_of[i] != name)
			continue;
		region_report_exclusive_of(flat->nodes[i], flat->columns, exclusive);
		for (unsigned c = 0; c < flat->columns; c++)
			self[c] += exclusive[c];
		for (size_t j = i + 1; j < flat->count && flat->depth[j] > flat->depth[i]; j++) {
			if (flat->depth[j] != flat->depth[i] + 1)
				continue;
			struct arc *arc = &arcs[flat->name_of[j]];
			arc->calls += flat->nodes[j]->calls;
			for (unsigned c = 0; c < flat->columns; c++)
				arc->inclusive[c] += flat->nodes[j]->inclusive[c];
		}
	}
	if (callgrind_write_file(out, "fl", &ids->files, file_of(flat, name, &line)) < 0)
		return -ENOMEM;
	callgrind_write_function(out, "fn", name + 1, flat->names[name],
				 &ids->function_defined[name]);
	write_costs(out, flat, line, self);
	for (size_t callee = 0; callee < flat->name_count; callee++) {
		if (arcs[callee].calls == 0)
			continue;
		if (callgrind_write_file(out, "cfi", &ids->files,
					 file_of(flat, callee, &callee_line)) < 0)
			return -ENOMEM;
		callgrind_write_function(out, "cfn", callee + 1, flat->names[callee],
					 &ids->function_defined[callee]);
		fprintf(out, "calls=%llu %u\n", (unsigned long long)arcs[callee].calls, callee_line);
		write_costs(out, flat, callee_line, arcs[callee].inclusive);
	}
	return 0;
}

int region_report_write_callgrind(FILE *out, const struct flat *flat)
{
	size_t room = flat->name_count > 0 ? flat->name_count : 1;
	struct arc *arcs = calloc(room, sizeof(*arcs));
	struct ids ids = { .function_defined = calloc(room, sizeof(bool)) };
	int error = 0;

	if (arcs == NULL || ids.function_defined == NULL) {
		error = -ENOMEM;
		goto out;
	}
	write_callgrind_header(out, flat);
	for (size_t name = 0; name < flat->name_count && error == 0; name++)
		error = write_function_costs(out, flat, name, arcs, &ids);
out:
	if (error < 0)
		error = haecer__fail(error, "out of memory for the Callgrind file");
	free(arcs);
	free(ids.function_defined);
	callgrind_files_free(&ids.files);
	return error;
}

/* ---- CSV (RFC 4180) and JSON ---- */

static const char *unit_of(unsigned column)
{
	if (column == REGION_COLUMN_TIME)
		return "ns";
	return region_column_is_energy(column) ? "nJ" : "count";
}

/* The region path of a node, names joined by ';' (as folded stacks join frames), root first. */
static void path_of(const struct region_node *node, char *out, size_t size)
{
	const struct region_node *chain[HAECER_REGION_MAX_DEPTH + 1];
	size_t depth = 0, used = 0;

	for (; node != NULL && node != haecer__region_root() && depth < HAECER_REGION_MAX_DEPTH + 1;
	     node = node->parent)
		chain[depth++] = node;
	out[0] = '\0';
	while (depth-- > 0 && used + 1 < size) {
		int length = snprintf(out + used, size - used, "%s%s", used > 0 ? ";" : "",
				      chain[depth]->name);
		if (length < 0)
			break;
		used += (size_t)length < size - used ? (size_t)length : size - used - 1;
	}
}

static void csv_field(FILE *out, const char *text)
{
	fputc('"', out);
	for (const char *at = text; *at != '\0'; at++) {
		if (*at == '"')
			fputc('"', out);
		fputc(*at, out);
	}
	fputc('"', out);
}

/* An empty field where the region never had the column. */
static void csv_number(FILE *out, const struct region_node *node, unsigned column,
		       uint64_t value)
{
	if (node->counted[column] > 0)
		fprintf(out, "%llu", (unsigned long long)value);
}

void region_report_write_csv(FILE *out, const struct flat *flat, const char *machine)
{
	char path[4096], name[HAECER_COUNTER_NAME_MAX + 16];

	fputs("path,name,depth,file,line,calls,open,abandoned,machine", out);
	for (unsigned i = 0; i < flat->shown_count; i++) {
		unsigned c = flat->shown[i];
		snprintf(name, sizeof(name), "%s_%s", haecer__region_column_name(c), unit_of(c));
		fprintf(out, ",%s,%s_self", name, name);
	}
	for (unsigned i = 0; i < flat->shown_count; i++)
		if (flat->shown[i] >= REGION_COLUMN_SHARE && flat->shown[i] < REGION_COLUMN_COUNTERS)
			fprintf(out, ",%s_no_update_calls", haecer__region_column_name(flat->shown[i]));
	fputs(",spanned_calls,pkg-wide_uncertainty_nJ,measurement_cpu_ns,measurement_nJ,"
	      "measurement_uncertainty_nJ\r\n", out);
	for (size_t n = 0; n < flat->count; n++) {
		const struct region_node *node = flat->nodes[n];
		uint64_t exclusive[REGION_COLUMNS];
		region_report_exclusive_of(node, flat->columns, exclusive);
		path_of(node, path, sizeof(path));
		csv_field(out, path);
		fputc(',', out);
		csv_field(out, node->name);
		fprintf(out, ",%u,", flat->depth[n]);
		csv_field(out, node->file != NULL ? node->file : "");
		fprintf(out, ",%u,%llu,%llu,%llu,", node->line, (unsigned long long)node->calls,
			(unsigned long long)node->open, (unsigned long long)node->abandoned);
		csv_field(out, machine);
		for (unsigned i = 0; i < flat->shown_count; i++) {
			unsigned c = flat->shown[i];
			fputc(',', out);
			csv_number(out, node, c, node->inclusive[c]);
			fputc(',', out);
			csv_number(out, node, c, exclusive[c]);
		}
		for (unsigned i = 0; i < flat->shown_count; i++) {
			unsigned c = flat->shown[i];
			if (c < REGION_COLUMN_SHARE || c >= REGION_COLUMN_COUNTERS)
				continue;
			fputc(',', out);
			csv_number(out, node, c, node->no_update[c - REGION_COLUMN_SHARE]);
		}
		/* Summed over the calls that had both readings (spanned_calls). */
		fprintf(out, ",%llu,%.0f,%llu,%.0f,%.0f\r\n", (unsigned long long)node->spanned,
			node->uncertainty_j * 1e9, (unsigned long long)node->measurement_cpu_ns,
			node->measurement_j * 1e9, node->measurement_doubt_j * 1e9);
	}
}

static void json_values(FILE *out, const struct flat *flat, const struct region_node *node,
			const uint64_t *values)
{
	fputc('{', out);
	for (unsigned i = 0; i < flat->shown_count; i++) {
		unsigned c = flat->shown[i];
		fputs(i > 0 ? ", " : "", out);
		json_write_string(out, haecer__region_column_name(c));
		if (node->counted[c] > 0)
			fprintf(out, ": %llu", (unsigned long long)values[c]);
		else
			fputs(": null", out);
	}
	fputc('}', out);
}

/* Per energy share column the region has: its calls that spanned no update (their 0 is "below
 * one update", not a measured 0). */
static void json_no_update(FILE *out, const struct flat *flat, const struct region_node *node)
{
	bool first = true;

	fputs(", \"no_update_calls\": {", out);
	for (unsigned i = 0; i < flat->shown_count; i++) {
		unsigned c = flat->shown[i];
		if (c < REGION_COLUMN_SHARE || c >= REGION_COLUMN_COUNTERS || node->counted[c] == 0)
			continue;
		fputs(first ? "" : ", ", out);
		first = false;
		json_write_string(out, haecer__region_column_name(c));
		fprintf(out, ": %llu", (unsigned long long)node->no_update[c - REGION_COLUMN_SHARE]);
	}
	fputc('}', out);
}

static void json_path(FILE *out, const struct region_node *node)
{
	if (node->parent != NULL && node->parent != haecer__region_root()) {
		json_path(out, node->parent);
		fputs(", ", out);
	}
	json_write_string(out, node->name);
}

static void write_span_json(FILE *out, const struct span *span, const struct flat *flat)
{
	bool first = true;

	fputs("  \"span\": {", out);
	for (unsigned d = 0; d < REGION_DOMAINS; d++) {
		if (!(span->have & (1u << d)))
			continue;
		fputs(first ? "" : ", ", out);
		first = false;
		json_write_string(out, haecer__region_column_name(REGION_COLUMN_SHARE + d));
		fprintf(out, ": {\"package_nJ\": %llu, \"charged_nJ\": %llu, \"rest_nJ\": %llu, "
			"\"update_max_nJ\": %.0f}",
			(unsigned long long)span->package[d], (unsigned long long)span->charged[d],
			(unsigned long long)region_report_span_rest(span, d),
			flat->max_watts[d] * UPDATE_SECONDS * 1e9);
	}
	fputs("},\n", out);
}

void region_report_write_json(FILE *out, const struct flat *flat, const char *machine,
			      bool simulated, const struct span *span)
{
	char command[COMMAND_MAX];

	region_report_command_line(command, sizeof(command));
	fprintf(out, "{\n  \"creator\": \"haecer regions (libhaecer)\",\n  \"pid\": %d,\n",
		(int)getpid());
	fputs("  \"command\": ", out);
	json_write_string(out, command);
	fputs(",\n  \"machine\": ", out);
	json_write_string(out, machine);
	fprintf(out, ",\n  \"simulated\": %s,\n", simulated ? "true" : "false");
	fputs("  \"energy_method\": \"per stretch between two markers of a thread: each domain's "
	      "energy x the thread's CPU time / (the stretch x the package's host CPUs); pkg-wide: "
	      "the whole package over the region\",\n", out);
	write_span_json(out, span, flat);
	fputs("  \"columns\": [", out);
	for (unsigned i = 0; i < flat->shown_count; i++) {
		fputs(i > 0 ? ", " : "", out);
		fputs("{\"name\": ", out);
		json_write_string(out, haecer__region_column_name(flat->shown[i]));
		fprintf(out, ", \"unit\": \"%s\"}", unit_of(flat->shown[i]));
	}
	fputs("],\n  \"regions\": [", out);
	for (size_t n = 0; n < flat->count; n++) {
		const struct region_node *node = flat->nodes[n];
		uint64_t exclusive[REGION_COLUMNS];
		region_report_exclusive_of(node, flat->columns, exclusive);
		fputs(n > 0 ? ",\n    {" : "\n    {", out);
		fputs("\"path\": [", out);
		json_path(out, node);
		fputs("], \"name\": ", out);
		json_write_string(out, node->name);
		fputs(", \"file\": ", out);
		if (node->file != NULL)
			json_write_string(out, node->file);
		else
			fputs("null", out);
		fprintf(out, ", \"line\": %u, \"calls\": %llu, \"open\": %llu, \"abandoned\": %llu",
			node->line, (unsigned long long)node->calls, (unsigned long long)node->open,
			(unsigned long long)node->abandoned);
		fputs(", \"inclusive\": ", out);
		json_values(out, flat, node, node->inclusive);
		fputs(", \"self\": ", out);
		json_values(out, flat, node, exclusive);
		json_no_update(out, flat, node);
		fprintf(out, ", \"spanned_calls\": %llu, \"pkg_wide_uncertainty_nJ\": %.0f, "
			"\"measurement\": {\"cpu_ns\": %llu, \"nJ\": %.0f, \"uncertainty_nJ\": %.0f}",
			(unsigned long long)node->spanned, node->uncertainty_j * 1e9,
			(unsigned long long)node->measurement_cpu_ns, node->measurement_j * 1e9,
			node->measurement_doubt_j * 1e9);
		fputc('}', out);
	}
	fputs(flat->count > 0 ? "\n  ]\n}\n" : "]\n}\n", out);
}

