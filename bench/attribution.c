/*
 * bench/attribution.c — what one attribution interval costs (attribution_step: a snapshot of
 * every process's stat, schedstat and cgroup, /proc/stat, the cgroups' cpu.stat, and the split)
 * with 1 000 and 10 000 stand-in processes (regular files under a temporary root, so the count
 * is exact and the host's own processes do not blur it). The baseline, measured in the same run:
 * reading the same stat files alone (the floor any per-process reader pays). Linear growth shows
 * as about equal per-1000 figures at both counts.
 *
 * Second part (bench/parts/attribution/node_cost.c): the real msrd and `haecer-mon serve`'s CPU
 * (% of one CPU) and resident memory with 0 (the baseline), 1 000 and 10 000 real sleeping
 * processes on the node.
 *
 * Last line: attribution_us_per_1000_procs=... (at 10 000), with per-count figures, the floor
 * and the growth ratio (per-1000 at 10 000 over per-1000 at 1 000), then
 * serve_cpu_pct_N, serve_rss_kib_N, msrd_cpu_pct_N, msrd_rss_kib_N for N = 0, 1000, 10000.
 *
 * Third part (bench/parts/attribution/slowloris.c): a scrape of serve (new connection, whole
 * reply; median of 21) while 1 000 connections each hold half a request head
 * (slowloris_scrape_ms, and its worst: slowloris_scrape_max_ms) against the same scrape without
 * them (baseline_scrape_ms), at the end of the last line. Issue 25 asks for under 1 s.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attribution/attribution.h"
#include "bench/lib/bench_stats.h"
#include "bench/parts/attribution/node_cost.h"
#include "bench/parts/attribution/slowloris.h"

#define ROUNDS 9
#define CGROUPS 50
#define SLOWLORIS_CONNECTIONS 1000u

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	ssize_t wrote = write(fd, text, strlen(text));
	close(fd);
	return wrote == (ssize_t)strlen(text) ? 0 : -EIO;
}

/* A /proc with count single-threaded processes, /proc/stat and /proc/uptime, and CGROUPS
 * cgroups with cpu.stat; round moves every CPU time on. */
static int build_tree(const char *root, unsigned count, unsigned round)
{
	char path[512], text[512];
	int ret = 0;
	for (unsigned i = 0; i < count && ret == 0; i++) {
		unsigned pid = 1000 + i;
		snprintf(path, sizeof(path), "%s/proc/%u/task/%u", root, pid, pid);
		if (round == 0) {
			snprintf(path, sizeof(path), "%s/proc/%u", root, pid);
			mkdir(path, 0755);
			snprintf(path, sizeof(path), "%s/proc/%u/task", root, pid);
			mkdir(path, 0755);
			snprintf(path, sizeof(path), "%s/proc/%u/task/%u", root, pid, pid);
			mkdir(path, 0755);
			snprintf(path, sizeof(path), "%s/proc/%u/cgroup", root, pid);
			snprintf(text, sizeof(text), "0::/bench.slice/s%u.service\n", i % CGROUPS);
			ret = write_file(path, text);
		}
		snprintf(path, sizeof(path), "%s/proc/%u/stat", root, pid);
		snprintf(text, sizeof(text),
			 "%u (worker%u) S 1 %u %u 0 -1 0 0 0 0 0 %u 0 0 0 20 0 1 0 100 0 0 0 0 0 0 0 "
			 "0 0 0 0 0 0 0 0 17 %u 0 0\n", pid, i, pid, pid, round * (i % 7), i % 2);
		ret = ret ? ret : write_file(path, text);
		snprintf(path, sizeof(path), "%s/proc/%u/task/%u/schedstat", root, pid, pid);
		snprintf(text, sizeof(text), "%llu 0 0\n", (unsigned long long)round * (i % 7) * 1000000);
		ret = ret ? ret : write_file(path, text);
	}
	for (unsigned c = 0; c < CGROUPS && ret == 0; c++) {
		snprintf(path, sizeof(path), "mkdir -p %s/cgroup/bench.slice/s%u.service", root, c);
		if (round == 0 && system(path) != 0)
			return -EIO;
		snprintf(path, sizeof(path), "%s/cgroup/bench.slice/s%u.service/cpu.stat", root, c);
		snprintf(text, sizeof(text), "usage_usec %u\n", round * 1000 * (c + 1));
		ret = write_file(path, text);
	}
	snprintf(path, sizeof(path), "%s/proc/stat", root);
	snprintf(text, sizeof(text), "cpu0 %u 0 0 %u 0 0 0 0 0 0\ncpu1 %u 0 0 %u 0 0 0 0 0 0\n",
		 round * 500, round * 500, round * 500, round * 500);
	ret = ret ? ret : write_file(path, text);
	snprintf(path, sizeof(path), "%s/proc/uptime", root);
	snprintf(text, sizeof(text), "%u.00 0.00\n", 10 + round * 10);
	return ret ? ret : write_file(path, text);
}

/* The floor: read every process's stat file once. */
static uint64_t read_floor_ns(const char *root, unsigned count)
{
	char path[512], text[512];
	uint64_t start = bench_now_ns();
	for (unsigned i = 0; i < count; i++) {
		snprintf(path, sizeof(path), "%s/proc/%u/stat", root, 1000 + i);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			if (read(fd, text, sizeof(text)) < 0)
				perror("read");
			close(fd);
		}
	}
	return bench_now_ns() - start;
}

