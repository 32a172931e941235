/*
 * server/dispatch.c — protocol handling: one handler per op of protocol v1.
 *
 * A frame whose payload does not have the exact shape of its op is a protocol error: an ERROR
 * frame, then the connection closes. A well-formed request the server cannot grant (policy,
 * limits, values out of range, ops it does not implement) gets an error reply with a status and
 * a short text, and the connection stays usable. Every policy refusal is also one log line.
 */
#include "server/server.h"
#include "server/sim_requests.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REPLY_ROOM(payload) (WIRE_HEADER_SIZE + (payload))

void dispatch_log_refusal(struct client *client, uint16_t op, uint32_t cpu, uint32_t address,
			  const char *reason)
{
	client->refusal_logged = true;
	if (client_refusal_loggable(client))
		log_notice("refused: uid %u pid %d op %s cpu %u address 0x%x: %s",
			   (unsigned)client->uid, (int)client->pid, wire_op_name(op), cpu, address,
			   reason);
}

static void log_ring_refusal(struct client *client, uint16_t op, uint16_t major,
			     uint16_t minor, const char *reason)
{
	client->refusal_logged = true;
	if (client_refusal_loggable(client))
		log_notice("refused: uid %u pid %d op %s ring %u.%u: %s", (unsigned)client->uid,
			   (int)client->pid, wire_op_name(op), major, minor, reason);
}

void dispatch_malformed(struct client *client, const struct wire_header *header, size_t length)
{
	char detail[96];

	snprintf(detail, sizeof(detail), "%s payload of %zu bytes has the wrong shape",
		 wire_op_name(header->op), length);
	client_fail(client, header->request_id, WIRE_STATUS_MALFORMED, detail);
}

/* Reserve a reply, let the caller write its payload through `writer`, then commit. */
uint8_t *dispatch_reply_begin(struct client *client, size_t payload_room,
			      struct wire_writer *writer)
{
	uint8_t *space = client_reply_space(client, REPLY_ROOM(payload_room));

	if (space != NULL)
		wire_writer_init(writer, space + WIRE_HEADER_SIZE, payload_room);
	return space;
}

void dispatch_reply_end(struct client *client, uint8_t *space, const struct wire_header *request,
			const struct wire_writer *writer, int fd)
{
	int length = wire_frame_finish(space, REPLY_ROOM(writer->size), request->op,
				       WIRE_FLAG_REPLY, WIRE_STATUS_OK, request->request_id,
				       writer->used);

	if (length < 0 || writer->overflow) {
		/* Cannot happen: every payload_room is the message's maximum size. */
		fatal("reply to %s does not fit its room", wire_op_name(request->op));
	}
	client_reply_commit(client, (size_t)length, fd);
}

void dispatch_reply_empty(struct client *client, const struct wire_header *request)
{
	struct wire_writer writer;
	uint8_t *space = dispatch_reply_begin(client, 0, &writer);

	if (space != NULL)
		dispatch_reply_end(client, space, request, &writer, -1);
}

static uint64_t client_features(const struct client *client)
{
	uint64_t features = WIRE_FEATURE_MSR | WIRE_FEATURE_RINGS | WIRE_FEATURE_ENERGY |
			    WIRE_FEATURE_HANDLES | WIRE_FEATURE_SCHEDULES | WIRE_FEATURE_ENERGY_PAGE |
			    WIRE_FEATURE_ENERGY_REGION;

	if (backend_kind(client->server->backend) == BACKEND_SIM &&
	    policy_allows_sim_control(client->grant))
		features |= WIRE_FEATURE_SIM_CONTROL;
	/* Slots need a backend that programs counters: on perf, powercap or a read-only msr
	 * device the counters come from the perf broker instead (libhaecer then uses it). */
	if (client->server->slots.gp_count + client->server->slots.fixed_count > 0 &&
	    backend_programs_pmcs(client->server->backend))
		features |= WIRE_FEATURE_SLOTS;
	if (perf_broker_enabled(client->server))
		features |= WIRE_FEATURE_PERF;
	return features;
}

