/*
 * libclient/haecer_region_report.c — the region report: a text table of the region tree
 * (inclusive and exclusive per region, like the GHC profiler's cost-centre stacks, seed 000) and
 * a Callgrind file (format version 1) that KCachegrind and callgrind_annotate read, as seed 002
 * produced for KCachegrind: one `fn=` per region name with its exclusive cost, `cfn=`/`calls=`
 * lines for the regions it encloses with their inclusive cost, each at the file and line of the
 * region's first begin (fl=, cfi=, positions); a CSV table and a JSON document of the same
 * numbers for scripts. Costs are integers: ns, nJ and event counts.
 */
#include "libclient/haecer_region_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME_WIDTH_MAX 60
#define COMMAND_MAX 512u

/* The tree flattened in depth-first order, and region names made unique for Callgrind. */
struct flat {
	const struct region_node **nodes;
	unsigned *depth;
	size_t *name_of;          /* index into names */
	size_t count;
	const char **names;
	const struct region_node **name_node; /* the first node of each name with a call site */
	size_t name_count;
	unsigned columns;
	unsigned shown[REGION_COLUMNS];     /* columns in the reports, in order */
	unsigned shown_count;
	unsigned primary;                   /* the energy column with watts and +-J/call */
	double max_watts[REGION_DOMAINS];   /* per share slot (haecer__region_max_watts) */
};

/* ---- helpers ---- */

/* Replace what would break a line-based format (control characters) in a copy of text. */
static void printable(const char *text, char *out, size_t size)
{
	size_t i = 0;

	for (; text[i] != '\0' && i + 1 < size; i++)
		out[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
	out[i] = '\0';
}

static void command_line(char *out, size_t size)
{
	char buffer[COMMAND_MAX];
	FILE *file = fopen("/proc/self/cmdline", "r");
	size_t got = 0;

	if (file != NULL) {
		got = fread(buffer, 1, sizeof(buffer) - 1, file);
		fclose(file);
	}
	while (got > 0 && buffer[got - 1] == '\0')
		got--;
	for (size_t i = 0; i < got; i++)
		if (buffer[i] == '\0')
			buffer[i] = ' ';
	buffer[got] = '\0';
	printable(buffer, out, size);
}

static void exclusive_of(const struct region_node *node, unsigned columns, uint64_t *out)
{
	for (unsigned c = 0; c < columns; c++)
		out[c] = node->inclusive[c];
	for (const struct region_node *child = node->children; child != NULL; child = child->next)
		for (unsigned c = 0; c < columns; c++)
			out[c] = out[c] > child->inclusive[c] ? out[c] - child->inclusive[c] : 0;
}

/* ---- flattening ---- */

static size_t count_nodes(const struct region_node *node)
{
	size_t count = 0;

	for (const struct region_node *child = node->children; child != NULL; child = child->next)
		count += 1 + count_nodes(child);
	return count;
}

static size_t name_index(struct flat *flat, const struct region_node *node)
{
	for (size_t i = 0; i < flat->name_count; i++) {
		if (strcmp(flat->names[i], node->name) == 0) {
			if (flat->name_node[i]->file == NULL && node->file != NULL)
				flat->name_node[i] = node;
			return i;
		}
	}
	flat->names[flat->name_count] = node->name;
	flat->name_node[flat->name_count] = node;
	return flat->name_count++;
}

/* Children are kept newest first: visit them in the order they first began. */
static int flatten(struct flat *flat, const struct region_node *node, unsigned depth)
{
	const struct region_node **ordered;
	size_t count = 0, at = 0;
	int error = 0;

	for (const struct region_node *child = node->children; child != NULL; child = child->next)
		count++;
	if (count == 0)
		return 0;
	ordered = calloc(count, sizeof(*ordered));
	if (ordered == NULL)
		return haecer__fail(-ENOMEM, "out of memory for the region report");
	for (const struct region_node *child = node->children; child != NULL; child = child->next)
		ordered[count - ++at] = child;
	for (size_t i = 0; i < count && error == 0; i++) {
		size_t index = flat->count++;
		flat->nodes[index] = ordered[i];
		flat->depth[index] = depth;
		flat->name_of[index] = name_index(flat, ordered[i]);
		error = flatten(flat, ordered[i], depth + 1);
	}
	free(ordered);
	return error;
}

static void flat_free(struct flat *flat)
{
	free(flat->nodes);
	free(flat->depth);
	free(flat->name_of);
	free(flat->names);
	free(flat->name_node);
}

/* Time always; an energy or counter column when some region has it. Energy first: the shares
 * (energy-pkg first), then pkg-wide. */
static void choose_columns(struct flat *flat)
{
	static const unsigned order[] = { REGION_COLUMN_SHARE, REGION_COLUMN_SHARE + 1,
					  REGION_COLUMN_SHARE + 2, REGION_COLUMN_SHARE + 3,
					  REGION_COLUMN_SHARE + 4, REGION_COLUMN_ENERGY };

	flat->shown[flat->shown_count++] = REGION_COLUMN_TIME;
	flat->primary = REGION_COLUMNS;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		bool used = false;
		for (size_t n = 0; n < flat->count && !used; n++)
			used = flat->nodes[n]->counted[order[i]] > 0;
		if (!used)
			continue;
		if (flat->primary == REGION_COLUMNS)
			flat->primary = order[i];
		flat->shown[flat->shown_count++] = order[i];
	}
	for (unsigned c = REGION_COLUMN_COUNTERS; c < flat->columns; c++)
		flat->shown[flat->shown_count++] = c;
}

