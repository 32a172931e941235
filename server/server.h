/*
 * server/server.h — msrd's private state, shared by its files (not a public interface).
 *
 * One thread, one io_uring. Files, one concern each (the OpenBSD daemon habit):
 *   msrd.c      main(): options, start-up order, privilege drop, shutdown
 *   lifecycle.c loading and reloading the policy, the start of a shutdown
 *   options.c   command line
 *   loop.c      the io_uring: SQE helpers, provided buffers, CQE dispatch, signals, tick timer
 *   listener.c  the listening socket; accepting clients and learning who they are
 *   client.c    per-client input framing, output queue, limits, timeouts, close
 *   dispatch.c  protocol handling: one handler per op
 *   msr_exec.c  MSR requests: policy check, write-mask check, sync or io_uring execution
 *   ringdir.c   the ring directory
 *   msrstate.c  original values of every MSR msrd wrote, restored at exit
 *   journal.c   the same on disk before each first write, written back after a crash
 *   privilege.c capabilities and resource limits
 *   slots.c     counter slots: who holds which PMC / fixed counter, save and restore, guard
 *   slot_requests.c the SLOT_* requests on top of slots.c
 *   energy.c    64-bit energy totals: wrap-safe sampling, coarse (rate/resolution) grants
 *   energy_page.c the energy pages: totals published in shared memory while clients hold them
 *   handles.c   registered (validated once) batches
 *   schedule.c  registered batches run every period into a ring
 *   accounts.c  what each uid holds, against the per-uid limits
 * Registers are reached through the backend layer below msrd (backend/backend.h): msrd never
 * holds a device descriptor.
 */
#ifndef HAECER_SERVER_SERVER_H
#define HAECER_SERVER_SERVER_H

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

#define MSRD_VERSION "msrd " HAECER_VERSION " (protocol 1)"
#define MSRD_DEFAULT_SOCKET "/run/haecer/msrd.sock"
#define MSRD_DEFAULT_POLICY "/etc/haecer/policy.yaml"
#define MSRD_DEFAULT_STATE_DIR "/run/haecer"

/* ---- configuration (options.c) ---- */

enum msrd_action {
	MSRD_RUN = 0,
	MSRD_HELP,
	MSRD_VERSION_ACTION,
	MSRD_CHECK_POLICY,
	MSRD_IMPORT_ALLOWLIST,
	MSRD_LIST_SIM_MODELS,
	MSRD_PROBE,
};

enum msrd_seccomp {
	MSRD_SECCOMP_ENFORCE = 0,      /* unexpected system calls fail with EPERM and are logged */
	MSRD_SECCOMP_LOG,              /* allowed, but the kernel logs them (audit) */
	MSRD_SECCOMP_OFF,
};

struct msrd_config {
	enum msrd_action action;
	const char *socket_path;
	const char *policy_path;
	const char *action_file;       /* --check-policy / --import-allowlist argument */
	const char *for_group;
	const char *ring_majors;       /* --ring-majors, for --import-allowlist */
	bool strict;                   /* --strict: --check-policy fails on warnings */
	struct backend_options backend;
	enum log_level log_level;
	bool foreground;
	bool perf_broker;              /* --perf-broker: PERF_OPEN beside a register backend */
	bool insecure_policy_permissions;
	unsigned socket_mode;
	const char *socket_group;
	const char *socket_owner;
	const char *state_dir;         /* the journal's directory */
	const char *user;              /* --user: run as this user after start-up; NULL stays */
	enum msrd_seccomp seccomp;
	int ready_fd;                  /* -1 none */
	unsigned ring_grace_ms;        /* an orphaned ring without consumers lives this long */
	unsigned frame_timeout_ms;     /* a started frame must complete within this */
	unsigned client_timeout_ms;    /* a reply that cannot be sent for this long drops the client */
	unsigned max_clients;
	unsigned max_rings_per_client;
	uint64_t ring_memory_max;      /* bytes of ring memory over all rings */
	unsigned max_clients_per_uid;  /* the per-uid limits (accounts.c) */
	unsigned max_rings_per_uid;
	uint64_t ring_memory_per_uid;  /* bytes */
	unsigned max_handles_per_uid;
	unsigned max_schedules_per_uid;
	unsigned recv_buffers;         /* most shared receive buffers of LOOP_BUFFER_SIZE bytes */
	unsigned refusal_log_burst;    /* refusal lines per connection per 5 s (4x per uid); 0 all */
};

/* Parse argv. Returns 0, or -EINVAL after printing "msrd: ..." to stderr (exit 2). */
int options_parse(int argc, char **argv, struct msrd_config *config);
void options_usage(FILE *out);

/* ---- the io_uring loop (loop.c) ---- */

/* What a completion belongs to: the low 4 bits of user_data (objects are 16-byte aligned),
 * an op index in bits 48..63 for MSR I/O. */
enum loop_tag {
	TAG_IGNORE = 0,   /* cancellations, timeout removals */
	TAG_ACCEPT = 1,
	TAG_SIGNAL = 2,
	TAG_TICK = 3,
	TAG_RECV = 4,
	TAG_SEND = 5,
	TAG_MSR_CHECK = 6,
	TAG_MSR_RUN = 7,
	TAG_ENERGY = 8,   /* the energy sampler's timeout */
	TAG_SCHEDULE = 9, /* a schedule's period timeout */
	TAG_ENERGY_PAGE = 10, /* the energy pages' sampling timeout */
	TAG_ENERGY_EDGE = 11, /* the precise edges' window timeout */
};

