/*
 * bench/fastpath — energy readings without a round trip (msrd's energy page), in one run:
 *  - an energy read through the page as a client's counter read makes it
 *    (energy_page_read_total: the total and its sample time under the seqlock) against a plain
 *    load from a shared page (the floor: one 64-bit load from a MAP_SHARED memfd mapping) and
 *    against the exact round trip (ENERGY_READ): back-to-back reads (the key figures), and
 *    chains of dependent reads (each one's latency) in the text; the text also gives the copy
 *    of a whole entry (energy_page_read, what a region's poll takes) and a whole
 *    haecer_counter_read through the page (lock, read, fold, clock reads for the age);
 *  - msrd's CPU (utime + stime) while a page is held and sampled at 1 kHz and at 10 kHz, with
 *    msrd idle in the same run as the baseline, and the floor of any 1 kHz sampler: this process
 *    waking on a bare io_uring 1 ms timeout for as long, nothing else done;
 *  - the smallest region startEnergyRead/endEnergyRead (haecer_energy_start/end) measures within
 *    ±10 % on the simulator, before (round trips: $HAECER_ENERGY_EXACT's mode) and after (the
 *    page, 10 kHz): regions of a busy wait of 20 µs to 20 ms at constant simulated power, each
 *    length 15 times; the floor is the shortest length whose median error is within 10 % of the
 *    simulator's power times the region's length (power from SIM_ENERGY_TRUTH over 300 ms).
 *
 * Starts a real msrd (simulated Sandy Bridge, real time) through the test harness. Not a test:
 * prints figures. Last line:
 * page_read_ns=… load_ns=… ratio_load=… roundtrip_ns=… sample1k_cpu_pct=… sample10k_cpu_pct=…
 * short_floor_us=…   (short_floor_us: after; the text says before)
 */
#include <errno.h>
#include <liburing.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "haecer/perfmon.h"
#include "hw/msr.h"
#include "shm/energy_page.h"
#include "bench/lib/bench_stats.h"
#include "harness/msrd_harness.h"
#include "harness/process_figures.h"

#define ADDRESS 0x611u
#define ROUNDS 2000
#define PER_ROUND 1000
#define ROUNDTRIPS 5000
#define REGION_REPEATS 15
#define ACCURACY 0.10

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"energy_page: {max_rate_hz: 10000}\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: base}\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: base}\n"
	"  - {name: POWER_UNIT, address: 0x606, read: true, set: base}\n"
	"rules:\n"
	"  - {match: {any: true}, allow: [base], capabilities: [sim_control]}\n";

static struct msrd_server server;

static __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "bench/fastpath: %s\n", what);
	msrd_kill(&server);
	exit(1);
}

/* ---- one read ---- */

static double page_read_ns(const struct energy_page_reader *reader)
{
	static uint64_t rounds[ROUNDS];
	struct energy_page_total reading;
	uint64_t sink = 0;

	for (int round = 0; round < ROUNDS; round++) {
		uint64_t start = bench_now_ns();
		for (int i = 0; i < PER_ROUND; i++) {
			if (energy_page_read_total(reader, 0, &reading) == 0)
				sink += reading.total;
		}
		rounds[round] = bench_now_ns() - start;
	}
	__asm__ volatile("" : : "r"(sink));
	return (double)bench_median_u64(rounds, ROUNDS) / PER_ROUND;
}

/* A whole entry copied (energy_page_read): what a region's poll takes. */
static double page_copy_ns(const struct energy_page_reader *reader)
{
	static uint64_t rounds[ROUNDS];
	struct energy_page_reading reading;
	uint64_t sink = 0;

	for (int round = 0; round < ROUNDS; round++) {
		uint64_t start = bench_now_ns();
		for (int i = 0; i < PER_ROUND; i++) {
			if (energy_page_read(reader, 0, &reading) == 0)
				sink += reading.total;
		}
		rounds[round] = bench_now_ns() - start;
	}
	__asm__ volatile("" : : "r"(sink));
	return (double)bench_median_u64(rounds, ROUNDS) / PER_ROUND;
}

