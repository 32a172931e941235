/*
 * server/msr_exec.c — READ, WRITE and BATCH: policy check, write-mask check, execution.
 *
 * A request is checked whole before anything runs:
 *   1. every op against the client's grant: CPU exists, address readable / writable at all, a
 *      slot read names a slot this connection holds (resolved to its counter register), an
 *      energy read names an energy-status register msrd keeps a total for (a registered batch
 *      had its grants checked at registration; only the rest is done again);
 *   2. for writes, the register's current value is read and the write is allowed only when every
 *      bit it changes is inside the write mask (a write after an earlier write of the same batch
 *      to the same register is checked against that earlier value), and no write may touch a
 *      counter slot another connection holds;
 *   3. the original value of every register about to be written for the first time is
 *      remembered (restored at SIGTERM);
 *   4. the ops run in order, each with its own status (-EIO for a register the CPU lacks);
 *   5. readings of energy registers extend their 64-bit totals and get the client's coarse
 *      grant applied; slot readings are cut to the counter's width.
 * Any refusal in 1-2 refuses the whole request: nothing is written. Steps 1 and 2 (and the
 * batch decoder) are in msr_check.c; here is how a checked request runs.
 *
 * Backends whose accesses io_uring can run (backend_prep_supported: the msr driver) run steps 2
 * and 4 as io_uring reads and writes prepared by backend_prep_read / _write, one submission per
 * step for the whole batch (hard-linked when the batch writes, so its ops run in order). Only one
 * writing batch is between steps 2 and 4 at a time (the write lock), so the current value a write
 * was checked against cannot change under it: other writing batches queue behind it, and every
 * frame that could write registers on the loop's thread (WRITE, SLOT_*, a writing BATCH or
 * BATCH_RUN) waits until it is free, as do slot releases (slots.c). An op on a CPU without a
 * device refuses its request in step 1, so no request of such a backend runs op by op past the
 * lock. The simulated CPU (and msr-safe's batch ioctl) run synchronously, where the lock is never
 * held.
 */
#include "server/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/memcheck.h>

struct msr_job {
	struct msrd *server;
	struct client *client;
	struct msr_job *next_waiting;
	uint16_t op;
	uint32_t request_id;
	uint32_t count;
	uint32_t pending;
	bool has_writes;
	bool linked_reply;             /* a READ whose reply send is linked behind the read */
	struct msr_op *ops;
	uint64_t *current;
	int32_t *current_status;
	uint64_t *totals;
	uint8_t *kinds;
} __attribute__((aligned(16)));

/* Step 3, in memory and in the journal. -ENOMEM or -EIO when a value cannot be remembered:
 * then nothing may be written. */
static int remember_originals(struct msrd *server, const struct msr_op *ops, uint32_t count,
			      const uint64_t *current, const int32_t *prior_writes)
{
	for (uint32_t i = 0; i < count; i++) {
		int status;
		if (!ops[i].write || prior_writes[i] >= 0)
			continue;
		status = msrstate_remember(&server->saved, ops[i].cpu, ops[i].address, current[i]);
		if (status == 0)
			status = journal_note(server, ops[i].cpu, ops[i].address, current[i]);
		if (status < 0)
			return status;
	}
	for (uint32_t i = 0; i < count; i++) {
		if (ops[i].write)
			msrstate_touch(&server->saved, ops[i].cpu, ops[i].address, current[i],
				       ops[i].value);
	}
	return 0;
}

/* ---- replies ---- */

static bool batch_shaped(uint16_t op)
{
	return op == WIRE_OP_BATCH || op == WIRE_OP_BATCH_RUN;
}

static void reply_batch(struct client *client, uint16_t op, uint32_t request_id,
			const struct msr_op *ops, const uint64_t *totals, uint32_t count,
			uint16_t status, bool refused)
{
	size_t room = WIRE_BATCH_HEADER_SIZE + (size_t)count * WIRE_BATCH_RESULT_SIZE;
	uint8_t *space = client_reply_space(client, WIRE_HEADER_SIZE + room);
	struct wire_writer writer;
	int length;

	if (space == NULL)
		return;
	wire_writer_init(&writer, space + WIRE_HEADER_SIZE, room);
	wire_put_batch_header(&writer, count);
	for (uint32_t i = 0; i < count; i++) {
		bool ran = ops[i].status == 0 && !refused;
		struct wire_batch_result result = {
			.value = ran ? ops[i].value : 0,
			.aux = ran && totals != NULL ? totals[i] : 0,
			.status = refused && ops[i].status == 0
					  ? (uint16_t)WIRE_STATUS_NOT_RUN
					  : wire_status_from_errno(ops[i].status),
		};
		wire_put_batch_result(&writer, &result);
	}
	length = wire_frame_finish(space, WIRE_HEADER_SIZE + room, op, WIRE_FLAG_REPLY, status,
				   request_id, writer.used);
	if (length > 0)
		client_reply_commit(client, (size_t)length, -1);
}

