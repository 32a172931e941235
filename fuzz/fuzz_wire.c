/*
 * fuzz/fuzz_wire.c — the frame decoder: header, then every message decoder, on arbitrary bytes.
 *
 * The input is a byte stream as msrd's client.c sees it: frames one after another. Each header
 * msrd would accept is followed by its payload (cut short when the input ends, as a frame still
 * arriving), which every decoder of proto/wire.h gets to judge, whatever the op says: a client
 * chooses the op, so each decoder must hold against every payload. Properties checked:
 *   - an accepted header has 16 <= length <= WIRE_MAX_FRAME, version 1, only known flags, and
 *     encodes back to the same 16 bytes;
 *   - a decoder never reads past the payload (ASan) and accepts only payloads of its exact size;
 *   - what a decoder accepts survives encode -> decode -> encode unchanged (the encoders and
 *     decoders agree on every field, reserved words included);
 *   - no accepted request can make msrd busy: a schedule's period is within its bounds and
 *     msrd's grid of deadlines (origin + (n + 1) * period) moves strictly forward without
 *     wrapping for a century of periods from any clock reading below 2^62 ns (a wrapped or
 *     standing deadline is a timer that fires at once, for ever: issue 14); a simulated
 *     advance is at most a week.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto/wire.h"
#include "proto/wire_sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Encodings are compared through this: big enough for any payload. */
static uint8_t first[WIRE_MAX_PAYLOAD];
static uint8_t second[WIRE_MAX_PAYLOAD];

/* Every message has a decoder and an encoder of the same shape; these adapters give them one
 * signature so each is checked by the same round trip. */
typedef int (*decode_fn)(const void *payload, size_t length, void *out);
typedef void (*encode_fn)(struct wire_writer *writer, const void *message);

struct codec {
	const char *name;
	decode_fn decode;
	encode_fn encode;
	size_t size; /* bytes of the host-side message */
};

/* Messages whose decoder still takes an older, shorter form (its missing fields zero): that
 * form encodes in the current one, the given bytes followed by zeros. */
static const struct {
	const char *name;
	size_t length;
} older_forms[] = {
	{ "energy_page_request", 8 }, /* before its flags */
};

static bool older_form(const struct codec *codec, size_t length)
{
	for (size_t i = 0; i < sizeof(older_forms) / sizeof(older_forms[0]); i++)
		if (strcmp(codec->name, older_forms[i].name) == 0 && length == older_forms[i].length)
			return true;
	return false;
}

#define ADAPT(name, type)                                                                  \
	static int decode_##name(const void *payload, size_t length, void *out)            \
	{                                                                                  \
		return wire_get_##name(payload, length, (type *)out);                      \
	}                                                                                  \
	static void encode_##name(struct wire_writer *writer, const void *message)         \
	{                                                                                  \
		wire_put_##name(writer, (const type *)message);                            \
	}

ADAPT(hello_request, struct wire_hello_request)
ADAPT(hello_reply, struct wire_hello_reply)
ADAPT(machine_info, struct wire_machine_info)
ADAPT(read_request, struct wire_read_request)
ADAPT(write_request, struct wire_write_request)
ADAPT(ring_create, struct wire_ring_create)
ADAPT(ring_entry, struct wire_ring_entry)
ADAPT(ring_key, struct wire_ring_key)
ADAPT(sim_set_load, struct wire_sim_set_load)
ADAPT(sim_truth_request, struct wire_sim_truth_request)
ADAPT(sim_truth, struct wire_sim_truth)
ADAPT(sim_energy_at_request, struct wire_sim_energy_at_request)
ADAPT(sim_energy_at, struct wire_sim_energy_at)
ADAPT(slot_alloc, struct wire_slot_alloc)
ADAPT(slot, struct wire_slot)
ADAPT(slot_program, struct wire_slot_program)
ADAPT(slot_ids, struct wire_slot_ids)
ADAPT(schedule_start, struct wire_schedule_start)
ADAPT(schedule_started, struct wire_schedule_started)
ADAPT(energy_page_request, struct wire_energy_page_request)
ADAPT(energy_page, struct wire_energy_page)
ADAPT(energy_grant_request, struct wire_energy_grant_request)
ADAPT(energy_read_request, struct wire_energy_read_request)
ADAPT(energy_grant, struct wire_energy_grant)

