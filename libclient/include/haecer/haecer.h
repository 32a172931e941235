/*
 * <haecer/haecer.h> — measure a program from inside: hardware event counters and RAPL energy
 * through msrd, the haecer MSR server, with readings published live to monitor processes.
 *
 * The haecer_* API (libhaecer, `pkg-config haecer`): explicit contexts (struct haecer_context,
 * one msrd connection each, several per process allowed), counters on any CPU, error codes,
 * units, batch reads, energy regions with their SMI count. Every name it declares carries the
 * haecer_ / HAECER_ prefix, so a program can include it beside its own readCounter or RAPL_PKG.
 * It includes <haecer/msrd.h> (the msrd client calls), <haecer/region.h> (region profiling) and
 * <haecer/ring.h> (monitors and application events). The seed design's HAECER API
 * (setupArchCounter, readCounter, PerfCounter, RAPL_PKG, ...) is in <haecer/perfmon.h>, a thin
 * layer over this one.

 *
 * Where counters count. Performance counters count per logical CPU (Intel SDM 18.2), not per
 * thread: a counter measures whatever runs on its CPU. A counter set up for "the current CPU"
 * (every HAECER setup function, and HAECER_CPU_CURRENT below) is placed on the CPU the calling
 * thread runs on at setup. The library does not pin the thread unless asked (HAECER_FLAG_PIN):
 * a thread that migrates afterwards is no longer counted by that counter, which goes on counting
 * whatever runs on its CPU. Per-thread counting therefore needs pinning: pass HAECER_FLAG_PIN,
 * and the calling thread is pinned to that CPU (sched_setaffinity), a mask every thread it
 * creates afterwards inherits. Without the flag the thread's affinity is never changed. msrd
 * may present a simulated CPU with more or fewer CPUs than this host: host CPU i then means
 * model CPU i mod (model CPU count).
 *
 * Counter widths. Hardware counters are 40 or 48 bits (PMCs) and 32 bits (RAPL energy). Every
 * value this library returns is 64 bits wide: event counts are extended across wraps by the
 * library, exactly as long as two reads of a counter are less than one wrap period apart
 * (2^48 events: about a day of cycles at 3 GHz); energy values are msrd's 64-bit totals, which
 * msrd keeps exact however far apart reads are (against an msrd without energy totals the
 * library extends the raw register itself, exact for reads less than one wrap apart: minutes
 * at full power).
 *
 * Threads. Every function may be called from any thread. Calls on one context are serialised
 * by the context (one msrd connection); threads that read heavily in parallel should use a
 * context each. A counter must not be freed while another thread uses it.
 *
 * Errors are negative errno values (0 or a count on success; errno is never set):
 *   -EOPNOTSUPP  the CPU (or the simulated model) has no such event, counter or energy domain
 *   -ENOENT      unknown event name (libpfm4), or no such event on this model
 *   -EINVAL      bad argument, flags or counter mask
 *   -EPERM       msrd's policy does not grant the registers (or the ring major)
 *   -EACCES      the policy's write mask refuses a bit of the encoding (e.g. HAECER_FLAG_ANY)
 *   -ENXIO       no such CPU on msrd's machine
 *   -EBUSY       the counter is held by another msrd client (or another context)
 *   -ENOSPC      every programmable counter of the CPU is taken
 *   -EBADF       an invalid, failed or freed counter
 *   -ETIMEDOUT   an energy register did not update within HAECER_ENERGY_TIMEOUT_MS
 *   -EEXIST      the counter already has a ring
 *   -ENOTCONN    no msrd socket at the path (not started, or HAECER_SOCKET points elsewhere)
 *   -ECONNREFUSED, -EPIPE, -ECONNRESET, -EPROTO  msrd unreachable or gone
 * haecer_strerror() gives the generic text of a code; haecer_error_detail() the sentence that
 * explains the latest failure of the calling thread ("LL_CACHE_MISSES is not available on this
 * CPU (CPUID.0AH:EBX bit 4 set)", "denied by policy: uid 1000 may not read 0x611 on cpu 0").
 */
#ifndef HAECER_HAECER_H
#define HAECER_HAECER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <haecer/msrd.h>
#include <haecer/region.h>
#include <haecer/ring.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ---- */

/* Generic text of a value returned by this library (never NULL). */
const char *haecer_strerror(int error);

