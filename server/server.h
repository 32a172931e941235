/*
 * server/server.h — msrd's private state, shared by its files (not a public interface).
 *
 * One thread, one io_uring. Files, one concern each (the OpenBSD daemon habit):
 *   msrd.c      main(): options, start-up order, privilege drop, shutdown
 *   lifecycle.c loading and reloading the policy, the start of a shutdown
 *   options.c   command line
 *   loop.c      the io_uring: SQE helpers, provided buffers, CQE dispatch, signals, tick timer
 *   listener.c  the listening socket; accepting clients and learning who they are
 *   client.c    a client's lifecycle: accept, close, limits, deadlines and timeouts
 *   client_input.c  its receive and input framing; client_output.c its reply queue and sends
 *   dispatch.c  protocol handling: one handler per op
 *   msr_check.c MSR requests' checks: policy grants, write masks (steps 1-2)
 *   msr_exec.c  MSR requests: sync or io_uring execution, the write lock, replies
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

#include "server/options.h"
#include "server/loop.h"
#include "server/client.h"
#include "server/dispatch.h"
#include "server/msr_exec.h"
#include "server/ringdir.h"
#include "server/slots.h"
#include "server/energy.h"
#include "server/energy_edges.h"
#include "server/energy_cost.h"
#include "server/energy_page.h"
#include "server/perf_requests.h"
#include "server/handles.h"
#include "server/schedule.h"
#include "server/msrstate.h"
#include "server/journal.h"
#include "server/accounts.h"
#include "server/privilege.h"
#include "server/privsep.h"

#define MSRD_VERSION "msrd " HAECER_VERSION " (protocol 1)"
#define MSRD_DEFAULT_SOCKET "/run/haecer/msrd.sock"
#define MSRD_DEFAULT_POLICY "/etc/haecer/policy.yaml"
#define MSRD_DEFAULT_STATE_DIR "/run/haecer"

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
	struct privsep *parent;        /* the privileged parent's channel, or NULL (privsep.h) */
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
