/*
 * libclient/event_db.h — the event database: what a CPU can count and how to program it.
 * Internal to libhaecer (the HAECER layer calls it; applications never see it).
 *
 * Input is a description of a machine as msrd's MACHINE_INFO reports it (real CPUID or the
 * simulated model), never the host this library runs on. From it the database answers:
 *   - perfmon capabilities (CPUID leaf 0xA, Intel SDM vol. 3B 18.2), which of the seven
 *     architectural events exist, which fixed-function counters exist;
 *   - the PERFEVTSEL and FIXED_CTR_CTRL encodings of an event with flags and a counter mask,
 *     rejecting what the SDM marks reserved for this perfmon version;
 *   - non-architectural events of the CPU model by libpfm4 name ("L1D.REPLACEMENT",
 *     "MEM_LOAD_UOPS_RETIRED:L1_HIT", with or without the "snb::" PMU prefix), as raw encodings,
 *     and whether a raw (event, umask) pair exists on the model;
 *   - RAPL domains: MSR, unit register, unit exponent, scope, presence.
 * It knows nothing of sockets or msrd: no function here does I/O.
 *
 * Errors (all functions return 0 or a non-negative value on success, -errno on failure, and
 * never set errno):
 *   -ENOENT      unknown event, counter or domain name
 *   -EOPNOTSUPP  the event or counter kind does not exist on this CPU
 *   -EINVAL      bad flags, counter mask or argument
 *   -ENOMEM      out of memory
 * Functions that can fail for a reason worth telling a user take `why`/`why_size` (why may be
 * NULL): on failure they write one sentence there, e.g. "LL_CACHE_MISSES is not available on this
 * CPU (CPUID.0AH:EBX bit 4 set)". event_db_strerror() gives the generic text of a code.
 *
 * Thread safety: an event_db is immutable after event_db_open() except for the libpfm4 tables,
 * which are built lazily under a lock; every function may be called from any thread.
 *
 * libpfm4 is initialised on the first name lookup (pthread_once), with LIBPFM_ENCODE_INACTIVE=1
 * set only around pfm_initialize() so the tables of CPUs other than the host stay reachable
 * through an explicit "pmu::" prefix; the host's own libpfm4 view is unchanged (no
 * LIBPFM_FORCE_PMU). Limits worth stating in the public header: an application that
 * initialised libpfm4 before haecer must export LIBPFM_ENCODE_INACTIVE=1 itself for a simulated
 * or remote model to resolve (the error says so); an application LIBPFM_FORCE_PMU hides every
 * other table; the first lookup must not race with getenv/setenv in another thread.
 */
#ifndef HAECER_LIBCLIENT_EVENT_DB_H
#define HAECER_LIBCLIENT_EVENT_DB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hw/msr.h"

/* Symbols of this header are not part of libhaecer.so's ABI. */
#define EVENT_DB_INTERNAL __attribute__((visibility("hidden")))

/* A sentence buffer large enough for every message of this file. */
#define EVENT_DB_WHY_SIZE 256u

/* The machine, as msrd's MACHINE_INFO describes it (backend/backend.h struct machine_info). */
struct event_machine {
	char vendor[16];            /* CPUID leaf 0: "GenuineIntel", "AuthenticAMD" */
	uint32_t family;            /* display family (base + extended) */
	uint32_t model;             /* display model (base + extended << 4) */
	uint32_t stepping;
	uint32_t cpuid_0a[4];       /* leaf 0xA: eax, ebx, ecx, edx (zeros on AMD) */
	uint32_t rapl_domains;      /* bit (1 << enum rapl_domain) per domain that exists */
	uint64_t rapl_power_unit;   /* raw RAPL unit register, 0 when no RAPL */
	uint8_t rapl_energy_exponent[RAPL_DOMAIN_COUNT]; /* msrd's J = count * 2^-x, 0 = unknown */
	char sim_model[32];         /* simulated model name, "" on real hardware */
	char model_name[64];        /* msrd's description, e.g. "..., VM under KVMKVMKVM" */
	bool virtual_machine;       /* a hypervisor runs msrd (HAECER_MACHINE_VIRTUAL) */
	uint8_t core_type;          /* hybrid part: the core type this database encodes for
				     * (enum cpu_core_type of hw/core_type.h), 0 otherwise */
};

enum event_vendor {
	EVENT_VENDOR_UNKNOWN = 0,
	EVENT_VENDOR_INTEL = 1,
	EVENT_VENDOR_AMD = 2,       /* also Hygon: same PMU and RAPL MSRs */
};

/* Hard limits of the MSR layout: IA32_PERFEVTSEL0..7 (0x186-0x18D) are the architectural
 * range, and IA32_PERF_GLOBAL_CTRL has 32 PMC bits and fixed bits 32..47. CPUID values above
 * are clamped so no caller computes an address outside these ranges. */
