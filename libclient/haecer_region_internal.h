/*
 * libclient/haecer_region_internal.h — region profiling inside libhaecer (<haecer/region.h>):
 * the region tree and per-thread stacks (haecer_region.c), what a region reads and how
 * (haecer_region_probe.c), and the reports (haecer_region_report.c). Not installed.
 *
 * Values are absolute integer positions — ns, nJ, event counts — taken at begin and at end; a
 * region adds end - begin to its node. Because children begin after and end before their parent
 * and read the same counters, a parent's sum is never below its children's: exclusive values
 * are exact differences. The energy shares are charged per stretch between two readings of a
 * thread, the same rounded charge to every open frame on the probe, so the same holds for them.
 *
 * Locking: region_lock (haecer_region.c) guards the tree, the columns and the thread registry;
 * source_lock (haecer_region_probe.c) guards the sources and the counters opened for them.
 * Snapshots take only the context's lock (through a counter, never through a stored context
 * pointer, so a context closed under an open region is noticed instead of touched).
 */
#ifndef HAECER_LIBCLIENT_HAECER_REGION_INTERNAL_H
#define HAECER_LIBCLIENT_HAECER_REGION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "haecer/perfmon.h"
#include "libclient/haecer_internal.h"

/* Columns: time, the package-wide energy of the package domain (what the whole package drew
 * during the region), the region's charged share of each RAPL domain (perf's names: energy-pkg,
 * energy-cores, energy-gpu, energy-ram, energy-psys), then the event counters. */
#define REGION_COLUMN_TIME 0u
#define REGION_COLUMN_ENERGY 1u
#define REGION_DOMAINS 5u
#define REGION_COLUMN_SHARE 2u
#define REGION_COLUMN_COUNTERS (REGION_COLUMN_SHARE + REGION_DOMAINS)
#define REGION_COLUMNS (REGION_COLUMN_COUNTERS + HAECER_REGION_MAX_COUNTERS)
#define REGION_NOTE_SIZE 256u

static inline bool region_column_is_energy(unsigned column)
{
	return column == REGION_COLUMN_ENERGY ||
	       (column >= REGION_COLUMN_SHARE && column < REGION_COLUMN_COUNTERS);
}

/* One reading of everything a region measures. The share columns hold the package's absolute
 * domain totals here; regions are charged from differences of them (haecer_region.c). */
struct region_values {
	uint64_t value[REGION_COLUMNS]; /* absolute: ns, nJ, counts */
	uint32_t have;                  /* bit per column read */
	uint64_t host_ns;               /* CLOCK_MONOTONIC_RAW at the reading */
	uint64_t thread_ns;             /* CLOCK_THREAD_CPUTIME_ID at the reading */
	/* The package domain's reading as a mark (haecer_energy_mark): its round trip and msrd's
	 * cost counters, for the +- and the cost of a call (issue 23). */
	struct haecer_energy_mark pkg_mark;
	bool pkg_marked;
};

/* A counter a region reads, and the column it feeds. */
struct region_counter {
	struct haecer_counter *counter;
	uint32_t generation;            /* at setup: a freed and reused counter is not ours */
	unsigned column;
};

struct region_source;

/* What one thread's regions read: chosen by its outermost open region, reused by nested ones. */
struct region_probe {
	struct region_source *source;
	uint32_t cpu;                   /* model CPU the thread ran on (its TSC is read) */
	uint32_t package;               /* its package */
	uint32_t package_cpus;          /* host CPUs of its package: the capacity per ns */
	struct region_counter energy[REGION_DOMAINS]; /* counter NULL: domain not read */
	struct region_counter counters[HAECER_REGION_MAX_COUNTERS];
	size_t count;
};

/* A node of the region tree: one path of names from a thread's outermost region. */
struct region_node {
	char *name;
	char *file;                     /* call site of its first begin; NULL: unknown */
	unsigned line;
	struct region_node *parent;
	struct region_node *children;   /* newest first */
	struct region_node *next;       /* sibling */
	uint64_t calls;                 /* ended instances */
	uint64_t open;                  /* instances open now */
	uint64_t abandoned;             /* instances whose thread exited before their end */
	uint64_t inclusive[REGION_COLUMNS];
	uint64_t counted[REGION_COLUMNS]; /* ended instances that had the column */
	/* Ended instances whose domain register read the same at the end as at the begin: they
	 * spanned no update (or the domain drew under one unit), so their charge of 0 is not a
	 * measurement of 0 but "below one update" (the reports say so). */
	uint64_t no_update[REGION_DOMAINS];
	/* The pkg-wide column's stated +- summed over its calls (each call's haecer_energy_span:
	 * the bound of a difference of two readings), and what measuring cost in them: msrd's CPU
	 * (its pages' share in the calls, the calls' own round trips) and the energy it drew. */
	uint64_t spanned;               /* calls with a span (both ends marked) */
	double uncertainty_j;
	uint64_t measurement_cpu_ns;
	double measurement_j, measurement_doubt_j;
};