/* The sentence explaining the latest failure in the calling thread: the event database's reason
 * or msrd's text (haecer_conn_error). "" before any failure. Valid until the thread's next call
 * into this library. */
const char *haecer_error_detail(void);

/* ---- contexts ---- */

struct haecer_context;

/* Connect to msrd at `socket_path` (NULL: $HAECER_SOCKET, else HAECER_DEFAULT_SOCKET), learn
 * the machine (real or simulated) and build its event database. Each context has its own
 * connection: its counters, slots and rings belong to it and are released by
 * haecer_context_close (or by msrd when the process dies). */
int haecer_context_open(const char *socket_path, struct haecer_context **out);

/* Free every counter of the context (slots back to msrd, registers restored), detach its rings
 * and close the connection. NULL is fine. */
void haecer_context_close(struct haecer_context *ctx);

/* The process-wide default context the HAECER functions use, created on first use from
 * $HAECER_SOCKET (or the default socket). Thread-safe; a failed creation is retried by the next
 * call. After fork() the child has no default context: the counters set up before are invalid
 * in the child (their slots belong to the parent's connection, and stay the parent's), and the
 * child's first HAECER call connects anew. A child must not use its parent's explicit
 * contexts. */
int haecer_default_context(struct haecer_context **out);

/* Close the default context. Every counter (PerfCounter) set up through it before becomes unusable (do not pass it to
 * any function afterwards); the next HAECER call creates a new context. For tests and for tools
 * that want a clean exit under a leak checker. */
void haecer_shutdown(void);

/* The machine msrd describes (valid as long as the context). */
const struct haecer_machine_info *haecer_context_machine(const struct haecer_context *ctx);
/* The msrd backend behind the context's figures ("msr", "msr-safe", "powercap", "perf", "sim";
 * haecer_backend_name), for outputs that name where a figure came from. */
const char *haecer_context_backend(const struct haecer_context *ctx);

/* Whether msrd presents a simulated CPU (msrd --backend sim): every value read through this
 * context is then invented by the simulator, not measured. Also in haecer_counter_info.simulated
 * and haecer_energy_result.simulated. */
bool haecer_context_simulated(const struct haecer_context *ctx);

/* Model CPU the calling thread runs on now: sched_getcpu() mod the model's CPU count. */
int haecer_context_current_cpu(const struct haecer_context *ctx, uint32_t *cpu);

/* ---- counters ---- */

struct haecer_counter;

/* `cpu` argument of the setup functions: the CPU the calling thread runs on now (event
 * counters: the thread is pinned to it only with HAECER_FLAG_PIN). Otherwise a model CPU
 * number; nothing is pinned. */
#define HAECER_CPU_CURRENT (-1)

/* `flags` of event counters. USR and OS select the privilege levels counted (PERFEVTSEL bits
 * 16/17, FIXED_CTR_CTRL USR/OS); flags with neither (0 = HAECER_FLAGS_DEFAULT, or e.g.
 * HAECER_FLAG_EDGE alone) count both. EDGE counts rising edges of the condition (bit 18); INV inverts the counter-mask comparison
 * (bit 23, needs a counter mask); ANY counts both hyperthreads of the core (AnyThread, bit 21,
 * perfmon v3+ where not deprecated; msrd's default policy refuses it). Fixed counters take only
 * USR, OS and ANY. */
#define HAECER_FLAG_USR 0x1
#define HAECER_FLAG_OS 0x2
#define HAECER_FLAG_EDGE 0x4
#define HAECER_FLAG_INV 0x8
#define HAECER_FLAG_ANY 0x10
/* Not an encoding bit: with HAECER_CPU_CURRENT, pin the calling thread to the counted CPU after
 * the counter is set up (threads it creates later inherit that one-CPU mask). Without it the
 * library never changes a thread's affinity. */
#define HAECER_FLAG_PIN 0x100
#define HAECER_FLAGS_DEFAULT 0

/* `mask` / `cmask` of event counters: the counter mask (PERFEVTSEL CMASK, bits 31:24). 0 counts
 * every event; n > 0 counts the cycles in which at least n events happened (fewer than n with
 * INV). Programmable counters only: a non-zero mask never lands on a fixed counter. */
#define HAECER_CMASK_NONE 0

