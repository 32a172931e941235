/*
 * bench/msrd — what a round trip through msrd costs, against the floor of a bare UNIX-socket
 * ping-pong with the same frame sizes measured in the same run; how throughput scales with
 * concurrent clients; how much server memory an idle client costs. Not a test: prints figures.
 *
 * Then resource management: a registered batch of 8 run by handle against the same batch sent
 * whole; the timing error of a 1 ms schedule of 8 reads, from its ring's timestamps against the
 * ideal grid; msrd's CPU use (utime + stime of /proc/PID/stat) while it samples those 8 MSRs at
 * 1 kHz into the ring, and while idle with nothing to do but keep its energy totals exact.
 *
 * Starts a real msrd (simulated CPU in real time) through the test harness. Environment:
 * HAECER_BUILD (where msrd is), HAECER_BENCH_SECONDS (per throughput point, default 1; the CPU
 * figures use three times as long, at least 3 s), HAECER_BENCH_MSRD_SCALING=N (only the scaling
 * points, N times: scaling_only below).
 *
 * System calls per read, counted exactly: a client process pinned to msrd's CPU makes READs
 * while strace -c -f counts every system call of both processes (strace is slow: only the
 * counts are taken from that run, never a time); the count is divided by the reads. The same-CPU
 * latencies are measured without strace. The key is the simulated CPU's (this benchmark's msrd);
 * the text also gives the count against the msr backend on stand-in device files.
 *
 * Last line: read_ns=… pingpong_ns=… ratio_pingpong=… batch8_ratio=… clients1_ops=…
 * clients16_ops=… clients256_ops=… clients1000_ops=… kib_per_client=… handle8_ratio=…
 * period_jitter_us_p99=… sample_1khz_cpu_pct=… idle_cpu_pct=… syscalls_per_read=…
 * ratio_pingpong_same_cpu=… timer_jitter_us_p99=… period_jitter_ratio=… clients10000_ops=…
 * msrd_us_per_read_16=… msrd_us_per_read_10000=… (msrd's utime + stime over a throughput
 * point's interval, per read) floor_us_per_read_16=… floor_us_per_read_10000=… (the same of a
 * bare io_uring echo server at 16 and 10 000 connections, measured right after msrd's)
 * broker_read_ratio=… powercap_read_ratio=… write_ns=… device_read_ns=…
 * write_read_ratio=… msrd_us_per_read_16_idle10000=… (msrd's CPU per read of 16 busy clients
 * beside 10 000 idle connections: against msrd_us_per_read_16, what idle connections cost a
 * request) msrd_ratio_10000_16=… floor_ratio_10000_16=… (msrd's and the echo floor's CPU per
 * read at 10 000 busy clients over theirs at 16: how much of msrd's growth the kernel shows too)
 *
 * Issue 30's figure: a WRITE round trip against a READ of the same register on the msr backend
 * (stand-in devices), both in this run (write_ns, device_read_ns, write_read_ratio). `bench/msrd
 * --writes` measures only that and prints only those keys.
 *
 * Issue 24's figures, each against its floor in the same run: read() of a software event whose
 * descriptor msrd's perf broker handed over, against the same event opened by this process
 * (broker_read_ratio, target <= 1.1: it is the same kernel object); nobody's readCounter of a
 * powercap domain through msrd's energy page, against root's pread of the stand-in energy_uj
 * (powercap_read_ratio, target <= 0.5: the page must beat the file).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <liburing.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "haecer/haecer.h"
#include "haecer/msrd.h"
#include "proto/wire.h"
#include "shm/ring.h"
#include "bench/lib/bench_stats.h"
#include "harness/msrd_harness.h"
#include "harness/process_figures.h"
#include "harness/raw_client.h"
#include "harness/standin_tree.h"
#include "bench/parts/msrd/msrd_bench.h"

#define SAMPLES 20000
#define WARMUP 2000
#define IDLE_CLIENTS 1000u
#define THROUGHPUT_POINTS 5
#define MANY_CLIENTS 10000u /* the last throughput point: one connection per thread */
#define FD_SPARE 256u       /* descriptors besides the clients' */

const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: base}\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: base}\n"
	"rules:\n"
	"  - {match: {any: true}, allow: [base], create_rings: [1], monitor_rings: [1]}\n";

struct msrd_server server;

void die(const char *what)
{
	fprintf(stderr, "bench/msrd: %s\n", what);
	msrd_kill(&server);
	exit(1);
}

/* ---- one client, one round trip at a time ----
 *
 * Placement matters more than anything on a small machine: a round trip between two CPUs costs
 * two cross-CPU wake-ups, one on the same CPU two context switches. So the client is pinned to
 * one CPU and every server (msrd, the floors) to one other CPU, and the measurements are
 * interleaved in blocks so that drift hits them all alike. */

