/*
 * Ring layout and protocol (layout version 1)
 *
 * Memory: one 4 KiB header page, then `capacity` (a power of two) slots of 32 bytes.
 *   header  0: identity, written once by ring_format: magic "HAECRNG1", layout version, header
 *              and slot sizes, capacity, flags, clock, major/minor/instance, producer pid,
 *              counter count, tsc_hz, created_ns (CLOCK_MONOTONIC_RAW)
 *         128: head, alone on its 128-byte line: positions reserved so far (records pushed)
 *         256: producer_dropped: records producers gave up on (see below)
 *         384: counter metadata, RING_MAX_COUNTERS x struct ring_counter_info (52 bytes)
 *   slot   i: sequence word, value, timestamp, meta (counter id | unit exponent<<32 | flags<<48)
 * Position p (0, 1, 2, ...) lives in slot p & (capacity - 1). Its sequence word reads 2p+1 while
 * p is being written and 2p+2 once committed; 0 is an empty slot. A slot's word only grows.
 *
 * Producer at position p: reserve p (multi-producer: fetch_add on head; single-producer: a local
 * counter, a plain store of head, no RMW), then claim the slot by raising its word to 2p+1,
 * a release fence, the payload as relaxed 64-bit atomic stores, a release store of 2p+2. Several
 * producers claim by CAS, which only succeeds from an even word below 2p+1: a word that is odd
 * (a writer one lap behind was preempted or died mid-write) or already past 2p+1 (a writer one lap
 * ahead got there first) is never taken over, so two writers never share a slot; the producer
 * drops its own record instead, counts it in producer_dropped and returns -EAGAIN. The position
 * stays reserved, so consumers count it as lost. The producer never waits for anybody.
 *
 * Consumer at position p: acquire-load the word. 2p+2: copy the payload, acquire fence, load the
 * word again; unchanged means the copy is exactly record p (a seqlock), changed means it was
 * overwritten while we copied: lost. Larger than 2p+2: a later lap owns the slot: lost. Smaller
 * (not yet claimed, or being written): if head > p + capacity the producers have moved a whole lap
 * past p, so p is lost; otherwise p is not ready and ring_consume returns what it has.
 * ring_consume_final (all producers gone) counts not-ready positions below head as lost. A lost
 * position lets the consumer jump to max(p + 1, head - capacity). Every position is decided once,
 * as returned or lost, so returned + lost = head - start position, exactly.
 *
 * Consumers map the ring read-only, validate the header and the size of the mapping before they
 * touch a slot, and use only their own copy of the capacity: a producer that rewrites the header
 * or the slots afterwards can make a consumer report garbage, never read outside the mapping.
 * ring_memfd_create seals the size (a shrunk file would SIGBUS readers) and makes the inode
 * mode 0444, so a read-only descriptor cannot be reopened writable through /proc/self/fd by a
 * process of another user.
 */
#include "common/clock.h"
#include "shm/memfd.h"
#include "shm/ring.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RING_HEADER_BYTES 4096u
#define RING_SLOT_BYTES 32u
#define RING_KNOWN_FLAGS RING_SINGLE_PRODUCER
#define RING_MEMFD_MODE 0444

/* tests/shm/helper_ring_stall.c includes this file with its own definition to stop a writer
 * between claiming a slot and committing it, so tests exercise the real code path. */
#ifndef RING_TEST_CLAIMED
#define RING_TEST_CLAIMED(position) ((void)(position))
#endif

/* Written once by ring_format before the ring is shared; never changes afterwards. */
struct ring_identity {
	uint64_t magic;
	uint32_t layout_version;
	uint32_t header_bytes;
	uint32_t slot_bytes;
	uint32_t capacity;
	uint32_t flags;
	uint32_t clock;
	uint16_t major;
	uint16_t minor;
	uint32_t instance;
	int32_t producer_pid;
	uint32_t counter_count;
	uint64_t tsc_hz;
	uint64_t created_ns;
};

struct ring_header {
	struct ring_identity identity;
	/* Every producer writes head on every push: keep it off the lines consumers only read. */
	alignas(128) _Atomic uint64_t head;
	alignas(128) _Atomic uint64_t producer_dropped;
	alignas(128) struct ring_counter_info counters[RING_MAX_COUNTERS];
};

