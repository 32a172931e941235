/*
 * energy_phases — an instrumented program in the HAECER style (seed 001, figure 8): it
 * alternates one second of load (looping over gettimeofday) with one second of sleep, samples
 * every energy domain the machine has ten times a second, publishes each sample into a ring
 * (setupFerretMonitor) that `haecer-mon follow MAJOR MINOR` can watch live, and prints joules
 * and watts per phase.
 *
 *   energy_phases [CYCLES [MAJOR]]     CYCLES busy+idle pairs (default 5), ring major (default 10)
 *
 * msrd is found through $HAECER_SOCKET (or the default socket). With the simulated CPU
 * following the host's load, busy phases show visibly more watts than idle ones.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <haecer/perfmon.h>

#include "common/clock.h"

#define DOMAINS 7
#define PHASE_NS 1000000000ull
#define SAMPLE_NS 100000000ull

struct domain {
	RAPLCounter type;
	PerfCounter counter;
	struct haecer_counter_info info;
};

static int parse(const char *text, long low, long high, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(text, &end, 10);
	return errno == 0 && *end == '\0' && end != text && *out >= low && *out <= high ? 0 : -1;
}

/* Every domain of the machine, each on its own ring (major, domain number). */
static size_t set_up(struct domain *domains, uint16_t major)
{
	size_t count = 0;

	for (int type = 0; type < DOMAINS; type++) {
		struct domain *domain = &domains[count];
		domain->type = (RAPLCounter)type;
		domain->counter = setupEnergyCounter(domain->type);
		if (!domain->counter.valid)
			continue;
		haecer_counter_info(haecer_perf_counter(&domain->counter), &domain->info);
		int error = setupFerretMonitor(&domain->counter, major, (uint16_t)type);
		if (error < 0)
			printf("%-14s not monitored: %s (%s)\n", haecer_energy_domain_name((unsigned)type),
			       haecer_strerror(error), haecer_error_detail());
		else
			printf("%-14s ring (%u, %u): haecer-mon follow %u %u\n", haecer_energy_domain_name((unsigned)type),
			       major, type, major, type);
		count++;
	}
	return count;
}

/* Read every domain (each read also goes to its ring). */
static void sample(struct domain *domains, size_t count, unsigned long long *values)
{
	for (size_t i = 0; i < count; i++)
		values[i] = readCounter(&domains[i].counter);
}

/* One phase: busy looping over gettimeofday, or asleep; a sample every 100 ms. */
static void run_phase(bool busy, struct domain *domains, size_t count,
		      unsigned long long *values)
{
	uint64_t start = clock_monotonic_ns();
	uint64_t next_sample = start + SAMPLE_NS;

	while (clock_monotonic_ns() - start < PHASE_NS) {
		if (busy) {
			struct timeval tv;
			gettimeofday(&tv, NULL);
		} else {
			struct timespec pause = {.tv_nsec = 10000000};
			nanosleep(&pause, NULL);
		}
		if (clock_monotonic_ns() >= next_sample) {
			sample(domains, count, values);
			next_sample += SAMPLE_NS;
		}
	}
}

static void print_phase(unsigned cycle, bool busy, const struct domain *domains, size_t count,
			const unsigned long long *before, const unsigned long long *after,
			double seconds, double *watts)
{
	printf("%5u  %-4s", cycle, busy ? "busy" : "idle");
	for (size_t i = 0; i < count; i++) {
		double joules = (double)(after[i] - before[i]) * domains[i].info.unit;
		if (before[i] == ULLONG_MAX || after[i] == ULLONG_MAX) {
			printf("  %21s", "(read failed)");
			continue;
		}
		printf("  %9.3f J %7.3f W", joules, joules / seconds);
		if (i == 0)
			*watts = joules / seconds;
	}
	printf("\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct domain domains[DOMAINS];
	unsigned long long before[DOMAINS], after[DOMAINS];
	double busy_watts = 0.0, idle_watts = 0.0;
	long cycles = 5, major = 10;
	size_t count;

	if ((argc > 1 && parse(argv[1], 1, 100000, &cycles) < 0) ||
	    (argc > 2 && parse(argv[2], 0, 65535, &major) < 0) || argc > 3) {
		fprintf(stderr, "usage: %s [CYCLES [MAJOR]]\n", argv[0]);
		return 2;
	}
	count = set_up(domains, (uint16_t)major);
	if (count == 0) {
		fprintf(stderr, "%s: no energy counter: %s\n", argv[0], haecer_error_detail());
		return 1;
	}
	printf("cycle  phase");
	for (size_t i = 0; i < count; i++)
		printf("  %21s", domains[i].info.name);
	printf("\n");
	for (unsigned cycle = 1; cycle <= (unsigned)cycles; cycle++) {
		for (int busy = 1; busy >= 0; busy--) {
			double watts = 0.0;
			uint64_t start = clock_monotonic_ns();
			sample(domains, count, before);
			run_phase(busy, domains, count, after);
			sample(domains, count, after);
			print_phase(cycle, busy, domains, count, before, after,
				    (double)(clock_monotonic_ns() - start) / 1e9, &watts);
			*(busy ? &busy_watts : &idle_watts) += watts / (double)cycles;
		}
	}
	printf("mean %s: busy %.3f W, idle %.3f W\n", domains[0].info.name, busy_watts,
	       idle_watts);
	for (size_t i = 0; i < count; i++)
		freeCounter(&domains[i].counter);
	return 0;
}