#define BLOCKS 20
#define BLOCK (SAMPLES / BLOCKS)

/* The floors: another process answering a 24-byte request with a 24-byte reply (READ's sizes)
 * on a UNIX stream socket, with blocking recv/send, or with one io_uring doing the same recv and
 * send (what any io_uring server pays at least). */
static void receive_all(int fd, uint8_t *frame, size_t length)
{
	size_t got = 0;

	while (got < length) {
		ssize_t now = recv(fd, frame + got, length - got, 0);
		if (now <= 0)
			_exit(0);
		got += (size_t)now;
	}
}

static void pong(int fd)
{
	uint8_t frame[WIRE_HEADER_SIZE + 8];

	for (;;) {
		receive_all(fd, frame, sizeof(frame));
		if (send(fd, frame, sizeof(frame), MSG_NOSIGNAL) != (ssize_t)sizeof(frame))
			_exit(0);
	}
}

static int uring_step(struct io_uring *ring)
{
	struct io_uring_cqe *cqe;
	int result;

	io_uring_submit_and_wait(ring, 1);
	if (io_uring_peek_cqe(ring, &cqe) != 0)
		return -1;
	result = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return result;
}

static void uring_pong(int fd)
{
	uint8_t frame[WIRE_HEADER_SIZE + 8];
	struct io_uring ring;

	if (io_uring_queue_init(8, &ring, 0) < 0)
		_exit(1);
	for (;;) {
		io_uring_prep_recv(io_uring_get_sqe(&ring), fd, frame, sizeof(frame), MSG_WAITALL);
		if (uring_step(&ring) != (int)sizeof(frame))
			_exit(0);
		io_uring_prep_send(io_uring_get_sqe(&ring), fd, frame, sizeof(frame), MSG_NOSIGNAL);
		if (uring_step(&ring) != (int)sizeof(frame))
			_exit(0);
	}
}

static int start_floor(void (*serve)(int fd), int cpu, pid_t *child)
{
	int pair[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
		die("socketpair");
	*child = fork();
	if (*child == 0) {
		close(pair[0]);
		bench_pin(0, cpu);
		serve(pair[1]);
		_exit(0);
	}
	close(pair[1]);
	return pair[0];
}

static uint64_t floor_round_trip(int fd)
{
	uint8_t frame[WIRE_HEADER_SIZE + 8] = { 0 };
	uint64_t start = bench_now_ns();

	if (send(fd, frame, sizeof(frame), MSG_NOSIGNAL) != (ssize_t)sizeof(frame))
		die("ping");
	receive_all(fd, frame, sizeof(frame));
	return bench_now_ns() - start;
}

struct latencies {
	uint64_t read;
	uint64_t batch8;
	uint64_t handle8;
	uint64_t pingpong;
	uint64_t uring_pingpong;
};

static void measure_latencies(struct haecer_conn *conn, int client_cpu, int server_cpu,
			      struct latencies *out)
{
	static uint64_t reads[SAMPLES], batches[SAMPLES], handles[SAMPLES], pongs[SAMPLES],
		uring_pongs[SAMPLES];
	struct haecer_msr_op ops[8];
	pid_t pong_pid, uring_pid;
	int pong_fd, uring_fd;
	uint32_t handle;
	uint64_t value;

	bench_pin(0, client_cpu);
	bench_pin(server.pid, server_cpu);
	pong_fd = start_floor(pong, server_cpu, &pong_pid);
	uring_fd = start_floor(uring_pong, server_cpu, &uring_pid);
	for (int i = 0; i < 8; i++)
		ops[i] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = (uint32_t)(i % 4),
						 .address = i % 2 ? 0x10 : ADDRESS };
	if (haecer_batch_register(conn, ops, 8, &handle) < 0)
		die("registering a batch failed");
	for (int i = 0; i < WARMUP; i++) {
		if (haecer_msr_read(conn, 0, ADDRESS, &value) < 0 || haecer_msr_batch(conn, ops, 8) < 0 ||
		    haecer_batch_run(conn, handle, ops, 8) < 0)
			die("warm-up requests failed");
		floor_round_trip(pong_fd);
		floor_round_trip(uring_fd);
	}
	for (int block = 0; block < BLOCKS; block++) {
		for (int i = block * BLOCK; i < (block + 1) * BLOCK; i++) {
			uint64_t start = bench_now_ns();
			haecer_msr_read(conn, 0, ADDRESS, &value);
			reads[i] = bench_now_ns() - start;
		}
		for (int i = block * BLOCK; i < (block + 1) * BLOCK; i++) {
			uint64_t start = bench_now_ns();
			haecer_msr_batch(conn, ops, 8);
			batches[i] = bench_now_ns() - start;
		}
		for (int i = block * BLOCK; i < (block + 1) * BLOCK; i++) {
			uint64_t start = bench_now_ns();
			haecer_batch_run(conn, handle, ops, 8);
			handles[i] = bench_now_ns() - start;
		}
		for (int i = block * BLOCK; i < (block + 1) * BLOCK; i++)
			pongs[i] = floor_round_trip(pong_fd);
		for (int i = block * BLOCK; i < (block + 1) * BLOCK; i++)
			uring_pongs[i] = floor_round_trip(uring_fd);
	}
	haecer_batch_release(conn, handle);
	close(pong_fd);
	close(uring_fd);
	waitpid(pong_pid, NULL, 0);
	waitpid(uring_pid, NULL, 0);
	bench_pin(0, -1);
	bench_pin(server.pid, -1);
	out->read = bench_median_u64(reads, SAMPLES);
	out->batch8 = bench_median_u64(batches, SAMPLES);
	out->handle8 = bench_median_u64(handles, SAMPLES);
	out->pingpong = bench_median_u64(pongs, SAMPLES);
	out->uring_pingpong = bench_median_u64(uring_pongs, SAMPLES);
}