void msr_exec_reply_refused(struct client *client, uint16_t op, uint32_t request_id,
			    const struct msr_op *ops, uint32_t count, uint32_t refused,
			    const struct refusal *refusal)
{
	const struct msr_op *first = &ops[refusal->index];
	uint16_t status = wire_status_from_errno(first->status);
	char reason[sizeof(refusal->reason) + 48];

	if (refused > 1)
		snprintf(reason, sizeof(reason), "%s (and %u more ops refused)", refusal->reason,
			 refused - 1);
	else
		snprintf(reason, sizeof(reason), "%s", refusal->reason);
	dispatch_log_refusal(client, op, first->cpu, first->address, reason);
	if (batch_shaped(op)) {
		reply_batch(client, op, request_id, ops, NULL, count, status, true);
		return;
	}
	client_reply_error(client, op, request_id, status, "uid %u, cpu %u, MSR 0x%x: %s",
			   (unsigned)client->uid, first->cpu, first->address, reason);
}

static void reply_results(struct client *client, uint16_t op, uint32_t request_id,
			  const struct msr_op *ops, const uint64_t *totals, uint32_t count)
{
	size_t room = op == WIRE_OP_ENERGY_READ ? WIRE_ENERGY_READ_REPLY_SIZE
		      : op == WIRE_OP_READ	 ? WIRE_READ_REPLY_SIZE
						 : 0;
	struct wire_writer writer;
	uint8_t *space;
	int length;

	if (batch_shaped(op)) {
		reply_batch(client, op, request_id, ops, totals, count, WIRE_STATUS_OK, false);
		return;
	}
	if (ops[0].status < 0) {
		client_reply_error(client, op, request_id, wire_status_from_errno(ops[0].status),
				   "cpu %u, MSR 0x%x: %s", ops[0].cpu, ops[0].address,
				   strerror(-ops[0].status));
		return;
	}
	space = client_reply_space(client, WIRE_HEADER_SIZE + room);
	if (space == NULL)
		return;
	wire_writer_init(&writer, space + WIRE_HEADER_SIZE, room);
	if (op == WIRE_OP_READ)
		wire_put_u64(&writer, ops[0].value);
	else if (op == WIRE_OP_ENERGY_READ)
		wire_put_energy_reading(&writer, ops[0].value, totals[0]);
	length = wire_frame_finish(space, WIRE_HEADER_SIZE + room, op, WIRE_FLAG_REPLY,
				   WIRE_STATUS_OK, request_id, writer.used);
	if (length > 0)
		client_reply_commit(client, (size_t)length, -1);
}

/* Step 5, then the reply. */
static void finish_and_reply(struct client *client, uint16_t op, uint32_t request_id,
			     struct msr_op *ops, const uint8_t *kinds, uint64_t *totals,
			     uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		if (kinds[i] == WIRE_BATCH_SLOT_READ && ops[i].status == 0)
			ops[i].value &= slots_counter_mask(client->server, ops[i].address);
	}
	energy_finish_reads(client, ops, kinds, totals, count);
	reply_results(client, op, request_id, ops, totals, count);
}

/* ---- synchronous execution (sim, msr-safe) ---- */

static void run_sync(struct client *client, const struct msr_request *request, bool has_writes)
{
	struct msrd *server = client->server;
	struct refusal refusal = { 0 };
	struct msr_op *ops = request->ops;
	uint32_t count = request->count;
	uint16_t op = request->op;
	uint32_t request_id = request->request_id;
	int status;

	if (count == 1 && !has_writes) {
		ops[0].status = backend_read(server->backend, ops[0].cpu, ops[0].address,
					     &ops[0].value);
		finish_and_reply(client, op, request_id, ops, request->kinds, server->scratch_totals,
				 count);
		return;
	}
	if (has_writes) {
		uint32_t refused;
		for (uint32_t i = 0; i < count; i++) {
			if (ops[i].write)
				server->scratch_current_status[i] = backend_read(
					server->backend, ops[i].cpu, ops[i].address,
					&server->scratch_current[i]);
		}
		refused = msr_exec_check_writes(client, ops, count, server->scratch_current,
						server->scratch_current_status, &refusal);
		if (refused > 0) {
			msr_exec_reply_refused(client, op, request_id, ops, count, refused,
					       &refusal);
			return;
		}
		status = remember_originals(server, ops, count, server->scratch_current,
					    msr_exec_prior_writes());
		if (status < 0) {
			client_reply_error(client, op, request_id, wire_status_from_errno(status),
					   "cannot record the registers' original values");
			return;
		}
	}
	status = backend_run_batch(server->backend, ops, count);
	if (status < 0) {
		for (uint32_t i = 0; i < count; i++)
			ops[i].status = status;
	}
	finish_and_reply(client, op, request_id, ops, request->kinds, server->scratch_totals,
			 count);
}

