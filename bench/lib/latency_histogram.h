/*
 * bench/lib/latency_histogram.h — a lock-free histogram of nanosecond latencies: 16 buckets per
 * power of two, so a percentile read from it is off by under 6.25 %. Any number of threads add;
 * one reporter takes the counts out a window at a time.
 */
#ifndef HAECER_BENCH_LIB_LATENCY_HISTOGRAM_H
#define HAECER_BENCH_LIB_LATENCY_HISTOGRAM_H

#include <stdatomic.h>
#include <stdint.h>

#define LATENCY_HISTOGRAM_SUB_BITS 4u
#define LATENCY_HISTOGRAM_BUCKETS \
	((64u - LATENCY_HISTOGRAM_SUB_BITS + 1u) << LATENCY_HISTOGRAM_SUB_BITS)

struct latency_histogram {
	atomic_ullong buckets[LATENCY_HISTOGRAM_BUCKETS];
};

/* Count one latency of ns nanoseconds (relaxed: counts, not order, matter). */
void latency_histogram_add(struct latency_histogram *histogram, uint64_t ns);

/* Move the counts into window[LATENCY_HISTOGRAM_BUCKETS], zeroing the histogram, and add them to
 * run when it is not NULL. Returns how many latencies were taken. */
uint64_t latency_histogram_take(struct latency_histogram *histogram, uint64_t *window,
				uint64_t *run);

/* The percentile, in microseconds, of `total` latencies counted in counts[]; 0 when empty. */
double latency_histogram_percentile_us(const uint64_t *counts, uint64_t total, unsigned percent);

#endif
