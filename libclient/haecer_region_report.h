/*
 * libclient/haecer_region_report.h — what the region report's parts share (private to
 * libclient): the region tree flattened for output, the span the package drew while regions
 * ran, and the writers of each format. haecer_region_report.c builds the tree and writes the
 * text table; haecer_region_formats.c writes the Callgrind file, the CSV table and the JSON
 * document from the same numbers.
 */
#ifndef HAECER_LIBCLIENT_HAECER_REGION_REPORT_H
#define HAECER_LIBCLIENT_HAECER_REGION_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "libclient/haecer_region_internal.h"

#define COMMAND_MAX 512u
#define UPDATE_SECONDS 0.001 /* RAPL updates "approximately every 1 ms" (SDM vol. 3B 14.9.3) */

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

/* What the package drew while regions ran, and how much of it they were charged. */
struct span {
	uint64_t package[REGION_DOMAINS]; /* nJ from the first region reading to the last */
	uint64_t charged[REGION_DOMAINS]; /* nJ charged to the outermost regions */
	uint32_t have;
};

/* Replace what would break a line-based format (control characters) in a copy of text. */
void region_report_printable(const char *text, char *out, size_t size);
/* The process's command line, printable, in out. */
void region_report_command_line(char *out, size_t size);
/* A node's exclusive costs: its inclusive ones less its children's. */
void region_report_exclusive_of(const struct region_node *node, unsigned columns, uint64_t *out);
/* What the package drew in domain d that no region was charged. */
uint64_t region_report_span_rest(const struct span *span, unsigned d);
/* The Callgrind file (format version 1): one fn= per region name, cfn=/calls= per child. */
int region_report_write_callgrind(FILE *out, const struct flat *flat);
/* The CSV table (RFC 4180): one row per region path. */
void region_report_write_csv(FILE *out, const struct flat *flat, const char *machine);
/* The JSON document: the machine, the regions' tree and the span. */
void region_report_write_json(FILE *out, const struct flat *flat, const char *machine,
			      bool simulated, const struct span *span);

#endif
