/*
 * libclient/msrd_resources.c — the resource-management requests of <haecer/msrd.h>: counter
 * slots, 64-bit energy totals, registered batches and schedules, each one haecer__call.
 */
#include "libclient/msrd_conn.h"

#include <errno.h>
#include <unistd.h>
#include <string.h>

/* ---- counter slots ---- */

int haecer_slot_alloc(struct haecer_conn *conn, uint32_t cpu, uint16_t kind, int index,
		      struct haecer_slot *out)
{
	struct wire_slot_alloc request = { .cpu = cpu, .kind = kind, .index = index };
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	struct wire_slot slot;
	int status;

	wire_put_slot_alloc(&writer, &request);
	status = haecer__call_checked(conn, WIRE_OP_SLOT_ALLOC, &writer, &reply);
	if (status < 0)
		return status;
	if (wire_get_slot(reply.payload, reply.length, &slot) < 0)
		return -EPROTO;
	*out = (struct haecer_slot){
		.id = slot.id,
		.cpu = slot.cpu,
		.kind = slot.kind,
		.index = slot.index,
		.width = slot.width,
		.counter_address = slot.counter_address,
		.control_address = slot.control_address,
	};
	return 0;
}

int haecer_slot_program(struct haecer_conn *conn, uint32_t slot_id, uint64_t config)
{
	struct wire_slot_program request = { .id = slot_id, .config = config };
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;

	wire_put_slot_program(&writer, &request);
	return haecer__call_checked(conn, WIRE_OP_SLOT_PROGRAM, &writer, &reply);
}

/* SLOT_CONTROL and SLOT_READ requests: a word (action or flags) and the ids, encoded by proto
 * from the caller's array. */
static int put_ids(struct wire_writer *writer, uint16_t word, const uint32_t *ids, size_t count)
{
	if (count == 0 || count > WIRE_MAX_SLOT_IDS)
		return -EINVAL;
	wire_put_slot_id_list(writer, word, ids, (uint32_t)count);
	return 0;
}

int haecer_slot_control(struct haecer_conn *conn, const uint32_t *slot_ids, size_t count,
			uint16_t action)
{
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	int status = put_ids(&writer, action, slot_ids, count);

	if (status < 0)
		return status;
	return haecer__call_checked(conn, WIRE_OP_SLOT_CONTROL, &writer, &reply);
}

int haecer_slot_read(struct haecer_conn *conn, const uint32_t *slot_ids, size_t count,
		     uint64_t *values, bool synchronized)
{
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	int status = put_ids(&writer, synchronized ? WIRE_SLOT_READ_SYNCHRONIZED : 0, slot_ids,
			     count);

	if (status < 0)
		return status;
	status = haecer__call_checked(conn, WIRE_OP_SLOT_READ, &writer, &reply);
	if (status < 0)
		return status;
	return wire_get_slot_values(reply.payload, reply.length, values, (uint32_t)count) < 0
		       ? -EPROTO
		       : 0;
}

/* A request whose payload is one u32 and whose OK reply is empty. */
static int call_with_id(struct haecer_conn *conn, uint16_t op, uint32_t id)
{
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	int status;

	wire_put_u32(&writer, id);
	status = haecer__call_checked(conn, op, &writer, &reply);
	if (status < 0)
		return status;
	return reply.length == 0 ? 0 : -EPROTO;
}

int haecer_slot_free(struct haecer_conn *conn, uint32_t slot_id)
{
	return call_with_id(conn, WIRE_OP_SLOT_FREE, slot_id);
}

/* ---- energy ---- */

static int energy_read(struct haecer_conn *conn, const struct wire_energy_read_request *request,
		       uint64_t *raw, uint64_t *total)
{
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	uint64_t raw_value, total_value;
	int status;

	wire_put_energy_read_request(&writer, request);
	status = haecer__call_checked(conn, WIRE_OP_ENERGY_READ, &writer, &reply);
	if (status < 0)
		return status;
	if (wire_get_energy_reading(reply.payload, reply.length, &raw_value, &total_value) < 0)
		return -EPROTO;
	if (raw != NULL)
		*raw = raw_value;
	if (total != NULL)
		*total = total_value;
	return 0;
}

int haecer_energy_read(struct haecer_conn *conn, uint32_t cpu, uint32_t address, uint64_t *raw,
		       uint64_t *total)
{
	struct wire_energy_read_request request = { .cpu = cpu, .address = address };

	return energy_read(conn, &request, raw, total);
}

int haecer__energy_read_region(struct haecer_conn *conn, uint32_t cpu, uint32_t address,
			       uint32_t region_edges_us)
{
	struct wire_energy_read_request request = { .cpu = cpu, .address = address,
						    .flags = WIRE_ENERGY_READ_REGION,
						    .region_edges_us = region_edges_us };

	if (!(haecer_server_info(conn)->features & HAECER_FEATURE_ENERGY_REGION))
		return -EOPNOTSUPP; /* an older msrd would refuse the flags as malformed */
	_Static_assert(HAECER_FEATURE_ENERGY_REGION == WIRE_FEATURE_ENERGY_REGION,
		       "the public feature bit is the wire's");
	return energy_read(conn, &request, NULL, NULL);
}

int haecer_energy_page_open(struct haecer_conn *conn, uint32_t address, uint32_t rate_hz,
			    struct haecer_energy_page_info *info, int *fd)
{
	return haecer_energy_page_request(conn, address, rate_hz, 0, info, fd);
}

