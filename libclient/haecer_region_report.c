/*
 * libclient/haecer_region_report.c — the region report: a text table of the region tree
 * (inclusive and exclusive per region, like the GHC profiler's cost-centre stacks, seed 000) and
 * a Callgrind file (format version 1) that KCachegrind and callgrind_annotate read, as seed 002
 * produced for KCachegrind: one `fn=` per region name with its exclusive cost, `cfn=`/`calls=`
 * lines for the regions it encloses with their inclusive cost, each at the file and line of the
 * region's first begin (fl=, cfi=, positions); a CSV table and a JSON document of the same
 * numbers for scripts. Costs are integers: ns, nJ and event counts. This file builds the tree
 * and writes the text table; haecer_region_formats.c the other formats.
 */
#include "libclient/haecer_region_report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NAME_WIDTH_MAX 60


/* ---- helpers ---- */

/* Replace what would break a line-based format (control characters) in a copy of text. */
void region_report_printable(const char *text, char *out, size_t size)
{
	size_t i = 0;

	for (; text[i] != '\0' && i + 1 < size; i++)
		out[i] = (unsigned char)text[i] < 0x20 || text[i] == 0x7f ? '?' : text[i];
	out[i] = '\0';
}

void region_report_command_line(char *out, size_t size)
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
	region_report_printable(buffer, out, size);
}

void region_report_exclusive_of(const struct region_node *node, unsigned columns, uint64_t *out)
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
			fprintf(out, " %9s %11s %11s", "watts", "+-J/call", "meas J/call");
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

	/* The calls' own stated +- (haecer_energy_span over their two readings) where they had
	 * one: it holds when the power changes within the call, which watts x 1 ms did not. */
	if (node->spanned > 0)
		return node->uncertainty_j / (double)node->spanned;
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

	region_report_printable(node->name, name, sizeof(name));
	region_report_exclusive_of(node, flat->columns, exclusive);
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
		if (node->spanned > 0)
			fprintf(out, " %11.3e", node->measurement_j / (double)node->spanned);
		else
			fprintf(out, " %11s", "-");
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
		fprintf(out, "+-J/call: the energy registers change about every 1 ms, so a call's "
			"energy, a difference of two readings, is off by up to what the package drew "
			"since the older reading's update: stated per call from its own reads (an "
			"update interval, its lateness and the read's round trip at the domain's "
			"maximum power or the call's own, if higher), the mean over the calls (%s; "
			"the shares are charged from the same readings). meas J/call: what measuring "
			"cost in a call, the energy of msrd's CPU for it (its page's samples and "
			"windows in the call, the call's two round trips as a bound), in the call's "
			"energy\n", haecer__region_column_name(flat->primary));
	if (marks & 2u)
		write_no_update_note(out, flat);
}

/* ---- the span: what the package drew while regions ran, and what regions were charged ---- */


static void span_charged(struct span *span, const struct flat *flat)
{
	for (size_t i = 0; i < flat->count; i++)
		if (flat->depth[i] == 0)
			for (unsigned d = 0; d < REGION_DOMAINS; d++)
				span->charged[d] += flat->nodes[i]->inclusive[REGION_COLUMN_SHARE + d];
}

uint64_t region_report_span_rest(const struct span *span, unsigned d)
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
			(double)region_report_span_rest(span, d) / 1e9);
		/* Not a measured 0: the register never moved while regions ran. */
		if (span->package[d] == 0)
			fprintf(out, " (its register did not change: the domain drew under one unit "
				"or is not counting; up to %.6f J per update)",
				flat->max_watts[d] * UPDATE_SECONDS);
	}
	fprintf(out, "\nthe rest: what the program outside its regions, other processes and idle "
		"drew; no region is charged with it\n");
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

	region_report_command_line(command, sizeof(command));
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
		error = region_report_write_callgrind(callgrind, &flat);
	if (csv != NULL)
		region_report_write_csv(csv, &flat, machine);
	if (json != NULL)
		region_report_write_json(json, &flat, machine, simulated, &span);
	flat_free(&flat);
out:
	haecer__region_unlock();
	if (error == 0 && (ferror(text) || (callgrind != NULL && ferror(callgrind)) ||
			   (csv != NULL && ferror(csv)) || (json != NULL && ferror(json))))
		error = haecer__fail(-EIO, "writing the region report failed");
	return error;
}
