/*
 * proto/wire.h — msrd's wire protocol, version 1 (proto/PROTOCOL.md is the prose description).
 *
 * A connection carries frames in both directions over a UNIX stream socket. Every frame is a
 * 16-byte header followed by an op-specific payload; all integers are little-endian. The header
 * carries the whole frame length (hard maximum WIRE_MAX_FRAME), a magic, the protocol version,
 * the op, a status (replies) and a request id that the reply repeats. Ring file descriptors travel
 * as SCM_RIGHTS ancillary data on the bytes of the reply that announces them.
 *
 * This header gives the numbers (ops, statuses, limits), the host-side form of every message and
 * the encoders/decoders. Decoders check the exact payload length of every message before any field
 * is used; a payload one byte too short or too long is -EBADMSG. Nothing here allocates.
 *
 * All functions return 0 (or a size) on success and -errno on failure; none sets errno.
 */
#ifndef HAECER_PROTO_WIRE_H
#define HAECER_PROTO_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "haecer/machine_fields.h"
#include "proto/wire_ops.h"

#define WIRE_VERSION 1u
#define WIRE_MAGIC 0x4D48u          /* bytes 'H' 'M' on the wire */
#define WIRE_HEADER_SIZE 16u
#define WIRE_MAX_FRAME 32768u       /* header included; larger frames close the connection */
#define WIRE_MAX_PAYLOAD (WIRE_MAX_FRAME - WIRE_HEADER_SIZE)
#define WIRE_MAX_BATCH_OPS 1024u
#define WIRE_MAX_DETAIL 200u        /* error replies: at most this many bytes of text */
#define WIRE_MAX_CPUS HAECER_MAX_CPUS /* the per-CPU arrays of MACHINE_INFO */
#define WIRE_MAX_RING_COUNTERS 16u
#define WIRE_NAME_MAX 32u

/* Header flags. */
#define WIRE_FLAG_REPLY 0x01u       /* set on every frame the server sends */
#define WIRE_FLAGS_KNOWN WIRE_FLAG_REPLY

/* Op codes: one per row of proto/wire_ops.h, the table every use of an op follows from. */
#define WIRE_OP_ENUM_ENTRY(name, code, writes) WIRE_OP_##name = code,
enum wire_op { WIRE_OPS(WIRE_OP_ENUM_ENTRY) };
#undef WIRE_OP_ENUM_ENTRY

/* HELLO feature bits: which op families this server implements for this client. */
#define WIRE_FEATURE_MSR (1ull << 0)         /* READ, WRITE, BATCH */
#define WIRE_FEATURE_RINGS (1ull << 1)       /* RING_CREATE, RING_OPEN, RING_LIST */
#define WIRE_FEATURE_SIM_CONTROL (1ull << 2) /* sim backend and the policy allows this client */
#define WIRE_FEATURE_SLOTS (1ull << 3)       /* SLOT_*: counter slots */
#define WIRE_FEATURE_ENERGY (1ull << 4)      /* ENERGY_READ and batch energy reads */
#define WIRE_FEATURE_HANDLES (1ull << 5)     /* BATCH_REGISTER, BATCH_RUN, BATCH_RELEASE */
#define WIRE_FEATURE_SCHEDULES (1ull << 6)   /* SCHEDULE_START, SCHEDULE_STOP */
#define WIRE_FEATURE_ENERGY_PAGE (1ull << 7) /* ENERGY_PAGE */
#define WIRE_FEATURE_PERF (1ull << 8)        /* PERF_OPEN: msrd's perf_event broker runs */
#define WIRE_FEATURE_ENERGY_REGION (1ull << 9) /* ENERGY_READ's flags (WIRE_ENERGY_READ_*) */

/*
 * Status codes: stable numbers, each with a text (wire_status_text) and an errno-style value
 * (wire_status_to_errno). New codes are only ever appended.
 */
