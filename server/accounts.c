/*
 * server/accounts.c — what each uid holds, so that one uid cannot take all of msrd.
 *
 * The per-connection limits (rings, handles, slots) bound one connection; a uid could still open
 * thousands of connections and take every connection, all ring memory and every schedule.
 * An account per uid counts its connections, the ring references its connections hold, the
 * memory of the rings it created (charged until the ring leaves the directory, which may be
 * after its creator left), its registered batches and its running schedules, each against a
 * limit of --max-*-per-uid.
 *
 * An account is freed when it holds nothing (coarse energy values are kept per grant setting
 * by energy.c, not here: they must outlive connections and accounts alike). The table is a
 * small hash of uids.
 */
#include "server/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const resource_names[ACCOUNT_RESOURCES] = {
	[ACCOUNT_CONNECTIONS] = "connections",
	[ACCOUNT_RINGS] = "rings held",
	[ACCOUNT_RING_BYTES] = "bytes of ring memory",
	[ACCOUNT_HANDLES] = "registered batches",
	[ACCOUNT_SCHEDULES] = "schedules",
	[ACCOUNT_PERF_EVENTS] = "perf events",
};

static const char *const limit_options[ACCOUNT_RESOURCES] = {
	[ACCOUNT_CONNECTIONS] = "--max-clients-per-uid",
	[ACCOUNT_RINGS] = "--max-rings-per-uid",
	[ACCOUNT_RING_BYTES] = "--ring-memory-per-uid-mib",
	[ACCOUNT_HANDLES] = "--max-handles-per-uid",
	[ACCOUNT_SCHEDULES] = "--max-schedules-per-uid",
	[ACCOUNT_PERF_EVENTS] = "the policy's perf max_open",
};

void accounts_init(struct accounts *accounts, const struct msrd_config *config)
{
	memset(accounts, 0, sizeof(*accounts));
	accounts->limits[ACCOUNT_CONNECTIONS] = config->max_clients_per_uid;
	accounts->limits[ACCOUNT_RINGS] = config->max_rings_per_uid;
	accounts->limits[ACCOUNT_RING_BYTES] = config->ring_memory_per_uid;
	accounts->limits[ACCOUNT_HANDLES] = config->max_handles_per_uid;
	accounts->limits[ACCOUNT_SCHEDULES] = config->max_schedules_per_uid;
	accounts->limits[ACCOUNT_PERF_EVENTS] = UINT64_MAX; /* the grant's max_open bounds it */
}

static size_t bucket_of(uid_t uid)
{
	return ((uint32_t)uid * 2654435761u) % ACCOUNT_BUCKETS;
}

static void account_free(struct uid_account *account)
{
	free(account);
}

void accounts_free(struct accounts *accounts)
{
	for (size_t i = 0; i < ACCOUNT_BUCKETS; i++) {
		while (accounts->buckets[i] != NULL) {
			struct uid_account *account = accounts->buckets[i];
			accounts->buckets[i] = account->next;
			account_free(account);
		}
	}
}

struct uid_account *accounts_get(struct accounts *accounts, uid_t uid)
{
	struct uid_account **bucket = &accounts->buckets[bucket_of(uid)];
	struct uid_account *account;

	for (account = *bucket; account != NULL; account = account->next) {
		if (account->uid == uid)
			return account;
	}
	account = calloc(1, sizeof(*account));
	if (account == NULL)
		return NULL;
	account->uid = uid;
	account->next = *bucket;
	*bucket = account;
	return account;
}

/* Free an account that holds nothing. */
static void drop_if_unused(struct accounts *accounts, struct uid_account *account)
{
	struct uid_account **link = &accounts->buckets[bucket_of(account->uid)];

	for (size_t i = 0; i < ACCOUNT_RESOURCES; i++) {
		if (account->used[i] != 0)
			return;
	}
	while (*link != NULL && *link != account)
		link = &(*link)->next;
	if (*link == account)
		*link = account->next;
	account_free(account);
}

int accounts_take(struct accounts *accounts, struct uid_account *account,
		  enum account_resource what, uint64_t amount)
{
	if (account->used[what] + amount > accounts->limits[what])
		return -ENOSPC;
	account->used[what] += amount;
	return 0;
}

void accounts_give_back(struct accounts *accounts, struct uid_account *account,
			enum account_resource what, uint64_t amount)
{
	if (account == NULL)
		return;
	account->used[what] -= amount < account->used[what] ? amount : account->used[what];
	drop_if_unused(accounts, account);
}

void accounts_drop_unused(struct accounts *accounts, struct uid_account *account)
{
	if (account != NULL)
		drop_if_unused(accounts, account);
}

int accounts_describe_limit(const struct accounts *accounts, const struct uid_account *account,
			    enum account_resource what, char *text, size_t size)
{
	uint64_t limit = accounts->limits[what];

	if (what == ACCOUNT_RING_BYTES)
		return snprintf(text, size, "uid %u holds %llu of its %llu MiB of ring memory (%s)",
				(unsigned)account->uid,
				(unsigned long long)account->used[what],
				(unsigned long long)(limit >> 20), limit_options[what]);
	return snprintf(text, size, "uid %u holds %llu %s, its limit (%s)", (unsigned)account->uid,
			(unsigned long long)account->used[what], resource_names[what],
			limit_options[what]);
}
