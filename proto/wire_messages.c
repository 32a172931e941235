/*
 * proto/wire_messages.c — payload encoders and exact-length decoders of protocol v1.
 *
 * Every decoder reads through a wire_reader bounded by the payload length and ends with
 * wire_reader_finish, so a payload of any other length than the message's is -EBADMSG; reserved
 * fields must be zero so they can be given a meaning later.
 */
#include "proto/wire.h"

#include <errno.h>
#include <string.h>

static int finish_with_reserved(const struct wire_reader *reader, uint64_t reserved)
{
	int status = wire_reader_finish(reader);
	if (status < 0)
		return status;
	return reserved == 0 ? 0 : -EINVAL;
}

void wire_put_hello_request(struct wire_writer *writer, const struct wire_hello_request *message)
{
	wire_put_u16(writer, message->min_version);
	wire_put_u16(writer, message->max_version);
	wire_put_u32(writer, message->flags);
	wire_put_name(writer, message->client_name, WIRE_NAME_MAX);
}

int wire_get_hello_request(const void *payload, size_t length, struct wire_hello_request *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	out->min_version = wire_get_u16(&reader);
	out->max_version = wire_get_u16(&reader);
	out->flags = wire_get_u32(&reader);
	wire_get_name(&reader, out->client_name, WIRE_NAME_MAX);
	return finish_with_reserved(&reader, out->flags);
}

void wire_put_hello_reply(struct wire_writer *writer, const struct wire_hello_reply *message)
{
	wire_put_u16(writer, message->version);
	wire_put_u16(writer, message->backend);
	wire_put_u32(writer, message->max_frame);
	wire_put_u32(writer, message->max_batch_ops);
	wire_put_u32(writer, message->max_in_flight);
	wire_put_u32(writer, message->max_rings);
	wire_put_u32(writer, message->uid);
	wire_put_u32(writer, message->gid);
	wire_put_u32(writer, message->pid);
	wire_put_u64(writer, message->features);
	wire_put_name(writer, message->server_version, WIRE_NAME_MAX);
}

int wire_get_hello_reply(const void *payload, size_t length, struct wire_hello_reply *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	out->version = wire_get_u16(&reader);
	out->backend = wire_get_u16(&reader);
	out->max_frame = wire_get_u32(&reader);
	out->max_batch_ops = wire_get_u32(&reader);
	out->max_in_flight = wire_get_u32(&reader);
	out->max_rings = wire_get_u32(&reader);
	out->uid = wire_get_u32(&reader);
	out->gid = wire_get_u32(&reader);
	out->pid = wire_get_u32(&reader);
	out->features = wire_get_u64(&reader);
	wire_get_name(&reader, out->server_version, WIRE_NAME_MAX);
	return wire_reader_finish(&reader);
}

void wire_put_read_request(struct wire_writer *writer, const struct wire_read_request *message)
{
	wire_put_u32(writer, message->cpu);
	wire_put_u32(writer, message->address);
}

int wire_get_read_request(const void *payload, size_t length, struct wire_read_request *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	out->cpu = wire_get_u32(&reader);
	out->address = wire_get_u32(&reader);
	return wire_reader_finish(&reader);
}

int wire_get_u64_payload(const void *payload, size_t length, uint64_t *value)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	*value = wire_get_u64(&reader);
	return wire_reader_finish(&reader);
}

int wire_get_read_reply(const void *payload, size_t length, uint64_t *value)
{
	return wire_get_u64_payload(payload, length, value);
}

void wire_put_write_request(struct wire_writer *writer, const struct wire_write_request *message)
{
	wire_put_u32(writer, message->cpu);
	wire_put_u32(writer, message->address);
	wire_put_u64(writer, message->value);
}

int wire_get_write_request(const void *payload, size_t length, struct wire_write_request *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	out->cpu = wire_get_u32(&reader);
	out->address = wire_get_u32(&reader);
	out->value = wire_get_u64(&reader);
	return wire_reader_finish(&reader);
}

/* ---- batches ---- */

