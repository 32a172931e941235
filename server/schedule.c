/*
 * server/schedule.c — scheduled batches: a registered batch of reads that msrd runs every period
 * and whose results it pushes, timestamped, into a ring it produces itself. System-wide sampling
 * (turbostat, likwid-powermeter) with no client process running.
 *
 * Timing: periods lie on a grid from the first run (period 0 runs at once), in
 * CLOCK_MONOTONIC_RAW, the clock of the ring's timestamps. Each wake-up arms one io_uring timeout
 * for the next grid point; since the deadline is a grid point and not "now + period", errors do
 * not accumulate (no drift). An absolute timeout on CLOCK_MONOTONIC would avoid even that
 * subtraction, but CLOCK_MONOTONIC is slewed by NTP against the raw clock of the records (up to
 * 500 ppm), so its grid would drift against the timestamps. A wake-up runs the period the grid
 * says it is in: periods msrd could not serve in time (busy) are skipped, not run in a burst, and
 * counted.
 *
 * Records: one per op that succeeded, all with the set's timestamp; counter_id = op index;
 * energy reads carry the 64-bit total as an energy counter with its unit exponent, other reads
 * the raw register. Each record's flags hold the period number mod 2^16, so a consumer sees
 * a skipped period as a gap, and floor((timestamp - first timestamp) / period) is exactly it.
 *
 * Lifetime: a schedule stops when its owner disconnects, unless it was started PERSISTENT under
 * a policy granting persistent_schedules; a persistent one runs until a client of the same uid
 * stops it, or SIGTERM. Its ring then stays in the directory like a ring whose producer left.
 * A policy reload checks every schedule again for its starter's identity (uid, gid, groups, kept
 * for the purpose): one the new policy no longer allows stops.
 */
#include "server/server.h"
#include "common/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shm/ring.h"

struct schedule_op {
	bool coarse;                   /* the starter's grant is coarse for this energy register */
	struct policy_energy_limit limit;
};

struct schedule {
	struct schedule *next;
	struct msrd *server;
	uint32_t id;
	struct client *owner;          /* NULL once a persistent schedule's owner left */
	struct uid_account *account;   /* its starter's uid: counts it while it runs, and holds
					* the uid's previous coarse readings it shares */
	uid_t uid;
	gid_t gid;
	gid_t *groups;                 /* the starter's, to check it again after a reload */
	uint32_t group_count;
	uint16_t major;
	bool persistent;
	bool stopping;                 /* stopped; freed when its timeout has completed */
	bool armed;
	uint32_t count;
	struct msr_op *ops;            /* as registered */
	uint8_t *kinds;
	struct msr_op *run;            /* one period's copy */
	struct schedule_op *extra;
	uint64_t period_ns;
	uint64_t origin_ns;            /* CLOCK_MONOTONIC_RAW of period 0 */
	uint64_t period_number;        /* the last period run */
	uint64_t missed;
	struct ring_entry *ring;
	struct ring_producer producer;
	struct __kernel_timespec timeout;
} __attribute__((aligned(16)));

/* ---- one period ---- */

static void push(struct schedule *schedule, uint32_t index, uint64_t value, int16_t exponent,
		 uint64_t timestamp)
{
	struct ring_record record = {
		.value = value,
		.timestamp = timestamp,
		.counter_id = index,
		.unit_exponent = exponent,
		.flags = (uint16_t)schedule->period_number,
	};

	ring_push(&schedule->producer, &record);
}