#define LOOP_BUFFER_GROUP 1
#define LOOP_BUFFER_COUNT 16384u    /* default most; a power of two */
#define LOOP_BUFFER_START 512u      /* buffers at start; doubled while clients exhaust them */
#define LOOP_BUFFER_SIZE 2048u
#define LOOP_SQ_ENTRIES 2048u       /* >= WIRE_MAX_BATCH_OPS: a linked batch fits one submit */
#define LOOP_CQ_ENTRIES 16384u
#define LOOP_TICK_MS 100u
/* How long a turn waits for something besides its quiet sends' completions before it looks at
 * them alone (a send that went out only in part, or one the client is too slow to take: then
 * other clients' work can wait this long, once). Measured on kernel 6.18: a limit of 200 us or
 * 1 ms made a same-CPU round trip 2.5 times slower (21.5 against 8.6 us), 5 ms and 20 ms did
 * not. */
#define LOOP_QUIET_SEND_NS 5000000u

struct loop {
	struct io_uring ring;
	struct io_uring_buf_ring *buffers;
	uint8_t *buffer_memory;
	size_t buffer_ring_bytes;
	unsigned buffer_count;         /* provided receive buffers now in the ring */
	size_t buffer_memory_bytes;    /* reserved for --recv-buffers buffers */
	unsigned buffer_max;           /* the ring's entries (--recv-buffers, or fewer when
					* RLIMIT_MEMLOCK holds it), a power of two */
	bool buffers_registered;
	bool buffers_exhausted;        /* a receive found none this turn: add more */
	/* Sends queued this turn whose completion leads to no further work (a client's whole
	 * output, nothing waiting behind it): the next io_uring_enter submits them and waits for
	 * their completions and one more, so a request costs one enter, not two. */
	unsigned quiet_sends;
};

uint64_t loop_user_data(const void *object, enum loop_tag tag, uint32_t index);
enum loop_tag loop_tag_of(uint64_t user_data);
void *loop_object_of(uint64_t user_data);
uint32_t loop_index_of(uint64_t user_data);

/* An SQE; submits pending ones first when the queue is full, so it never returns NULL. */
struct io_uring_sqe *loop_sqe(struct loop *loop);
/* A completion is waiting for the loop (posted, or still deferred to the next enter): a
 * busy-wait asks this to give way. */
bool loop_work_waiting(struct loop *loop);
/* Make sure `count` SQEs fit without an intermediate submit (for linked chains). */
void loop_reserve(struct loop *loop, unsigned count);
/* Give provided buffer `id` back to the kernel. */
void loop_recycle_buffer(struct loop *loop, uint16_t id);
/* A receive found every buffer in use: the turn's end adds as many again (up to buffer_max). */
void loop_buffers_exhausted(struct loop *loop);
const uint8_t *loop_buffer(const struct loop *loop, uint16_t id);

/* Monotonic time in ns. */
uint64_t msrd_now_ns(void);

/* ---- clients (client.c) ---- */

struct msrd;
struct msr_job;
struct ring_entry;
struct slot;
struct registered_batch;
struct energy_coarse;
struct energy_coarse_stream;
struct uid_account;
struct msrd_energy_page;

/* A page a client holds, and the sampling rate it asked for. */
struct energy_page_hold {
	struct msrd_energy_page *page;
	uint32_t rate_hz;
	bool precise;                  /* asked for precise edges, and granted (a fine page) */
};
#define CLIENT_MAX_ENERGY_PAGES 8u

struct output_buffer {
	uint8_t *data;
	uint32_t used;
	uint32_t capacity;
};

struct fd_mark {
	uint64_t offset;   /* absolute position in the reply stream */
	int fd;
};

struct ring_ref {
	struct ring_entry *entry;
	bool producer;
};

#define CLIENT_FD_MARKS 4u
#define CLIENT_MAX_IN_FLIGHT 64u          /* queued replies before the server stops reading */
#define CLIENT_PAUSE_BYTES (64u * 1024u)  /* queued reply bytes before it stops reading */
#define CLIENT_MAX_QUEUED (512u * 1024u)  /* queued reply bytes that drop the client */
#define CLIENT_MAX_INPUT (2u * WIRE_MAX_FRAME)
#define CLIENT_MAX_SLOTS 256u             /* counter slots one connection may hold */
#define CLIENT_MAX_HANDLES 64u            /* registered batches per connection */

struct client {
	struct client *prev;
	struct client *next;
	struct client *next_dirty;     /* on server->dirty: has replies to start sending */
	struct client *next_rearm;     /* on server->rearm: recv waits for buffers */
	struct client *next_lock_waiter; /* on server->lock_waiters */
	struct client *prev_timed;     /* on server->timed: a deadline may be pending */
	struct client *next_timed;
	struct msrd *server;
	struct uid_account *account;   /* its uid's; NULL once it is retired */
	int fd;
	uint32_t number;               /* connection number, for logs */
	pid_t pid;
	bool followed;                 /* the simulated CPU follows its load (sim_follow.c) */
	uid_t uid;
	gid_t gid;
	uint32_t group_count;
	gid_t *groups;
	struct policy_grant *grant;
	uint64_t grant_generation;     /* policy_generation of the grant: a registered batch
					* handle (later work) made under an older one is STALE */

	uint8_t *input;                /* bytes received but not yet handled (partial frames) */
	uint32_t input_used;
	uint32_t input_capacity;

	struct output_buffer sending;  /* owned by the send in flight */
	uint32_t sending_offset;
	struct output_buffer pending;  /* replies queued behind it */
	uint64_t stream_queued;        /* bytes ever queued */
	uint64_t stream_sent;          /* bytes ever sent */
	struct fd_mark fd_marks[CLIENT_FD_MARKS];
	uint8_t fd_mark_count;
	uint16_t replies_sending;
	uint16_t replies_pending;
	struct fd_send *fd_send;       /* msghdr of a sendmsg in flight */

	uint32_t sqes_in_flight;
	struct msr_job *job;           /* request executing asynchronously; input waits behind it */

	struct ring_ref *rings;
	uint16_t ring_count;
	uint16_t ring_capacity;

