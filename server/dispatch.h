/*
 * server/dispatch.h — msrd's protocol handling (dispatch.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_DISPATCH_H
#define HAECER_SERVER_DISPATCH_H

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

/* Handle one complete, header-validated frame. */
void dispatch_frame(struct client *client, const struct wire_header *header,
		    const uint8_t *payload, size_t length);
/* Log one refusal line: uid, pid, op, cpu, address, reason. (An error reply whose refusal was
 * not logged this way is logged by client_reply_error, so every refusal is one line.) */
/* Whether this refusal of the client may have its log line: at most a burst per client and per
 * uid in each interval (printk_ratelimit), so a flood of denied requests cannot fill the disk
 * or make the log drop the refusals that matter. What is held back is counted per uid and
 * summed up in one line ("N more refusals of uid U suppressed") when the uid's next line is
 * let through or one of its connections closes. */
bool client_refusal_loggable(struct client *client);

void dispatch_log_refusal(struct client *client, uint16_t op, uint32_t cpu, uint32_t address,
			  const char *reason);
/* A payload of the wrong shape: ERROR frame, then the connection closes. */
void dispatch_malformed(struct client *client, const struct wire_header *header, size_t length);
/* Reserve a reply with room for `payload_room` bytes of payload and a writer over it; NULL when
 * the client is being dropped. dispatch_reply_end finishes it as an OK reply (with fd or -1). */
uint8_t *dispatch_reply_begin(struct client *client, size_t payload_room,
			      struct wire_writer *writer);
void dispatch_reply_end(struct client *client, uint8_t *space, const struct wire_header *request,
			const struct wire_writer *writer, int fd);
void dispatch_reply_empty(struct client *client, const struct wire_header *request);
/* Decode a BATCH-shaped payload into server->scratch and scratch_kinds (unknown kinds and bad
 * flags become op statuses that refuse it). A malformed or out-of-range one is answered here and
 * returns < 0. */
int dispatch_decode_batch(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length, uint32_t *count);

#endif