int haecer_energy_page_request(struct haecer_conn *conn, uint32_t address, uint32_t rate_hz,
			       uint32_t flags, struct haecer_energy_page_info *info, int *fd)
{
	struct wire_energy_page_request request = {
		.address = address, .rate_hz = rate_hz,
		.flags = flags & HAECER_ENERGY_PAGE_PRECISE ? WIRE_ENERGY_PAGE_PRECISE : 0 };
	struct wire_writer writer = haecer__begin(conn);
	struct wire_energy_page page;
	struct haecer_reply reply;
	int status;

	*fd = -1;
	wire_put_energy_page_request(&writer, &request);
	status = haecer__call_checked(conn, WIRE_OP_ENERGY_PAGE, &writer, &reply);
	if (status < 0)
		return status;
	if (reply.fd < 0 || wire_get_energy_page(reply.payload, reply.length, &page) < 0) {
		if (reply.fd >= 0)
			close(reply.fd);
		return -EPROTO;
	}
	*info = (struct haecer_energy_page_info){
		.address = page.address,
		.coarse = (page.flags & WIRE_ENERGY_PAGE_COARSE) != 0,
		.precise_edges = (page.flags & WIRE_ENERGY_PAGE_PRECISE) != 0,
		.entry_count = page.entry_count,
		.rate_hz = page.rate_hz,
		.min_interval_ms = page.min_interval_ms,
		.resolution_uj = page.resolution_uj,
		.bytes = page.bytes,
	};
	*fd = reply.fd;
	return 0;
}

int haecer_energy_grant(struct haecer_conn *conn, uint32_t address,
			struct haecer_energy_grant *out)
{
	struct wire_energy_grant_request request = { .address = address };
	struct wire_writer writer = haecer__begin(conn);
	struct wire_energy_grant grant;
	struct haecer_reply reply;
	int status;

	wire_put_energy_grant_request(&writer, &request);
	status = haecer__call_checked(conn, WIRE_OP_ENERGY_GRANT, &writer, &reply);
	if (status < 0)
		return status;
	if (wire_get_energy_grant(reply.payload, reply.length, &grant) < 0)
		return -EPROTO;
	_Static_assert(HAECER_ENERGY_GRANT_COARSE == WIRE_ENERGY_GRANT_COARSE &&
			       HAECER_ENERGY_GRANT_POLICY_COARSE == WIRE_ENERGY_GRANT_POLICY_COARSE,
		       "the public flags are the wire's");
	*out = (struct haecer_energy_grant){
		.address = grant.address,
		.flags = grant.flags,
		.min_interval_ms = grant.min_interval_ms,
		.policy_min_interval_ms = grant.policy_min_interval_ms,
		.resolution_uj = grant.resolution_uj,
		.policy_resolution_uj = grant.policy_resolution_uj,
	};
	return 0;
}

/* ---- registered batches and schedules ---- */

int haecer_batch_register(struct haecer_conn *conn, const struct haecer_msr_op *ops, size_t count,
			  uint32_t *handle)
{
	struct haecer_reply reply;
	int status = haecer__call_batch(conn, WIRE_OP_BATCH_REGISTER, ops, count, &reply);

	if (status < 0)
		return status;
	if (reply.status != WIRE_STATUS_OK)
		return wire_status_to_errno(reply.status);
	return wire_get_u32_payload(reply.payload, reply.length, handle) < 0 ? -EPROTO : 0;
}

int haecer_batch_run(struct haecer_conn *conn, uint32_t handle, struct haecer_msr_op *ops,
		     size_t count)
{
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	int status;

	if (count == 0 || count > WIRE_MAX_BATCH_OPS)
		return -EINVAL;
	wire_put_batch_run(&writer, handle, (uint32_t)count);
	status = haecer__call(conn, WIRE_OP_BATCH_RUN, &writer, &reply);
	if (status < 0)
		return status;
	return haecer__take_batch_results(&reply, ops, count);
}

int haecer_batch_release(struct haecer_conn *conn, uint32_t handle)
{
	return call_with_id(conn, WIRE_OP_BATCH_RELEASE, handle);
}

int haecer_schedule_start(struct haecer_conn *conn, const struct haecer_schedule_spec *spec,
			  uint32_t *schedule_id, uint32_t *ring_instance)
{
	struct wire_schedule_start request = {
		.handle = spec->handle,
		.flags = spec->flags,
		.period_ns = spec->period_ns,
		.major = spec->major,
		.minor = spec->minor,
		.capacity = spec->capacity,
	};
	struct wire_writer writer = haecer__begin(conn);
	struct wire_schedule_started started;
	struct haecer_reply reply;
	int status;

	wire_put_schedule_start(&writer, &request);
	status = haecer__call_checked(conn, WIRE_OP_SCHEDULE_START, &writer, &reply);
	if (status < 0)
		return status;
	if (wire_get_schedule_started(reply.payload, reply.length, &started) < 0)
		return -EPROTO;
	if (schedule_id != NULL)
		*schedule_id = started.id;
	if (ring_instance != NULL)
		*ring_instance = started.ring_instance;
	return 0;
}

int haecer_schedule_stop(struct haecer_conn *conn, uint32_t schedule_id)
{
	return call_with_id(conn, WIRE_OP_SCHEDULE_STOP, schedule_id);
}