struct ring_slot {
	_Atomic uint64_t sequence;
	_Atomic uint64_t value;
	_Atomic uint64_t timestamp;
	_Atomic uint64_t meta;
};

/* What a reader takes from the header before trusting any of it. */
struct ring_header_copy {
	struct ring_identity identity;
	struct ring_counter_info counters[RING_MAX_COUNTERS];
};

_Static_assert(sizeof(struct ring_header) <= RING_HEADER_BYTES, "header must fit its page");
_Static_assert(sizeof(struct ring_slot) == RING_SLOT_BYTES, "slot layout is part of the ABI");
_Static_assert(sizeof(struct ring_counter_info) == 52, "counter layout is part of the ABI");
_Static_assert(sizeof(struct ring_record) == 24, "a record is FERRET's three 64-bit words");

static bool capacity_valid(uint64_t capacity)
{
	return capacity >= RING_MIN_CAPACITY && capacity <= RING_MAX_CAPACITY &&
	       (capacity & (capacity - 1)) == 0;
}

static bool clock_known(uint32_t clock)
{
	return clock == RING_CLOCK_MONOTONIC_RAW || clock == RING_CLOCK_TSC;
}

static bool counters_valid(const struct ring_counter_info *counters, uint32_t count)
{
	if (count > RING_MAX_COUNTERS)
		return false;
	for (uint32_t i = 0; i < count; i++)
		if (!memchr(counters[i].name, '\0', sizeof(counters[i].name)))
			return false;
	return true;
}

int ring_bytes_for(uint32_t capacity, size_t *bytes)
{
	if (!bytes || !capacity_valid(capacity))
		return -EINVAL;
	*bytes = RING_HEADER_BYTES + (size_t)capacity * RING_SLOT_BYTES;
	return 0;
}

int ring_params_check(const struct ring_params *params)
{
	if (!params || !capacity_valid(params->capacity))
		return -EINVAL;
	if ((params->flags & ~RING_KNOWN_FLAGS) || !clock_known(params->clock))
		return -EINVAL;
	if (params->clock == RING_CLOCK_TSC && params->tsc_hz == 0)
		return -EINVAL;
	if (!counters_valid(params->counters, params->counter_count))
		return -EINVAL;
	return 0;
}

static void header_fill(struct ring_header *header, const struct ring_params *params)
{
	struct ring_identity *identity = &header->identity;

	memset(header, 0, RING_HEADER_BYTES);
	identity->layout_version = RING_LAYOUT_VERSION;
	identity->header_bytes = RING_HEADER_BYTES;
	identity->slot_bytes = RING_SLOT_BYTES;
	identity->capacity = params->capacity;
	identity->flags = params->flags;
	identity->clock = params->clock;
	identity->major = params->major;
	identity->minor = params->minor;
	identity->instance = params->instance;
	identity->producer_pid = params->producer_pid ? params->producer_pid : getpid();
	identity->counter_count = params->counter_count;
	identity->tsc_hz = params->tsc_hz;
	identity->created_ns = clock_monotonic_raw_ns();
	memcpy(header->counters, params->counters,
	       params->counter_count * sizeof(params->counters[0]));
	atomic_init(&header->head, 0);
	atomic_init(&header->producer_dropped, 0);
	identity->magic = RING_MAGIC;
}

/* slots_zeroed: the memory is known to be zero (a fresh memfd), so the slots need no writing and
 * a large ring costs no memory until it is used. */
static int format_memory(void *memory, size_t bytes, const struct ring_params *params,
			 bool slots_zeroed)
{
	size_t expected;
	int rc;

	rc = ring_params_check(params);
	if (rc)
		return rc;
	if (!memory)
		return -EINVAL;
	ring_bytes_for(params->capacity, &expected);
	if (bytes != expected)
		return -EMSGSIZE;
	if (!slots_zeroed)
		memset((char *)memory + RING_HEADER_BYTES, 0, bytes - RING_HEADER_BYTES);
	header_fill(memory, params);
	atomic_thread_fence(memory_order_release);
	return 0;
}

/* Requires bytes == ring_bytes_for(capacity) (-EMSGSIZE otherwise); must happen before anybody
 * attaches: the identity is written with plain stores. */
