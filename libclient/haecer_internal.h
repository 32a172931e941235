/*
 * libclient/haecer_internal.h — libhaecer-internal: the context and counter structures behind
 * <haecer/perfmon.h>, shared by haecer_*.c. Not installed.
 *
 * Locking: a context's mutex guards its msrd connection, its counter list and the mutable state
 * of its counters (value extension, enabled flag, ring producer). Counter structures come from a
 * process-wide pool and are never returned to malloc, so a stale PerfCounter copy or a freed
 * handle is recognised (generation, ctx == NULL) instead of touching freed memory.
 */
#ifndef HAECER_LIBCLIENT_HAECER_INTERNAL_H
#define HAECER_LIBCLIENT_HAECER_INTERNAL_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"
#include "haecer/msrd.h"
#include "haecer/perfmon.h"
#include "hw/msr.h"
#include "libclient/event_db.h"
#include "shm/energy_page.h"
#include "shm/ring.h"

#define HAECER_INTERNAL __attribute__((visibility("hidden")))

#define HAECER_DETAIL_SIZE 320u
/* Bit 31 of a ring record's counter_id marks an application event (haecer_ring.c); counter ids
 * stay below it. */
#define HAECER__RING_EVENT_BIT 0x80000000u
#define NS_PER_SECOND 1000000000ull

/* The plan of one haecer_counter_read_many: which counters go to the synchronized slot read,
 * which to the energy batch. Lives in the context (used under its lock). */
struct read_set {
	uint32_t slot_ids[HAECER_READ_MAX];
	uint64_t slot_raw[HAECER_READ_MAX];
	size_t slot_of[HAECER_READ_MAX];    /* counter index of each slot read */
	size_t slot_count;
	struct haecer_msr_op energy_ops[HAECER_READ_MAX];
	size_t energy_of[HAECER_READ_MAX];
	size_t energy_count;
	size_t perf_of[HAECER_READ_MAX];    /* counter index of each perf event (read()) */
	size_t perf_count;
};

/* An energy page the context asked msrd for (haecer_page.c). */
#define HAECER_CONTEXT_PAGES 8u
struct haecer_page {
	uint32_t address;
	bool mapped;
	bool unavailable;           /* refused, or unusable: round trips for this register */
	uint64_t stale_after_ns;    /* a LIVE page's sample older than this: msrd is gone */
	uint64_t period_ns;         /* msrd's sampling period of the page */
	bool precise;               /* msrd brackets every update (precise edges granted) */
	bool precise_asked;         /* asked for them once already (a refusal is not asked again) */
	struct energy_page_reader reader;
};

/* Whether event counters are read with RDPMC (haecer_rdpmc.c). */
struct haecer_rdpmc {
	bool usable;
	char why[160];              /* why, or why not */
	int perf_fd;                /* rdpmc = 1: the perf event that grants it, or -1 */
	void *perf_page;
	size_t perf_page_bytes;
};

struct haecer_context {
	pthread_mutex_t lock;
	struct haecer_rdpmc rdpmc;
	struct haecer_conn *conn;
	char socket_path[256];      /* for reconnecting after msrd restarted */
	bool energy_exact;          /* round trips only: $HAECER_ENERGY_EXACT, or the API */
	uint64_t lease_renewed_ns;  /* last round trip of a region or estimate (atomic): msrd's
				     * precise edges run within a lease of the last request */
	uint64_t edges_pause_ns;    /* a region's start asked msrd to pause them from then on
				     * (atomic, CLOCK_MONOTONIC_RAW; 0: no pause asked): its end
				     * asks for them again */
	uint64_t region_start_ns;   /* how long the last region's start took (atomic) */
	struct haecer_page pages[HAECER_CONTEXT_PAGES];
	struct haecer_machine_info machine;
	struct event_db *db;
	struct event_db *db_atom;   /* hybrid part: the E-cores' events (db is the P-cores'),
				     * NULL otherwise */
	bool simulated;             /* msrd presents a simulated CPU: time comes from its TSC */
	bool energy_totals;         /* msrd keeps 64-bit energy totals (HAECER_FEATURE_ENERGY) */
	struct haecer_counter *counters; /* in use, doubly linked */
	struct read_set set;
};