	struct slot *slots;            /* counter slots held, newest first */
	uint32_t slot_count;
	uint32_t next_slot_id;
	struct registered_batch **handles;  /* indexed by handle - 1; NULL entries are free */
	uint32_t handle_capacity;
	uint32_t handle_count;
	uint32_t *stale_slots;         /* ids of slots a policy reload released (ESTALE) */
	uint32_t stale_slot_count;
	struct energy_page_hold page_holds[CLIENT_MAX_ENERGY_PAGES];
	uint32_t page_hold_count;
	struct client *prev_holder;    /* on energy.holders while page_hold_count > 0 */
	struct client *next_holder;
	uint32_t perf_open;            /* perf events handed out (ACCOUNT_PERF_EVENTS) */
	/* Precise edges run for this client's holds only within EDGE_LEASE_NS of its last request
	 * (energy_page.c): a program that measured once and goes on without msrd must not leave
	 * msrd spinning on the package it measures. */
	uint64_t last_request_ns;      /* CLOCK_MONOTONIC_RAW of its latest request */
	bool edges_leased;             /* its precise holds are in energy.edge_wanted now */

	uint64_t frame_started_ns;     /* a partial frame is pending since; 0 none */
	uint64_t send_started_ns;      /* the send in flight started; 0 none */

	bool recv_armed;
	bool recv_cancelling;
	bool recv_rearm;               /* re-arm after ENOBUFS, once buffers are back */
	bool send_armed;
	bool dirty;
	bool draining;                 /* an ERROR frame is queued: close once it is sent */
	bool peer_closed;              /* it shut its sending side: answer, then close */
	bool lock_waiting;             /* its next frame waits for the write lock (msr_exec.c) */
	bool refusal_logged;           /* the current request's refusal has its log line */
	struct log_ratelimit refusals; /* its refusal log lines (the uid's limit applies too) */
	bool closing;                  /* disconnected; retired when the last SQE completes, freed
					* at the end of that loop turn */
	bool linked_send;              /* its send in flight is linked behind a device read: a
					* failed read cancels it, and its reply is then dropped */
	bool timed;                    /* on server->timed */
} __attribute__((aligned(16)));

int client_accept(struct msrd *server, int fd);
void client_on_recv(struct client *client, const struct io_uring_cqe *cqe);
void client_on_send(struct client *client, const struct io_uring_cqe *cqe);
/* Continue with queued input (after an asynchronous request finished). */
void client_resume(struct client *client);
/* Start sending queued replies (called once per loop turn for clients marked dirty). */
void client_flush(struct client *client);
void client_rearm_recv(struct client *client);
/* Whether a reply could be sent at once, with nothing queued or in flight before it and no
 * input waiting behind the request (what a read linked to its reply's send needs). */
bool client_idle_output(const struct client *client);
/* A reply sent as the second SQE of a chain (only when client_idle_output()): queue the frame
 * (`length` bytes at `frame`) and get the address it will be sent from (NULL when the client is
 * being dropped); the caller then prepares the chain's first SQE (IOSQE_IO_LINK) and calls
 * client_send_linked right after, with room for both reserved (loop_reserve). */
uint8_t *client_queue_linked(struct client *client, const uint8_t *frame, size_t length);
void client_send_linked(struct client *client);

/* Reserve room for a reply frame of at most `max_length` bytes (header included) at the end of
 * the pending output; NULL when the queue is over its hard limit (the client is then closed). */
uint8_t *client_reply_space(struct client *client, size_t max_length);
/* Commit the frame written into that space; `fd` (or -1) is sent with it and closed after. */
void client_reply_commit(struct client *client, size_t frame_length, int fd);
/* Convenience: an error reply with a detail text; logged as a refusal ("refused: uid ... op
 * ...: detail") unless the handler logged one for this request already. */
void client_reply_error(struct client *client, uint16_t op, uint32_t request_id, uint16_t status,
			const char *format, ...) __attribute__((format(printf, 5, 6)));
/* Queue an ERROR frame and close the connection once it is sent. */
void client_fail(struct client *client, uint32_t request_id, uint16_t status, const char *detail);
/* Disconnect now; the reason goes to the log. */
void client_close(struct client *client, const char *reason);
void client_sqe_done(struct client *client);
/* Free the clients retired during this loop turn (called once the turn's completions, and the
 * dirty and rearm lists that may name them, are done). */
void client_free_retired(struct msrd *server);
/* Periodic checks: partial-frame and stalled-send timeouts of the clients that set a deadline
 * since the last tick (server->timed), never of every client. True when one still needs the
 * tick. */
bool clients_check_timeouts(struct msrd *server, uint64_t now_ns);
int client_add_ring(struct client *client, struct ring_entry *entry, bool producer);

/* ---- protocol handling (dispatch.c) ---- */

/* Handle one complete, header-validated frame. */
void dispatch_frame(struct client *client, const struct wire_header *header,
		    const uint8_t *payload, size_t length);
/* Log one refusal line: uid, pid, op, cpu, address, reason. (An error reply whose refusal was
 * not logged this way is logged by client_reply_error, so every refusal is one line.) */
/* Whether this refusal of the client may have its log line: at most a burst per client and per
 * uid in each interval (printk_ratelimit), so a flood of denied requests cannot fill the disk
 * or make the log drop the refusals that matter. What is held back is counted per uid and
 * summed up in one line ("N more refusals of uid U suppressed") when the uid's next line is
 * let through or one of its connections closes. */
bool client_refusal_loggable(struct client *client);

void dispatch_log_refusal(struct client *client, uint16_t op, uint32_t cpu, uint32_t address,
			  const char *reason);
/* A payload of the wrong shape: ERROR frame, then the connection closes. */
void dispatch_malformed(struct client *client, const struct wire_header *header, size_t length);
/* Reserve a reply with room for `payload_room` bytes of payload and a writer over it; NULL when
 * the client is being dropped. dispatch_reply_end finishes it as an OK reply (with fd or -1). */
