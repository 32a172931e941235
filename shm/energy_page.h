/*
 * shm/energy_page.h — msrd's energy page: 64-bit energy totals published in shared memory.
 *
 * msrd keeps exact 64-bit totals of every energy-status register (server/energy.c). While a
 * client holds a page, msrd samples the registers at a rate the policy bounds and writes, per
 * register (one entry per package, or per core for AMD's core energy): the 64-bit total, the
 * raw 32-bit register, its unit exponent, and the CLOCK_MONOTONIC_RAW and TSC times of the last
 * sample and of the last sample that saw the register change, with the bracket of that change
 * (the last sample before it that did not see it: the register changed between the two) and the
 * same of the change before it (its total and bracket: the power of the last update interval).
 * Clients map the page read-only and read it without a round trip.
 *
 * Guarantees:
 *  - A reader never returns a torn snapshot: the writer (one, msrd) marks a sequence word as
 *    writing (odd), writes, and moves it to its next even value; a reader copies between two
 *    loads of the word and keeps the copy only when both are the same even value (the rings'
 *    seqlock discipline, shm/ring.c). The page's state lives in the same word. A reader never waits forever: after a bounded number of
 *    attempts (a writer stopped mid-write) it returns -EAGAIN.
 *  - The page is a sealed memfd (size sealed, F_SEAL_FUTURE_WRITE: no writable mapping or
 *    write can be made after msrd's own, inode mode 0444); clients get a read-only descriptor.
 *  - energy_page_attach maps only a page sealed so (F_SEAL_SHRINK, F_SEAL_GROW and
 *    F_SEAL_FUTURE_WRITE, else -EPERM), and checks the seals before it reads the size: the size
 *    it validates and maps can no longer change, so whoever handed the descriptor over cannot
 *    shrink the file under the reader's mapping (SIGBUS) nor write it through another mapping.
 *  - Attaching to memory that is not a valid page fails with an error, never a crash.
 *  - A page tells its reader when to stop trusting it: its state says STALE (the policy
 *    was reloaded: ask msrd for a page again) or DEAD (msrd stopped); neither is ever undone.
 *  - A coarse page (a coarse energy grant) carries only values msrd already quantised to the
 *    grant's resolution and published at most once per its interval, with the times of those
 *    publications: nothing finer is ever written to it.
 *
 * All functions return 0 (or a count) on success and -errno on failure; none sets errno.
 */
#ifndef HAECER_SHM_ENERGY_PAGE_H
#define HAECER_SHM_ENERGY_PAGE_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ENERGY_PAGE_MAGIC UINT64_C(0x3147504543454148) /* "HAECEPG1" little-endian */
#define ENERGY_PAGE_LAYOUT_VERSION 4u
#define ENERGY_PAGE_MAX_ENTRIES 4096u

/* Page states (the state word). */
enum energy_page_state {
	ENERGY_PAGE_LIVE = 0,
	ENERGY_PAGE_STALE = 1, /* policy reloaded: this page is no longer written; ask again */
	ENERGY_PAGE_DEAD = 2,  /* msrd stopped */
};

/* Identity flags. */
#define ENERGY_PAGE_COARSE 0x1u    /* values quantised to a coarse grant */
#define ENERGY_PAGE_SIMULATED 0x2u /* the registers are the simulated CPU's; TSC is simulated */

/* What a page is, written once when it is made. */
struct energy_page_params {
	uint32_t address;          /* the energy-status register of every entry */
	uint32_t flags;            /* ENERGY_PAGE_* */
	uint32_t min_interval_ms;  /* coarse: values change at most once per this */
	uint64_t resolution_uj;    /* coarse: the grant's resolution */
	uint64_t tsc_hz;
	int32_t producer_pid;      /* 0 = the creating process */
	uint32_t entry_count;      /* 1..ENERGY_PAGE_MAX_ENTRIES */
};

/* One register's identity on the page. */
struct energy_page_slot {
	uint32_t cpu;              /* the CPU msrd reads it through */
	uint32_t package;          /* its package */
	uint8_t domain;            /* enum rapl_domain */
	uint8_t exponent;          /* J = units * 2^-exponent */
	uint8_t per_cpu;           /* one register per CPU (AMD core energy), else per package */
};

