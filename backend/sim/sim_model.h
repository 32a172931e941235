/*
 * backend/sim/sim_model.h — a simulated CPU model as described by configs/models/NAME.yaml
 * (private to the sim backend). The YAML is read with libcyaml, then checked by a pass of our own
 * (libcyaml checks only the shape of a document).
 */
#ifndef HAECER_SERVER_SIM_MODEL_H
#define HAECER_SERVER_SIM_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cyaml/cyaml.h>

#include "hw/msr.h"

#define SIM_MODEL_NAME_MAX 31u /* machine_info.sim_model holds 32 bytes */
#define SIM_MAX_GP_COUNTERS 8u
#define SIM_MAX_FIXED_COUNTERS 4u /* 0-2, and 3 (TOPDOWN.SLOTS) on Golden Cove P-cores */

struct sim_model_domain {
	enum rapl_domain domain;
	double idle_watts;
	double max_watts;
	unsigned *energy_exponent;  /* fixed unit (server DRAM); NULL = from the unit register */
};

struct sim_model_rapl {
	uint64_t unit;              /* raw MSR_RAPL_POWER_UNIT / AMD 0xC0010299 value */
	uint64_t *power_info;       /* raw MSR_PKG_POWER_INFO (Intel), NULL when absent */
	struct sim_model_domain *domains;
	unsigned domains_count;
};

struct sim_model_event {
	unsigned event;             /* 8 bits on Intel, 12 on AMD */
	unsigned umask;
	double per_kinst;           /* events per 1000 instructions */
};

struct sim_model_pmu {
	double ipc;                 /* instructions per core cycle */
	double user_share;          /* share of busy time in user mode (USR vs OS filtering) */
	double llc_references_per_kinst;
	double llc_misses_per_kinst;
	double branches_per_kinst;
	double branch_misses_per_kinst;
	struct sim_model_event *events;
	unsigned events_count;
};

/* One kind of core of a hybrid part (Alder Lake): the next `cpus` CPUs of each package, in
 * order, answer CPUID 1AH with `core_type` and have these counters, whatever the common leaf 0AH
 * (the model's cpuid_0a) says. */
struct sim_model_core_type {
	unsigned core_type;         /* CPUID 1AH EAX[31:24]: 0x40 Intel Core, 0x20 Intel Atom */
	unsigned cpus;
	unsigned gp_counters;
	unsigned fixed_counters;    /* 4: fixed counter 3 is TOPDOWN.SLOTS */
	unsigned slots_per_cycle;   /* what fixed counter 3 counts a core cycle (pipeline width) */
};

/* A CPUID leaf the model answers as listed (CPUID 15H, 16H, 80000007H, ...); leaves 0, 1, 7,
 * 0AH, 1AH and 80000000H follow from the rest of the model unless listed. */
struct sim_model_cpuid_leaf {
	uint32_t leaf;
	uint32_t subleaf;
	uint32_t *regs;             /* eax, ebx, ecx, edx */
};

struct sim_model_register {
	unsigned address;
	uint64_t value;             /* value at reset */
	uint64_t write_mask;        /* bits a write may change; others must be written unchanged */
};

/* How rough the simulated CPU is (configs/models/README.md, "rough"); absent: exact. */
enum sim_jitter_distribution {
	SIM_JITTER_UNIFORM = 0,    /* uniform in [-spread, +spread] */
	SIM_JITTER_NORMAL = 1,     /* normal, sigma = spread / 3, truncated at +-spread */
};

struct sim_model_phase {
	enum rapl_domain domain;
	unsigned phase_ns;          /* offset of this domain's update grid */
};

struct sim_model_rough {
	unsigned update_interval_ns;       /* mean distance of energy-register updates */
	enum sim_jitter_distribution jitter;
	unsigned jitter_spread_ns;         /* bound of an update's offset from its grid point */
	struct sim_model_phase *phases;
	unsigned phases_count;
	unsigned smi_min_cycles;           /* TSC cycles one SMI stops the CPU for */
	unsigned smi_max_cycles;
	unsigned smi_jitter_us;            /* an SMI's start varies this much around its period */
	unsigned host_sample_us;           /* how often the host's per-CPU load is sampled */
};

