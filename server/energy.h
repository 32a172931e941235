/*
 * server/energy.h — msrd's energy totals (energy.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_ENERGY_H
#define HAECER_SERVER_ENERGY_H

#include <limits.h>
#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "common/log.h"
#include "policy/policy.h"
#include "proto/wire.h"
#include "shm/energy_page.h"

struct client;
struct msrd;

struct energy_counter {
	uint32_t cpu;                  /* the CPU the sampler reads it through */
	uint32_t address;
	uint8_t domain;                /* enum rapl_domain */
	uint8_t exponent;              /* J = count * 2^-exponent */
	bool valid;                    /* sampled at least once */
	uint64_t total;                /* 64-bit extension of the 32-bit register */
	uint32_t max_power_mw;         /* the domain's upper bound, for the stale-read check */
	uint64_t folded_ns;            /* energy_now_ns of the last fold */
	uint64_t stale_reads;          /* readings rejected as older than the last fold */
	uint64_t above_max_reads;      /* readings that showed more than max_power_mw drew */
	/* The sampler's own view, as an energy page shows it: the register and msrd's total at
	 * its last sample, the times (CLOCK_MONOTONIC_RAW, TSC) of that sample, of the last one
	 * that saw it change and that change's bracket, and the change before it (fields as in
	 * shm/energy_page.h). The total is as of the sample: a client's read may have moved
	 * counter->total on since, and that read's time is not the sample's. Client reads do not
	 * move these. sequence, exponent and state are the page's own, unused here. */
	struct energy_page_reading sampled;
	/* What measuring cost the package through this register's pages, by the simulator's
	 * model (energy_cost.c; sampled.measurement_nj is it, whole). */
	double measurement_nj;
	/* The last sample's time taken before its read: the low end of the next change's
	 * bracket. */
	uint64_t sample_lo_ns;
	uint64_t sample_lo_tsc;
	/* Precise edges (energy_edges.c): the model of this register's update grid. */
	struct energy_edge_model {
		bool wanted;           /* a precise page shows this register */
		bool locked;           /* an edge was seen sharp: the grid below is known */
		uint64_t anchor_ns;    /* the grid point of the last edge seen */
		double period_ns;      /* learnt update interval */
		double variance_ns2;   /* of the edges around the predicted grid point (widened
					* by missed windows: it sizes the windows) */
		double spread_ns2;     /* of the sharp edges only: what places a blurred one */
		uint64_t window_from_ns, window_to_ns; /* the window sampled now or next */
		uint64_t next_ns;      /* the next sample of this register */
		uint64_t windows, sharp_edges; /* for the log and tests */
		uint64_t cpu_ns;       /* CPU its windows took in this budget second */
		uint64_t sharp_since_lock; /* sharp edges since the grid (re)started */
		bool missed_last;      /* the last edge was blurred (a second in a row widens) */
	} edge;
};

/* The previous reading one reader got from a counter under a coarse grant. */
struct energy_coarse {
	uint64_t at_ns;
	uint64_t raw;
	uint64_t total;
	bool valid;
};

struct energy_state {
	struct energy_counter *counters;
	uint32_t count;
	int32_t *by_domain[RAPL_DOMAIN_COUNT]; /* key (package, or CPU for AMD core) -> index */
	uint64_t period_ns;            /* sampling period: half the fastest wrap at max power */
	struct __kernel_timespec timeout;
	bool armed;
	uint64_t samples;              /* sampling rounds so far, for the log */
	struct energy_coarse_stream *coarse_streams; /* per coarse setting (energy.c) */
	/* Energy pages (energy_page.c): sampled at page_rate_hz while any is held. */
	struct msrd_energy_page *pages;
	struct client *holders;        /* clients holding a page (doubly linked): what the rate
					* and the leases are made of, never every client */
	uint32_t page_rate_hz;         /* 0: no page is held, no page sampling */
	bool page_armed;
	struct __kernel_timespec page_timeout;
	uint64_t page_samples;
	bool *page_wanted;             /* per counter: some page holds it */
	/* Precise edges (energy_edges.c): while some holder of a fine page asked for them. */
	bool edges_on;
	bool edge_armed;
	bool edge_spin_due;            /* a window is open: read it at the end of this turn */
	bool *edge_wanted;             /* per counter: some leased precise holder's page shows it */
	uint64_t edge_lease_lapse_ns;  /* the earliest a lease in edge_wanted can lapse: then
					* the set is computed again */
	struct __kernel_timespec edge_timeout;
	uint64_t edge_due_ns;          /* when the armed timeout should wake msrd */
	double edge_wake_late_ns;      /* how late those wakes came: a moving mean and variance */
	double edge_wake_late_var;
	/* The last EDGE_WAKE_HISTORY latenesses (ns, capped), for the margin's percentile. */
	uint32_t edge_wake_history[64];
	uint32_t edge_wake_count;      /* wakes noted so far (the history is a ring) */
	uint64_t edge_samples;
	uint64_t edge_yields;          /* spins that stopped for waiting work (loop_work_waiting) */
	uint64_t edge_cpu_total_ns;    /* every window's CPU since msrd started (the debug line) */
	uint64_t edge_wakes;           /* the windows' timer wakes since msrd started */
	uint64_t edge_idle_wakes;      /* of them, wakes that found no register due */
	/* The windows' CPU budget (policy edge_cpu_percent, _per_uid), per second from
	 * edge_budget_from_ns: what they took in all, and when holders were last checked. */
	uint64_t edge_budget_from_ns;
	uint64_t edge_cpu_ns;
	uint64_t edge_checked_ns;
	uint64_t edge_total_logged;    /* edge_budget_from_ns of the last "total spent" line */
};

