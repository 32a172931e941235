/*
 * server/sim_requests.c — the simulated CPU's SIM_* requests (proto/wire_sim.h): advance its
 * virtual time, set its load, answer its energy truth now and at a past time, replace its power
 * trace. Only for a policy that grants sim control, and only with the sim backend; the test
 * harness (harness/sim_control.c) is the one client that sends them.
 */
#include "server/server.h"
#include "server/sim_requests.h"
#include "backend/backend_sim.h"
#include "proto/wire_sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool sim_allowed(struct client *client, const struct wire_header *header)
{
	if (backend_kind(client->server->backend) != BACKEND_SIM) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_NOT_SIM,
				   "msrd runs the %s backend",
				   backend_kind_name(backend_kind(client->server->backend)));
		return false;
	}
	if (!policy_allows_sim_control(client->grant)) {
		dispatch_log_refusal(client, header->op, 0, 0, "simulator control not granted");
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_DENIED,
				   "uid %u may not control the simulated CPU",
				   (unsigned)client->uid);
		return false;
	}
	return true;
}

static void reply_u64(struct client *client, const struct wire_header *header, uint64_t value)
{
	struct wire_writer writer;
	uint8_t *space = dispatch_reply_begin(client, sizeof(uint64_t), &writer);

	if (space == NULL)
		return;
	wire_put_u64(&writer, value);
	dispatch_reply_end(client, space, header, &writer, -1);
}

static void reply_sim_failure(struct client *client, const struct wire_header *header, int status)
{
	client_reply_error(client, header->op, header->request_id, wire_status_from_errno(status),
			   "simulated CPU: %s", strerror(-status));
}

void sim_requests_handle_advance(struct client *client, const struct wire_header *header,
				 const uint8_t *payload, size_t length)
{
	uint64_t ns;
	uint64_t now = 0;
	int status;

	status = wire_get_sim_advance(payload, length, &ns);
	if (status == -EBADMSG) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (!sim_allowed(client, header))
		return;
	if (status < 0) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "a simulated advance is at most a week");
		return;
	}
	status = energy_sim_advance(client->server, ns);
	if (status == 0)
		status = backend_sim_now(client->server->backend, &now);
	if (status < 0) {
		reply_sim_failure(client, header, status);
		return;
	}
	reply_u64(client, header, now);
}

void sim_requests_handle_set_load(struct client *client, const struct wire_header *header,
				  const uint8_t *payload, size_t length)
{
	struct wire_sim_set_load request;
	int status = wire_get_sim_set_load(payload, length, &request);

	if (status == -EBADMSG) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (status < 0) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "load is 0..1000000 ppm, cpu -1 or a CPU number");
		return;
	}
	if (!sim_allowed(client, header))
		return;
	status = backend_sim_set_load(client->server->backend, request.cpu,
				      (double)request.load_ppm / 1e6);
	if (status < 0) {
		reply_sim_failure(client, header, status);
		return;
	}
	dispatch_reply_empty(client, header);
}

/* sim_allowed, and `domain` names a RAPL domain: the ground-truth queries' common checks. */
static bool sim_domain_allowed(struct client *client, const struct wire_header *header,
			       uint32_t domain)
{
	if (!sim_allowed(client, header))
		return false;
	if (domain >= RAPL_DOMAIN_COUNT) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "no RAPL domain %u", (unsigned)domain);
		return false;
	}
	return true;
}

void sim_requests_handle_truth(struct client *client, const struct wire_header *header,
			       const uint8_t *payload, size_t length)
{
	struct wire_sim_truth_request request;
	struct sim_energy_truth truth;
	struct wire_sim_truth wire;
	struct wire_writer writer;
	uint8_t *space;
	int status;

	if (wire_get_sim_truth_request(payload, length, &request) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (!sim_domain_allowed(client, header, request.domain))
		return;
	status = backend_sim_energy_truth(client->server->backend, request.package,
					  (enum rapl_domain)request.domain, &truth);
	if (status < 0) {
		reply_sim_failure(client, header, status);
		return;
	}
	wire = (struct wire_sim_truth){
		.now_ns = truth.now_ns,
		.joules = truth.joules,
		.units_at_update = truth.units_at_update,
		.last_update_ns = truth.last_update_ns,
	};
	space = dispatch_reply_begin(client, WIRE_SIM_TRUTH_SIZE, &writer);
	if (space == NULL)
		return;
	wire_put_sim_truth(&writer, &wire);
	dispatch_reply_end(client, space, header, &writer, -1);
}

void sim_requests_handle_energy_at(struct client *client, const struct wire_header *header,
				   const uint8_t *payload, size_t length)
{
	struct wire_sim_energy_at_request request;
	struct sim_energy_truth truth;
	struct wire_sim_energy_at wire;
	struct wire_writer writer;
	uint8_t *space;
	int status;

	if (wire_get_sim_energy_at_request(payload, length, &request) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (!sim_domain_allowed(client, header, request.domain))
		return;
	status = backend_sim_energy_at(client->server->backend, request.package,
				       (enum rapl_domain)request.domain, request.at_ns, &truth);
	if (status == -ERANGE) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "%llu ns is ahead of the simulated time or older than the power "
				   "changes it remembers", (unsigned long long)request.at_ns);
		return;
	}
	if (status < 0) {
		reply_sim_failure(client, header, status);
		return;
	}
	wire = (struct wire_sim_energy_at){
		.at_ns = truth.now_ns,
		.joules = truth.joules,
		.last_update_ns = truth.last_update_ns,
		.power_uw = truth.power_microwatts,
		.smi_count = truth.smi_count,
	};
	space = dispatch_reply_begin(client, WIRE_SIM_ENERGY_AT_SIZE, &writer);
	if (space == NULL)
		return;
	wire_put_sim_energy_at(&writer, &wire);
	dispatch_reply_end(client, space, header, &writer, -1);
}

/* msrd copies the text to add the NUL its parser wants. */
void sim_requests_handle_power_trace(struct client *client, const struct wire_header *header,
				     const uint8_t *payload, size_t length)
{
	const char *trace;
	uint32_t trace_length;
	char *text;
	int status;

	if (wire_get_sim_power_trace(payload, length, &trace, &trace_length) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (!sim_allowed(client, header))
		return;
	text = malloc((size_t)trace_length + 1);
	if (text == NULL) {
		reply_sim_failure(client, header, -ENOMEM);
		return;
	}
	memcpy(text, trace, trace_length);
	text[trace_length] = '\0';
	status = backend_sim_power_trace(client->server->backend, text, "(request)");
	free(text);
	if (status == -EINVAL) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "the power trace is malformed (msrd's log names the line)");
		return;
	}
	if (status < 0) {
		reply_sim_failure(client, header, status);
		return;
	}
	dispatch_reply_empty(client, header);
}
