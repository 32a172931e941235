/*
 * backend/backend_sim.h — the simulated CPU's own calls, beside backend/backend.h: its time,
 * load, power trace and ground truth, which only msrd's SIM_* requests, its virtual-time
 * paths, `msrd --list-sim-models` and the backend's tests use. Kept out of backend.h so that
 * the interface every backend shares says nothing of the simulator (issue 30, item 2). Each call
 * is -EOPNOTSUPP on a backend that is not the simulated CPU.
 */
#ifndef HAECER_BACKEND_BACKEND_SIM_H
#define HAECER_BACKEND_BACKEND_SIM_H

#include "backend/backend.h"

/* The simulated CPU runs in virtual time (msrd --sim-virtual-time): its time moves only by
 * backend_sim_advance, so nothing may wait on a real-time timer for it. False on every other
 * backend. */
bool backend_sim_virtual_time(const struct msr_backend *backend);

/* Names of the shipped models, for `msrd --list-sim-models`; returns the count. */
int backend_sim_list_models(const char *models_dir, char names[][32], size_t max);

/* Where model files are looked for (for messages), e.g. "--models-dir X, then Y". */
void backend_sim_describe_search(const char *models_dir, char *out, size_t size);

/* Current time of the simulated CPU in ns (virtual or CLOCK_MONOTONIC_RAW based). */
int backend_sim_now(const struct msr_backend *backend, uint64_t *now_ns);

/* Virtual-time mode: move time forward by ns (energy and counters advance accordingly). */
int backend_sim_advance(struct msr_backend *backend, uint64_t ns);

/* Set the load (0.0 idle .. 1.0 busy) of one CPU, or of all when cpu < 0, from now on; those CPUs
 * stop following the host or the script. Works in both time modes. -ENXIO beyond the model. */
int backend_sim_set_load(struct msr_backend *backend, int cpu, double load);

/* Replace the load script (see backend/sim/sim_load.h for the format); the CPUs it names follow it
 * from now on. -EINVAL (and a log line with file and line) when it is malformed. */
int backend_sim_load_script(struct msr_backend *backend, const char *path);

/* Follow process `pid`'s load exactly (its CPU-time clock, backend/sim/sim_follow.c), or stop:
 * the CPUs that follow the host's load then draw its busy time to the microsecond, not to
 * /proc/stat's 10 ms tick. Calls nest per pid (msrd follows each connection). -EOPNOTSUPP in
 * virtual time or without the host's own /proc/stat (a stand-in tree); -ENOSPC past the limit
 * of followed processes. */
int backend_sim_follow_process(struct msr_backend *backend, int pid, bool follow);

/* Ground truth of one energy domain of one package at the current simulated time. */
struct sim_energy_truth {
	uint64_t now_ns;
	double joules;              /* energy consumed since the sim started (nearest double) */
	uint64_t units_at_update;   /* floor(joules at the last 1 ms update / unit), not wrapped */
	uint64_t last_update_ns;    /* time of that update */
	unsigned __int128 femtojoules; /* exact: energy since the start in 1e-15 J (= µW * ns) */
	uint64_t power_microwatts;  /* current power: idle + (max - idle) * mean load */
	uint32_t energy_exponent;   /* unit code of the register: 2^-e J (Atom: 0x80 | e, 2^e uJ) */
	uint64_t smi_count;         /* SMIs since the start (also on models without
				     * MSR_SMI_COUNT) */
};
/* -ENXIO for a package beyond the model, -ENOENT for a domain it lacks. For the per-core AMD
 * domain this is the first core of the package; backend_sim_energy_truth_cpu names any. */
int backend_sim_energy_truth(const struct msr_backend *backend, uint32_t package,
			     enum rapl_domain domain, struct sim_energy_truth *out);
/* The simulator's power model: what a whole busy CPU `cpu` adds to the power of the domain
 * instance it reads now (0 while a power trace imposes it); -EOPNOTSUPP without a simulator.
 * What msrd's own CPU time for a client costs the package it measures (server/energy_cost.c). */
int backend_sim_busy_cpu_microwatts(const struct msr_backend *backend, uint32_t cpu,
				    enum rapl_domain domain, uint64_t *uw);
/* Ground truth of the domain instance `cpu` reads (its package's, or its core's). */
int backend_sim_energy_truth_cpu(const struct msr_backend *backend, uint32_t cpu,
				 enum rapl_domain domain, struct sim_energy_truth *out);

/* The same at a past simulated time at_ns (now_ns = at_ns; units_at_update is 0): -ERANGE when
 * at_ns lies ahead or before the power changes the simulator remembers (a few seconds at 1 ms
 * load sampling). */
int backend_sim_energy_at(const struct msr_backend *backend, uint32_t package,
			  enum rapl_domain domain, uint64_t at_ns, struct sim_energy_truth *out);

/* Replace the power trace (format in backend/sim/sim_power.c; "" = every domain follows its load
 * again). -EINVAL (and a log line naming `where` and the line) when it is malformed. */
int backend_sim_power_trace(struct msr_backend *backend, const char *text, const char *where);

#endif