static int flat_build(struct flat *flat)
{
	size_t count = count_nodes(haecer__region_root());
	size_t room = count > 0 ? count : 1;
	int error;

	memset(flat, 0, sizeof(*flat));
	flat->columns = haecer__region_column_count();
	flat->nodes = calloc(room, sizeof(*flat->nodes));
	flat->depth = calloc(room, sizeof(*flat->depth));
	flat->name_of = calloc(room, sizeof(*flat->name_of));
	flat->names = calloc(room, sizeof(*flat->names));
	flat->name_node = calloc(room, sizeof(*flat->name_node));
	if (flat->nodes == NULL || flat->depth == NULL || flat->name_of == NULL ||
	    flat->names == NULL || flat->name_node == NULL) {
		flat_free(flat);
		return haecer__fail(-ENOMEM, "out of memory for the region report");
	}
	error = flatten(flat, haecer__region_root(), 0);
	if (error < 0)
		flat_free(flat);
	else
		choose_columns(flat);
	return error;
}

/* ---- the text table ---- */

#define UPDATE_SECONDS 0.001 /* RAPL updates "approximately every 1 ms" (SDM vol. 3B 14.9.3) */

struct cell {
	char text[40];
	bool partial;
	bool no_update;                     /* some calls spanned no update of the register */
};

static void format_value(unsigned column, uint64_t value, char *out, size_t size)
{
	if (column == REGION_COLUMN_TIME)
		snprintf(out, size, "%.3f", (double)value / 1e6);
	else if (region_column_is_energy(column))
		snprintf(out, size, "%.6f", (double)value / 1e9);
	else
		snprintf(out, size, "%llu", (unsigned long long)value);
}

static void cell_of(const struct region_node *node, unsigned column, uint64_t value,
		    struct cell *cell)
{
	unsigned slot = region_column_slot(column);

	cell->partial = node->counted[column] > 0 && node->counted[column] < node->calls;
	cell->no_update = slot < REGION_DOMAINS && node->counted[column] > 0 &&
			  node->no_update[slot] > 0;
	if (node->counted[column] == 0) {
		snprintf(cell->text, sizeof(cell->text), "-");
		return;
	}
	format_value(column, value, cell->text, sizeof(cell->text));
	if (cell->partial)
		strcat(cell->text, "*");
	if (cell->no_update)
		strcat(cell->text, "?");
}

static int column_width(unsigned column)
{
	int width = (int)strlen(haecer__region_column_name(column));

	if (column == REGION_COLUMN_TIME || region_column_is_energy(column))
		return width + 2 > 12 ? width + 2 : 12;
	return width > 14 ? width : 14;
}

static void print_header(FILE *out, const struct flat *flat, int name_width)
{
	fprintf(out, "%-*s %10s", name_width, "region", "calls");
	for (unsigned i = 0; i < flat->shown_count; i++) {
		unsigned c = flat->shown[i];
		char name[HAECER_COUNTER_NAME_MAX + 8];
		if (c == REGION_COLUMN_TIME)
			snprintf(name, sizeof(name), "time ms");
		else if (region_column_is_energy(c))
			snprintf(name, sizeof(name), "%s J", haecer__region_column_name(c));
		else
			snprintf(name, sizeof(name), "%s", haecer__region_column_name(c));
		fprintf(out, " %*s %*s", column_width(c), name, column_width(c), "self");
		if (c == flat->primary)
			fprintf(out, " %9s %11s", "watts", "+-J/call");
	}
	fprintf(out, "\n");
}

