/*
 * proto/wire_machine.c — the MACHINE_INFO message, encoded and decoded from the one list of its
 * fields (<haecer/machine_fields.h>): a field added there is on the wire, in its place, with no
 * edit here. Each number goes by its own size, little-endian; the per-CPU arrays come last, as
 * many as cpu_count says, each only when the flags say it is there.
 */
#include "proto/wire.h"

#include <errno.h>
#include <string.h>

/* What the list's fields other than the per-CPU arrays take on the wire. */
#define FIXED_TEXT(name, size) +(size)
#define FIXED_NUMBER(type, name) +sizeof(type)
#define FIXED_NUMBERS(type, name, n) +sizeof(type) * (n)
#define FIXED_U32(name) +4u
#define FIXED_PER_CPU(type, name, when)
_Static_assert(0 HAECER_MACHINE_FIELDS(FIXED_TEXT, FIXED_NUMBER, FIXED_NUMBERS, FIXED_U32,
				       FIXED_U32, FIXED_PER_CPU) == WIRE_MACHINE_INFO_FIXED_SIZE,
	       "WIRE_MACHINE_INFO_FIXED_SIZE is what machine_fields.h's fields take");

/* Whether a per-CPU array is on the wire, by its `when` of the list. */
#define PRESENT(flags, when) ((when) == 0 || ((flags) & (when)) != 0)

/* `count` numbers of `size` bytes each (1, 2, 4 or 8) from `values`. */
static void put_numbers(struct wire_writer *writer, const void *values, size_t size,
			size_t count)
{
	const uint8_t *at = values;

	for (size_t i = 0; i < count; i++, at += size) {
		uint64_t value = 0;
		uint32_t narrow = 0;
		uint16_t shorter = 0;
		switch (size) {
		case 8:
			memcpy(&value, at, 8);
			wire_put_u64(writer, value);
			break;
		case 4:
			memcpy(&narrow, at, 4);
			wire_put_u32(writer, narrow);
			break;
		case 2:
			memcpy(&shorter, at, 2);
			wire_put_u16(writer, shorter);
			break;
		default:
			wire_put_u8(writer, *at);
		}
	}
}

static void get_numbers(struct wire_reader *reader, void *values, size_t size, size_t count)
{
	uint8_t *at = values;

	for (size_t i = 0; i < count; i++, at += size) {
		uint64_t value;
		uint32_t narrow;
		uint16_t shorter;
		switch (size) {
		case 8:
			value = wire_get_u64(reader);
			memcpy(at, &value, 8);
			break;
		case 4:
			narrow = wire_get_u32(reader);
			memcpy(at, &narrow, 4);
			break;
		case 2:
			shorter = wire_get_u16(reader);
			memcpy(at, &shorter, 2);
			break;
		default:
			*at = wire_get_u8(reader);
		}
	}
}

#define PUT_TEXT(name, size) wire_put_name(writer, message->name, size);
#define PUT_NUMBER(type, name) put_numbers(writer, &message->name, sizeof(type), 1);
#define PUT_NUMBERS(type, name, n) put_numbers(writer, message->name, sizeof(type), n);
#define PUT_COUNT(name) wire_put_u32(writer, cpus);
#define PUT_FLAGS(name) wire_put_u32(writer, message->name);
#define PUT_PER_CPU(type, name, when)                                         \
	if (PRESENT(message->flags, when))                                    \
		put_numbers(writer, message->name, sizeof(type), cpus);
#define SKIP(...)

void wire_put_machine_info(struct wire_writer *writer, const struct wire_machine_info *message)
{
	uint32_t cpus = message->cpu_count <= WIRE_MAX_CPUS ? message->cpu_count : WIRE_MAX_CPUS;

	HAECER_MACHINE_FIELDS(PUT_TEXT, PUT_NUMBER, PUT_NUMBERS, PUT_COUNT, PUT_FLAGS, SKIP)
	HAECER_MACHINE_FIELDS(SKIP, SKIP, SKIP, SKIP, SKIP, PUT_PER_CPU)
}

/* Bytes a MACHINE_INFO of `cpus` CPUs takes after its fixed part. */
#define PER_CPU_SIZE(type, name, when) +(PRESENT(flags, when) ? sizeof(type) : 0u)
static size_t machine_info_per_cpu(uint32_t flags, uint32_t cpus)
{
	return (0u HAECER_MACHINE_FIELDS(SKIP, SKIP, SKIP, SKIP, SKIP, PER_CPU_SIZE)) * cpus;
}

#define GET_TEXT(name, size) wire_get_name(&reader, out->name, size);
#define GET_NUMBER(type, name) get_numbers(&reader, &out->name, sizeof(type), 1);
#define GET_NUMBERS(type, name, n) get_numbers(&reader, out->name, sizeof(type), n);
#define GET_COUNT(name) cpus = wire_get_u32(&reader);
#define GET_FLAGS(name) out->name = wire_get_u32(&reader);
#define GET_PER_CPU(type, name, when)                                        \
	if (PRESENT(out->flags, when))                                       \
		get_numbers(&reader, out->name, sizeof(type), cpus);

int wire_get_machine_info(const void *payload, size_t length, struct wire_machine_info *out)
{
	struct wire_reader reader;
	uint32_t cpus = 0;

	if (length < WIRE_MACHINE_INFO_FIXED_SIZE)
		return -EBADMSG;
	memset(out, 0, sizeof(*out));
	wire_reader_init(&reader, payload, length);
	HAECER_MACHINE_FIELDS(GET_TEXT, GET_NUMBER, GET_NUMBERS, GET_COUNT, GET_FLAGS, SKIP)
	/* The length the fixed part announces, checked before any per-CPU array is read. */
	if (cpus > WIRE_MAX_CPUS ||
	    length != WIRE_MACHINE_INFO_FIXED_SIZE + machine_info_per_cpu(out->flags, cpus))
		return -EBADMSG;
	out->cpu_count = cpus;
	HAECER_MACHINE_FIELDS(SKIP, SKIP, SKIP, SKIP, SKIP, GET_PER_CPU)
	return wire_reader_finish(&reader);
}
