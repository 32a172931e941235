/*
 * server/energy_cost.h — what measuring costs msrd (energy_cost.c), private to msrd.
 */
#ifndef HAECER_SERVER_ENERGY_COST_H
#define HAECER_SERVER_ENERGY_COST_H

#include <stdint.h>

struct energy_counter;
struct msrd;

/* This thread's CPU time (CLOCK_THREAD_CPUTIME_ID), ns: what a window or a sample costs is
 * counted in it, not in wall time, so a busy host that preempts msrd does not count. */
uint64_t energy_cost_thread_cpu_ns(void);
/* msrd spent `cpu_ns` of CPU on `counter`'s register for its pages' holders (a window, a page
 * sample): added to what its fine pages show (measurement_cpu_ns, and on the simulated CPU the
 * energy the model says that CPU time drew, measurement_nj) from their next publication. */
void energy_cost_charge(struct msrd *server, struct energy_counter *counter, uint64_t cpu_ns);
/* The page sampler's reads of the `wanted` registers took `cpu_ns`: charged evenly to them. */
void energy_cost_charge_sampler(struct msrd *server, const bool *wanted, uint64_t cpu_ns);
/* On the simulated CPU in real time: the simulator follows msrd's own process by its CPU-time
 * clock, as it follows clients, so what measuring costs lands in the simulated package within
 * its follow sample of when it is spent. */
void energy_cost_follow_self(struct msrd *server);

#endif