static void print_latencies(const char *placement, const struct latencies *figures)
{
	printf("%s:\n", placement);
	printf("  one READ through msrd:            median %llu ns\n",
	       (unsigned long long)figures->read);
	printf("  BATCH of 8 reads:                 median %llu ns (%.2f x one READ)\n",
	       (unsigned long long)figures->batch8, (double)figures->batch8 / (double)figures->read);
	printf("  registered batch of 8 by handle:  median %llu ns (%.2f x the batch sent whole)\n",
	       (unsigned long long)figures->handle8,
	       (double)figures->handle8 / (double)figures->batch8);
	printf("  bare ping-pong, recv/send:        median %llu ns (READ / this = %.2f)\n",
	       (unsigned long long)figures->pingpong,
	       (double)figures->read / (double)figures->pingpong);
	printf("  bare ping-pong through io_uring:  median %llu ns (READ / this = %.2f)\n",
	       (unsigned long long)figures->uring_pingpong,
	       (double)figures->read / (double)figures->uring_pingpong);
}

/* ---- throughput ---- */

struct load {
	pthread_barrier_t *start;
	atomic_bool *stop;
	const char *echo_path; /* NULL: msrd's READs; else the echo floor's round trips */
	uint64_t ops;
	int failed;
};

static void echo_load(struct load *load)
{
	uint8_t frame[WIRE_HEADER_SIZE + 8] = { 0 };
	int fd = raw_connect(load->echo_path);

	if (fd < 0)
		load->failed = 1;
	pthread_barrier_wait(load->start);
	while (!load->failed && !atomic_load_explicit(load->stop, memory_order_relaxed)) {
		size_t got = 0;
		if (send(fd, frame, sizeof(frame), MSG_NOSIGNAL) != (ssize_t)sizeof(frame))
			load->failed = 1;
		while (!load->failed && got < sizeof(frame)) {
			ssize_t now = recv(fd, frame + got, sizeof(frame) - got, 0);
			if (now <= 0)
				load->failed = 1;
			got += now > 0 ? (size_t)now : 0;
		}
		load->ops += !load->failed;
	}
	if (fd >= 0)
		close(fd);
}

static void *load_thread(void *argument)
{
	struct load *load = argument;
	struct haecer_conn *conn = NULL;
	uint64_t value;

	if (load->echo_path != NULL) {
		echo_load(load);
		return NULL;
	}
	if (haecer_connect(server.socket_path, &conn) < 0)
		load->failed = 1;
	pthread_barrier_wait(load->start);
	while (!load->failed && !atomic_load_explicit(load->stop, memory_order_relaxed)) {
		if (haecer_msr_read(conn, 0, ADDRESS, &value) < 0) {
			load->failed = 1;
			break;
		}
		load->ops++;
	}
	haecer_close(conn);
	return NULL;
}


static unsigned long long cpu_ticks(pid_t pid);

/* `clients` threads, one connection each, against msrd (echo_path NULL) or the echo floor;
 * the CPU time is that of `target`. */