static void handle_hello(struct client *client, const struct wire_header *header,
			 const uint8_t *payload, size_t length)
{
	const struct msrd_config *config = client->server->config;
	struct wire_hello_request request;
	struct wire_hello_reply hello;
	struct wire_writer writer;
	uint8_t *space;
	int status = wire_get_hello_request(payload, length, &request);

	if (status == -EBADMSG) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (status < 0) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "HELLO flags must be 0");
		return;
	}
	if (request.min_version > WIRE_VERSION || request.max_version < WIRE_VERSION) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_VERSION,
				   "client speaks versions %u..%u, this server speaks %u",
				   request.min_version, request.max_version, WIRE_VERSION);
		return;
	}
	if (log_get_level() >= LOG_LEVEL_DEBUG) {
		char name[4 * WIRE_NAME_MAX + 1];
		log_debug("client %u (uid %u pid %d) is \"%s\"", client->number,
			  (unsigned)client->uid, (int)client->pid,
			  log_escape(name, sizeof(name), request.client_name,
				     sizeof(request.client_name)));
	}
	hello = (struct wire_hello_reply){
		.version = WIRE_VERSION,
		.backend = (uint16_t)backend_kind(client->server->backend),
		.max_frame = WIRE_MAX_FRAME,
		.max_batch_ops = WIRE_MAX_BATCH_OPS,
		.max_in_flight = CLIENT_MAX_IN_FLIGHT,
		.max_rings = config->max_rings_per_client,
		.uid = (uint32_t)client->uid,
		.gid = (uint32_t)client->gid,
		.pid = (uint32_t)client->pid,
		.features = client_features(client),
	};
	snprintf(hello.server_version, sizeof(hello.server_version), "%s", MSRD_VERSION);
	space = dispatch_reply_begin(client, WIRE_HELLO_REPLY_SIZE, &writer);
	if (space == NULL)
		return;
	wire_put_hello_reply(&writer, &hello);
	dispatch_reply_end(client, space, header, &writer, -1);
}

