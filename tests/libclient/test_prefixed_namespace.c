/*
 * A program that has its own readCounter, RAPL_PKG, PerfCounter and setupArchCounter can use
 * the haecer_* API: <haecer/haecer.h> (with <haecer/msrd.h>, <haecer/region.h> and
 * <haecer/ring.h>, which it includes) declares only prefixed names; the seed's unprefixed ones
 * come with <haecer/perfmon.h> alone. That this file compiles is most of the test; running it
 * checks the program's names are its own and the library's prefixed constants are the seed's
 * values.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The program's own names, before and after the header, as an application might have them. */
enum { RAPL_PKG = 42 };
typedef struct {
	int frames;
} PerfCounter;

#include <haecer/haecer.h>

static int readCounter(const PerfCounter *counter)
{
	return counter->frames;
}

static int setupArchCounter(void)
{
	return RAPL_PKG;
}

#define INSTRUCTIONS_RETIRED "mine"

int main(void)
{
	PerfCounter mine = { .frames = 7 };
	int failures = 0;

	if (readCounter(&mine) != 7 || setupArchCounter() != 42 ||
	    strcmp(INSTRUCTIONS_RETIRED, "mine") != 0)
		failures++;
	/* The seed's values (perfmon.h builds its enums from these). */
	if (HAECER_ENERGY_PKG != 0 || HAECER_ENERGY_DRAM != 3 ||
	    HAECER_ARCH_INSTRUCTIONS_RETIRED != 1 || HAECER_FIXED_CPU_CLK_UNHALTED_REF != 2)
		failures++;
	if (strcmp(haecer_strerror(-EPERM), "") == 0)
		failures++;
	printf("%s\n", failures == 0 ? "own names and haecer_* side by side" : "FAILED");
	return failures == 0 ? 0 : 1;
}
