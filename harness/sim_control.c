/*
 * harness/sim_control.c — the SIM_* requests of harness/sim_control.h, on libhaecer's connection
 * (its request/reply exchange, libclient/msrd_conn.h: the one place the harness sees inside the
 * library, since a test drives the simulator on the same connection it measures with).
 */
#include "harness/sim_control.h"

#include <errno.h>
#include <string.h>

#include "libclient/msrd_conn.h"
#include "proto/wire.h"
#include "proto/wire_sim.h"

int haecer_sim_advance(struct haecer_conn *conn, uint64_t ns, uint64_t *now_ns)
{
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	uint64_t now;
	int status;

	wire_put_u64(&writer, ns);
	status = haecer__call_checked(conn, WIRE_OP_SIM_ADVANCE, &writer, &reply);
	if (status < 0)
		return status;
	if (wire_get_u64_payload(reply.payload, reply.length, &now) < 0)
		return -EPROTO;
	if (now_ns != NULL)
		*now_ns = now;
	return 0;
}

int haecer_sim_set_load(struct haecer_conn *conn, int cpu, double load)
{
	struct wire_writer writer = haecer__begin(conn);
	struct wire_sim_set_load request;
	struct haecer_reply reply;

	if (!(load >= 0.0 && load <= 1.0) || cpu < -1)
		return -EINVAL;
	request = (struct wire_sim_set_load){
		.cpu = cpu,
		.load_ppm = (uint32_t)(load * 1000000.0 + 0.5),
	};
	wire_put_sim_set_load(&writer, &request);
	return haecer__call_checked(conn, WIRE_OP_SIM_SET_LOAD, &writer, &reply);
}

int haecer_sim_energy_truth(struct haecer_conn *conn, uint32_t package, uint32_t domain,
			    struct haecer_sim_truth *out)
{
	struct wire_sim_truth_request request = { .package = package, .domain = domain };
	struct wire_writer writer = haecer__begin(conn);
	struct wire_sim_truth truth;
	struct haecer_reply reply;
	int status;

	wire_put_sim_truth_request(&writer, &request);
	status = haecer__call_checked(conn, WIRE_OP_SIM_ENERGY_TRUTH, &writer, &reply);
	if (status < 0)
		return status;
	if (wire_get_sim_truth(reply.payload, reply.length, &truth) < 0)
		return -EPROTO;
	*out = (struct haecer_sim_truth){
		.now_ns = truth.now_ns,
		.joules = truth.joules,
		.units_at_update = truth.units_at_update,
		.last_update_ns = truth.last_update_ns,
	};
	return 0;
}

int haecer_sim_energy_at(struct haecer_conn *conn, uint32_t package, uint32_t domain,
			 uint64_t at_ns, struct haecer_sim_energy_at *out)
{
	struct wire_sim_energy_at_request request = {
		.package = package, .domain = domain, .at_ns = at_ns};
	struct wire_writer writer = haecer__begin(conn);
	struct wire_sim_energy_at answer;
	struct haecer_reply reply;
	int status;

	wire_put_sim_energy_at_request(&writer, &request);
	status = haecer__call_checked(conn, WIRE_OP_SIM_ENERGY_AT, &writer, &reply);
	if (status < 0)
		return status;
	if (wire_get_sim_energy_at(reply.payload, reply.length, &answer) < 0)
		return -EPROTO;
	*out = (struct haecer_sim_energy_at){
		.at_ns = answer.at_ns,
		.joules = answer.joules,
		.last_update_ns = answer.last_update_ns,
		.watts = (double)answer.power_uw / 1e6,
		.smi_count = answer.smi_count,
	};
	return 0;
}

int haecer_sim_power_trace(struct haecer_conn *conn, const char *text)
{
	struct wire_writer writer = haecer__begin(conn);
	struct haecer_reply reply;
	size_t length = strlen(text);

	if (length > WIRE_SIM_POWER_TRACE_MAX)
		return -EMSGSIZE;
	wire_put_sim_power_trace(&writer, text, (uint32_t)length);
	return haecer__call_checked(conn, WIRE_OP_SIM_POWER_TRACE, &writer, &reply);
}