enum haecer_counter_kind {
	HAECER_COUNTER_PROGRAMMABLE = 1, /* a general-purpose PMC (Intel IA32_PMCx, AMD PERF_CTRx) */
	HAECER_COUNTER_FIXED = 2,        /* an Intel fixed-function counter */
	HAECER_COUNTER_ENERGY = 3,       /* a RAPL energy-status register */
	HAECER_COUNTER_PERF = 4,         /* a perf event msrd's broker opened (haecer_counter_open_perf) */
};

#define HAECER_COUNTER_NAME_MAX 160u

struct haecer_counter_info {
	char name[HAECER_COUNTER_NAME_MAX]; /* "INSTRUCTIONS_RETIRED", "snb::L1D:REPLACEMENT", "RAPL_PKG" */
	uint32_t id;                /* process-unique; the counter_id of its ring records */
	uint16_t kind;              /* enum haecer_counter_kind */
	uint16_t hardware_index;    /* which PMC / fixed counter (0 for energy) */
	uint32_t cpu;               /* model CPU it counts on (energy: the CPU it is read through) */
	int32_t package;            /* package of that CPU */
	uint8_t width;              /* hardware width in bits (values are extended to 64) */
	int16_t unit_exponent;      /* energy: J = value * 2^-unit_exponent (128 + e on
				     * Silvermont/Airmont: 2^e uJ; use `unit`); 0 for events */
	double unit;                /* energy: J per count (2^-unit_exponent); events: 1.0 */
	const char *unit_name;      /* "J" or "events" (static) */
	uint64_t config;            /* PERFEVTSEL / PERF_CTL value (EN clear), the fixed counter's
				     * 4-bit FIXED_CTR_CTRL field, or the energy register address */
	uint32_t counter_address;   /* the counter MSR */
	bool enabled;               /* counting (energy counters always count) */
	bool monitored;             /* attached to a ring */
	uint16_t major, minor;      /* the ring's key when monitored */
	uint32_t ring_instance;
	uint32_t ring_capacity;     /* records the ring holds when monitored: the capacity asked
				     * for, rounded up to a power of two */
	bool simulated;             /* msrd's CPU is simulated: the values are invented */
	bool scaled;                /* perf: the latest value was scaled by time_enabled /
				     * time_running (the kernel multiplexed the event) */
	const char *core_type;      /* hybrid part: "P-core" or "E-core", the kind of core the
				     * count came from (static); NULL elsewhere */
};

/* Architectural events: bit n of CPUID.0AH:EBX (the seed's ARCH_counter of <haecer/perfmon.h>
 * has the same values). */
#define HAECER_ARCH_UNHALTED_CORE_CYCLES 0u
#define HAECER_ARCH_INSTRUCTIONS_RETIRED 1u
#define HAECER_ARCH_UNHALTED_REF_CYCLES 2u
#define HAECER_ARCH_LL_CACHE_REFERENCES 3u
#define HAECER_ARCH_LL_CACHE_MISSES 4u
#define HAECER_ARCH_BRANCH_INS_RETIRED 5u
#define HAECER_ARCH_BRANCH_MIS_RETIRED 6u

/* Fixed-function counters (the seed's FF_counter). */
#define HAECER_FIXED_INST_RETIRED_ANY 0u
#define HAECER_FIXED_CPU_CLK_UNHALTED_CORE 1u
#define HAECER_FIXED_CPU_CLK_UNHALTED_REF 2u

/* RAPL energy domains (the seed's RAPLCounter, plus the platform and AMD's domains). */
#define HAECER_ENERGY_PKG 0u
#define HAECER_ENERGY_PP0 1u
#define HAECER_ENERGY_PP1 2u
#define HAECER_ENERGY_DRAM 3u
#define HAECER_ENERGY_PSYS 4u
#define HAECER_ENERGY_AMD_CORE 5u
#define HAECER_ENERGY_AMD_PKG 6u

/* Open an event counter; it starts enabled and at 0. Architectural events are taken from
 * CPUID leaf 0xA (HAECER_ARCH_* values); when a fixed-function counter counts the same event
 * and flags/cmask allow it, the fixed counter is used instead of a programmable one (and when
 * that fixed counter is taken, a programmable one). On AMD family 17h+ (no leaf 0xA) the
 * architectural events with a core-counter equivalent (cycles, instructions, branches, branch
 * misses; PPR events 0x76, 0xC0, 0xC2, 0xC3) are mapped to it. */