static void handle_machine_info(struct client *client, const struct wire_header *header,
				const uint8_t *payload, size_t length)
{
	struct msrd *server = client->server;
	struct wire_writer writer;
	uint8_t *space;

	(void)payload; /* a MACHINE_INFO request has none */
	if (length != 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	space = dispatch_reply_begin(client, server->machine_reply_length, &writer);
	if (space == NULL)
		return;
	wire_put_bytes(&writer, server->machine_reply, server->machine_reply_length);
	dispatch_reply_end(client, space, header, &writer, -1);
}

/* One op of one kind from the scratch arrays. */
static void exec_one(struct client *client, const struct wire_header *header, uint8_t kind,
		     const struct msr_op *op)
{
	struct msrd *server = client->server;
	struct msr_request request = {
		.op = header->op,
		.request_id = header->request_id,
		.ops = server->scratch,
		.kinds = server->scratch_kinds,
		.count = 1,
	};

	server->scratch[0] = *op;
	server->scratch_kinds[0] = kind;
	msr_exec_request(client, &request);
}

static void handle_read(struct client *client, const struct wire_header *header,
			const uint8_t *payload, size_t length)
{
	struct wire_read_request request;

	if (wire_get_read_request(payload, length, &request) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	energy_pages_note_read(client, request.cpu, request.address, false);
	exec_one(client, header, WIRE_BATCH_READ,
		 &(struct msr_op){ .cpu = request.cpu, .address = request.address });
}

static void handle_energy_read(struct client *client, const struct wire_header *header,
			       const uint8_t *payload, size_t length)
{
	struct wire_energy_read_request request;

	if (wire_get_energy_read_request(payload, length, &request) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	energy_pages_note_read(client, request.cpu, request.address, true);
	if (request.flags & WIRE_ENERGY_READ_REGION)
		energy_pages_note_region(client, request.region_edges_us);
	exec_one(client, header, WIRE_BATCH_ENERGY_READ,
		 &(struct msr_op){ .cpu = request.cpu, .address = request.address });
}

static void handle_write(struct client *client, const struct wire_header *header,
			 const uint8_t *payload, size_t length)
{
	struct wire_write_request request;

	if (wire_get_write_request(payload, length, &request) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	exec_one(client, header, WIRE_BATCH_WRITE,
		 &(struct msr_op){ .cpu = request.cpu, .address = request.address,
				   .value = request.value, .write = true });
}

int dispatch_decode_batch(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length, uint32_t *count)
{
	int status = msr_exec_decode_batch(payload, length, client->server->scratch,
					   client->server->scratch_kinds, count);

	if (status == -EBADMSG)
		dispatch_malformed(client, header, length);
	else if (status < 0)
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "a batch has 1..%u ops and flags 0", WIRE_MAX_BATCH_OPS);
	return status;
}

static void handle_batch(struct client *client, const struct wire_header *header,
			 const uint8_t *payload, size_t length)
{
	struct msr_request request = {
		.op = header->op,
		.request_id = header->request_id,
		.ops = client->server->scratch,
		.kinds = client->server->scratch_kinds,
	};

	if (dispatch_decode_batch(client, header, payload, length, &request.count) < 0)
		return;
	msr_exec_request(client, &request);
}

/* ---- rings ---- */

static void reply_ring(struct client *client, const struct wire_header *header,
		       const struct ring_entry *entry, int fd)
{
	struct wire_ring_entry wire;
	struct wire_writer writer;
	uint8_t *space = dispatch_reply_begin(client, WIRE_RING_ENTRY_SIZE, &writer);

	if (space == NULL) {
		close(fd);
		return;
	}
	ringdir_entry_to_wire(entry, &wire);
	wire_put_ring_entry(&writer, &wire);
	dispatch_reply_end(client, space, header, &writer, fd);
}

/* Room for one more ring reference on this connection and for its uid; false after refusing. */
static bool ring_room(struct client *client, const struct wire_header *header)
{
	struct msrd *server = client->server;
	char reason[160];

	if (client->ring_count >= server->config->max_rings_per_client)
		snprintf(reason, sizeof(reason),
			 "this connection holds %u rings already (--max-rings-per-client)",
			 client->ring_count);
	else if (client->account->used[ACCOUNT_RINGS] >= server->accounts.limits[ACCOUNT_RINGS])
		accounts_describe_limit(&server->accounts, client->account, ACCOUNT_RINGS, reason,
					sizeof(reason));
	else
		return true;
	client_reply_error(client, header->op, header->request_id, WIRE_STATUS_LIMIT, "%s", reason);
	return false;
}

/* A refused RING_CREATE: which limit, or what went wrong. */
static void refuse_ring_create(struct client *client, const struct wire_header *header,
			       const struct wire_ring_create *request, int status)
{
	char reason[160];

	if (status == -EDQUOT)
		accounts_describe_limit(&client->server->accounts, client->account,
					ACCOUNT_RING_BYTES, reason, sizeof(reason));
	else if (status == -ENOSPC)
		snprintf(reason, sizeof(reason), "ring memory limit reached (--ring-memory-mib)");
	else
		snprintf(reason, sizeof(reason), "%s", strerror(-status));
	if (status == -EDQUOT || status == -ENOSPC)
		log_ring_refusal(client, header->op, request->major, request->minor, reason);
	client_reply_error(client, header->op, header->request_id,
			   status == -EDQUOT ? WIRE_STATUS_LIMIT : wire_status_from_errno(status),
			   "cannot create the ring: %s", reason);
}

static void handle_ring_create(struct client *client, const struct wire_header *header,
			       const uint8_t *payload, size_t length)
{
	static struct wire_ring_create request; /* 800 bytes: not on the stack, one thread */
	struct ring_entry *entry;
	int status = wire_get_ring_create(payload, length, &request);
	int fd;

	if (status == -EBADMSG) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (status < 0) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "at most %u counters per ring", WIRE_MAX_RING_COUNTERS);
		return;
	}
	if (!policy_allows_create_ring(client->grant, request.major)) {
		log_ring_refusal(client, header->op, request.major, request.minor,
				 "major not granted for creating rings");
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_DENIED,
				   "uid %u may not create rings of major %u", (unsigned)client->uid,
				   request.major);
		return;
	}
	if (!ring_room(client, header))
		return;
	status = ringdir_create(&client->server->rings, client, client->account,
				(int32_t)client->pid, &request, &entry, &fd);
	if (status < 0) {
		refuse_ring_create(client, header, &request, status);
		return;
	}
	status = client_add_ring(client, entry, true);
	if (status < 0) {
		ringdir_release(&client->server->rings, entry, true, msrd_now_ns());
		close(fd);
		client_reply_error(client, header->op, header->request_id,
				   wire_status_from_errno(status), "cannot track the ring");
		return;
	}
	log_info("client %u (uid %u pid %d) created ring %u.%u.%u (%u records)", client->number,
		 (unsigned)client->uid, (int)client->pid, entry->major, entry->minor,
		 entry->instance, entry->capacity);
	reply_ring(client, header, entry, fd);
}