/* A consistent reading of one entry. */
struct energy_page_reading {
	uint64_t total;            /* 64-bit total in register units (coarse: quantised) */
	uint64_t raw;              /* the 32-bit register (coarse: total mod 2^32) */
	uint64_t sample_ns;        /* CLOCK_MONOTONIC_RAW of msrd's last sample (publication) */
	uint64_t sample_tsc;       /* TSC of the same */
	uint64_t update_ns;        /* CLOCK_MONOTONIC_RAW of the last sample that saw a change */
	uint64_t update_tsc;
	/* The bracket of the last change: the last sample before update_ns that did not see it
	 * (taken before that sample's read; update_ns is taken after the read that saw it).
	 * 0 when unknown (the first sample, and always on a coarse page). */
	uint64_t update_lo_ns;
	uint64_t update_lo_tsc;
	/* The change before it: the total it showed and its bracket (0 when unknown, always on a
	 * coarse page). */
	uint64_t previous_total;
	uint64_t previous_update_ns;
	uint64_t previous_update_tsc;
	uint64_t previous_update_lo_ns;
	uint64_t previous_update_lo_tsc;
	/* Where inside each bracket the change lay, as msrd knows it (layout version 4): the
	 * bracket itself, or the part of it around the register's learnt update grid point when
	 * msrd learns that grid (precise edges) and the bracket is wider than the grid's spread
	 * (server/energy_edges.c); always inside the bracket, 0 when unknown. */
	uint64_t update_placed_lo_ns;
	uint64_t update_placed_hi_ns;
	uint64_t previous_placed_lo_ns;
	uint64_t previous_placed_hi_ns;
	/* What measuring has cost msrd for this entry's register since it started (fine pages
	 * only, 0 on a coarse page and from an msrd that does not count it): the CPU time of its
	 * precise-edge windows and of the page sampler's reads, and the energy the simulated CPU's
	 * power model says that CPU time drew (0 on real hardware, where the reader estimates it;
	 * server/energy_cost.c). Shared by every holder of the register's page: a reader's share
	 * is at most the difference over its own span. */
	uint64_t measurement_cpu_ns;
	uint64_t measurement_nj;
	uint64_t sequence;         /* the page's sequence word the reading was taken under */
	uint8_t exponent;
	uint32_t state;            /* enum energy_page_state at the time of the reading */
};

/* What a reader knows of a page's identity (copied, validated, at attach time). */
struct energy_page_info {
	uint32_t address;
	uint32_t flags;
	uint32_t min_interval_ms;
	uint64_t resolution_uj;
	uint64_t tsc_hz;
	int32_t producer_pid;
	uint32_t entry_count;
	size_t bytes;
};

/* Bytes a page of `entry_count` entries occupies (a multiple of 4 KiB); -EINVAL out of range. */
int energy_page_bytes_for(uint32_t entry_count, size_t *bytes);

/* ---- the writer (msrd) ---- */

struct energy_page_writer {
	void *mapping;
	size_t bytes;
	uint32_t entry_count;
};

/* Create a page: a memfd of the right size, formatted with `slots`, mapped read-write into
 * `writer`, then sealed (shrink, grow, future writes, seals) and made mode 0444. *fd_out is the
 * read-write descriptor, close-on-exec (hand out ring_reopen_readonly-style reopenings: see
 * energy_page_reopen_readonly). Nothing is left behind on failure. */
int energy_page_create(const struct energy_page_params *params,
		       const struct energy_page_slot *slots, struct energy_page_writer *writer,
		       int *fd_out);
/* Open a write section (the sequence word goes odd). */
void energy_page_begin(struct energy_page_writer *writer);
/* Write entry `index` (inside a write section). */
void energy_page_put(struct energy_page_writer *writer, uint32_t index,
		     const struct energy_page_reading *reading);
/* Close the write section (the sequence word goes even again). */
void energy_page_end(struct energy_page_writer *writer);
/* Mark the page STALE or DEAD (a state never goes back to LIVE). */
void energy_page_set_state(struct energy_page_writer *writer, enum energy_page_state state);
void energy_page_writer_close(struct energy_page_writer *writer);

/* A new read-only, close-on-exec descriptor for the page behind fd; the fd or -errno. */
int energy_page_reopen_readonly(int fd);

/* ---- readers ---- */

/* The layout an inlined reader needs (layout version 2); everything else goes through the
 * functions. The sequence word: bit 0 set while a write is under way, bits 1-2 the page's state
 * (enum energy_page_state), the rest counts writes (each adds ENERGY_PAGE_SEQUENCE_STEP). */
#define ENERGY_PAGE_SEQUENCE_OFFSET 128u
#define ENERGY_PAGE_ENTRIES_OFFSET 256u
#define ENERGY_PAGE_SEQUENCE_WRITING UINT64_C(0x1)
#define ENERGY_PAGE_SEQUENCE_STATE_SHIFT 1u
#define ENERGY_PAGE_SEQUENCE_STATE_MASK UINT64_C(0x6)
#define ENERGY_PAGE_SEQUENCE_STEP UINT64_C(0x8)
#define ENERGY_PAGE_READ_ATTEMPTS 10000u