int haecer_counter_open_arch(struct haecer_context *ctx, int cpu, unsigned arch_event,
			     uint32_t flags, uint8_t cmask, struct haecer_counter **out);

/* A fixed-function counter (HAECER_FIXED_* values: 0 instructions, 1 core cycles, 2 reference
 * cycles, higher indexes where CPUID reports them). */
int haecer_counter_open_fixed(struct haecer_context *ctx, int cpu, unsigned fixed,
			      uint32_t flags, struct haecer_counter **out);

/* A raw event select / unit mask of the CPU model (checked against libpfm4's table of the model
 * when libpfm4 has one: -ENOENT for a pair the model does not have; programmed as given when
 * libpfm4 has no table for the model). */
int haecer_counter_open_raw(struct haecer_context *ctx, int cpu, uint16_t event, uint8_t umask,
			    uint32_t flags, uint8_t cmask, struct haecer_counter **out);

/* An event by name for msrd's CPU model (also a simulated one): perf's generic names with its
 * privilege modifiers ("instructions", "cycles:u", "branch-misses:k"; the modifiers replace the
 * USR/OS flags), perf's energy names ("power/energy-pkg/", "energy-ram": an energy counter, as
 * haecer_counter_open_energy; flags and cmask are not used), libpfm4 names with theirs ("L1D.REPLACEMENT", "MEM_LOAD_UOPS_RETIRED:L1_HIT:u",
 * "snb::L1D:REPLACEMENT"), or an architectural event name. An
 * application that initialised libpfm4 itself before must export LIBPFM_ENCODE_INACTIVE=1 for
 * models other than the host's to resolve. */
int haecer_counter_open_named(struct haecer_context *ctx, int cpu, const char *name,
			      uint32_t flags, uint8_t cmask, struct haecer_counter **out);

/* The version of libhaecer, the same string every haecer binary prints with --version. */
const char *haecer_version(void);

/* perf's name of a RAPL domain (HAECER_ENERGY_* value, the seed's RAPLCounter): energy-pkg
 * (HAECER_ENERGY_PKG, _AMD_PKG), energy-cores (_PP0, _AMD_CORE), energy-gpu (_PP1), energy-ram
 * (_DRAM), energy-psys (_PSYS); NULL for a value that is none. The names every tool shows. */
const char *haecer_energy_domain_name(unsigned domain);
/* The HAECER_ENERGY_* value of a domain name: perf's (energy-pkg, power/energy-pkg/) for the vendor
 * (`amd`: energy-pkg and energy-cores are AMD's domains) or the seed's enum name (RAPL_PKG);
 * -ENOENT for none. */
int haecer_energy_domain_by_name(const char *name, bool amd);
/* Call each(arg, name) (may be NULL: only count) for every libpfm4 event of msrd's CPU model
 * that haecer_counter_open_named can open ("L1D:REPLACEMENT", without the PMU prefix); *pmu (may
 * be NULL) gets libpfm4's PMU name ("snb"). The count, or -EOPNOTSUPP (detail set) when libpfm4
 * has no table for the model. */
int haecer_event_list(struct haecer_context *ctx, void (*each)(void *arg, const char *name),
		      void *arg, const char **pmu);

/* perf's generic hardware event names haecer_counter_open_named accepts (with perf's :u / :k
 * modifiers): index 0 .. haecer_generic_event_count() - 1; NULL beyond. */
size_t haecer_generic_event_count(void);
const char *haecer_generic_event_name(size_t index);

/* A RAPL energy domain (HAECER_ENERGY_* values) of the package (AMD core domain: the core) of
 * `cpu`. Energy counters always count: enable, disable and reset do nothing to them. */
int haecer_counter_open_energy(struct haecer_context *ctx, int cpu, unsigned domain,
			       struct haecer_counter **out);

/* A perf event msrd's broker opens for this process (haecer_perf_open of <haecer/msrd.h>: the
 * policy's `perf:` grant decides), read with haecer_counter_read like any counter (from its
 * mmap page with RDPMC where the kernel allows it, as haecer_perf_read_mapped, else read() of
 * its descriptor: the value scaled by time_enabled / time_running when multiplexed, which
 * haecer_counter_info's `scaled` then says); enable, disable and reset act on the event. In a
 * read set it is read() right after msrd's reads of the others (HAECER_READ_SYNCHRONIZED
 * does not stop it). Errors as haecer_perf_open's. */