struct throughput throughput(pid_t target, const char *echo_path, unsigned clients,
				    double seconds)
{
	pthread_t *threads = calloc(clients, sizeof(*threads));
	struct load *loads = calloc(clients, sizeof(*loads));
	pthread_barrier_t start;
	pthread_attr_t attributes;
	atomic_bool stop = false;
	uint64_t began, ended, total = 0;
	unsigned long long ticks_before, ticks_after;
	struct throughput out;

	if (threads == NULL || loads == NULL)
		die("out of memory");
	pthread_barrier_init(&start, NULL, clients + 1);
	pthread_attr_init(&attributes);
	pthread_attr_setstacksize(&attributes, 64 * 1024);
	for (unsigned i = 0; i < clients; i++) {
		loads[i] = (struct load){ .start = &start, .stop = &stop, .echo_path = echo_path };
		if (pthread_create(&threads[i], &attributes, load_thread, &loads[i]) != 0)
			die("pthread_create");
	}
	pthread_barrier_wait(&start);
	ticks_before = cpu_ticks(target);
	began = bench_now_ns();
	usleep((useconds_t)(seconds * 1e6));
	atomic_store(&stop, true);
	ended = bench_now_ns();
	ticks_after = cpu_ticks(target);
	for (unsigned i = 0; i < clients; i++) {
		pthread_join(threads[i], NULL);
		if (loads[i].failed)
			die("a load client failed");
		total += loads[i].ops;
	}
	pthread_barrier_destroy(&start);
	pthread_attr_destroy(&attributes);
	free(threads);
	free(loads);
	out.ops = (double)total * 1e9 / (double)(ended - began);
	out.msrd_us_per_read = total > 0 ? (double)(ticks_after - ticks_before) * 1e6 /
						   (double)sysconf(_SC_CLK_TCK) / (double)total
					 : -1.0;
	return out;
}

/* ---- schedules and CPU use ---- */

#define SCHEDULE_PERIOD_NS 1000000ull
#define SCHEDULE_OPS 8u
#define SCHEDULE_CAPACITY 65536u

/* msrd's CPU time so far in clock ticks. */
static unsigned long long cpu_ticks(pid_t pid)
{
	long long ticks = harness_process_cpu_ticks(pid);

	if (ticks < 0)
		die("cannot read msrd's /proc/PID/stat");
	return (unsigned long long)ticks;
}

/* Time a task has run in ns (first field of /proc/PID/schedstat): a finer view than ticks. */
static unsigned long long run_ns(pid_t pid)
{
	char path[64];
	unsigned long long ns = 0;
	FILE *stat;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	stat = fopen(path, "r");
	if (stat != NULL) {
		if (fscanf(stat, "%llu", &ns) != 1)
			ns = 0;
		fclose(stat);
	}
	return ns;
}

struct cpu_use {
	double stat_pct;      /* utime + stime ticks: the figure the issue asks for */
	double schedstat_pct; /* run time in ns */
};

/* msrd's CPU use over `seconds` of wall time, in percent of one CPU. */
static struct cpu_use cpu_percent(double seconds)
{
	unsigned long long before = cpu_ticks(server.pid), ran = run_ns(server.pid);
	uint64_t began = bench_now_ns();
	double wall;

	usleep((useconds_t)(seconds * 1e6));
	wall = (double)(bench_now_ns() - began) / 1e9;
	return (struct cpu_use){
		.stat_pct = (double)(cpu_ticks(server.pid) - before) /
			    (double)sysconf(_SC_CLK_TCK) / wall * 100.0,
		.schedstat_pct = (double)(run_ns(server.pid) - ran) / 1e9 / wall * 100.0,
	};
}

struct schedule_figures {
	struct cpu_use cpu;
	double jitter_p99_us;
	double jitter_median_us;
	uint64_t sets;
	uint64_t missed;
};

/* The p99 and median of lateness samples in nanoseconds (sorted in place), in microseconds. */
static void take_lateness(uint64_t *late, size_t count, struct schedule_figures *out)
{
	bench_sort_u64(late, count);
	out->jitter_p99_us = (double)bench_percentile_u64(late, count, 99) / 1000.0;
	out->jitter_median_us = (double)bench_percentile_u64(late, count, 50) / 1000.0;
}

/* Each set's lateness against the ideal grid origin + number * period; a skipped period counts
 * as one period late (at least). */
static void measure_jitter(const struct ring_record *records, size_t count,
			   struct schedule_figures *out)
{
	size_t sets = count / SCHEDULE_OPS;
	uint64_t *late = calloc(sets * 2 + 1, sizeof(*late));
	uint64_t origin = records[0].timestamp, number = 0;
	size_t used = 0;

	if (late == NULL)
		die("out of memory");
	for (size_t set = 0; set < sets; set++) {
		const struct ring_record *first = &records[set * SCHEDULE_OPS];
		uint64_t next = (number & ~0xffffull) | first->flags;
		if (set > 0 && next <= number)
			next += 0x10000;
		for (uint64_t skipped = set > 0 ? number + 1 : next; skipped < next && used < 2 * sets;
		     skipped++, out->missed++)
			late[used++] = SCHEDULE_PERIOD_NS;
		number = next;
		late[used++] = first->timestamp - (origin + number * SCHEDULE_PERIOD_NS);
	}
	out->sets = sets;
	take_lateness(late, used, out);
	free(late);
}