/* Messages of one or two plain integers. */
struct pair {
	uint64_t a;
	uint64_t b;
};

static int decode_u64(const void *payload, size_t length, void *out)
{
	return wire_get_u64_payload(payload, length, &((struct pair *)out)->a);
}

static void encode_u64(struct wire_writer *writer, const void *message)
{
	wire_put_u64(writer, ((const struct pair *)message)->a);
}

static int decode_u32(const void *payload, size_t length, void *out)
{
	uint32_t value;
	int status = wire_get_u32_payload(payload, length, &value);

	((struct pair *)out)->a = value;
	return status;
}

static void encode_u32(struct wire_writer *writer, const void *message)
{
	wire_put_u32(writer, (uint32_t)((const struct pair *)message)->a);
}

static int decode_sim_advance(const void *payload, size_t length, void *out)
{
	return wire_get_sim_advance(payload, length, &((struct pair *)out)->a);
}

static int decode_read_reply(const void *payload, size_t length, void *out)
{
	return wire_get_read_reply(payload, length, &((struct pair *)out)->a);
}

static int decode_energy(const void *payload, size_t length, void *out)
{
	struct pair *pair = out;

	return wire_get_energy_reading(payload, length, &pair->a, &pair->b);
}

static void encode_energy(struct wire_writer *writer, const void *message)
{
	const struct pair *pair = message;

	wire_put_energy_reading(writer, pair->a, pair->b);
}

static int decode_batch_run(const void *payload, size_t length, void *out)
{
	uint32_t handle, count;
	int status = wire_get_batch_run(payload, length, &handle, &count);

	*(struct pair *)out = (struct pair){ .a = handle, .b = count };
	return status;
}

static void encode_batch_run(struct wire_writer *writer, const void *message)
{
	const struct pair *pair = message;

	wire_put_batch_run(writer, (uint32_t)pair->a, (uint32_t)pair->b);
}

static const struct codec codecs[] = {
	{ "hello_request", decode_hello_request, encode_hello_request,
	  sizeof(struct wire_hello_request) },
	{ "hello_reply", decode_hello_reply, encode_hello_reply, sizeof(struct wire_hello_reply) },
	{ "machine_info", decode_machine_info, encode_machine_info,
	  sizeof(struct wire_machine_info) },
	{ "read_request", decode_read_request, encode_read_request,
	  sizeof(struct wire_read_request) },
	{ "write_request", decode_write_request, encode_write_request,
	  sizeof(struct wire_write_request) },
	{ "ring_create", decode_ring_create, encode_ring_create, sizeof(struct wire_ring_create) },
	{ "ring_entry", decode_ring_entry, encode_ring_entry, sizeof(struct wire_ring_entry) },
	{ "ring_key", decode_ring_key, encode_ring_key, sizeof(struct wire_ring_key) },
	{ "sim_set_load", decode_sim_set_load, encode_sim_set_load,
	  sizeof(struct wire_sim_set_load) },
	{ "sim_truth_request", decode_sim_truth_request, encode_sim_truth_request,
	  sizeof(struct wire_sim_truth_request) },
	{ "sim_truth", decode_sim_truth, encode_sim_truth, sizeof(struct wire_sim_truth) },
	{ "sim_energy_at_request", decode_sim_energy_at_request, encode_sim_energy_at_request,
	  sizeof(struct wire_sim_energy_at_request) },
	{ "sim_energy_at", decode_sim_energy_at, encode_sim_energy_at,
	  sizeof(struct wire_sim_energy_at) },
	{ "slot_alloc", decode_slot_alloc, encode_slot_alloc, sizeof(struct wire_slot_alloc) },
	{ "slot", decode_slot, encode_slot, sizeof(struct wire_slot) },
	{ "slot_program", decode_slot_program, encode_slot_program,
	  sizeof(struct wire_slot_program) },
	{ "slot_ids", decode_slot_ids, encode_slot_ids, sizeof(struct wire_slot_ids) },
	{ "schedule_start", decode_schedule_start, encode_schedule_start,
	  sizeof(struct wire_schedule_start) },
	{ "schedule_started", decode_schedule_started, encode_schedule_started,
	  sizeof(struct wire_schedule_started) },
	{ "energy_page_request", decode_energy_page_request, encode_energy_page_request,
	  sizeof(struct wire_energy_page_request) },
	{ "energy_page", decode_energy_page, encode_energy_page, sizeof(struct wire_energy_page) },
	{ "energy_grant_request", decode_energy_grant_request, encode_energy_grant_request,
	  sizeof(struct wire_energy_grant_request) },
	{ "energy_read_request", decode_energy_read_request, encode_energy_read_request,
	  sizeof(struct wire_energy_read_request) },
	{ "energy_grant", decode_energy_grant, encode_energy_grant,
	  sizeof(struct wire_energy_grant) },
	{ "u64", decode_u64, encode_u64, sizeof(struct pair) },
	{ "u32", decode_u32, encode_u32, sizeof(struct pair) },
	{ "read_reply", decode_read_reply, encode_u64, sizeof(struct pair) },
	{ "sim_advance", decode_sim_advance, encode_u64, sizeof(struct pair) },
	{ "energy", decode_energy, encode_energy, sizeof(struct pair) },
	{ "batch_run", decode_batch_run, encode_batch_run, sizeof(struct pair) },
};

