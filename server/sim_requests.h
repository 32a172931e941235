/*
 * server/sim_requests.h — msrd's handlers of the simulated CPU's SIM_* requests
 * (server/sim_requests.c), which server/dispatch.c's op table names.
 */
#ifndef HAECER_SERVER_SIM_REQUESTS_H
#define HAECER_SERVER_SIM_REQUESTS_H

#include <stddef.h>
#include <stdint.h>

#include "proto/wire.h"

struct client;

void sim_requests_handle_advance(struct client *client, const struct wire_header *header,
				 const uint8_t *payload, size_t length);
void sim_requests_handle_set_load(struct client *client, const struct wire_header *header,
				  const uint8_t *payload, size_t length);
void sim_requests_handle_truth(struct client *client, const struct wire_header *header,
			       const uint8_t *payload, size_t length);
void sim_requests_handle_energy_at(struct client *client, const struct wire_header *header,
				   const uint8_t *payload, size_t length);
void sim_requests_handle_power_trace(struct client *client, const struct wire_header *header,
				     const uint8_t *payload, size_t length);

#endif