/* ---- asynchronous execution through io_uring ---- */

/* Whether the backend can prepare every op as an io_uring read or write. msr-safe goes through
 * its batch ioctl instead; a read-only device lets the backend report the writes' -EPERM
 * itself. */
static bool backend_is_async(const struct msrd *server, const struct msr_op *ops, uint32_t count)
{
	if (backend_kind(server->backend) != BACKEND_MSR)
		return false;
	for (uint32_t i = 0; i < count; i++) {
		if (backend_prep_supported(server->backend, ops[i].cpu, ops[i].write) < 0)
			return false;
	}
	return true;
}

static struct msr_job *job_new(struct client *client, const struct msr_request *request,
			       bool has_writes)
{
	uint32_t count = request->count;
	size_t head = (sizeof(struct msr_job) + 15u) & ~(size_t)15u;
	size_t bytes = head + count * (sizeof(struct msr_op) + 2 * sizeof(uint64_t) +
				       sizeof(int32_t) + sizeof(uint8_t));
	struct msr_job *job = aligned_alloc(16, (bytes + 15u) & ~(size_t)15u);

	if (job == NULL)
		return NULL;
	*job = (struct msr_job){
		.server = client->server,
		.client = client,
		.op = request->op,
		.request_id = request->request_id,
		.count = count,
		.has_writes = has_writes,
	};
	job->ops = (struct msr_op *)((uint8_t *)job + head);
	job->current = (uint64_t *)(job->ops + count);
	job->totals = job->current + count;
	job->current_status = (int32_t *)(job->totals + count);
	job->kinds = (uint8_t *)(job->current_status + count);
	memcpy(job->ops, request->ops, sizeof(struct msr_op) * count);
	memcpy(job->kinds, request->kinds, count);
	memset(job->current, 0, sizeof(uint64_t) * count);
	memset(job->totals, 0, sizeof(uint64_t) * count);
	memset(job->current_status, 0, sizeof(int32_t) * count);
	return job;
}

static void job_end(struct msr_job *job)
{
	struct client *client = job->client;

	client->job = NULL;
	free(job);
	client_resume(client);
	client_sqe_done(client);
}

static void start_check(struct msr_job *job);

/* Clients whose next frame waited for the lock go on, in arrival order; the ones closed
 * meanwhile just let go of the client. A frame that finds the lock taken again waits again. */
static void wake_lock_waiters(struct msrd *server)
{
	struct client *waiter = server->lock_waiters;

	server->lock_waiters = NULL;
	server->lock_waiters_tail = NULL;
	while (waiter != NULL) {
		struct client *client = waiter;
		waiter = client->next_lock_waiter;
		client->next_lock_waiter = NULL;
		client->lock_waiting = false;
		client_resume(client);
		client_sqe_done(client);
	}
}

static void release_write_lock(struct msrd *server)
{
	server->write_owner = NULL;
	/* Register work that waited for the lock runs first: it is synchronous and short. */
	slots_run_deferred(server);
	wake_lock_waiters(server);
	if (server->write_owner != NULL)
		return;
	while (server->write_waiting != NULL) {
		struct msr_job *next = server->write_waiting;
		server->write_waiting = next->next_waiting;
		if (server->write_waiting == NULL)
			server->write_waiting_tail = NULL;
		if (next->client->closing) {
			/* Its client left before anything was checked: nothing to run. */
			job_end(next);
			continue;
		}
		server->write_owner = next;
		start_check(next);
		return;
	}
}

bool msr_exec_write_locked(const struct msrd *server)
{
	return server->write_owner != NULL;
}

/* Whether a BATCH-shaped frame writes: its op kinds, or its registered batch's. Malformed
 * frames count as not writing: dispatch answers them. */
