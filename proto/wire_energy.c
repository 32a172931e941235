/*
 * proto/wire_energy.c — payload encoders and decoders of the energy totals (ENERGY_READ and
 * the energy page's requests, ENERGY_GRANT).
 * Decoders as in wire_messages.c: bounded by the payload length, exact-length (-EBADMSG).
 */
#include "proto/wire.h"

#include <errno.h>
#include <string.h>

void wire_put_energy_reading(struct wire_writer *writer, uint64_t raw, uint64_t total)
{
	wire_put_u64(writer, raw);
	wire_put_u64(writer, total);
}

int wire_get_energy_reading(const void *payload, size_t length, uint64_t *raw, uint64_t *total)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	*raw = wire_get_u64(&reader);
	*total = wire_get_u64(&reader);
	return wire_reader_finish(&reader);
}

void wire_put_energy_read_request(struct wire_writer *writer,
				  const struct wire_energy_read_request *message)
{
	wire_put_u32(writer, message->cpu);
	wire_put_u32(writer, message->address);
	if (message->flags == 0)
		return; /* as READ's: what every server takes */
	wire_put_u32(writer, message->flags);
	wire_put_u32(writer, message->region_edges_us);
}

int wire_get_energy_read_request(const void *payload, size_t length,
				 struct wire_energy_read_request *out)
{
	struct wire_reader reader;
	int status;

	wire_reader_init(&reader, payload, length);
	out->cpu = wire_get_u32(&reader);
	out->address = wire_get_u32(&reader);
	out->flags = out->region_edges_us = 0;
	if (length == WIRE_ENERGY_READ_REQUEST_SIZE) {
		out->flags = wire_get_u32(&reader);
		out->region_edges_us = wire_get_u32(&reader);
	}
	status = wire_reader_finish(&reader);
	if (status < 0)
		return status;
	/* A flagged request says what it asks: a region's length of windows, nothing else. */
	if (length == WIRE_ENERGY_READ_REQUEST_SIZE &&
	    (out->flags != WIRE_ENERGY_READ_REGION || out->region_edges_us == 0 ||
	     out->region_edges_us > WIRE_ENERGY_READ_REGION_MAX_US))
		return -EINVAL;
	return 0;
}

void wire_put_energy_page_request(struct wire_writer *writer,
				  const struct wire_energy_page_request *message)
{
	wire_put_u32(writer, message->address);
	wire_put_u32(writer, message->rate_hz);
	wire_put_u32(writer, message->flags);
}

int wire_get_energy_page_request(const void *payload, size_t length,
				 struct wire_energy_page_request *out)
{
	struct wire_reader reader;
	int status;

	wire_reader_init(&reader, payload, length);
	out->address = wire_get_u32(&reader);
	out->rate_hz = wire_get_u32(&reader);
	/* Version 1's request had no flags. */
	out->flags = length == WIRE_ENERGY_PAGE_REQUEST_SIZE ? wire_get_u32(&reader) : 0;
	status = wire_reader_finish(&reader);
	if (status < 0)
		return status;
	return (out->flags & ~WIRE_ENERGY_PAGE_PRECISE) != 0 ? -EINVAL : 0;
}

void wire_put_energy_page(struct wire_writer *writer, const struct wire_energy_page *message)
{
	wire_put_u32(writer, message->address);
	wire_put_u32(writer, message->flags);
	wire_put_u32(writer, message->entry_count);
	wire_put_u32(writer, message->rate_hz);
	wire_put_u32(writer, message->min_interval_ms);
	wire_put_u32(writer, 0);
	wire_put_u64(writer, message->resolution_uj);
	wire_put_u64(writer, message->bytes);
}

int wire_get_energy_page(const void *payload, size_t length, struct wire_energy_page *out)
{
	struct wire_reader reader;
	uint32_t reserved;
	int status;

	wire_reader_init(&reader, payload, length);
	out->address = wire_get_u32(&reader);
	out->flags = wire_get_u32(&reader);
	out->entry_count = wire_get_u32(&reader);
	out->rate_hz = wire_get_u32(&reader);
	out->min_interval_ms = wire_get_u32(&reader);
	reserved = wire_get_u32(&reader);
	out->resolution_uj = wire_get_u64(&reader);
	out->bytes = wire_get_u64(&reader);
	status = wire_reader_finish(&reader);
	if (status < 0)
		return status;
	if (reserved != 0 ||
	    (out->flags & ~(WIRE_ENERGY_PAGE_COARSE | WIRE_ENERGY_PAGE_PRECISE)) != 0)
		return -EINVAL;
	return 0;
}

void wire_put_energy_grant_request(struct wire_writer *writer,
				   const struct wire_energy_grant_request *message)
{
	wire_put_u32(writer, message->address);
	wire_put_u32(writer, message->flags);
}

int wire_get_energy_grant_request(const void *payload, size_t length,
				  struct wire_energy_grant_request *out)
{
	struct wire_reader reader;
	int status;

	wire_reader_init(&reader, payload, length);
	out->address = wire_get_u32(&reader);
	out->flags = wire_get_u32(&reader);
	status = wire_reader_finish(&reader);
	if (status < 0)
		return status;
	return out->flags != 0 ? -EINVAL : 0;
}

void wire_put_energy_grant(struct wire_writer *writer, const struct wire_energy_grant *message)
{
	wire_put_u32(writer, message->address);
	wire_put_u32(writer, message->flags);
	wire_put_u32(writer, message->min_interval_ms);
	wire_put_u32(writer, message->policy_min_interval_ms);
	wire_put_u64(writer, message->resolution_uj);
	wire_put_u64(writer, message->policy_resolution_uj);
}

int wire_get_energy_grant(const void *payload, size_t length, struct wire_energy_grant *out)
{
	struct wire_reader reader;
	int status;

	wire_reader_init(&reader, payload, length);
	out->address = wire_get_u32(&reader);
	out->flags = wire_get_u32(&reader);
	out->min_interval_ms = wire_get_u32(&reader);
	out->policy_min_interval_ms = wire_get_u32(&reader);
	out->resolution_uj = wire_get_u64(&reader);
	out->policy_resolution_uj = wire_get_u64(&reader);
	status = wire_reader_finish(&reader);
	if (status < 0)
		return status;
	/* A flag nobody knows, or a setting the flags do not announce, is not this message. */
	if ((out->flags & ~(WIRE_ENERGY_GRANT_COARSE | WIRE_ENERGY_GRANT_POLICY_COARSE)) != 0 ||
	    (!(out->flags & WIRE_ENERGY_GRANT_COARSE) &&
	     (out->min_interval_ms | out->resolution_uj) != 0) ||
	    (!(out->flags & WIRE_ENERGY_GRANT_POLICY_COARSE) &&
	     (out->policy_min_interval_ms | out->policy_resolution_uj) != 0))
		return -EINVAL;
	return 0;
}
