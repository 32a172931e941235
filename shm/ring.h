/*
 * shm/ring.h — lock-free shared-memory rings of timestamped counter records.
 *
 * FERRET's lists, rebuilt for Linux processes. One ring carries the readings of one or more
 * counters from producers (threads of an instrumented program, or msrd's sampler) to any number
 * of consumers in other processes, each reading at its own pace through a read-only mapping.
 *
 * Guarantees:
 *  - ring_push() never blocks and never waits for a consumer: when the ring is full the oldest
 *    record is overwritten.
 *  - A consumer never returns a torn or half-written record, and learns exactly how many records
 *    it missed: for every consumer, records returned + records reported lost = records pushed
 *    since it attached (counting from the oldest record still in the ring at attach time).
 *  - Attaching to memory that is not a valid ring fails with an error, never a crash.
 *
 * The ring knows nothing of MSRs and nothing of how its memory was shared: creation
 * (ring_memfd_create), attachment (ring_*_attach) and the record protocol are separate so msrd
 * can own creation and hand out file descriptors.
 *
 * All functions return 0 (or a count) on success and -errno on failure; none sets errno.
 */
#ifndef HAECER_SHM_RING_H
#define HAECER_SHM_RING_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RING_MAGIC UINT64_C(0x31474e5243454148) /* "HAECRNG1" little-endian */
#define RING_LAYOUT_VERSION 1u
#define RING_MIN_CAPACITY 2u
#define RING_MAX_CAPACITY (1u << 26)
#define RING_MAX_COUNTERS 16u
#define RING_NAME_MAX 32u

/* Ring creation flags. */
#define RING_SINGLE_PRODUCER 0x1u /* one producer thread: push uses plain stores, no atomic RMW */

/* Clock of the records' timestamps. */
enum ring_clock {
	RING_CLOCK_MONOTONIC_RAW = 1, /* nanoseconds of CLOCK_MONOTONIC_RAW */
	RING_CLOCK_TSC = 2,           /* TSC ticks; header carries tsc_hz */
};

enum ring_counter_kind {
	RING_COUNTER_SOFTWARE = 0,
	RING_COUNTER_ENERGY = 1,       /* joules = value * 2^-unit_exponent */
	RING_COUNTER_FIXED = 2,        /* fixed-function PMC */
	RING_COUNTER_PROGRAMMABLE = 3, /* general-purpose PMC */
	RING_COUNTER_MSR = 4,          /* raw MSR value (scheduled batches) */
};

/* What a counter carried in the ring is; stored in the ring header for consumers. */
struct ring_counter_info {
	char name[RING_NAME_MAX]; /* NUL-terminated, e.g. "RAPL_PKG" */
	uint32_t id;              /* the counter_id its records carry */
	uint16_t kind;            /* enum ring_counter_kind */
	int16_t unit_exponent;    /* energy: J = value * 2^-unit_exponent; 0 otherwise */
	int32_t package;          /* -1 when not tied to a package */
	int32_t cpu;              /* -1 when not tied to a CPU */
	uint32_t reserved;
};

struct ring_params {
	uint16_t major;
	uint16_t minor;
	uint32_t instance;
	uint32_t capacity;     /* records; power of two in [RING_MIN_CAPACITY, RING_MAX_CAPACITY] */
	uint32_t flags;        /* RING_SINGLE_PRODUCER */
	uint32_t clock;        /* enum ring_clock */
	int32_t producer_pid;  /* who produces; 0 = the creating process */
	uint64_t tsc_hz;       /* for RING_CLOCK_TSC */
	uint32_t counter_count;
	struct ring_counter_info counters[RING_MAX_COUNTERS];
};

/* One reading: FERRET's data64[] = {value, counter id / unit exponent, timestamp}. */
struct ring_record {
	uint64_t value;
	uint64_t timestamp;    /* in the ring's clock */
	uint32_t counter_id;
	int16_t unit_exponent; /* energy: J = value * 2^-unit_exponent */
	uint16_t flags;        /* producer-defined */
};

