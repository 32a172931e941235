/*
 * prof/sample_event.h — the perf event haecer-prof record samples with: the task clock at a
 * rate, the fields each sample carries (instruction pointer, thread, time, CPU, period and the
 * user call chain), never the hypervisor. record adds what a profile needs around it
 * (inheritance, enable on exec, kernel time where allowed, DWARF stacks, mmap and comm
 * records: proto/perf_profile.h, which msrd's perf broker opens the same); bench/prof uses it
 * bare, as the floor under any perf-based profiler.
 */
#ifndef HAECER_PROF_SAMPLE_EVENT_H
#define HAECER_PROF_SAMPLE_EVENT_H

#include <stdint.h>

#include "proto/perf_profile.h"

static inline void prof_sample_event(struct perf_event_attr *attr, uint64_t hz)
{
	perf_profile_sample_attr(attr, 1000000000ull / hz);
}

#endif
