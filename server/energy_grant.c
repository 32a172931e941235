/*
 * server/energy_grant.c — ENERGY_GRANT: how finely this connection's uid may read an energy
 * register (in full, or coarse with its interval and resolution), and the running policy's
 * coarse setting. A program that republishes energy to others (haecer-mon serve) asks, so that
 * by default it publishes nothing finer than what the policy gives its coarse users, whatever
 * its own grant: msrd is the only one who knows the policy that runs.
 */
#include "server/server.h"

static void put_limit(uint32_t *interval_ms, uint64_t *resolution_uj,
		      const struct policy_energy_limit *limit)
{
	*interval_ms = limit->min_interval_ms;
	*resolution_uj = limit->resolution_uj;
}

void energy_grant_handle_request(struct client *client, const struct wire_header *header,
				 const uint8_t *payload, size_t length)
{
	struct msrd *server = client->server;
	struct wire_energy_grant_request request;
	struct wire_energy_grant reply = { 0 };
	struct policy_energy_limit limit;
	struct wire_writer writer;
	uint8_t *space;

	if (wire_get_energy_grant_request(payload, length, &request) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (energy_find(server, 0, request.address) == NULL) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "MSR 0x%x is no energy register msrd keeps a total for",
				   request.address);
		return;
	}
	if (!policy_allows_read(client->grant, request.address)) {
		dispatch_log_refusal(client, header->op, 0, request.address, "read not granted");
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_DENIED,
				   "uid %u has no grant for energy register 0x%x, full or coarse",
				   (unsigned)client->uid, request.address);
		return;
	}
	reply.address = request.address;
	if (policy_energy_limit(client->grant, request.address, &limit) == 1) {
		reply.flags |= WIRE_ENERGY_GRANT_COARSE;
		put_limit(&reply.min_interval_ms, &reply.resolution_uj, &limit);
	}
	if (policy_coarse_energy(server->policy, &limit) == 1) {
		reply.flags |= WIRE_ENERGY_GRANT_POLICY_COARSE;
		put_limit(&reply.policy_min_interval_ms, &reply.policy_resolution_uj, &limit);
	}
	space = dispatch_reply_begin(client, WIRE_ENERGY_GRANT_SIZE, &writer);
	if (space == NULL)
		return;
	wire_put_energy_grant(&writer, &reply);
	dispatch_reply_end(client, space, header, &writer, -1);
}