int ring_format(void *memory, size_t bytes, const struct ring_params *params)
{
	return format_memory(memory, bytes, params, false);
}

/* Checks run on a private copy, so a producer rewriting the header cannot change the verdict
 * between check and use. Order matters: a foreign file is -EBADMSG before anything else. */
static int header_copy_check(const struct ring_header_copy *copy, size_t bytes)
{
	const struct ring_identity *identity = &copy->identity;
	size_t expected;

	if (identity->magic != RING_MAGIC)
		return -EBADMSG;
	if (identity->layout_version != RING_LAYOUT_VERSION)
		return -EPROTO;
	if (identity->header_bytes != RING_HEADER_BYTES || identity->slot_bytes != RING_SLOT_BYTES)
		return -EBADMSG;
	if (ring_bytes_for(identity->capacity, &expected))
		return -EBADMSG;
	if ((identity->flags & ~RING_KNOWN_FLAGS) || !clock_known(identity->clock))
		return -EBADMSG;
	if (!counters_valid(copy->counters, identity->counter_count))
		return -EBADMSG;
	if (bytes != expected)
		return -EMSGSIZE;
	return 0;
}

static void header_copy_take(const void *memory, struct ring_header_copy *copy)
{
	const struct ring_header *header = memory;

	memcpy(&copy->identity, &header->identity, sizeof(copy->identity));
	memcpy(copy->counters, header->counters, sizeof(copy->counters));
}

static int memory_check(const void *memory, size_t bytes, struct ring_header_copy *copy)
{
	if (!memory || (uintptr_t)memory % alignof(struct ring_header))
		return -EINVAL;
	if (bytes < RING_HEADER_BYTES)
		return -EBADMSG;
	header_copy_take(memory, copy);
	return header_copy_check(copy, bytes);
}

/* The header page as read with pread. */
union ring_header_page {
	struct ring_header header;
	unsigned char bytes[RING_HEADER_BYTES];
};

/* Reads and checks the header of the file behind fd without mapping it, so a file of any size
 * or content is judged before anything is mapped. */
static int fd_header_check(int fd, union ring_header_page *page, struct ring_header_copy *copy,
			   size_t *bytes)
{
	struct stat status;
	int rc = shm_fd_regular(fd, &status);
	ssize_t got;

	if (rc)
		return rc;
	if (status.st_size < (off_t)RING_HEADER_BYTES)
		return -EBADMSG;
	got = pread(fd, page->bytes, sizeof(page->bytes), 0);
	if (got < 0)
		return -errno;
	if ((size_t)got != sizeof(page->bytes))
		return -EBADMSG;
	header_copy_take(&page->header, copy);
	*bytes = (uint64_t)status.st_size > SIZE_MAX ? SIZE_MAX : (size_t)status.st_size;
	return header_copy_check(copy, *bytes);
}

/* The ring_*_use functions check the mapped header again: that copy is the one relied on. */
static int fd_map(int fd, int protection, void **mapping, size_t *bytes)
{
	union ring_header_page page;
	struct ring_header_copy copy;
	struct stat status;
	void *memory;
	int rc;

	rc = shm_fd_regular(fd, &status);
	if (rc)
		return rc;
	/* Seals before the size: a creator that could still shrink the file between our size check
	 * and the mapping could make the first access past the new end raise SIGBUS. */
	rc = shm_fd_sealed(fd, F_SEAL_SHRINK);
	if (rc)
		return rc;
	rc = fd_header_check(fd, &page, &copy, bytes);
	if (rc)
		return rc;
	memory = mmap(NULL, *bytes, protection, MAP_SHARED, fd, 0);
	if (memory == MAP_FAILED)
		return -errno;
	*mapping = memory;
	return 0;
}

