/*
 * server/handles.h — msrd's registered batches (handles.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_HANDLES_H
#define HAECER_SERVER_HANDLES_H

#include <limits.h>
#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "common/log.h"
#include "policy/policy.h"
#include "proto/wire.h"
#include "shm/energy_page.h"

struct client;

struct registered_batch {
	uint32_t handle;
	uint32_t count;
	uint64_t generation;           /* policy generation it was validated under */
	struct msr_op *ops;            /* as registered: slot reads still name slot ids */
	uint8_t *kinds;
};

void handles_handle_register(struct client *client, const struct wire_header *header,
			     const uint8_t *payload, size_t length);
void handles_handle_run(struct client *client, const struct wire_header *header,
			const uint8_t *payload, size_t length);
void handles_handle_release(struct client *client, const struct wire_header *header,
			    const uint8_t *payload, size_t length);
void handles_release_client(struct client *client);
/* The client's batch `handle`, or NULL. */
struct registered_batch *handles_find(const struct client *client, uint32_t handle);

#endif