static bool batch_writes(const struct client *client, const struct wire_header *header,
			 const uint8_t *payload, size_t length)
{
	uint32_t count, handle;

	if (header->op == WIRE_OP_BATCH_RUN) {
		const struct registered_batch *batch;
		if (wire_get_batch_run(payload, length, &handle, &count) < 0)
			return false;
		batch = handles_find(client, handle);
		for (uint32_t i = 0; batch != NULL && i < batch->count; i++) {
			if (batch->ops[i].write)
				return true;
		}
		return false;
	}
	if (wire_get_batch_count(payload, length, WIRE_BATCH_OP_SIZE, WIRE_MAX_BATCH_OPS,
				 &count) < 0)
		return false;
	for (uint32_t i = 0; i < count; i++) {
		struct wire_batch_op op;
		if (wire_get_batch_op(payload, i, &op) == 0 && op.kind == WIRE_BATCH_WRITE)
			return true;
	}
	return false;
}

bool msr_exec_must_wait(struct client *client, const struct wire_header *header,
			const uint8_t *payload, size_t length)
{
	if (client->server->write_owner == NULL)
		return false;
	switch (wire_op_writes(header->op)) { /* proto/wire_ops.h's WRITES column */
	case WIRE_WRITES_ALWAYS:
		return true;
	case WIRE_WRITES_BY_PAYLOAD:
		return batch_writes(client, header, payload, length);
	default:
		return false;
	}
}

void msr_exec_wait_for_lock(struct client *client)
{
	struct msrd *server = client->server;

	client->lock_waiting = true;
	client->sqes_in_flight++; /* the wait holds the client until it is woken */
	if (server->lock_waiters_tail != NULL)
		server->lock_waiters_tail->next_lock_waiter = client;
	else
		server->lock_waiters = client;
	server->lock_waiters_tail = client;
}

static void submit_op(struct msr_job *job, uint32_t index, enum loop_tag tag, bool link)
{
	struct msr_op *op = &job->ops[index];
	const struct msr_backend *backend = job->server->backend;
	struct io_uring_sqe *sqe = loop_sqe(&job->server->loop);

	if (tag == TAG_MSR_CHECK)
		backend_prep_read(backend, sqe, op->cpu, op->address, &job->current[index]);
	else if (op->write)
		backend_prep_write(backend, sqe, op->cpu, op->address, &op->value);
	else
		backend_prep_read(backend, sqe, op->cpu, op->address, &op->value);
	if (link)
		sqe->flags |= IOSQE_IO_HARDLINK;
	io_uring_sqe_set_data64(sqe, loop_user_data(job, tag, index));
	job->pending++;
}

static void start_check(struct msr_job *job)
{
	for (uint32_t i = 0; i < job->count; i++) {
		if (job->ops[i].write)
			submit_op(job, i, TAG_MSR_CHECK, false);
	}
}

static void start_run(struct msr_job *job)
{
	/* A hard-linked chain must go to the kernel in one submission. */
	loop_reserve(&job->server->loop, job->count);
	for (uint32_t i = 0; i < job->count; i++)
		submit_op(job, i, TAG_MSR_RUN, job->has_writes && i + 1 < job->count);
}

static void finish_check(struct msr_job *job)
{
	struct refusal refusal = { 0 };
	uint32_t refused;
	int status;

	refused = msr_exec_check_writes(job->client, job->ops, job->count, job->current,
					job->current_status, &refusal);

	if (refused > 0) {
		release_write_lock(job->server);
		msr_exec_reply_refused(job->client, job->op, job->request_id, job->ops, job->count,
				       refused, &refusal);
		job_end(job);
		return;
	}
	status = remember_originals(job->server, job->ops, job->count, job->current,
				    msr_exec_prior_writes());
	if (status < 0) {
		release_write_lock(job->server);
		client_reply_error(job->client, job->op, job->request_id,
				   wire_status_from_errno(status),
				   "cannot record the registers' original values");
		job_end(job);
		return;
	}
	start_run(job);
}

static int32_t io_status(int result)
{
	if (result == (int)sizeof(uint64_t))
		return 0;
	return result < 0 ? result : -EIO;
}

