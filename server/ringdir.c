/*
 * server/ringdir.c — the ring directory: (major, minor, instance) -> shared-memory ring.
 *
 * msrd creates every ring (a sealed memfd, shm/ring.h) and keeps its read-write descriptor; the
 * producer gets a read-write duplicate, consumers a read-only reopening. Instances are numbered
 * server-wide in creation order from 1, so an instance number is never reused while msrd runs
 * and "instance 0" can mean "the newest ring of (major, minor)".
 *
 * Lifetime: an entry lives while its producer is connected (or, for a ring msrd produces itself,
 * its schedule runs); once it is not, it stays listed for the grace period (so a monitor that
 * arrives just after a short-lived producer exited can still drain it), then it is dropped and
 * its memory given back to its creator's quota. Consumers do not keep it: a monitor of another
 * uid that opens every ring and stays connected must not hold the creator's quota. Dropping an
 * entry frees the memory of its records for real (a hole punched over the slots), so what was
 * handed out earlier costs nothing once the quota no longer counts it; consumers keep a valid
 * mapping of the same size and simply find no further records.
 */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm/ring.h"

void ringdir_init(struct ringdir *dir, uint64_t max_bytes, uint64_t grace_ns,
		  struct accounts *accounts)
{
	*dir = (struct ringdir){ .max_bytes = max_bytes, .grace_ns = grace_ns, .next_instance = 1,
				 .accounts = accounts };
}

static void entry_free(struct ring_entry *entry)
{
	free(entry->readings);
	free(entry);
}

/* Out of the directory (the caller removes it from `entries`): its memory is given back for
 * real and to its creator's quota. The struct stays, on dir->dropped, while connected
 * consumers still reference it (ringdir_release frees it with the last one). */
static void entry_drop(struct ringdir *dir, struct ring_entry *entry)
{
	int status = ring_memfd_release_records(entry->fd);

	if (status < 0)
		log_warn_errno(status, "ring %u.%u.%u: giving its memory back", entry->major,
			       entry->minor, entry->instance);
	dir->total_bytes -= entry->bytes;
	accounts_give_back(dir->accounts, entry->account, ACCOUNT_RING_BYTES, entry->bytes);
	entry->account = NULL;
	close(entry->fd);
	entry->fd = -1;
	entry->dropped = true;
	if (entry->consumers == 0) {
		entry_free(entry);
		return;
	}
	entry->next_dropped = dir->dropped;
	dir->dropped = entry;
}

void ringdir_free(struct ringdir *dir)
{
	for (size_t i = 0; i < dir->count; i++) {
		dir->entries[i]->consumers = 0;
		entry_drop(dir, dir->entries[i]);
	}
	while (dir->dropped != NULL) {
		struct ring_entry *entry = dir->dropped;
		dir->dropped = entry->next_dropped;
		entry_free(entry);
	}
	free(dir->entries);
	*dir = (struct ringdir){ 0 };
}

static int compare_key(const struct ring_entry *entry, uint16_t major, uint16_t minor,
		       uint32_t instance)
{
	if (entry->major != major)
		return entry->major < major ? -1 : 1;
	if (entry->minor != minor)
		return entry->minor < minor ? -1 : 1;
	if (entry->instance != instance)
		return entry->instance < instance ? -1 : 1;
	return 0;
}

size_t ringdir_lower_bound(const struct ringdir *dir, uint16_t major, uint16_t minor,
			   uint32_t instance)
{
	size_t low = 0;
	size_t high = dir->count;

	while (low < high) {
		size_t middle = low + (high - low) / 2;
		if (compare_key(dir->entries[middle], major, minor, instance) < 0)
			low = middle + 1;
		else
			high = middle;
	}
	return low;
}

static int insert_entry(struct ringdir *dir, struct ring_entry *entry)
{
	size_t index;

	if (dir->count == dir->capacity) {
		size_t capacity = dir->capacity > 0 ? dir->capacity * 2 : 16;
		struct ring_entry **bigger = realloc(dir->entries, sizeof(*bigger) * capacity);
		if (bigger == NULL)
			return -ENOMEM;
		dir->entries = bigger;
		dir->capacity = capacity;
	}
	/* Instances only grow, so a new entry sorts last among its (major, minor). */
	index = ringdir_lower_bound(dir, entry->major, entry->minor, entry->instance);
	memmove(&dir->entries[index + 1], &dir->entries[index],
		sizeof(*dir->entries) * (dir->count - index));
	dir->entries[index] = entry;
	dir->count++;
	return 0;
}

static void params_from_request(const struct wire_ring_create *request, uint32_t instance,
				int32_t producer_pid, struct ring_params *params)
{
	memset(params, 0, sizeof(*params));
	params->major = request->major;
	params->minor = request->minor;
	params->instance = instance;
	params->capacity = request->capacity;
	params->flags = request->flags;
	params->clock = request->clock;
	params->producer_pid = (int32_t)producer_pid;
	params->tsc_hz = request->tsc_hz;
	params->counter_count = request->counter_count;
	for (uint32_t i = 0; i < request->counter_count && i < RING_MAX_COUNTERS; i++) {
		const struct wire_ring_counter *from = &request->counters[i];
		struct ring_counter_info *to = &params->counters[i];
		_Static_assert(RING_NAME_MAX == WIRE_NAME_MAX, "counter names have the same room");
		memcpy(to->name, from->name, RING_NAME_MAX);
		to->id = from->id;
		to->kind = from->kind;
		to->unit_exponent = from->unit_exponent;
		to->package = from->package;
		to->cpu = from->cpu;
	}
}

int ringdir_create(struct ringdir *dir, struct client *producer, struct uid_account *account,
		   int32_t producer_pid, const struct wire_ring_create *request,
		   struct ring_entry **out, int *fd_out)
{
	struct ring_params params;
	struct ring_entry *entry = NULL;
	size_t bytes;
	int producer_fd = -1;
	int fd = -1;
	int status;