void wire_put_batch_header(struct wire_writer *writer, uint32_t count)
{
	wire_put_u32(writer, count);
	wire_put_u32(writer, 0);
}

void wire_put_batch_op(struct wire_writer *writer, const struct wire_batch_op *op)
{
	wire_put_u16(writer, op->kind);
	wire_put_u16(writer, op->flags);
	wire_put_u32(writer, op->cpu);
	wire_put_u32(writer, op->address);
	wire_put_u32(writer, 0);
	wire_put_u64(writer, op->value);
}

void wire_put_batch_result(struct wire_writer *writer, const struct wire_batch_result *result)
{
	wire_put_u64(writer, result->value);
	wire_put_u64(writer, result->aux);
	wire_put_u16(writer, result->status);
	wire_put_u16(writer, 0);
	wire_put_u32(writer, 0);
}

int wire_get_batch_count(const void *payload, size_t length, size_t element_size,
			 uint32_t max_ops, uint32_t *count)
{
	struct wire_reader reader;
	uint32_t flags;

	wire_reader_init(&reader, payload, WIRE_BATCH_HEADER_SIZE < length ? WIRE_BATCH_HEADER_SIZE
									   : length);
	*count = wire_get_u32(&reader);
	flags = wire_get_u32(&reader);
	if (wire_reader_finish(&reader) < 0)
		return -EBADMSG;
	if (element_size == 0 || (length - WIRE_BATCH_HEADER_SIZE) / element_size != *count ||
	    (length - WIRE_BATCH_HEADER_SIZE) % element_size != 0)
		return -EBADMSG;
	if (flags != 0 || *count == 0 || *count > max_ops)
		return -EINVAL;
	return 0;
}

int wire_get_batch_op(const void *payload, uint32_t index, struct wire_batch_op *out)
{
	struct wire_reader reader;
	uint32_t reserved;

	wire_reader_init(&reader,
			 (const uint8_t *)payload + WIRE_BATCH_HEADER_SIZE +
				 (size_t)index * WIRE_BATCH_OP_SIZE,
			 WIRE_BATCH_OP_SIZE);
	out->kind = wire_get_u16(&reader);
	out->flags = wire_get_u16(&reader);
	out->cpu = wire_get_u32(&reader);
	out->address = wire_get_u32(&reader);
	reserved = wire_get_u32(&reader);
	out->value = wire_get_u64(&reader);
	return out->flags == 0 && reserved == 0 ? 0 : -EINVAL;
}

void wire_get_batch_result(const void *payload, uint32_t index, struct wire_batch_result *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader,
			 (const uint8_t *)payload + WIRE_BATCH_HEADER_SIZE +
				 (size_t)index * WIRE_BATCH_RESULT_SIZE,
			 WIRE_BATCH_RESULT_SIZE);
	out->value = wire_get_u64(&reader);
	out->aux = wire_get_u64(&reader);
	out->status = wire_get_u16(&reader);
}

/* ---- rings ---- */

static void put_ring_counter(struct wire_writer *writer, const struct wire_ring_counter *counter)
{
	wire_put_name(writer, counter->name, WIRE_NAME_MAX);
	wire_put_u32(writer, counter->id);
	wire_put_u16(writer, counter->kind);
	wire_put_u16(writer, (uint16_t)counter->unit_exponent);
	wire_put_u32(writer, (uint32_t)counter->package);
	wire_put_u32(writer, (uint32_t)counter->cpu);
}

static void get_ring_counter(struct wire_reader *reader, struct wire_ring_counter *counter)
{
	wire_get_name(reader, counter->name, WIRE_NAME_MAX);
	counter->id = wire_get_u32(reader);
	counter->kind = wire_get_u16(reader);
	counter->unit_exponent = (int16_t)wire_get_u16(reader);
	counter->package = (int32_t)wire_get_u32(reader);
	counter->cpu = (int32_t)wire_get_u32(reader);
}

