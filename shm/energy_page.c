/*
 * Energy page layout (layout version 4)
 *
 *   offset   0: identity, written once before the page is shared: magic "HAECEPG1", layout
 *              version, page bytes, entry count, flags, address, min_interval_ms,
 *              resolution_uj, tsc_hz, producer pid
 *          128: the sequence word (write under way, state, write count), alone on its line
 *          256: entry_count entries of 64 bytes, one cache line each: identity (cpu, package,
 *              domain, exponent, per_cpu) then total, sample_ns, raw, sample_tsc, update_ns,
 *              update_tsc (struct energy_page_entry)
 *          then (version 3) entry_count records of 128 bytes (64 before version 4), the
 *              brackets of each entry's last two updates: update_lo_ns, update_lo_tsc,
 *              previous_total, previous_update_ns, previous_update_tsc, previous_update_lo_ns,
 *              previous_update_lo_tsc, reserved, then (version 4) where in those brackets the
 *              two updates lay: update_placed_lo_ns, update_placed_hi_ns,
 *              previous_placed_lo_ns, previous_placed_hi_ns, then what measuring cost msrd
 *              for the entry's register so far (measurement_cpu_ns, measurement_nj: words
 *              that were reserved, zero from an msrd that does not write them), 2 reserved
 *
 * A client's read (energy_page_read_total) touches two lines: the words and its entry.
 *
 * One writer (msrd). A write section: relaxed store of the sequence word with its writing bit
 * set (odd), release fence, the values as relaxed 64-bit atomic stores, release store of the
 * word without the bit, one step on. The state (LIVE, STALE, DEAD) is bits 1-2 of the same word,
 * so a reading and the state it was taken under come from one load. A reader: acquire-load
 * the word; odd means a write is under way (try again); copy the entry with relaxed loads, an
 * acquire fence, load the word again: unchanged means the copy is one write's values, exactly
 * (the seqlock of the rings' slots, shm/ring.c). Readers validate the identity and the mapping's
 * size once, keep their own copy of the entry count, and never index past it: a writer that
 * rewrote the identity could make a reader report garbage, never read outside its mapping.
 */
#include "shm/energy_page.h"
#include "shm/memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE_HEADER_BYTES 256u
#define PAGE_ENTRY_BYTES 64u
#define PAGE_EDGES_BYTES 128u
#define PAGE_ROUND 4096u
#define PAGE_MEMFD_MODE 0444
/* The seals a reader requires of a page; energy_page_create adds F_SEAL_SEAL, which a reader
 * needs not (a seal is never removed). */
#define PAGE_READER_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE)

struct page_identity {
	uint64_t magic;
	uint32_t layout_version;
	uint32_t page_bytes;
	uint32_t entry_count;
	uint32_t flags;
	uint32_t address;
	uint32_t min_interval_ms;
	uint64_t resolution_uj;
	uint64_t tsc_hz;
	int32_t producer_pid;
	uint32_t reserved;
};

struct page_header {
	struct page_identity identity;
	alignas(128) _Atomic uint64_t sequence;
};

_Static_assert(sizeof(struct page_header) <= PAGE_HEADER_BYTES, "header must fit its room");
_Static_assert(offsetof(struct page_header, sequence) == ENERGY_PAGE_SEQUENCE_OFFSET,
	       "the inlined reader's offset of the sequence word");
_Static_assert(PAGE_HEADER_BYTES == ENERGY_PAGE_ENTRIES_OFFSET,
	       "the inlined reader's offset of the entries");
_Static_assert(sizeof(struct energy_page_entry) == PAGE_ENTRY_BYTES,
	       "entry layout is part of the ABI");

static struct page_header *header_of(void *mapping)
{
	return mapping;
}

/* Since version 3: the brackets of each entry's last two updates, in a second array after the
 * entries (entry i's at PAGE_HEADER_BYTES + entry_count * PAGE_ENTRY_BYTES + i *
 * PAGE_EDGES_BYTES), written in the same write sections; the fast path's entry stays one line.
 * Version 4 adds where in them the updates lay (two lines per record). */
