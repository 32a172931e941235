/*
 * bench/edge_lease — what a precise-edge lease holder costs everyone else (issue 28, item 2).
 *
 * A real msrd (simulated Sandy Bridge, real time, the policy's default edge budgets) serves one
 * client reading the package energy by round trip every 500 us, first alone (unattacked), then
 * while another connection holds precise pages of every energy register and renews its lease
 * every 10 ms (attacked: the holder read three counters every 70 ms). For each phase:
 * the reader's round-trip latency (p50, p99, max) and msrd's CPU (utime + stime of
 * /proc/PID/stat over the phase). The phases alternate, ROUNDS of each, pooled. Not a test:
 * prints figures; the baseline is the unattacked phases of the same run.
 *
 * Environment: HAECER_BUILD (where msrd is), HAECER_BENCH_SECONDS (per phase, default 3).
 *
 * Last line: read_p50_us_unattacked=… read_p99_us_unattacked=… read_max_us_unattacked=…
 * read_p50_us_attacked=… read_p99_us_attacked=… read_max_us_attacked=… p99_ratio_attacked=…
 * msrd_cpu_pct_unattacked=… msrd_cpu_pct_attacked=…
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "bench/lib/bench_stats.h"
#include "harness/msrd_harness.h"
#include "harness/process_figures.h"

#define MAX_READS 200000
#define ROUNDS 6

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"  - {name: DRAM_ENERGY_STATUS, address: 0x619, read: true, set: rapl}\n"
	"  - {name: PP0_ENERGY_STATUS, address: 0x639, read: true, set: rapl}\n"
	"  - {name: PP1_ENERGY_STATUS, address: 0x641, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {any: true}, allow: [rapl], capabilities: [sim_control]}\n";

static const uint32_t registers[] = { 0x611, 0x619, 0x639, 0x641 };

static struct msrd_server server;
static atomic_bool holder_stop;

struct phase {
	uint64_t p50_ns, p99_ns, max_ns;
	double cpu_pct;
};

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "bench/edge_lease: %s\n", what);
	msrd_kill(&server);
	exit(1);
}

static void *holder(void *argument)
{
	struct haecer_energy_page_info info;
	struct haecer_conn *conn;
	uint64_t raw, total;

	(void)argument;
	if (haecer_connect(server.socket_path, &conn) < 0)
		die("the holder cannot connect");
	for (size_t i = 0; i < sizeof(registers) / sizeof(registers[0]); i++) {
		int fd = -1;

		if (haecer_energy_page_request(conn, registers[i], 1000,
					       HAECER_ENERGY_PAGE_PRECISE, &info, &fd) == 0)
			close(fd);
	}
	while (!atomic_load(&holder_stop)) {
		if (haecer_energy_read(conn, 0, 0x611, &raw, &total) < 0)
			die("the holder's renewal failed");
		usleep(10000);
	}
	haecer_close(conn);
	return NULL;
}

/* Round-trip reads every 500 us for `seconds`, appended to `latencies`; msrd's CPU ticks over
 * them added to *ticks and their wall time to *ns. */
static void measure(struct haecer_conn *conn, double seconds, uint64_t *latencies, size_t *count,
		    long long *ticks, uint64_t *ns)
{
	uint64_t from = clock_monotonic_raw_ns(), deadline = from + (uint64_t)(seconds * 1e9);
	long long ticks_from = harness_process_cpu_ticks(server.pid);
	uint64_t raw, total;

	while (clock_monotonic_raw_ns() < deadline && *count < MAX_READS) {
		uint64_t start = clock_monotonic_raw_ns();

		if (haecer_energy_read(conn, 0, 0x611, &raw, &total) < 0)
			die("a read failed");
		latencies[(*count)++] = clock_monotonic_raw_ns() - start;
		usleep(500);
	}
	*ticks += harness_process_cpu_ticks(server.pid) - ticks_from;
	*ns += clock_monotonic_raw_ns() - from;
}

