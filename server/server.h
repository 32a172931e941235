/*
 * server/server.h — msrd's private state, shared by its files (not a public interface).
 *
 * One thread, one io_uring. Files, one concern each (the OpenBSD daemon habit):
 *   msrd.c      main(): options, start-up order, privilege drop, shutdown
 *   options.c   command line
 *   loop.c      the io_uring: SQE helpers, provided buffers, CQE dispatch, signals, tick timer
 *   listener.c  the listening socket; accepting clients and learning who they are
 *   client.c    per-client input framing, output queue, limits, timeouts, close
 *   dispatch.c  protocol handling: one handler per op
 *   msr_exec.c  MSR requests: policy check, write-mask check, sync or io_uring execution
 *   ringdir.c   the ring directory
 *   msrstate.c  original values of every MSR msrd wrote, restored at exit
 *   privilege.c capabilities and resource limits
 */
#ifndef HAECER_SERVER_SERVER_H
#define HAECER_SERVER_SERVER_H

#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include "common/log.h"
#include "policy/policy.h"
#include "proto/wire.h"
#include "server/backend.h"

#define MSRD_VERSION "msrd 1.0 (protocol 1)"
#define MSRD_DEFAULT_SOCKET "/run/haecer/msrd.sock"
#define MSRD_DEFAULT_POLICY "/etc/haecer/policy.yaml"

/* ---- configuration (options.c) ---- */

enum msrd_action {
	MSRD_RUN = 0,
	MSRD_HELP,
	MSRD_VERSION_ACTION,
	MSRD_CHECK_POLICY,
	MSRD_IMPORT_ALLOWLIST,
	MSRD_LIST_SIM_MODELS,
};

struct msrd_config {
	enum msrd_action action;
	const char *socket_path;
	const char *policy_path;
	const char *action_file;       /* --check-policy / --import-allowlist argument */
	const char *for_group;
	struct backend_options backend;
	enum log_level log_level;
	bool foreground;
	bool insecure_policy_permissions;
	unsigned socket_mode;
	const char *socket_group;
	int ready_fd;                  /* -1 none */
	unsigned ring_grace_ms;        /* an orphaned ring without consumers lives this long */
	unsigned frame_timeout_ms;     /* a started frame must complete within this */
	unsigned client_timeout_ms;    /* a reply that cannot be sent for this long drops the client */
	unsigned max_clients;
	unsigned max_rings_per_client;
	uint64_t ring_memory_max;      /* bytes of ring memory over all rings */
	unsigned recv_buffers;         /* shared receive buffers of LOOP_BUFFER_SIZE bytes */
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
};

#define LOOP_BUFFER_GROUP 1
#define LOOP_BUFFER_COUNT 512u      /* default; a power of two */
#define LOOP_BUFFER_SIZE 2048u
#define LOOP_SQ_ENTRIES 2048u       /* >= WIRE_MAX_BATCH_OPS: a linked batch fits one submit */
#define LOOP_CQ_ENTRIES 16384u
#define LOOP_TICK_MS 100u

struct loop {
	struct io_uring ring;
	struct io_uring_buf_ring *buffers;
	uint8_t *buffer_memory;
	size_t buffer_ring_bytes;
	unsigned buffer_count;         /* provided receive buffers, a power of two */
	bool buffers_registered;
};

uint64_t loop_user_data(const void *object, enum loop_tag tag, uint32_t index);
enum loop_tag loop_tag_of(uint64_t user_data);
void *loop_object_of(uint64_t user_data);
uint32_t loop_index_of(uint64_t user_data);

/* An SQE; submits pending ones first when the queue is full, so it never returns NULL. */
struct io_uring_sqe *loop_sqe(struct loop *loop);
/* Make sure `count` SQEs fit without an intermediate submit (for linked chains). */
void loop_reserve(struct loop *loop, unsigned count);
/* Give provided buffer `id` back to the kernel. */
void loop_recycle_buffer(struct loop *loop, uint16_t id);
const uint8_t *loop_buffer(const struct loop *loop, uint16_t id);