/* A snapshot of a ring's header, for listing and monitors. */
struct ring_info {
	uint16_t major;
	uint16_t minor;
	uint32_t instance;
	uint32_t capacity;
	uint32_t record_size;
	uint32_t flags;
	uint32_t clock;
	int32_t producer_pid;
	uint64_t tsc_hz;
	uint64_t created_ns;       /* CLOCK_MONOTONIC_RAW at format time */
	uint64_t pushed;           /* records reserved by producers so far */
	uint64_t producer_dropped; /* records producers dropped (slot still being written) */
	uint32_t counter_count;
	struct ring_counter_info counters[RING_MAX_COUNTERS];
};

/* Bytes a ring of this capacity occupies (header page + slots); -EINVAL for a bad capacity. */
int ring_bytes_for(uint32_t capacity, size_t *bytes);

/* Validate params: -EINVAL with nothing changed when capacity is not a power of two in range,
 * counter_count exceeds RING_MAX_COUNTERS, a counter name is not NUL-terminated, the clock
 * is unknown (or RING_CLOCK_TSC without tsc_hz), or flags has unknown bits. */
int ring_params_check(const struct ring_params *params);

/* Lay a fresh ring out in `memory` (zeroed or not) of exactly ring_bytes_for(capacity) bytes
 * (-EMSGSIZE otherwise), before anybody attaches. */
int ring_format(void *memory, size_t bytes, const struct ring_params *params);

/* Create an anonymous ring: a memfd of the right size, formatted, with its size sealed
 * (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) and its inode mode 0444, so a read-only
 * descriptor cannot be reopened read-write through /proc/self/fd by another user. *fd_out is
 * read-write and close-on-exec; left untouched on failure. */
int ring_memfd_create(const struct ring_params *params, int *fd_out);

/* Give back the memory of a ring's records, for a ring nobody may open any more: punches a hole
 * over its slots, keeping its size (no mapping of it can fault) and its header. Descriptors and
 * mappings others still hold then cost no memory for the slots; their readers find no further
 * records (ring_consume_final counts the rest as lost). 0 or -errno. */
int ring_memfd_release_records(int fd);

/* A new read-only, close-on-exec descriptor for the same ring (what consumers get): it cannot be
 * mapped writable, truncated or resealed. Returns the fd or -errno. */
int ring_reopen_readonly(int fd);

/* Read and validate the header of the ring behind fd (any access mode) without keeping a mapping. */
int ring_info_from_fd(int fd, struct ring_info *info);

/* ---- producing ---- */

struct ring_header;
struct ring_slot;

struct ring_producer {
	struct ring_header *header;
	struct ring_slot *slots;
	uint64_t mask;
	uint64_t next;     /* single-producer mode: next position, kept locally */
	uint32_t flags;
	void *mapping;
	size_t mapping_bytes;
	bool owns_mapping;
};

/* Map the ring behind a read-write fd and validate it. The fd may be closed afterwards. Errors
 * as for ring_consumer_attach. */
int ring_producer_attach(struct ring_producer *producer, int fd);

/* Use an existing mapping of `bytes` bytes, aligned to 128 bytes (-EINVAL otherwise; mappings
 * are), validated like an attach; not unmapped on detach. */
int ring_producer_use(struct ring_producer *producer, void *memory, size_t bytes);

void ring_producer_detach(struct ring_producer *producer);

/* Append one record. Never blocks. Returns 0, or -EAGAIN when this record was dropped because
 * its slot was still being written by a preempted or dead producer one lap behind, or already
 * taken by one a lap ahead (the drop is counted in the header and consumers count it as lost),
 * or -EINVAL for a detached producer. Thread-safe unless the ring was created with
 * RING_SINGLE_PRODUCER. */
int ring_push(struct ring_producer *producer, const struct ring_record *record);

/* ---- consuming ---- */

