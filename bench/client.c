/*
 * bench/client — what the HAECER API costs an instrumented program: the median of readCounter
 * unmonitored and monitored (the same read plus one ring push: target ratio <= 1.1), and of
 * simultaneousReadCounter of 1, 4 and 8 event counters (one synchronized msrd round trip),
 * beside the floor of one raw haecer_msr_read round trip measured in the same run.
 *
 * Starts a real msrd (simulated Sandy Bridge in real time, configs/policies/default.yaml)
 * through the test harness; HAECER_BUILD and HAECER_SOURCE say where msrd and the policy are.
 * The program runs on host CPU 0 and msrd on CPU 1 (when there is one); series are interleaved
 * in blocks so drift hits them alike.
 *
 * Last line: read_ns=… read_monitored_ns=… monitored_ratio=… simultaneous1_ns=…
 * simultaneous4_ns=… simultaneous8_ns=…
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "haecer/perfmon.h"
#include "bench/lib/bench_stats.h"
#include "harness/msrd_harness.h"

#define SAMPLES 20000
#define BLOCKS 20
#define BLOCK (SAMPLES / BLOCKS)
#define SETS 8
#define RING_MAJOR 10

enum series { FLOOR, READ, MONITORED, SIMULTANEOUS1, SIMULTANEOUS4, SIMULTANEOUS8, SERIES };

static const char *const series_names[SERIES] = {
	"haecer_msr_read (floor)", "readCounter", "readCounter, monitored",
	"simultaneousReadCounter x1", "simultaneousReadCounter x4", "simultaneousReadCounter x8",
};

static struct msrd_server server;
static uint64_t samples[SERIES][SAMPLES];

struct bench {
	struct haecer_conn *raw;        /* for the floor */
	PerfCounter plain, monitored;
	PerfCounter set[SETS];
};

static void die(const char *what, int error)
{
	fprintf(stderr, "bench/client: %s: %s (%s)\n", what, haecer_strerror(error),
		haecer_error_detail());
	haecer_shutdown();
	msrd_kill(&server);
	exit(1);
}

/* The shipped policy's text (malloc'ed), NULL when it cannot be read. */
static PerfCounter must(PerfCounter counter, const char *what)
{
	if (!counter.valid)
		die(what, counter.error);
	return counter;
}

/* Seven event counters on model CPU 0 (3 fixed, 4 programmable) and one on CPU 1: all the
 * simulated CPU 0 has, so set reads of 8 span two CPUs like a real multi-CPU set would. */
static void set_up(struct bench *bench, int cpus)
{
	int error = haecer_connect(server.socket_path, &bench->raw);

	if (error < 0)
		die("connect", error);
	bench->plain = must(setupEnergyCounter(RAPL_PKG), "RAPL_PKG");
	bench->monitored = must(setupEnergyCounter(RAPL_PKG), "RAPL_PKG");
	error = setupFerretMonitor(&bench->monitored, RING_MAJOR, 0);
	if (error < 0)
		die("setupFerretMonitor", error);
	for (int fixed = 0; fixed < 3; fixed++)
		bench->set[fixed] = must(setupFFCounter((FF_counter)fixed, 0), "fixed counter");
	bench->set[3] = must(setupArchCounter(BRANCH_INS_RETIRED, 0, 0), "BRANCH_INS_RETIRED");
	bench->set[4] = must(setupArchCounter(BRANCH_MIS_RETIRED, 0, 0), "BRANCH_MIS_RETIRED");
	bench->set[5] = must(setupArchCounter(LL_CACHE_REFERENCES, 0, 0), "LL_CACHE_REFERENCES");
	bench->set[6] = must(setupArchCounter(LL_CACHE_MISSES, 0, 0), "LL_CACHE_MISSES");
	bench_pin(0, cpus > 1 ? 1 : 0);
	bench->set[7] = must(setupFFCounter(INST_RETIRED_ANY, 0), "fixed counter on CPU 1");
	bench_pin(0, 0);
}

/* One timed call of a series. */
static uint64_t timed(struct bench *bench, enum series series)
{
	unsigned long long values[SETS];
	uint64_t value, start = bench_now_ns();

	switch (series) {
	case FLOOR:
		haecer_msr_read(bench->raw, 0, 0x611, &value);
		break;
	case READ:
		readCounter(&bench->plain);
		break;
	case MONITORED:
		readCounter(&bench->monitored);
		break;
	case SIMULTANEOUS1:
		simultaneousReadCounter(bench->set, values, 1);
		break;
	case SIMULTANEOUS4:
		simultaneousReadCounter(bench->set, values, 4);
		break;
	default:
		simultaneousReadCounter(bench->set, values, 8);
		break;
	}
	return bench_now_ns() - start;
}

static void measure(struct bench *bench)
{
	for (int series = 0; series < SERIES; series++)
		for (int i = 0; i < 1000; i++)
			timed(bench, (enum series)series); /* warm-up */
	for (int block = 0; block < BLOCKS; block++)
		for (int series = 0; series < SERIES; series++)
			for (int i = 0; i < BLOCK; i++)
				samples[series][block * BLOCK + i] = timed(bench,
									   (enum series)series);
}

int main(void)
{
	const char *arguments[] = {"--backend", "sim", "--sim-model", "sandybridge",
				   "--log-level", "notice", NULL};
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct bench bench;
	uint64_t medians[SERIES];
	double ratio;

	if (bench_start_msrd(&server, arguments) < 0) {
		fprintf(stderr, "bench/client: cannot start msrd with the default policy\n");
		return 1;
	}
	bench_pin(server.pid, cpus > 1 ? 1 : 0);
	bench_pin(0, 0);
	set_up(&bench, (int)cpus);
	measure(&bench);
	for (int i = 0; i < SETS; i++)
		freeCounter(&bench.set[i]);
	haecer_close(bench.raw);
	haecer_shutdown();
	if (msrd_stop(&server) < 0)
		return 1;
	for (int series = 0; series < SERIES; series++) {
		medians[series] = bench_median_u64(samples[series], SAMPLES);
		printf("%-30s median %7llu ns\n", series_names[series],
		       (unsigned long long)medians[series]);
	}
	ratio = (double)medians[MONITORED] / (double)medians[READ];
	printf("monitored / unmonitored: %.3f (target <= 1.1: %s); readCounter / floor: %.3f\n",
	       ratio, ratio <= 1.1 ? "met" : "missed",
	       (double)medians[READ] / (double)medians[FLOOR]);
	printf("read_ns=%llu read_monitored_ns=%llu monitored_ratio=%.3f simultaneous1_ns=%llu "
	       "simultaneous4_ns=%llu simultaneous8_ns=%llu\n",
	       (unsigned long long)medians[READ], (unsigned long long)medians[MONITORED], ratio,
	       (unsigned long long)medians[SIMULTANEOUS1],
	       (unsigned long long)medians[SIMULTANEOUS4],
	       (unsigned long long)medians[SIMULTANEOUS8]);
	return 0;
}
