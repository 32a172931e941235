/*
 * proto/wire.c — frame header, byte cursors and status codes of protocol v1.
 */
#include "proto/wire.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct status_entry {
	const char *text;
	int negative_errno;
};

/* Indexed by enum wire_status; the numbers are the protocol, never renumber. */
static const struct status_entry status_table[WIRE_STATUS_COUNT] = {
	[WIRE_STATUS_OK] = { "success", 0 },
	[WIRE_STATUS_DENIED] = { "denied by policy", -EPERM },
	[WIRE_STATUS_MASK] = { "write would change bits outside the allowed mask", -EACCES },
	[WIRE_STATUS_IO] = { "register access failed (no such MSR, or the CPU refused it)", -EIO },
	[WIRE_STATUS_NO_CPU] = { "no such CPU", -ENXIO },
	[WIRE_STATUS_NOT_RUN] = { "not run: another operation of the batch was refused",
				  -ECANCELED },
	[WIRE_STATUS_INVALID] = { "invalid argument", -EINVAL },
	[WIRE_STATUS_MALFORMED] = { "malformed frame", -EBADMSG },
	[WIRE_STATUS_TOO_LARGE] = { "frame larger than the limit", -EMSGSIZE },
	[WIRE_STATUS_VERSION] = { "unsupported protocol version", -EPROTONOSUPPORT },
	[WIRE_STATUS_UNSUPPORTED] = { "operation not supported", -EOPNOTSUPP },
	[WIRE_STATUS_BUSY] = { "resource busy", -EBUSY },
	[WIRE_STATUS_LIMIT] = { "limit reached", -ENOSPC },
	[WIRE_STATUS_NOT_FOUND] = { "not found", -ENOENT },
	[WIRE_STATUS_NOT_SIM] = { "only available with the simulated CPU", -ENODEV },
	[WIRE_STATUS_NO_MEMORY] = { "server out of memory", -ENOMEM },
	[WIRE_STATUS_TIMEOUT] = { "frame not completed in time", -ETIMEDOUT },
	[WIRE_STATUS_SHUTDOWN] = { "server shutting down", -ESHUTDOWN },
	[WIRE_STATUS_STALE] = { "handle or slot invalidated by a policy reload", -ESTALE },
	[WIRE_STATUS_INTERNAL] = { "internal server error", -EREMOTEIO },
	[WIRE_STATUS_LOST] = { "counter reprogrammed outside msrd: its value is lost", -EIDRM },
};

const char *wire_status_text(uint16_t status)
{
	if (status >= WIRE_STATUS_COUNT)
		return "unknown status";
	return status_table[status].text;
}

int wire_status_to_errno(uint16_t status)
{
	if (status >= WIRE_STATUS_COUNT)
		return -EPROTO;
	return status_table[status].negative_errno;
}

uint16_t wire_status_from_errno(int negative_errno)
{
	if (negative_errno == 0)
		return WIRE_STATUS_OK;
	for (uint16_t status = 1; status < WIRE_STATUS_COUNT; status++) {
		if (status_table[status].negative_errno == negative_errno)
			return status;
	}
	return WIRE_STATUS_INTERNAL;
}

struct op_entry {
	uint16_t op;
	const char *name;
	enum wire_op_writes writes;
};

#define OP_ENTRY(name, code, writes) { WIRE_OP_##name, #name, WIRE_WRITES_##writes },
static const struct op_entry op_table[] = { WIRE_OPS(OP_ENTRY) };
#undef OP_ENTRY

static const struct op_entry *op_entry_of(uint16_t op)
{
	for (size_t i = 0; i < ARRAY_SIZE(op_table); i++) {
		if (op_table[i].op == op)
			return &op_table[i];
	}
	return NULL;
}

const char *wire_op_name(uint16_t op)
{
	const struct op_entry *entry = op_entry_of(op);

	return entry != NULL ? entry->name : "UNKNOWN";
}

enum wire_op_writes wire_op_writes(uint16_t op)
{
	const struct op_entry *entry = op_entry_of(op);

	return entry != NULL ? entry->writes : WIRE_WRITES_NEVER;
}

/* ---- header ---- */

int wire_header_decode(const void *data, size_t available, uint32_t max_frame,
		       struct wire_header *out)
{
	struct wire_reader reader;
	uint16_t magic;

	if (available < WIRE_HEADER_SIZE)
		return -EAGAIN;
	wire_reader_init(&reader, data, WIRE_HEADER_SIZE);
	out->length = wire_get_u32(&reader);
	magic = wire_get_u16(&reader);
	out->version = wire_get_u8(&reader);
	out->flags = wire_get_u8(&reader);
	out->op = wire_get_u16(&reader);
	out->status = wire_get_u16(&reader);
	out->request_id = wire_get_u32(&reader);
	if (magic != WIRE_MAGIC || (out->flags & ~WIRE_FLAGS_KNOWN) != 0 ||
	    out->length < WIRE_HEADER_SIZE)
		return -EBADMSG;
	if (out->version != WIRE_VERSION)
		return -EPROTONOSUPPORT;
	if (out->length > max_frame)
		return -EMSGSIZE;
	return 0;
}