/* Run the batch and push its result set stamped `timestamp`. */
static void run_period(struct schedule *schedule, uint64_t timestamp)
{
	struct msrd *server = schedule->server;

	memcpy(schedule->run, schedule->ops, schedule->count * sizeof(*schedule->ops));
	backend_run_batch(server->backend, schedule->run, schedule->count);
	for (uint32_t i = 0; i < schedule->count; i++) {
		struct msr_op *op = &schedule->run[i];
		struct energy_counter *counter;
		uint64_t raw = op->value, total;

		if (op->status < 0)
			continue;
		counter = energy_find(server, op->cpu, op->address);
		if (counter == NULL) {
			/* Fail closed, as energy_finish_reads: no raw energy for a coarse grant. */
			if (!(schedule->extra[i].coarse && rapl_domain_of_address(op->address) >= 0))
				push(schedule, i, raw, 0, timestamp);
			continue;
		}
		total = energy_observe(server, counter, &raw);
		if (schedule->extra[i].coarse) {
			struct energy_coarse *previous =
				energy_coarse_state(server, counter, &schedule->extra[i].limit);
			if (previous == NULL)
				continue; /* a fine reading must not leak for want of memory */
			energy_coarsen(server, counter, &schedule->extra[i].limit, previous, &raw,
				       &total);
		}
		if (schedule->kinds[i] == WIRE_BATCH_ENERGY_READ)
			push(schedule, i, total, (int16_t)counter->exponent, timestamp);
		else
			push(schedule, i, raw, 0, timestamp);
	}
}

/* The next grid point; false when it is past what 64 bits of nanoseconds hold (periods are
 * bounded on the wire, so only after centuries: a wrapped deadline would always be past, and
 * the timer would fire at once for ever). */
static bool next_deadline(const struct schedule *schedule, uint64_t *deadline)
{
	uint64_t offset;

	return !__builtin_mul_overflow(schedule->period_number + 1, schedule->period_ns, &offset) &&
	       !__builtin_add_overflow(schedule->origin_ns, offset, deadline);
}

static void stop(struct schedule *schedule, const char *why);

static void arm(struct schedule *schedule, uint64_t now)
{
	uint64_t deadline, wait;
	struct io_uring_sqe *sqe;

	if (!next_deadline(schedule, &deadline)) {
		stop(schedule, "its next period lies past the end of the clock");
		return;
	}
	wait = deadline > now ? deadline - now : 0;
	sqe = loop_sqe(&schedule->server->loop);

	schedule->timeout = (struct __kernel_timespec){
		.tv_sec = (long long)(wait / 1000000000ull),
		.tv_nsec = (long long)(wait % 1000000000ull),
	};
	io_uring_prep_timeout(sqe, &schedule->timeout, 0, 0);
	io_uring_sqe_set_data64(sqe, loop_user_data(schedule, TAG_SCHEDULE, 0));
	schedule->armed = true;
}

/* ---- life cycle ---- */

/* Unlink (when linked) and free. */
static void schedule_free(struct schedule *schedule)
{
	struct msrd *server = schedule->server;

	for (struct schedule **link = &server->schedules; *link != NULL; link = &(*link)->next) {
		if (*link == schedule) {
			*link = schedule->next;
			break;
		}
	}
	ring_producer_detach(&schedule->producer);
	free(schedule->groups);
	free(schedule->ops);
	free(schedule->kinds);
	free(schedule->run);
	free(schedule->extra);
	free(schedule);
}

static void stop(struct schedule *schedule, const char *why)
{
	struct msrd *server = schedule->server;

	if (schedule->stopping)
		return;
	schedule->stopping = true;
	log_info("schedule %u (uid %u, ring %u.%u.%u): %llu periods run, %llu skipped; stopped: %s",
		 schedule->id, (unsigned)schedule->uid, schedule->ring->major, schedule->ring->minor,
		 schedule->ring->instance,
		 (unsigned long long)(schedule->period_number + 1 - schedule->missed),
		 (unsigned long long)schedule->missed, why);
	ringdir_release_scheduled(&server->rings, schedule->ring, msrd_now_ns());
	accounts_give_back(&server->accounts, schedule->account, ACCOUNT_SCHEDULES, 1);
	schedule->account = NULL;
	loop_want_tick(server);
	if (!schedule->armed) {
		schedule_free(schedule);
		return;
	}
	struct io_uring_sqe *sqe = loop_sqe(&server->loop);
	io_uring_prep_timeout_remove(sqe, loop_user_data(schedule, TAG_SCHEDULE, 0), 0);
	io_uring_sqe_set_data64(sqe, loop_user_data(NULL, TAG_IGNORE, 0));
}