/* What one call of a region can be off by in an energy column: one update's energy at the
 * region's own power, or at the domain's maximum power when a call spanned no update (its own
 * power then says nothing: the register did not move). */
static double per_call_uncertainty(const struct flat *flat, const struct region_node *node,
				   unsigned column, double watts)
{
	unsigned slot = region_column_slot(column);

	if (slot < REGION_DOMAINS && node->no_update[slot] > 0 && flat->max_watts[slot] > watts)
		watts = flat->max_watts[slot];
	return watts * UPDATE_SECONDS;
}

/* Bit 0: some cell was measured in only some calls; bit 1: some cell had calls that spanned no
 * update. */
static unsigned print_row(FILE *out, const struct flat *flat, size_t index, int name_width)
{
	const struct region_node *node = flat->nodes[index];
	uint64_t exclusive[REGION_COLUMNS];
	char name[HAECER_REGION_NAME_MAX + 1];
	unsigned marks = 0;

	printable(node->name, name, sizeof(name));
	exclusive_of(node, flat->columns, exclusive);
	fprintf(out, "%*s%-*s %10llu", (int)(2 * flat->depth[index]), "",
		name_width - (int)(2 * flat->depth[index]), name, (unsigned long long)node->calls);
	for (unsigned i = 0; i < flat->shown_count; i++) {
		unsigned c = flat->shown[i];
		struct cell inclusive, self;
		cell_of(node, c, node->inclusive[c], &inclusive);
		cell_of(node, c, exclusive[c], &self);
		marks |= (inclusive.partial ? 1u : 0u) | (inclusive.no_update ? 2u : 0u);
		fprintf(out, " %*s %*s", column_width(c), inclusive.text, column_width(c), self.text);
		if (c != flat->primary)
			continue;
		if (node->counted[c] > 0 && node->inclusive[REGION_COLUMN_TIME] > 0) {
			double watts = (double)node->inclusive[c] /
				       (double)node->inclusive[REGION_COLUMN_TIME];

			/* A call's energy is a difference of two register readings, each up to
			 * one update (about 1 ms) old: off by up to one update's energy. */
			fprintf(out, " %9.3f %11.6f", watts,
				per_call_uncertainty(flat, node, c, watts));
		} else if (node->counted[c] > 0 && node->no_update[region_column_slot(c)] > 0) {
			fprintf(out, " %9s %11.6f", "-", per_call_uncertainty(flat, node, c, 0.0));
		} else {
			fprintf(out, " %9s %11s", "-", "-");
		}
	}
	if (node->open > 0)
		fprintf(out, "  (%llu open, not counted)", (unsigned long long)node->open);
	if (node->abandoned > 0)
		fprintf(out, "  (%llu not ended: thread exited)",
			(unsigned long long)node->abandoned);
	fprintf(out, "\n");
	return marks;
}

/* The footnote of the ? mark: which domains had calls that spanned no update, and what such a
 * call can hold. */
static void write_no_update_note(FILE *out, const struct flat *flat)
{
	fprintf(out, "? some calls spanned no update: the register of that domain read the same at "
		"their end as at their begin (it changes about every 1 ms), so their energy is not "
		"measured as 0 but is below one update, up to the domain's maximum power x 1 ms");
	for (unsigned d = 0; d < REGION_DOMAINS; d++) {
		uint64_t calls = 0;
		for (size_t i = 0; i < flat->count; i++)
			calls += flat->nodes[i]->no_update[d];
		if (calls == 0)
			continue;
		fprintf(out, "; %s: %llu such calls, ", haecer__region_column_name(REGION_COLUMN_SHARE + d),
			(unsigned long long)calls);
		if (flat->max_watts[d] > 0)
			fprintf(out, "up to %.6f J each (%.3f W x 1 ms)",
				flat->max_watts[d] * UPDATE_SECONDS, flat->max_watts[d]);
		else
			fprintf(out, "maximum power unknown");
	}
	fprintf(out, "\n");
}

