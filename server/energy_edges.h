/*
 * server/energy_edges.h — msrd's precise edges (energy_edges.c): its state and calls, private to
 * msrd (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_ENERGY_EDGES_H
#define HAECER_SERVER_ENERGY_EDGES_H

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

struct energy_counter;
struct msrd;

/* A precise holder's windows run only within EDGE_LEASE_NS of its last ENERGY_READ (what
 * libhaecer's regions and estimates renew by) or EDGE_SHORT_LEASE_NS of any other request (a
 * program that only sends other requests — a TSC read every 140 ms — kept msrd spinning for
 * the whole long lease, issue 28); see the lease in energy_edges.c's header. */
#define EDGE_LEASE_NS 150000000ull
#define EDGE_SHORT_LEASE_NS 6000000ull
/* The windows' CPU budget (policy energy_page.edge_cpu_percent*) is counted per second and
 * weighed against the holders every 10 ms. */
#define EDGE_BUDGET_NS 1000000000ull
#define EDGE_BUDGET_CHECK_NS 10000000ull

/* Turn window sampling on or off for the counters `wanted` marks (NULL: off). While on, msrd
 * reads each such register densely only in a short window around its predicted update (learnt
 * from its own samples), so the page's bracket of the last update is a few microseconds wide. */
void energy_edges_set(struct msrd *server, const bool *wanted);
void energy_edges_on_timeout(struct msrd *server, const struct io_uring_cqe *cqe);
/* A window opened this turn: the loop calls energy_edges_spin once the turn's completions are
 * consumed and its replies submitted. */
bool energy_edges_spin_due(const struct msrd *server);
void energy_edges_spin(struct msrd *server);
/* The sampler just saw `counter` change: where in its bracket the change lay (the page's placed
 * bracket): the bracket, narrowed around the learnt grid point when the grid is known well. */
void energy_edges_place(struct energy_counter *counter);

#endif
