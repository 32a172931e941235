/*
 * tools/mon/energy.c — energy between readings: RAPL's 32-bit registers wrap (after minutes at
 * high power), msrd's 64-bit totals do not; both may appear in a ring.
 */
#include "tools/mon/mon.h"

#include <errno.h>
#include <math.h>

#define WRAP_32 (UINT64_C(1) << 32)

int mon_energy_delta(uint64_t previous, uint64_t value, uint64_t *delta)
{
	if (value >= previous) {
		*delta = value - previous;
		return 0;
	}
	if (previous < WRAP_32) {
		*delta = value + WRAP_32 - previous;
		return 0;
	}
	return -ERANGE;
}

double mon_joules(uint64_t units, int exponent)
{
	return ldexp((double)units, -exponent);
}
