/*
 * hw/counter_wrap.h — when a performance counter that reads lower than before can have wrapped,
 * shared by msrd (server/slots.c) and libhaecer (libclient/haecer_read.c). Header only.
 *
 * A counter read lower than at the previous read has either wrapped (moved by 2^width minus
 * the difference) or been written behind the reader's back: since Linux 5.13 the kernel writes
 * 0 to every counter a perf event used when an RDPMC-allowed task is scheduled in
 * (perf_clear_dirty_counters, arch/x86/events/core.c), and libhaecer's own client becomes such
 * a task by mapping a perf event for RDPMC. A wrap is plausible only when the counter can have
 * moved that far in the time: no event counts faster than COUNTER_MAX_EVENTS_PER_NS (16 events a
 * cycle, beyond any x86 core's widest event, at 8 GHz), so a 48-bit counter needs at least
 * 2^48 / 128 ns = 36 minutes to wrap all the way round. Anything else is lost continuity.
 */
#ifndef HAECER_HW_COUNTER_WRAP_H
#define HAECER_HW_COUNTER_WRAP_H

#include <stdbool.h>
#include <stdint.h>

#define COUNTER_MAX_EVENTS_PER_NS 128u

/* Can a counter of `mask` (2^width - 1) have gone from `before` to `now` in `elapsed_ns`?
 * Forward movement always can (the reader cannot tell it from a zeroing followed by counting
 * past `before`); a decrease only as a wrap the maximum rate allows. */
static inline bool counter_move_plausible(uint64_t before, uint64_t now, uint64_t mask,
					  uint64_t elapsed_ns)
{
	uint64_t moved = (now - before) & mask;

	if ((now & mask) >= (before & mask))
		return true;
	if (elapsed_ns >= (mask / COUNTER_MAX_EVENTS_PER_NS))
		return true;
	return moved <= elapsed_ns * COUNTER_MAX_EVENTS_PER_NS;
}

#endif