#define EVENT_DB_MAX_GP_COUNTERS 8u
#define EVENT_DB_MAX_FIXED_COUNTERS 16u
#define EVENT_DB_MAX_COUNTER_WIDTH 64u

/* AMD family 17h+ core counters: PERF_CTLn = 0xC0010200 + 2n, PERF_CTRn = 0xC0010201 + 2n. */
#define EVENT_DB_AMD_PERF_CTL0 0xC0010200u
#define EVENT_DB_AMD_PERF_CTR0 0xC0010201u
#define EVENT_DB_AMD_CORE_COUNTERS 6u
#define EVENT_DB_AMD_CORE_WIDTH 48u

struct event_caps {
	enum event_vendor vendor;
	uint8_t version;            /* architectural perfmon version, 0 = none (AMD, unknown) */
	uint8_t gp_counters;        /* programmable counters IA32_PMCx */
	uint8_t gp_width;           /* their width in bits */
	uint8_t fixed_counters;     /* fixed counters 0..n-1 exist contiguously */
	uint32_t fixed_mask;        /* bit i: fixed counter i exists (v5 may leave holes) */
	uint8_t fixed_width;
	uint8_t arch_events;        /* bit i (enum arch_event_index): event i is available */
	uint8_t arch_events_length; /* CPUID.0AH:EAX[31:24], how many EBX bits are meaningful */
	bool any_thread;            /* PERFEVTSEL.ANY / FIXED_CTR_CTRL AnyThread usable */
	uint8_t amd_core_counters;  /* AMD family 17h+: PERF_CTL/PERF_CTR pairs, else 0 */
	uint8_t amd_core_width;
};

/* Which fixed-function counter (SDM table "fixed-function performance counters"). */
enum fixed_counter_index {
	FIXED_INST_RETIRED_ANY = 0,
	FIXED_CPU_CLK_UNHALTED_CORE = 1,
	FIXED_CPU_CLK_UNHALTED_REF = 2,
	FIXED_NAMED_COUNT = 3,      /* fixed counters with a name in our table */
};

/* Flags of an event. USR/OS select the privilege levels counted; EDGE, INV, ANY as in the SDM
 * (PERFEVTSEL bits 18, 23, 21). INT (PMI on overflow), PC and EN are never taken from a caller:
 * haecer has no PMI handler, and enabling is the counter's state, not its event. */
#define EVENT_FLAG_USR 0x1u
#define EVENT_FLAG_OS 0x2u
#define EVENT_FLAG_EDGE 0x4u
#define EVENT_FLAG_INV 0x8u
#define EVENT_FLAG_ANY 0x10u
#define EVENT_FLAG_ALL 0x1Fu

struct event_arch_event {
	const char *name;           /* seed table 3: "UNHALTED_CORE_CYCLES", ... */
	uint8_t event;
	uint8_t umask;
};

/* What the libpfm4 path or a raw check resolved to. */
#define EVENT_DB_NAME_SIZE 160u
struct event_encoding {
	uint64_t evtsel;            /* PERFEVTSEL (Intel) or PERF_CTL (AMD) value, EN clear */
	uint16_t event;             /* event select (12 bits on AMD) */
	uint8_t umask;
	char name[EVENT_DB_NAME_SIZE]; /* libpfm4's canonical "pmu::EVENT:UMASK" */
};

enum event_rapl_scope {
	EVENT_RAPL_PACKAGE = 0,
	EVENT_RAPL_CORE = 1,
};

/* Static facts of a RAPL domain. */
struct event_rapl_domain {
	const char *name;           /* "RAPL_PKG", ..., "RAPL_AMD_CORE" */
	enum rapl_domain domain;
	enum event_vendor vendor;
	uint32_t energy_msr;
	uint32_t unit_msr;
	enum event_rapl_scope scope;
};

/* A RAPL domain on this machine. */
struct event_rapl {
	const struct event_rapl_domain *domain;
	uint8_t exponent;           /* unit code (hw/rapl_quirks.h): 2^-code J, or 2^e uJ on Atom */
	double joules_per_count;    /* rapl_unit_code_joules(exponent) */
	bool exponent_from_msrd;    /* msrd's per-domain value overrode our derivation */
};

/* One database per machine. Fields are private to event_db*.c. */
struct event_pfm_pair;
struct event_db {
	struct event_machine machine;
	struct event_caps caps;
	const char *pmu_name;       /* libpfm4 PMU of the model, NULL when none is known */
	int pmu_id;                 /* its pfm_pmu_t, -1 when absent from this libpfm4 */
	pthread_mutex_t pfm_lock;   /* guards the lazily built table below */
	bool pfm_table_built;
	int pfm_table_error;
	struct event_pfm_pair *pfm_pairs;
	size_t pfm_pair_count;
};

/* ---- the database ---- */