enum wire_status {
	WIRE_STATUS_OK = 0,
	WIRE_STATUS_DENIED = 1,      /* -EPERM: the policy does not grant this */
	WIRE_STATUS_MASK = 2,        /* -EACCES: a bit outside the write mask would change */
	WIRE_STATUS_IO = 3,          /* -EIO: no such MSR, or the CPU refused the access */
	WIRE_STATUS_NO_CPU = 4,      /* -ENXIO: no such CPU */
	WIRE_STATUS_NOT_RUN = 5,     /* -ECANCELED: batch op not run, another op was refused */
	WIRE_STATUS_INVALID = 6,     /* -EINVAL: a field has a value the op does not accept */
	WIRE_STATUS_MALFORMED = 7,   /* -EBADMSG: frame or payload of the wrong shape */
	WIRE_STATUS_TOO_LARGE = 8,   /* -EMSGSIZE: frame larger than WIRE_MAX_FRAME */
	WIRE_STATUS_VERSION = 9,     /* -EPROTONOSUPPORT: protocol version not spoken */
	WIRE_STATUS_UNSUPPORTED = 10,/* -EOPNOTSUPP: op unknown or not implemented */
	WIRE_STATUS_BUSY = 11,       /* -EBUSY: resource held by someone else */
	WIRE_STATUS_LIMIT = 12,      /* -ENOSPC: a per-client or server-wide limit is reached */
	WIRE_STATUS_NOT_FOUND = 13,  /* -ENOENT: no such ring (or handle) */
	WIRE_STATUS_NOT_SIM = 14,    /* -ENODEV: only with the simulated CPU */
	WIRE_STATUS_NO_MEMORY = 15,  /* -ENOMEM */
	WIRE_STATUS_TIMEOUT = 16,    /* -ETIMEDOUT: a frame was not completed in time */
	WIRE_STATUS_SHUTDOWN = 17,   /* -ESHUTDOWN: the server is stopping */
	WIRE_STATUS_STALE = 18,      /* -ESTALE: handle or slot invalidated by a policy reload */
	WIRE_STATUS_INTERNAL = 19,   /* -EREMOTEIO: the server failed for a reason of its own */
	WIRE_STATUS_LOST = 20,       /* -EIDRM: a counter slot was reprogrammed outside msrd */
	WIRE_STATUS_COUNT = 21,
};

const char *wire_status_text(uint16_t status);        /* "unknown status" for unknown codes */
int wire_status_to_errno(uint16_t status);            /* 0 for OK, -EPROTO for unknown codes */
uint16_t wire_status_from_errno(int negative_errno);  /* INTERNAL for errnos without a code */
const char *wire_op_name(uint16_t op);                /* "READ", ...; "UNKNOWN" otherwise */
/* Whether a request of op may write a register (proto/wire_ops.h); NEVER for an unknown op. */
enum wire_op_writes wire_op_writes(uint16_t op);

/* ---- header ---- */

struct wire_header {
	uint32_t length;     /* whole frame, header included */
	uint8_t version;
	uint8_t flags;
	uint16_t op;
	uint16_t status;     /* 0 in requests */
	uint32_t request_id; /* chosen by the client, repeated in the reply; 0 in unsolicited ERROR */
};

/* Decode and validate a header from the first bytes of a stream. Returns 0 with *out filled
 * (the frame is complete once `available` >= out->length); -EAGAIN when fewer than
 * WIRE_HEADER_SIZE bytes are available; -EBADMSG for a wrong magic, unknown flags or a length
 * below the header size; -EMSGSIZE for a length above max_frame; -EPROTONOSUPPORT for another
 * version (*out is filled in every case but -EAGAIN, so the reply can carry the request id). */
int wire_header_decode(const void *data, size_t available, uint32_t max_frame,
		       struct wire_header *out);
void wire_header_encode(void *data, const struct wire_header *header);

/* ---- payload cursors ---- */

/* A writer never writes past size; once a put does not fit, `overflow` stays set. */
struct wire_writer {
	uint8_t *data;
	size_t size;
	size_t used;
	bool overflow;
};

/* A reader never reads past size; reading too far sets `bad` and yields zeros. */
struct wire_reader {
	const uint8_t *data;
	size_t size;
	size_t used;
	bool bad;
};