/* A ring msrd produces carries registers read under its starter's grant: the opener must be
 * allowed to read each of them, and at least as coarsely. 0, or -EPERM with the reason. */
static int check_ring_readings(const struct client *client, const struct ring_entry *entry,
			       char *reason, size_t size)
{
	for (uint32_t i = 0; i < entry->reading_count; i++) {
		const struct ring_reading *reading = &entry->readings[i];
		struct policy_energy_limit mine;
		if (!policy_allows_read(client->grant, reading->address))
			return snprintf(reason, size, "its counter %u reads MSR 0x%x, which uid %u "
					"may not read", i, reading->address,
					(unsigned)client->uid), -EPERM;
		if (policy_energy_limit(client->grant, reading->address, &mine) != 1)
			continue;
		if (!reading->coarse || reading->limit.resolution_uj < mine.resolution_uj ||
		    reading->limit.min_interval_ms < mine.min_interval_ms)
			return snprintf(reason, size, "its counter %u reads MSR 0x%x more finely "
					"than uid %u's coarse grant allows", i, reading->address,
					(unsigned)client->uid), -EPERM;
	}
	return 0;
}

static void handle_ring_open(struct client *client, const struct wire_header *header,
			     const uint8_t *payload, size_t length)
{
	struct wire_ring_key key;
	struct ring_entry *entry;
	char reason[160];
	int status;
	int fd;

	if (wire_get_ring_key(payload, length, &key) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (!policy_allows_monitor(client->grant, key.major)) {
		log_ring_refusal(client, header->op, key.major, key.minor,
				 "major not granted for monitoring");
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_DENIED,
				   "uid %u may not monitor rings of major %u", (unsigned)client->uid,
				   key.major);
		return;
	}
	if (!ring_room(client, header))
		return;
	status = ringdir_find(&client->server->rings, key.major, key.minor, key.instance, &entry);
	if (status < 0) {
		client_reply_error(client, header->op, header->request_id,
				   wire_status_from_errno(status), "no ring %u.%u.%u", key.major,
				   key.minor, key.instance);
		return;
	}
	if (check_ring_readings(client, entry, reason, sizeof(reason)) < 0) {
		log_ring_refusal(client, header->op, key.major, key.minor, reason);
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_DENIED,
				   "ring %u.%u.%u: %s", entry->major, entry->minor, entry->instance,
				   reason);
		return;
	}
	status = ringdir_open(&client->server->rings, entry, &fd);
	if (status == 0) {
		status = client_add_ring(client, entry, false);
		if (status < 0) {
			ringdir_release(&client->server->rings, entry, false, msrd_now_ns());
			close(fd);
		}
	}
	if (status < 0) {
		client_reply_error(client, header->op, header->request_id,
				   wire_status_from_errno(status), "cannot open ring %u.%u.%u: %s",
				   entry->major, entry->minor, entry->instance, strerror(-status));
		return;
	}
	reply_ring(client, header, entry, fd);
}

