/*
 * server/energy_page.h — msrd's energy pages (energy_page.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_ENERGY_PAGE_H
#define HAECER_SERVER_ENERGY_PAGE_H

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

/* ENERGY_PAGE: a read-only page of one energy register's totals (every package, or core),
 * coarse when the client's grant is. */
void energy_pages_handle_request(struct client *client, const struct wire_header *header,
				 const uint8_t *payload, size_t length);
/* A request from the client: its precise holds' lease is renewed (the windows start again
 * when it had lapsed). */
void energy_pages_client_request(struct client *client);
/* A READ or ENERGY_READ of (cpu, address): the client measures that register's entry, so its
 * precise holds' windows are narrowed to the entries it read; an ENERGY_READ renews the long
 * lease too (energy_edges.h). */
void energy_pages_note_read(struct client *client, uint32_t cpu, uint32_t address,
			    bool energy_read);
/* An ENERGY_READ flagged WIRE_ENERGY_READ_REGION: the client's windows run for region_edges_us
 * more (its region's start) and then stop until its next request (the region's end), as if
 * its lease had lapsed. */
void energy_pages_note_region(struct client *client, uint32_t region_edges_us);
/* A lease in the precise edges' set may have lapsed (now >= energy.edge_lease_lapse_ns):
 * compute the set again. */
void energy_pages_leases_check(struct msrd *server);
/* The client is going away: its holds are dropped (sampling stops with the last). */
void energy_pages_release_client(struct client *client);

#endif