void wire_writer_init(struct wire_writer *writer, void *data, size_t size);
void wire_put_u8(struct wire_writer *writer, uint8_t value);
void wire_put_u16(struct wire_writer *writer, uint16_t value);
void wire_put_u32(struct wire_writer *writer, uint32_t value);
void wire_put_u64(struct wire_writer *writer, uint64_t value);
void wire_put_bytes(struct wire_writer *writer, const void *bytes, size_t count);
/* A fixed-size, NUL-padded text field; longer text is cut to size - 1 bytes. */
void wire_put_name(struct wire_writer *writer, const char *text, size_t size);

void wire_reader_init(struct wire_reader *reader, const void *data, size_t size);
uint8_t wire_get_u8(struct wire_reader *reader);
uint16_t wire_get_u16(struct wire_reader *reader);
uint32_t wire_get_u32(struct wire_reader *reader);
uint64_t wire_get_u64(struct wire_reader *reader);
void wire_get_bytes(struct wire_reader *reader, void *bytes, size_t count);
/* A fixed-size text field; the result is always NUL-terminated (size bytes of storage). */
void wire_get_name(struct wire_reader *reader, char *text, size_t size);
/* 0 when every byte was consumed and nothing was read past the end, else -EBADMSG. */
int wire_reader_finish(const struct wire_reader *reader);

/* ---- frames ---- */

/* Encode a whole frame: header + `payload_length` bytes of payload already written at
 * data + WIRE_HEADER_SIZE. Returns the frame length, or -EMSGSIZE when it exceeds size or
 * WIRE_MAX_FRAME. */
int wire_frame_finish(void *data, size_t size, uint16_t op, uint8_t flags, uint16_t status,
		      uint32_t request_id, size_t payload_length);

/* An error reply (or unsolicited ERROR frame) whose payload is a short text (cut to
 * WIRE_MAX_DETAIL bytes, not NUL-terminated on the wire). Returns the frame length. */
int wire_encode_error(void *data, size_t size, uint16_t op, uint16_t status, uint32_t request_id,
		      const char *detail);

/* ---- messages ---- */

struct wire_hello_request {
	uint16_t min_version;
	uint16_t max_version;
	uint32_t flags;                /* none defined; must be 0 */
	char client_name[WIRE_NAME_MAX];
};
#define WIRE_HELLO_REQUEST_SIZE 40u

struct wire_hello_reply {
	uint16_t version;              /* chosen version */
	uint16_t backend;              /* 1 msr, 2 msr-safe, 3 sim (backend/backend.h numbering) */
	uint32_t max_frame;
	uint32_t max_batch_ops;
	uint32_t max_in_flight;        /* pipelined requests before the server stops reading */
	uint32_t max_rings;            /* rings a client may create or open */
	uint32_t uid;                  /* the identity the server sees for this connection */
	uint32_t gid;
	uint32_t pid;
	uint64_t features;             /* WIRE_FEATURE_* */
	char server_version[WIRE_NAME_MAX];
};
#define WIRE_HELLO_REPLY_SIZE 72u

/* MACHINE_INFO reply: the fields of <haecer/machine_fields.h> in its order, each little-endian
 * (text NUL-padded to its size), the per-CPU arrays last: cpu_count u16 package numbers, then
 * (WIRE_MACHINE_HYBRID) cpu_count u8 core types, then (WIRE_MACHINE_DIES) cpu_count u16 dense
 * (package, die) numbers. The flags are the public HAECER_MACHINE_* bits. */
#define WIRE_RAPL_DOMAINS HAECER_RAPL_DOMAINS
struct wire_machine_info {
	HAECER_MACHINE_MEMBERS
};
#define WIRE_MACHINE_HAS_SMI_COUNT HAECER_MACHINE_HAS_SMI_COUNT
#define WIRE_MACHINE_PMC_FULL_WIDTH HAECER_MACHINE_PMC_FULL_WIDTH
#define WIRE_MACHINE_SIMULATED HAECER_MACHINE_SIMULATED
#define WIRE_MACHINE_VIRTUAL_TIME HAECER_MACHINE_VIRTUAL_TIME
#define WIRE_MACHINE_HYBRID HAECER_MACHINE_HYBRID
#define WIRE_MACHINE_DIES HAECER_MACHINE_DIES
#define WIRE_MACHINE_VIRTUAL HAECER_MACHINE_VIRTUAL
#define WIRE_MACHINE_TSC_INVARIANT HAECER_MACHINE_TSC_INVARIANT
#define WIRE_MACHINE_TSC_SOURCE_SHIFT 8    /* bits 11:8: where tsc_hz came from (enum
					    * tsc_source of hw/msr.h), 0 unknown */
