#include "bench/lib/bench_stats.h"
#include "common/clock.h"

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/text_file.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int bench_start_msrd(struct msrd_server *server, const char *const *arguments)
{
	char path[PATH_MAX];
	char *policy;
	int status;

	unsetenv("HAECER_VALGRIND");
	snprintf(path, sizeof(path), "%s/configs/policies/default.yaml", harness_source_dir());
	policy = harness_read_text(path, 65536);
	if (policy == NULL)
		return -1;
	status = msrd_start(server, policy, arguments) < 0 ? -1 : 0;
	free(policy);
	if (status == 0)
		setenv(HAECER_SOCKET_ENV, server->socket_path, 1);
	return status;
}

uint64_t bench_now_ns(void)
{
	return clock_monotonic_ns();
}

void bench_pin(pid_t pid, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (cpu < 0) {
		for (int i = 0; i < CPU_SETSIZE; i++)
			CPU_SET(i, &set);
	} else {
		CPU_SET(cpu, &set);
	}
	sched_setaffinity(pid, sizeof(set), &set);
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void bench_sort_u64(uint64_t *values, size_t count)
{
	qsort(values, count, sizeof(*values), compare_u64);
}

uint64_t bench_median_u64(uint64_t *values, size_t count)
{
	bench_sort_u64(values, count);
	return values[count / 2];
}

uint64_t bench_percentile_u64(const uint64_t *sorted, size_t count, unsigned percent)
{
	return sorted[count * percent / 100];
}