/* The clock of a busy CPU (configs/models/README.md, "clock"); absent: always core_hz. */
struct sim_model_clock {
	unsigned *turbo_mhz;               /* highest clock with 1, 2, ... active cores */
	unsigned turbo_mhz_count;
	unsigned min_mhz;                  /* the power limit takes the clock no lower */
	unsigned noise_mhz;                /* spread of the clock around its bin */
	unsigned noise_interval_us;        /* one draw per this much busy time of a CPU */
	double power_exponent;             /* a busy CPU's power goes as clock^this */
	bool power_limit;                  /* MSR_PKG_POWER_LIMIT's PL1 caps the package */
};

struct sim_model {
	char *description;
	char *vendor;
	char *model_name;
	unsigned family;
	unsigned model;
	unsigned stepping;
	unsigned packages;
	unsigned cpus_per_package;
	unsigned threads_per_core;
	unsigned dies_per_package;  /* 0 or 1: one; more: RAPL per die (Cascade Lake-AP) */
	uint64_t core_hz;
	uint64_t tsc_hz;
	uint32_t *cpuid_0a;         /* 4 values, NULL on parts without Intel arch perfmon; on a
				     * hybrid part what every CPU answers: the common counters */
	struct sim_model_core_type *core_types; /* hybrid parts, else NULL */
	unsigned core_types_count;
	struct sim_model_cpuid_leaf *cpuid;
	unsigned cpuid_count;
	uint64_t perf_capabilities; /* IA32_PERF_CAPABILITIES; 0 = the MSR does not exist */
	bool *tsx;                  /* CPUID.07H:EBX reports HLE or RTM; NULL = as the part shipped
				     * (sim_model_has_tsx) */
	unsigned core_counters;     /* AMD PERF_CTL/PERF_CTR pairs (6 on Zen); 0 = none */
	unsigned core_counter_width;
	bool perfmon_v2;            /* AMD PerfMonV2 (CPUID Fn8000_0022 EAX[0]): PerfCntrGlobalCtl
				     * gates counting, clear at start (Linux's idle perf) */
	bool smi_count;             /* MSR_SMI_COUNT exists */
	unsigned smi_period_ms;     /* one simulated SMI per period; 0 = none */
	uint64_t ref_xclk_hz;       /* rate of event 0x3C umask 0x01 (REF_XCLK); 0 = tsc_hz */
	struct sim_model_rough *rough; /* NULL: the model has no rough settings */
	struct sim_model_clock *clock; /* NULL: the clock is core_hz whenever busy */
	bool aperf_mperf;           /* IA32_MPERF 0xE7 / IA32_APERF 0xE8 exist */
	struct sim_model_pmu *pmu;
	struct sim_model_rapl *rapl;
	struct sim_model_register *registers;
	unsigned registers_count;
};

/* Load and check NAME from the model search path (or models_dir when not NULL). On failure the
 * reason is logged with the file name. */
int sim_model_load(const char *models_dir, const char *name, struct sim_model **out);
void sim_model_free(struct sim_model *model);

/* The directory the model files are taken from: models_dir, $HAECER_MODELS_DIR,
 * <dir of /proc/self/exe>/../configs/models (a source tree's build/msrd),
 * <dir of /proc/self/exe>/../share/haecer/models (PREFIX/sbin/msrd of any PREFIX),
 * /usr/local/share/haecer/models, /usr/share/haecer/models; the first that is a directory. */
int sim_model_find_dir(const char *models_dir, char *dir, size_t dir_size);
/* The folders sim_model_find_dir searches, comma-separated, for an error message. */
void sim_model_describe_search(const char *models_dir, char *out, size_t size);

bool sim_model_is_amd(const struct sim_model *model);

/* sim_cpuid.c: the schema of `core_types` and `cpuid` entries, and their check (NULL
 * when they are fine, else what is wrong). */
extern const cyaml_schema_value_t sim_model_core_type_entry;
extern const cyaml_schema_value_t sim_model_cpuid_entry;
const char *sim_model_check_cpuid(const struct sim_model *model);

/* Whether the part has Intel TSX (HLE or RTM in CPUID.07H:EBX), which makes IN_TX and IN_TXCP
 * (IA32_PERFEVTSELx bits 32 and 33) writable: the model's `tsx`, or else whether this family 6
 * model shipped with it (Haswell through Sapphire Rapids server and client parts). */
bool sim_model_has_tsx(const struct sim_model *model);

#endif