#define WIRE_MACHINE_TSC_SOURCE_MASK 0xF00u
#define WIRE_MACHINE_INFO_FIXED_SIZE 212u  /* what the list's fields but the per-CPU ones take */
/* The largest MACHINE_INFO payload (every per-CPU array present). */
#define WIRE_MACHINE_INFO_MAX_SIZE (WIRE_MACHINE_INFO_FIXED_SIZE + 5u * WIRE_MAX_CPUS)

struct wire_read_request {
	uint32_t cpu;
	uint32_t address;
};
#define WIRE_READ_REQUEST_SIZE 8u
#define WIRE_READ_REPLY_SIZE 8u        /* u64 value */

struct wire_write_request {
	uint32_t cpu;
	uint32_t address;
	uint64_t value;
};
#define WIRE_WRITE_REQUEST_SIZE 16u    /* reply: empty */

/* One op of a BATCH. */
enum wire_batch_kind {
	WIRE_BATCH_READ = 1,
	WIRE_BATCH_WRITE = 2,
	WIRE_BATCH_ENERGY_READ = 3,    /* an energy-status register: value = raw, aux = 64-bit total */
	WIRE_BATCH_SLOT_READ = 4,      /* address = a slot id of this connection; cpu 0 */
};
struct wire_batch_op {
	uint16_t kind;
	uint16_t flags;                /* none defined; must be 0 */
	uint32_t cpu;
	uint32_t address;
	uint64_t value;                /* what to write; 0 for reads */
};
#define WIRE_BATCH_OP_SIZE 24u
struct wire_batch_result {
	uint64_t value;                /* read result (writes: the value written) */
	uint64_t aux;                  /* energy reads: the 64-bit total; 0 otherwise */
	uint16_t status;               /* enum wire_status */
};
#define WIRE_BATCH_RESULT_SIZE 24u
#define WIRE_BATCH_HEADER_SIZE 8u      /* u32 count, u32 flags/reserved */

/* RING_CREATE request: fixed part, then counter_count counters. */
struct wire_ring_counter {
	char name[WIRE_NAME_MAX];
	uint32_t id;
	uint16_t kind;
	int16_t unit_exponent;
	int32_t package;
	int32_t cpu;
};
#define WIRE_RING_COUNTER_SIZE 48u
struct wire_ring_create {
	uint16_t major;
	uint16_t minor;
	uint32_t capacity;
	uint32_t flags;
	uint32_t clock;
	uint64_t tsc_hz;
	uint32_t counter_count;
	struct wire_ring_counter counters[WIRE_MAX_RING_COUNTERS];
};
#define WIRE_RING_CREATE_FIXED_SIZE 32u

/* What RING_CREATE, RING_OPEN and RING_LIST report about a ring. */
#define WIRE_RING_PRODUCER_CONNECTED 0x1u /* the creating client is still connected */
struct wire_ring_entry {
	uint16_t major;
	uint16_t minor;
	uint32_t instance;             /* server-wide creation sequence number, from 1 */
	uint32_t capacity;
	uint32_t flags;                /* WIRE_RING_* */
	int32_t producer_pid;
	uint32_t consumers;            /* connected clients that opened it */
	uint64_t bytes;                /* size of the shared memory */
	uint32_t owner_uid;            /* who created it (the schedule's owner for msrd's rings) */
	int32_t owner_pid;             /* and that client's pid (SO_PEERCRED) */
};
#define WIRE_RING_ENTRY_SIZE 40u

/* RING_OPEN request (instance 0 = the newest instance of (major, minor)); RING_LIST request
 * (list entries whose (major, minor, instance) key is >= this one). */
