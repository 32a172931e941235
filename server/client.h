/*
 * server/client.h — msrd's clients (client.c, client_input.c, client_output.c): their state and
 * calls, private to msrd (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_CLIENT_H
#define HAECER_SERVER_CLIENT_H

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

struct energy_coarse;
struct msrd;
struct registered_batch;
struct ring_entry;
struct slot;
struct uid_account;

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
	uint64_t asked_entries;        /* entries (index mod 64) it read by READ / ENERGY_READ:
					* precise edges for those only; 0, none read: all */
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

/*
 * A client's state, its per-request fields first: with thousands of clients the one a
 * completion names is in no cache, and every line a request touches is a miss (measured with
 * callgrind's cache simulation at 10 000 busy clients: 8 lines of the client's 672 bytes and
 * 2 of its grant, about 5 last-level misses per request more than at 16). A receive, its
 * request, its reply and the send's completion touch only the first CLIENT_HOT_BYTES (three
 * lines, which the loop prefetches for the next completion); everything behind them is used
 * at connect, close, reload or by requests beyond READ.
 */
struct client {
	/* Line 0: what a request reads and its reply writes. */
	struct msrd *server;
	struct policy_grant *grant;
	struct output_buffer sending;  /* owned by the send in flight */
	struct output_buffer pending;  /* replies queued behind it */
	uint64_t stream_queued;        /* bytes ever queued */
	uint64_t stream_sent;          /* bytes ever sent */

	/* Line 1. */
	struct msr_job *job;           /* request executing asynchronously; input waits behind it */
	struct client *next_dirty;     /* on server->dirty: has replies to start sending */
	/* Precise edges run for this client's holds only within EDGE_LEASE_NS of its last request
	 * (energy_page.c): a program that measured once and goes on without msrd must not leave
	 * msrd spinning on the package it measures. */
	uint64_t last_request_raw_ns;  /* clock_monotonic_raw_ns() of its latest request */
	/* Timeouts are CLOCK_MONOTONIC (msrd_now_ns), the base io_uring's timers count in; the
	 * edge lease above is in the energy page's base, CLOCK_MONOTONIC_RAW (common/clock.h). */
	uint64_t frame_started_ns;     /* a partial frame is pending since; 0 none */
	uint64_t send_started_ns;      /* the send in flight started; 0 none */
	int fd;
	uint32_t input_used;
	uint32_t sending_offset;
	uint32_t sqes_in_flight;
	uint16_t replies_sending;
	uint16_t replies_pending;
	uint8_t fd_mark_count;
	bool recv_armed;
	bool send_armed;
	bool dirty;

	/* Line 2. */
	struct client *prev_timed;     /* on server->timed: a deadline may be pending */
	struct client *next_timed;
	uint8_t *input;                /* bytes received but not yet handled (partial frames) */
	uint32_t page_hold_count;
	uint32_t read_granted_address; /* the grant allows reading it (valid: read_granted) */
	bool read_granted;             /* msr_check.c: a READ of the same register as the one
					* before skips the grant's lookup (2 lines of its own);
					* cleared whenever the grant is replaced */
	bool recv_cancelling;
	bool recv_rearm;               /* re-arm after ENOBUFS, once buffers are back */
	bool draining;                 /* an ERROR frame is queued: close once it is sent */
	bool peer_closed;              /* it shut its sending side: answer, then close */
	bool lock_waiting;             /* its next frame waits for the write lock (msr_exec.c) */
	bool refusal_logged;           /* the current request's refusal has its log line */
	bool closing;                  /* disconnected; retired when the last SQE completes, freed
					* at the end of that loop turn */
	bool linked_send;              /* its send in flight is linked behind a device read: a
					* failed read cancels it, and its reply is then dropped */
	bool timed;                    /* on server->timed */
	bool edges_leased;             /* its precise holds are in energy.edge_wanted now */

	/* Cold: from here on (CLIENT_HOT_BYTES). */
	struct client *prev __attribute__((aligned(64)));
	struct client *next;
	struct client *next_rearm;     /* on server->rearm: recv waits for buffers */
	struct client *next_lock_waiter; /* on server->lock_waiters */
	struct uid_account *account;   /* its uid's; NULL once it is retired */
	uint32_t number;               /* connection number, for logs */
	pid_t pid;
	bool followed;                 /* the simulated CPU follows its load (sim_follow.c) */
	uid_t uid;
	gid_t gid;
	uint32_t group_count;
	gid_t *groups;
	uint64_t grant_generation;     /* policy_generation of the grant: a registered batch
					* handle (later work) made under an older one is STALE */
	uint32_t input_capacity;
	struct fd_mark fd_marks[CLIENT_FD_MARKS];
	struct fd_send *fd_send;       /* msghdr of a sendmsg in flight */

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
	struct client *prev_holder;    /* on energy.holders while page_hold_count > 0 */
	struct client *next_holder;
	uint32_t perf_open;            /* perf events handed out (ACCOUNT_PERF_EVENTS) */
	uint64_t last_energy_read_raw_ns; /* of its latest ENERGY_READ (the long lease) */
	uint64_t edges_pause_raw_ns;   /* a region's body: no windows from here to its next
					* request (0: none; energy_pages_note_region) */
	struct log_ratelimit refusals; /* its refusal log lines (the uid's limit applies too) */
} __attribute__((aligned(64)));

/* The per-request part of struct client: what the loop prefetches. */
#define CLIENT_HOT_BYTES offsetof(struct client, prev)

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
/* Give the client `grant` in place of its current one (freed): the only way a client's grant
 * changes after it connected, so that what was decided under the old grant (msr_check.c's note
 * of the last register it may read) goes with it. */
void client_replace_grant(struct client *client, struct policy_grant *grant);
void client_sqe_done(struct client *client);
/* Free the clients retired during this loop turn (called once the turn's completions, and the
 * dirty and rearm lists that may name them, are done). */
void client_free_retired(struct msrd *server);
/* Periodic checks: partial-frame and stalled-send timeouts of the clients that set a deadline
 * since the last tick (server->timed), never of every client. True when one still needs the
 * tick. */
bool clients_check_timeouts(struct msrd *server, uint64_t now_ns);
int client_add_ring(struct client *client, struct ring_entry *entry, bool producer);

#endif