	params_from_request(request, dir->next_instance, producer_pid, &params);
	status = ring_params_check(&params);
	if (status < 0)
		return status;
	status = ring_bytes_for(params.capacity, &bytes);
	if (status < 0)
		return status;
	if (dir->total_bytes + bytes > dir->max_bytes)
		return -ENOSPC;
	if (accounts_take(dir->accounts, account, ACCOUNT_RING_BYTES, bytes) < 0)
		return -EDQUOT;
	entry = calloc(1, sizeof(*entry));
	if (entry == NULL) {
		accounts_give_back(dir->accounts, account, ACCOUNT_RING_BYTES, bytes);
		return -ENOMEM;
	}
	status = ring_memfd_create(&params, &fd);
	if (status < 0)
		goto fail;
	producer_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (producer_fd < 0) {
		status = -EMFILE;
		goto fail;
	}
	*entry = (struct ring_entry){
		.major = params.major,
		.minor = params.minor,
		.instance = params.instance,
		.fd = fd,
		.capacity = params.capacity,
		.producer_pid = params.producer_pid,
		.bytes = bytes,
		.account = account,
		.owner_uid = account->uid,
		.owner_pid = producer != NULL ? producer->pid : producer_pid,
		.producer = producer,
		.scheduled = producer == NULL,
	};
	status = insert_entry(dir, entry);
	if (status < 0)
		goto fail;
	dir->next_instance++;
	dir->total_bytes += bytes;
	*out = entry;
	*fd_out = producer_fd;
	return 0;
fail:
	if (producer_fd >= 0)
		close(producer_fd);
	if (fd >= 0)
		close(fd);
	free(entry);
	accounts_give_back(dir->accounts, account, ACCOUNT_RING_BYTES, bytes);
	return status;
}

int ringdir_find(struct ringdir *dir, uint16_t major, uint16_t minor, uint32_t instance,
		 struct ring_entry **out)
{
	struct ring_entry *entry = NULL;
	size_t index;

	if (instance == 0) {
		/* The newest of (major, minor) sorts just before the first key of minor + 1. */
		index = ringdir_lower_bound(dir, major, minor, UINT32_MAX);
		if (index < dir->count && compare_key(dir->entries[index], major, minor,
						      UINT32_MAX) == 0)
			entry = dir->entries[index];
		else if (index > 0 && dir->entries[index - 1]->major == major &&
			 dir->entries[index - 1]->minor == minor)
			entry = dir->entries[index - 1];
	} else {
		index = ringdir_lower_bound(dir, major, minor, instance);
		if (index < dir->count &&
		    compare_key(dir->entries[index], major, minor, instance) == 0)
			entry = dir->entries[index];
	}
	*out = entry;
	return entry != NULL ? 0 : -ENOENT;
}

int ringdir_open(struct ringdir *dir, struct ring_entry *entry, int *fd_out)
{
	int fd = ring_reopen_readonly(entry->fd);

	(void)dir;
	if (fd < 0)
		return fd;
	entry->consumers++;
	*fd_out = fd;
	return 0;
}

static bool orphaned(const struct ring_entry *entry)
{
	return entry->producer == NULL && !entry->scheduled;
}

/* The last consumer of a dropped entry let it go. */
static void forget_dropped(struct ringdir *dir, struct ring_entry *entry)
{
	for (struct ring_entry **link = &dir->dropped; *link != NULL;
	     link = &(*link)->next_dropped) {
		if (*link == entry) {
			*link = entry->next_dropped;
			break;
		}
	}
	entry_free(entry);
}

void ringdir_release(struct ringdir *dir, struct ring_entry *entry, bool producer, uint64_t now_ns)
{
	if (entry->dropped) {
		if (!producer && entry->consumers > 0 && --entry->consumers == 0)
			forget_dropped(dir, entry);
		return;
	}
	if (producer) {
		entry->producer = NULL;
		if (orphaned(entry))
			entry->orphaned_ns = now_ns;
	} else if (entry->consumers > 0) {
		entry->consumers--;
	}
}

void ringdir_release_scheduled(struct ringdir *dir, struct ring_entry *entry, uint64_t now_ns)
{
	(void)dir;
	entry->scheduled = false;
	if (orphaned(entry))
		entry->orphaned_ns = now_ns;
}

bool ringdir_expire(struct ringdir *dir, uint64_t now_ns)
{
	size_t kept = 0;
	bool waiting = false;

	for (size_t i = 0; i < dir->count; i++) {
		struct ring_entry *entry = dir->entries[i];
		bool orphan = orphaned(entry);
		if (orphan && now_ns - entry->orphaned_ns >= dir->grace_ns) {
			log_info("ring %u.%u.%u dropped: no producer for its grace period",
				 entry->major, entry->minor, entry->instance);
			entry_drop(dir, entry);
			continue;
		}
		if (orphan)
			waiting = true;
		dir->entries[kept++] = entry;
	}
	dir->count = kept;
	return waiting;
}

void ringdir_entry_to_wire(const struct ring_entry *entry, struct wire_ring_entry *out)
{
	*out = (struct wire_ring_entry){
		.major = entry->major,
		.minor = entry->minor,
		.instance = entry->instance,
		.capacity = entry->capacity,
		.flags = entry->producer != NULL || entry->scheduled ? WIRE_RING_PRODUCER_CONNECTED
								      : 0,
		.producer_pid = entry->producer_pid,
		.consumers = entry->consumers,
		.bytes = entry->bytes,
		.owner_uid = (uint32_t)entry->owner_uid,
		.owner_pid = entry->owner_pid,
	};
}
