/*
 * common/clock.h — the project's time bases, each with its own name so that a value of one is
 * never taken for the other:
 *
 *   clock_monotonic_raw_ns()  CLOCK_MONOTONIC_RAW: the hardware clock without NTP's slewing.
 *                             Ring records, energy-page sample times and the simulated CPU's
 *                             real time are in this base (FERRET's timestamps, seed 001 §2.2).
 *   clock_monotonic_ns()      CLOCK_MONOTONIC: timeouts, deadlines and io_uring timers, which
 *                             the kernel measures in this base.
 *
 * Simulated time (msrd --sim-virtual-time) is neither; it is the simulator's own (sim_now).
 *
 * These are the only readers of the two clocks in the tree (msrd, libhaecer, the tools, the
 * profiler and its agent, tests, benchmarks and examples; examples/ring_monitor.c alone keeps its
 * own, being built against the installed headers only): a value's name says its base where two
 * sit side by side (struct client's last_request_raw_ns beside its CLOCK_MONOTONIC timeouts).
 */
#ifndef HAECER_COMMON_CLOCK_H
#define HAECER_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

#define CLOCK_NS_PER_SECOND 1000000000ull

static inline uint64_t clock_ns_of(clockid_t clock)
{
	struct timespec now;

	clock_gettime(clock, &now);
	return (uint64_t)now.tv_sec * CLOCK_NS_PER_SECOND + (uint64_t)now.tv_nsec;
}

static inline uint64_t clock_monotonic_raw_ns(void)
{
	return clock_ns_of(CLOCK_MONOTONIC_RAW);
}

static inline uint64_t clock_monotonic_ns(void)
{
	return clock_ns_of(CLOCK_MONOTONIC);
}

#endif
