/*
 * libclient/haecer_perf_map.c — a brokered perf event read from its mmap page: the kernel's
 * self-monitoring recipe (perf_event_open(2), "MMAP layout"; the seqlock `lock`, `index`,
 * `offset`, `cap_user_rdpmc`, `cap_user_time`) with RDPMC from haecer_rdpmc.c, and read() of
 * the descriptor whenever the page does not allow it. RDPMC is only right on the thread the
 * event counts, while it runs there (the index is of this CPU's counter), so a map knows its
 * thread and reads by RDPMC only from it.
 *
 * NOT RUN with RDPMC: the machines this was written on have no hardware PMU (software and msr
 * PMU events have index 0), so only the read() path and the page's seqlock ran for real.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct haecer_perf_map {
	int fd;
	int tid;                              /* the thread it counts; -1 CPU-wide */
	volatile struct perf_event_mmap_page *page;
	size_t bytes;
};

/* One consistent look at the page (its seqlock), with RDPMC inside the loop as the kernel's
 * recipe has it: a count read between two updates of the page would pair a new counter value
 * with an old offset. */
struct page_look {
	uint64_t enabled, running, count;
	uint32_t index;
	bool rdpmc, counted;
};

/* ns since the page's last update, from the TSC (cap_user_time). */
static uint64_t time_since_update(volatile struct perf_event_mmap_page *page)
{
	uint64_t cycles = __builtin_ia32_rdtsc();
	uint16_t shift = page->time_shift;
	uint64_t quotient = cycles >> shift, remainder = cycles & ((1ull << shift) - 1);

	return page->time_offset + quotient * page->time_mult +
	       ((remainder * page->time_mult) >> shift);
}

static void look(const struct haecer_perf_map *map, bool may_rdpmc, struct page_look *out)
{
	volatile struct perf_event_mmap_page *page = map->page;
	uint32_t sequence;

	do {
		sequence = page->lock;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		*out = (struct page_look){ .enabled = page->time_enabled,
					   .running = page->time_running,
					   .count = (uint64_t)page->offset, .index = page->index,
					   .rdpmc = page->cap_user_rdpmc };
		if (out->index != 0 && page->cap_user_time) {
			uint64_t delta = time_since_update(page);
			out->enabled += delta;
			out->running += delta;
		}
		if (may_rdpmc && out->rdpmc && out->index != 0) {
			unsigned width = page->pmc_width;
			int64_t counter = (int64_t)haecer__rdpmc_counter(out->index - 1);
			/* The counter is pmc_width bits wide; the offset pairs with its sign. */
			if (width > 0 && width < 64)
				counter = (int64_t)((uint64_t)counter << (64 - width)) >> (64 - width);
			out->count += (uint64_t)counter;
			out->counted = true;
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while (page->lock != sequence);
}

int haecer_perf_map(int fd, int tid, struct haecer_perf_map **out)
{
	long page_size = sysconf(_SC_PAGESIZE);
	struct haecer_perf_map *map;
	void *page;

	if (fd < 0 || tid < -1 || out == NULL)
		return -EINVAL;
	*out = NULL;
	page = mmap(NULL, (size_t)page_size, PROT_READ, MAP_SHARED, fd, 0);
	if (page == MAP_FAILED)
		return -errno;
	map = calloc(1, sizeof(*map));
	if (map == NULL) {
		munmap(page, (size_t)page_size);
		return -ENOMEM;
	}
	*map = (struct haecer_perf_map){ .fd = fd, .tid = tid == 0 ? (int)getpid() : tid,
					 .page = page, .bytes = (size_t)page_size };
	*out = map;
	return 0;
}

void haecer_perf_unmap(struct haecer_perf_map *map)
{
	if (map == NULL)
		return;
	munmap((void *)map->page, map->bytes);
	free(map);
}

/* Why a reading was not RDPMC's. */
static const char *why_read(const struct haecer_perf_map *map, bool own_thread,
			    const struct page_look *page)
{
	if (map->tid < 0)
		return "read(): a CPU-wide event is not read with RDPMC";
	if (!own_thread)
		return "read(): RDPMC reads only the calling thread's own event, this one counts "
		       "another thread";
	if (!page->rdpmc)
		return "read(): the event's mmap page says no cap_user_rdpmc (no hardware "
		       "counter, or the kernel's rdpmc setting forbids it)";
	return "read(): the event's mmap page has index 0 (not on a hardware counter now)";
}

int haecer_perf_read_mapped(struct haecer_perf_map *map, struct haecer_perf_value *out,
			    unsigned *path, char *why, size_t why_size)
{
	struct page_look page;
	bool own_thread;

	if (map == NULL || out == NULL || path == NULL)
		return -EINVAL;
	own_thread = map->tid >= 0 && map->tid == (int)gettid();
	look(map, own_thread, &page);
	if (page.counted) {
		haecer__perf_value(page.count, page.enabled, page.running, out);
		*path = HAECER_PERF_PATH_RDPMC;
		if (why != NULL && why_size > 0)
			snprintf(why, why_size, "RDPMC of counter %u from the event's mmap page",
				 page.index - 1);
		return 0;
	}
	*path = HAECER_PERF_PATH_READ;
	if (why != NULL && why_size > 0)
		snprintf(why, why_size, "%s", why_read(map, own_thread, &page));
	return haecer_perf_read(map->fd, out);
}

int haecer_perf_map_times(const struct haecer_perf_map *map, uint64_t *time_enabled,
			  uint64_t *time_running)
{
	struct page_look page;

	if (map == NULL || time_enabled == NULL || time_running == NULL)
		return -EINVAL;
	look(map, false, &page);
	*time_enabled = page.enabled;
	*time_running = page.running;
	return 0;
}