static void handle_ring_list(struct client *client, const struct wire_header *header,
			     const uint8_t *payload, size_t length)
{
	const struct ringdir *dir = &client->server->rings;
	struct wire_writer writer;
	struct wire_writer count_writer;
	struct wire_ring_key key;
	uint32_t count = 0;
	uint32_t flags = 0;
	uint8_t *space;
	size_t first;
	size_t shown;

	if (wire_get_ring_key(payload, length, &key) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	first = ringdir_lower_bound(dir, key.major, key.minor, key.instance);
	shown = dir->count - first < WIRE_RING_LIST_MAX ? dir->count - first : WIRE_RING_LIST_MAX;
	space = dispatch_reply_begin(client, WIRE_RING_LIST_HEADER_SIZE + shown * WIRE_RING_ENTRY_SIZE,
			    &writer);
	if (space == NULL)
		return;
	wire_put_u32(&writer, 0);
	wire_put_u32(&writer, 0);
	for (size_t index = first; index < dir->count; index++) {
		struct wire_ring_entry wire;
		if (!policy_allows_monitor(client->grant, dir->entries[index]->major))
			continue;
		if (count == WIRE_RING_LIST_MAX) {
			flags |= WIRE_RING_LIST_MORE;
			break;
		}
		ringdir_entry_to_wire(dir->entries[index], &wire);
		wire_put_ring_entry(&writer, &wire);
		count++;
	}
	wire_writer_init(&count_writer, writer.data, WIRE_RING_LIST_HEADER_SIZE);
	wire_put_u32(&count_writer, count);
	wire_put_u32(&count_writer, flags);
	dispatch_reply_end(client, space, header, &writer, -1);
}

/* Every op of proto/wire_ops.h has its handler here as handler_NAME: an op added there without
 * one does not build. ERROR is the server's to send, never a request. */
typedef void dispatch_handler(struct client *client, const struct wire_header *header,
			      const uint8_t *payload, size_t length);
#define handler_HELLO handle_hello
#define handler_MACHINE_INFO handle_machine_info
#define handler_READ handle_read
#define handler_WRITE handle_write
#define handler_BATCH handle_batch
#define handler_RING_CREATE handle_ring_create
#define handler_RING_OPEN handle_ring_open
#define handler_RING_LIST handle_ring_list
#define handler_SIM_ADVANCE sim_requests_handle_advance
#define handler_SIM_SET_LOAD sim_requests_handle_set_load
#define handler_SIM_ENERGY_TRUTH sim_requests_handle_truth
#define handler_SIM_ENERGY_AT sim_requests_handle_energy_at
#define handler_SIM_POWER_TRACE sim_requests_handle_power_trace
#define handler_SLOT_ALLOC slots_handle_alloc
#define handler_SLOT_PROGRAM slots_handle_program
#define handler_SLOT_CONTROL slots_handle_control
#define handler_SLOT_READ slots_handle_read
#define handler_SLOT_FREE slots_handle_free
#define handler_ENERGY_READ handle_energy_read
#define handler_ENERGY_PAGE energy_pages_handle_request
#define handler_ENERGY_GRANT energy_grant_handle_request
#define handler_BATCH_REGISTER handles_handle_register
#define handler_BATCH_RUN handles_handle_run
#define handler_BATCH_RELEASE handles_handle_release
#define handler_SCHEDULE_START schedule_handle_start
#define handler_SCHEDULE_STOP schedule_handle_stop
#define handler_PERF_OPEN perf_requests_handle_open
#define handler_ERROR NULL

/* By op code (every code is below 0x100), so a frame finds its handler in one load. */
#define HANDLER_ENTRY(name, code, writes) [code] = handler_##name,
static dispatch_handler *const handlers[0x100] = { WIRE_OPS(HANDLER_ENTRY) };
#undef HANDLER_ENTRY

void dispatch_frame(struct client *client, const struct wire_header *header,
		    const uint8_t *payload, size_t length)
{
	dispatch_handler *handle;

	client->refusal_logged = false;
	energy_pages_client_request(client);
	if ((header->flags & WIRE_FLAG_REPLY) != 0 || header->status != 0) {
		client_fail(client, header->request_id, WIRE_STATUS_MALFORMED,
			    "a request has no reply flag and status 0");
		return;
	}
	handle = header->op < sizeof(handlers) / sizeof(handlers[0]) ? handlers[header->op] : NULL;
	if (handle == NULL) {
		client_reply_error(client, header->op, header->request_id,
				   WIRE_STATUS_UNSUPPORTED, "op 0x%04x (%s) is not implemented",
				   header->op, wire_op_name(header->op));
		return;
	}
	handle(client, header, payload, length);
}