int ring_memfd_create(const struct ring_params *params, int *fd_out)
{
	void *memory = MAP_FAILED;
	char name[64];
	size_t bytes = 0;
	int fd = -1;
	int rc;

	rc = ring_params_check(params);
	if (rc)
		return rc;
	if (!fd_out)
		return -EINVAL;
	ring_bytes_for(params->capacity, &bytes);
	snprintf(name, sizeof(name), "haecer-ring-%u.%u.%u", params->major, params->minor,
		 params->instance);
	rc = shm_memfd_map(name, bytes, &fd, &memory);
	if (rc)
		goto out;
	rc = format_memory(memory, bytes, params, true);
	if (rc)
		goto out;
	/* A memfd inode is mode 0777: without this, anyone holding the read-only fd could reopen
	 * /proc/self/fd/N read-write. Descriptors already open keep their access mode. */
	rc = shm_memfd_seal(fd, RING_MEMFD_MODE, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	if (rc)
		goto out;
	*fd_out = fd;
	fd = -1;
out:
	if (memory != MAP_FAILED)
		munmap(memory, bytes);
	if (fd >= 0)
		close(fd);
	return rc;
}

int ring_memfd_release_records(int fd)
{
	struct stat status;

	if (fstat(fd, &status) < 0)
		return -errno;
	if (status.st_size <= (off_t)RING_HEADER_BYTES)
		return 0;
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, RING_HEADER_BYTES,
		      status.st_size - (off_t)RING_HEADER_BYTES) < 0)
		return -errno;
	return 0;
}

int ring_reopen_readonly(int fd)
{
	return shm_reopen_readonly(fd);
}

static void info_fill(struct ring_info *info, const struct ring_header_copy *copy,
		      uint64_t pushed, uint64_t dropped)
{
	const struct ring_identity *identity = &copy->identity;
	uint32_t count = identity->counter_count;

	memset(info, 0, sizeof(*info));
	info->major = identity->major;
	info->minor = identity->minor;
	info->instance = identity->instance;
	info->capacity = identity->capacity;
	info->record_size = identity->slot_bytes;
	info->flags = identity->flags;
	info->clock = identity->clock;
	info->producer_pid = identity->producer_pid;
	info->tsc_hz = identity->tsc_hz;
	info->created_ns = identity->created_ns;
	info->pushed = pushed;
	info->producer_dropped = dropped;
	/* The copy may come from a live header a producer rewrote since it was validated. */
	info->counter_count = count < RING_MAX_COUNTERS ? count : RING_MAX_COUNTERS;
	memcpy(info->counters, copy->counters, info->counter_count * sizeof(info->counters[0]));
	for (uint32_t i = 0; i < info->counter_count; i++)
		info->counters[i].name[RING_NAME_MAX - 1] = '\0';
}

/* pread, not mmap: a listing tool must not be exposed to a file that shrinks under it. */
int ring_info_from_fd(int fd, struct ring_info *info)
{
	union ring_header_page page;
	struct ring_header_copy copy;
	size_t bytes;
	int rc;

	if (!info)
		return -EINVAL;
	rc = fd_header_check(fd, &page, &copy, &bytes);
	if (rc)
		return rc;
	info_fill(info, &copy, atomic_load_explicit(&page.header.head, memory_order_relaxed),
		  atomic_load_explicit(&page.header.producer_dropped, memory_order_relaxed));
	return 0;
}

/* ---- producing ---- */

int ring_producer_use(struct ring_producer *producer, void *memory, size_t bytes)
{
	struct ring_header_copy copy;
	struct ring_header *header = memory;
	int rc;

	if (!producer)
		return -EINVAL;
	rc = memory_check(memory, bytes, &copy);
	if (rc)
		return rc;
	memset(producer, 0, sizeof(*producer));
	producer->header = header;
	producer->slots = (struct ring_slot *)((char *)memory + RING_HEADER_BYTES);
	producer->mask = copy.identity.capacity - 1;
	producer->flags = copy.identity.flags;
	producer->next = atomic_load_explicit(&header->head, memory_order_relaxed);
	producer->mapping = memory;
	producer->mapping_bytes = bytes;
	return 0;
}

/* The fd must be read-write and its size sealed against shrinking (-EPERM otherwise). */
int ring_producer_attach(struct ring_producer *producer, int fd)
{
	void *mapping = NULL;
	size_t bytes = 0;
	int rc;

	if (!producer)
		return -EINVAL;
	rc = fd_map(fd, PROT_READ | PROT_WRITE, &mapping, &bytes);
	if (rc)
		return rc;
	rc = ring_producer_use(producer, mapping, bytes);
	if (rc) {
		munmap(mapping, bytes);
		return rc;
	}
	producer->owns_mapping = true;
	return 0;
}