void wire_header_encode(void *data, const struct wire_header *header)
{
	struct wire_writer writer;

	wire_writer_init(&writer, data, WIRE_HEADER_SIZE);
	wire_put_u32(&writer, header->length);
	wire_put_u16(&writer, WIRE_MAGIC);
	wire_put_u8(&writer, header->version);
	wire_put_u8(&writer, header->flags);
	wire_put_u16(&writer, header->op);
	wire_put_u16(&writer, header->status);
	wire_put_u32(&writer, header->request_id);
}

int wire_frame_finish(void *data, size_t size, uint16_t op, uint8_t flags, uint16_t status,
		      uint32_t request_id, size_t payload_length)
{
	struct wire_header header;
	size_t length = WIRE_HEADER_SIZE + payload_length;

	if (payload_length > WIRE_MAX_PAYLOAD || length > size)
		return -EMSGSIZE;
	header = (struct wire_header){
		.length = (uint32_t)length,
		.version = WIRE_VERSION,
		.flags = flags,
		.op = op,
		.status = status,
		.request_id = request_id,
	};
	wire_header_encode(data, &header);
	return (int)length;
}

int wire_encode_error(void *data, size_t size, uint16_t op, uint16_t status, uint32_t request_id,
		      const char *detail)
{
	size_t detail_length = detail != NULL ? strnlen(detail, WIRE_MAX_DETAIL) : 0;

	if (size < WIRE_HEADER_SIZE + detail_length)
		return -EMSGSIZE;
	if (detail_length > 0)
		memcpy((uint8_t *)data + WIRE_HEADER_SIZE, detail, detail_length);
	return wire_frame_finish(data, size, op, WIRE_FLAG_REPLY, status, request_id,
				 detail_length);
}

/* ---- cursors ---- */

void wire_writer_init(struct wire_writer *writer, void *data, size_t size)
{
	*writer = (struct wire_writer){ .data = data, .size = size };
}

static uint8_t *writer_claim(struct wire_writer *writer, size_t count)
{
	uint8_t *where;

	if (writer->overflow || writer->size - writer->used < count) {
		writer->overflow = true;
		return NULL;
	}
	where = writer->data + writer->used;
	writer->used += count;
	return where;
}

void wire_put_u8(struct wire_writer *writer, uint8_t value)
{
	uint8_t *where = writer_claim(writer, 1);
	if (where != NULL)
		*where = value;
}

void wire_put_u16(struct wire_writer *writer, uint16_t value)
{
	value = htole16(value);
	wire_put_bytes(writer, &value, sizeof(value));
}

void wire_put_u32(struct wire_writer *writer, uint32_t value)
{
	value = htole32(value);
	wire_put_bytes(writer, &value, sizeof(value));
}

void wire_put_u64(struct wire_writer *writer, uint64_t value)
{
	value = htole64(value);
	wire_put_bytes(writer, &value, sizeof(value));
}

void wire_put_bytes(struct wire_writer *writer, const void *bytes, size_t count)
{
	uint8_t *where = writer_claim(writer, count);
	if (where != NULL && count > 0)
		memcpy(where, bytes, count);
}

void wire_put_name(struct wire_writer *writer, const char *text, size_t size)
{
	uint8_t *where = writer_claim(writer, size);
	size_t length;

	if (where == NULL || size == 0)
		return;
	length = text != NULL ? strnlen(text, size - 1) : 0;
	memset(where, 0, size);
	memcpy(where, text, length);
}

void wire_reader_init(struct wire_reader *reader, const void *data, size_t size)
{
	*reader = (struct wire_reader){ .data = data, .size = size };
}

static const uint8_t *reader_take(struct wire_reader *reader, size_t count)
{
	const uint8_t *where;

	if (reader->bad || reader->size - reader->used < count) {
		reader->bad = true;
		return NULL;
	}
	where = reader->data + reader->used;
	reader->used += count;
	return where;
}

uint8_t wire_get_u8(struct wire_reader *reader)
{
	const uint8_t *where = reader_take(reader, 1);
	return where != NULL ? *where : 0;
}

uint16_t wire_get_u16(struct wire_reader *reader)
{
	uint16_t value;

	wire_get_bytes(reader, &value, sizeof(value));
	return le16toh(value);
}

uint32_t wire_get_u32(struct wire_reader *reader)
{
	uint32_t value;

	wire_get_bytes(reader, &value, sizeof(value));
	return le32toh(value);
}

uint64_t wire_get_u64(struct wire_reader *reader)
{
	uint64_t value;

	wire_get_bytes(reader, &value, sizeof(value));
	return le64toh(value);
}

void wire_get_bytes(struct wire_reader *reader, void *bytes, size_t count)
{
	const uint8_t *where = reader_take(reader, count);
	if (where != NULL)
		memcpy(bytes, where, count);
	else if (count > 0)
		memset(bytes, 0, count);
}

void wire_get_name(struct wire_reader *reader, char *text, size_t size)
{
	const uint8_t *where = reader_take(reader, size);

	if (size == 0)
		return;
	if (where == NULL) {
		text[0] = '\0';
		return;
	}
	memcpy(text, where, size);
	text[size - 1] = '\0';
}

int wire_reader_finish(const struct wire_reader *reader)
{
	if (reader->bad || reader->used != reader->size)
		return -EBADMSG;
	return 0;
}