/* Monotonic time in ns. */
uint64_t msrd_now_ns(void);

/* ---- clients (client.c) ---- */

struct msrd;
struct msr_job;
struct ring_entry;

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

struct client {
	struct client *prev;
	struct client *next;
	struct client *next_dirty;     /* on server->dirty: has replies to start sending */
	struct client *next_rearm;     /* on server->rearm: recv waits for buffers */
	struct msrd *server;
	int fd;
	uint32_t number;               /* connection number, for logs */
	pid_t pid;
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

	uint64_t frame_started_ns;     /* a partial frame is pending since; 0 none */
	uint64_t send_started_ns;      /* the send in flight started; 0 none */

	bool recv_armed;
	bool recv_cancelling;
	bool recv_rearm;               /* re-arm after ENOBUFS, once buffers are back */
	bool send_armed;
	bool dirty;
	bool draining;                 /* an ERROR frame is queued: close once it is sent */
	bool closing;                  /* disconnected; freed when the last SQE completes */
} __attribute__((aligned(16)));

int client_accept(struct msrd *server, int fd);
void client_on_recv(struct client *client, const struct io_uring_cqe *cqe);
void client_on_send(struct client *client, const struct io_uring_cqe *cqe);
/* Continue with queued input (after an asynchronous request finished). */
void client_resume(struct client *client);
/* Start sending queued replies (called once per loop turn for clients marked dirty). */
void client_flush(struct client *client);
void client_rearm_recv(struct client *client);

/* Reserve room for a reply frame of at most `max_length` bytes (header included) at the end of
 * the pending output; NULL when the queue is over its hard limit (the client is then closed). */
uint8_t *client_reply_space(struct client *client, size_t max_length);
/* Commit the frame written into that space; `fd` (or -1) is sent with it and closed after. */
void client_reply_commit(struct client *client, size_t frame_length, int fd);
/* Convenience: an error reply with a detail text. */
void client_reply_error(struct client *client, uint16_t op, uint32_t request_id, uint16_t status,
			const char *format, ...) __attribute__((format(printf, 5, 6)));
/* Queue an ERROR frame and close the connection once it is sent. */
void client_fail(struct client *client, uint32_t request_id, uint16_t status, const char *detail);
/* Disconnect now; the reason goes to the log. */
void client_close(struct client *client, const char *reason);
void client_sqe_done(struct client *client);
/* Periodic checks: partial-frame and stalled-send timeouts. True when this client still needs
 * the tick. */
bool client_check_timeouts(struct client *client, uint64_t now_ns);
int client_add_ring(struct client *client, struct ring_entry *entry, bool producer);

/* ---- protocol handling (dispatch.c) ---- */

/* Handle one complete, header-validated frame. */
void dispatch_frame(struct client *client, const struct wire_header *header,
		    const uint8_t *payload, size_t length);
/* Log one refusal line: uid, pid, op, cpu, address, reason. */
void dispatch_log_refusal(const struct client *client, uint16_t op, uint32_t cpu,
			  uint32_t address, const char *reason);

/* ---- MSR requests (msr_exec.c) ---- */

/* Run ops (already decoded, `count` >= 1) for a READ, WRITE or BATCH request: policy check,
 * write-mask check against current values, then execution synchronously or through io_uring.
 * The reply is queued when done (now or later); while it runs, client->job is set. */
void msr_exec_request(struct client *client, uint16_t op, uint32_t request_id,
		      struct msr_op *ops, uint32_t count);
void msr_exec_on_completion(struct msrd *server, const struct io_uring_cqe *cqe);

/* ---- ring directory (ringdir.c) ---- */

struct ring_entry {
	uint16_t major;
	uint16_t minor;
	uint32_t instance;
	int fd;                        /* read-write memfd, kept by the server */
	uint32_t capacity;
	int32_t producer_pid;
	uint64_t bytes;
	struct client *producer;       /* NULL once the producer disconnected */
	uint32_t consumers;            /* references held by connected clients that opened it */
	uint64_t orphaned_ns;          /* producer gone and no consumer since; 0 otherwise */
};