struct wire_ring_key {
	uint16_t major;
	uint16_t minor;
	uint32_t instance;
};
#define WIRE_RING_KEY_SIZE 8u
#define WIRE_RING_LIST_HEADER_SIZE 8u  /* u32 count, u32 flags */
#define WIRE_RING_LIST_MORE 0x1u       /* more entries follow the last one: ask again */
#define WIRE_RING_LIST_MAX ((WIRE_MAX_PAYLOAD - WIRE_RING_LIST_HEADER_SIZE) / WIRE_RING_ENTRY_SIZE)

/* ---- counter slots ---- */

#define WIRE_SLOT_PROGRAMMABLE 1u
#define WIRE_SLOT_FIXED 2u
#define WIRE_SLOT_ANY_INDEX (-1)
#define WIRE_MAX_SLOT_IDS 256u         /* ids per SLOT_CONTROL / SLOT_READ */

struct wire_slot_alloc {
	uint32_t cpu;
	uint16_t kind;                 /* WIRE_SLOT_* */
	int32_t index;                 /* which counter; WIRE_SLOT_ANY_INDEX: any free one */
};
#define WIRE_SLOT_ALLOC_SIZE 12u       /* u32 cpu, u16 kind, u16 reserved, i32 index */

struct wire_slot {
	uint32_t id;
	uint32_t cpu;
	uint16_t kind;
	uint16_t index;
	uint8_t width;
	uint32_t counter_address;
	uint32_t control_address;
};
#define WIRE_SLOT_SIZE 24u             /* SLOT_ALLOC reply */

struct wire_slot_program {
	uint32_t id;
	uint64_t config;
};
#define WIRE_SLOT_PROGRAM_SIZE 16u     /* u32 id, u32 reserved, u64 config; reply empty */

#define WIRE_SLOT_ENABLE 1u
#define WIRE_SLOT_DISABLE 2u
#define WIRE_SLOT_RESET 3u
#define WIRE_SLOT_READ_SYNCHRONIZED 0x1u

/* SLOT_CONTROL and SLOT_READ requests: u16 action (CONTROL) or flags (READ), u16 reserved,
 * u32 count, count x u32 slot id. SLOT_READ's reply: u32 count, u32 reserved, count x u64. */
#define WIRE_SLOT_IDS_HEADER_SIZE 8u
struct wire_slot_ids {
	uint16_t action;               /* SLOT_CONTROL: WIRE_SLOT_ENABLE..RESET; SLOT_READ: flags */
	uint32_t count;
	uint32_t ids[WIRE_MAX_SLOT_IDS];
};

/* ---- energy totals ---- */

/* ENERGY_READ: request u32 cpu, u32 address, optionally u32 flags (8-byte requests, as READ's,
 * have none; only to a server announcing WIRE_FEATURE_ENERGY_REGION); reply u64 raw, u64 total.
 * WIRE_ENERGY_READ_REGION: an energy region of this connection begins; its precise windows
 * (server/energy_edges.c) run for region_edges_us more, for the region's start, then stop
 * until the connection's next request (its end's), so that msrd does not spin on the measured
 * package through the region's body. */
struct wire_energy_read_request {
	uint32_t cpu;
	uint32_t address;
	uint32_t flags;                /* WIRE_ENERGY_READ_* */
	uint32_t region_edges_us;      /* with WIRE_ENERGY_READ_REGION: 1 .. 1 000 000; else 0 */
};
#define WIRE_ENERGY_READ_REQUEST_SIZE 16u
#define WIRE_ENERGY_READ_REGION 0x1u
#define WIRE_ENERGY_READ_REGION_MAX_US 1000000u
#define WIRE_ENERGY_READ_REPLY_SIZE 16u

/* ENERGY_PAGE: u32 address (an energy-status register), u32 rate_hz (0: the policy's bound),
 * optionally u32 flags (WIRE_ENERGY_PAGE_PRECISE: precise edges while held; 8-byte requests
 * have none); reply the page's description and a read-only descriptor of it
 * (shm/energy_page.h). */
