/*
 * harness/process_figures.h — what /proc says of a process (msrd's memory and CPU time), for the
 * tests and benchmarks that watch msrd's cost.
 */
#ifndef HAECER_HARNESS_PROCESS_FIGURES_H
#define HAECER_HARNESS_PROCESS_FIGURES_H

#include <sys/types.h>

/* A "kB" field of /proc/PID/status (field with its colon, e.g. "VmRSS:"), or -1. */
long harness_process_status_kib(pid_t pid, const char *field);

/* A number field of /proc/PID/status (field with its colon, e.g. "CapEff:"; base 16 for the
 * capability sets), or ~0 when there is none. */
unsigned long long harness_process_status_number(pid_t pid, const char *field, int base);

/* A process's CPU time so far in clock ticks (utime + stime of /proc/PID/stat), or -1. */
long long harness_process_cpu_ticks(pid_t pid);

/* The CPU time of a process's main thread so far in ns (/proc/PID/schedstat, the scheduler's
 * own count), or -1. msrd's loop runs there. */
long long harness_process_cpu_ns(pid_t pid);

/* How many descriptors the process has open (entries of /proc/PID/fd), or -1 when it is gone. */
long harness_process_fd_count(pid_t pid);

#endif