void wire_put_ring_create(struct wire_writer *writer, const struct wire_ring_create *message)
{
	uint32_t count = message->counter_count <= WIRE_MAX_RING_COUNTERS ? message->counter_count
									  : WIRE_MAX_RING_COUNTERS;

	wire_put_u16(writer, message->major);
	wire_put_u16(writer, message->minor);
	wire_put_u32(writer, message->capacity);
	wire_put_u32(writer, message->flags);
	wire_put_u32(writer, message->clock);
	wire_put_u64(writer, message->tsc_hz);
	wire_put_u32(writer, count);
	wire_put_u32(writer, 0);
	for (uint32_t i = 0; i < count; i++)
		put_ring_counter(writer, &message->counters[i]);
}

int wire_get_ring_create(const void *payload, size_t length, struct wire_ring_create *out)
{
	struct wire_reader reader;
	uint32_t reserved;

	if (length < WIRE_RING_CREATE_FIXED_SIZE)
		return -EBADMSG;
	memset(out, 0, sizeof(*out));
	wire_reader_init(&reader, payload, length);
	out->major = wire_get_u16(&reader);
	out->minor = wire_get_u16(&reader);
	out->capacity = wire_get_u32(&reader);
	out->flags = wire_get_u32(&reader);
	out->clock = wire_get_u32(&reader);
	out->tsc_hz = wire_get_u64(&reader);
	out->counter_count = wire_get_u32(&reader);
	reserved = wire_get_u32(&reader);
	if (length != WIRE_RING_CREATE_FIXED_SIZE +
			      (size_t)out->counter_count * WIRE_RING_COUNTER_SIZE)
		return -EBADMSG;
	if (out->counter_count > WIRE_MAX_RING_COUNTERS)
		return -EINVAL;
	for (uint32_t i = 0; i < out->counter_count; i++)
		get_ring_counter(&reader, &out->counters[i]);
	return finish_with_reserved(&reader, reserved);
}

void wire_put_ring_entry(struct wire_writer *writer, const struct wire_ring_entry *entry)
{
	wire_put_u16(writer, entry->major);
	wire_put_u16(writer, entry->minor);
	wire_put_u32(writer, entry->instance);
	wire_put_u32(writer, entry->capacity);
	wire_put_u32(writer, entry->flags);
	wire_put_u32(writer, (uint32_t)entry->producer_pid);
	wire_put_u32(writer, entry->consumers);
	wire_put_u64(writer, entry->bytes);
	wire_put_u32(writer, entry->owner_uid);
	wire_put_u32(writer, (uint32_t)entry->owner_pid);
}

static void get_ring_entry(struct wire_reader *reader, struct wire_ring_entry *out)
{
	out->major = wire_get_u16(reader);
	out->minor = wire_get_u16(reader);
	out->instance = wire_get_u32(reader);
	out->capacity = wire_get_u32(reader);
	out->flags = wire_get_u32(reader);
	out->producer_pid = (int32_t)wire_get_u32(reader);
	out->consumers = wire_get_u32(reader);
	out->bytes = wire_get_u64(reader);
	out->owner_uid = wire_get_u32(reader);
	out->owner_pid = (int32_t)wire_get_u32(reader);
}

int wire_get_ring_entry(const void *payload, size_t length, struct wire_ring_entry *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	get_ring_entry(&reader, out);
	return wire_reader_finish(&reader);
}

void wire_put_ring_key(struct wire_writer *writer, const struct wire_ring_key *key)
{
	wire_put_u16(writer, key->major);
	wire_put_u16(writer, key->minor);
	wire_put_u32(writer, key->instance);
}

int wire_get_ring_key(const void *payload, size_t length, struct wire_ring_key *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	out->major = wire_get_u16(&reader);
	out->minor = wire_get_u16(&reader);
	out->instance = wire_get_u32(&reader);
	return wire_reader_finish(&reader);
}

int wire_get_ring_list(const void *payload, size_t length, uint32_t *count, uint32_t *flags)
{
	struct wire_reader reader;

	if (length < WIRE_RING_LIST_HEADER_SIZE)
		return -EBADMSG;
	wire_reader_init(&reader, payload, WIRE_RING_LIST_HEADER_SIZE);
	*count = wire_get_u32(&reader);
	*flags = wire_get_u32(&reader);
	if (*count > WIRE_RING_LIST_MAX ||
	    length != WIRE_RING_LIST_HEADER_SIZE + (size_t)*count * WIRE_RING_ENTRY_SIZE)
		return -EBADMSG;
	return 0;
}

