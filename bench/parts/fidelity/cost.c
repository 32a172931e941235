/*
 * bench/parts/fidelity/cost.c — what measuring added to the regions (issue 23, item 3).
 *
 * The same work (every region length, COST_SETS times) in pairs of blocks: measured (each
 * region between haecer_energy_start and haecer_energy_end: msrd's windows run around its
 * edges, its page sampler runs), then unmeasured (the same work alone, after the short lease
 * that a region's asks take has lapsed: no windows). The simulator's truth over each region's
 * own span (haecer_sim_energy_at at its ends) in both: the difference of the mean powers, in %
 * of the measured one, is the energy the measurement added to the regions. Pairs alternate so
 * that a loaded host's drift weighs on both alike; the median of the pairs is the figure and
 * half their range its noise. Beside it, what the results themselves said
 * (measurement_joules: the simulator's model's energy of msrd's CPU for the register during
 * each region) over the regions' truth.
 *
 * What the simulator can show of it: msrd follows itself on the simulated CPU by its CPU-time
 * clock (server/energy_cost.c), so its windows' CPU lands in the simulated package within the
 * simulator's 1 ms follow sample of when it was spent; a real package follows within
 * microseconds, so a window just outside a short region is partly smeared into it here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/parts/fidelity/cost.h"
#include "common/clock.h"
#include "hw/msr.h"

#define COST_PAIRS 7
#define COST_SETS 3
/* Past the short lease (6 ms) and a few of the simulator's follow samples. */
#define COST_SETTLE_US 30000

struct block {
	double truth_j, ns, reported_j, cpu_ns;
};

static double truth_at(struct haecer_conn *truth, uint64_t ns)
{
	struct haecer_sim_energy_at at;

	if (haecer_sim_energy_at(truth, 0, RAPL_DOMAIN_PKG, ns, &at) < 0) {
		fprintf(stderr, "bench/fidelity: SIM_ENERGY_AT failed\n");
		exit(1);
	}
	return at.joules;
}

static void add_span(struct haecer_conn *truth, struct block *block, uint64_t from, uint64_t to)
{
	block->truth_j += truth_at(truth, to) - truth_at(truth, from);
	block->ns += (double)(to - from);
}

static void measured(struct haecer_conn *truth, struct haecer_counter *pkg,
		     fidelity_work_fn work, int condition, uint64_t ns, struct block *block)
{
	struct haecer_energy_region region;
	struct haecer_energy_result result;
	uint64_t from, to;

	if (haecer_energy_start(pkg, &region) < 0)
		return;
	from = clock_monotonic_raw_ns();
	work(condition, ns);
	to = clock_monotonic_raw_ns();
	if (haecer_energy_end(pkg, &region, &result) < 0)
		return;
	add_span(truth, block, from, to);
	block->reported_j += result.measurement_joules;
	block->cpu_ns += (double)result.measurement_cpu_ns;
}

static void unmeasured(struct haecer_conn *truth, fidelity_work_fn work, int condition,
		       uint64_t ns, struct block *block)
{
	uint64_t from = clock_monotonic_raw_ns();

	work(condition, ns);
	add_span(truth, block, from, clock_monotonic_raw_ns());
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct fidelity_cost fidelity_cost(struct haecer_conn *truth, struct haecer_counter *pkg,
				   fidelity_work_fn work, int condition, const uint64_t *lengths,
				   size_t length_count)
{
	struct block on_all = { 0 }, off_all = { 0 };
	struct fidelity_cost cost = { 0 };
	double pairs[COST_PAIRS];

	for (size_t p = 0; p < COST_PAIRS; p++) {
		struct block on = { 0 }, off = { 0 };

		for (size_t s = 0; s < COST_SETS; s++)
			for (size_t l = 0; l < length_count; l++)
				measured(truth, pkg, work, condition, lengths[l], &on);
		usleep(COST_SETTLE_US);
		for (size_t s = 0; s < COST_SETS; s++)
			for (size_t l = 0; l < length_count; l++)
				unmeasured(truth, work, condition, lengths[l], &off);
		pairs[p] = 100.0 * (on.truth_j / on.ns - off.truth_j / off.ns) / (on.truth_j / on.ns);
		on_all.truth_j += on.truth_j;
		on_all.ns += on.ns;
		on_all.reported_j += on.reported_j;
		on_all.cpu_ns += on.cpu_ns;
		off_all.truth_j += off.truth_j;
		off_all.ns += off.ns;
	}
	qsort(pairs, COST_PAIRS, sizeof(double), by_value);
	cost.on_watts = on_all.truth_j / on_all.ns * 1e9;
	cost.off_watts = off_all.truth_j / off_all.ns * 1e9;
	cost.added_pct = pairs[COST_PAIRS / 2];
	cost.spread_pct = (pairs[COST_PAIRS - 1] - pairs[0]) / 2.0;
	cost.reported_pct = 100.0 * on_all.reported_j / on_all.truth_j;
	cost.reported_cpu_pct = 100.0 * on_all.cpu_ns / on_all.ns;
	return cost;
}