void msr_exec_on_completion(struct msrd *server, const struct io_uring_cqe *cqe)
{
	uint64_t user_data = io_uring_cqe_get_data64(cqe);
	struct msr_job *job = loop_object_of(user_data);
	uint32_t index = loop_index_of(user_data);

	if (loop_tag_of(user_data) == TAG_MSR_CHECK) {
		job->current_status[index] = io_status(cqe->res);
		VALGRIND_MAKE_MEM_DEFINED(&job->current[index], sizeof(uint64_t));
	} else {
		job->ops[index].status = io_status(cqe->res);
		if (!job->ops[index].write)
			VALGRIND_MAKE_MEM_DEFINED(&job->ops[index].value, sizeof(uint64_t));
	}
	if (--job->pending > 0)
		return;
	if (job->linked_reply) {
		/* The reply is on its way with the value the read put into it; a failed read
		 * cancelled it, and the error reply goes instead. */
		if (job->ops[0].status < 0)
			reply_results(job->client, job->op, job->request_id, job->ops, job->totals,
				      1);
		job_end(job);
		return;
	}
	if (loop_tag_of(user_data) == TAG_MSR_CHECK) {
		finish_check(job);
		return;
	}
	if (job->has_writes && server->write_owner == job)
		release_write_lock(server);
	finish_and_reply(job->client, job->op, job->request_id, job->ops, job->kinds, job->totals,
			 job->count);
	job_end(job);
}

/* A plain READ of a register msrd adds nothing to (no energy total, no slot): the device read
 * and the reply's send go to the kernel as one linked chain, the read writing straight into the
 * reply frame, so the request costs one io_uring_enter. Never an energy-status register, even
 * one msrd keeps no total for: a coarse grant must see it refused (energy_finish_reads), and a
 * linked read's value reaches the client unexamined. */
static bool read_can_link(struct client *client, const struct msr_request *request)
{
	return request->op == WIRE_OP_READ && request->count == 1 && !request->ops[0].write &&
	       request->kinds[0] == WIRE_BATCH_READ &&
	       rapl_domain_of_address(request->ops[0].address) < 0 &&
	       energy_find(client->server, request->ops[0].cpu, request->ops[0].address) == NULL &&
	       client_idle_output(client);
}

static void start_linked_read(struct msr_job *job)
{
	struct client *client = job->client;
	struct loop *loop = &job->server->loop;
	const struct msr_op *op = &job->ops[0];
	uint8_t frame[WIRE_HEADER_SIZE + WIRE_READ_REPLY_SIZE] = { 0 };
	struct io_uring_sqe *sqe;
	uint8_t *sent;

	wire_frame_finish(frame, sizeof(frame), WIRE_OP_READ, WIRE_FLAG_REPLY, WIRE_STATUS_OK,
			  job->request_id, WIRE_READ_REPLY_SIZE);
	loop_reserve(loop, 3); /* the read, the send, and the tick the send may arm */
	sent = client_queue_linked(client, frame, sizeof(frame));
	if (sent == NULL) {
		job_end(job);
		return;
	}
	sqe = loop_sqe(loop);
	backend_prep_read(job->server->backend, sqe, op->cpu, op->address, sent + WIRE_HEADER_SIZE);
	sqe->flags |= IOSQE_IO_LINK;
	io_uring_sqe_set_data64(sqe, loop_user_data(job, TAG_MSR_RUN, 0));
	job->pending++;
	job->linked_reply = true;
	loop->quiet_sends++; /* its completion needs nothing more from the loop when it works */
	client_send_linked(client);
}

static void run_async(struct client *client, const struct msr_request *request, bool has_writes)
{
	struct msrd *server = client->server;
	bool link = read_can_link(client, request); /* before the job makes the client busy */
	struct msr_job *job = job_new(client, request, has_writes);

	if (job == NULL) {
		client_reply_error(client, request->op, request->request_id, WIRE_STATUS_NO_MEMORY,
				   "no memory for the request");
		return;
	}
	client->job = job;
	client->sqes_in_flight++; /* the job holds the client until it ends */
	if (link) {
		start_linked_read(job);
		return;
	}
	if (!has_writes) {
		start_run(job);
		return;
	}
	if (server->write_owner != NULL || server->write_waiting != NULL) {
		if (server->write_waiting_tail != NULL)
			server->write_waiting_tail->next_waiting = job;
		else
			server->write_waiting = job;
		server->write_waiting_tail = job;
		return;
	}
	server->write_owner = job;
	start_check(job);
}

void msr_exec_request(struct client *client, const struct msr_request *request)
{
	struct refusal refusal = { 0 };
	bool has_writes = false;
	uint32_t refused;

	refused = msr_exec_check(client, request->ops, request->kinds, request->count,
				 request->validated, &refusal);
	if (refused > 0) {
		msr_exec_reply_refused(client, request->op, request->request_id, request->ops,
				       request->count, refused, &refusal);
		return;
	}
	for (uint32_t i = 0; i < request->count; i++)
		has_writes |= request->ops[i].write;
	if (backend_is_async(client->server, request->ops, request->count))
		run_async(client, request, has_writes);
	else
		run_sync(client, request, has_writes);
}
