/*
 * prof/sample_event.h — the perf event haecer-prof record samples with: the task clock at a
 * rate, the fields each sample carries (instruction pointer, thread, time, CPU, period and the
 * user call chain), never the hypervisor. record adds what a profile needs around it
 * (inheritance, enable on exec, kernel time where allowed, DWARF stacks, mmap and comm
 * records); bench/prof uses it bare, as the floor under any perf-based profiler.
 */
#ifndef HAECER_PROF_SAMPLE_EVENT_H
#define HAECER_PROF_SAMPLE_EVENT_H

#include <linux/perf_event.h>
#include <stdint.h>
#include <string.h>

static inline void prof_sample_event(struct perf_event_attr *attr, uint64_t hz)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->type = PERF_TYPE_SOFTWARE;
	attr->config = PERF_COUNT_SW_TASK_CLOCK;
	attr->sample_period = 1000000000ull / hz;
	attr->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
			    PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;
	attr->disabled = 1;
	attr->exclude_hv = 1;
	attr->exclude_callchain_kernel = 1;
}

#endif