static _Alignas(16) uint8_t message[sizeof(struct wire_machine_info) + 64];
static _Alignas(16) uint8_t again[sizeof(struct wire_machine_info) + 64];

/* encode(decode(payload)) must decode again, and encode to the same bytes. */
static void round_trip(const struct codec *codec, const uint8_t *payload, size_t length)
{
	struct wire_writer writer;
	size_t used;

	assert(codec->size <= sizeof(message));
	memset(message, 0, codec->size);
	if (codec->decode(payload, length, message) != 0)
		return;
	wire_writer_init(&writer, first, sizeof(first));
	codec->encode(&writer, message);
	assert(!writer.overflow);
	used = writer.used;
	if (older_form(codec, length)) {
		assert(used > length && memcmp(first, payload, length) == 0);
		for (size_t i = length; i < used; i++)
			assert(first[i] == 0);
	} else {
		assert(used == length); /* exact-size decoders: the same length comes back */
	}
	memset(again, 0, codec->size);
	assert(codec->decode(first, used, again) == 0);
	wire_writer_init(&writer, second, sizeof(second));
	codec->encode(&writer, again);
	assert(!writer.overflow && writer.used == used);
	assert(memcmp(first, second, used) == 0);
}

/* A batch (request or reply shape) and a ring list: a header with a count, then elements. */
static void check_batch(const uint8_t *payload, size_t length)
{
	uint32_t count;
	int status = wire_get_batch_count(payload, length, WIRE_BATCH_OP_SIZE, WIRE_MAX_BATCH_OPS,
					  &count);

	if (status == 0) {
		assert(count >= 1 && count <= WIRE_MAX_BATCH_OPS);
		assert(length == WIRE_BATCH_HEADER_SIZE + (size_t)count * WIRE_BATCH_OP_SIZE);
		for (uint32_t i = 0; i < count; i++) {
			struct wire_batch_op op;
			struct wire_writer writer;
			uint8_t bytes[WIRE_BATCH_OP_SIZE];
			if (wire_get_batch_op(payload, i, &op) != 0)
				continue;
			wire_writer_init(&writer, bytes, sizeof(bytes));
			wire_put_batch_op(&writer, &op);
			assert(writer.used == WIRE_BATCH_OP_SIZE);
			assert(memcmp(bytes, payload + WIRE_BATCH_HEADER_SIZE +
						     (size_t)i * WIRE_BATCH_OP_SIZE,
				      WIRE_BATCH_OP_SIZE) == 0);
		}
	}
	status = wire_get_batch_count(payload, length, WIRE_BATCH_RESULT_SIZE, WIRE_MAX_BATCH_OPS,
				      &count);
	for (uint32_t i = 0; status == 0 && i < count; i++) {
		struct wire_batch_result result;
		wire_get_batch_result(payload, i, &result);
	}
}