/* Where an energy region's samples come from: one poll of the register. */
struct energy_sample {
	uint64_t tsc;               /* when the register was read (estimate) */
	uint64_t before;            /* when the poll was sent */
	uint64_t after;             /* when it returned */
	uint64_t total;             /* 64-bit energy value, as haecer_counter_read returns */
	uint64_t smi;               /* MSR_SMI_COUNT, when the model has it */
	bool smi_exact;             /* smi was read */
	/* From an energy page: the bracket of the update that brought `total` (msrd's last
	 * sample that did not see it, its first that did; TSC), 0 when the page has none. */
	uint64_t edge_lo, edge_hi;
};

struct haecer_counter {
	struct haecer_context *ctx; /* NULL while in the free pool */
	uint32_t generation;        /* bumped at every free */
	struct haecer_counter *next, *prev;
	struct haecer_counter_info info;
	struct haecer_slot slot;    /* event counters */
	uint64_t width_mask;
	uint64_t last_raw;          /* the hardware value at the latest read */
	uint64_t value;             /* its 64-bit extension */
	bool have_raw;              /* energy without msrd totals: last_raw holds a reading */
	bool region_counter;        /* opened by startEnergyRead, freed with the context */
	bool calibrated;
	double joules_per_tick;
	bool smi_unreadable;        /* the policy refuses MSR_SMI_COUNT (or the AMD counter of
				     * PMCx02B): the SMI count is unknown */
	struct haecer_counter *smi_counter; /* AMD energy regions: PMCx02B on the counter's CPU
					     * (haecer_energy_smi.c), or NULL */
	unsigned rapl_domain;       /* energy counters: enum rapl_domain of hw/msr.h */
	uint64_t typical_gap;       /* energy regions: ticks between two polls, moving average */
	/* msrd's totals start again from the register when msrd restarts: the counter's value
	 * goes on from where it was, by the register's movement since (haecer__fold_energy). */
	uint64_t total_offset;      /* added to msrd's total */
	uint64_t folded_ns;         /* CLOCK_MONOTONIC_RAW of the latest fold of a total */
	bool total_rebase;          /* msrd restarted since that fold */
	bool continuity_lost;       /* the register moved more than the domain can draw: the
				     * counter cannot go on (reads fail with -EIDRM) */
	uint64_t energy_previous_value; /* haecer_counter_read_energy: the previous reading */
	uint64_t energy_previous_ns; /* and when it was true (CLOCK_MONOTONIC_RAW), 0 before */
	struct ring_producer ring;
	int32_t page_entry;         /* its entry on the energy page; -1 not looked up yet */
	int host_cpu;               /* event counters: the CPU the thread was pinned to, or -1 */
	uint64_t slot_checked_ns;   /* the latest read through msrd (RDPMC reads in between) */
	/* Event counters: a register that went back by more than a wrap in the time was written
	 * behind msrd's back (hw/counter_wrap.h): the count is lost, never extended by 2^width. */
	uint64_t raw_ns;            /* CLOCK_MONOTONIC_RAW of last_raw, 0 before the first read */
	bool count_lost;
	uint64_t lost_from, lost_to, lost_after_ns; /* what the register did, for the message */
	uint64_t reading_ns;        /* CLOCK_MONOTONIC_RAW when the latest reading was true */
	bool reading_dated;         /* reading_ns holds (a page reading, or a held round trip's) */
	uint64_t page_checked_ns;   /* CLOCK_MONOTONIC_RAW right after the latest page read */
	/* The latest round trip's value: a page reading from an older sample of msrd must not
	 * undercut it, until the page catches up or is mapped again (perhaps under another grant,
	 * which may rightly coarsen the value). */
	bool exact_held;
	uint64_t exact_value;
	uint64_t exact_ns;          /* when the round trip returned */
	bool wants_precise;         /* regions and read_energy: ask for the page's precise edges */
	int perf_fd;                /* HAECER_COUNTER_PERF: the event msrd handed over */
	struct haecer_perf_map *perf_map; /* ... and its mmap page (RDPMC where allowed), or NULL */
	uint64_t perf_time_enabled; /* ... and its times as of the latest read (ns) */
	uint64_t perf_time_running;
};

/* ---- haecer_context.c ---- */