static struct phase summarise(uint64_t *latencies, size_t count, long long ticks, uint64_t ns)
{
	struct phase phase = { 0 };

	if (count == 0)
		die("no reads");
	phase.cpu_pct = 100.0 * (double)ticks / (double)sysconf(_SC_CLK_TCK) / ((double)ns / 1e9);
	phase.p50_ns = bench_median_u64(latencies, count); /* sorts */
	phase.p99_ns = bench_percentile_u64(latencies, count, 99);
	phase.max_ns = latencies[count - 1];
	return phase;
}

static void print_phase(const char *name, const struct phase *phase)
{
	printf("%-10s read p50/p99/max %.0f/%.0f/%.0f us, msrd %.1f %% of a CPU\n", name,
	       (double)phase->p50_ns / 1e3, (double)phase->p99_ns / 1e3,
	       (double)phase->max_ns / 1e3, phase->cpu_pct);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
	const char *env = getenv("HAECER_BENCH_SECONDS");
	double seconds = env != NULL && atof(env) > 0 ? atof(env) : 3.0;
	static uint64_t quiet_ns[MAX_READS], attacked_ns[MAX_READS];
	size_t quiet_count = 0, attacked_count = 0;
	long long quiet_ticks = 0, attacked_ticks = 0;
	uint64_t quiet_wall = 0, attacked_wall = 0;
	struct phase quiet, attacked;
	struct haecer_conn *conn;

	if (msrd_start(&server, policy, arguments) != 0)
		die("msrd did not start");
	if (haecer_connect(server.socket_path, &conn) < 0)
		die("cannot connect");
	if (haecer_sim_set_load(conn, -1, 1.0) < 0)
		die("cannot set the simulated load");
	/* Phases alternate (ROUNDS of each, pooled) so that a loaded host's drift weighs on both
	 * alike: one long phase of each swung the ratio from 0.7 to 10 between two runs. */
	for (int round = 0; round < ROUNDS; round++) {
		pthread_t thread;

		measure(conn, seconds / ROUNDS, quiet_ns, &quiet_count, &quiet_ticks, &quiet_wall);
		atomic_store(&holder_stop, false);
		if (pthread_create(&thread, NULL, holder, NULL) != 0)
			die("cannot start the holder");
		usleep(200000); /* the windows lock onto the grid */
		measure(conn, seconds / ROUNDS, attacked_ns, &attacked_count, &attacked_ticks,
			&attacked_wall);
		atomic_store(&holder_stop, true);
		pthread_join(thread, NULL);
		usleep(200000); /* the lease lapses: the next quiet phase has no windows */
	}
	haecer_close(conn);
	quiet = summarise(quiet_ns, quiet_count, quiet_ticks, quiet_wall);
	attacked = summarise(attacked_ns, attacked_count, attacked_ticks, attacked_wall);
	print_phase("unattacked", &quiet);
	print_phase("attacked", &attacked);
	if (msrd_stop(&server) != 0)
		fprintf(stderr, "bench/edge_lease: msrd did not stop cleanly\n");
	printf("read_p50_us_unattacked=%.1f read_p99_us_unattacked=%.1f read_max_us_unattacked=%.1f "
	       "read_p50_us_attacked=%.1f read_p99_us_attacked=%.1f read_max_us_attacked=%.1f "
	       "p99_ratio_attacked=%.2f msrd_cpu_pct_unattacked=%.1f msrd_cpu_pct_attacked=%.1f\n",
	       (double)quiet.p50_ns / 1e3, (double)quiet.p99_ns / 1e3, (double)quiet.max_ns / 1e3,
	       (double)attacked.p50_ns / 1e3, (double)attacked.p99_ns / 1e3,
	       (double)attacked.max_ns / 1e3, (double)attacked.p99_ns / (double)quiet.p99_ns,
	       quiet.cpu_pct, attacked.cpu_pct);
	return 0;
}