struct ringdir {
	struct ring_entry **entries;   /* sorted by (major, minor, instance) */
	size_t count;
	size_t capacity;
	uint32_t next_instance;
	uint64_t total_bytes;
	uint64_t max_bytes;
	uint64_t grace_ns;
};

void ringdir_init(struct ringdir *dir, uint64_t max_bytes, uint64_t grace_ns);
void ringdir_free(struct ringdir *dir);
/* Create and register a ring; *fd_out is a new read-write descriptor for the producer. */
int ringdir_create(struct ringdir *dir, struct client *producer, const struct wire_ring_create *request,
		   struct ring_entry **out, int *fd_out);
/* Find (major, minor, instance), instance 0 = newest; a new read-only fd for a consumer. */
int ringdir_open(struct ringdir *dir, uint16_t major, uint16_t minor, uint32_t instance,
		 struct ring_entry **out, int *fd_out);
/* Index of the first entry whose key is >= (major, minor, instance). */
size_t ringdir_lower_bound(const struct ringdir *dir, uint16_t major, uint16_t minor,
			   uint32_t instance);
/* A client dropped its reference (disconnect). */
void ringdir_release(struct ringdir *dir, struct ring_entry *entry, bool producer, uint64_t now_ns);
/* Remove orphans whose grace period has passed; true while some orphan is still waiting. */
bool ringdir_expire(struct ringdir *dir, uint64_t now_ns);
void ringdir_entry_to_wire(const struct ring_entry *entry, struct wire_ring_entry *out);

/* ---- original MSR values (msrstate.c) ---- */

struct msr_saved {
	uint32_t cpu;
	uint32_t address;
	uint64_t original;
};

struct msrstate {
	struct msr_saved *entries;     /* sorted by (cpu, address) */
	size_t count;
	size_t capacity;
};

/* Remember `original` for (cpu, address) unless a value is already remembered. */
int msrstate_remember(struct msrstate *state, uint32_t cpu, uint32_t address, uint64_t original);
/* Write every remembered value back; returns how many restores failed. */
size_t msrstate_restore(struct msrstate *state, struct msr_backend *backend);
void msrstate_free(struct msrstate *state);

/* ---- privilege (privilege.c) ---- */

/* Raise the soft RLIMIT_NOFILE to the hard limit (1000s of clients need descriptors). */
void privilege_raise_fd_limit(void);
/* When running with capabilities: keep only CAP_SYS_RAWIO (permitted and effective), and drop
 * every other one from the bounding set. No-op without privileges. */
int privilege_drop(void);

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
	struct client *dirty;          /* clients with replies to start sending */
	struct client *rearm;          /* clients whose recv waits for buffers (ENOBUFS) */
	uint32_t client_count;
	uint32_t next_client_number;

	struct ringdir rings;
	struct msrstate saved;

	struct msr_job *write_owner;   /* asynchronous write batch between check and run */
	struct msr_job *write_waiting; /* FIFO of write batches waiting for it */
	struct msr_job *write_waiting_tail;

	bool stopping;                 /* SIGTERM: no new work, close clients, then exit */
	bool done;
	struct msr_op scratch[WIRE_MAX_BATCH_OPS];         /* decoded ops of one request */
	uint64_t scratch_current[WIRE_MAX_BATCH_OPS];      /* synchronous write checks */
	int32_t scratch_current_status[WIRE_MAX_BATCH_OPS];
};

int loop_init(struct loop *loop, unsigned buffer_count);
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

/* Stop accepting, close every client; the loop ends when the last one is gone. */
void msrd_begin_shutdown(struct msrd *server, const char *why);
/* SIGHUP: load the policy again; keep the old one when the new one is invalid. */
void msrd_reload_policy(struct msrd *server);
/* Resolve the policy for a client's identity (at accept and after a reload). */
int msrd_resolve_grant(struct msrd *server, struct client *client, struct policy_grant **out);

#endif
