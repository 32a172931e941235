/*
 * proto/wire_sim.h — the messages of the simulated CPU's SIM_* requests (WIRE_OP_SIM_*, in
 * proto/wire.h with every op): its control and truth, which msrd answers only with the sim
 * backend and a policy granting sim control, and only the test harness sends
 * (harness/sim_control.c). Apart from proto/wire.h so that the protocol's other users never see
 * the simulator.
 */
#ifndef HAECER_PROTO_WIRE_SIM_H
#define HAECER_PROTO_WIRE_SIM_H

#include "proto/wire.h"

struct wire_sim_advance {
	uint64_t ns;
};
#define WIRE_SIM_ADVANCE_SIZE 8u       /* reply: u64 now_ns */
#define WIRE_SIM_MAX_ADVANCE_NS (7ull * 86400ull * 1000000000ull) /* one week per request */

struct wire_sim_set_load {
	int32_t cpu;                   /* -1 = every CPU */
	uint32_t load_ppm;             /* 0 idle .. 1000000 busy */
};
#define WIRE_SIM_SET_LOAD_SIZE 8u      /* reply: empty */

struct wire_sim_truth_request {
	uint32_t package;
	uint32_t domain;               /* enum rapl_domain of hw/msr.h */
};
#define WIRE_SIM_TRUTH_REQUEST_SIZE 8u
struct wire_sim_truth {
	uint64_t now_ns;
	double joules;                 /* IEEE 754 binary64 bit pattern on the wire */
	uint64_t units_at_update;
	uint64_t last_update_ns;
};
#define WIRE_SIM_TRUTH_SIZE 32u

struct wire_sim_energy_at_request {
	uint32_t package;
	uint32_t domain;
	uint64_t at_ns;                /* a simulated time at or before now */
};
#define WIRE_SIM_ENERGY_AT_REQUEST_SIZE 16u
struct wire_sim_energy_at {
	uint64_t at_ns;
	double joules;                 /* energy since the start, at at_ns */
	uint64_t last_update_ns;       /* the domain's latest register update at or before at_ns */
	uint64_t power_uw;             /* power at at_ns */
	uint64_t smi_count;            /* SMIs begun at or before at_ns */
};
#define WIRE_SIM_ENERGY_AT_SIZE 40u
/* SIM_POWER_TRACE: u32 length, then that many bytes of trace text (no NUL); reply empty. */
#define WIRE_SIM_POWER_TRACE_HEADER_SIZE 4u
#define WIRE_SIM_POWER_TRACE_MAX (WIRE_MAX_PAYLOAD - WIRE_SIM_POWER_TRACE_HEADER_SIZE)

/* SIM_ADVANCE request: u64 ns; -ERANGE over WIRE_SIM_MAX_ADVANCE_NS. */
int wire_get_sim_advance(const void *payload, size_t length, uint64_t *ns);
void wire_put_sim_set_load(struct wire_writer *writer, const struct wire_sim_set_load *message);
int wire_get_sim_set_load(const void *payload, size_t length, struct wire_sim_set_load *out);
void wire_put_sim_truth_request(struct wire_writer *writer,
				const struct wire_sim_truth_request *message);
int wire_get_sim_truth_request(const void *payload, size_t length,
			       struct wire_sim_truth_request *out);
void wire_put_sim_truth(struct wire_writer *writer, const struct wire_sim_truth *message);
void wire_put_sim_energy_at_request(struct wire_writer *writer,
				    const struct wire_sim_energy_at_request *message);
int wire_get_sim_energy_at_request(const void *payload, size_t length,
				   struct wire_sim_energy_at_request *out);
void wire_put_sim_energy_at(struct wire_writer *writer, const struct wire_sim_energy_at *message);
int wire_get_sim_energy_at(const void *payload, size_t length, struct wire_sim_energy_at *out);
void wire_put_sim_power_trace(struct wire_writer *writer, const char *text, uint32_t length);
/* The text of a SIM_POWER_TRACE payload (not NUL-terminated) and its length; -EINVAL when the
 * length does not match the payload or the text holds a NUL byte. */
int wire_get_sim_power_trace(const void *payload, size_t length, const char **text,
			     uint32_t *text_length);
int wire_get_sim_truth(const void *payload, size_t length, struct wire_sim_truth *out);

#endif