void wire_get_ring_list_entry(const void *payload, uint32_t index, struct wire_ring_entry *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader,
			 (const uint8_t *)payload + WIRE_RING_LIST_HEADER_SIZE +
				 (size_t)index * WIRE_RING_ENTRY_SIZE,
			 WIRE_RING_ENTRY_SIZE);
	get_ring_entry(&reader, out);
}

/* ---- counter slots ---- */

void wire_put_slot_alloc(struct wire_writer *writer, const struct wire_slot_alloc *message)
{
	wire_put_u32(writer, message->cpu);
	wire_put_u16(writer, message->kind);
	wire_put_u16(writer, 0);
	wire_put_u32(writer, (uint32_t)message->index);
}

int wire_get_slot_alloc(const void *payload, size_t length, struct wire_slot_alloc *out)
{
	struct wire_reader reader;
	uint16_t reserved;

	wire_reader_init(&reader, payload, length);
	out->cpu = wire_get_u32(&reader);
	out->kind = wire_get_u16(&reader);
	reserved = wire_get_u16(&reader);
	out->index = (int32_t)wire_get_u32(&reader);
	return finish_with_reserved(&reader, reserved);
}

void wire_put_slot(struct wire_writer *writer, const struct wire_slot *message)
{
	wire_put_u32(writer, message->id);
	wire_put_u32(writer, message->cpu);
	wire_put_u16(writer, message->kind);
	wire_put_u16(writer, message->index);
	wire_put_u8(writer, message->width);
	wire_put_u8(writer, 0);
	wire_put_u16(writer, 0);
	wire_put_u32(writer, message->counter_address);
	wire_put_u32(writer, message->control_address);
}

int wire_get_slot(const void *payload, size_t length, struct wire_slot *out)
{
	struct wire_reader reader;
	uint32_t reserved;

	wire_reader_init(&reader, payload, length);
	out->id = wire_get_u32(&reader);
	out->cpu = wire_get_u32(&reader);
	out->kind = wire_get_u16(&reader);
	out->index = wire_get_u16(&reader);
	out->width = wire_get_u8(&reader);
	reserved = wire_get_u8(&reader);
	reserved |= wire_get_u16(&reader);
	out->counter_address = wire_get_u32(&reader);
	out->control_address = wire_get_u32(&reader);
	return finish_with_reserved(&reader, reserved);
}

void wire_put_slot_program(struct wire_writer *writer, const struct wire_slot_program *message)
{
	wire_put_u32(writer, message->id);
	wire_put_u32(writer, 0);
	wire_put_u64(writer, message->config);
}

int wire_get_slot_program(const void *payload, size_t length, struct wire_slot_program *out)
{
	struct wire_reader reader;
	uint32_t reserved;

	wire_reader_init(&reader, payload, length);
	out->id = wire_get_u32(&reader);
	reserved = wire_get_u32(&reader);
	out->config = wire_get_u64(&reader);
	return finish_with_reserved(&reader, reserved);
}

void wire_put_slot_id_list(struct wire_writer *writer, uint16_t action, const uint32_t *ids,
			   uint32_t count)
{
	if (count > WIRE_MAX_SLOT_IDS)
		count = WIRE_MAX_SLOT_IDS;
	wire_put_u16(writer, action);
	wire_put_u16(writer, 0);
	wire_put_u32(writer, count);
	for (uint32_t i = 0; i < count; i++)
		wire_put_u32(writer, ids[i]);
}

void wire_put_slot_ids(struct wire_writer *writer, const struct wire_slot_ids *message)
{
	wire_put_slot_id_list(writer, message->action, message->ids, message->count);
}

