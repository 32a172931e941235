/*
 * bench/parts/fidelity/follow.h — bench/fidelity's load-following part: the simulator's default
 * power (it follows msrd's clients by their CPU-time clocks and the host by /proc/stat), no
 * trace imposed, and how often each stated +- holds (coverage).
 */
#ifndef HAECER_BENCH_FIDELITY_FOLLOW_H
#define HAECER_BENCH_FIDELITY_FOLLOW_H

#include <sys/types.h>

#include "haecer/msrd.h"
#include "haecer/perfmon.h"

struct follow_keys {
	double region_coverage_pct, estimate_coverage_pct, read_coverage_pct;
	double region300us_p95_pct, region1ms_p95_pct;   /* spinning client, quiet host */
	double worst_err_over_stated, measurement_added_pct;
};

/* Runs every condition and length on `pkg` (msrd reached by `conn`, its process `msrd`), prints the table, fills
 * the keys. Leaves the power following the load. */
void fidelity_follow(struct haecer_conn *conn, struct haecer_counter *pkg, pid_t msrd,
		     struct follow_keys *keys);

#endif