struct page_edges {
	_Atomic uint64_t update_lo_ns;
	_Atomic uint64_t update_lo_tsc;
	_Atomic uint64_t previous_total;
	_Atomic uint64_t previous_update_ns;
	_Atomic uint64_t previous_update_tsc;
	_Atomic uint64_t previous_update_lo_ns;
	_Atomic uint64_t previous_update_lo_tsc;
	uint64_t reserved;
	_Atomic uint64_t update_placed_lo_ns;
	_Atomic uint64_t update_placed_hi_ns;
	_Atomic uint64_t previous_placed_lo_ns;
	_Atomic uint64_t previous_placed_hi_ns;
	_Atomic uint64_t measurement_cpu_ns;
	_Atomic uint64_t measurement_nj;
	uint64_t reserved_placed[2];
};

_Static_assert(sizeof(struct page_edges) == PAGE_EDGES_BYTES, "edges layout is part of the ABI");

static struct page_edges *edges_of(void *mapping, uint32_t entry_count)
{
	return (struct page_edges *)((uint8_t *)mapping + PAGE_HEADER_BYTES +
				     (size_t)entry_count * PAGE_ENTRY_BYTES);
}

static struct energy_page_entry *entries_of(void *mapping)
{
	return (struct energy_page_entry *)((uint8_t *)mapping + PAGE_HEADER_BYTES);
}

int energy_page_bytes_for(uint32_t entry_count, size_t *bytes)
{
	size_t needed;

	if (bytes == NULL || entry_count == 0 || entry_count > ENERGY_PAGE_MAX_ENTRIES)
		return -EINVAL;
	needed = PAGE_HEADER_BYTES + (size_t)entry_count * (PAGE_ENTRY_BYTES + PAGE_EDGES_BYTES);
	*bytes = (needed + PAGE_ROUND - 1) / PAGE_ROUND * PAGE_ROUND;
	return 0;
}