void ring_producer_detach(struct ring_producer *producer)
{
	if (!producer)
		return;
	if (producer->owns_mapping && producer->mapping)
		munmap(producer->mapping, producer->mapping_bytes);
	memset(producer, 0, sizeof(*producer));
}

/* The payload as the three words a slot stores. Read from the caller's record before any store
 * to the ring: loads issued after those stores can be held up by a false dependency on them
 * (addresses equal modulo 4 KiB), which made a push cost 15% more depending on where the
 * stack and the mapping happened to land. */
struct slot_payload {
	uint64_t value;
	uint64_t timestamp;
	uint64_t meta;
};

static inline struct slot_payload payload_of(const struct ring_record *record)
{
	return (struct slot_payload){
		.value = record->value,
		.timestamp = record->timestamp,
		.meta = (uint64_t)record->counter_id |
			(uint64_t)(uint16_t)record->unit_exponent << 32 |
			(uint64_t)record->flags << 48,
	};
}

/* Caller holds the claim (odd word) and has issued the release fence that orders the claim
 * before these stores: a reader that sees any of them then sees the word change. */
static inline void slot_fill(struct ring_slot *slot, struct slot_payload payload)
{
	atomic_store_explicit(&slot->value, payload.value, memory_order_relaxed);
	atomic_store_explicit(&slot->timestamp, payload.timestamp, memory_order_relaxed);
	atomic_store_explicit(&slot->meta, payload.meta, memory_order_relaxed);
}