int haecer_counter_open_perf(struct haecer_context *ctx, const struct haecer_perf_spec *spec,
			     struct haecer_counter **out);

/* Stop counting (the value holds) / count again. 0 for energy counters, which always count. */
int haecer_counter_enable(struct haecer_counter *counter);
int haecer_counter_disable(struct haecer_counter *counter);

/* Value := 0 (an event counter keeps its running state). Energy counters: no effect. */
int haecer_counter_reset(struct haecer_counter *counter);

/* Release the counter: its slot goes back to msrd (another client can take it), its ring is
 * detached. The handle must not be used afterwards. NULL is fine. */
void haecer_counter_free(struct haecer_counter *counter);

/* Read the 64-bit value (events, or energy units: multiply by info.unit for joules). Event
 * counters: one msrd round trip. Energy counters: from msrd's energy page (no round trip) when
 * msrd grants one, as coarse as the grant (the page's values are as old as msrd's last sample,
 * at most 1/rate: see haecer_counter_read_aged); otherwise, or with the exact mode on, one
 * round trip. Page reads and round trips mixed on one counter never go backwards: a page read
 * whose sample is older than the latest round trip returns that round trip's value (and its
 * time) until the page passes it; only a policy reload that changes the grant (a coarser
 * value) can lower the next one. A monitored counter also pushes {value, counter id, unit
 * exponent, timestamp} to its ring (timestamp: when the value was true). */
int haecer_counter_read(struct haecer_counter *counter, uint64_t *value);

/* haecer_counter_read, also saying how old the value is: *age_ns = now (CLOCK_MONOTONIC_RAW)
 * minus msrd's sample behind a page reading, or half the round trip for a round-trip reading.
 * age_ns may be NULL. */
int haecer_counter_read_aged(struct haecer_counter *counter, uint64_t *value, uint64_t *age_ns);

/* Energy reads through round trips only (true), or through the energy page where msrd grants
 * one (false, the default). $HAECER_ENERGY_EXACT=1 sets it for every new context. Round trips
 * are exact at the moment of the read; page values are up to one sampling period old. */
#define HAECER_ENERGY_EXACT_ENV "HAECER_ENERGY_EXACT"
int haecer_context_set_energy_exact(struct haecer_context *ctx, bool exact);

/* Whether the context reads event counters with RDPMC instead of a round trip: 1 yes, 0 no; the
 * reason either way in `why` (may be NULL). Yes needs a real CPU (not the simulator) and the
 * kernel's permission: sysfs .../devices/cpu/rdpmc = 2, or = 1 with a perf event page that
 * grants it (the context keeps one mapped); a read is direct only while the thread runs on the
 * counter's CPU, a round trip otherwise. $HAECER_SYSFS_ROOT prefixes the sysfs path (tests).
 * The RDPMC path itself has not been run: the machines this was built on have no PMU. */
#define HAECER_SYSFS_ROOT_ENV "HAECER_SYSFS_ROOT"
int haecer_context_direct_reads(struct haecer_context *ctx, char *why, size_t size);

/* HAECER_READ_SYNCHRONIZED: msrd stops all event counters of the set together, reads them and
 * restarts them, so they cover the same interval (one round trip). Energy counters of the set
 * are read in one more round trip (a batch) right after; they do not stop. */
#define HAECER_READ_SYNCHRONIZED 0x1u
#define HAECER_READ_MAX 256u

/* Read `count` (1..HAECER_READ_MAX) counters of one context; values[i] for counters[i]. One
 * timestamp for all ring records of the set. */
int haecer_counter_read_many(struct haecer_counter *const *counters, size_t count,
			     uint64_t *values, unsigned flags);

int haecer_counter_info(const struct haecer_counter *counter, struct haecer_counter_info *out);
/* A brokered perf event's time_enabled and time_running (ns) as of its latest read, the
 * kernel's figures (perf stat's "percentage of running time" is running / enabled); -EOPNOTSUPP
 * for every other kind of counter, which counts whenever it is enabled. */
int haecer_counter_times(const struct haecer_counter *counter, uint64_t *time_enabled,
			 uint64_t *time_running);

/* ---- monitoring (FERRET) ---- */

