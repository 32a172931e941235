/*
 * bench/parts/fidelity/cost.h — bench/fidelity's cost of measuring: the same work with the
 * measurement on and off, the simulator's truth in both, and what the results said it cost.
 */
#ifndef HAECER_BENCH_FIDELITY_COST_H
#define HAECER_BENCH_FIDELITY_COST_H

#include "haecer/msrd.h"
#include "haecer/perfmon.h"

/* The work of a condition: `ns` of it (the condition is the caller's own number). */
typedef void (*fidelity_work_fn)(int condition, uint64_t ns);

struct fidelity_cost {
	double on_watts, off_watts;    /* the work's true mean power, measured / not */
	double added_pct;              /* median over pairs of blocks of (on - off) / on, % */
	double spread_pct;             /* half the range of those pairs' figures: the noise */
	double msrd_added_pct;         /* the same against the work between spins as long as
					* the library's polls: msrd's part alone */
	double reported_pct;           /* the results' measurement_joules over their truth, % */
	double reported_cpu_pct;       /* their measurement_cpu_ns over the regions' time, % */
};

/* Pairs of blocks, the measured one first and the unmeasured one second, of the same regions
 * (every length in `lengths`, several times) doing `work`; truth from `truth` at each region's
 * ends. */
struct fidelity_cost fidelity_cost(struct haecer_conn *truth, struct haecer_counter *pkg,
				   fidelity_work_fn work, int condition, const uint64_t *lengths,
				   size_t length_count);

#endif
