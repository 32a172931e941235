/*
 * A program built with -finstrument-functions for test_prof_instrument: `calls` rounds of
 * work_twice (2 ms of CPU time) and work_once (1 ms), each also calling noise() (excluded by the
 * test's filter). Prints how many rounds it ran.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile uint64_t sink;

static uint64_t cpu_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static __attribute__((noinline)) void noise(void)
{
	sink = sink + 1;
}

static __attribute__((noinline)) void burn(uint64_t ns)
{
	uint64_t end = cpu_ns() + ns, x = sink;

	while (cpu_ns() < end)
		for (int i = 0; i < 2000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	sink = x;
}

__attribute__((noinline)) void work_twice(void);
__attribute__((noinline)) void work_once(void);

void work_twice(void)
{
	noise();
	burn(2000000);
}

void work_once(void)
{
	noise();
	burn(1000000);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 50;

	for (int i = 0; i < rounds; i++) {
		work_twice();
		work_once();
	}
	printf("rounds %d\n", rounds);
	return 0;
}