/* The same, each read's index taken from the previous read's value (always 0): a chain of
 * dependent reads, so the figure is one read's latency rather than how many overlap. */
static volatile uint64_t zero_mask;

static double page_read_chain_ns(const struct energy_page_reader *reader)
{
	static uint64_t rounds[ROUNDS];
	struct energy_page_total reading = { 0 };
	uint64_t mask = zero_mask;

	for (int round = 0; round < ROUNDS; round++) {
		uint64_t start = bench_now_ns();
		for (int i = 0; i < PER_ROUND; i++)
			energy_page_read_total(reader, (uint32_t)(reading.total & mask), &reading);
		rounds[round] = bench_now_ns() - start;
	}
	return (double)bench_median_u64(rounds, ROUNDS) / PER_ROUND;
}

/* haecer_counter_read of an energy counter served by the page, whole. */
static double counter_read_ns(void)
{
	static uint64_t rounds[ROUNDS / 10];
	struct haecer_context *ctx;
	struct haecer_counter *energy;
	uint64_t value, sink = 0;

	if (haecer_context_open(server.socket_path, &ctx) < 0 ||
	    haecer_counter_open_energy(ctx, 0, RAPL_PKG, &energy) < 0 ||
	    haecer_counter_read(energy, &value) < 0)
		die("an energy counter");
	for (int round = 0; round < ROUNDS / 10; round++) {
		uint64_t start = bench_now_ns();
		for (int i = 0; i < PER_ROUND; i++) {
			if (haecer_counter_read(energy, &value) == 0)
				sink += value;
		}
		rounds[round] = bench_now_ns() - start;
	}
	__asm__ volatile("" : : "r"(sink));
	haecer_context_close(ctx);
	return (double)bench_median_u64(rounds, ROUNDS / 10) / PER_ROUND;
}

static double load_ns(bool chain)
{
	static uint64_t rounds[ROUNDS];
	int fd = memfd_create("bench-load", MFD_CLOEXEC);
	_Atomic uint64_t *word;
	uint64_t sink = 0;

	if (fd < 0 || ftruncate(fd, 4096) < 0)
		die("memfd");
	word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (word == MAP_FAILED)
		die("mmap");
	atomic_store(word, 42);
	uint64_t mask = zero_mask, index = 0;
	for (int round = 0; round < ROUNDS; round++) {
		uint64_t start = bench_now_ns();
		if (chain) {
			for (int i = 0; i < PER_ROUND; i++)
				index = atomic_load_explicit(&word[index], memory_order_acquire) & mask;
		} else {
			for (int i = 0; i < PER_ROUND; i++)
				sink += atomic_load_explicit(word, memory_order_acquire);
		}
		rounds[round] = bench_now_ns() - start;
	}
	sink += index;
	__asm__ volatile("" : : "r"(sink));
	munmap(word, 4096);
	close(fd);
	return (double)bench_median_u64(rounds, ROUNDS) / PER_ROUND;
}

static double roundtrip_ns(struct haecer_conn *conn)
{
	static uint64_t samples[ROUNDTRIPS];
	uint64_t raw, total;

	for (int i = 0; i < ROUNDTRIPS; i++) {
		uint64_t start = bench_now_ns();
		if (haecer_energy_read(conn, 0, ADDRESS, &raw, &total) < 0)
			die("ENERGY_READ");
		samples[i] = bench_now_ns() - start;
	}
	return (double)bench_median_u64(samples, ROUNDTRIPS);
}

/* ---- msrd's CPU ---- */

static double msrd_cpu_pct(double seconds)
{
	long long before = harness_process_cpu_ticks(server.pid);
	uint64_t began = bench_now_ns();
	long long after;

	usleep((useconds_t)(seconds * 1e6));
	after = harness_process_cpu_ticks(server.pid);
	if (before < 0 || after < 0)
		die("msrd's /proc/PID/stat");
	return (double)(after - before) / (double)sysconf(_SC_CLK_TCK) /
	       ((double)(bench_now_ns() - began) / 1e9) * 100.0;
}