/* Record the sentence explaining a failure for haecer_error_detail(); returns error. */
HAECER_INTERNAL int haecer__fail(int error, const char *format, ...)
	__attribute__((format(printf, 2, 3)));
/* After an msrd call failed on ctx's connection (lock held): its text as the detail. */
HAECER_INTERNAL int haecer__fail_msrd(struct haecer_context *ctx, int error, const char *what);
HAECER_INTERNAL void haecer__clear_detail(void);
HAECER_INTERNAL char *haecer__detail_buffer(void);

HAECER_INTERNAL int haecer__resolve_cpu(struct haecer_context *ctx, int cpu, uint32_t *model_cpu,
					int *host_cpu);
/* Pin the calling thread to host_cpu (nothing when < 0); when saved is not NULL it receives the
 * mask the thread had, for haecer__unpin. */
/* A perf generic event name with modifiers ("cycles:u"): 1 and *arch, *flags (USR/OS replaced
 * by the modifiers) when it is one, 0 when not, -EINVAL for a bad modifier (detail set). */
HAECER_INTERNAL int haecer__parse_generic_event(const char *name, unsigned *arch, uint32_t *flags);
HAECER_INTERNAL int haecer__pin_to(int host_cpu, cpu_set_t *saved);
/* Give the calling thread back the mask haecer__pin_to saved. */
HAECER_INTERNAL void haecer__unpin(const cpu_set_t *saved);

/* A counter from the pool, linked into ctx (lock held), with a fresh id. */
HAECER_INTERNAL int haecer__counter_new(struct haecer_context *ctx, struct haecer_counter **out);
/* Unlink from its context and return to the pool (lock held). */
HAECER_INTERNAL void haecer__counter_release(struct haecer_counter *counter);
/* The counter is in use (not freed, its context open). */
HAECER_INTERNAL bool haecer__counter_live(const struct haecer_counter *counter);
/* Lock the counter's context, checking the counter is still in use: 0, or -EBADF (unlocked). */
HAECER_INTERNAL int haecer__counter_lock(const struct haecer_counter *counter,
					 struct haecer_context **ctx);


/* ---- haecer_perf_counter.c ---- */

/* read() of a perf counter's event into its value (lock held). */
HAECER_INTERNAL int haecer__perf_read_locked(struct haecer_counter *counter, uint64_t *value);
/* PERF_EVENT_IOC_ENABLE / _DISABLE / _RESET for HAECER_SLOT_ENABLE / _DISABLE / _RESET. */
HAECER_INTERNAL int haecer__perf_control(struct haecer_counter *counter, uint16_t action);

/* ---- haecer_perf_names.c ---- */

/* The type number of PMU (/sys/bus/event_source/devices/PMU/type, under $HAECER_SYSFS_ROOT):
 * 0, or -ENOENT when sysfs has no such PMU. */
HAECER_INTERNAL int haecer__perf_pmu_type(const char *pmu, uint32_t *type);

/* ---- haecer_perf_core.c ---- */

/* msrd's counters come from its perf broker (HELLO: HAECER_FEATURE_PERF, no _SLOTS). */
HAECER_INTERNAL bool haecer__counters_brokered(const struct haecer_context *ctx);
/* A core-PMU event counting CPU-wide on `cpu` through the broker, from the event database's
 * PERFEVTSEL / PERF_CTL encoding (levels from its USR/OS bits), placed per the core PMU of the
 * CPU's core type (HAECER_CORE_TYPE_*, 0 when not hybrid) by its sysfs format files;
 * PERF_TYPE_RAW in the x86 layout without one. -errno with the detail set. */
HAECER_INTERNAL int haecer__perf_core_spec(uint64_t evtsel, uint32_t core_type, uint32_t cpu,
					   struct haecer_perf_spec *spec);
/* perf's generic hardware event of an architectural event (PERF_TYPE_HARDWARE), levels
 * HAECER_FLAG_USR / _OS; on a hybrid part the core PMU's type in config's upper half. */
HAECER_INTERNAL int haecer__perf_generic_spec(unsigned arch_index, uint32_t levels,
					      uint32_t core_type, uint32_t cpu,
					      struct haecer_perf_spec *spec);