void schedule_on_timeout(struct msrd *server, const struct io_uring_cqe *cqe)
{
	struct schedule *schedule = loop_object_of(io_uring_cqe_get_data64(cqe));
	uint64_t now, number;

	(void)server;
	schedule->armed = false;
	if (schedule->stopping) {
		schedule_free(schedule);
		return;
	}
	now = clock_monotonic_raw_ns();
	number = (now - schedule->origin_ns) / schedule->period_ns;
	if (number > schedule->period_number) {
		schedule->missed += number - schedule->period_number - 1;
		if (number - schedule->period_number > 1)
			log_debug("schedule %u: %llu periods skipped", schedule->id,
				  (unsigned long long)(number - schedule->period_number - 1));
		schedule->period_number = number;
		run_period(schedule, now);
		now = clock_monotonic_raw_ns();
	}
	/* Woken before the grid point (the timeout's clock runs slightly apart from the raw one):
	 * wait for the rest. */
	arm(schedule, now);
}

void schedule_release_client(struct client *client)
{
	struct schedule *next;

	for (struct schedule *schedule = client->server->schedules; schedule != NULL;
	     schedule = next) {
		next = schedule->next;
		if (schedule->owner != client || schedule->stopping)
			continue;
		if (!schedule->persistent) {
			stop(schedule, "its owner disconnected");
			continue;
		}
		schedule->owner = NULL;
		log_info("schedule %u (uid %u) is persistent: it runs on without its owner",
			 schedule->id, (unsigned)schedule->uid);
	}
}

void schedule_stop_all(struct msrd *server, const char *why)
{
	struct schedule *next;

	for (struct schedule *schedule = server->schedules; schedule != NULL; schedule = next) {
		next = schedule->next;
		stop(schedule, why);
	}
}

void schedule_free_all(struct msrd *server)
{
	while (server->schedules != NULL)
		schedule_free(server->schedules);
}

/* ---- SCHEDULE_START ---- */

static void refuse(struct client *client, const struct wire_header *header, int status,
		   const char *reason)
{
	if (status == -EPERM || status == -ENOSPC)
		dispatch_log_refusal(client, header->op, 0, 0, reason);
	client_reply_error(client, header->op, header->request_id, wire_status_from_errno(status),
			   "%s", reason);
}

/* What the request and the batch must be; 0 or a refusal (reason filled). */
static int check_start(const struct client *client, const struct wire_schedule_start *request,
		       const struct registered_batch *batch, char *reason, size_t size)
{
	const struct accounts *accounts = &client->server->accounts;

	if (batch == NULL)
		return snprintf(reason, size, "no batch handle %u on this connection",
				request->handle), -ENOENT;
	if (batch->generation != client->server->policy_generation)
		return snprintf(reason, size, "batch handle %u is stale: register it again",
				request->handle), -ESTALE;
	if (batch->count > RING_MAX_COUNTERS)
		return snprintf(reason, size, "a scheduled batch has at most %u ops",
				RING_MAX_COUNTERS), -EINVAL;
	for (uint32_t i = 0; i < batch->count; i++) {
		if (batch->kinds[i] != WIRE_BATCH_READ && batch->kinds[i] != WIRE_BATCH_ENERGY_READ)
			return snprintf(reason, size, "op %u: a scheduled batch only reads registers",
					i), -EINVAL;
	}
	if (request->capacity < batch->count || (request->capacity & (request->capacity - 1)) != 0)
		return snprintf(reason, size, "the capacity is a power of two of at least %u records",
				batch->count), -EINVAL;
	if (!policy_allows_create_ring(client->grant, request->major))
		return snprintf(reason, size, "uid %u may not create rings of major %u",
				(unsigned)client->uid, request->major), -EPERM;
	if ((request->flags & WIRE_SCHEDULE_PERSISTENT) &&
	    !policy_allows_persistent_schedule(client->grant))
		return snprintf(reason, size, "uid %u may not start persistent schedules",
				(unsigned)client->uid), -EPERM;
	if (client->account->used[ACCOUNT_SCHEDULES] >= accounts->limits[ACCOUNT_SCHEDULES])
		return accounts_describe_limit(accounts, client->account, ACCOUNT_SCHEDULES, reason,
					       size), -ENOSPC;
	return 0;
}

