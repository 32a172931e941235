/*
 * server/msr_exec.h — msrd's MSR requests (msr_exec.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_MSR_EXEC_H
#define HAECER_SERVER_MSR_EXEC_H

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
uint32_t msr_exec_check(struct client *client, struct msr_op *ops, const uint8_t *kinds,
			uint32_t count, bool validated, struct refusal *refusal);
/* Step 2 alone: each write against `current` (the register's value, or current_status < 0 when
 * it could not be read) or the value an earlier write of the same batch leaves; the write mask
 * and counter slots other connections hold. Returns how many writes were refused. Like
 * msr_exec_check it touches no register and needs no loop (fuzz/fuzz_batch.c calls both). */
uint32_t msr_exec_check_writes(const struct client *client, struct msr_op *ops, uint32_t count,
			       const uint64_t *current, const int32_t *current_status,
			       struct refusal *refusal);
/* For each op of the last msr_exec_check_writes: the index of the earlier write of the same
 * batch to the same register, or -1 (step 3 remembers only first writes' original values). */
const int32_t *msr_exec_prior_writes(void);
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

#endif