#define HAECER_MONITOR_DEFAULT_CAPACITY 4096u

/* Attach the counter to a new ring in msrd's directory, key (major, minor), holding at least
 * `capacity` records (0 = HAECER_MONITOR_DEFAULT_CAPACITY; at most 2^26). Rings hold a power of
 * two of records: a capacity that is not one is rounded up (the seed's 3000 becomes 4096), and
 * info.ring_capacity (haecer_counter_info) says what the ring holds. The ring header names the
 * counter (name, kind, unit exponent, package, cpu; clock CLOCK_MONOTONIC_RAW). From then on
 * every read of the counter pushes one record: value as returned, counter_id = info.id,
 * unit_exponent (energy), timestamp = CLOCK_MONOTONIC_RAW ns at the middle of the msrd round
 * trip. The push is the only cost added to a read (no system call). The program can post its
 * own events into the same ring (haecer_ring_post of <haecer/ring.h>); monitors attach by
 * (major, minor) (haecer_ring_attach, `haecer-mon follow`). -EEXIST when already monitored;
 * -EPERM when the policy does not grant the major for creating rings; -EINVAL a capacity over
 * 2^26. */
int haecer_counter_monitor(struct haecer_counter *counter, uint16_t major, uint16_t minor,
			   uint32_t capacity);

/* ---- energy regions (seed 2.3.3: below the 1 ms update step) ---- */

/* How long an energy poll waits for the register to change before giving up. */
#define HAECER_ENERGY_TIMEOUT_MS 1000u

struct haecer_energy_region {
	/* private */
	uint64_t start_total;
	uint64_t start_tsc;         /* startEnergyRead returned */
	uint64_t start_update_tsc;  /* the update it synchronised to (estimate) */
	uint64_t start_poll_tsc;    /* when the poll that saw it returned */
	uint64_t start_smi;
	uint64_t start_bracket;     /* ticks the start update is known to */
	bool active;
	double before_per_tick;     /* the power over the update interval ending at the start */
	double before_doubt_per_tick;
	uint64_t start_measurement_cpu_ns; /* msrd's measurement cost counters at the start */
	uint64_t start_measurement_nj;
	bool start_measurement_known;
};

/* smi_count when it cannot be known: no MSR_SMI_COUNT (AMD) or the policy refuses it. */
#define HAECER_SMI_UNKNOWN UINT32_MAX

