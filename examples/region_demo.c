/*
 * region_demo — region profiling (<haecer/region.h>): a program marks its phases, and at exit
 * libhaecer writes per-region time, the energy of every RAPL domain charged to the region by its
 * thread's CPU time (and the package-wide energy), and instructions/cycles, inclusive and
 * exclusive, as a table, a Callgrind file with each region's file and line (KCachegrind,
 * callgrind_annotate), a CSV table (regions.txt.csv) and a JSON document (regions.txt.json).
 *
 *   HAECER_REGION_REPORT=regions.txt region_demo [ROUNDS]
 *   callgrind_annotate --inclusive=yes regions.txt.callgrind
 *
 * Each round computes (busy), sleeps (idle) and does a short nested step. At the end it measures
 * what a marker costs: empty begin/end pairs against plain reads of an energy counter (one msrd
 * round trip each), so the overhead of a region is known.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <haecer/perfmon.h>

#include "common/clock.h"

#define COST_PAIRS 2000
#define BUSY_NS 50000000ull
#define IDLE_NS 50000000ull

static volatile double sink;

static void spin(uint64_t ns)
{
	uint64_t start = clock_monotonic_ns();
	double x = 1.0;

	while (clock_monotonic_ns() - start < ns)
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 0.5;
	sink = x;
}

static void snooze(uint64_t ns)
{
	struct timespec pause = { .tv_sec = (time_t)(ns / 1000000000ull),
				  .tv_nsec = (long)(ns % 1000000000ull) };

	nanosleep(&pause, NULL);
}

static void round_of_work(void)
{
	haecer_region_begin("compute");
	spin(BUSY_NS);
	haecer_region_begin("step");
	spin(BUSY_NS / 10);
	haecer_region_end("step");
	haecer_region_end("compute");
	haecer_region_begin("sleep");
	snooze(IDLE_NS);
	haecer_region_end("sleep");
}

/* Microseconds per empty begin/end pair, and per plain energy read. */
static void measure_cost(void)
{
	PerfCounter energy = setupEnergyCounter(RAPL_PKG);
	uint64_t start = clock_monotonic_ns();
	double pair_us, read_us = 0.0;

	for (int i = 0; i < COST_PAIRS; i++) {
		haecer_region_begin("empty");
		haecer_region_end("empty");
	}
	pair_us = (double)(clock_monotonic_ns() - start) / COST_PAIRS / 1000.0;
	if (energy.valid) {
		start = clock_monotonic_ns();
		for (int i = 0; i < COST_PAIRS; i++)
			readCounter(&energy);
		read_us = (double)(clock_monotonic_ns() - start) / COST_PAIRS / 1000.0;
		freeCounter(&energy);
	}
	printf("marker cost: %.2f us per empty begin+end pair (2 msrd round trips); "
	       "one energy read: %.2f us\n", pair_us, read_us);
}

int main(int argc, char **argv)
{
	long rounds = 5;
	char *end;

	if (argc > 2 || (argc == 2 && ((rounds = strtol(argv[1], &end, 10)) < 1 ||
				       rounds > 100000 || *end != '\0'))) {
		fprintf(stderr, "usage: %s [ROUNDS]\n", argv[0]);
		return 2;
	}
	if (haecer_region_begin("main") < 0) {
		fprintf(stderr, "%s: %s\n", argv[0], haecer_error_detail());
		return 1;
	}
	for (long i = 0; i < rounds; i++)
		round_of_work();
	measure_cost();
	haecer_region_end("main");
	/* A mismatched end is refused with a reason, and nothing changes. */
	if (haecer_region_end("main") == -EINVAL)
		printf("a second end of \"main\" is refused: %s\n", haecer_error_detail());
	return 0;
}