/* A bare io_uring timer loop at `rate`: the CPU of the wakeups alone. */
static double bare_timer_cpu_pct(uint32_t rate, double seconds)
{
	struct __kernel_timespec period = { .tv_nsec = 1000000000ll / rate };
	struct rusage before, after;
	struct io_uring ring;
	uint64_t began;
	long count = (long)(seconds * rate);

	if (io_uring_queue_init(4, &ring, 0) < 0)
		die("io_uring");
	getrusage(RUSAGE_SELF, &before);
	began = bench_now_ns();
	for (long i = 0; i < count; i++) {
		struct io_uring_cqe *cqe;

		io_uring_prep_timeout(io_uring_get_sqe(&ring), &period, 0, 0);
		io_uring_submit_and_wait(&ring, 1);
		if (io_uring_peek_cqe(&ring, &cqe) == 0)
			io_uring_cqe_seen(&ring, cqe);
	}
	getrusage(RUSAGE_SELF, &after);
	io_uring_queue_exit(&ring);
	double used = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec +
			       after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
		      (double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec +
			       after.ru_stime.tv_usec - before.ru_stime.tv_usec) / 1e6;
	return used / ((double)(bench_now_ns() - began) / 1e9) * 100.0;
}

static double sampling_cpu_pct(uint32_t rate, double seconds)
{
	struct haecer_energy_page_info info;
	struct haecer_conn *conn;
	double pct;
	int fd;

	if (haecer_connect(server.socket_path, &conn) < 0 ||
	    haecer_energy_page_open(conn, ADDRESS, rate, &info, &fd) < 0)
		die("holding a page");
	close(fd);
	if (info.rate_hz != rate)
		die("msrd did not grant the rate asked for");
	usleep(100000);
	pct = msrd_cpu_pct(seconds);
	haecer_close(conn);
	return pct;
}

/* ---- the shortest region measured within 10 % ---- */

static double simulated_watts(struct haecer_conn *conn)
{
	struct haecer_sim_truth before, after;

	if (haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &before) < 0)
		die("SIM_ENERGY_TRUTH");
	usleep(300000);
	if (haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &after) < 0)
		die("SIM_ENERGY_TRUTH");
	return (after.joules - before.joules) / ((double)(after.now_ns - before.now_ns) / 1e9);
}

static double median_double(double *values, size_t count)
{
	for (size_t i = 1; i < count; i++)
		for (size_t k = i; k > 0 && values[k - 1] > values[k]; k--) {
			double swap = values[k];
			values[k] = values[k - 1];
			values[k - 1] = swap;
		}
	return values[count / 2];
}

/* Median relative error of regions of `length_ns` of busy waiting. */
static double region_error(struct haecer_counter *energy, double watts, uint64_t length_ns)
{
	double errors[REGION_REPEATS];

	for (int i = 0; i < REGION_REPEATS; i++) {
		struct haecer_energy_region region;
		struct haecer_energy_result result;
		uint64_t began, ended;

		if (haecer_energy_start(energy, &region) < 0)
			die("haecer_energy_start");
		began = bench_now_ns();
		do
			ended = bench_now_ns();
		while (ended - began < length_ns);
		if (haecer_energy_end(energy, &region, &result) < 0)
			die("haecer_energy_end");
		double expected = watts * (double)(ended - began) / 1e9;
		errors[i] = fabs(result.joules - expected) / expected;
	}
	return median_double(errors, REGION_REPEATS);
}

