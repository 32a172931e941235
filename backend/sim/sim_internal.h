/*
 * backend/sim/sim_internal.h — the simulated CPU's state, shared by sim.c (time, load, energy,
 * register dispatch) and sim_pmu.c (performance counters). Private to the sim backend.
 *
 * Exactness: busy time is an integer count of ns * SIM_LOAD_ONE, energy an integer count of
 * femtojoules (µW * ns), and every event count is floor(busy * rate / SIM_BUSY_PER_SECOND) of
 * the cumulative busy time (or of the cumulative core-clock cycles, an integer too), so nothing
 * drifts however often or rarely it is observed.
 */
#ifndef HAECER_SERVER_SIM_INTERNAL_H
#define HAECER_SERVER_SIM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "hw/msr.h"
#include "backend/backend.h"
#include "backend/sim/sim_load.h"
#include "backend/sim/sim_model.h"
#include "hw/rapl_quirks.h"
#include "hw/vendor.h"

#define SIM_NS_PER_SECOND 1000000000ull
#define SIM_UPDATE_NS 1000000ull      /* ideal: RAPL energy registers change every 1 ms */
#define SIM_HOST_SAMPLE_NS 100000000ull /* ideal: /proc/stat is read at most every 100 ms */
#define SIM_HISTORY 4096u             /* power changes remembered per domain (SIM_ENERGY_AT) */
#define SIM_BUSY_PER_SECOND ((unsigned __int128)SIM_NS_PER_SECOND * SIM_LOAD_ONE)
#define SIM_NO_DOMAIN UINT32_MAX

typedef unsigned __int128 sim_u128;

/* A clock of core_hz in the fixed point of struct sim_progress's `core`. */
#define SIM_CLOCK_ONE (1u << 20)
/* A busy CPU's power factor of 1 (its share of the domain's max - idle at the all-core clock). */
#define SIM_POWER_ONE (1u << 16)

/* How far a CPU has run: busy time (ns * SIM_LOAD_ONE) and the same weighted by its actual
 * clock (ns * SIM_LOAD_ONE * SIM_CLOCK_ONE * clock / core_hz). Reference counters (MPERF,
 * REF_TSC, REF_XCLK) follow `busy`, core counters (APERF, cycles, instructions) `core`. */
struct sim_progress {
	sim_u128 busy;
	sim_u128 core;
	uint64_t smis;          /* SMIs the machine has taken (sim_rough.c), busy or not */
};

/* A counter that advances with its CPU's busy time (or core cycles) at `rate` events per busy
 * second (at core_hz). */
struct sim_counter {
	uint64_t base;          /* value when the CPU had run busy_base */
	struct sim_progress busy_base;
	uint64_t rate;          /* 0 while the counter does not count */
	uint64_t mask;          /* 2^width - 1 */
	bool core_clock;        /* counts with the core clock, not the reference one */
	bool smis;              /* counts SMIs (AMD PMCx02B), one each while rate is not 0 */
};

/* Power of a domain from seg_t0 on: from_uw, moving linearly to to_uw over seg_len ns (a ramp of
 * a power trace), constant when seg_len is 0. */
struct sim_power_law {
	uint64_t seg_t0;
	uint64_t from_uw;
	uint64_t to_uw;
	uint64_t seg_len;
};

/* The power law in force from time t on, and the energy at t: SIM_ENERGY_AT looks back. */
struct sim_history_entry {
	uint64_t t;
	sim_u128 energy_fj;
	struct sim_power_law law;
};

/* One instance of a RAPL domain: a (package, domain) pair, or one core for AMD's core energy. */
struct sim_domain {
	enum rapl_domain kind;
	uint32_t index;         /* position in sim->domains: selects its jitter */
	uint32_t exponent;      /* unit code: J = units * 2^-exponent, or 2^(e & 31) uJ at 0x80 | e */
	uint64_t idle_uw;
	uint64_t span_uw;       /* max - idle */
	uint32_t first_cpu;     /* its CPUs are among first_cpu .. first_cpu + span - 1 */
	uint32_t span;          /* (those whose domain[kind] is this one: a die's CPUs are two
				 * runs of its package's when threads share a core) */
	uint32_t cpus;          /* how many CPUs drive this domain */
	bool clocked;           /* a busy CPU's share grows with its clock (not DRAM, not PP1) */
	bool traced;            /* a power trace sets the power, not the load */
	struct sim_power_law law;
	uint64_t phase_ns;      /* offset of its update grid */
	uint64_t t;             /* energy is integrated up to this time */
	sim_u128 energy_fj;     /* consumed up to t */
	sim_u128 update_fj;     /* consumed up to the last register update <= t */
	uint64_t update_ns;     /* time of that update */
	struct sim_history_entry *history; /* ring of SIM_HISTORY */
	uint64_t history_count; /* entries ever written */
	uint64_t reads;         /* reads of its status register (late-completion option) */
	uint64_t held;          /* the value read at the start of the current late cycle */
};