/* Median ns of one attribution_step and of the floor over ROUNDS intervals. */
static int measure(unsigned count, uint64_t *step_ns, uint64_t *floor_ns)
{
	char root[] = "/tmp/haecer-bench-attr-XXXXXX", path[600];
	uint64_t steps[ROUNDS], floors[ROUNDS];
	struct attribution *engine = NULL;
	struct attribution_interval interval;
	double joules = 100;
	int ret;

	if (!mkdtemp(root))
		return -errno;
	snprintf(path, sizeof(path), "mkdir -p %s/proc %s/sys %s/cgroup", root, root, root);
	ret = system(path) == 0 ? build_tree(root, count, 0) : -EIO;
	char proc[300], sys[300], cgroup[300];
	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(sys, sizeof(sys), "%s/sys", root);
	snprintf(cgroup, sizeof(cgroup), "%s/cgroup", root);
	struct attribution_config config = { .proc_root = proc, .sys_root = sys,
					     .cgroup_root = cgroup, .ticks_per_second = 100 };
	ret = ret ? ret : attribution_open(&engine, &config);
	ret = ret ? ret : attribution_step(engine, NULL, 0, &interval);
	for (unsigned r = 0; r < ROUNDS && ret == 0; r++) {
		ret = build_tree(root, count, r + 1);
		uint64_t start = bench_now_ns();
		ret = ret ? ret : attribution_step(engine, &joules, 1, &interval);
		steps[r] = bench_now_ns() - start;
		floors[r] = read_floor_ns(root, count);
		if (ret == 0 && interval.processes != count)
			ret = -EPROTO;
	}
	attribution_close(engine);
	snprintf(path, sizeof(path), "rm -rf %s", root);
	if (system(path) != 0)
		fprintf(stderr, "could not remove %s\n", root);
	if (ret)
		return ret;
	*step_ns = bench_median_u64(steps, ROUNDS);
	*floor_ns = bench_median_u64(floors, ROUNDS);
	return 0;
}

int main(void)
{
	const unsigned counts[] = { 1000, 10000 };
	double per_1000[2], floor_per_1000[2];
	uint64_t step_ns, floor_ns;

	for (int i = 0; i < 2; i++) {
		int ret = measure(counts[i], &step_ns, &floor_ns);
		if (ret) {
			fprintf(stderr, "attribution with %u processes: %s\n", counts[i], strerror(-ret));
			return 1;
		}
		per_1000[i] = (double)step_ns / 1e3 / (counts[i] / 1000.0);
		floor_per_1000[i] = (double)floor_ns / 1e3 / (counts[i] / 1000.0);
		printf("%u processes: attribution_step %.0f us (median of %d), %.0f us per 1000; "
		       "reading their stat files alone %.0f us per 1000\n", counts[i],
		       (double)step_ns / 1e3, ROUNDS, per_1000[i], floor_per_1000[i]);
	}
	struct node_cost costs[3] = { { .processes = 0 }, { .processes = 1000 },
				      { .processes = 10000 } };
	for (int i = 0; i < 3; i++) {
		int ret = node_cost_measure(&costs[i]);
		if (ret) {
			fprintf(stderr, "msrd and serve with %u processes: %s\n", costs[i].processes,
				strerror(-ret));
			return 1;
		}
		printf("%u more processes: serve %.1f %% CPU, %ld KiB; msrd %.1f %% CPU, %ld KiB\n",
		       costs[i].processes, costs[i].serve_cpu_pct, costs[i].serve_rss_kib,
		       costs[i].msrd_cpu_pct, costs[i].msrd_rss_kib);
	}
	struct slowloris_cost slowloris = { .connections = SLOWLORIS_CONNECTIONS };
	int ret = slowloris_measure(&slowloris);
	if (ret) {
		fprintf(stderr, "serve under %u slowloris connections: %s\n",
			slowloris.connections, strerror(-ret));
		return 1;
	}
	printf("scrape of serve: %.2f ms alone, %.2f ms (worst %.2f) with %u partial connections "
	       "open (medians of 21)\n", slowloris.baseline_ms, slowloris.slowloris_ms,
	       slowloris.slowloris_max_ms, slowloris.connections);
	printf("attribution_us_per_1000_procs=%.0f attribution_us_per_1000_at_1000=%.0f "
	       "attribution_us_per_1000_at_10000=%.0f read_floor_us_per_1000_procs=%.0f "
	       "growth_ratio=%.2f",
	       per_1000[1], per_1000[0], per_1000[1], floor_per_1000[1], per_1000[1] / per_1000[0]);
	for (int i = 0; i < 3; i++)
		printf(" serve_cpu_pct_%u=%.1f serve_rss_kib_%u=%ld msrd_cpu_pct_%u=%.1f "
		       "msrd_rss_kib_%u=%ld", costs[i].processes, costs[i].serve_cpu_pct,
		       costs[i].processes, costs[i].serve_rss_kib, costs[i].processes,
		       costs[i].msrd_cpu_pct, costs[i].processes, costs[i].msrd_rss_kib);
	printf(" baseline_scrape_ms=%.2f slowloris_scrape_ms=%.2f slowloris_scrape_max_ms=%.2f "
	       "slowloris_connections=%u\n", slowloris.baseline_ms, slowloris.slowloris_ms,
	       slowloris.slowloris_max_ms, slowloris.connections);
	return 0;
}
