/*
 * backend/sim/sim_load.h — where the simulated CPU's load comes from (private to the sim backend):
 * the host's real per-CPU load from /proc/stat, or a load script.
 *
 * Loads are fixed point: SIM_LOAD_ONE (65536) is a fully busy CPU.
 */
#ifndef HAECER_SERVER_SIM_LOAD_H
#define HAECER_SERVER_SIM_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_LOAD_ONE 65536u

/* ---- host load ---- */

struct sim_host_load;

/* Open the sampler on a /proc/stat-format file and take a first sample. */
int sim_host_load_open(const char *stat_path, struct sim_host_load **out);
void sim_host_load_close(struct sim_host_load *host);

/* Take a sample: each host CPU's load becomes its busy share since the previous sample (kept when
 * no time passed for that CPU). */
int sim_host_load_sample(struct sim_host_load *host);

/* Load of simulated CPU `cpu`, which follows host CPU cpu mod (host CPU count). */
uint32_t sim_host_load_of(const struct sim_host_load *host, uint32_t cpu);

/* How many host CPUs the sampler saw. */
uint32_t sim_host_load_cpus(const struct sim_host_load *host);

/* Host CPU `cpu`'s busy and total ticks (of 1/USER_HZ) since boot, at the last sample. */
void sim_host_load_ticks(const struct sim_host_load *host, uint32_t cpu, uint64_t *busy,
			 uint64_t *total);

/* ---- load scripts ----
 *
 * A script is text, one segment per line: `DURATION_MS LOAD`, e.g. `250 0.8` (250 ms at 80 %).
 * A line may start with `cpu LIST:` (e.g. `cpu 0,2-3: 100 1.0`): such lines form the timeline of
 * the listed CPUs; lines without it form the default timeline of every other CPU. `#` starts a
 * comment. Each timeline repeats from its start when it ends. */

struct sim_timeline {
	uint64_t *duration_ns;
	uint32_t *load;
	size_t count;
};

struct sim_script {
	struct sim_timeline *timelines;  /* [0] is the default timeline (count 0 when unused) */
	size_t timeline_count;
	int32_t *cpu_timeline;           /* per CPU: index into timelines, or -1 for none */
	uint32_t cpu_count;
};

/* Parse a script for a machine of cpu_count CPUs. Errors are logged with file and line. */
int sim_script_load(const char *path, uint32_t cpu_count, struct sim_script **out);
void sim_script_free(struct sim_script *script);

#endif