enum sim_load_source {
	SIM_LOAD_FIXED = 0,     /* set by backend_sim_set_load (idle at start in virtual time) */
	SIM_LOAD_HOST = 1,
	SIM_LOAD_SCRIPT = 2,
};

struct sim_cpu {
	uint64_t t;             /* busy time is integrated up to this time */
	sim_u128 busy;          /* ns * SIM_LOAD_ONE */
	sim_u128 core;          /* busy weighted by the clock: struct sim_progress */
	uint64_t clock_q;       /* clock while busy, SIM_CLOCK_ONE = core_hz (its noise aside) */
	uint32_t power_q;       /* power factor while busy, SIM_POWER_ONE at the all-core clock */
	uint32_t noise_offset;  /* where in the noise table its busy time starts */
	uint32_t load;
	enum sim_load_source source;
	uint32_t package;
	uint32_t die;           /* dense (package, die) index; the package when one die each */
	uint32_t domain[RAPL_DOMAIN_COUNT]; /* index into sim->domains, or SIM_NO_DOMAIN */
	int64_t tsc_offset;
	uint8_t core_type;      /* CPUID 1AH's on a hybrid part (sim_cpuid.c), else 0 */
	uint32_t gp_count;      /* counters this CPU has: the core type's, else leaf 0AH's */
	uint32_t fixed_count;
	uint32_t slots_per_cycle; /* fixed counter 3 (TOPDOWN.SLOTS) a core cycle */
	uint64_t evtsel[SIM_MAX_GP_COUNTERS];
	struct sim_counter gp[SIM_MAX_GP_COUNTERS];
	struct sim_counter fixed[SIM_MAX_FIXED_COUNTERS];
	struct sim_counter aperf, mperf;
	uint64_t fixed_ctrl;
	uint64_t global_ctrl;
	uint64_t global_status;
	uint64_t *registers;    /* values of the model's plain registers */
};

struct sim_event_rate {
	uint16_t event;         /* 12 bits on AMD */
	uint8_t umask;
	uint64_t rate;
	bool reference;         /* counts with the reference clock (REF_XCLK), not the core's */
	bool smis;              /* counts SMIs received, not a rate (AMD PMCx02B) */
};

/* Performance-monitoring configuration derived from CPUID 0xA (or the AMD model's core counters)
 * and the model's rates. */
struct sim_pmu {
	bool amd;               /* PERF_CTL/PERF_CTR pairs */
	bool perfmon_v2;        /* AMD with PerfCntrGlobalCtl (0xC0000301) gating them */
	uint32_t version;
	uint32_t gp_count, fixed_count;
	uint64_t gp_mask, fixed_mask;
	bool full_width_writes;
	bool tsx;               /* IN_TX / IN_TXCP writable (SDM 18.3.6.5) */
	uint32_t arch_events_length; /* CPUID.0AH:EAX[31:24]: EBX bits beyond it enumerate nothing */
	uint64_t perf_capabilities;
	uint64_t evtsel_valid, fixed_ctrl_valid, global_ctrl_valid;
	uint64_t cycles_rate, ref_cycles_rate, instructions_rate;
	uint64_t ref_xclk_rate;  /* event 3CH/01H */
	uint32_t user_permille;
	struct sim_event_rate *events;
	uint32_t event_count;
};

struct sim_timeline_state {
	size_t segment;
	uint64_t segment_end;
};

/* A counter the simulated kernel takes (sim_kernel.c). */
struct sim_kernel_takeover {
	uint32_t index;         /* programmable counter */
	uint64_t at_ns;         /* when, if later */
	bool later;
	bool done;
	bool zero;              /* perf_clear_dirty_counters: only the counter is written (0) */
	bool enable_all;        /* __intel_pmu_enable_all: GLOBAL_CTRL = every counter's bit */
};
#define SIM_MAX_TAKEOVERS 8u
/* A power trace (backend/sim/sim_power.c): per RAPL domain kind, segments played once from the time
 * the trace was loaded; after the last one the power holds its end value. */
struct sim_power_segment {
	uint64_t duration_ns;
	uint64_t from_uw, to_uw;
};

struct sim_power_trace {
	struct sim_power_segment *segments[RAPL_DOMAIN_COUNT];
	size_t count[RAPL_DOMAIN_COUNT];
};

struct sim_power_state {
	size_t segment;          /* current segment; == count when done (holding) */
	uint64_t segment_end;    /* UINT64_MAX when holding */
};

