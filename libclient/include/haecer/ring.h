/*
 * <haecer/ring.h> — FERRET's monitors and application events (seed 001 §2.2), for any program.
 *
 * A monitored counter (haecer_counter_monitor, setupFerretMonitor) publishes every reading into
 * a ring of records in shared memory that msrd keeps in its directory under a key (major,
 * minor). Any program the policy lets monitor that major is a monitor: it attaches to the ring
 * by its key through msrd and reads the records at its own pace, without a system call per
 * record and without ever slowing the producer down. The instrumented program can post its own
 * application events (a value and an id: a frame boundary, a phase, a request) into the same
 * ring, between its counter readings, so a monitor sees them in order beside the readings.
 *
 * What a monitor is promised (the ring's guarantees, shm/ring.h):
 *  - records come in the order they were pushed, none torn or half-written;
 *  - when the ring overran the monitor (or a producer dropped a record), the monitor is told
 *    exactly how many it lost: records read + records reported lost = records pushed since it
 *    attached (counting from the oldest record still in the ring at attach time);
 *  - the producer never waits for a monitor: a slow monitor loses records, nothing else.
 *
 * Names carry the haecer_ / HAECER_ prefix only. Link with libhaecer (`pkg-config haecer`).
 * Functions return 0 (or a count) on success and a negative errno value on failure; none sets
 * errno. The ring's own layout is not part of this API and may change with msrd.
 */
#ifndef HAECER_RING_H
#define HAECER_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <haecer/msrd.h>

#ifdef __cplusplus
extern "C" {
#endif

struct haecer_counter;   /* <haecer/haecer.h> */
struct haecer_ring_reader;

/* ---- producing: application events beside counter readings ---- */

/* Application event ids: 0 .. HAECER_RING_EVENT_ID_MAX. */
#define HAECER_RING_EVENT_ID_MAX 0x7fffffffu

/* Post an application event into the ring of a monitored counter: one record {value, event_id,
 * timestamp}, timestamped in the ring's clock (CLOCK_MONOTONIC_RAW ns) when it is posted, in
 * order with the counter's readings (a reading and an event of the same thread keep their
 * order; those of different threads are ordered by the counter's lock). Records are in push
 * order; a reading is dated when its value was true (an energy reading from msrd's energy page
 * at msrd's sample), so it may carry an earlier timestamp than an event pushed before it. Costs one push into
 * shared memory and the context's lock: no system call, no msrd round trip. Never blocks on a
 * monitor; -EAGAIN when the record was dropped (counted as lost for monitors, as for readings).
 * -EBADF an invalid or freed counter; -ENOTCONN the counter has no ring (not monitored);
 * -EINVAL event_id above HAECER_RING_EVENT_ID_MAX. Thread-safe. */
int haecer_ring_post(struct haecer_counter *counter, uint32_t event_id, uint64_t value);

/* ---- consuming: monitors ---- */

/* Clock of a ring's timestamps. */
#define HAECER_RING_CLOCK_MONOTONIC_RAW 1u  /* ns of CLOCK_MONOTONIC_RAW */
#define HAECER_RING_CLOCK_TSC 2u            /* TSC ticks; info.tsc_hz converts */

/* Kinds of the counters a ring carries (struct haecer_ring_counter .kind). */
#define HAECER_RING_COUNTER_SOFTWARE 0u
#define HAECER_RING_COUNTER_ENERGY 1u        /* joules = value * 2^-unit_exponent */
#define HAECER_RING_COUNTER_FIXED 2u         /* a fixed-function PMC */
#define HAECER_RING_COUNTER_PROGRAMMABLE 3u  /* a general-purpose PMC */
#define HAECER_RING_COUNTER_MSR 4u           /* a raw MSR value (msrd's schedules) */

/* One record as a monitor reads it: FERRET's data64[] = {value, id, timestamp}. */
struct haecer_ring_record {
	uint64_t value;         /* the counter's value as its read returned it, or the event's */
	uint64_t timestamp;     /* in the ring's clock (haecer_ring_info.clock) */
	uint32_t id;            /* a reading: its counter's id (haecer_ring_info.counters[].id);
				 * an event: the application's event id */
	int16_t unit_exponent;  /* energy readings: joules = value * 2^-unit_exponent */
	uint16_t flags;         /* as the producer set them (msrd's schedules: the period number
				 * mod 2^16); 0 for counter readings and events */
	bool event;             /* an application event (haecer_ring_post), not a reading */
};

/* What a monitor knows about its ring. */
struct haecer_ring_info {
	uint16_t major;
	uint16_t minor;
	uint32_t instance;          /* msrd's creation number of this ring */
	uint32_t capacity;          /* records the ring holds */
	uint32_t clock;             /* HAECER_RING_CLOCK_* */
	uint64_t tsc_hz;            /* for HAECER_RING_CLOCK_TSC */
	int32_t producer_pid;
	uint64_t pushed;            /* records pushed so far, by every producer */
	uint64_t lost;              /* records this reader lost so far */
	uint32_t counter_count;
	struct haecer_ring_counter counters[HAECER_RING_MAX_COUNTERS];
};

/* Attach to the ring (major, minor) of msrd's directory through `conn` (haecer_connect);
 * instance 0 means the newest ring of that key. The reader starts at the oldest record still in
 * the ring. The connection is needed only for this call (msrd hands over a read-only
 * descriptor of the ring's sealed memory); closing it later does not detach the reader.
 * -ENOENT no such ring; -EPERM the policy does not let this user monitor the major (or read a
 * register an msrd schedule fills the ring with); -EBADMSG, -EPROTO the memory is not a ring
 * this library understands; -ENOMEM. */
int haecer_ring_attach(struct haecer_conn *conn, uint16_t major, uint16_t minor,
		       uint32_t instance, struct haecer_ring_reader **out);

/* Detach and free the reader; NULL is fine. */
void haecer_ring_detach(struct haecer_ring_reader *reader);

/* Copy up to `max` complete records, in push order, and add to *lost (if not NULL) the records
 * missed since the previous call (overwritten before this reader got to them, or dropped by a
 * producer). Returns how many were copied: 0 when nothing new is complete yet (call again
 * later; a record a producer is still writing is waited for, not skipped). -EUCLEAN, for good,
 * when the ring was corrupted by its producer: its header shows what no honest producer writes
 * (a head that went back, or more records than pushing since it was made allows), so no count
 * derived from it is given. */
ssize_t haecer_ring_read(struct haecer_ring_reader *reader, struct haecer_ring_record *records,
			 size_t max, uint64_t *lost);

/* haecer_ring_read for once every producer is gone (haecer_ring_producer_alive false): a record
 * a dead producer left half-written never completes, so it is counted as lost and skipped. */
ssize_t haecer_ring_read_final(struct haecer_ring_reader *reader,
			       struct haecer_ring_record *records, size_t max, uint64_t *lost);

/* Whether the ring's producer process still exists. */
bool haecer_ring_producer_alive(const struct haecer_ring_reader *reader);

/* Skip everything in the ring now: read only records pushed from here on. */
void haecer_ring_seek_newest(struct haecer_ring_reader *reader);

/* A snapshot of the ring's description and counts. */
void haecer_ring_reader_info(const struct haecer_ring_reader *reader,
			     struct haecer_ring_info *out);

#ifdef __cplusplus
}
#endif

#endif