struct wire_energy_page_request {
	uint32_t address;
	uint32_t rate_hz;
	uint32_t flags;
};
#define WIRE_ENERGY_PAGE_REQUEST_SIZE 12u
#define WIRE_ENERGY_PAGE_COARSE 0x1u   /* quantised to the grant's resolution and interval */
#define WIRE_ENERGY_PAGE_PRECISE 0x2u  /* request: precise edges; reply: granted (fine pages) */
struct wire_energy_page {
	uint32_t address;
	uint32_t flags;                /* WIRE_ENERGY_PAGE_* */
	uint32_t entry_count;
	uint32_t rate_hz;              /* the sampling rate granted (bounded by the policy) */
	uint32_t min_interval_ms;      /* coarse only */
	uint64_t resolution_uj;        /* coarse only */
	uint64_t bytes;                /* size of the page */
};
#define WIRE_ENERGY_PAGE_REPLY_SIZE 40u /* five u32, u32 reserved (0), two u64 */

/* ENERGY_GRANT: u32 address (an energy-status register msrd keeps a total for), u32 flags (0).
 * Reply: how finely this connection's uid may read it, and the coarse setting of the running
 * policy (the coarsest interval and resolution of its rules' energy limits), which an exporter
 * that republishes energy to anyone applies at least. Refused (DENIED) when the uid may not read
 * the register at all. */
struct wire_energy_grant_request {
	uint32_t address;
	uint32_t flags;                /* none defined; must be 0 */
};
#define WIRE_ENERGY_GRANT_REQUEST_SIZE 8u
#define WIRE_ENERGY_GRANT_COARSE 0x1u        /* the caller's grant is coarse: its setting follows */
#define WIRE_ENERGY_GRANT_POLICY_COARSE 0x2u /* the policy has a coarse setting: it follows */
struct wire_energy_grant {
	uint32_t address;
	uint32_t flags;                /* WIRE_ENERGY_GRANT_* */
	uint32_t min_interval_ms;      /* the caller's, when coarse; else 0 */
	uint32_t policy_min_interval_ms; /* the policy's coarse setting; 0 when none */
	uint64_t resolution_uj;        /* the caller's, when coarse; else 0 */
	uint64_t policy_resolution_uj; /* the policy's coarse setting; 0 when none */
};
#define WIRE_ENERGY_GRANT_SIZE 32u     /* four u32, two u64 */

/* ---- the perf_event broker ---- */

/* PERF_OPEN: what perf_event_open(2) would be given: the event (type as in
 * /sys/bus/event_source/devices/PMU/type, config, config1), a sample period (0: counting), and
 * the scope: the client's thread `tid` (0: the client itself) on any CPU (cpu -1), or with
 * WIRE_PERF_CPU_WIDE every task on CPU `cpu`. Reply: u32 type, u32 flags (as asked), u32 open
 * (events this uid holds through msrd, this one included), u32 max_open (its policy bound),
 * and the event's descriptor; the client read()s it: u64 value, u64 time_enabled, u64
 * time_running (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING). */
#define WIRE_PERF_CPU_WIDE 0x1u
#define WIRE_PERF_EXCLUDE_KERNEL 0x2u
#define WIRE_PERF_DISABLED 0x4u       /* start disabled (enable with PERF_EVENT_IOC_ENABLE) */
/* A profiler's sampling event (proto/perf_profile.h): type software, config task clock,
 * sample_period its period in ns, config1 the ring bytes that wake the reader; _STACK adds the
 * user registers and stack for DWARF unwinding. Scope as any other: the client's own process,
 * so a profiler's child asks for itself before it execs the program. */
#define WIRE_PERF_PROFILE 0x8u
#define WIRE_PERF_PROFILE_STACK 0x10u
#define WIRE_PERF_EXCLUDE_USER 0x20u /* count the kernel only (a counter's OS-only level) */
#define WIRE_PERF_FLAGS 0x3Fu
struct wire_perf_open {
	uint32_t type;
	uint32_t flags;
	uint64_t config;
	uint64_t config1;
	uint64_t sample_period;
	int32_t tid;
	int32_t cpu;
};
#define WIRE_PERF_OPEN_SIZE 40u
struct wire_perf_opened {
	uint32_t type;
	uint32_t flags;
	uint32_t open;
	uint32_t max_open;
};
#define WIRE_PERF_OPENED_SIZE 16u