/* The floor: a process doing nothing but wait for an absolute io_uring timeout every 1 ms (the
 * same wake-up msrd pays), measured like the schedule: lateness p99 and CPU use. */
static void measure_timer_floor(double seconds, struct schedule_figures *out)
{
	size_t count = (size_t)(seconds * 1e9 / SCHEDULE_PERIOD_NS);
	uint64_t *late = calloc(count, sizeof(*late));
	struct io_uring ring;
	unsigned long long ran = run_ns(getpid());
	uint64_t origin = bench_now_ns();

	if (late == NULL || io_uring_queue_init(8, &ring, 0) < 0)
		die("timer floor set-up");
	for (size_t i = 0; i < count; i++) {
		uint64_t deadline = origin + (i + 1) * SCHEDULE_PERIOD_NS;
		struct __kernel_timespec at = { .tv_sec = (long long)(deadline / 1000000000ull),
						.tv_nsec = (long long)(deadline % 1000000000ull) };
		io_uring_prep_timeout(io_uring_get_sqe(&ring), &at, 0, IORING_TIMEOUT_ABS);
		uring_step(&ring);
		late[i] = bench_now_ns() - deadline;
	}
	out->cpu.schedstat_pct = (double)(run_ns(getpid()) - ran) / (double)(bench_now_ns() - origin) *
				 100.0;
	io_uring_queue_exit(&ring);
	take_lateness(late, count, out);
	free(late);
}

/* A 1 ms schedule of 8 reads (TSC and package energy on four CPUs) into a ring: msrd's CPU use
 * while it runs, then its timing from the ring. */
static void measure_schedule(double seconds, struct schedule_figures *out)
{
	static struct ring_record records[SCHEDULE_CAPACITY];
	struct haecer_schedule_spec spec = { .period_ns = SCHEDULE_PERIOD_NS, .major = 1,
					     .minor = 1, .capacity = SCHEDULE_CAPACITY };
	struct haecer_msr_op ops[SCHEDULE_OPS];
	struct ring_consumer consumer;
	struct haecer_conn *conn;
	uint32_t id, instance;
	uint64_t lost = 0;
	ssize_t got;
	int fd;

	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < SCHEDULE_OPS; i++)
		ops[i] = (struct haecer_msr_op){
			.kind = i % 2 ? HAECER_MSR_READ : HAECER_MSR_ENERGY_READ,
			.cpu = i / 2,
			.address = i % 2 ? 0x10 : ADDRESS,
		};
	if (haecer_connect(server.socket_path, &conn) < 0 ||
	    haecer_batch_register(conn, ops, SCHEDULE_OPS, &spec.handle) < 0 ||
	    haecer_schedule_start(conn, &spec, &id, &instance) < 0 ||
	    haecer_ring_open(conn, 1, 1, instance, NULL, &fd) < 0 ||
	    ring_consumer_attach(&consumer, fd) < 0)
		die("starting a schedule failed");
	close(fd);
	out->cpu = cpu_percent(seconds);
	if (haecer_schedule_stop(conn, id) < 0)
		die("stopping the schedule failed");
	got = ring_consume(&consumer, records, SCHEDULE_CAPACITY, &lost);
	if (got < (ssize_t)SCHEDULE_OPS || lost != 0)
		die("the schedule's ring lost records or has none");
	measure_jitter(records, (size_t)got, out);
	ring_consumer_detach(&consumer);
	haecer_close(conn);
}

/* The most idle connections beside 16 busy clients the descriptor limit leaves room for. */
static unsigned idle_beside_busy(unsigned long fd_limit)
{
	unsigned long room = fd_limit > FD_SPARE + 16 ? fd_limit - FD_SPARE - 16 : 0;

	return room < MANY_CLIENTS ? (unsigned)room : MANY_CLIENTS;
}

/* HAECER_BENCH_MSRD_SCALING set: only the scaling figures (16 and 10 000 busy clients, each
 * beside the echo floor at the same count, and 16 busy beside 10 000 idle), repeated that many
 * times (default 1), for measuring a change to msrd's per-read cost quickly; its last line has
 * only those keys, each the median of the repetitions, with the minimum of msrd's CPU per read
 * beside it. */
#define SCALING_REPETITIONS_MOST 32u

/* The growth keys (msrd's and the floor's CPU per read at 10 000 over at 16): -1 without one. */
static double ratio_u64(uint64_t numerator, uint64_t denominator)
{
	return denominator > 0 ? (double)numerator / (double)denominator : -1.0;
}
enum { SCALE_16, SCALE_MANY, SCALE_IDLE, SCALE_POINTS };