/* The same for fixed counters 0-2; -EOPNOTSUPP for the others. */
HAECER_INTERNAL int haecer__perf_fixed_spec(unsigned fixed, uint32_t levels, uint32_t core_type,
					    uint32_t cpu, struct haecer_perf_spec *spec);
/* haecer_counter_open_perf with the counter named `name` (NULL: perf:TYPE/CONFIG/) and its
 * package and core type from the machine when CPU-wide. */
HAECER_INTERNAL int haecer__counter_open_perf_named(struct haecer_context *ctx,
						    const struct haecer_perf_spec *spec,
						    const char *name, struct haecer_counter **out);

/* ---- msrd_perf.c ---- */

/* A reading from its count and times: scaled by enabled / running when the kernel multiplexed
 * the event (running below enabled). */
HAECER_INTERNAL void haecer__perf_value(uint64_t raw, uint64_t time_enabled,
					uint64_t time_running, struct haecer_perf_value *out);

/* ---- haecer_read.c ---- */

/* Fold a raw hardware reading into the counter's 64-bit value (lock held). */
HAECER_INTERNAL uint64_t haecer__extend(struct haecer_counter *counter, uint64_t raw);
/* Fold an energy reading: msrd's total when given (total != NULL), else the raw register.
 * After msrd restarted (total_rebase) the value goes on by the register's movement since the
 * last fold, when that is energy the domain can have drawn in the time; otherwise the counter's
 * continuity is lost (continuity_lost; haecer__continuity_error says so) and the value stays. */
HAECER_INTERNAL uint64_t haecer__fold_energy(struct haecer_counter *counter, uint64_t raw,
					     const uint64_t *total);
/* Fold a total from msrd's energy page, just read by haecer__page_reading (whose clock read,
 * page_checked_ns, it takes for the fold's time). *held: the page is behind the counter's latest round
 * trip (an older sample of msrd): the value returned is the round trip's instead, true at
 * counter->exact_ns; a page that caught up ends the hold. */
HAECER_INTERNAL uint64_t haecer__fold_page(struct haecer_counter *counter, uint64_t total,
					   bool *held);
/* Whether folding this page total would be held (the page is behind the latest round trip). */
HAECER_INTERNAL bool haecer__page_behind(const struct haecer_counter *counter, uint64_t total);
/* -EIDRM with the reason when the counter lost its continuity, else 0. */
HAECER_INTERNAL int haecer__continuity_error(const struct haecer_counter *counter);
/* Read one counter's 64-bit value through msrd (lock held), no ring push. */
HAECER_INTERNAL int haecer__read_locked(struct haecer_counter *counter, uint64_t *value);
/* Push a reading to the counter's ring if it has one (lock held). */
HAECER_INTERNAL void haecer__publish(struct haecer_counter *counter, uint64_t value,
				     uint64_t timestamp);
HAECER_INTERNAL void haecer__ring_detach(struct haecer_counter *counter);

/* ---- haecer_page.c ---- */

/* A reading of the energy counter from msrd's energy page (lock held): 0, or < 0 when the page
 * cannot serve it (opted out, not granted, msrd without pages, virtual time, page stale and
 * refused again, msrd gone): then the caller makes the exact round trip, which applies msrd's
 * current policy. A STALE page is asked for again (the new grant's page); a DEAD one (msrd
 * stopped) reconnects the context first. The lean read (total, sample time) unless `full` is
 * not NULL: then the whole entry too (a region's poll needs the sample's TSC). */
HAECER_INTERNAL int haecer__page_reading(struct haecer_counter *counter,
					 struct energy_page_total *reading,
					 struct energy_page_reading *full);
/* An energy region poll from the page (lock held): total, and the TSC of now extrapolated from
 * msrd's last sample (the simulated CPU's TSC on a simulated CPU). < 0 as above. */
HAECER_INTERNAL int haecer__page_sample(struct haecer_counter *counter,
					struct energy_sample *sample);
HAECER_INTERNAL void haecer__pages_close(struct haecer_context *ctx);

/* ---- haecer_rdpmc.c ---- */