static void describe_counter(const struct msrd *server, const struct msr_op *op, uint8_t kind,
			     uint32_t index, struct wire_ring_counter *counter)
{
	const char *name = policy_msr_name(server->policy, op->address);
	struct energy_counter *energy = energy_find((struct msrd *)server, op->cpu, op->address);

	if (name != NULL)
		snprintf(counter->name, sizeof(counter->name), "%.24s@%u", name, op->cpu);
	else
		snprintf(counter->name, sizeof(counter->name), "MSR_0x%x@%u", op->address, op->cpu);
	counter->id = index;
	counter->kind = kind == WIRE_BATCH_ENERGY_READ && energy != NULL ? RING_COUNTER_ENERGY
									  : RING_COUNTER_MSR;
	counter->unit_exponent = counter->kind == RING_COUNTER_ENERGY ? energy->exponent : 0;
	counter->package = server->machine.cpu_package[op->cpu];
	counter->cpu = (int32_t)op->cpu;
}

static void keep_limits(struct schedule *schedule, const struct policy_grant *grant);

/* The ring the results go to, produced by msrd itself and charged to the starter's uid. */
static int create_ring(struct schedule *schedule, const struct wire_schedule_start *request)
{
	static struct wire_ring_create ring; /* 800 bytes: not on the stack, one thread */
	struct msrd *server = schedule->server;
	int status;
	int fd;

	memset(&ring, 0, sizeof(ring));
	ring.major = request->major;
	ring.minor = request->minor;
	ring.capacity = request->capacity;
	ring.flags = RING_SINGLE_PRODUCER;
	ring.clock = RING_CLOCK_MONOTONIC_RAW;
	ring.counter_count = schedule->count;
	for (uint32_t i = 0; i < schedule->count; i++)
		describe_counter(server, &schedule->ops[i], schedule->kinds[i], i, &ring.counters[i]);
	status = ringdir_create(&server->rings, NULL, schedule->account, (int32_t)getpid(), &ring,
				&schedule->ring, &fd);
	if (status < 0)
		return status;
	if (schedule->owner != NULL)
		schedule->ring->owner_pid = (int32_t)schedule->owner->pid;
	schedule->ring->readings = calloc(schedule->count, sizeof(*schedule->ring->readings));
	status = schedule->ring->readings != NULL ? 0 : -ENOMEM;
	if (status == 0) {
		schedule->ring->reading_count = schedule->count;
		keep_limits(schedule, NULL);
		status = ring_producer_attach(&schedule->producer, fd);
	}
	close(fd);
	if (status < 0)
		ringdir_release_scheduled(&server->rings, schedule->ring, msrd_now_ns());
	return status;
}

/* The grant's coarse limits are kept (a persistent schedule outlives the grant), in the
 * schedule and in its ring's description, against which monitors opening it are checked.
 * A NULL grant copies the schedule's into the ring. */
static void keep_limits(struct schedule *schedule, const struct policy_grant *grant)
{
	struct ring_entry *ring = schedule->ring;

	for (uint32_t i = 0; i < schedule->count; i++) {
		struct schedule_op *extra = &schedule->extra[i];
		if (grant != NULL)
			extra->coarse = policy_energy_limit(grant, schedule->ops[i].address,
							    &extra->limit) == 1;
		if (ring != NULL && ring->readings != NULL)
			ring->readings[i] = (struct ring_reading){ .address = schedule->ops[i].address,
								   .coarse = extra->coarse,
								   .limit = extra->limit };
	}
}