/* Find every energy-status register of the machine, take a first sample, and log the period. */
int energy_init(struct msrd *server);
void energy_free(struct energy_state *energy);
/* Arm the sampling timeout (real time only: in virtual time SIM_ADVANCE drives sampling). */
void energy_arm(struct msrd *server);
void energy_on_timeout(struct msrd *server, const struct io_uring_cqe *cqe);
/* The counter behind a read of (cpu, address), or NULL when it is no energy register msrd keeps
 * a total for. */
struct energy_counter *energy_find(struct msrd *server, uint32_t cpu, uint32_t address);
/* Extend a fresh reading of the register; returns the new total. A reading behind the total (by
 * less than a quarter of the register) is older than the last fold (an out-of-order completion,
 * a synchronous read racing the sampler): it would add a whole wrap (2^32 units). Such a reading
 * is re-read once; when the re-read is stale too, the total stays. Either way it is logged, and
 * *raw becomes what the caller may show: the re-read, or the low bits of the total kept. A
 * reading ahead by more than the domain's maximum power allows is counted, and logged. */
uint64_t energy_observe(struct msrd *server, struct energy_counter *counter, uint64_t *raw);
/* Virtual time: advance the simulated CPU by ns in steps no longer than the sampling period,
 * sampling between steps so that no wrap goes unseen. */
int energy_sim_advance(struct msrd *server, uint64_t ns);
/* Apply a coarse grant to a reading: within min_interval the previous reading again, else
 * the reading rounded down to the resolution (in the register's units); raw = total mod 2^32. */
void energy_coarsen(struct msrd *server, const struct energy_counter *counter,
		    const struct policy_energy_limit *limit, struct energy_coarse *previous,
		    uint64_t *raw, uint64_t *total);
/* The latest coarse value of `counter` under the grant setting `limit` (its interval and
 * resolution), shared by every uid, connection, page and schedule of that setting; NULL when
 * there is no memory for it. */
struct energy_coarse *energy_coarse_state(struct msrd *server,
					  const struct energy_counter *counter,
					  const struct policy_energy_limit *limit);
/* The readings of the ops that read energy registers: totals updated, coarse grants applied
 * (the client's, with its uid's previous readings). totals[i] gets the total of op i (0 for
 * others). */
void energy_finish_reads(struct client *client, struct msr_op *ops, const uint8_t *kinds,
			 uint64_t *totals, uint32_t count);
/* Now, in the time base coarse intervals use: the simulated CPU's in virtual time. */
uint64_t energy_now_ns(struct msrd *server);
/* Read every energy register once (totals and the sampler's times updated), then publish to
 * the energy pages; energy_sample_some only the counters wanted[i] says (energy pages' own). */
void energy_sample_all(struct msrd *server);
void energy_sample_some(struct msrd *server, const bool *wanted);
/* Read one energy register through `cpu` (one of its package's CPUs, or its own for a per-core
 * register): the total extended, the sampler's times and the change's bracket updated; true when
 * the register changed since the sampler's previous read (pages are not published). */
bool energy_sample_counter(struct msrd *server, struct energy_counter *counter, uint32_t cpu);

/* ENERGY_GRANT (energy_grant.c): the caller's grant for an energy register and the policy's
 * coarse setting. */
void energy_grant_handle_request(struct client *client, const struct wire_header *header,
				 const uint8_t *payload, size_t length);

#endif