uint8_t *dispatch_reply_begin(struct client *client, size_t payload_room,
			      struct wire_writer *writer);
void dispatch_reply_end(struct client *client, uint8_t *space, const struct wire_header *request,
			const struct wire_writer *writer, int fd);
void dispatch_reply_empty(struct client *client, const struct wire_header *request);
/* Decode a BATCH-shaped payload into server->scratch and scratch_kinds (unknown kinds and bad
 * flags become op statuses that refuse it). A malformed or out-of-range one is answered here and
 * returns < 0. */
int dispatch_decode_batch(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length, uint32_t *count);

/* ---- MSR requests (msr_exec.c) ---- */

/* One request of MSR ops: READ, WRITE, ENERGY_READ (one op), BATCH or BATCH_RUN. */
struct msr_request {
	uint16_t op;
	uint32_t request_id;
	struct msr_op *ops;            /* decoded; count >= 1 */
	uint8_t *kinds;                /* enum wire_batch_kind per op */
	uint32_t count;
	bool validated;                /* a registered batch: its grants were checked already */
};

/* The first refusal of a request, for the client's detail text and the log line. */
struct refusal {
	uint32_t index;
	char reason[128];
};

/* Run a request: policy check (unless validated), slot ids resolved to their counters, write-mask
 * and slot-ownership checks against current values, then execution synchronously or through
 * io_uring, then energy totals and coarse grants applied to the readings. The reply is queued
 * when done (now or later); while it runs, client->job is set. The arrays are copied when the
 * request outlives the call. */
void msr_exec_request(struct client *client, const struct msr_request *request);
void msr_exec_on_completion(struct msrd *server, const struct io_uring_cqe *cqe);
/* Step 1 alone (what BATCH_REGISTER validates): kinds, CPUs, policy grants, slot ids held,
 * energy registers known. Returns how many ops were refused; each refused op has its status. */
uint32_t msr_exec_check(const struct client *client, struct msr_op *ops, const uint8_t *kinds,
			uint32_t count, bool validated, struct refusal *refusal);
/* Step 2 alone: each write against `current` (the register's value, or current_status < 0 when
 * it could not be read) or the value an earlier write of the same batch leaves; the write mask
 * and counter slots other connections hold. Returns how many writes were refused. Like
 * msr_exec_check it touches no register and needs no loop (fuzz/fuzz_batch.c calls both). */
uint32_t msr_exec_check_writes(const struct client *client, struct msr_op *ops, uint32_t count,
			       const uint64_t *current, const int32_t *current_status,
			       struct refusal *refusal);
/* Decode a BATCH-shaped payload into ops and kinds: -EBADMSG for the wrong shape, -EINVAL for a
 * count out of 1..WIRE_MAX_BATCH_OPS or header flags; an op of unknown kind carries
 * -EOPNOTSUPP and one with non-zero flags -EINVAL as its status (they refuse the request). */
int msr_exec_decode_batch(const uint8_t *payload, size_t length, struct msr_op *ops,
			  uint8_t *kinds, uint32_t *count);
/* The write lock: while an asynchronous write batch (msr backend) is between reading the
 * values its writes are checked against and running them, nothing else may write registers.
 * Frames that may write synchronously (WRITE, SLOT_*, BATCH or BATCH_RUN with writes) wait:
 * msr_exec_must_wait says whether this frame must, msr_exec_wait_for_lock queues its client
 * (which handles no frame until woken, in order, when the lock is free). */
bool msr_exec_write_locked(const struct msrd *server);
bool msr_exec_must_wait(struct client *client, const struct wire_header *header,
			const uint8_t *payload, size_t length);
void msr_exec_wait_for_lock(struct client *client);
/* Refuse a request whose ops carry their statuses: log line, and the reply (BATCH-shaped for
 * BATCH and BATCH_RUN, a text naming the first refused op otherwise). */
void msr_exec_reply_refused(struct client *client, uint16_t op, uint32_t request_id,
			    const struct msr_op *ops, uint32_t count, uint32_t refused,
			    const struct refusal *refusal);

/* ---- ring directory (ringdir.c) ---- */

/* What a counter of a ring msrd produces (a schedule's) reads, so that opening the ring can be
 * held to the opener's own grant: a monitor must be allowed to read the register, at least as
 * coarsely as the schedule read it. */
struct ring_reading {
	uint32_t address;
	bool coarse;
	struct policy_energy_limit limit;
};

struct ring_entry {
	uint16_t major;
	uint16_t minor;
	uint32_t instance;
	int fd;                        /* read-write memfd, kept by the server */
	uint32_t capacity;
	int32_t producer_pid;
	uint64_t bytes;
	struct uid_account *account;   /* charged for `bytes` until the entry is dropped */
	uid_t owner_uid;               /* its creator (a schedule's owner for msrd's rings) */
	int32_t owner_pid;
	struct client *producer;       /* NULL once the producer disconnected (or msrd produces) */
	bool scheduled;                /* msrd produces it for a running schedule */
	struct ring_reading *readings; /* msrd-produced rings: per counter; NULL otherwise */
	uint32_t reading_count;
	uint32_t consumers;            /* references held by connected clients that opened it */
	uint64_t orphaned_ns;          /* producer gone (or schedule stopped) since; 0 otherwise */
	bool dropped;                  /* out of the directory, memory given back; kept only for
					* the consumers that still reference it */
	struct ring_entry *next_dropped;
};

struct ringdir {
	struct ring_entry **entries;   /* sorted by (major, minor, instance) */
	struct ring_entry *dropped;    /* dropped entries connected consumers still reference */
	size_t count;
	size_t capacity;
	uint32_t next_instance;
	uint64_t total_bytes;
	uint64_t max_bytes;
	uint64_t grace_ns;
	struct accounts *accounts;
};