/* Whether `grant` allows the schedule as it runs: its reads, its ring, its persistence. */
static bool still_allowed(const struct schedule *schedule, const struct policy_grant *grant)
{
	for (uint32_t i = 0; i < schedule->count; i++) {
		if (!policy_allows_read(grant, schedule->ops[i].address))
			return false;
	}
	return policy_allows_create_ring(grant, schedule->major) &&
	       (!schedule->persistent || policy_allows_persistent_schedule(grant));
}

/* Whether `grant` reads the schedule's registers at the very coarseness its ring is labelled
 * with. A ring's label must always describe all of its records: relabelling a running ring
 * coarser would let coarser grants open it and read the finer records written before, and
 * relabelling it finer would leave a label coarser than the records written after. */
static bool same_coarseness(const struct schedule *schedule, const struct policy_grant *grant)
{
	for (uint32_t i = 0; i < schedule->count; i++) {
		const struct schedule_op *extra = &schedule->extra[i];
		struct policy_energy_limit limit;
		bool coarse = policy_energy_limit(grant, schedule->ops[i].address, &limit) == 1;
		if (coarse != extra->coarse)
			return false;
		if (coarse && (limit.min_interval_ms != extra->limit.min_interval_ms ||
			       limit.resolution_uj != extra->limit.resolution_uj))
			return false;
	}
	return true;
}

void schedule_policy_reloaded(struct msrd *server)
{
	struct schedule *next;

	for (struct schedule *schedule = server->schedules; schedule != NULL; schedule = next) {
		struct policy_subject subject = { .uid = schedule->uid, .gid = schedule->gid,
						  .groups = schedule->groups,
						  .group_count = schedule->group_count };
		struct policy_grant *grant = NULL;

		next = schedule->next;
		if (schedule->stopping)
			continue;
		if (policy_resolve(server->policy, &subject, &grant) < 0 ||
		    !still_allowed(schedule, grant))
			stop(schedule, "the reloaded policy does not allow it");
		else if (!same_coarseness(schedule, grant))
			stop(schedule, "the reloaded policy changes its energy coarseness, which its "
				       "ring's records must keep");
		policy_grant_free(grant);
	}
}

static struct schedule *schedule_new(struct client *client, const struct registered_batch *batch,
				     const struct wire_schedule_start *request)
{
	struct schedule *schedule = aligned_alloc(16, (sizeof(*schedule) + 15u) & ~(size_t)15u);

	if (schedule == NULL)
		return NULL;
	*schedule = (struct schedule){
		.server = client->server,
		.owner = client,
		.account = client->account,
		.uid = client->uid,
		.gid = client->gid,
		.group_count = client->group_count,
		.major = request->major,
		.groups = malloc((client->group_count + 1) * sizeof(gid_t)),
		.persistent = (request->flags & WIRE_SCHEDULE_PERSISTENT) != 0,
		.count = batch->count,
		.period_ns = request->period_ns,
		.ops = malloc(batch->count * sizeof(*batch->ops)),
		.kinds = malloc(batch->count),
		.run = malloc(batch->count * sizeof(*batch->ops)),
		.extra = calloc(batch->count, sizeof(struct schedule_op)),
	};
	if (schedule->ops == NULL || schedule->kinds == NULL || schedule->run == NULL ||
	    schedule->extra == NULL || schedule->groups == NULL) {
		schedule_free(schedule);
		return NULL;
	}
	if (client->group_count > 0)
		memcpy(schedule->groups, client->groups, client->group_count * sizeof(gid_t));
	memcpy(schedule->ops, batch->ops, batch->count * sizeof(*batch->ops));
	memcpy(schedule->kinds, batch->kinds, batch->count);
	keep_limits(schedule, client->grant);
	return schedule;
}