/* The value of <root>/sys/bus/event_source/devices/cpu/rdpmc (0, 1, 2) or -errno. */
HAECER_INTERNAL int haecer__rdpmc_sysfs(const char *root);
/* Decide at context open whether event counters are read with RDPMC (after learn_machine). */
HAECER_INTERNAL void haecer__rdpmc_detect(struct haecer_context *ctx);
HAECER_INTERNAL void haecer__rdpmc_close(struct haecer_context *ctx);
/* The raw counter with RDPMC (lock held): 0, or -ENOENT when it cannot be read directly now
 * (not allowed, simulated CPU, the thread is not on the counter's CPU): make the round trip. */
HAECER_INTERNAL int haecer__rdpmc_read(struct haecer_counter *counter, uint64_t *raw);
/* The RDPMC instruction itself: counter `index` (2^30 + n: fixed counter n) of this CPU. Only
 * where the kernel lets this process execute it (CR4.PCE), or it faults. */
HAECER_INTERNAL uint64_t haecer__rdpmc_counter(uint32_t index);

/* ---- haecer_energy.c ---- */

/* The package-scope energy domain of the machine: RAPL_PKG, or RAPL_AMD_PKG on AMD. */
HAECER_INTERNAL unsigned haecer__package_domain(const struct haecer_context *ctx);

/* haecer_energy.c, for haecer_energy_reading.c: the polls' context and the lease. */
/* msrd's simulated CPU runs in virtual time (no pages; time from the simulated TSC). */
HAECER_INTERNAL bool haecer__energy_virtual_time(const struct haecer_context *ctx);
/* The registers update "approximately every 1 ms" (SDM vol. 3B 14.9.3); the thesis saw them
 * within +-20 us of that (seed 001 2.3.2). */
#define RAPL_UPDATE_NS 1000000ull
#define RAPL_UPDATE_LATE_NS 50000ull
/* A round trip that renews msrd's precise-edge lease when half of it has passed. */
HAECER_INTERNAL void haecer__energy_lease_renew(struct haecer_counter *counter);
/* 0 for an energy counter of a live context, else -errno with the detail set. */
HAECER_INTERNAL int haecer__energy_check_counter(struct haecer_counter *counter);

/* ---- haecer_energy_smi.c: where a region's SMI count comes from ---- */
/* AMD: open the counter of PMCx02B on the energy counter's CPU once (without the context's
 * lock held); a refusal leaves the SMI count unknown. Nothing to do on Intel. */
HAECER_INTERNAL void haecer__smi_prepare(struct haecer_counter *energy);
/* The read of the SMI count for a poll's batch: false when it cannot be known. */
HAECER_INTERNAL bool haecer__smi_op(const struct haecer_counter *energy,
				    struct haecer_msr_op *op);
/* SMIs between two readings of that count, modulo its register's width. */
HAECER_INTERNAL uint32_t haecer__smi_between(const struct haecer_counter *energy, uint64_t from,
					     uint64_t to);
/* How far energy / span can be from the truth when the span's ends are known to halves and the
 * energy to one unit at each end, capped by max_power (haecer_energy_reading.c says why). */
HAECER_INTERNAL double haecer__power_doubt(double energy, double unit, double span, double halves,
					   double max_power);
/* The domain's maximum power in watts (PKG_POWER_INFO or msrd's default), 0 when unknown. */
HAECER_INTERNAL double haecer__energy_max_watts(const struct haecer_counter *counter);
/* The +- of a difference of two readings of an energy counter: each is as old as an update
 * interval, its lateness and doubt_ns (how long the read's moment is uncertain: its round
 * trip, or msrd's sample age) at the domain's maximum power or `watts` (observed) if higher,
 * plus one unit. The two ends' errors have opposite signs: the larger bounds the difference.
 * haecer_counter_read_energy's update_joules, region markers and haecer_energy_span. */
HAECER_INTERNAL double haecer__difference_doubt(const struct haecer_counter *counter,
						double watts, uint64_t doubt_ns);
/* Whether the counter's energy page is mapped now (a cost mark reads it, never maps one). */
HAECER_INTERNAL bool haecer__page_held(struct haecer_counter *counter);
/* The context's energy counter of `domain` for the calling thread's package (core for AMD core
 * energy) that startEnergyRead uses, opened on first use and kept until the context closes. */
HAECER_INTERNAL int haecer__region_counter(struct haecer_context *ctx, unsigned domain,
					   struct haecer_counter **out);

#endif