static void write_text(FILE *out, const struct flat *flat)
{
	int name_width = 6;
	unsigned marks = 0;

	for (size_t i = 0; i < flat->count; i++) {
		int width = (int)(2 * flat->depth[i] + strlen(flat->nodes[i]->name));
		if (width > name_width)
			name_width = width < NAME_WIDTH_MAX ? width : NAME_WIDTH_MAX;
	}
	print_header(out, flat, name_width);
	for (size_t i = 0; i < flat->count; i++)
		marks |= print_row(out, flat, i, name_width);
	if (flat->count == 0)
		fprintf(out, "(no regions)\n");
	if (marks & 1u)
		fprintf(out, "* measured in only some of the calls (refused or unreadable in the "
			"others)\n");
	if (flat->primary < REGION_COLUMNS)
		fprintf(out, "+-J/call: the energy registers change about every 1 ms, so one call's "
			"%s is off by up to one update's energy (watts x 1 ms); the other energy "
			"columns likewise at their own watts\n",
			haecer__region_column_name(flat->primary));
	if (marks & 2u)
		write_no_update_note(out, flat);
}

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

	command_line(command, sizeof(command));
	fprintf(out, "# callgrind format\nversion: 1\ncreator: haecer regions (libhaecer)\n");
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
		exclusive_of(flat->nodes[i], flat->columns, exclusive);
		for (unsigned c = 0; c < flat->columns; c++)
			totals[c] += exclusive[c];
	}
	fprintf(out, "summary:");
	for (unsigned i = 0; i < flat->shown_count; i++)
		fprintf(out, " %llu", (unsigned long long)totals[flat->shown[i]]);
	fprintf(out, "\n\n");
}

/* Callgrind's ids: functions (region names) and files, each named the first time. */
struct ids {
	bool *function_defined;
	const char **files;
	size_t file_count;
};

static const char *file_of(const struct flat *flat, size_t name, unsigned *line)
{
	const struct region_node *node = flat->name_node[name];

	*line = node->file != NULL ? node->line : 0;
	return node->file != NULL ? node->file : "???";
}

static void write_file(FILE *out, const char *key, struct ids *ids, const char *file)
{
	char text[1024];

	for (size_t i = 0; i < ids->file_count; i++) {
		if (strcmp(ids->files[i], file) == 0) {
			fprintf(out, "%s=(%zu)\n", key, i + 1);
			return;
		}
	}
	ids->files[ids->file_count++] = file;
	printable(file, text, sizeof(text));
	fprintf(out, "%s=(%zu) %s\n", key, ids->file_count, text);
}

/* fn=/cfn= lines: the name with its id the first time, the id alone afterwards. */
static void write_function(FILE *out, const char *key, const struct flat *flat, size_t name,
			   struct ids *ids)
{
	char text[HAECER_REGION_NAME_MAX + 1];

	if (ids->function_defined[name]) {
		fprintf(out, "%s=(%zu)\n", key, name + 1);
		return;
	}
	printable(flat->names[name], text, sizeof(text));
	fprintf(out, "%s=(%zu) %s\n", key, name + 1, text);
	ids->function_defined[name] = true;
}

struct arc {
	uint64_t calls;
	uint64_t inclusive[REGION_COLUMNS];
};

/* One function at its file and line: the exclusive cost of every region of that name, then
 * its calls, summed per callee name, at the callee's line (where the call begins). */
static void write_function_costs(FILE *out, const struct flat *flat, size_t name,
				 struct arc *arcs, struct ids *ids)
{
	uint64_t self[REGION_COLUMNS] = { 0 }, exclusive[REGION_COLUMNS];
	unsigned line, callee_line;