void wire_put_perf_open(struct wire_writer *writer, const struct wire_perf_open *message);
int wire_get_perf_open(const void *payload, size_t length, struct wire_perf_open *out);
void wire_put_perf_opened(struct wire_writer *writer, const struct wire_perf_opened *message);
int wire_get_perf_opened(const void *payload, size_t length, struct wire_perf_opened *out);

/* ---- registered batches and schedules ---- */

/* BATCH_REGISTER: a BATCH request; OK reply u32 handle; a refusal is a text naming the first
 * refused op. BATCH_RUN: u32 handle, u32 count (the registered number of ops, checked); reply as
 * BATCH's. BATCH_RELEASE: u32 handle; reply empty. SCHEDULE_STOP: u32 schedule id; reply
 * empty. */
#define WIRE_U32_SIZE 4u
#define WIRE_BATCH_RUN_SIZE 8u

#define WIRE_SCHEDULE_PERSISTENT 0x1u
#define WIRE_SCHEDULE_MIN_PERIOD_NS 1000000ull
/* Every time from the wire is bounded where it is decoded, so no product or sum msrd forms
 * from it can wrap (a wrapped deadline is always past: a timer that fires at once, forever). */
#define WIRE_SCHEDULE_MAX_PERIOD_NS (86400ull * 1000000000ull) /* one day */
struct wire_schedule_start {
	uint32_t handle;
	uint32_t flags;                /* WIRE_SCHEDULE_* */
	uint64_t period_ns;
	uint16_t major;
	uint16_t minor;
	uint32_t capacity;
};
#define WIRE_SCHEDULE_START_SIZE 24u
struct wire_schedule_started {
	uint32_t id;
	uint32_t ring_instance;
};
#define WIRE_SCHEDULE_STARTED_SIZE 8u

/* Encoders write the payload only (callers place it after the header and call
 * wire_frame_finish). Decoders check the exact length; -EBADMSG otherwise, -EINVAL for fields
 * whose values are out of range (unknown batch kinds and flags, counts over the limits). */
void wire_put_hello_request(struct wire_writer *writer, const struct wire_hello_request *message);
int wire_get_hello_request(const void *payload, size_t length, struct wire_hello_request *out);
void wire_put_hello_reply(struct wire_writer *writer, const struct wire_hello_reply *message);
int wire_get_hello_reply(const void *payload, size_t length, struct wire_hello_reply *out);

void wire_put_machine_info(struct wire_writer *writer, const struct wire_machine_info *message);
int wire_get_machine_info(const void *payload, size_t length, struct wire_machine_info *out);

void wire_put_read_request(struct wire_writer *writer, const struct wire_read_request *message);
int wire_get_read_request(const void *payload, size_t length, struct wire_read_request *out);
int wire_get_read_reply(const void *payload, size_t length, uint64_t *value);

void wire_put_write_request(struct wire_writer *writer, const struct wire_write_request *message);
int wire_get_write_request(const void *payload, size_t length, struct wire_write_request *out);

/* A batch request is the header (count, flags 0) then count ops; the reply the header then count
 * results. wire_get_batch_count checks the header and that the length is exactly right for the
 * count (-EBADMSG), and count in [1, max_ops] (-EINVAL); the per-element getters then read inside
 * the payload. wire_get_batch_op is -EINVAL when the op's flags or reserved word are not zero. */
void wire_put_batch_header(struct wire_writer *writer, uint32_t count);
void wire_put_batch_op(struct wire_writer *writer, const struct wire_batch_op *op);
void wire_put_batch_result(struct wire_writer *writer, const struct wire_batch_result *result);
int wire_get_batch_count(const void *payload, size_t length, size_t element_size,
			 uint32_t max_ops, uint32_t *count);
int wire_get_batch_op(const void *payload, uint32_t index, struct wire_batch_op *out);
void wire_get_batch_result(const void *payload, uint32_t index, struct wire_batch_result *out);