/* An entry as it lies on the page: 64 bytes, one cache line. */
struct energy_page_entry {
	uint32_t cpu;
	uint32_t package;
	uint8_t domain;
	uint8_t exponent;
	uint8_t per_cpu;
	uint8_t reserved[5];
	_Atomic uint64_t total;
	_Atomic uint64_t sample_ns;
	_Atomic uint64_t raw;
	_Atomic uint64_t sample_tsc;
	_Atomic uint64_t update_ns;
	_Atomic uint64_t update_tsc;
};

struct energy_page_reader {
	const void *mapping;
	size_t bytes;
	struct energy_page_info info;
};

/* What a reader's hot path needs of an entry: a consistent (total, sample time, state). */
struct energy_page_total {
	uint64_t total;            /* 64-bit total in register units (coarse: quantised); the
				    * register itself is total mod 2^32 (msrd folds it so) */
	uint64_t sample_ns;        /* CLOCK_MONOTONIC_RAW of msrd's sample (coarse: publication) */
	uint32_t state;            /* enum energy_page_state at the time of the reading */
};

/* Map the page behind fd read-only and validate everything a reader relies on before touching
 * it: -EBADMSG for a foreign or corrupt header, -EPROTO for another layout version, -EMSGSIZE
 * for a file whose size does not match its entry count, -EPERM when it is not sealed against
 * shrinking, growing and further writes (checked before the size is read), -EINVAL for a
 * non-regular file. The fd may be closed afterwards. */
int energy_page_attach(struct energy_page_reader *reader, int fd);
/* Use memory already mapped (tests, benchmarks); validated the same way, not unmapped. */
int energy_page_use(struct energy_page_reader *reader, const void *memory, size_t bytes);
void energy_page_detach(struct energy_page_reader *reader);

/* Entry `index`'s identity (as written at creation); -ERANGE out of range. */
int energy_page_slot(const struct energy_page_reader *reader, uint32_t index,
		     struct energy_page_slot *slot);
/* The index of the entry read through `cpu`'s package (or `cpu` itself for per-core domains);
 * -ENOENT when the page has none. */
int energy_page_find(const struct energy_page_reader *reader, uint32_t cpu, uint32_t package);
/* A consistent reading of entry `index`: 0, -EAGAIN when no consistent copy could be taken in a
 * bounded number of attempts (the writer stopped mid-write), -ERANGE out of range. The state is
 * returned in the reading; the caller decides what STALE and DEAD mean to it. */
int energy_page_read(const struct energy_page_reader *reader, uint32_t index,
		     struct energy_page_reading *reading);
/* The same discipline as energy_page_read for the total, its sample time and the page's state
 * only (the reading clients make): two loads of the sequence word (which holds the state) around
 * two loads from the entry's cache line, no copy of the rest, inlined. The same returns. */
static inline int energy_page_read_total(const struct energy_page_reader *reader, uint32_t index,
					 struct energy_page_total *reading)
{
	const uint8_t *base = reader->mapping;
	const _Atomic uint64_t *sequence;
	const struct energy_page_entry *entry;

	if (index >= reader->info.entry_count)
		return -ERANGE;
	sequence = (const _Atomic uint64_t *)(const void *)(base + ENERGY_PAGE_SEQUENCE_OFFSET);
	entry = (const struct energy_page_entry *)(const void *)(base +
								 ENERGY_PAGE_ENTRIES_OFFSET) +
		index;
	for (unsigned attempt = 0; attempt < ENERGY_PAGE_READ_ATTEMPTS; attempt++) {
		/* Acquire: the entry's loads cannot move before it. */
		uint64_t before = atomic_load_explicit(sequence, memory_order_acquire);
		uint64_t total = atomic_load_explicit(&entry->total, memory_order_relaxed);
		uint64_t sample_ns = atomic_load_explicit(&entry->sample_ns, memory_order_relaxed);

		/* Nor after the second load of the word (on x86 a compiler barrier only: loads
		 * are not reordered with loads). */
		atomic_thread_fence(memory_order_acquire);
		if ((before & ENERGY_PAGE_SEQUENCE_WRITING) != 0 ||
		    atomic_load_explicit(sequence, memory_order_relaxed) != before)
			continue;
		*reading = (struct energy_page_total){
			.total = total,
			.sample_ns = sample_ns,
			.state = (uint32_t)((before & ENERGY_PAGE_SEQUENCE_STATE_MASK) >>
					    ENERGY_PAGE_SEQUENCE_STATE_SHIFT),
		};
		return 0;
	}
	return -EAGAIN;
}

/* The page's state alone. */
uint32_t energy_page_state(const struct energy_page_reader *reader);

#endif