	memset(arcs, 0, sizeof(*arcs) * flat->name_count);
	for (size_t i = 0; i < flat->count; i++) {
		if (flat->name_of[i] != name)
			continue;
		exclusive_of(flat->nodes[i], flat->columns, exclusive);
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
	write_file(out, "fl", ids, file_of(flat, name, &line));
	write_function(out, "fn", flat, name, ids);
	write_costs(out, flat, line, self);
	for (size_t callee = 0; callee < flat->name_count; callee++) {
		if (arcs[callee].calls == 0)
			continue;
		write_file(out, "cfi", ids, file_of(flat, callee, &callee_line));
		write_function(out, "cfn", flat, callee, ids);
		fprintf(out, "calls=%llu %u\n", (unsigned long long)arcs[callee].calls, callee_line);
		write_costs(out, flat, callee_line, arcs[callee].inclusive);
	}
}

static int write_callgrind(FILE *out, const struct flat *flat)
{
	size_t room = flat->name_count > 0 ? flat->name_count : 1;
	struct arc *arcs = calloc(room, sizeof(*arcs));
	struct ids ids = { .function_defined = calloc(room, sizeof(bool)),
			   .files = calloc(room, sizeof(char *)) };
	int error = 0;

	if (arcs == NULL || ids.function_defined == NULL || ids.files == NULL) {
		error = haecer__fail(-ENOMEM, "out of memory for the Callgrind file");
		goto out;
	}
	write_callgrind_header(out, flat);
	for (size_t name = 0; name < flat->name_count; name++)
		write_function_costs(out, flat, name, arcs, &ids);
out:
	free(arcs);
	free(ids.function_defined);
	free(ids.files);
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

static void write_csv(FILE *out, const struct flat *flat, const char *machine)
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
	fputs("\r\n", out);
	for (size_t n = 0; n < flat->count; n++) {
		const struct region_node *node = flat->nodes[n];
		uint64_t exclusive[REGION_COLUMNS];
		exclusive_of(node, flat->columns, exclusive);
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
		fputs("\r\n", out);
	}
}

/* Length of the valid UTF-8 sequence at text, 0 when it is not one. */
static size_t utf8_length(const unsigned char *text)
{
	size_t length = text[0] >= 0xf0 && text[0] <= 0xf4 ? 4
			: text[0] >= 0xe0			  ? 3
			: text[0] >= 0xc2 && text[0] < 0xe0	  ? 2
								  : 0;

	for (size_t i = 1; i < length; i++)
		if ((text[i] & 0xc0) != 0x80)
			return 0;
	return length;
}

/* A JSON string; bytes that are not UTF-8 become U+FFFD. */
static void json_string(FILE *out, const char *text)
{
	const unsigned char *at = (const unsigned char *)text;

	fputc('"', out);
	while (*at != '\0') {
		if (*at == '"' || *at == '\\') {
			fprintf(out, "\\%c", *at++);
		} else if (*at < 0x20 || *at == 0x7f) {
			fprintf(out, "\\u%04x", *at++);
		} else if (*at < 0x80) {
			fputc(*at++, out);
		} else {
			size_t length = utf8_length(at);
			if (length == 0) {
				fputs("\\ufffd", out);
				at++;
			} else {
				fwrite(at, 1, length, out);
				at += length;
			}
		}
	}
	fputc('"', out);
}

static void json_values(FILE *out, const struct flat *flat, const struct region_node *node,
			const uint64_t *values)
{
	fputc('{', out);
	for (unsigned i = 0; i < flat->shown_count; i++) {
		unsigned c = flat->shown[i];
		fputs(i > 0 ? ", " : "", out);
		json_string(out, haecer__region_column_name(c));
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
		json_string(out, haecer__region_column_name(c));
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
	json_string(out, node->name);
}

/* ---- the span: what the package drew while regions ran, and how much of it they were charged ---- */

struct span {
	uint64_t package[REGION_DOMAINS]; /* nJ from the first region reading to the last */
	uint64_t charged[REGION_DOMAINS]; /* nJ charged to the outermost regions */
	uint32_t have;
};

static void span_charged(struct span *span, const struct flat *flat)
{
	for (size_t i = 0; i < flat->count; i++)
		if (flat->depth[i] == 0)
			for (unsigned d = 0; d < REGION_DOMAINS; d++)
				span->charged[d] += flat->nodes[i]->inclusive[REGION_COLUMN_SHARE + d];
}

static uint64_t span_rest(const struct span *span, unsigned d)
{
	return span->package[d] > span->charged[d] ? span->package[d] - span->charged[d] : 0;
}

static void write_span_text(FILE *out, const struct span *span, const struct flat *flat)
{
	if (span->have == 0)
		return;
	fprintf(out, "from the first region reading to the last (every package):");
	for (unsigned d = 0; d < REGION_DOMAINS; d++) {
		if (!(span->have & (1u << d)))
			continue;
		fprintf(out, "\n  %-12s %12.6f J drawn, %12.6f J charged to regions, %12.6f J the rest",
			haecer__region_column_name(REGION_COLUMN_SHARE + d),
			(double)span->package[d] / 1e9, (double)span->charged[d] / 1e9,
			(double)span_rest(span, d) / 1e9);
		/* Not a measured 0: the register never moved while regions ran. */
		if (span->package[d] == 0)
			fprintf(out, " (its register did not change: the domain drew under one unit "
				"or is not counting; up to %.6f J per update)",
				flat->max_watts[d] * UPDATE_SECONDS);
	}
	fprintf(out, "\nthe rest: what the program outside its regions, other processes and idle "
		"drew; no region is charged with it\n");
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
		json_string(out, haecer__region_column_name(REGION_COLUMN_SHARE + d));
		fprintf(out, ": {\"package_nJ\": %llu, \"charged_nJ\": %llu, \"rest_nJ\": %llu, "
			"\"update_max_nJ\": %.0f}",
			(unsigned long long)span->package[d], (unsigned long long)span->charged[d],
			(unsigned long long)span_rest(span, d),
			flat->max_watts[d] * UPDATE_SECONDS * 1e9);
	}
	fputs("},\n", out);
}

static void write_json(FILE *out, const struct flat *flat, const char *machine, bool simulated,
		       const struct span *span)
{
	char command[COMMAND_MAX];

	command_line(command, sizeof(command));
	fprintf(out, "{\n  \"creator\": \"haecer regions (libhaecer)\",\n  \"pid\": %d,\n",
		(int)getpid());
	fputs("  \"command\": ", out);
	json_string(out, command);
	fputs(",\n  \"machine\": ", out);
	json_string(out, machine);
	fprintf(out, ",\n  \"simulated\": %s,\n", simulated ? "true" : "false");
	fputs("  \"energy_method\": \"per stretch between two markers of a thread: each domain's "
	      "energy x the thread's CPU time / (the stretch x the package's host CPUs); pkg-wide: "
	      "the whole package over the region\",\n", out);
	write_span_json(out, span, flat);
	fputs("  \"columns\": [", out);
	for (unsigned i = 0; i < flat->shown_count; i++) {
		fputs(i > 0 ? ", " : "", out);
		fputs("{\"name\": ", out);
		json_string(out, haecer__region_column_name(flat->shown[i]));
		fprintf(out, ", \"unit\": \"%s\"}", unit_of(flat->shown[i]));
	}
	fputs("],\n  \"regions\": [", out);
	for (size_t n = 0; n < flat->count; n++) {
		const struct region_node *node = flat->nodes[n];
		uint64_t exclusive[REGION_COLUMNS];
		exclusive_of(node, flat->columns, exclusive);
		fputs(n > 0 ? ",\n    {" : "\n    {", out);
		fputs("\"path\": [", out);
		json_path(out, node);
		fputs("], \"name\": ", out);
		json_string(out, node->name);
		fputs(", \"file\": ", out);
		if (node->file != NULL)
			json_string(out, node->file);
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
		fputc('}', out);
	}
	fputs(flat->count > 0 ? "\n  ]\n}\n" : "]\n}\n", out);
}

/* ---- all of them ---- */

int haecer__region_write(FILE *text, FILE *callgrind, FILE *csv, FILE *json)
{
	char command[COMMAND_MAX], machine[512];
	double max_watts[REGION_DOMAINS];
	struct span span = { 0 };
	bool simulated;
	struct flat flat;
	int error;

	command_line(command, sizeof(command));
	fprintf(text, "haecer regions of pid %d (%s)\n", (int)getpid(), command);
	/* Before region_lock: the sources have their own lock, taken before region_lock when
	 * counters are opened. */
	haecer__region_describe_sources(text);
	haecer__region_machines(machine, sizeof(machine), &simulated);
	haecer__region_span(span.package, &span.have);
	haecer__region_max_watts(max_watts);
	haecer__region_lock();
	error = flat_build(&flat);
	if (error < 0)
		goto out;
	memcpy(flat.max_watts, max_watts, sizeof(flat.max_watts));
	span_charged(&span, &flat);
	write_text(text, &flat);
	write_span_text(text, &span, &flat);
	if (callgrind != NULL)
		error = write_callgrind(callgrind, &flat);
	if (csv != NULL)
		write_csv(csv, &flat, machine);
	if (json != NULL)
		write_json(json, &flat, machine, simulated, &span);
	flat_free(&flat);
out:
	haecer__region_unlock();
	if (error == 0 && (ferror(text) || (callgrind != NULL && ferror(callgrind)) ||
			   (csv != NULL && ferror(csv)) || (json != NULL && ferror(json))))
		error = haecer__fail(-EIO, "writing the region report failed");
	return error;
}