static int scaling_only(unsigned long fd_limit, double seconds, unsigned repetitions)
{
	static const char *const names[SCALE_POINTS] = { "16 busy", "10000 busy",
							 "16 busy beside 10000 idle" };
	unsigned many = fd_limit > MANY_CLIENTS + FD_SPARE ? MANY_CLIENTS
							    : (unsigned)(fd_limit - FD_SPARE);
	/* Reads/s, and CPU per read in ns (order statistics are on integers). */
	uint64_t ops[SCALE_POINTS][SCALING_REPETITIONS_MOST];
	uint64_t msrd_ns[SCALE_POINTS][SCALING_REPETITIONS_MOST];
	uint64_t floor_ns[SCALE_POINTS][SCALING_REPETITIONS_MOST] = { { 0 } };

	for (unsigned r = 0; r < repetitions; r++) {
		for (unsigned i = 0; i < SCALE_POINTS; i++) {
			struct throughput point, floor = { 0 };
			if (i == SCALE_IDLE) {
				point = throughput_beside_idle(16, idle_beside_busy(fd_limit), seconds);
			} else {
				unsigned clients = i == SCALE_16 ? 16 : many;
				point = throughput(server.pid, NULL, clients, seconds);
				floor = echo_floor(clients, seconds);
			}
			printf("%s: msrd %.0f reads/s, %.2f us CPU per read; echo floor %.0f/s, "
			       "%.2f us\n", names[i], point.ops, point.msrd_us_per_read, floor.ops,
			       floor.msrd_us_per_read);
			fflush(stdout);
			ops[i][r] = (uint64_t)point.ops;
			msrd_ns[i][r] = (uint64_t)(point.msrd_us_per_read * 1000.0);
			floor_ns[i][r] = (uint64_t)(floor.msrd_us_per_read * 1000.0);
		}
	}
	if (msrd_stop(&server) < 0)
		return 1;
	for (unsigned i = 0; i < SCALE_POINTS; i++) {
		bench_sort_u64(msrd_ns[i], repetitions);
		bench_sort_u64(floor_ns[i], repetitions);
	}
	printf("repetitions=%u clients16_ops=%llu clients10000_ops=%llu msrd_us_per_read_16=%.2f "
	       "msrd_us_per_read_10000=%.2f msrd_us_per_read_16_idle10000=%.2f "
	       "msrd_us_per_read_16_min=%.2f msrd_us_per_read_10000_min=%.2f "
	       "msrd_us_per_read_16_idle10000_min=%.2f floor_us_per_read_16=%.2f "
	       "floor_us_per_read_10000=%.2f msrd_ratio_10000_16=%.2f floor_ratio_10000_16=%.2f\n",
	       repetitions,
	       (unsigned long long)bench_median_u64(ops[SCALE_16], repetitions),
	       (unsigned long long)bench_median_u64(ops[SCALE_MANY], repetitions),
	       msrd_ns[SCALE_16][repetitions / 2] / 1000.0,
	       msrd_ns[SCALE_MANY][repetitions / 2] / 1000.0,
	       msrd_ns[SCALE_IDLE][repetitions / 2] / 1000.0, msrd_ns[SCALE_16][0] / 1000.0,
	       msrd_ns[SCALE_MANY][0] / 1000.0, msrd_ns[SCALE_IDLE][0] / 1000.0,
	       floor_ns[SCALE_16][repetitions / 2] / 1000.0,
	       floor_ns[SCALE_MANY][repetitions / 2] / 1000.0,
	       ratio_u64(msrd_ns[SCALE_MANY][repetitions / 2], msrd_ns[SCALE_16][repetitions / 2]),
	       ratio_u64(floor_ns[SCALE_MANY][repetitions / 2], floor_ns[SCALE_16][repetitions / 2]));
	return 0;
}

/* `--writes`: issue 30's figure alone. */
static int print_write_figures(void)
{
	uint64_t write_ns, read_ns;
	double ratio = device_write_ratio(&write_ns, &read_ns);

	printf("msr backend (stand-in devices): WRITE %llu ns, READ of the same register %llu ns "
	       "(%.2f x)\n", (unsigned long long)write_ns, (unsigned long long)read_ns, ratio);
	printf("write_ns=%llu device_read_ns=%llu write_read_ratio=%.2f\n",
	       (unsigned long long)write_ns, (unsigned long long)read_ns, ratio);
	return 0;
}

