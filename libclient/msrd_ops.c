/*
 * libclient/msrd_ops.c — the requests of <haecer/msrd.h>: machine info, MSR access and rings,
 * each one haecer__call (the simulator's control is harness/sim_control.c, not the library's).
 */
#include "libclient/msrd_conn.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "hw/msr.h"

_Static_assert(HAECER_TSC_SIMULATED == TSC_SOURCE_SIMULATED &&
		       HAECER_TSC_CPUID_15 == TSC_SOURCE_CPUID_15 &&
		       HAECER_TSC_CPUID_16 == TSC_SOURCE_CPUID_16 &&
		       HAECER_TSC_PLATFORM_INFO == TSC_SOURCE_PLATFORM_INFO &&
		       HAECER_TSC_AMD_P0 == TSC_SOURCE_AMD_P0 &&
		       HAECER_TSC_CALIBRATED == TSC_SOURCE_CALIBRATED &&
		       HAECER_TSC_CRYSTAL_TABLE == TSC_SOURCE_CRYSTAL_TABLE,
	       "HAECER_TSC_* are hw/msr.h's enum tsc_source");

const char *haecer_tsc_source_name(unsigned source)
{
	return tsc_source_name(source);
}

/* The message's fields into the public struct's: both are spelled from the one list of
 * <haecer/machine_fields.h>, so every field has its type, size and place in both. */