void ringdir_init(struct ringdir *dir, uint64_t max_bytes, uint64_t grace_ns,
		  struct accounts *accounts);
void ringdir_free(struct ringdir *dir);
/* Create and register a ring, its memory charged to `account`; *fd_out is a new read-write
 * descriptor for the producer. A NULL producer means msrd produces it for a schedule (until
 * ringdir_release_scheduled). -ENOSPC when all ring memory is taken, -EDQUOT when the
 * account's share is. */
int ringdir_create(struct ringdir *dir, struct client *producer, struct uid_account *account,
		   int32_t producer_pid, const struct wire_ring_create *request,
		   struct ring_entry **out, int *fd_out);
/* Find (major, minor, instance), instance 0 = newest; a new read-only fd for a consumer. */
int ringdir_find(struct ringdir *dir, uint16_t major, uint16_t minor, uint32_t instance,
		 struct ring_entry **out);
int ringdir_open(struct ringdir *dir, struct ring_entry *entry, int *fd_out);
/* Index of the first entry whose key is >= (major, minor, instance). */
size_t ringdir_lower_bound(const struct ringdir *dir, uint16_t major, uint16_t minor,
			   uint32_t instance);
/* A client dropped its reference (disconnect). */
void ringdir_release(struct ringdir *dir, struct ring_entry *entry, bool producer, uint64_t now_ns);
/* The schedule producing a ring stopped. */
void ringdir_release_scheduled(struct ringdir *dir, struct ring_entry *entry, uint64_t now_ns);
/* Remove orphans whose grace period has passed; true while some orphan is still waiting. */
bool ringdir_expire(struct ringdir *dir, uint64_t now_ns);
void ringdir_entry_to_wire(const struct ring_entry *entry, struct wire_ring_entry *out);

/* ---- counter slots (slots.c) ---- */

struct slot {
	struct slot *next;             /* the owner's list, or server->slot_releases */
	struct client *owner;          /* NULL once released (a deferred release waits) */
	uint32_t owner_number;         /* the owner's connection number, uid and pid, for logs */
	uid_t owner_uid;
	pid_t owner_pid;
	const char *release_why;       /* a deferred release's reason (a string constant) */
	uint32_t id;                   /* per connection, from 1 */
	uint32_t cpu;
	uint16_t kind;                 /* WIRE_SLOT_* */
	uint16_t index;
	uint64_t config;               /* programmed selection, EN excluded (fixed: 4-bit field) */
	bool enabled;
	bool lost;                     /* reprogrammed outside msrd: never read or restored again */
	bool written_raw;              /* its holder wrote its registers with plain writes */
	bool count_lost;               /* its counter went back behind msrd's back (zeroed) */
	uint64_t seen_value;           /* msrd's latest read or write of the counter, */
	uint64_t seen_ns;              /* and when (energy_now_ns) */
	uint64_t saved_counter;        /* what the registers held before the slot was taken */
	uint64_t saved_control;        /* event select, or the fixed counter's 4-bit field */
	bool saved_global_bit;
};

struct slot_table {
	bool amd;                      /* PERF_CTL/PERF_CTR pairs, no global control */
	bool has_global;               /* a global enable register gates counting: */
	uint32_t global_address;       /* IA32_PERF_GLOBAL_CTRL (Intel perfmon v2 and later) or
					* PerfCntrGlobalCtl (AMD PerfMonV2), 0 for none */
	uint32_t cpu_count;
	uint32_t gp_count;
	uint32_t fixed_count;
	uint8_t gp_width;
	uint8_t fixed_width;
	struct slot **holders;         /* cpu_count x (gp_count + fixed_count); NULL = free */
};

/* The counters of the machine, from CPUID 0xA (Intel) or the family (AMD 17h and later: six
 * PERF_CTL/PERF_CTR pairs of 48 bits). */
int slots_init(struct slot_table *table, const struct machine_info *machine);
void slots_free(struct slot_table *table);
void slots_handle_alloc(struct client *client, const struct wire_header *header,
			const uint8_t *payload, size_t length);
void slots_handle_program(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length);
void slots_handle_control(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length);
void slots_handle_read(struct client *client, const struct wire_header *header,
		       const uint8_t *payload, size_t length);
void slots_handle_free(struct client *client, const struct wire_header *header,
		       const uint8_t *payload, size_t length);
/* Free every slot of a client that is going away, restoring the registers (at once, or once
 * the write lock is free: slots_run_deferred). */
void slots_release_client(struct client *client);
/* The releases that waited for the write lock (msr_exec.c calls it when the lock is free). */
void slots_run_deferred(struct msrd *server);
/* Free the memory of releases that never ran (exit). */
void slots_free_deferred(struct msrd *server);
/* After a reload: release (and restore) every slot whose registers its client's new grant does
 * not cover; their ids answer STALE from then on (until SLOT_FREE says so once). */
void slots_policy_reloaded(struct msrd *server);
/* Whether `id` is a slot of this client that a policy reload released. */
bool slots_is_stale(const struct client *client, uint32_t id);
/* The slot `id` of this client, or NULL. */
struct slot *slots_find(const struct client *client, uint32_t id);
uint32_t slots_counter_address(const struct msrd *server, const struct slot *slot);
/* Whether msrd's programming of a held slot is still in its registers (event select with EN as
 * msrd left it, or the fixed field; its global enable bit). Someone outside msrd (the kernel's
 * perf, the NMI watchdog) reprogrammed it: -EIDRM with `why`, logged once, and the slot is
 * lost for good: never read, driven or restored again. */
int slots_check_programming(struct msrd *server, struct slot *slot, char *why, size_t size);
/* A counter msrd read (`value`, masked to its width) or wrote: -EIDRM with `why` when it went
 * back by more than a wrap explains since msrd's previous look (hw/counter_wrap.h). */