#define SIM_NOISE_TABLE 4096u /* clock noise draws, repeated: a CPU's n-th busy interval takes
				* entry (offset + n) mod this */

/* The clock of busy CPUs (sim_clock.c); off (every clock core_hz) on the ideal CPU or a model
 * without a clock section. Clocks in SIM_CLOCK_ONE units. */
struct sim_clock {
	bool on;
	uint32_t cores;           /* cores per package */
	uint32_t bin_count;
	uint64_t *bins_q;         /* clock with 1, 2, ... active cores */
	uint64_t min_q;
	uint64_t all_core_q;      /* the clock with every core active: power factor 1 */
	double power_exponent;
	bool power_limit;
	uint64_t *limit_uw;       /* per package: PL1 when enabled, else 0 */
	double *activity;         /* per core of the package being updated: share of time active */
	sim_u128 noise_busy;      /* busy time of one noise draw */
	int64_t *noise;           /* SIM_NOISE_TABLE draws in SIM_CLOCK_ONE units, summing to 0 */
	int64_t *noise_prefix;    /* SIM_NOISE_TABLE + 1 partial sums */
};

/* The rough behaviour in force (configs/models/README.md; the thesis, seed 001 §2.3, measured
 * the jitter and the SMIs); all zero for the ideal CPU. */
struct sim_rough {
	bool on;
	uint64_t seed;
	uint64_t update_interval_ns;
	enum sim_jitter_distribution jitter;
	uint64_t jitter_spread_ns;
	uint64_t smi_offset_ns;  /* first SMI's grid point after the start */
	uint64_t smi_min_ns, smi_max_ns;
	uint64_t smi_jitter_ns;
	uint64_t host_sample_ns;
};

struct sim {
	struct sim_model *model;
	struct sim_rough rough;
	struct sim_clock clock;
	struct machine_info info;
	bool virtual_time;
	uint64_t access_step_ns;
	uint32_t late_energy_reads; /* backend_options.sim_late_energy_reads */
	bool kernel_nmi_watchdog;   /* --sim-kernel-counters nmi */
	uint32_t takeover_count;
	struct sim_kernel_takeover takeovers[SIM_MAX_TAKEOVERS];
	uint64_t start_ns;
	uint64_t now;           /* latest time any observation was made at */
	uint32_t cpu_count;
	struct sim_cpu *cpus;
	uint32_t domain_count;
	struct sim_domain *domains;
	struct sim_pmu pmu;
	uint64_t smi_period_ns;
	uint32_t unit_address;  /* MSR_RAPL_POWER_UNIT or the AMD one; 0 without RAPL */
	struct sim_host_load *host;
	uint64_t host_sampled_at;
	bool host_failed;
	bool host_is_real;          /* the load comes from the host's own /proc/stat */
	struct sim_follow *follow;  /* msrd's clients' load, exactly (sim_follow.c); NULL: none */
	struct sim_script *script;
	struct sim_timeline_state *timeline_state;
	uint64_t next_script_change;
	struct sim_power_trace *power;
	struct sim_power_state power_state[RAPL_DOMAIN_COUNT];
	uint64_t power_started;
	uint64_t next_power_change;
};

/* ---- sim_cpuid.c ---- */
/* The core type entry of CPU `index` of a package, or NULL on a part that is not hybrid. */
const struct sim_model_core_type *sim_core_type_of(const struct sim_model *model,
						   uint32_t index);

/* Busy time and core cycles of `cpu` brought up to `t` (SMIs run nothing: their time is not
 * busy). */
struct sim_progress sim_cpu_progress_at(struct sim *sim, struct sim_cpu *cpu, uint64_t t);

/* ---- sim.c, for sim_build.c: what building the machine sets going ---- */
/* A load-driven domain: idle + (max - idle) x mean load of its CPUs, each weighted by its power
 * factor (sim_clock.c: 1 at the all-core clock), from domain->t on; never above max. */
void sim_domain_set_power(const struct sim *sim, struct sim_domain *domain);
/* Bring the package's CPUs and domains up to t, then give `index` (a CPU of it, or UINT32_MAX
 * for none) the load `load` and the package's CPUs the clocks and domains the powers that
 * follow: one CPU's load moves every clock of its package (the active cores change). */
void sim_package_set(struct sim *sim, uint32_t package, uint32_t index, uint32_t load,
		     uint64_t t);
/* Change one CPU's load at time t (objects are first brought up to t with the old load). */
void sim_cpu_set_load(struct sim *sim, uint32_t index, uint32_t load, uint64_t t);
/* A register as `cpu` reads it: time, RAPL, PMU or the model's plain registers; -EIO (a #GP,
 * as the msr driver reports it) when the model lacks it. */