int main(int argc, char **argv)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--log-level", "notice", "--max-clients", "16384",
				    "--max-clients-per-uid", "16384", NULL };
	const char *seconds_text = getenv("HAECER_BENCH_SECONDS");
	double seconds = seconds_text != NULL ? atof(seconds_text) : 1.0;
	static const unsigned client_counts[THROUGHPUT_POINTS] = { 1, 16, 256, 1000, MANY_CLIENTS };
	struct throughput points[THROUGHPUT_POINTS], floors[2], idle_point;
	unsigned long fd_limit;
	struct haecer_conn *conn;
	struct latencies cross, same;
	struct schedule_figures schedule, timer_floor;
	struct cpu_use idle;
	struct syscall_count syscalls, syscalls_device;
	double cpu_seconds;
	long cpus;
	double kib;
	uint64_t broker_ns, own_ns, page_ns, pread_ns;
	double broker_ratio, powercap_ratio, write_ratio;
	uint64_t write_ns, device_read_ns;

	if (argc > 1 && strcmp(argv[1], "--writes") == 0)
		return print_write_figures();
	if (seconds <= 0)
		seconds = 1.0;
	cpu_seconds = 3 * seconds > 3.0 ? 3 * seconds : 3.0;
	unsetenv("HAECER_VALGRIND");
	/* msrd inherits the limit: both need one descriptor per client and some to spare. */
	fd_limit = harness_raise_fd_limit(MANY_CLIENTS + FD_SPARE);
	if (msrd_start(&server, policy, arguments) < 0)
		return 1;
	if (getenv("HAECER_BENCH_MSRD_SCALING") != NULL) {
		int repetitions = atoi(getenv("HAECER_BENCH_MSRD_SCALING"));
		if (repetitions < 1 || repetitions > (int)SCALING_REPETITIONS_MOST)
			repetitions = 1;
		return scaling_only(fd_limit, seconds, (unsigned)repetitions);
	}
	if (haecer_connect(server.socket_path, &conn) < 0)
		die("connect");
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	measure_latencies(conn, 0, cpus > 1 ? 1 : 0, &cross);
	measure_latencies(conn, 0, 0, &same);
	haecer_close(conn);
	syscalls = count_syscalls(&server, ADDRESS, 0);
	syscalls_device = count_syscalls_msr_backend(0);
	print_latencies(cpus > 1 ? "client and servers on different CPUs" : "one CPU", &cross);
	if (cpus > 1)
		print_latencies("client and servers on the same CPU", &same);
	printf("system calls per READ, client and msrd on one CPU (strace -c -f over %d reads): "
	       "%.3f, of which msrd's io_uring_enter %.3f\n", COUNTED_READS, syscalls.total,
	       syscalls.server);
	printf("  the same with msrd's msr backend on stand-in device files, READs of the TSC (the "
	       "device read linked to the reply's send): %.3f, io_uring_enter %.3f\n",
	       syscalls_device.total, syscalls_device.server);
	/* The idle-client figure first, on a server whose buffers have seen one client only. */
	kib = kib_per_idle_client(IDLE_CLIENTS);
	printf("server memory per idle client:  %.2f KiB (RSS with %u idle clients)\n", kib,
	       IDLE_CLIENTS);
	for (size_t i = 0; i < THROUGHPUT_POINTS; i++) {
		unsigned clients = client_counts[i];
		if (clients + FD_SPARE > fd_limit) {
			clients = fd_limit > FD_SPARE ? (unsigned)(fd_limit - FD_SPARE) : 1;
			printf("RLIMIT_NOFILE is %lu: %u clients instead of %u\n", fd_limit, clients,
			       client_counts[i]);
		}
		points[i] = throughput(server.pid, NULL, clients, seconds);
		printf("throughput, %5u clients:       %.0f reads/s, msrd CPU %.2f us per read\n",
		       clients, points[i].ops, points[i].msrd_us_per_read);
		if (i == 1 || i == THROUGHPUT_POINTS - 1) {
			floors[i == 1 ? 0 : 1] = echo_floor(clients, seconds);
			printf("  floor, a bare io_uring echo:    %.0f round trips/s, its CPU %.2f us "
			       "per round trip\n", floors[i == 1 ? 0 : 1].ops,
			       floors[i == 1 ? 0 : 1].msrd_us_per_read);
		}
	}
	idle_point = throughput_beside_idle(16, idle_beside_busy(fd_limit), seconds);
	printf("throughput, 16 clients beside %u idle connections: %.0f reads/s, msrd CPU %.2f us "
	       "per read\n", idle_beside_busy(fd_limit), idle_point.ops,
	       idle_point.msrd_us_per_read);
	/* The idle figure on a server with no client at all: only the energy sampler is armed. */
	usleep(500000);
	idle = cpu_percent(cpu_seconds);
	printf("server CPU while idle (energy totals kept): %.3f %% (schedstat %.4f %%)\n",
	       idle.stat_pct, idle.schedstat_pct);
	measure_schedule(cpu_seconds, &schedule);
	measure_timer_floor(cpu_seconds, &timer_floor);
	printf("schedule of %u reads every 1 ms: %llu sets, %llu periods skipped\n", SCHEDULE_OPS,
	       (unsigned long long)schedule.sets, (unsigned long long)schedule.missed);
	printf("  lateness against the ideal grid: median %.1f us, p99 %.1f us\n",
	       schedule.jitter_median_us, schedule.jitter_p99_us);
	printf("  server CPU while sampling at 1 kHz: %.2f %% (schedstat %.2f %%)\n",
	       schedule.cpu.stat_pct, schedule.cpu.schedstat_pct);
	printf("floor, a bare absolute io_uring timeout every 1 ms in this process:\n");
	printf("  lateness median %.1f us, p99 %.1f us; CPU %.2f %% (schedstat)\n",
	       timer_floor.jitter_median_us, timer_floor.jitter_p99_us,
	       timer_floor.cpu.schedstat_pct);
	if (msrd_stop(&server) < 0)
		return 1;
	broker_ratio = broker_read_ratio(&broker_ns, &own_ns);
	printf("perf broker: read() of a software event msrd handed over %llu ns, of the same "
	       "event opened by this process %llu ns (%.2f x)\n", (unsigned long long)broker_ns,
	       (unsigned long long)own_ns, broker_ratio);
	powercap_ratio = powercap_read_ratio(&page_ns, &pread_ns);
	printf("powercap: nobody's readCounter of energy-pkg (msrd's energy page) %llu ns, root's "
	       "pread of the stand-in energy_uj %llu ns (%.2f x)\n", (unsigned long long)page_ns,
	       (unsigned long long)pread_ns, powercap_ratio);
	write_ratio = device_write_ratio(&write_ns, &device_read_ns);
	printf("msr backend (stand-in devices): WRITE %llu ns, READ of the same register %llu ns "
	       "(%.2f x)\n", (unsigned long long)write_ns, (unsigned long long)device_read_ns,
	       write_ratio);
	/* The machine-readable figures are the cross-CPU ones: the placement a loaded machine
	 * mostly gives, and the harder case. */
	printf("read_ns=%llu pingpong_ns=%llu ratio_pingpong=%.2f batch8_ratio=%.2f "
	       "clients1_ops=%.0f clients16_ops=%.0f clients256_ops=%.0f clients1000_ops=%.0f "
	       "kib_per_client=%.2f handle8_ratio=%.2f period_jitter_us_p99=%.1f "
	       "sample_1khz_cpu_pct=%.2f idle_cpu_pct=%.3f syscalls_per_read=%.2f "
	       "ratio_pingpong_same_cpu=%.2f timer_jitter_us_p99=%.1f period_jitter_ratio=%.2f "
	       "clients10000_ops=%.0f msrd_us_per_read_16=%.2f msrd_us_per_read_10000=%.2f "
	       "floor_us_per_read_16=%.2f floor_us_per_read_10000=%.2f "
	       "broker_read_ratio=%.2f powercap_read_ratio=%.2f write_ns=%llu device_read_ns=%llu "
	       "write_read_ratio=%.2f msrd_us_per_read_16_idle10000=%.2f msrd_ratio_10000_16=%.2f "
	       "floor_ratio_10000_16=%.2f\n",
	       (unsigned long long)cross.read, (unsigned long long)cross.pingpong,
	       (double)cross.read / (double)cross.pingpong,
	       (double)cross.batch8 / (double)cross.read, points[0].ops, points[1].ops,
	       points[2].ops, points[3].ops, kib,
	       (double)cross.handle8 / (double)cross.batch8, schedule.jitter_p99_us,
	       schedule.cpu.stat_pct, idle.stat_pct, syscalls.counted ? syscalls.total : -1.0,
	       (double)same.read / (double)same.pingpong, timer_floor.jitter_p99_us,
	       timer_floor.jitter_p99_us > 0 ? schedule.jitter_p99_us / timer_floor.jitter_p99_us
					     : -1.0,
	       points[4].ops, points[1].msrd_us_per_read, points[4].msrd_us_per_read,
	       floors[0].msrd_us_per_read, floors[1].msrd_us_per_read, broker_ratio,
	       powercap_ratio, (unsigned long long)write_ns, (unsigned long long)device_read_ns,
	       write_ratio, idle_point.msrd_us_per_read,
	       points[1].msrd_us_per_read > 0 ? points[4].msrd_us_per_read /
						points[1].msrd_us_per_read : -1.0,
	       floors[0].msrd_us_per_read > 0 ? floors[1].msrd_us_per_read /
						floors[0].msrd_us_per_read : -1.0);
	return 0;
}