static void check_lists(const uint8_t *payload, size_t length)
{
	static uint64_t values[WIRE_MAX_SLOT_IDS];
	uint32_t count, flags;

	if (wire_get_ring_list(payload, length, &count, &flags) == 0) {
		assert(count <= WIRE_RING_LIST_MAX);
		for (uint32_t i = 0; i < count; i++) {
			struct wire_ring_entry entry;
			wire_get_ring_list_entry(payload, i, &entry);
		}
	}
	/* A SLOT_READ reply is decoded against the count the client asked for. */
	if (length >= WIRE_SLOT_IDS_HEADER_SIZE) {
		uint32_t asked = (uint32_t)((length - WIRE_SLOT_IDS_HEADER_SIZE) / sizeof(uint64_t));
		if (asked <= WIRE_MAX_SLOT_IDS)
			(void)wire_get_slot_values(payload, length, values, asked);
	}
}

#define CENTURY_NS (100ull * 365ull * 86400ull * 1000000000ull)
#define LATEST_ORIGIN_NS (1ull << 62)

/* The deadline arithmetic of server/schedule.c over what the decoder lets through. */
static void check_durations(const uint8_t *payload, size_t length)
{
	struct wire_schedule_start start;
	uint64_t ns;

	if (wire_get_schedule_start(payload, length, &start) == 0) {
		uint64_t periods = CENTURY_NS / start.period_ns;
		uint64_t offset, last, before;
		assert(start.period_ns >= WIRE_SCHEDULE_MIN_PERIOD_NS &&
		       start.period_ns <= WIRE_SCHEDULE_MAX_PERIOD_NS);
		assert(!__builtin_mul_overflow(periods + 1, start.period_ns, &offset));
		assert(!__builtin_add_overflow(LATEST_ORIGIN_NS, offset, &last));
		before = LATEST_ORIGIN_NS + periods * start.period_ns;
		assert(last > before && last - before == start.period_ns);
	}
	if (wire_get_sim_advance(payload, length, &ns) == 0)
		assert(ns <= WIRE_SIM_MAX_ADVANCE_NS);
}

static void check_payload(const uint8_t *payload, size_t length)
{
	check_durations(payload, length);
	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++)
		round_trip(&codecs[i], payload, length);
	check_batch(payload, length);
	check_lists(payload, length);
}

/* The header as msrd judges it; returns the frame length to skip, 0 to stop. */
static size_t check_frame(const uint8_t *data, size_t available)
{
	struct wire_header header;
	uint8_t encoded[WIRE_HEADER_SIZE];
	int status = wire_header_decode(data, available, WIRE_MAX_FRAME, &header);
	size_t payload;

	if (status == -EAGAIN) {
		assert(available < WIRE_HEADER_SIZE);
		return 0;
	}
	if (status < 0) {
		assert(status == -EBADMSG || status == -EPROTONOSUPPORT || status == -EMSGSIZE);
		return 0;
	}
	assert(header.length >= WIRE_HEADER_SIZE && header.length <= WIRE_MAX_FRAME);
	assert(header.version == WIRE_VERSION && (header.flags & ~WIRE_FLAGS_KNOWN) == 0);
	wire_header_encode(encoded, &header);
	assert(memcmp(encoded, data, WIRE_HEADER_SIZE) == 0);
	(void)wire_op_name(header.op);
	(void)wire_status_text(header.status);
	(void)wire_status_to_errno(header.status);
	payload = (header.length <= available ? header.length : available) - WIRE_HEADER_SIZE;
	check_payload(data + WIRE_HEADER_SIZE, payload);
	return header.length <= available ? header.length : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t offset = 0;

	while (offset < size) {
		size_t used = check_frame(data + offset, size - offset);
		if (used == 0)
			break;
		offset += used;
	}
	return 0;
}