/* Build the database of `machine`. Never fails for an unknown CPU: it then has no counters and
 * no libpfm4 events. Guarantees *out is valid until event_db_close(). -EINVAL, -ENOMEM. */
EVENT_DB_INTERNAL int event_db_open(const struct event_machine *machine, struct event_db **out);
EVENT_DB_INTERNAL void event_db_close(struct event_db *db);

/* The decoded capabilities; valid as long as db. */
EVENT_DB_INTERNAL const struct event_caps *event_db_caps(const struct event_db *db);

/* "Intel family 6 model 42 stepping 7 (simulated model snb)" into buf; returns buf. */
EVENT_DB_INTERNAL const char *event_db_describe(const struct event_db *db, char *buf,
						size_t size);

/* Generic text of an error code of this file (never NULL). */
EVENT_DB_INTERNAL const char *event_db_strerror(int error);

/* ---- architectural events and fixed counters ---- */

/* Table entry of an architectural event, NULL for an index out of range. */
EVENT_DB_INTERNAL const struct event_arch_event *event_db_arch_event(unsigned index);

/* Index of an architectural event by name (case-insensitive), or -ENOENT. */
EVENT_DB_INTERNAL int event_db_arch_event_by_name(const char *name);

/* 0 when the event can be counted on a programmable counter of this machine: perfmon v1+,
 * at least one counter, index < EAX[31:24] and CPUID.0AH:EBX bit clear. -EOPNOTSUPP (with the
 * reason) otherwise, -EINVAL for a bad index. */
EVENT_DB_INTERNAL int event_db_arch_available(const struct event_db *db, unsigned index,
					      char *why, size_t why_size);

/* Name of a fixed counter ("INST_RETIRED_ANY"), NULL when unnamed or out of range. */
EVENT_DB_INTERNAL const char *event_db_fixed_name(unsigned fixed);
EVENT_DB_INTERNAL int event_db_fixed_by_name(const char *name);

/* 0 when fixed counter `fixed` exists on this machine (perfmon v2+, EDX[4:0] or, from v5,
 * the ECX bitmask); -EOPNOTSUPP with the reason otherwise. */
EVENT_DB_INTERNAL int event_db_fixed_available(const struct event_db *db, unsigned fixed,
					       char *why, size_t why_size);

/* The fixed counter that counts the same thing as architectural event `index` regardless of
 * machine (INSTRUCTIONS_RETIRED -> 0, UNHALTED_CORE_CYCLES -> 1, UNHALTED_REF_CYCLES -> 2), or
 * -ENOENT when there is none, -EINVAL for a bad index. */
EVENT_DB_INTERNAL int event_db_arch_fixed_equivalent(unsigned index);

/* The fixed counter the setup code should use instead of a programmable one for architectural
 * event `index` with these flags and counter mask on this machine, or -ENOENT when a
 * programmable counter is needed (no such fixed counter here, or a CMASK/EDGE/INV a fixed
 * counter cannot express). Guarantees: a returned counter exists and event_db_encode_fixed()
 * accepts the same flags. */
EVENT_DB_INTERNAL int event_db_arch_prefer_fixed(const struct event_db *db, unsigned index,
						 uint32_t flags, uint8_t cmask);

/* ---- encodings ---- */

/* PERFEVTSEL (Intel) or PERF_CTL (AMD family 17h+, event bits 11:8 at 35:32) value of a raw
 * event with EVENT_FLAG_* flags and counter mask, EN and INT clear. -EINVAL for flags outside
 * EVENT_FLAG_ALL, neither USR nor OS, INV without a counter mask, ANY where the SDM reserves
 * it (before v3, or deprecated by CPUID.0AH:EDX[15]) or on AMD, an event above 0xFF on Intel
 * or 0xFFF on AMD; -EOPNOTSUPP when the machine has no programmable counters. */
EVENT_DB_INTERNAL int event_db_encode_evtsel(const struct event_db *db, uint16_t event,
					     uint8_t umask, uint32_t flags, uint8_t cmask,
					     uint64_t *out, char *why, size_t why_size);

/* event_db_encode_evtsel() of architectural event `index` on this machine: on Intel after
 * event_db_arch_available(); on AMD (no CPUID leaf 0xA) of the core-counter event that counts
 * the same thing (event_db_amd_arch_equivalent), -EOPNOTSUPP with the reason when there is
 * none. */
EVENT_DB_INTERNAL int event_db_encode_arch(const struct event_db *db, unsigned index,
					   uint32_t flags, uint8_t cmask, uint64_t *out,
					   char *why, size_t why_size);

/* AMD family 17h+ core-counter event (PPR, "Core Performance Monitor Counters") that counts
 * what architectural event `index` counts: cycles not in halt (0x76), retired instructions
 * (0xC0), retired branches (0xC2), retired mispredicted branches (0xC3); NULL for the others
 * (reference cycles, LLC references and misses have no such core event) and out of range. */