static inline int push_single(struct ring_producer *producer, const struct ring_record *record)
{
	struct slot_payload payload = payload_of(record);
	uint64_t position = producer->next;
	struct ring_slot *slot = &producer->slots[position & producer->mask];

	producer->next = position + 1;
	atomic_store_explicit(&producer->header->head, position + 1, memory_order_relaxed);
	atomic_store_explicit(&slot->sequence, 2 * position + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	RING_TEST_CLAIMED(position);
	slot_fill(slot, payload);
	atomic_store_explicit(&slot->sequence, 2 * position + 2, memory_order_release);
	return 0;
}

static inline int push_shared(struct ring_producer *producer, const struct ring_record *record)
{
	struct slot_payload payload = payload_of(record);
	struct ring_header *header = producer->header;
	uint64_t position = atomic_fetch_add_explicit(&header->head, 1, memory_order_relaxed);
	struct ring_slot *slot = &producer->slots[position & producer->mask];
	uint64_t claim = 2 * position + 1;
	uint64_t seen = atomic_load_explicit(&slot->sequence, memory_order_relaxed);

	/* Acquire on success: the previous lap's payload stores come before ours. */
	do {
		if ((seen & 1) || seen >= claim) {
			atomic_fetch_add_explicit(&header->producer_dropped, 1,
						  memory_order_relaxed);
			return -EAGAIN;
		}
	} while (!atomic_compare_exchange_weak_explicit(&slot->sequence, &seen, claim,
							memory_order_acquire,
							memory_order_relaxed));
	atomic_thread_fence(memory_order_release);
	RING_TEST_CLAIMED(position);
	slot_fill(slot, payload);
	atomic_store_explicit(&slot->sequence, claim + 1, memory_order_release);
	return 0;
}

int ring_push(struct ring_producer *producer, const struct ring_record *record)
{
	if (!producer || !producer->slots || !record)
		return -EINVAL;
	/* A multi-producer push costs two locked instructions; a branch more is noise there. */
	if (__builtin_expect(producer->flags & RING_SINGLE_PRODUCER, 1))
		return push_single(producer, record);
	return push_shared(producer, record);
}

/* ---- consuming ---- */

/* Whether `records` pushes fit between since_ns and now_ns (plus two laps of slack). */
static bool head_possible(uint64_t records, uint64_t since_ns, uint64_t now_ns,
			  uint64_t capacity)
{
	uint64_t elapsed_us, allowed;

	if (since_ns > now_ns)
		return false;
	elapsed_us = (now_ns - since_ns) / 1000 + 1;
	allowed = elapsed_us > UINT64_MAX / RING_MAX_PUSHES_PER_US
			  ? UINT64_MAX
			  : elapsed_us * RING_MAX_PUSHES_PER_US;
	return records <= allowed || records - allowed <= 2 * capacity;
}

int ring_consumer_use(struct ring_consumer *consumer, const void *memory, size_t bytes)
{
	struct ring_header_copy copy;
	int rc;

	if (!consumer)
		return -EINVAL;
	rc = memory_check(memory, bytes, &copy);
	if (rc)
		return rc;
	memset(consumer, 0, sizeof(*consumer));
	consumer->header = memory;
	consumer->slots = (const struct ring_slot *)((const char *)memory + RING_HEADER_BYTES);
	consumer->capacity = copy.identity.capacity;
	consumer->mask = consumer->capacity - 1;
	consumer->mapping = memory;
	consumer->mapping_bytes = bytes;
	consumer->attach_head = atomic_load_explicit(&consumer->header->head, memory_order_acquire);
	consumer->seen_head = consumer->attach_head;
	consumer->attach_ns = clock_monotonic_raw_ns();
	/* A head rewritten before we came: no more records than pushing since the ring's
	 * creation allows (a creation time in the future is a lie of its own). */
	consumer->corrupted = !head_possible(consumer->attach_head, copy.identity.created_ns,
					      consumer->attach_ns, consumer->capacity);
	ring_consumer_seek_oldest(consumer);
	return 0;
}

/* Any access mode works; the mapping is read-only. The size must be sealed against shrinking
 * (-EPERM otherwise). */
int ring_consumer_attach(struct ring_consumer *consumer, int fd)
{
	void *mapping = NULL;
	size_t bytes = 0;
	int rc;

	if (!consumer)
		return -EINVAL;
	rc = fd_map(fd, PROT_READ, &mapping, &bytes);
	if (rc)
		return rc;
	rc = ring_consumer_use(consumer, mapping, bytes);
	if (rc) {
		munmap(mapping, bytes);
		return rc;
	}
	consumer->owns_mapping = true;
	return 0;
}

static inline uint64_t consumer_head(const struct ring_consumer *consumer)
{
	return atomic_load_explicit(&consumer->header->head, memory_order_acquire);
}

void ring_consumer_seek_oldest(struct ring_consumer *consumer)
{
	uint64_t head = consumer_head(consumer);

	consumer->position = head > consumer->capacity ? head - consumer->capacity : 0;
}

void ring_consumer_seek_newest(struct ring_consumer *consumer)
{
	consumer->position = consumer_head(consumer);
}

void ring_consumer_detach(struct ring_consumer *consumer)
{
	if (!consumer)
		return;
	if (consumer->owns_mapping && consumer->mapping)
		munmap((void *)consumer->mapping, consumer->mapping_bytes);
	memset(consumer, 0, sizeof(*consumer));
}

static inline void slot_read(const struct ring_slot *slot, struct ring_record *record)
{
	uint64_t meta = atomic_load_explicit(&slot->meta, memory_order_relaxed);

	record->value = atomic_load_explicit(&slot->value, memory_order_relaxed);
	record->timestamp = atomic_load_explicit(&slot->timestamp, memory_order_relaxed);
	record->counter_id = (uint32_t)meta;
	record->unit_exponent = (int16_t)(uint16_t)(meta >> 32);
	record->flags = (uint16_t)(meta >> 48);
}

/* Copies record `position` if its slot holds it, complete, before and after the copy. Returns
 * the slot's word, or 2 * position + 3 (a later lap) when it changed during the copy. */
static inline uint64_t slot_take(const struct ring_slot *slot, uint64_t position,
				 struct ring_record *record)
{
	uint64_t committed = 2 * position + 2;
	uint64_t sequence = atomic_load_explicit(&slot->sequence, memory_order_acquire);

	if (sequence != committed)
		return sequence;
	slot_read(slot, record);
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&slot->sequence, memory_order_relaxed) != committed)
		return committed + 1;
	return committed;
}

/* Whether `head` is one an honest ring can show this consumer: never below what it saw before
 * (head only grows), and no further past the head at attach than the time since allows (the
 * clock is read only when head moved more than a lap since the last look). */
