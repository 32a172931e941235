/* bench/lib/latency_histogram.c — log-linear buckets: exact below 32 ns, then 16 per octave. */
#include "bench/lib/latency_histogram.h"

#include <math.h>
#include <stddef.h>

#define SUB (1u << LATENCY_HISTOGRAM_SUB_BITS)

static unsigned bucket_of(uint64_t ns)
{
	unsigned msb;

	if (ns < 2 * SUB)
		return (unsigned)ns;
	msb = 63u - (unsigned)__builtin_clzll(ns);
	return ((msb - LATENCY_HISTOGRAM_SUB_BITS + 1u) << LATENCY_HISTOGRAM_SUB_BITS) |
	       (unsigned)((ns >> (msb - LATENCY_HISTOGRAM_SUB_BITS)) & (SUB - 1u));
}

/* The middle of a bucket's range of nanoseconds. */
static double bucket_middle_ns(unsigned bucket)
{
	unsigned group = bucket >> LATENCY_HISTOGRAM_SUB_BITS;
	double low, width;

	if (bucket < 2 * SUB)
		return bucket;
	low = ldexp(SUB + (bucket & (SUB - 1u)), (int)group - 1);
	width = ldexp(1.0, (int)group - 1);
	return low + width / 2;
}

void latency_histogram_add(struct latency_histogram *histogram, uint64_t ns)
{
	atomic_fetch_add_explicit(&histogram->buckets[bucket_of(ns)], 1, memory_order_relaxed);
}

uint64_t latency_histogram_take(struct latency_histogram *histogram, uint64_t *window,
				uint64_t *run)
{
	uint64_t count = 0;

	for (unsigned i = 0; i < LATENCY_HISTOGRAM_BUCKETS; i++) {
		window[i] = atomic_exchange_explicit(&histogram->buckets[i], 0, memory_order_relaxed);
		count += window[i];
		if (run != NULL)
			run[i] += window[i];
	}
	return count;
}

double latency_histogram_percentile_us(const uint64_t *counts, uint64_t total, unsigned percent)
{
	uint64_t rank = (total * percent + 99) / 100, seen = 0;

	if (total == 0)
		return 0;
	for (unsigned i = 0; i < LATENCY_HISTOGRAM_BUCKETS; i++) {
		seen += counts[i];
		if (seen >= rank && counts[i] > 0)
			return bucket_middle_ns(i) / 1000.0;
	}
	return 0;
}