static void reply_started(struct client *client, const struct wire_header *header,
			  const struct schedule *schedule)
{
	struct wire_schedule_started started = { .id = schedule->id,
						 .ring_instance = schedule->ring->instance };
	struct wire_writer writer;
	uint8_t *space = dispatch_reply_begin(client, WIRE_SCHEDULE_STARTED_SIZE, &writer);

	if (space == NULL)
		return;
	wire_put_schedule_started(&writer, &started);
	dispatch_reply_end(client, space, header, &writer, -1);
}

void schedule_handle_start(struct client *client, const struct wire_header *header,
			   const uint8_t *payload, size_t length)
{
	struct msrd *server = client->server;
	struct wire_schedule_start request;
	struct schedule *schedule;
	char reason[160];
	int status = wire_get_schedule_start(payload, length, &request);

	if (status == -EBADMSG) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (status == 0) {
		status = check_start(client, &request, handles_find(client, request.handle), reason,
				     sizeof(reason));
	} else if (status == -ERANGE) {
		snprintf(reason, sizeof(reason), "the period is at least 1 ms and at most a day");
		status = -EINVAL;
	} else {
		snprintf(reason, sizeof(reason), "unknown schedule flags 0x%x", request.flags);
	}
	if (status < 0) {
		refuse(client, header, status, reason);
		return;
	}
	schedule = schedule_new(client, handles_find(client, request.handle), &request);
	status = schedule != NULL ? create_ring(schedule, &request) : -ENOMEM;
	if (status < 0) {
		if (schedule != NULL)
			schedule_free(schedule);
		if (status == -EDQUOT)
			accounts_describe_limit(&server->accounts, client->account,
						ACCOUNT_RING_BYTES, reason, sizeof(reason));
		else
			snprintf(reason, sizeof(reason), "cannot create the ring: %s",
				 status == -ENOSPC ? "ring memory limit reached" : strerror(-status));
		refuse(client, header, status == -EDQUOT ? -ENOSPC : status, reason);
		return;
	}
	/* check_start saw room; the take cannot fail in between (one thread). */
	accounts_take(&server->accounts, schedule->account, ACCOUNT_SCHEDULES, 1);
	schedule->id = ++server->next_schedule_id;
	schedule->next = server->schedules;
	server->schedules = schedule;
	schedule->origin_ns = clock_monotonic_raw_ns();
	run_period(schedule, schedule->origin_ns);
	/* Its first deadline is one bounded period away: arm() cannot stop (and free) it here. */
	arm(schedule, clock_monotonic_raw_ns());
	log_info("client %u (uid %u pid %d) started %sschedule %u: %u ops every %llu ns into ring "
		 "%u.%u.%u",
		 client->number, (unsigned)client->uid, (int)client->pid,
		 schedule->persistent ? "persistent " : "", schedule->id, schedule->count,
		 (unsigned long long)schedule->period_ns, request.major, request.minor,
		 schedule->ring->instance);
	reply_started(client, header, schedule);
}

/* ---- SCHEDULE_STOP ---- */

void schedule_handle_stop(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length)
{
	struct schedule *schedule = client->server->schedules;
	char why[64];
	uint32_t id;

	if (wire_get_u32_payload(payload, length, &id) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	while (schedule != NULL && (schedule->id != id || schedule->stopping))
		schedule = schedule->next;
	if (schedule == NULL) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_NOT_FOUND,
				   "no schedule %u", id);
		return;
	}
	if (schedule->owner != client && !(schedule->persistent && schedule->uid == client->uid)) {
		dispatch_log_refusal(client, header->op, 0, 0, "schedule of another client");
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_DENIED,
				   "schedule %u is not yours to stop", id);
		return;
	}
	snprintf(why, sizeof(why), "stopped by client %u", client->number);
	stop(schedule, why);
	dispatch_reply_empty(client, header);
}