static bool head_plausible(struct ring_consumer *consumer, uint64_t head)
{
	if (head < consumer->seen_head || head < consumer->position)
		return false;
	if (head - consumer->seen_head > consumer->capacity &&
	    !head_possible(head - consumer->attach_head, consumer->attach_ns,
			   clock_monotonic_raw_ns(), consumer->capacity))
		return false;
	consumer->seen_head = head;
	return true;
}

bool ring_consumer_corrupted(struct ring_consumer *consumer)
{
	uint64_t head, dropped;

	if (!consumer || !consumer->header || consumer->corrupted)
		return consumer != NULL && consumer->corrupted;
	head = consumer_head(consumer);
	dropped = atomic_load_explicit(&consumer->header->producer_dropped, memory_order_relaxed);
	if (!head_plausible(consumer, head) || dropped > head)
		consumer->corrupted = true;
	return consumer->corrupted;
}

/* Every loop iteration returns a record, decides at least one position lost, or stops, and the
 * slot index always goes through the consumer's own mask: a hostile header or slot words bend
 * the counts, never the memory accesses. */
static ssize_t consume(struct ring_consumer *consumer, struct ring_record *records, size_t max,
		       uint64_t *lost, bool final)
{
	uint64_t head, position, missed = 0, steps = 0, step_limit;
	size_t count = 0;

	if (!consumer || !consumer->slots || (max && !records))
		return -EINVAL;
	if (max > SSIZE_MAX)
		max = SSIZE_MAX;
	if (ring_consumer_corrupted(consumer))
		return RING_CORRUPTED;
	head = consumer_head(consumer);
	position = consumer->position;
	/* An honest ring needs at most max copies plus one lap of skips; a producer that keeps
	 * moving head must not keep a consumer here forever. */
	step_limit = (uint64_t)max + consumer->capacity;
	while (count < max && position < head && steps++ < step_limit) {
		const struct ring_slot *slot = &consumer->slots[position & consumer->mask];
		uint64_t committed = 2 * position + 2;
		uint64_t sequence = slot_take(slot, position, &records[count]);
		uint64_t next = position + 1;

		if (sequence == committed) {
			count++;
			position = next;
			continue;
		}
		head = consumer_head(consumer);
		if (!head_plausible(consumer, head)) {
			consumer->corrupted = true;
			return RING_CORRUPTED; /* what this call read is from a lying ring too */
		}
		bool lapped = head > position + consumer->capacity;
		if (sequence < committed && !final && !lapped)
			break;
		if (head > consumer->capacity && head - consumer->capacity > next)
			next = head - consumer->capacity;
		missed += next - position;
		position = next;
	}
	consumer->position = position;
	consumer->lost_total += missed;
	if (lost)
		*lost += missed;
	return (ssize_t)count;
}

ssize_t ring_consume(struct ring_consumer *consumer, struct ring_record *records, size_t max,
		     uint64_t *lost)
{
	return consume(consumer, records, max, lost, false);
}

ssize_t ring_consume_final(struct ring_consumer *consumer, struct ring_record *records, size_t max,
			   uint64_t *lost)
{
	return consume(consumer, records, max, lost, true);
}

void ring_consumer_info(const struct ring_consumer *consumer, struct ring_info *info)
{
	const struct ring_header *header = consumer->header;
	struct ring_header_copy copy;

	header_copy_take(header, &copy);
	copy.identity.capacity = (uint32_t)consumer->capacity;
	info_fill(info, &copy, atomic_load_explicit(&header->head, memory_order_acquire),
		  atomic_load_explicit(&header->producer_dropped, memory_order_relaxed));
}

uint64_t ring_consumer_backlog(const struct ring_consumer *consumer)
{
	uint64_t head = consumer_head(consumer);

	return head > consumer->position ? head - consumer->position : 0;
}

/* kill(pid, 0) sets errno; restore it, callers never expect it touched. */
bool ring_producer_alive(const struct ring_info *info)
{
	int saved_errno = errno;
	bool alive;

	if (!info || info->producer_pid <= 0)
		return false;
	alive = kill(info->producer_pid, 0) == 0 || errno == EPERM;
	errno = saved_errno;
	return alive;
}