static void format(void *mapping, size_t bytes, const struct energy_page_params *params,
		   const struct energy_page_slot *slots)
{
	struct page_header *header = header_of(mapping);
	struct energy_page_entry *entries = entries_of(mapping);

	memset(mapping, 0, bytes);
	header->identity = (struct page_identity){
		.layout_version = ENERGY_PAGE_LAYOUT_VERSION,
		.page_bytes = (uint32_t)bytes,
		.entry_count = params->entry_count,
		.flags = params->flags,
		.address = params->address,
		.min_interval_ms = params->min_interval_ms,
		.resolution_uj = params->resolution_uj,
		.tsc_hz = params->tsc_hz,
		.producer_pid = params->producer_pid ? params->producer_pid : (int32_t)getpid(),
	};
	for (uint32_t i = 0; i < params->entry_count; i++) {
		entries[i].cpu = slots[i].cpu;
		entries[i].package = slots[i].package;
		entries[i].domain = slots[i].domain;
		entries[i].exponent = slots[i].exponent;
		entries[i].per_cpu = slots[i].per_cpu ? 1 : 0;
	}
	atomic_store_explicit(&header->sequence, (uint64_t)ENERGY_PAGE_LIVE
							 << ENERGY_PAGE_SEQUENCE_STATE_SHIFT,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	header->identity.magic = ENERGY_PAGE_MAGIC;
}

int energy_page_create(const struct energy_page_params *params,
		       const struct energy_page_slot *slots, struct energy_page_writer *writer,
		       int *fd_out)
{
	void *mapping = MAP_FAILED;
	size_t bytes;
	int fd = -1;
	int status;

	if (params == NULL || slots == NULL || writer == NULL || fd_out == NULL)
		return -EINVAL;
	status = energy_page_bytes_for(params->entry_count, &bytes);
	if (status < 0)
		return status;
	status = shm_memfd_map("haecer-energy-page", bytes, &fd, &mapping);
	if (status < 0)
		return status;
	format(mapping, bytes, params, slots);
	/* msrd's mapping is the only writable one there will ever be: F_SEAL_FUTURE_WRITE
	 * refuses every later write(2) and writable mapping, whoever holds the descriptor. A
	 * memfd inode is mode 0777: 0444 keeps /proc/self/fd reopenings read-only too. */
	status = shm_memfd_seal(fd, PAGE_MEMFD_MODE, PAGE_READER_SEALS | F_SEAL_SEAL);
	if (status < 0)
		goto out;
	*writer = (struct energy_page_writer){ .mapping = mapping, .bytes = bytes,
					       .entry_count = params->entry_count };
	*fd_out = fd;
	return 0;
out:
	if (mapping != MAP_FAILED)
		munmap(mapping, bytes);
	close(fd);
	return status;
}

void energy_page_begin(struct energy_page_writer *writer)
{
	struct page_header *header = header_of(writer->mapping);
	uint64_t sequence = atomic_load_explicit(&header->sequence, memory_order_relaxed);

	atomic_store_explicit(&header->sequence, sequence | ENERGY_PAGE_SEQUENCE_WRITING,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

void energy_page_put(struct energy_page_writer *writer, uint32_t index,
		     const struct energy_page_reading *reading)
{
	struct energy_page_entry *entry;
	struct page_edges *edges;

	if (index >= writer->entry_count)
		return;
	entry = &entries_of(writer->mapping)[index];
	atomic_store_explicit(&entry->total, reading->total, memory_order_relaxed);
	atomic_store_explicit(&entry->raw, reading->raw, memory_order_relaxed);
	atomic_store_explicit(&entry->sample_ns, reading->sample_ns, memory_order_relaxed);
	atomic_store_explicit(&entry->sample_tsc, reading->sample_tsc, memory_order_relaxed);
	atomic_store_explicit(&entry->update_ns, reading->update_ns, memory_order_relaxed);
	atomic_store_explicit(&entry->update_tsc, reading->update_tsc, memory_order_relaxed);
	edges = &edges_of(writer->mapping, writer->entry_count)[index];
	atomic_store_explicit(&edges->update_lo_ns, reading->update_lo_ns, memory_order_relaxed);
	atomic_store_explicit(&edges->update_lo_tsc, reading->update_lo_tsc, memory_order_relaxed);
	atomic_store_explicit(&edges->previous_total, reading->previous_total,
			      memory_order_relaxed);
	atomic_store_explicit(&edges->previous_update_ns, reading->previous_update_ns,
			      memory_order_relaxed);
	atomic_store_explicit(&edges->previous_update_tsc, reading->previous_update_tsc,
			      memory_order_relaxed);
	atomic_store_explicit(&edges->previous_update_lo_ns, reading->previous_update_lo_ns,
			      memory_order_relaxed);
	atomic_store_explicit(&edges->previous_update_lo_tsc, reading->previous_update_lo_tsc,
			      memory_order_relaxed);
	atomic_store_explicit(&edges->update_placed_lo_ns, reading->update_placed_lo_ns,
			      memory_order_relaxed);
	atomic_store_explicit(&edges->update_placed_hi_ns, reading->update_placed_hi_ns,
			      memory_order_relaxed);
	atomic_store_explicit(&edges->previous_placed_lo_ns, reading->previous_placed_lo_ns,
			      memory_order_relaxed);
	atomic_store_explicit(&edges->previous_placed_hi_ns, reading->previous_placed_hi_ns,
			      memory_order_relaxed);
	atomic_store_explicit(&edges->measurement_cpu_ns, reading->measurement_cpu_ns,
			      memory_order_relaxed);
	atomic_store_explicit(&edges->measurement_nj, reading->measurement_nj,
			      memory_order_relaxed);
}

void energy_page_end(struct energy_page_writer *writer)
{
	struct page_header *header = header_of(writer->mapping);
	uint64_t sequence = atomic_load_explicit(&header->sequence, memory_order_relaxed);

	atomic_store_explicit(&header->sequence,
			      (sequence & ~ENERGY_PAGE_SEQUENCE_WRITING) + ENERGY_PAGE_SEQUENCE_STEP,
			      memory_order_release);
}

static uint32_t state_of(uint64_t sequence)
{
	return (uint32_t)((sequence & ENERGY_PAGE_SEQUENCE_STATE_MASK) >>
			  ENERGY_PAGE_SEQUENCE_STATE_SHIFT);
}

void energy_page_set_state(struct energy_page_writer *writer, enum energy_page_state state)
{
	struct page_header *header;
	uint64_t sequence;

	if (writer->mapping == NULL)
		return;
	header = header_of(writer->mapping);
	sequence = atomic_load_explicit(&header->sequence, memory_order_relaxed);
	if (state_of(sequence) < (uint32_t)state)
		atomic_store_explicit(&header->sequence,
				      (sequence & ~ENERGY_PAGE_SEQUENCE_STATE_MASK) |
					      ((uint64_t)state << ENERGY_PAGE_SEQUENCE_STATE_SHIFT),
				      memory_order_release);
}

void energy_page_writer_close(struct energy_page_writer *writer)
{
	if (writer->mapping != NULL)
		munmap(writer->mapping, writer->bytes);
	*writer = (struct energy_page_writer){ 0 };
}

int energy_page_reopen_readonly(int fd)
{
	return shm_reopen_readonly(fd);
}

/* Judge a copy of the identity against the size of the memory it came with. */
static int identity_check(const struct page_identity *identity, size_t bytes)
{
	size_t expected;

	if (identity->magic != ENERGY_PAGE_MAGIC)
		return -EBADMSG;
	if (identity->layout_version != ENERGY_PAGE_LAYOUT_VERSION)
		return -EPROTO;
	if (energy_page_bytes_for(identity->entry_count, &expected) < 0)
		return -EBADMSG;
	if (identity->page_bytes != expected || bytes != expected)
		return -EMSGSIZE;
	return 0;
}

static void info_of(const struct page_identity *identity, size_t bytes,
		    struct energy_page_info *info)
{
	*info = (struct energy_page_info){
		.address = identity->address,
		.flags = identity->flags,
		.min_interval_ms = identity->min_interval_ms,
		.resolution_uj = identity->resolution_uj,
		.tsc_hz = identity->tsc_hz,
		.producer_pid = identity->producer_pid,
		.entry_count = identity->entry_count,
		.bytes = bytes,
	};
}

int energy_page_use(struct energy_page_reader *reader, const void *memory, size_t bytes)
{
	struct page_identity identity;
	int status;

	if (reader == NULL || memory == NULL || bytes < PAGE_HEADER_BYTES)
		return -EINVAL;
	memcpy(&identity, memory, sizeof(identity));
	atomic_thread_fence(memory_order_acquire);
	status = identity_check(&identity, bytes);
	if (status < 0)
		return status;
	*reader = (struct energy_page_reader){ .mapping = memory, .bytes = bytes };
	info_of(&identity, bytes, &reader->info);
	return 0;
}

int energy_page_attach(struct energy_page_reader *reader, int fd)
{
	struct page_identity identity;
	struct stat stat_buffer;
	size_t bytes;
	void *mapping;
	int status;

	if (reader == NULL || fd < 0)
		return -EINVAL;
	status = shm_fd_regular(fd, &stat_buffer);
	if (status < 0)
		return status;
	/* Seals before the size (shm/ring.c's order): a page whose creator could still shrink it
	 * between our size check and the mapping would kill us with SIGBUS, one it could grow
	 * would make the size check meaningless, and one it could map writable again could be
	 * written by someone other than msrd. */
	status = shm_fd_sealed(fd, PAGE_READER_SEALS);
	if (status < 0)
		return status;
	/* Sealed: the size read now is the size for good. */
	status = shm_fd_regular(fd, &stat_buffer);
	if (status < 0)
		return status;
	bytes = (size_t)stat_buffer.st_size;
	if (pread(fd, &identity, sizeof(identity), 0) != (ssize_t)sizeof(identity))
		return -EBADMSG;
	status = identity_check(&identity, bytes);
	if (status < 0)
		return status;
	mapping = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
	if (mapping == MAP_FAILED)
		return -errno;
	status = energy_page_use(reader, mapping, bytes);
	if (status < 0)
		munmap(mapping, bytes);
	return status;
}

void energy_page_detach(struct energy_page_reader *reader)
{
	if (reader->mapping != NULL)
		munmap((void *)reader->mapping, reader->bytes);
	*reader = (struct energy_page_reader){ 0 };
}

static const struct energy_page_entry *reader_entries(const struct energy_page_reader *reader)
{
	return (const struct energy_page_entry *)((const uint8_t *)reader->mapping + PAGE_HEADER_BYTES);
}

int energy_page_slot(const struct energy_page_reader *reader, uint32_t index,
		     struct energy_page_slot *slot)
{
	const struct energy_page_entry *entry;

	if (reader->mapping == NULL || index >= reader->info.entry_count)
		return -ERANGE;
	entry = &reader_entries(reader)[index];
	*slot = (struct energy_page_slot){ .cpu = entry->cpu, .package = entry->package,
					   .domain = entry->domain, .exponent = entry->exponent,
					   .per_cpu = entry->per_cpu };
	return 0;
}

int energy_page_find(const struct energy_page_reader *reader, uint32_t cpu, uint32_t package)
{
	for (uint32_t i = 0; i < reader->info.entry_count; i++) {
		const struct energy_page_entry *entry = &reader_entries(reader)[i];
		if (entry->per_cpu ? entry->cpu == cpu : entry->package == package)
			return (int)i;
	}
	return -ENOENT;
}

uint32_t energy_page_state(const struct energy_page_reader *reader)
{
	const struct page_header *header = reader->mapping;

	return state_of(atomic_load_explicit(&header->sequence, memory_order_acquire));
}

int energy_page_read(const struct energy_page_reader *reader, uint32_t index,
		     struct energy_page_reading *reading)
{
	const struct page_header *header;
	const struct energy_page_entry *entry;
	const struct page_edges *edges;

	if (reader == NULL || reader->mapping == NULL || reading == NULL ||
	    index >= reader->info.entry_count)
		return -ERANGE;
	header = reader->mapping;
	entry = &reader_entries(reader)[index];
	edges = &edges_of((void *)reader->mapping, reader->info.entry_count)[index];
	for (unsigned attempt = 0; attempt < ENERGY_PAGE_READ_ATTEMPTS; attempt++) {
		uint64_t before = atomic_load_explicit(&header->sequence, memory_order_acquire);
		if (before & ENERGY_PAGE_SEQUENCE_WRITING)
			continue;
		reading->total = atomic_load_explicit(&entry->total, memory_order_relaxed);
		reading->raw = atomic_load_explicit(&entry->raw, memory_order_relaxed);
		reading->sample_ns = atomic_load_explicit(&entry->sample_ns, memory_order_relaxed);
		reading->sample_tsc = atomic_load_explicit(&entry->sample_tsc, memory_order_relaxed);
		reading->update_ns = atomic_load_explicit(&entry->update_ns, memory_order_relaxed);
		reading->update_tsc = atomic_load_explicit(&entry->update_tsc, memory_order_relaxed);
		reading->update_lo_ns = atomic_load_explicit(&edges->update_lo_ns,
							     memory_order_relaxed);
		reading->update_lo_tsc = atomic_load_explicit(&edges->update_lo_tsc,
							      memory_order_relaxed);
		reading->previous_total = atomic_load_explicit(&edges->previous_total,
							       memory_order_relaxed);
		reading->previous_update_ns = atomic_load_explicit(&edges->previous_update_ns,
								   memory_order_relaxed);
		reading->previous_update_tsc = atomic_load_explicit(&edges->previous_update_tsc,
								    memory_order_relaxed);
		reading->previous_update_lo_ns =
			atomic_load_explicit(&edges->previous_update_lo_ns, memory_order_relaxed);
		reading->previous_update_lo_tsc =
			atomic_load_explicit(&edges->previous_update_lo_tsc, memory_order_relaxed);
		reading->update_placed_lo_ns =
			atomic_load_explicit(&edges->update_placed_lo_ns, memory_order_relaxed);
		reading->update_placed_hi_ns =
			atomic_load_explicit(&edges->update_placed_hi_ns, memory_order_relaxed);
		reading->previous_placed_lo_ns =
			atomic_load_explicit(&edges->previous_placed_lo_ns, memory_order_relaxed);
		reading->previous_placed_hi_ns =
			atomic_load_explicit(&edges->previous_placed_hi_ns, memory_order_relaxed);
		reading->measurement_cpu_ns =
			atomic_load_explicit(&edges->measurement_cpu_ns, memory_order_relaxed);
		reading->measurement_nj =
			atomic_load_explicit(&edges->measurement_nj, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&header->sequence, memory_order_relaxed) != before)
			continue;
		reading->sequence = before;
		reading->exponent = entry->exponent;
		reading->state = state_of(before);
		return 0;
	}
	return -EAGAIN;
}
