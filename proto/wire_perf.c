/*
 * proto/wire_perf.c — PERF_OPEN, the perf_event broker's request and reply (proto/wire.h).
 */
#include "proto/wire.h"

#include <errno.h>

void wire_put_perf_open(struct wire_writer *writer, const struct wire_perf_open *message)
{
	wire_put_u32(writer, message->type);
	wire_put_u32(writer, message->flags);
	wire_put_u64(writer, message->config);
	wire_put_u64(writer, message->config1);
	wire_put_u64(writer, message->sample_period);
	wire_put_u32(writer, (uint32_t)message->tid);
	wire_put_u32(writer, (uint32_t)message->cpu);
}

int wire_get_perf_open(const void *payload, size_t length, struct wire_perf_open *out)
{
	struct wire_reader reader;
	int status;

	wire_reader_init(&reader, payload, length);
	out->type = wire_get_u32(&reader);
	out->flags = wire_get_u32(&reader);
	out->config = wire_get_u64(&reader);
	out->config1 = wire_get_u64(&reader);
	out->sample_period = wire_get_u64(&reader);
	out->tid = (int32_t)wire_get_u32(&reader);
	out->cpu = (int32_t)wire_get_u32(&reader);
	status = wire_reader_finish(&reader);
	if (status < 0)
		return status;
	return (out->flags & ~WIRE_PERF_FLAGS) != 0 || out->tid < 0 || out->cpu < -1 ? -EINVAL
										       : 0;
}

void wire_put_perf_opened(struct wire_writer *writer, const struct wire_perf_opened *message)
{
	wire_put_u32(writer, message->type);
	wire_put_u32(writer, message->flags);
	wire_put_u32(writer, message->open);
	wire_put_u32(writer, message->max_open);
}

int wire_get_perf_opened(const void *payload, size_t length, struct wire_perf_opened *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	out->type = wire_get_u32(&reader);
	out->flags = wire_get_u32(&reader);
	out->open = wire_get_u32(&reader);
	out->max_open = wire_get_u32(&reader);
	return wire_reader_finish(&reader);
}