static double short_floor_us(bool exact, double watts)
{
	static const uint64_t lengths_us[] = { 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000,
					       20000 };
	struct haecer_context *ctx;
	struct haecer_counter *energy;
	double floor = -1.0;

	if (haecer_context_open(server.socket_path, &ctx) < 0 ||
	    haecer_context_set_energy_exact(ctx, exact) < 0 ||
	    haecer_counter_open_energy(ctx, 0, RAPL_PKG, &energy) < 0 ||
	    haecer_energy_calibrate(energy, 0, NULL) < 0)
		die("an energy counter");
	printf("  %s:", exact ? "before (round trips)" : "after (the page, 10 kHz)");
	/* From the longest down: the floor is the shortest length of an unbroken run within. */
	for (int i = (int)(sizeof(lengths_us) / sizeof(lengths_us[0])) - 1; i >= 0; i--) {
		double error = region_error(energy, watts, lengths_us[i] * 1000);
		printf(" %lluus %.1f%%", (unsigned long long)lengths_us[i], error * 100.0);
		fflush(stdout);
		if (error > ACCURACY)
			break;
		floor = (double)lengths_us[i];
	}
	printf("\n");
	haecer_context_close(ctx);
	return floor;
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--log-level", "notice", NULL };
	struct haecer_energy_page_info info;
	struct energy_page_reader reader;
	struct haecer_conn *conn;
	double page, copy, counter, load, page_chain, load_chain, roundtrip, idle, sample1k, sample10k;
	double watts, before, after, bare1k;
	int fd;

	unsetenv("HAECER_VALGRIND");
	unsetenv(HAECER_ENERGY_EXACT_ENV);
	if (msrd_start(&server, policy, arguments) < 0)
		return 1;
	if (haecer_connect(server.socket_path, &conn) < 0 ||
	    haecer_sim_set_load(conn, -1, 1.0) < 0 ||
	    haecer_energy_page_open(conn, ADDRESS, 1000, &info, &fd) < 0 ||
	    energy_page_attach(&reader, fd) < 0)
		die("setting up");
	close(fd);
	page = page_read_ns(&reader);
	load = load_ns(false);
	copy = page_copy_ns(&reader);
	page_chain = page_read_chain_ns(&reader);
	load_chain = load_ns(true);
	roundtrip = roundtrip_ns(conn);
	energy_page_detach(&reader);
	counter = counter_read_ns();
	haecer_close(conn);
	printf("one energy reading:\n");
	printf("  through the page (total + time): median %.1f ns (whole entry: %.1f ns; a whole "
	       "haecer_counter_read through it: %.1f ns)\n", page, copy, counter);
	printf("  plain load from a shared page:   median %.1f ns (page / load = %.2f)\n", load,
	       page / load);
	printf("  dependent reads (each index from the previous value): page %.1f ns, load %.1f ns "
	       "(page / load = %.2f)\n", page_chain, load_chain, page_chain / load_chain);
	printf("  round trip (ENERGY_READ):        median %.0f ns (round trip / page = %.0f)\n",
	       roundtrip, roundtrip / page);

	usleep(200000);
	idle = msrd_cpu_pct(3.0);
	sample1k = sampling_cpu_pct(1000, 3.0);
	sample10k = sampling_cpu_pct(10000, 3.0);
	bare1k = bare_timer_cpu_pct(1000, 3.0);
	printf("msrd's CPU (utime + stime): idle %.2f %%, a page held at 1 kHz %.2f %%, at 10 kHz "
	       "%.2f %%; a bare io_uring 1 ms timer loop (no work): %.2f %%\n", idle, sample1k,
	       sample10k, bare1k);

	if (haecer_connect(server.socket_path, &conn) < 0)
		die("connect");
	watts = simulated_watts(conn);
	printf("the shortest region measured within %.0f %% (simulated package at %.1f W; median "
	       "error of %d regions per length):\n", ACCURACY * 100, watts, REGION_REPEATS);
	before = short_floor_us(true, watts);
	after = short_floor_us(false, watts);
	haecer_close(conn);
	printf("  floor before %.0f us, after %.0f us (-1: no length within)\n", before, after);
	if (msrd_stop(&server) < 0)
		return 1;
	printf("page_read_ns=%.1f load_ns=%.2f ratio_load=%.2f roundtrip_ns=%.0f "
	       "sample1k_cpu_pct=%.2f sample10k_cpu_pct=%.2f short_floor_us=%.0f\n",
	       page, load, page / load, roundtrip, sample1k, sample10k, after);
	return 0;
}
