/*
 * backend/sim/sim.h — the simulated CPU behind the `sim` backend (private to backend/).
 * backend.c forwards the backend_sim_* calls and register accesses here.
 *
 * Not thread-safe: msrd calls it from its one event-loop thread.
 */
#ifndef HAECER_SERVER_SIM_H
#define HAECER_SERVER_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend/backend_sim.h"

struct sim;

/* Load the model options->sim_model (default "sandybridge") and start the simulated machine.
 * On failure `why` says what went wrong. */
int sim_open(const struct backend_options *options, struct sim **out, char *why,
	     size_t why_size);
void sim_close(struct sim *sim);

const struct machine_info *sim_machine_info(const struct sim *sim);

int sim_read(struct sim *sim, uint32_t cpu, uint32_t address, uint64_t *value);
/* CPUID `leaf`/`subleaf` as simulated CPU `cpu` answers it (sim_cpuid.c): 0, or -ENXIO for a
 * CPU beyond the model. */
int sim_cpuid(const struct sim *sim, uint32_t cpu, uint32_t leaf, uint32_t subleaf,
	      uint32_t regs[4]);
int sim_write(struct sim *sim, uint32_t cpu, uint32_t address, uint64_t value);

int sim_now(struct sim *sim, uint64_t *now_ns);
int sim_advance(struct sim *sim, uint64_t ns);
int sim_set_load(struct sim *sim, int cpu, double load);
int sim_load_script(struct sim *sim, const char *path);
int sim_follow_process(struct sim *sim, pid_t pid, bool follow);
int sim_energy_truth(struct sim *sim, uint32_t cpu, enum rapl_domain domain,
		     struct sim_energy_truth *out);
/* The energy of the domain instance `cpu` reads at a past time at_ns (<= now): -ERANGE when
 * at_ns is in the future or older than the power changes the simulator remembers. */
int sim_energy_at(struct sim *sim, uint32_t cpu, enum rapl_domain kind, uint64_t at_ns,
		  struct sim_energy_truth *out);
/* What one more busy CPU `cpu` adds to the power of its domain instance now, by the model (0
 * while a trace imposes the domain's power). */
int sim_busy_cpu_microwatts(struct sim *sim, uint32_t cpu, enum rapl_domain kind, uint64_t *uw);
/* Replace the power trace (format in backend/sim/sim_power.c) from now on; "" clears it. */
int sim_power_trace(struct sim *sim, const char *text, const char *where);
/* Whether the rough behaviour is on, and its seed. */
bool sim_is_rough(const struct sim *sim, uint64_t *seed);
/* The first CPU of `package`, or -ENXIO. */
int sim_package_first_cpu(const struct sim *sim, uint32_t package);

#endif
