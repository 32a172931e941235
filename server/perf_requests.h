/*
 * server/perf_requests.h — msrd's the perf_event broker (perf_requests.c): its state and calls,
 * private to msrd (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_PERF_REQUESTS_H
#define HAECER_SERVER_PERF_REQUESTS_H

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
struct energy_counter;
struct msrd;

/* Whether PERF_OPEN is served: --perf-broker, or --backend perf. */
bool perf_broker_enabled(const struct msrd *server);
void perf_requests_handle_open(struct client *client, const struct wire_header *header,
			       const uint8_t *payload, size_t length);
/* Its events count back to its uid's bound (the descriptors are the client's). */
void perf_requests_release_client(struct client *client);
/* After a reload: every page is marked STALE and forgotten; holders ask again under the new
 * policy (and are refused, or get a page as coarse as their new grant). */
void energy_pages_policy_reloaded(struct msrd *server);
void energy_pages_on_timeout(struct msrd *server, const struct io_uring_cqe *cqe);
/* Write the latest sample into every page (after energy_sample_all); _fine into fine pages
 * only (the precise edges' windows). */
void energy_pages_publish(struct msrd *server);
void energy_pages_publish_fine(struct msrd *server);
/* Coarse pages only: a round trip just took a new coarse value, which its setting's pages show
 * at once (so page and round trips never disagree). */
void energy_pages_publish_coarse(struct msrd *server);
/* The precise edges' windows took `ns` of CPU on energy counter `counter`: charged to the total
 * and to the uids whose holds want it; over a budget, their windows stop for the second. */
void energy_pages_charge_edges(struct msrd *server, struct energy_counter *counter, uint64_t ns);
/* The page sampling period while pages are held; 0 otherwise. */
uint64_t energy_pages_period_ns(const struct msrd *server);
/* At exit: every page is marked DEAD and unmapped. */
void energy_pages_free(struct msrd *server);

#endif
