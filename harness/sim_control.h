/*
 * harness/sim_control.h — the simulated CPU's control and truth, for tests and benchmarks only:
 * not part of libhaecer's installed API or of libhaecer.so (issue 30, item 2). Each call is one
 * SIM_* request on a libhaecer connection to an msrd started with the sim backend and a policy
 * granting sim control (-ENODEV on real hardware, -EPERM without the grant).
 */
#ifndef HAECER_HARNESS_SIM_CONTROL_H
#define HAECER_HARNESS_SIM_CONTROL_H

#include <stdint.h>

#include "haecer/msrd.h"

/* Virtual-time mode: move the simulated time forward; *now_ns (may be NULL) is the new time. */
int haecer_sim_advance(struct haecer_conn *conn, uint64_t ns, uint64_t *now_ns);

/* Set the load (0.0 .. 1.0) of one CPU, or of every CPU when cpu is -1. */
int haecer_sim_set_load(struct haecer_conn *conn, int cpu, double load);

struct haecer_sim_truth {
	uint64_t now_ns;
	double joules;              /* exact energy since the simulation started */
	uint64_t units_at_update;   /* energy units at the last 1 ms update, not wrapped */
	uint64_t last_update_ns;
};

/* Ground truth of one RAPL domain (enum rapl_domain of hw/msr.h) of one package. */
int haecer_sim_energy_truth(struct haecer_conn *conn, uint32_t package, uint32_t domain,
			    struct haecer_sim_truth *out);

/* The simulator's energy of a domain at a past simulated time (CLOCK_MONOTONIC_RAW ns in real
 * time): what a region really cost, from its two ends' timestamps. -EINVAL when at_ns lies ahead
 * or before the power changes msrd remembers (a few seconds at 1 ms load sampling). */
struct haecer_sim_energy_at {
	uint64_t at_ns;
	double joules;              /* energy since the simulation started, at at_ns */
	uint64_t last_update_ns;    /* the domain's latest register update at or before at_ns */
	double watts;               /* power at at_ns */
	uint64_t smi_count;         /* SMIs begun at or before at_ns (also without MSR_SMI_COUNT) */
};
int haecer_sim_energy_at(struct haecer_conn *conn, uint32_t package, uint32_t domain,
			 uint64_t at_ns, struct haecer_sim_energy_at *out);

/* Impose a power trace on the simulated RAPL domains from now on (steps and ramps per domain;
 * format in msrd(8) and configs/models/README.md); "" gives every domain back to its load.
 * -EINVAL for a malformed trace (msrd's log names the line). */
int haecer_sim_power_trace(struct haecer_conn *conn, const char *text);

#endif
