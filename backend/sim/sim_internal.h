/*
 * backend/sim/sim_internal.h — the simulated CPU's state, shared by sim.c (time, load, energy,
 * register dispatch) and sim_pmu.c (performance counters). Private to the sim backend.
 *
 * Exactness: busy time is an integer count of ns * SIM_LOAD_ONE, energy an integer count of
 * femtojoules (µW * ns), and every event count is floor(busy * rate / SIM_BUSY_PER_SECOND) of
 * the cumulative busy time, so nothing drifts however often or rarely it is observed.
 */
#ifndef HAECER_SERVER_SIM_INTERNAL_H
#define HAECER_SERVER_SIM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "hw/msr.h"
#include "backend/backend.h"
#include "backend/sim/sim_load.h"
#include "backend/sim/sim_model.h"

#define SIM_NS_PER_SECOND 1000000000ull
#define SIM_UPDATE_NS 1000000ull      /* ideal: RAPL energy registers change every 1 ms */
#define SIM_HOST_SAMPLE_NS 100000000ull /* ideal: /proc/stat is read at most every 100 ms */
#define SIM_HISTORY 4096u             /* power changes remembered per domain (SIM_ENERGY_AT) */
#define SIM_BUSY_PER_SECOND ((unsigned __int128)SIM_NS_PER_SECOND * SIM_LOAD_ONE)
#define SIM_NO_DOMAIN UINT32_MAX

typedef unsigned __int128 sim_u128;

/* A counter that advances with its CPU's busy time at `rate` events per busy second. */
struct sim_counter {
	uint64_t base;          /* value when the CPU's busy time was busy_base */
	sim_u128 busy_base;
	uint64_t rate;          /* 0 while the counter does not count */
	uint64_t mask;          /* 2^width - 1 */
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
	uint32_t exponent;      /* J = units * 2^-exponent */
	uint64_t idle_uw;
	uint64_t span_uw;       /* max - idle */
	uint32_t cpus;          /* CPUs whose load drives this domain */
	uint64_t load_sum;      /* sum of their loads (SIM_LOAD_ONE each when busy) */
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
	uint32_t load;
	enum sim_load_source source;
	uint32_t package;
	uint32_t domain[RAPL_DOMAIN_COUNT]; /* index into sim->domains, or SIM_NO_DOMAIN */
	int64_t tsc_offset;
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
	uint64_t evtsel_valid, fixed_ctrl_valid, global_ctrl_valid, ovf_ctrl_valid;
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

/* The rough behaviour in force (DESIGN.md section 6); all zero for the ideal CPU. */
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
	struct sim_script *script;
	struct sim_timeline_state *timeline_state;
	uint64_t next_script_change;
	struct sim_power_trace *power;
	struct sim_power_state power_state[RAPL_DOMAIN_COUNT];
	uint64_t power_started;
	uint64_t next_power_change;
};

/* Busy time of `cpu` brought up to `t` (SMIs run nothing: their time is not busy). */
sim_u128 sim_cpu_busy_at(struct sim *sim, struct sim_cpu *cpu, uint64_t t);

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

/* ---- sim_power.c: power traces ---- */
/* Parse a trace (format in configs/models/README.md) for this model's domains. `where` names the
 * source in log lines. An empty text gives an empty trace. */
int sim_power_parse(const struct sim *sim, const char *text, const char *where,
		    struct sim_power_trace **out);
void sim_power_free(struct sim_power_trace *trace);

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

/* A counter's value at busy time `busy`. */
uint64_t sim_counter_value(const struct sim_counter *counter, sim_u128 busy);
/* Set the value at busy time `busy` (keeps the rate). */
void sim_counter_set(struct sim_counter *counter, sim_u128 busy, uint64_t value);

#endif