/* The share column of a region column: slot d for energy-pkg.. (slot 0, the package domain, for
 * pkg-wide), REGION_DOMAINS for the others. */
static inline unsigned region_column_slot(unsigned column)
{
	if (column == REGION_COLUMN_ENERGY)
		return 0;
	if (column >= REGION_COLUMN_SHARE && column < REGION_COLUMN_COUNTERS)
		return column - REGION_COLUMN_SHARE;
	return REGION_DOMAINS;
}

/* ---- haecer_region.c: the tree and the columns (read under haecer__region_lock) ---- */

HAECER_INTERNAL void haecer__region_lock(void);
HAECER_INTERNAL void haecer__region_unlock(void);
/* The root (its children are the outermost regions). */
HAECER_INTERNAL const struct region_node *haecer__region_root(void);
/* Columns in use and their names ("time", "energy", "energy-pkg" ... "energy-psys", then
 * counter names). */
HAECER_INTERNAL unsigned haecer__region_column_count(void);
HAECER_INTERNAL const char *haecer__region_column_name(unsigned column);
/* The column of a counter name, added when new; -ENOSPC when every column is taken. Takes
 * region_lock itself. */
HAECER_INTERNAL int haecer__region_column(const char *name);

/* ---- haecer_region_probe.c ---- */

/* The probe for a thread's outermost region on ctx (NULL: msrd unreachable, time only): the
 * context's source (created on first use), the energy counter of the thread's package and
 * the counters. In default-counter mode the thread is pinned to its CPU first (*pinned says it
 * happened already; *saved receives the mask it had, given back when its outermost region
 * ends). Never fails: what cannot be opened is left out and noted. */
HAECER_INTERNAL void haecer__region_probe(struct haecer_context *ctx, bool *pinned,
					  cpu_set_t *saved, struct region_probe *probe);
/* The default context could not be opened: regions on it measure time only, for `reason`. */
HAECER_INTERNAL void haecer__region_note_unreachable(const char *reason);
/* Whether probe was made for ctx. */
HAECER_INTERNAL bool haecer__region_probe_for(const struct region_probe *probe,
					      const struct haecer_context *ctx);
/* Read the probe (one msrd batch when it has counters, none otherwise). */
HAECER_INTERNAL void haecer__region_read(struct region_probe *probe, struct region_values *out);
/* The span of the package domain over one call, from its two readings: false when either end
 * has no mark or the probe's package counter is gone. */
HAECER_INTERNAL bool haecer__region_energy_span(const struct region_probe *probe,
						const struct region_values *start,
						const struct region_values *end,
						struct haecer_energy_span *out);
/* Print what every source measured and why something was not, one "  " line each. */
HAECER_INTERNAL void haecer__region_describe_sources(FILE *out);
/* Per share slot, the energy every package drew from the first region reading to the last,
 * summed over packages (nJ); *have: bit per slot read. */
HAECER_INTERNAL void haecer__region_span(uint64_t *nanojoules, uint32_t *have);
/* Per share slot, the highest maximum power (W) any source's machine states for the domain: one
 * update of the register holds at most that x 1 ms. 0 where no machine says. */
HAECER_INTERNAL void haecer__region_max_watts(double *watts);
/* "msrd, simulated sandybridge; ..." for every source, into out (for CSV and JSON). */
HAECER_INTERNAL void haecer__region_machines(char *out, size_t size, bool *simulated);
/* After fork, in the child: forget every source (their contexts are the parent's). */
HAECER_INTERNAL void haecer__region_forget_sources(void);

/* ---- haecer_region_report.c ---- */

/* Write the text table to `text` and, each when not NULL, the Callgrind file, the CSV table
 * and the JSON document (takes region_lock). */
HAECER_INTERNAL int haecer__region_write(FILE *text, FILE *callgrind, FILE *csv, FILE *json);

#endif