struct ring_consumer {
	const struct ring_header *header;
	const struct ring_slot *slots;
	uint64_t mask;
	uint64_t capacity;
	uint64_t position;   /* next position this consumer will read */
	uint64_t lost_total; /* records this consumer missed since attaching */
	/* What the consumer knows of the producers' head, to catch one that rewrites it: */
	uint64_t attach_head; /* head when it attached */
	uint64_t attach_ns;   /* CLOCK_MONOTONIC_RAW then */
	uint64_t seen_head;   /* the highest head it saw (head only grows) */
	bool corrupted;       /* the header broke what an honest ring guarantees: stays so */
	const void *mapping;
	size_t mapping_bytes;
	bool owns_mapping;
};

/* Map the ring behind fd read-only and validate everything a consumer relies on (magic, layout
 * version, record size, capacity, mapping size). -EBADMSG for a foreign or corrupt header,
 * -EPROTO for an unknown layout version, -EMSGSIZE when the size does not match the capacity,
 * -EPERM when the file's size is not sealed against shrinking (its owner could truncate it
 * under the mapping and kill the reader with SIGBUS), -EINVAL for a non-regular file. The
 * header is read with pread and judged before anything is mapped. */
int ring_consumer_attach(struct ring_consumer *consumer, int fd);

/* Attach to memory already mapped (read-only is enough, aligned to 128 bytes); not unmapped on
 * detach. */
int ring_consumer_use(struct ring_consumer *consumer, const void *memory, size_t bytes);

/* Start reading at the oldest record still in the ring (the default after attach) or at the
 * newest position (only records pushed from now on). */
void ring_consumer_seek_oldest(struct ring_consumer *consumer);
void ring_consumer_seek_newest(struct ring_consumer *consumer);

void ring_consumer_detach(struct ring_consumer *consumer);

/* What ring_consume returns, for good, once a producer rewrote the header into something no
 * honest ring shows: head going backwards, more records written since the consumer attached
 * than RING_MAX_PUSHES_PER_US per microsecond (plus two laps), or more producer drops than
 * records. Consumers report "ring corrupted by its producer" (RING_CORRUPTED_TEXT) instead of
 * counts derived from it. */
#define RING_CORRUPTED (-EUCLEAN)
#define RING_CORRUPTED_TEXT "ring corrupted by its producer"
/* Far above what any CPU pushes (a push stores a 32-byte slot and two ordered words). */
#define RING_MAX_PUSHES_PER_US 1000u

/* Copy up to max complete records, in push order, into records. Returns how many were copied;
 * adds to *lost (if not NULL) how many records were missed since the previous call (overwritten
 * before this consumer read them, or dropped by a producer). Stops early at a record whose
 * producer is still writing it; call again later. RING_CORRUPTED (nothing copied, nothing
 * counted) when the header is one no honest producer writes. */
ssize_t ring_consume(struct ring_consumer *consumer, struct ring_record *records, size_t max,
		     uint64_t *lost);

/* Like ring_consume, for use once every producer is known to be gone (process exited or was
 * killed): records still marked as being written will never complete, so they are counted as
 * lost and skipped instead of waited for. */
ssize_t ring_consume_final(struct ring_consumer *consumer, struct ring_record *records, size_t max,
			   uint64_t *lost);

/* Whether the ring's header has shown something no honest producer writes (see
 * RING_CORRUPTED); checks the live header again. */
bool ring_consumer_corrupted(struct ring_consumer *consumer);

/* Header snapshot of an attached ring. */
void ring_consumer_info(const struct ring_consumer *consumer, struct ring_info *info);

/* Records pushed but not yet read by this consumer (an upper bound: some may be lost). */
uint64_t ring_consumer_backlog(const struct ring_consumer *consumer);

/* Whether process `pid` still exists (kill(pid, 0) semantics; EPERM counts as alive). */
bool ring_producer_alive(const struct ring_info *info);

#endif