int wire_get_slot_ids(const void *payload, size_t length, struct wire_slot_ids *out)
{
	struct wire_reader reader;
	uint16_t reserved;

	if (length < WIRE_SLOT_IDS_HEADER_SIZE)
		return -EBADMSG;
	wire_reader_init(&reader, payload, length);
	out->action = wire_get_u16(&reader);
	reserved = wire_get_u16(&reader);
	out->count = wire_get_u32(&reader);
	if ((length - WIRE_SLOT_IDS_HEADER_SIZE) % sizeof(uint32_t) != 0 ||
	    (length - WIRE_SLOT_IDS_HEADER_SIZE) / sizeof(uint32_t) != out->count)
		return -EBADMSG;
	if (out->count == 0 || out->count > WIRE_MAX_SLOT_IDS)
		return -EINVAL;
	for (uint32_t i = 0; i < out->count; i++)
		out->ids[i] = wire_get_u32(&reader);
	return finish_with_reserved(&reader, reserved);
}

void wire_put_slot_values(struct wire_writer *writer, const uint64_t *values, uint32_t count)
{
	wire_put_u32(writer, count);
	wire_put_u32(writer, 0);
	for (uint32_t i = 0; i < count; i++)
		wire_put_u64(writer, values[i]);
}

int wire_get_slot_values(const void *payload, size_t length, uint64_t *values, uint32_t count)
{
	struct wire_reader reader;
	uint32_t reserved;

	if (length != WIRE_SLOT_IDS_HEADER_SIZE + (size_t)count * sizeof(uint64_t))
		return -EBADMSG;
	wire_reader_init(&reader, payload, length);
	if (wire_get_u32(&reader) != count)
		return -EBADMSG;
	reserved = wire_get_u32(&reader);
	for (uint32_t i = 0; i < count; i++)
		values[i] = wire_get_u64(&reader);
	return finish_with_reserved(&reader, reserved);
}

/* ---- registered batches and schedules ---- */

int wire_get_u32_payload(const void *payload, size_t length, uint32_t *value)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	*value = wire_get_u32(&reader);
	return wire_reader_finish(&reader);
}

void wire_put_batch_run(struct wire_writer *writer, uint32_t handle, uint32_t count)
{
	wire_put_u32(writer, handle);
	wire_put_u32(writer, count);
}

int wire_get_batch_run(const void *payload, size_t length, uint32_t *handle, uint32_t *count)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	*handle = wire_get_u32(&reader);
	*count = wire_get_u32(&reader);
	return wire_reader_finish(&reader);
}

void wire_put_schedule_start(struct wire_writer *writer, const struct wire_schedule_start *message)
{
	wire_put_u32(writer, message->handle);
	wire_put_u32(writer, message->flags);
	wire_put_u64(writer, message->period_ns);
	wire_put_u16(writer, message->major);
	wire_put_u16(writer, message->minor);
	wire_put_u32(writer, message->capacity);
}

int wire_get_schedule_start(const void *payload, size_t length, struct wire_schedule_start *out)
{
	struct wire_reader reader;
	int status;

	wire_reader_init(&reader, payload, length);
	out->handle = wire_get_u32(&reader);
	out->flags = wire_get_u32(&reader);
	out->period_ns = wire_get_u64(&reader);
	out->major = wire_get_u16(&reader);
	out->minor = wire_get_u16(&reader);
	out->capacity = wire_get_u32(&reader);
	status = finish_with_reserved(&reader, out->flags & ~(uint64_t)WIRE_SCHEDULE_PERSISTENT);
	if (status < 0)
		return status;
	if (out->period_ns < WIRE_SCHEDULE_MIN_PERIOD_NS ||
	    out->period_ns > WIRE_SCHEDULE_MAX_PERIOD_NS)
		return -ERANGE;
	return 0;
}

void wire_put_schedule_started(struct wire_writer *writer,
			       const struct wire_schedule_started *message)
{
	wire_put_u32(writer, message->id);
	wire_put_u32(writer, message->ring_instance);
}

int wire_get_schedule_started(const void *payload, size_t length,
			      struct wire_schedule_started *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	out->id = wire_get_u32(&reader);
	out->ring_instance = wire_get_u32(&reader);
	return wire_reader_finish(&reader);
}