#define COPY_FIELD(name, ...)                                                                 \
	_Static_assert(sizeof(out->name) == sizeof(info.name) &&                              \
			       offsetof(struct haecer_machine_info, name) ==                  \
				       offsetof(struct wire_machine_info, name),              \
		       #name " differs");                                                     \
	memcpy(&out->name, &info.name, sizeof(out->name));
#define COPY_TYPED(type, name, ...) COPY_FIELD(name)

int haecer_machine_info(struct haecer_conn *conn, struct haecer_machine_info *out)
{
	struct wire_writer writer = haecer__begin(conn);
	struct wire_machine_info info;
	struct haecer_reply reply;
	int status;

	status = haecer__call_checked(conn, WIRE_OP_MACHINE_INFO, &writer, &reply);
	if (status < 0)
		return status;
	if (wire_get_machine_info(reply.payload, reply.length, &info) < 0)
		return -EPROTO;
	_Static_assert(sizeof(*out) == sizeof(info), "haecer_machine_info is the wire form");
	HAECER_MACHINE_FIELDS(COPY_FIELD, COPY_TYPED, COPY_TYPED, COPY_FIELD, COPY_FIELD,
			      COPY_TYPED)
	return 0;
}

int haecer_msr_read(struct haecer_conn *conn, uint32_t cpu, uint32_t address, uint64_t *value)
{
	struct wire_read_request request = { .cpu = cpu, .address = address };
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	int status;

	wire_put_read_request(&writer, &request);
	status = haecer__call_checked(conn, WIRE_OP_READ, &writer, &reply);
	if (status < 0)
		return status;
	return wire_get_read_reply(reply.payload, reply.length, value) < 0 ? -EPROTO : 0;
}

int haecer_msr_write(struct haecer_conn *conn, uint32_t cpu, uint32_t address, uint64_t value)
{
	struct wire_write_request request = { .cpu = cpu, .address = address, .value = value };
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	int status;

	wire_put_write_request(&writer, &request);
	status = haecer__call_checked(conn, WIRE_OP_WRITE, &writer, &reply);
	if (status < 0)
		return status;
	return reply.length == 0 ? 0 : -EPROTO;
}

int haecer__call_batch(struct haecer_conn *conn, uint16_t op, const struct haecer_msr_op *ops,
		       size_t count, struct haecer_reply *reply)
{
	struct wire_writer writer = haecer__begin(conn);

	if (count == 0 || count > WIRE_MAX_BATCH_OPS)
		return -EINVAL;
	wire_put_batch_header(&writer, (uint32_t)count);
	for (size_t i = 0; i < count; i++) {
		struct wire_batch_op wire = {
			.kind = ops[i].kind,
			.cpu = ops[i].cpu,
			.address = ops[i].address,
			.value = ops[i].kind == HAECER_MSR_WRITE ? ops[i].value : 0,
		};
		wire_put_batch_op(&writer, &wire);
	}
	return haecer__call(conn, op, &writer, reply);
}

int haecer__take_batch_results(const struct haecer_reply *reply, struct haecer_msr_op *ops,
			       size_t count)
{
	uint32_t replied;

	/* A refused batch still carries per-op results saying which op was refused; a reply
	 * without them (malformed request, server limits) has a text detail instead. */
	if (wire_get_batch_count(reply->payload, reply->length, WIRE_BATCH_RESULT_SIZE,
				 WIRE_MAX_BATCH_OPS, &replied) < 0 ||
	    replied != count) {
		if (reply->status == WIRE_STATUS_OK)
			return -EPROTO;
		for (size_t i = 0; i < count; i++)
			ops[i].status = wire_status_to_errno(reply->status);
		return wire_status_to_errno(reply->status);
	}
	for (uint32_t i = 0; i < replied; i++) {
		struct wire_batch_result result;
		wire_get_batch_result(reply->payload, i, &result);
		ops[i].status = wire_status_to_errno(result.status);
		if (ops[i].kind != HAECER_MSR_WRITE && result.status == WIRE_STATUS_OK) {
			ops[i].value = result.value;
			ops[i].total = result.aux;
		}
	}
	return wire_status_to_errno(reply->status);
}

int haecer_msr_batch(struct haecer_conn *conn, struct haecer_msr_op *ops, size_t count)
{
	struct haecer_reply reply;
	int status = haecer__call_batch(conn, WIRE_OP_BATCH, ops, count, &reply);

	if (status < 0)
		return status;
	return haecer__take_batch_results(&reply, ops, count);
}

/* ---- rings ---- */

static void entry_from_wire(const struct wire_ring_entry *wire, struct haecer_ring_entry *entry)
{
	if (entry == NULL)
		return;
	*entry = (struct haecer_ring_entry){
		.major = wire->major,
		.minor = wire->minor,
		.instance = wire->instance,
		.capacity = wire->capacity,
		.flags = wire->flags,
		.producer_pid = wire->producer_pid,
		.consumers = wire->consumers,
		.bytes = wire->bytes,
		.owner_uid = wire->owner_uid,
		.owner_pid = wire->owner_pid,
	};
}

/* A reply that must carry a ring entry and exactly one descriptor. */
static int take_ring_reply(struct haecer_reply *reply, struct haecer_ring_entry *entry, int *fd)
{
	struct wire_ring_entry wire;

	if (wire_get_ring_entry(reply->payload, reply->length, &wire) < 0 || reply->fd < 0) {
		if (reply->fd >= 0)
			close(reply->fd);
		return -EPROTO;
	}
	entry_from_wire(&wire, entry);
	*fd = reply->fd;
	return 0;
}

int haecer_ring_create(struct haecer_conn *conn, const struct haecer_ring_spec *spec,
		       struct haecer_ring_entry *entry, int *fd)
{
	struct wire_ring_create request = {
		.major = spec->major,
		.minor = spec->minor,
		.capacity = spec->capacity,
		.flags = spec->flags,
		.clock = spec->clock,
		.tsc_hz = spec->tsc_hz,
		.counter_count = spec->counter_count,
	};
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	int status;

	*fd = -1;
	if (spec->counter_count > HAECER_RING_MAX_COUNTERS)
		return -EINVAL;
	for (uint32_t i = 0; i < spec->counter_count; i++) {
		const struct haecer_ring_counter *counter = &spec->counters[i];
		struct wire_ring_counter *wire = &request.counters[i];
		memcpy(wire->name, counter->name, sizeof(wire->name));
		wire->id = counter->id;
		wire->kind = counter->kind;
		wire->unit_exponent = counter->unit_exponent;
		wire->package = counter->package;
		wire->cpu = counter->cpu;
	}
	wire_put_ring_create(&writer, &request);
	status = haecer__call_checked(conn, WIRE_OP_RING_CREATE, &writer, &reply);
	if (status < 0)
		return status;
	return take_ring_reply(&reply, entry, fd);
}

int haecer_ring_open(struct haecer_conn *conn, uint16_t major, uint16_t minor, uint32_t instance,
		     struct haecer_ring_entry *entry, int *fd)
{
	struct wire_ring_key key = { .major = major, .minor = minor, .instance = instance };
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	int status;

	*fd = -1;
	wire_put_ring_key(&writer, &key);
	status = haecer__call_checked(conn, WIRE_OP_RING_OPEN, &writer, &reply);
	if (status < 0)
		return status;
	return take_ring_reply(&reply, entry, fd);
}

/* The key right after `entry` in (major, minor, instance) order; false when there is none. */
static bool key_after(const struct wire_ring_entry *entry, struct wire_ring_key *key)
{
	*key = (struct wire_ring_key){ entry->major, entry->minor, entry->instance };
	if (++key->instance != 0)
		return true;
	if (++key->minor != 0)
		return true;
	return ++key->major != 0;
}

int haecer_ring_list(struct haecer_conn *conn, struct haecer_ring_entry *entries, size_t max)
{
	struct wire_ring_key key = { 0, 0, 0 };
	size_t total = 0;

	for (;;) {
		struct wire_writer writer = haecer__begin(conn);
		struct wire_ring_entry wire;
		struct haecer_reply reply;
		uint32_t count;
		uint32_t flags;
		int status;

		wire_put_ring_key(&writer, &key);
		status = haecer__call_checked(conn, WIRE_OP_RING_LIST, &writer, &reply);
		if (status < 0)
			return status;
		if (wire_get_ring_list(reply.payload, reply.length, &count, &flags) < 0)
			return -EPROTO;
		for (uint32_t i = 0; i < count; i++, total++) {
			wire_get_ring_list_entry(reply.payload, i, &wire);
			if (total < max)
				entry_from_wire(&wire, &entries[total]);
		}
		if ((flags & WIRE_RING_LIST_MORE) == 0 || count == 0 || !key_after(&wire, &key))
			break;
	}
	return total > (size_t)INT32_MAX ? INT32_MAX : (int)total;
}
