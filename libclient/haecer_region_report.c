/*
 * libclient/haecer_region_report.c — the region report: a text table of the region tree
 * (inclusive and exclusive per region, like the GHC profiler's cost-centre stacks, seed 000) and
 * a Callgrind file (format version 1) that KCachegrind and callgrind_annotate read, as seed 002
 * produced for KCachegrind: one `fn=` per region name with its exclusive cost, `cfn=`/`calls=`
 * lines for the regions it encloses with their inclusive cost. Costs are integers: ns, nJ and
 * event counts.
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
	size_t name_count;
	unsigned columns;
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

static size_t name_index(struct flat *flat, const char *name)
{
	for (size_t i = 0; i < flat->name_count; i++)
		if (strcmp(flat->names[i], name) == 0)
			return i;
	flat->names[flat->name_count] = name;
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
		flat->name_of[index] = name_index(flat, ordered[i]->name);
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
	if (flat->nodes == NULL || flat->depth == NULL || flat->name_of == NULL ||
	    flat->names == NULL) {
		flat_free(flat);
		return haecer__fail(-ENOMEM, "out of memory for the region report");
	}
	error = flatten(flat, haecer__region_root(), 0);
	if (error < 0)
		flat_free(flat);
	return error;
}

/* ---- the text table ---- */

#define UPDATE_SECONDS 0.001 /* RAPL updates "approximately every 1 ms" (SDM vol. 3B 14.9.3) */

struct cell {
	char text[40];
	bool partial;
};

static void format_value(unsigned column, uint64_t value, char *out, size_t size)
{
	if (column == REGION_COLUMN_TIME)
		snprintf(out, size, "%.3f", (double)value / 1e6);
	else if (column == REGION_COLUMN_ENERGY)
		snprintf(out, size, "%.6f", (double)value / 1e9);
	else
		snprintf(out, size, "%llu", (unsigned long long)value);
}

static void cell_of(const struct region_node *node, unsigned column, uint64_t value,
		    struct cell *cell)
{
	cell->partial = node->counted[column] > 0 && node->counted[column] < node->calls;
	if (node->counted[column] == 0) {
		snprintf(cell->text, sizeof(cell->text), "-");
		return;
	}
	format_value(column, value, cell->text, sizeof(cell->text));
	if (cell->partial)
		strcat(cell->text, "*");
}

static int column_width(unsigned column)
{
	int width = (int)strlen(haecer__region_column_name(column));

	if (column == REGION_COLUMN_TIME || column == REGION_COLUMN_ENERGY)
		return 12;
	return width > 14 ? width : 14;
}

static void print_header(FILE *out, const struct flat *flat, int name_width)
{
	fprintf(out, "%-*s %10s", name_width, "region", "calls");
	for (unsigned c = 0; c < flat->columns; c++) {
		const char *name = c == REGION_COLUMN_TIME ? "time ms"
				   : c == REGION_COLUMN_ENERGY ? "energy J"
							       : haecer__region_column_name(c);
		fprintf(out, " %*s %*s", column_width(c), name, column_width(c), "self");
		if (c == REGION_COLUMN_ENERGY)
			fprintf(out, " %9s %11s", "watts", "+-J/call");
	}
	fprintf(out, "\n");
}

