/*
 * bench/lib/bench_stats.h — what the benchmarks under bench/ share: msrd started with the shipped
 * policy, a nanosecond clock, CPU pinning, and order statistics of timed samples. Nothing
 * here judges a figure, it only computes it.
 */
#ifndef HAECER_BENCH_LIB_BENCH_STATS_H
#define HAECER_BENCH_LIB_BENCH_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct msrd_server;

/* msrd_start with the shipped configs/policies/default.yaml and `arguments`, never under valgrind
 * (HAECER_VALGRIND is unset: a benchmark measures msrd itself), and HAECER_SOCKET pointed at it so
 * the library's default context finds it. 0, or -1 when the policy is unreadable or msrd did not
 * start. */
int bench_start_msrd(struct msrd_server *server, const char *const *arguments);

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* Pin process (0: this one) to one CPU, or to every CPU when cpu < 0 (undoing a pin). Failure
 * is ignored: an unpinned run still measures, only less steadily. */
void bench_pin(pid_t pid, int cpu);

/* Sort values ascending in place. */
void bench_sort_u64(uint64_t *values, size_t count);

/* The median of count > 0 values (the upper one of an even count); sorts them in place. */
uint64_t bench_median_u64(uint64_t *values, size_t count);

/* The value below which `percent` percent of count > 0 sorted values lie: sorted[count *
 * percent / 100] (percent < 100). */
uint64_t bench_percentile_u64(const uint64_t *sorted, size_t count, unsigned percent);

#endif
