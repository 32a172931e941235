/* bench/lib/random.c — splitmix64 (Steele, Lea and Flood, 2014) and what load generators draw. */
#include "bench/lib/random.h"

#include <math.h>

uint64_t random_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double random_unit(uint64_t *state)
{
	return (double)(random_next(state) >> 11) * 0x1.0p-53;
}

unsigned random_below(uint64_t *state, unsigned bound)
{
	return (unsigned)(random_next(state) % bound);
}

uint64_t random_between_ns(uint64_t *state, uint64_t low, uint64_t high)
{
	return low + (uint64_t)(random_unit(state) * (double)(high - low));
}

uint64_t random_exponential_ns(uint64_t *state, double mean_ns)
{
	return (uint64_t)(-mean_ns * log1p(-random_unit(state)));
}
