/*
 * bench/lib/random.h — seeded randomness for load generators: splitmix64, one state per thread,
 * so a run can be replayed from its seed and threads never share a generator.
 */
#ifndef HAECER_BENCH_LIB_RANDOM_H
#define HAECER_BENCH_LIB_RANDOM_H

#include <stdint.h>

uint64_t random_next(uint64_t *state);

/* Uniform in [0, 1). */
double random_unit(uint64_t *state);

/* Uniform in [0, bound), bound > 0. */
unsigned random_below(uint64_t *state, unsigned bound);

/* Uniform in [low, high). */
uint64_t random_between_ns(uint64_t *state, uint64_t low, uint64_t high);

/* Exponentially distributed with the given mean: Poisson arrivals' gaps. */
uint64_t random_exponential_ns(uint64_t *state, double mean_ns);

#endif