int slots_check_continuity(struct msrd *server, struct slot *slot, uint64_t value, bool written,
			   char *why, size_t size);
/* Mask of a counter's width for the counter register at `address` (all ones when unknown). */
uint64_t slots_counter_mask(const struct msrd *server, uint32_t address);
/* -EBUSY when a write of `proposed` over `current` to (cpu, address) by `client` would touch a
 * counter slot another connection holds (any write to its own registers, a change of its bits
 * in the shared control registers); 0 otherwise. */
int slots_write_conflict(const struct msrd *server, const struct client *client, uint32_t cpu,
			 uint32_t address, uint64_t current, uint64_t proposed);

/* ---- energy totals (energy.c) ---- */

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
	uint64_t edge_samples;
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

/* ---- precise edges (energy_edges.c) ---- */

/* A precise holder's windows run only within this long of its last request (see the lease in
 * energy_edges.c's header). */
#define EDGE_LEASE_NS 150000000ull
/* The windows' CPU budget (policy energy_page.edge_cpu_percent*) is counted per second and
 * weighed against the holders every 10 ms. */
#define EDGE_BUDGET_NS 1000000000ull
#define EDGE_BUDGET_CHECK_NS 10000000ull

/* Turn window sampling on or off for the counters `wanted` marks (NULL: off). While on, msrd
 * reads each such register densely only in a short window around its predicted update (learnt
 * from its own samples), so the page's bracket of the last update is a few microseconds wide. */
void energy_edges_set(struct msrd *server, const bool *wanted);
void energy_edges_on_timeout(struct msrd *server, const struct io_uring_cqe *cqe);
/* A window opened this turn: the loop calls energy_edges_spin once the turn's completions are
 * consumed and its replies submitted. */
bool energy_edges_spin_due(const struct msrd *server);
void energy_edges_spin(struct msrd *server);
/* The sampler just saw `counter` change: where in its bracket the change lay (the page's placed
 * bracket): the bracket, narrowed around the learnt grid point when the grid is known well. */
void energy_edges_place(struct energy_counter *counter);

/* ---- energy pages (energy_page.c) ---- */

/* ENERGY_PAGE: a read-only page of one energy register's totals (every package, or core),
 * coarse when the client's grant is. */
void energy_pages_handle_request(struct client *client, const struct wire_header *header,
				 const uint8_t *payload, size_t length);
/* A request from the client: its precise holds' lease is renewed (the windows start again
 * when it had lapsed). */
void energy_pages_client_request(struct client *client);
/* A lease in the precise edges' set may have lapsed (now >= energy.edge_lease_lapse_ns):
 * compute the set again. */
void energy_pages_leases_check(struct msrd *server);
/* The client is going away: its holds are dropped (sampling stops with the last). */
void energy_pages_release_client(struct client *client);

/* ---- the perf_event broker (perf_requests.c) ---- */

/* Whether PERF_OPEN is served: --perf-broker, or --backend perf. */
bool perf_broker_enabled(const struct msrd *server);
void perf_requests_handle_open(struct client *client, const struct wire_header *header,
			       const uint8_t *payload, size_t length);
/* Its events count back to its uid's bound (the descriptors are the client's). */
void perf_requests_release_client(struct client *client);
/* After a reload: every page is marked STALE and forgotten; holders ask again under the new
 * policy (and are refused, or get a page as coarse as their new grant). */
void energy_pages_policy_reloaded(struct msrd *server);
void energy_pages_on_timeout(struct msrd *server, const struct io_uring_cqe *cqe);
/* Write the latest sample into every page (after energy_sample_all); _fine into fine pages
 * only (the precise edges' windows). */
void energy_pages_publish(struct msrd *server);
void energy_pages_publish_fine(struct msrd *server);
/* Coarse pages only: a round trip just took a new coarse value, which its setting's pages show
 * at once (so page and round trips never disagree). */
void energy_pages_publish_coarse(struct msrd *server);
/* The precise edges' windows took `ns` of CPU on energy counter `counter`: charged to the total
 * and to the uids whose holds want it; over a budget, their windows stop for the second. */
void energy_pages_charge_edges(struct msrd *server, struct energy_counter *counter, uint64_t ns);
/* The page sampling period while pages are held; 0 otherwise. */
uint64_t energy_pages_period_ns(const struct msrd *server);
/* At exit: every page is marked DEAD and unmapped. */
void energy_pages_free(struct msrd *server);

/* ---- registered batches (handles.c) ---- */

struct registered_batch {
	uint32_t handle;
	uint32_t count;
	uint64_t generation;           /* policy generation it was validated under */
	struct msr_op *ops;            /* as registered: slot reads still name slot ids */
	uint8_t *kinds;
};

void handles_handle_register(struct client *client, const struct wire_header *header,
			     const uint8_t *payload, size_t length);
void handles_handle_run(struct client *client, const struct wire_header *header,
			const uint8_t *payload, size_t length);
void handles_handle_release(struct client *client, const struct wire_header *header,
			    const uint8_t *payload, size_t length);
void handles_release_client(struct client *client);
/* The client's batch `handle`, or NULL. */
struct registered_batch *handles_find(const struct client *client, uint32_t handle);

/* ---- schedules (schedule.c) ---- */

struct schedule;

void schedule_handle_start(struct client *client, const struct wire_header *header,
			   const uint8_t *payload, size_t length);
void schedule_handle_stop(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length);
/* The owner is going away: stop its schedules, except persistent ones, which carry on. */
void schedule_release_client(struct client *client);
void schedule_on_timeout(struct msrd *server, const struct io_uring_cqe *cqe);
/* After a reload: stop every schedule the new policy does not allow its starter. */
void schedule_policy_reloaded(struct msrd *server);
/* Stop every schedule (SIGTERM). */
void schedule_stop_all(struct msrd *server, const char *why);
/* Free what is left after the loop ended. */
void schedule_free_all(struct msrd *server);