static bool print_row(FILE *out, const struct flat *flat, size_t index, int name_width)
{
	const struct region_node *node = flat->nodes[index];
	uint64_t exclusive[REGION_COLUMNS];
	char name[HAECER_REGION_NAME_MAX + 1];
	bool partial = false;

	printable(node->name, name, sizeof(name));
	exclusive_of(node, flat->columns, exclusive);
	fprintf(out, "%*s%-*s %10llu", (int)(2 * flat->depth[index]), "",
		name_width - (int)(2 * flat->depth[index]), name, (unsigned long long)node->calls);
	for (unsigned c = 0; c < flat->columns; c++) {
		struct cell inclusive, self;
		cell_of(node, c, node->inclusive[c], &inclusive);
		cell_of(node, c, exclusive[c], &self);
		partial |= inclusive.partial;
		fprintf(out, " %*s %*s", column_width(c), inclusive.text, column_width(c), self.text);
		if (c != REGION_COLUMN_ENERGY)
			continue;
		if (node->counted[REGION_COLUMN_ENERGY] > 0 && node->inclusive[REGION_COLUMN_TIME] > 0) {
			double watts = (double)node->inclusive[REGION_COLUMN_ENERGY] /
				       (double)node->inclusive[REGION_COLUMN_TIME];

			/* A call's energy is a difference of two register readings, each up to
			 * one update (about 1 ms) old: off by up to one update's energy. */
			fprintf(out, " %9.3f %11.6f", watts, watts * UPDATE_SECONDS);
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
	return partial;
}

static void write_text(FILE *out, const struct flat *flat)
{
	int name_width = 6;
	bool partial = false;

	for (size_t i = 0; i < flat->count; i++) {
		int width = (int)(2 * flat->depth[i] + strlen(flat->nodes[i]->name));
		if (width > name_width)
			name_width = width < NAME_WIDTH_MAX ? width : NAME_WIDTH_MAX;
	}
	print_header(out, flat, name_width);
	for (size_t i = 0; i < flat->count; i++)
		partial |= print_row(out, flat, i, name_width);
	if (flat->count == 0)
		fprintf(out, "(no regions)\n");
	if (partial)
		fprintf(out, "* measured in only some of the calls (refused or unreadable in the "
			"others)\n");
	if (flat->columns > REGION_COLUMN_ENERGY)
		fprintf(out, "+-J/call: the energy registers change about every 1 ms, so one call's "
			"energy is off by up to one update's energy (watts x 1 ms)\n");
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
		snprintf(out, size, "Energy_nJ");
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

static void write_costs(FILE *out, const uint64_t *costs, unsigned columns)
{
	fprintf(out, "0");
	for (unsigned c = 0; c < columns; c++)
		fprintf(out, " %llu", (unsigned long long)costs[c]);
	fprintf(out, "\n");
}

static void write_callgrind_header(FILE *out, const struct flat *flat)
{
	char command[COMMAND_MAX], name[HAECER_COUNTER_NAME_MAX + 8];
	uint64_t totals[REGION_COLUMNS] = { 0 };

	command_line(command, sizeof(command));
	fprintf(out, "# callgrind format\nversion: 1\ncreator: haecer regions (libhaecer)\n");
	fprintf(out, "pid: %d\ncmd: %s\npart: 1\npositions: line\n", (int)getpid(), command);
	fprintf(out, "event: Time_ns : Time (ns)\n");
	fprintf(out, "event: Energy_nJ : Package energy (nJ, package-wide RAPL)\n");
	for (unsigned c = REGION_COLUMN_ENERGY + 1; c < flat->columns; c++) {
		event_name(c, name, sizeof(name));
		fprintf(out, "event: %s : %s\n", name, haecer__region_column_name(c));
	}
	fprintf(out, "events:");
	for (unsigned c = 0; c < flat->columns; c++) {
		event_name(c, name, sizeof(name));
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
	for (unsigned c = 0; c < flat->columns; c++)
		fprintf(out, " %llu", (unsigned long long)totals[c]);
	fprintf(out, "\n\nfl=(1) regions\n");
}

/* fn=/cfn= lines: the name with its id the first time, the id alone afterwards. */
static void write_function(FILE *out, const char *key, const struct flat *flat, size_t name,
			   bool *defined)
{
	char text[HAECER_REGION_NAME_MAX + 1];

	if (defined[name]) {
		fprintf(out, "%s=(%zu)\n", key, name + 1);
		return;
	}
	printable(flat->names[name], text, sizeof(text));
	fprintf(out, "%s=(%zu) %s\n", key, name + 1, text);
	defined[name] = true;
}

struct arc {
	uint64_t calls;
	uint64_t inclusive[REGION_COLUMNS];
};

/* One function: the exclusive cost of every region of that name, then its calls, summed per
 * callee name. */
static void write_function_costs(FILE *out, const struct flat *flat, size_t name,
				 struct arc *arcs, bool *defined)
{
	uint64_t self[REGION_COLUMNS] = { 0 }, exclusive[REGION_COLUMNS];

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
	write_function(out, "fn", flat, name, defined);
	write_costs(out, self, flat->columns);
	for (size_t callee = 0; callee < flat->name_count; callee++) {
		if (arcs[callee].calls == 0)
			continue;
		write_function(out, "cfn", flat, callee, defined);
		fprintf(out, "calls=%llu 0\n", (unsigned long long)arcs[callee].calls);
		write_costs(out, arcs[callee].inclusive, flat->columns);
	}
}

static int write_callgrind(FILE *out, const struct flat *flat)
{
	struct arc *arcs = calloc(flat->name_count > 0 ? flat->name_count : 1, sizeof(*arcs));
	bool *defined = calloc(flat->name_count > 0 ? flat->name_count : 1, sizeof(*defined));
	int error = 0;

	if (arcs == NULL || defined == NULL) {
		error = haecer__fail(-ENOMEM, "out of memory for the Callgrind file");
		goto out;
	}
	write_callgrind_header(out, flat);
	for (size_t name = 0; name < flat->name_count; name++)
		write_function_costs(out, flat, name, arcs, defined);
out:
	free(arcs);
	free(defined);
	return error;
}

/* ---- both ---- */

int haecer__region_write(FILE *text, FILE *callgrind)
{
	char command[COMMAND_MAX];
	struct flat flat;
	int error;

	command_line(command, sizeof(command));
	fprintf(text, "haecer regions of pid %d (%s)\n", (int)getpid(), command);
	/* Before region_lock: the sources have their own lock, taken before region_lock when
	 * counters are opened. */
	haecer__region_describe_sources(text);
	haecer__region_lock();
	error = flat_build(&flat);
	if (error < 0)
		goto out;
	write_text(text, &flat);
	if (callgrind != NULL)
		error = write_callgrind(callgrind, &flat);
	flat_free(&flat);
out:
	haecer__region_unlock();
	if (error == 0 && (ferror(text) || (callgrind != NULL && ferror(callgrind))))
		error = haecer__fail(-EIO, "writing the region report failed");
	return error;
}
