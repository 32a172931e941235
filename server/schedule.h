/*
 * server/schedule.h — msrd's schedules (schedule.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_SCHEDULE_H
#define HAECER_SERVER_SCHEDULE_H

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
struct msrd;

struct schedule;

void schedule_handle_start(struct client *client, const struct wire_header *header,
			   const uint8_t *payload, size_t length);
void schedule_handle_stop(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length);
/* The owner is going away: stop its schedules, except persistent ones, which carry on. */
void schedule_release_client(struct client *client);
void schedule_on_timeout(struct msrd *server, const struct io_uring_cqe *cqe);
/* After a reload: stop every schedule the new policy does not allow its starter. */
void schedule_policy_reloaded(struct msrd *server);
/* Stop every schedule (SIGTERM). */
void schedule_stop_all(struct msrd *server, const char *why);
/* Free what is left after the loop ended. */
void schedule_free_all(struct msrd *server);

#endif
