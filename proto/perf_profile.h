/*
 * proto/perf_profile.h — what PERF_OPEN's WIRE_PERF_PROFILE flag means: the sampling event of a
 * profiler that follows a program from its exec (haecer-prof record's): the sample fields (IP,
 * thread, time, CPU, period, user call chain), inheritance into the program's threads and
 * children with their counts, enable on exec, mmap and comm records for symbols, samples timed
 * on CLOCK_MONOTONIC_RAW (msrd's energy clock), and a reader woken at `wakeup_bytes` of its ring;
 * WIRE_PERF_PROFILE_STACK adds the user registers and a copy of the user stack for DWARF
 * unwinding. One definition, used by msrd's broker and by haecer-prof opening perf itself, so a
 * brokered profile and a direct one are the same event. Header only (needs linux/perf_event.h).
 */
#ifndef HAECER_PROTO_PERF_PROFILE_H
#define HAECER_PROTO_PERF_PROFILE_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* perf's x86-64 user registers AX..IP (0-8) and R8..R15 (16-23): what CFI unwinding needs. */
#define PERF_PROFILE_UNWIND_REGS 0xff01ffull
/* Bytes of user stack each DWARF sample copies. */
#define PERF_PROFILE_USER_STACK_BYTES 8192u

/* The bare sampling event: the task clock every `period_ns` of CPU time, each sample with its
 * IP, thread, time, CPU, period and user call chain, never the hypervisor (bench/prof's floor). */
static inline void perf_profile_sample_attr(struct perf_event_attr *attr, uint64_t period_ns)
{
	memset(attr, 0, sizeof(*attr));
	attr->size = sizeof(*attr);
	attr->type = PERF_TYPE_SOFTWARE;
	attr->config = PERF_COUNT_SW_TASK_CLOCK;
	attr->sample_period = period_ns;
	attr->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
			    PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;
	attr->disabled = 1;
	attr->exclude_hv = 1;
	attr->exclude_callchain_kernel = 1;
}

/* The profile's event: the bare one, plus what following a program from its exec needs. */
static inline void perf_profile_attr(struct perf_event_attr *attr, uint64_t period_ns,
				     bool exclude_kernel, bool user_stack, uint32_t wakeup_bytes)
{
	perf_profile_sample_attr(attr, period_ns);
	attr->exclude_kernel = exclude_kernel;
	attr->enable_on_exec = 1;
	attr->inherit = 1;
	attr->inherit_stat = 1;
	attr->mmap = 1;
	attr->comm = 1;
	attr->use_clockid = 1;
	attr->clockid = CLOCK_MONOTONIC_RAW;
	attr->watermark = 1;
	attr->wakeup_watermark = wakeup_bytes;
	if (user_stack) {
		attr->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		attr->sample_regs_user = PERF_PROFILE_UNWIND_REGS;
		attr->sample_stack_user = PERF_PROFILE_USER_STACK_BYTES;
	}
}

#endif
