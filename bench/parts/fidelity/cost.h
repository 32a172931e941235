/*
 * bench/parts/fidelity/cost.h — bench/fidelity's cost of measuring: the same work with the
 * measurement on and off, the simulator's truth in both, and what the results said it cost.
 */
#ifndef HAECER_BENCH_FIDELITY_COST_H
#define HAECER_BENCH_FIDELITY_COST_H

#include <sys/types.h>

#include "haecer/msrd.h"
#include "haecer/perfmon.h"

/* The work of a condition: `ns` of it (the condition is the caller's own number). */
typedef void (*fidelity_work_fn)(int condition, uint64_t ns);

struct fidelity_cost {
	double on_watts, off_watts;    /* the work's true mean power, measured / not */
	double added_pct;              /* msrd's CPU in the regions less unmeasured, x the model's
					* busy-CPU power, % of the regions' true energy (cost.c) */
	double msrd_cpu_pct;           /* msrd's CPU in the regions, % of their time */
	double msrd_idle_cpu_pct;      /* the same over the work unmeasured */
	double busy_cpu_watts;         /* the model's power of a busy CPU (from the results) */
	double paired_pct;             /* median over pairs of blocks of (on - off) / on, % */
	double spread_pct;             /* half the range of those pairs' figures: the noise */
	double msrd_added_pct;         /* the same against the work between spins as long as
					* the library's polls: msrd's part alone */
	double reported_pct;           /* the results' measurement_joules over their truth, % */
	double reported_cpu_pct;       /* their measurement_cpu_ns over the regions' time, % */
};

/* Opens a task clock of msrd's main thread (where its windows and page samples run), for the
 * CPU figures: call before this process drops its capabilities. Without it (refused), they come
 * from /proc/PID/schedstat, which lags a running thread by up to its slice. 0 or -errno. */
int fidelity_cost_watch(pid_t msrd);

/* Pairs of blocks, the measured one first and the unmeasured one second, of the same regions
 * (every length in `lengths`, several times) doing `work`; truth from `truth` at each region's
 * ends. */
struct fidelity_cost fidelity_cost(struct haecer_conn *truth, struct haecer_counter *pkg,
				   pid_t msrd, fidelity_work_fn work, int condition,
				   const uint64_t *lengths, size_t length_count);

#endif