/* ---- original MSR values (msrstate.c) ---- */

struct msr_saved {
	uint32_t cpu;
	uint32_t address;
	uint64_t original;
	uint64_t touched;              /* bits msrd's writes changed (msrstate_touch) */
	bool bitwise;                  /* touched is known: shared registers go back by bit */
};

struct msrstate {
	struct msr_saved *entries;     /* sorted by (cpu, address) */
	size_t count;
	size_t capacity;
	bool intel_pmcs;               /* IA32_PMCx / IA32_A_PMCx aliases exist */
	bool amd_legacy;               /* AMD's legacy counter addresses alias PERF_CTL/CTRx */
	bool full_width_writes;        /* PERF_CAPABILITIES bit 13 */
	uint8_t pmc_width;
};

/* Empty, for this machine's register aliases. */
void msrstate_init(struct msrstate *state, const struct machine_info *machine);
/* Remember `original` for (cpu, address) unless a value is already remembered for that register
 * (under either of its addresses). */
int msrstate_remember(struct msrstate *state, uint32_t cpu, uint32_t address, uint64_t original);
/* Drop what is remembered for (cpu, address) or its alias: the register is not msrd's to
 * write back any more. */
void msrstate_forget(struct msrstate *state, uint32_t cpu, uint32_t address);
/* msrd is about to write `after` where `before` was: the bits it changes are msrd's to put
 * back, the others of a shared register (the global enables, the fixed counters' control) stay
 * whatever the kernel makes of them meanwhile. */
void msrstate_touch(struct msrstate *state, uint32_t cpu, uint32_t address, uint64_t before,
		    uint64_t after);
/* Whether a value is remembered for (cpu, address) or its alias. */
bool msrstate_has(const struct msrstate *state, uint32_t cpu, uint32_t address);
/* Write every remembered value back, in an order that leaves no counter counting msrd's events;
 * returns how many restores failed. Those are remembered in `unrestored` when it is not NULL
 * (SIZE_MAX: one could not be). */
size_t msrstate_restore(struct msrstate *state, struct msr_backend *backend,
			struct msrstate *unrestored);
void msrstate_free(struct msrstate *state);

/* ---- the journal of original values on disk (journal.c) ---- */

struct journal {
	int fd;                        /* -1: no journal (simulated CPU) */
	enum backend_kind backend;
	struct msrstate written;       /* registers whose original value is on disk */
	char root[PATH_MAX];           /* the device root it belongs to */
	char boot[40];                 /* the kernel's boot id, or "unknown" */
	/* Registers the journal named that could not be written back at start (a CPU offline or
	 * beyond the ones present now): still owed, so the fresh journal names them again and a
	 * clean stop keeps them for a later start. */
	struct msrstate carried;
	bool broken;                   /* a partial line could not be cut off: append nothing */
	char name[64];
	char path[PATH_MAX + 64];
};

/* Open (or create) the journal of this backend and device root under --state-dir, locked;
 * write back what a previous msrd left in it, and start it empty. Does nothing for the
 * simulated CPU. -EACCES for a directory or file others could write, -EBUSY when another msrd
 * holds it, -EINVAL when it belongs to another device; the reason is logged. */
int journal_open(struct msrd *server);
/* Before the first write of (cpu, address) since start: its original value `before` is on
 * disk when this returns 0. -EIO (logged) when it could not be recorded: the write must not
 * happen. */
int journal_note(struct msrd *server, uint32_t cpu, uint32_t address, uint64_t before);
/* Take a register back from the journal ("forget" line): a restart no longer writes its
 * original over it. For a counter slot reprogrammed outside msrd. 0 or -errno (logged). */
int journal_forget(struct msrd *server, uint32_t cpu, uint32_t address);
/* The same, reading the register's current value first (slot writes). */
int journal_note_current(struct msrd *server, uint32_t cpu, uint32_t address);
/* At exit: `restored` (every register msrd changed was written back) removes the journal; else
 * it is kept for the next start. */
void journal_close(struct msrd *server, bool restored);

/* ---- per-uid accounts (accounts.c) ---- */

enum account_resource {
	ACCOUNT_CONNECTIONS = 0,
	ACCOUNT_RINGS,                 /* ring references (created or opened) of its connections */
	ACCOUNT_RING_BYTES,            /* memory of the rings it created, until they are dropped */
	ACCOUNT_HANDLES,
	ACCOUNT_SCHEDULES,             /* running */
	ACCOUNT_PERF_EVENTS,           /* handed out by the perf broker; bound by the policy */
	ACCOUNT_RESOURCES,
};

#define ACCOUNT_BUCKETS 64u

struct uid_account {
	struct uid_account *next;      /* hash chain */
	uid_t uid;
	uint64_t used[ACCOUNT_RESOURCES];
	struct log_ratelimit refusals; /* refusal log lines of all its connections */
	uint64_t edge_cpu_ns;          /* precise-edge windows its holders caused this second */
	uint64_t edge_logged;          /* the budget second it was last logged over budget in */
};

struct accounts {
	struct uid_account *buckets[ACCOUNT_BUCKETS];
	uint64_t limits[ACCOUNT_RESOURCES];
};

void accounts_init(struct accounts *accounts, const struct msrd_config *config);
void accounts_free(struct accounts *accounts);
/* The account of `uid`, created empty when it has none; NULL without memory. */
struct uid_account *accounts_get(struct accounts *accounts, uid_t uid);
/* Count `amount` more of a resource against the uid's limit: 0, or -ENOSPC (nothing counted). */
int accounts_take(struct accounts *accounts, struct uid_account *account,
		  enum account_resource what, uint64_t amount);