struct haecer_energy_result {
	double joules;              /* region energy: raw_joules - wait_joules */
	double raw_joules;          /* register difference between the two synchronised updates */
	double wait_joules;         /* the estimated energy outside the region: from the start
				     * update to startEnergyRead's return and from the end call to
				     * the closing update, at the power of the wait, less the
				     * tail's (tail_ticks) */
	double joules_per_tick;     /* that power: measured over the update interval after the
				     * closing update (per TSC tick) */
	double uncertainty_joules;  /* +- what the method cannot resolve: one energy unit at each
				     * end, the timing blur at the two updates, and that power's
				     * own doubt (its updates' blur) over the wait and lead; not
				     * a change of power right after the region */
	uint64_t region_ticks;      /* TSC ticks from startEnergyRead's return to the end call */
	uint64_t wait_ticks;        /* TSC ticks from the end call to the closing update (est.) */
	uint64_t lead_ticks;        /* TSC ticks from the start update (est.) to the return */
	uint64_t tail_ticks;        /* TSC ticks from the closing update (est.) to the end call
				     * when that update came before the call but msrd's page
				     * showed it only after (msrd stalled, or sampled only at the
				     * page's rate): the region's energy after it, at the power,
				     * is added (wait_ticks is then 0) */
	uint64_t detected_wait_ticks; /* from the end call to the poll that saw the update */
	uint64_t start_tsc, end_tsc; /* the region's ends on the TSC (simulated TSC on a sim) */
	uint64_t first_poll_tsc;    /* when the poll that saw the start update returned */
	uint64_t last_poll_tsc;     /* when the poll that saw the closing update returned
				     * (smi_count spans the two polls' reads) */
	double seconds;             /* region_ticks / TSC frequency */
	uint32_t smi_count;         /* SMIs from the start update to the closing update (a region
				     * with any was disturbed: filter it), or HAECER_SMI_UNKNOWN */
	bool smi_count_exact;       /* from MSR_SMI_COUNT; false: smi_count is HAECER_SMI_UNKNOWN */
	uint32_t tsc_source;        /* where the TSC frequency came from: HAECER_TSC_* of msrd.h */
	bool simulated;             /* measured on msrd's simulated CPU: invented, not real joules */
	/* What the +- rests on (issue 23). The energy outside the region (lead, wait, tail) is
	 * counted at the middle of the powers observed around it: over the update interval
	 * ending at the start update (before), over the one(s) after the closing update (after),
	 * and over the whole span between the two updates (raw_joules over it); the spread of
	 * those powers, over the lead, wait and tail, is in uncertainty_joules. */
	double before_joules_per_tick;
	double after_joules_per_tick;
	double span_joules_per_tick;
	bool power_changed;         /* those powers differ by more than their own doubt: the +- was
				     * widened to their spread (the power outside the region is
				     * not known better than that) */
	bool reliable;              /* doubt_reasons == 0: the +- rests on a steady power, sharp
				     * update times and msrd on time */
	uint32_t doubt_reasons;     /* HAECER_ENERGY_DOUBT_* bits: why the +- is wide */
	/* What measuring cost during the region (issue 23): the CPU time msrd spent for this
	 * register's energy pages (precise-edge windows, page samples) from startEnergyRead's
	 * return to the end call, and the energy that CPU time added to the package, which is in
	 * joules (a part of the region's energy this program did not do). On msrd's simulated CPU
	 * the energy is the simulator's power model's own figure; on real hardware an estimate
	 * from the CPU time and the package's measured power (one busy CPU draws between none and
	 * all of it). Shared pages: when several programs measure the same register at once, each
	 * is shown the whole cost (errs high). measurement_known is false when msrd's page does not
	 * say (round trips only, a coarse grant, an msrd that does not count it). */
	uint64_t measurement_cpu_ns;
	double measurement_joules;
	double measurement_uncertainty_joules;
	bool measurement_known;
};

/* haecer_energy_result.doubt_reasons */
#define HAECER_ENERGY_DOUBT_POWER_CHANGED 0x1u /* before/after/span powers disagree */
#define HAECER_ENERGY_DOUBT_BLURRED 0x2u       /* an end update's time is blurred (a window
						* missed it, or a poll was preempted) */
#define HAECER_ENERGY_DOUBT_MSRD_LATE 0x4u     /* msrd showed the closing update only after
						* the end call (tail_ticks > 0) */

/* Wait for the next update of the energy register (polling it through msrd), then remember it:
 * the region starts when this returns. Time comes from the TSC: rdtsc on real hardware, the
 * simulated TSC with a simulated CPU (from CLOCK_MONOTONIC_RAW in real time; read through msrd
 * in virtual time). -ETIMEDOUT when the register does not change within
 * HAECER_ENERGY_TIMEOUT_MS of wall-clock time. */
int haecer_energy_start(struct haecer_counter *energy, struct haecer_energy_region *region);

/* Poll until the next update, then through one more update interval to measure the power of
 * this polling now, and subtract the energy spent outside the region at that power:
 * e = (E_end - E_start) - (lead + wait) * joules_per_tick. Takes one to two update intervals
 * (about 1-2 ms). */
int haecer_energy_end(struct haecer_counter *energy, struct haecer_energy_region *region,
		      struct haecer_energy_result *result);

/* An energy reading with what it cannot tell: the register changes only at its updates (about
 * every 1 ms), so a difference of two readings is off by up to one update's energy at the power
 * of either end (update_joules bounds it at the domain's maximum power), and a reading shows the
 * energy of an update up to age_max_ns ago.
 *
 * Beside the register's total, an estimate of the energy at the moment of the read: when msrd's
 * energy page brackets the register's updates (precise edges, asked for by this call), the total
 * of the last update plus the power of the update interval before it times the time since the
 * update (update_age_ns). A difference of two estimates is then off by the change of power
 * within about one update interval at each end, not by up to one update's energy. It is an
 * estimate: the energy after the last update is extrapolated, not counted, and a later reading's
 * estimate can be lower than an earlier one's (the register totals, value and joules, never go
 * back). Without precise edges (HAECER_ENERGY_EXACT, a round trip, a coarse grant)
 * estimated is false and the estimate is the register's total with update_joules as its +-. */
