/*
 * server/accounts.h — msrd's per-uid accounts (accounts.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_ACCOUNTS_H
#define HAECER_SERVER_ACCOUNTS_H

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

struct msrd_config;

enum account_resource {
	ACCOUNT_CONNECTIONS = 0,
	ACCOUNT_RINGS,                 /* ring references (created or opened) of its connections */
	ACCOUNT_RING_BYTES,            /* memory of the rings it created, until they are dropped */
	ACCOUNT_HANDLES,
	ACCOUNT_SCHEDULES,             /* running */
	ACCOUNT_PERF_EVENTS,           /* handed out by the perf broker; bound by the policy */
	ACCOUNT_RESOURCES,
};

#define ACCOUNT_BUCKETS 64u

struct uid_account {
	struct uid_account *next;      /* hash chain */
	uid_t uid;
	uint64_t used[ACCOUNT_RESOURCES];
	struct log_ratelimit refusals; /* refusal log lines of all its connections */
	uint64_t edge_cpu_ns;          /* precise-edge windows its holders caused this second */
	uint64_t edge_logged;          /* the budget second it was last logged over budget in */
};

struct accounts {
	struct uid_account *buckets[ACCOUNT_BUCKETS];
	uint64_t limits[ACCOUNT_RESOURCES];
};

void accounts_init(struct accounts *accounts, const struct msrd_config *config);
void accounts_free(struct accounts *accounts);
/* The account of `uid`, created empty when it has none; NULL without memory. */
struct uid_account *accounts_get(struct accounts *accounts, uid_t uid);
/* Count `amount` more of a resource against the uid's limit: 0, or -ENOSPC (nothing counted). */
int accounts_take(struct accounts *accounts, struct uid_account *account,
		  enum account_resource what, uint64_t amount);
/* Count it back; an account left holding nothing is freed (NULL is fine). */
void accounts_give_back(struct accounts *accounts, struct uid_account *account,
			enum account_resource what, uint64_t amount);
/* Free an account that holds nothing, e.g. after a refused first take (NULL is fine). */
void accounts_drop_unused(struct accounts *accounts, struct uid_account *account);
/* "uid 1000 holds 64 registered batches, its limit (--max-handles-per-uid)" for refusals. */
int accounts_describe_limit(const struct accounts *accounts, const struct uid_account *account,
			    enum account_resource what, char *text, size_t size);

#endif