int sim_read_register(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t *value);
/* Forget the load script (and its timelines). */
void sim_script_release(struct sim *sim);

/* ---- sim_rough.c: the update grid, SMIs, the seeded draws ---- */
/* Configure sim->rough from the model (rough unless `ideal` or the model has no rough part). */
void sim_rough_configure(struct sim *sim, bool ideal, uint64_t seed);
/* Time of the latest register update of `domain` at or before t; false when none yet. */
bool sim_rough_last_update(const struct sim *sim, const struct sim_domain *domain, uint64_t t,
			   uint64_t *update_ns);
/* SMIs that began at or before t since the start. */
uint64_t sim_rough_smi_count(const struct sim *sim, uint64_t t);
/* The end of the SMI that holds t, or t when none does. */
uint64_t sim_rough_smi_end(const struct sim *sim, uint64_t t);
/* Time SMIs took within [a, b). */
uint64_t sim_rough_smi_time(const struct sim *sim, uint64_t a, uint64_t b);
/* Draw `index` of `what`: normal with sigma = spread / 3, truncated at +-spread. */
double sim_rough_draw_normal(const struct sim *sim, uint64_t what, uint64_t index, double spread);
/* Draw `index` of `what`: uniform 64 bits. */
uint64_t sim_rough_draw(const struct sim *sim, uint64_t what, uint64_t index);

/* ---- sim_clock.c: the clock of busy CPUs (turbo bins, noise, the power limit) ---- */
/* Configure sim->clock from the model (off when `ideal` or the model has no clock); every CPU at
 * its idle-machine clock. Needs sim->cpus. */
int sim_clock_configure(struct sim *sim, bool ideal);
void sim_clock_free(struct sim *sim);
/* Core-clock progress of `cpu` over busy time [from, from + delta) at its current clock. */
sim_u128 sim_clock_core_delta(const struct sim *sim, const struct sim_cpu *cpu, sim_u128 from,
			      sim_u128 delta);
/* Recompute the clocks and power factors of `package`'s CPUs from their loads (the caller has
 * brought them and the package's domains up to now). */
void sim_clock_update(struct sim *sim, uint32_t package);
/* MSR_PKG_POWER_LIMIT of `package` became `value` (PL1 caps the clock if the model says so). */
void sim_clock_set_power_limit(struct sim *sim, uint32_t package, uint64_t value);

/* ---- sim_power.c: power traces ---- */
/* Parse a trace (format in configs/models/README.md) for this model's domains. `where` names the
 * source in log lines. An empty text gives an empty trace. */
int sim_power_parse(const struct sim *sim, const char *text, const char *where,
		    struct sim_power_trace **out);
void sim_power_free(struct sim_power_trace *trace);

/* ---- sim_follow.c: the load of msrd's clients from their CPU-time clocks ---- */
struct sim_follow;
/* Follow pid (nested per call) or stop, at the observation `now` (sim_follow_process). */
int sim_follow_change(struct sim *sim, pid_t pid, bool follow, uint64_t now);
/* At an observation at `now`: when a fine sample is due, the load of each host CPU (the
 * followed processes' share since *from plus the rest of the host's) in *loads, true. */
bool sim_follow_sample(struct sim *sim, uint64_t now, uint64_t *from, const uint32_t **loads,
		       uint32_t *host_cpus);
/* /proc/stat was just sampled at `now`: the rest of each host CPU's load, and where each
 * followed process runs. */
void sim_follow_host_sampled(struct sim *sim, uint64_t now);
/* Whether any process is followed (its CPUs' loads then come from sim_follow_sample). */
bool sim_follow_active(const struct sim *sim);
void sim_follow_free(struct sim_follow *follow);

/* ---- sim_kernel.c ---- */
/* Apply --sim-kernel-counters SPEC (0, or -EINVAL with `why`). */
int sim_kernel_configure(struct sim *sim, const char *spec, char *why, size_t why_size);
/* The kernel's takeovers due by `now`. */
void sim_kernel_run_until(struct sim *sim, uint64_t now);

/* ---- sim_pmu.c ---- */
int sim_pmu_configure(struct sim *sim);
void sim_pmu_free(struct sim *sim);
void sim_pmu_reset_cpu(const struct sim *sim, struct sim_cpu *cpu);
/* -ENOENT when `address` is no PMU register of this model, else 0 or -EIO. */
int sim_pmu_read(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t *value);
int sim_pmu_write(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t value);

/* A counter's value at progress `busy`. */
uint64_t sim_counter_value(const struct sim_counter *counter, struct sim_progress busy);
/* Set the value at progress `busy` (keeps the rate). */
void sim_counter_set(struct sim_counter *counter, struct sim_progress busy, uint64_t value);

#endif