struct haecer_energy_reading {
	uint64_t value;             /* as haecer_counter_read (units) */
	double joules;              /* value * unit */
	double update_joules;       /* the +- of a difference: as old as the value can be
				     * (age_max_ns) at the domain's maximum power, + one unit */
	double watts_estimated;     /* the typical power: since the previous reading when that is
				     * 10 ms or more ago (simulated time in virtual time), else the
				     * domain's maximum; x 1 ms, a typical update's energy (not a
				     * bound: power changes near the ends are not in it) */
	uint64_t age_max_ns;        /* the update shown is at most this old (1 ms + 50 us + the
				     * round trip; an SMI can add to it) */
	bool estimated;             /* estimate_joules extrapolates from a bracketed update */
	double estimate_joules;     /* energy at the read: joules + watts_last_update x age */
	double estimate_uncertainty_joules; /* its +-: the brackets, and the power since the
					     * last update anywhere from 0 to the domain's
					     * maximum over the update's age */
	double watts_last_update;   /* the power of the last update interval (estimated only) */
	double watts_last_update_uncertainty; /* its +-: the two brackets' half widths over the
					       * interval, and one unit (estimated only) */
	uint64_t update_age_ns;     /* from the last update (its bracket's middle) to the read */
	uint64_t update_bracket_ns; /* how well that update's time is known */
};

/* Read an energy counter with its uncertainty (the energy page, else one msrd round trip). */
int haecer_counter_read_energy(struct haecer_counter *counter,
			       struct haecer_energy_reading *out);

/* A difference of two plain readings of an energy counter (haecer_counter_read,
 * haecer_counter_read_many, region markers, haecer-stat's totals) with what it can be off by and
 * what measuring cost between them (issue 23). Mark each reading right after it was taken,
 * with the CLOCK_MONOTONIC_RAW times just before and after it; haecer_energy_span then gives
 * the difference, its +- (the same bound as haecer_counter_read_energy's update_joules: each
 * value is as old as an update interval, its lateness and the read's round trip, at the
 * domain's maximum power or the power observed over the span, whichever is higher; the
 * errors of the two ends have opposite signs, so the larger one bounds the difference) and
 * the cost: the CPU time msrd spent for the register's pages during the span (when the
 * counter holds a page already: a mark never asks for one) plus the two reads' round trips (a
 * bound: msrd cannot spend more CPU on a request than its round trip), and the energy that CPU
 * drew (the simulator's own figure for the page part on msrd's simulated CPU; otherwise half
 * the span's power per busy CPU time, +- the same). */
struct haecer_energy_mark {
	double joules;               /* the reading, in joules */
	uint64_t read_ns;            /* the middle of the read (CLOCK_MONOTONIC_RAW) */
	uint64_t doubt_ns;           /* how well the read's moment is known: its round trip */
	uint64_t round_trip_ns;      /* the read's round trip: bounds msrd's CPU for it */
	uint64_t measurement_cpu_ns; /* msrd's running cost counters of the register's page */
	uint64_t measurement_nj;
	bool measurement_known;      /* the counter holds a live page that counts them */
};

struct haecer_energy_span {
	double joules;               /* to - from */
	double uncertainty_joules;   /* +- (above) */
	double seconds;              /* between the reads' middles */
	uint64_t measurement_cpu_ns; /* msrd's CPU for it: pages during the span + round trips */
	double measurement_joules;   /* the energy that CPU added, +- below */
	double measurement_uncertainty_joules;
	bool measurement_pages_known; /* the page part is in it (else round trips only) */
};

/* `value` as the counter's read returned it (units), read between before_ns and after_ns. */
int haecer_energy_mark(struct haecer_counter *counter, uint64_t value, uint64_t before_ns,
		       uint64_t after_ns, struct haecer_energy_mark *out);
int haecer_energy_span(struct haecer_counter *counter, const struct haecer_energy_mark *from,
		       const struct haecer_energy_mark *to, struct haecer_energy_span *out);

/* Measure the energy per TSC tick of polling this counter's register over `updates` updates
 * (0: the default, 4). Regions do not use it (each measures its own wait's power); it tells
 * what polling costs now. */
int haecer_energy_calibrate(struct haecer_counter *energy, unsigned updates,
			    double *joules_per_tick);

#ifdef __cplusplus
}
#endif

#endif