/* Count it back; an account left holding nothing is freed (NULL is fine). */
void accounts_give_back(struct accounts *accounts, struct uid_account *account,
			enum account_resource what, uint64_t amount);
/* Free an account that holds nothing, e.g. after a refused first take (NULL is fine). */
void accounts_drop_unused(struct accounts *accounts, struct uid_account *account);
/* "uid 1000 holds 64 registered batches, its limit (--max-handles-per-uid)" for refusals. */
int accounts_describe_limit(const struct accounts *accounts, const struct uid_account *account,
			    enum account_resource what, char *text, size_t size);

/* ---- privilege (privilege.c) ---- */

#define PRIVILEGE_MAX_GROUPS 256

/* Who --user names: looked up before anything is dropped. */
struct privilege_user {
	char name[64];
	uid_t uid;
	gid_t gid;
	gid_t groups[PRIVILEGE_MAX_GROUPS];
	size_t group_count;
};

/* Raise the soft RLIMIT_NOFILE to the hard limit (1000s of clients need descriptors). */
void privilege_raise_fd_limit(void);
/* A user name (or a bare uid) with its groups; -ENOENT when unknown. */
int privilege_resolve_user(const char *name, struct privilege_user *out);
/* When running with capabilities: become `user` (may be NULL: stay), then keep only
 * CAP_SYS_RAWIO (permitted and effective) and drop every other capability from the bounding
 * set. Without privileges: nothing to do, but -EPERM when `user` is another user. */
/* keep_perfmon: also keep CAP_PERFMON and CAP_SYS_PTRACE (the perf broker opens events for
 * other uids' threads under any perf_event_paranoid). */
int privilege_drop(const struct privilege_user *user, bool keep_perfmon);
/* Install the system call filter (mode off: nothing). 0 or -errno (logged). */
int privilege_seccomp(enum msrd_seccomp mode);
/* Log the system calls the filter refused since the last call (the loop calls it each turn). */
void privilege_log_refused(void);

/* ---- the server ---- */

struct msrd {
	const struct msrd_config *config;
	struct loop loop;
	int listen_fd;
	int signal_fd;
	struct signalfd_siginfo signal_info;
	struct __kernel_timespec tick_interval;
	bool tick_armed;
	bool accept_armed;
	bool accept_rearm;             /* re-arm the accept at the next tick (after EMFILE) */

	struct policy *policy;
	uint64_t policy_generation;    /* counts successful SIGHUP reloads */
	struct msr_backend *backend;
	struct machine_info machine;
	uint8_t *machine_reply;        /* MACHINE_INFO payload, encoded once */
	size_t machine_reply_length;

	struct client *clients;        /* doubly linked */
	struct client *timed;          /* clients that may have a deadline (doubly linked): the
					* tick looks at these only */
	struct client *dirty;          /* clients with replies to start sending */
	struct client *rearm;          /* clients whose recv waits for buffers (ENOBUFS) */
	struct client *dead;           /* retired this turn, freed at its end (via ->next) */
	struct client *lock_waiters;   /* FIFO of clients whose next frame waits for the write */
	struct client *lock_waiters_tail; /* lock (msr_exec.c) */
	uint32_t client_count;
	uint32_t next_client_number;

	struct accounts accounts;
	struct ringdir rings;
	struct msrstate saved;
	struct journal journal;
	bool restore_incomplete;       /* a register could not be written back (slots.c) */
	struct slot_table slots;
	struct energy_state energy;
	struct schedule *schedules;    /* running and stopping schedules */
	uint32_t next_schedule_id;

	struct slot *slot_releases;    /* slot releases waiting for the write lock */
	struct msr_job *write_owner;   /* asynchronous write batch between check and run */
	struct msr_job *write_waiting; /* FIFO of write batches waiting for it */
	struct msr_job *write_waiting_tail;

	bool stopping;                 /* SIGTERM: no new work, close clients, then exit */
	bool done;
	struct msr_op scratch[WIRE_MAX_BATCH_OPS];         /* decoded ops of one request */
	uint8_t scratch_kinds[WIRE_MAX_BATCH_OPS];
	uint64_t scratch_totals[WIRE_MAX_BATCH_OPS];      /* energy totals of a request's reads */
	uint64_t scratch_current[WIRE_MAX_BATCH_OPS];      /* synchronous write checks */
	int32_t scratch_current_status[WIRE_MAX_BATCH_OPS];
};

/* buffer_max: most receive buffers (a power of two); the loop starts with LOOP_BUFFER_START. */
int loop_init(struct loop *loop, unsigned buffer_max);
void loop_exit(struct loop *loop);
/* Run until server->done. 0 on a clean stop, -errno when the ring itself failed. */
int loop_run(struct msrd *server);
void loop_arm_accept(struct msrd *server);
void loop_want_tick(struct msrd *server);

int listener_open(const struct msrd_config *config);
void listener_on_accept(struct msrd *server, const struct io_uring_cqe *cqe);
/* SO_PEERCRED and SO_PEERGROUPS of a connected client; *groups is malloc'ed. */
int listener_identify(int fd, pid_t *pid, uid_t *uid, gid_t *gid, gid_t **groups,
		      uint32_t *group_count);

/* Load config->policy_path (refusing it when invalid or writable by others), warnings logged.
 * 0, or -errno with the reason logged. */
int msrd_load_policy(const struct msrd_config *config, struct policy **out);
/* Stop accepting, close every client; the loop ends when the last one is gone. */
void msrd_begin_shutdown(struct msrd *server, const char *why);
/* SIGHUP: load the policy again; keep the old one when the new one is invalid. */
void msrd_reload_policy(struct msrd *server);
/* Resolve the policy for a client's identity (at accept and after a reload). */
int msrd_resolve_grant(struct msrd *server, struct client *client, struct policy_grant **out);

#endif
