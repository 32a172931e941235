/*
 * proto/wire_sim.c — the simulated CPU's requests and replies (SIM_SET_LOAD, SIM_TRUTH,
 * SIM_ENERGY_AT, SIM_POWER_TRACE), with the same exact-length decoders as wire_messages.c
 * (split from it by concern: it had grown past 800 lines).
 */
#include "proto/wire.h"

#include <errno.h>
#include <string.h>

void wire_put_sim_set_load(struct wire_writer *writer, const struct wire_sim_set_load *message)
{
	wire_put_u32(writer, (uint32_t)message->cpu);
	wire_put_u32(writer, message->load_ppm);
}

int wire_get_sim_set_load(const void *payload, size_t length, struct wire_sim_set_load *out)
{
	struct wire_reader reader;
	int status;

	wire_reader_init(&reader, payload, length);
	out->cpu = (int32_t)wire_get_u32(&reader);
	out->load_ppm = wire_get_u32(&reader);
	status = wire_reader_finish(&reader);
	if (status < 0)
		return status;
	return out->load_ppm <= 1000000u && out->cpu >= -1 ? 0 : -EINVAL;
}

void wire_put_sim_truth_request(struct wire_writer *writer,
				const struct wire_sim_truth_request *message)
{
	wire_put_u32(writer, message->package);
	wire_put_u32(writer, message->domain);
}

int wire_get_sim_truth_request(const void *payload, size_t length,
			       struct wire_sim_truth_request *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	out->package = wire_get_u32(&reader);
	out->domain = wire_get_u32(&reader);
	return wire_reader_finish(&reader);
}

void wire_put_sim_truth(struct wire_writer *writer, const struct wire_sim_truth *message)
{
	uint64_t bits;

	memcpy(&bits, &message->joules, sizeof(bits));
	wire_put_u64(writer, message->now_ns);
	wire_put_u64(writer, bits);
	wire_put_u64(writer, message->units_at_update);
	wire_put_u64(writer, message->last_update_ns);
}

int wire_get_sim_truth(const void *payload, size_t length, struct wire_sim_truth *out)
{
	struct wire_reader reader;
	uint64_t bits;

	wire_reader_init(&reader, payload, length);
	out->now_ns = wire_get_u64(&reader);
	bits = wire_get_u64(&reader);
	memcpy(&out->joules, &bits, sizeof(bits));
	out->units_at_update = wire_get_u64(&reader);
	out->last_update_ns = wire_get_u64(&reader);
	return wire_reader_finish(&reader);
}

void wire_put_sim_energy_at_request(struct wire_writer *writer,
				    const struct wire_sim_energy_at_request *message)
{
	wire_put_u32(writer, message->package);
	wire_put_u32(writer, message->domain);
	wire_put_u64(writer, message->at_ns);
}

int wire_get_sim_energy_at_request(const void *payload, size_t length,
				   struct wire_sim_energy_at_request *out)
{
	struct wire_reader reader;

	wire_reader_init(&reader, payload, length);
	out->package = wire_get_u32(&reader);
	out->domain = wire_get_u32(&reader);
	out->at_ns = wire_get_u64(&reader);
	return wire_reader_finish(&reader);
}

void wire_put_sim_energy_at(struct wire_writer *writer, const struct wire_sim_energy_at *message)
{
	uint64_t bits;

	memcpy(&bits, &message->joules, sizeof(bits));
	wire_put_u64(writer, message->at_ns);
	wire_put_u64(writer, bits);
	wire_put_u64(writer, message->last_update_ns);
	wire_put_u64(writer, message->power_uw);
	wire_put_u64(writer, message->smi_count);
}

int wire_get_sim_energy_at(const void *payload, size_t length, struct wire_sim_energy_at *out)
{
	struct wire_reader reader;
	uint64_t bits;

	wire_reader_init(&reader, payload, length);
	out->at_ns = wire_get_u64(&reader);
	bits = wire_get_u64(&reader);
	memcpy(&out->joules, &bits, sizeof(bits));
	out->last_update_ns = wire_get_u64(&reader);
	out->power_uw = wire_get_u64(&reader);
	out->smi_count = wire_get_u64(&reader);
	return wire_reader_finish(&reader);
}

void wire_put_sim_power_trace(struct wire_writer *writer, const char *text, uint32_t length)
{
	wire_put_u32(writer, length);
	wire_put_bytes(writer, text, length);
}

int wire_get_sim_power_trace(const void *payload, size_t length, const char **text,
			     uint32_t *text_length)
{
	struct wire_reader reader;
	uint32_t count;

	if (length < WIRE_SIM_POWER_TRACE_HEADER_SIZE)
		return -EINVAL;
	wire_reader_init(&reader, payload, WIRE_SIM_POWER_TRACE_HEADER_SIZE);
	count = wire_get_u32(&reader);
	if (wire_reader_finish(&reader) < 0 || count != length - WIRE_SIM_POWER_TRACE_HEADER_SIZE)
		return -EINVAL;
	*text = (const char *)payload + WIRE_SIM_POWER_TRACE_HEADER_SIZE;
	*text_length = count;
	return memchr(*text, '\0', count) ? -EINVAL : 0;
}