void wire_put_ring_create(struct wire_writer *writer, const struct wire_ring_create *message);
int wire_get_ring_create(const void *payload, size_t length, struct wire_ring_create *out);
void wire_put_ring_entry(struct wire_writer *writer, const struct wire_ring_entry *entry);
int wire_get_ring_entry(const void *payload, size_t length, struct wire_ring_entry *out);
void wire_put_ring_key(struct wire_writer *writer, const struct wire_ring_key *key);
int wire_get_ring_key(const void *payload, size_t length, struct wire_ring_key *out);
/* RING_LIST reply: header then count entries; checks the exact length for the count. */
int wire_get_ring_list(const void *payload, size_t length, uint32_t *count, uint32_t *flags);
void wire_get_ring_list_entry(const void *payload, uint32_t index, struct wire_ring_entry *out);

int wire_get_u64_payload(const void *payload, size_t length, uint64_t *value);

void wire_put_slot_alloc(struct wire_writer *writer, const struct wire_slot_alloc *message);
int wire_get_slot_alloc(const void *payload, size_t length, struct wire_slot_alloc *out);
void wire_put_slot(struct wire_writer *writer, const struct wire_slot *message);
int wire_get_slot(const void *payload, size_t length, struct wire_slot *out);
void wire_put_slot_program(struct wire_writer *writer, const struct wire_slot_program *message);
int wire_get_slot_program(const void *payload, size_t length, struct wire_slot_program *out);
/* -EINVAL for a count of 0 or over WIRE_MAX_SLOT_IDS, or a non-zero reserved field. */
void wire_put_slot_ids(struct wire_writer *writer, const struct wire_slot_ids *message);
/* The same request from the caller's own array of ids (count capped at WIRE_MAX_SLOT_IDS), for
 * clients that should not copy up to 1 KiB of ids into a struct wire_slot_ids first. */
void wire_put_slot_id_list(struct wire_writer *writer, uint16_t action, const uint32_t *ids,
			   uint32_t count);
int wire_get_slot_ids(const void *payload, size_t length, struct wire_slot_ids *out);
/* SLOT_READ reply: header then count values; checks the exact length for `count`. */
void wire_put_slot_values(struct wire_writer *writer, const uint64_t *values, uint32_t count);
int wire_get_slot_values(const void *payload, size_t length, uint64_t *values, uint32_t count);

void wire_put_energy_reading(struct wire_writer *writer, uint64_t raw, uint64_t total);
int wire_get_energy_reading(const void *payload, size_t length, uint64_t *raw, uint64_t *total);
void wire_put_energy_read_request(struct wire_writer *writer,
				  const struct wire_energy_read_request *message);
int wire_get_energy_read_request(const void *payload, size_t length,
				 struct wire_energy_read_request *out);
void wire_put_energy_page_request(struct wire_writer *writer,
				  const struct wire_energy_page_request *message);
int wire_get_energy_page_request(const void *payload, size_t length,
				 struct wire_energy_page_request *out);
void wire_put_energy_page(struct wire_writer *writer, const struct wire_energy_page *message);
/* -EINVAL for unknown flags or a non-zero reserved word. */
int wire_get_energy_page(const void *payload, size_t length, struct wire_energy_page *out);
void wire_put_energy_grant_request(struct wire_writer *writer,
				   const struct wire_energy_grant_request *message);
int wire_get_energy_grant_request(const void *payload, size_t length,
				  struct wire_energy_grant_request *out);
void wire_put_energy_grant(struct wire_writer *writer, const struct wire_energy_grant *message);
int wire_get_energy_grant(const void *payload, size_t length, struct wire_energy_grant *out);

int wire_get_u32_payload(const void *payload, size_t length, uint32_t *value);
void wire_put_batch_run(struct wire_writer *writer, uint32_t handle, uint32_t count);
int wire_get_batch_run(const void *payload, size_t length, uint32_t *handle, uint32_t *count);
void wire_put_schedule_start(struct wire_writer *writer, const struct wire_schedule_start *message);
/* -EINVAL for unknown flags, -ERANGE for a period outside [WIRE_SCHEDULE_MIN_PERIOD_NS,
 * WIRE_SCHEDULE_MAX_PERIOD_NS]. */
int wire_get_schedule_start(const void *payload, size_t length, struct wire_schedule_start *out);
void wire_put_schedule_started(struct wire_writer *writer,
			       const struct wire_schedule_started *message);
int wire_get_schedule_started(const void *payload, size_t length,
			      struct wire_schedule_started *out);

#endif