EVENT_DB_INTERNAL const struct event_arch_event *event_db_amd_arch_equivalent(unsigned index);

/* IA32_FIXED_CTR_CTRL bits of fixed counter `fixed` (OS bit 0, USR bit 1, AnyThread bit 2 of
 * its nibble, PMI never), already shifted to the counter's nibble, and the mask of that nibble
 * so the caller can read-modify-write the shared register. -EINVAL for EDGE/INV (fixed
 * counters have no such bits), reserved ANY, neither USR nor OS; -EOPNOTSUPP when absent. */
EVENT_DB_INTERNAL int event_db_encode_fixed(const struct event_db *db, unsigned fixed,
					    uint32_t flags, uint64_t *bits, uint64_t *mask,
					    char *why, size_t why_size);

/* ---- non-architectural events from libpfm4 (event_db_pfm.c) ---- */

/* libpfm4 PMU name of a vendor/family/model ("snb", "skx", "amd64_fam19h_zen4"), NULL when
 * none. The name may be missing from the installed libpfm4 (then event_db has pmu_id -1). */
EVENT_DB_INTERNAL const char *event_db_pfm_pmu_for(enum event_vendor vendor, uint32_t family,
						   uint32_t model, uint32_t stepping);

/* The libpfm4 PMU of this machine's model, NULL when none. */
EVENT_DB_INTERNAL const char *event_db_pmu_name(const struct event_db *db);

/* Encode a libpfm4 event name for this machine's model (not the host's): "L1D.REPLACEMENT",
 * "L1D:REPLACEMENT", "snb::L1D:REPLACEMENT", with libpfm4 modifiers allowed in the name. flags
 * and cmask are applied as libpfm4 modifiers (u, k, e, i, c, t). -ENOENT unknown event or unit
 * mask, -EOPNOTSUPP no event table for this model (or a prefix naming another PMU, or an event
 * needing an extra MSR such as OFFCORE_RESPONSE), -EINVAL bad flags or modifiers. */
EVENT_DB_INTERNAL int event_db_pfm_encode(struct event_db *db, const char *name, uint32_t flags,
					  uint8_t cmask, struct event_encoding *out,
					  char *why, size_t why_size);

/* Call each(arg, name) (unless NULL) for every event:umask pair of this model libpfm4 can encode alone, as
 * "EVENT:UMASK" without the PMU prefix, in libpfm4's order. The count, or -EOPNOTSUPP (why
 * says why) when there is no table for the model. */
EVENT_DB_INTERNAL int event_db_pfm_list(struct event_db *db,
					void (*each)(void *arg, const char *name), void *arg,
					char *why, size_t why_size);

/* 0 when libpfm4 knows an event of this model with this event select and unit mask (for
 * setupNonArchCounter(event, umask, ...)); out (may be NULL) gets its name and its evtsel
 * with USR|OS. -ENOENT when the model has no such pair, -EOPNOTSUPP when no table. */
EVENT_DB_INTERNAL int event_db_pfm_check_raw(struct event_db *db, uint16_t event, uint8_t umask,
					     struct event_encoding *out, char *why,
					     size_t why_size);

/* ---- RAPL (event_db_rapl.c) ---- */

/* Static facts of a domain, NULL when out of range. */
EVENT_DB_INTERNAL const struct event_rapl_domain *event_db_rapl_domain(unsigned domain);
EVENT_DB_INTERNAL int event_db_rapl_by_name(const char *name);

/* The domain on this machine: 0 and *out filled, or -EOPNOTSUPP (with the reason) when the
 * machine does not have it or its unit is unknown, -EINVAL for a bad domain. */
EVENT_DB_INTERNAL int event_db_rapl_lookup(const struct event_db *db, unsigned domain,
					   struct event_rapl *out, char *why, size_t why_size);

/* The flag and counter-mask rules of event_db_encode_evtsel(), alone: 0 or -EINVAL. */
EVENT_DB_INTERNAL int event_db_check_flags(const struct event_db *db, uint32_t flags,
					   uint8_t cmask, char *why, size_t why_size);

/* ---- shared by event_db*.c ---- */

/* Index of `name` (case-insensitive) in a table whose entries start with a `const char *`
 * name, `stride` bytes apart; -ENOENT when absent, -EINVAL for NULL. */
EVENT_DB_INTERNAL int event_db_find_name(const char *name, const void *table, size_t count,
					 size_t stride);
EVENT_DB_INTERNAL void event_db_why(char *why, size_t why_size, const char *format, ...)
	__attribute__((format(printf, 3, 4)));
EVENT_DB_INTERNAL void event_db_pfm_open(struct event_db *db);
EVENT_DB_INTERNAL void event_db_pfm_close(struct event_db *db);

#endif
