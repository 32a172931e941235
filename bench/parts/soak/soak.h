/*
 * bench/parts/soak/soak.h — what the soak's parts share: the load's shape, the counters every
 * thread adds to, how an unexpected error is counted, and the worker loop clients and monitors
 * run. bench/soak.c runs the soak and its clients; bench/parts/soak/rings.c its rings (msrd's
 * schedules, producer threads, monitors).
 */
#ifndef HAECER_BENCH_PARTS_SOAK_SOAK_H
#define HAECER_BENCH_PARTS_SOAK_SOAK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "shm/ring.h"

#define DEFAULT_SECONDS 60.0
#define DEFAULT_CLIENTS 200u
#define DEFAULT_MONITORS 50u
#define NS_PER_S 1000000000ull
#define NS_PER_MS 1000000ull
#define WINDOW_MAX_NS (10 * NS_PER_S)

#define TSC 0x10u
#define PKG_ENERGY 0x611u
#define PP0_ENERGY 0x639u
#define REFUSED_ADDRESS 0x1a0u /* IA32_MISC_ENABLE: not in the policy */
#define CPUS 4u                /* the simulated Sandy Bridge */
#define BATCH_OPS 4u
#define RECONNECT_ONE_IN 1000u /* a client reconnects after about this many requests */

#define RING_MAJOR 1u
#define SCHEDULED_RINGS 2u /* minors 1, 2: msrd produces */
#define PRODUCED_RINGS 2u  /* minors 3, 4: producer threads */
#define RINGS (SCHEDULED_RINGS + PRODUCED_RINGS)
#define SCHEDULE_CAPACITY 8192u
#define PRODUCED_CAPACITY 4096u
#define PRODUCED_PER_MS 4u
#define RING_GRACE_MS 500u
/* Clients and monitors reconnect all the time, so under load msrd's descriptor count moves by a
 * few either way from one moment to the next; a leak of one per connection would exceed this
 * within seconds, and the idle comparison at the end is exact. */
#define LOADED_FDS_SLACK 5
#define MONITOR_BATCH 512u

struct totals {
	atomic_ullong ops;
	atomic_ullong refused; /* the expected policy refusals */
	atomic_ullong reconnects;
	atomic_ullong ring_records;
	atomic_ullong ring_lost;
	atomic_ullong ring_lost_catching_up; /* of ring_lost: while reading a full ring's backlog */
	atomic_ullong attaches;
	atomic_ullong producer_dropped;
	atomic_ullong errors;
};

/* Clients' and monitors' threads: connect whenever the connection is closed, then step. */
struct worker_kind {
	int (*connect)(void *worker); /* 0 or -errno */
	void (*step)(void *worker);   /* may close the connection (and set it to NULL) */
};

extern struct msrd_server server;
extern atomic_bool stopping;
extern struct totals totals;
extern const struct haecer_msr_op batch_ops[BATCH_OPS];

/* code: a negative errno value from the API, or 0 for a finding of the soak's own checks. */
void soak_error(const char *what, int code, const char *detail);
void conn_error(const char *what, int code, const struct haecer_conn *conn);
/* A failure after which the connection is no use. */
bool connection_broken(int code);
void sleep_ns(uint64_t ns);
/* Sleep ns, waking at least every 50 ms to see whether the soak is stopping. */
void sleep_unless_stopping(uint64_t ns);
void sleep_until(uint64_t deadline_ns);
/* Steps until the soak stops, connecting whenever the connection is closed (waiting 100 ms
 * after a failed attempt); closes it at the end. */
void worker_run(const struct worker_kind *kind, void *worker, struct haecer_conn **conn);

/* rings.c: msrd's 1 ms schedules of the batch into minors 1 and 2; stopping them when they
 * never started does nothing. */
int schedules_start(void);
void schedules_stop(void);

/* rings.c: a producer thread fills one ring (minor) at PRODUCED_PER_MS records per ms. */
struct producer {
	uint16_t minor;
	struct haecer_conn *conn;
	struct ring_producer ring;
	uint64_t sequence;
};
int producer_create(struct producer *producer);
void *producer_main(void *argument);
void producer_close(struct producer *producer);

/* rings.c: a monitor attaches, consumes for a while, detaches, reconnects; rng seeds it. */
struct monitor {
	uint64_t rng;
	struct haecer_conn *conn;
	unsigned cycles_left; /* on this connection */
	struct ring_record records[MONITOR_BATCH];
};
void *monitor_main(void *argument);

#endif
