/*
 * ring_demo — a producer process and a consumer process exchange counter readings through a
 * lock-free shared-memory ring, and the consumer accounts for every record.
 *
 * The parent plays msrd's part: it creates a sealed memfd ring for the producer, hands the
 * producer a read-write descriptor and the consumer a read-only one over UNIX sockets
 * (SCM_RIGHTS), and waits. The producer samples four simulated counters at 1 kHz for three
 * seconds, with a burst of marker records halfway that overruns the consumer; the consumer
 * polls every 20 ms like a monitor, prints what arrives and what was lost, and once the producer
 * is gone drains the rest. Exit status 0 when received + lost == pushed, exactly.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fdpass.h"
#include "common/clock.h"
#include "shm/ring.h"

#define CAPACITY 4096u
#define SAMPLE_HZ 1000
#define RUN_SECONDS 3
#define BURST_RECORDS 50000u
#define POLL_MS 20
#define REPORT_MS 500
#define ENERGY_UNIT_EXPONENT 14 /* RAPL energy unit on Haswell and later: 2^-14 J */

enum demo_counter { PKG_ENERGY, DRAM_ENERGY, INSTRUCTIONS, CYCLES, MARKER, COUNTERS };

/* The parent's hand-over: one marker byte carrying the ring descriptor. */
static int send_fd(int socket, int fd)
{
	return fdpass_send(socket, "R", 1, fd) == 1 ? 0 : -EPIPE;
}

static int receive_fd(int socket)
{
	char byte;
	int fd = -1;

	if (fdpass_receive(socket, &byte, 1, 0, &fd) != 1) {
		if (fd >= 0)
			close(fd);
		return -EPIPE;
	}
	return fd >= 0 ? fd : -EBADMSG;
}

/* ---- producer ---- */

struct simulated_cpu {
	double pkg_joules;
	double dram_joules;
	double instructions;
	double cycles;
};

/* A package drawing 15-25 W in a slow wave, DRAM 3 W, 2.4 G instructions/s at IPC 0.8. */
static void simulate_millisecond(struct simulated_cpu *cpu, double seconds)
{
	cpu->pkg_joules += (20.0 + 5.0 * sin(seconds * 2.0)) / SAMPLE_HZ;
	cpu->dram_joules += 3.0 / SAMPLE_HZ;
	cpu->instructions += 2.4e9 / SAMPLE_HZ;
	cpu->cycles += 3.0e9 / SAMPLE_HZ;
}

static uint64_t push_sample(struct ring_producer *producer, const struct simulated_cpu *cpu)
{
	const double energy_scale = (double)(1u << ENERGY_UNIT_EXPONENT);
	uint64_t timestamp = clock_monotonic_raw_ns();
	struct ring_record records[] = {
		{(uint64_t)(cpu->pkg_joules * energy_scale), timestamp, PKG_ENERGY,
		 ENERGY_UNIT_EXPONENT, 0},
		{(uint64_t)(cpu->dram_joules * energy_scale), timestamp, DRAM_ENERGY,
		 ENERGY_UNIT_EXPONENT, 0},
		{(uint64_t)cpu->instructions, timestamp, INSTRUCTIONS, 0, 0},
		{(uint64_t)cpu->cycles, timestamp, CYCLES, 0, 0},
	};

	for (size_t i = 0; i < sizeof(records) / sizeof(records[0]); i++)
		ring_push(producer, &records[i]);
	return sizeof(records) / sizeof(records[0]);
}

static uint64_t push_burst(struct ring_producer *producer)
{
	uint64_t start = clock_monotonic_raw_ns();

	for (uint32_t i = 0; i < BURST_RECORDS; i++) {
		struct ring_record marker = {i, clock_monotonic_raw_ns(), MARKER, 0, 0};

		ring_push(producer, &marker);
	}
	printf("producer  burst: %u marker records in %.2f ms, far more than the %u-record ring\n",
	       BURST_RECORDS, (double)(clock_monotonic_raw_ns() - start) / 1e6, CAPACITY);
	fflush(stdout);
	return BURST_RECORDS;
}

static int run_producer(int socket)
{
	struct simulated_cpu cpu = {0};
	struct ring_producer producer;
	struct timespec tick;
	uint64_t pushed = 0;
	int fd = receive_fd(socket), rc;

	rc = fd < 0 ? fd : ring_producer_attach(&producer, fd);
	if (rc) {
		fprintf(stderr, "producer: %s\n", strerror(-rc));
		return 1;
	}
	close(fd);
	clock_gettime(CLOCK_MONOTONIC, &tick);
	for (int ms = 0; ms < RUN_SECONDS * SAMPLE_HZ; ms++) {
		simulate_millisecond(&cpu, ms / 1000.0);
		pushed += push_sample(&producer, &cpu);
		if (ms == RUN_SECONDS * SAMPLE_HZ / 2)
			pushed += push_burst(&producer);
		tick.tv_nsec += 1000000000 / SAMPLE_HZ;
		if (tick.tv_nsec >= 1000000000) {
			tick.tv_nsec -= 1000000000;
			tick.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &tick, NULL);
	}
	printf("producer  done: pushed %" PRIu64 " records (4 counters at %d Hz for %d s, plus the "
	       "burst)\n",
	       pushed, SAMPLE_HZ, RUN_SECONDS);
	fflush(stdout);
	ring_producer_detach(&producer);
	return 0;
}

/* ---- consumer ---- */

struct monitor {
	struct ring_consumer consumer;
	struct ring_info info;
	uint64_t received;
	uint64_t lost;
	uint64_t per_counter[COUNTERS];
	struct ring_record previous_pkg, latest_pkg;
	uint64_t start_ns;
};

static void monitor_take(struct monitor *monitor, const struct ring_record *records, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const struct ring_record *record = &records[i];

		if (record->counter_id < COUNTERS)
			monitor->per_counter[record->counter_id]++;
		if (record->counter_id == PKG_ENERGY) {
			monitor->previous_pkg = monitor->latest_pkg;
			monitor->latest_pkg = *record;
		}
	}
	monitor->received += count;
}

/* Package power from the two latest energy readings: J = value * 2^-unit_exponent. */
static double monitor_pkg_watts(const struct monitor *monitor)
{
	const struct ring_record *a = &monitor->previous_pkg, *b = &monitor->latest_pkg;

	if (b->timestamp <= a->timestamp || a->timestamp == 0)
		return 0;
	return ldexp((double)(b->value - a->value), -b->unit_exponent) /
	       ((double)(b->timestamp - a->timestamp) / 1e9);
}

static void monitor_report(const struct monitor *monitor, const char *when)
{
	printf("consumer  %-6s received %7" PRIu64 "  lost %6" PRIu64 "  (%s %.1f W, %s %" PRIu64
	       " records)\n",
	       when, monitor->received, monitor->lost, monitor->info.counters[PKG_ENERGY].name,
	       monitor_pkg_watts(monitor), monitor->info.counters[MARKER].name,
	       monitor->per_counter[MARKER]);
	fflush(stdout);
}

static int monitor_drain(struct monitor *monitor, bool final)
{
	struct ring_record records[512];
	ssize_t count;

	do {
		count = final ? ring_consume_final(&monitor->consumer, records, 512, &monitor->lost)
			      : ring_consume(&monitor->consumer, records, 512, &monitor->lost);
		if (count < 0)
			return (int)count;
		monitor_take(monitor, records, (size_t)count);
	} while (count > 0);
	return 0;
}

/* The parent closes the socket once the producer has exited. */
static bool producer_gone(int socket)
{
	struct pollfd ready = {.fd = socket, .events = POLLIN};

	return poll(&ready, 1, POLL_MS) > 0;
}

static int run_consumer(int socket)
{
	static struct monitor monitor;
	uint64_t next_report = REPORT_MS;
	int fd = receive_fd(socket), rc;
	char when[16];

	rc = fd < 0 ? fd : ring_consumer_attach(&monitor.consumer, fd);
	if (rc) {
		fprintf(stderr, "consumer: %s\n", strerror(-rc));
		return 1;
	}
	close(fd);
	if (write(socket, "a", 1) != 1)
		return 1;
	ring_consumer_info(&monitor.consumer, &monitor.info);
	monitor.start_ns = clock_monotonic_raw_ns();
	while (!producer_gone(socket)) {
		uint64_t elapsed_ms = (clock_monotonic_raw_ns() - monitor.start_ns) / 1000000;

		if (monitor_drain(&monitor, false))
			return 1;
		if (elapsed_ms >= next_report) {
			snprintf(when, sizeof(when), "%.1fs", elapsed_ms / 1000.0);
			monitor_report(&monitor, when);
			next_report += REPORT_MS;
		}
	}
	if (monitor_drain(&monitor, true))
		return 1;
	ring_consumer_info(&monitor.consumer, &monitor.info);
	monitor_report(&monitor, "final");
	printf("consumer  pushed %" PRIu64 " = received %" PRIu64 " + lost %" PRIu64 ": %s\n",
	       monitor.info.pushed, monitor.received, monitor.lost,
	       monitor.received + monitor.lost == monitor.info.pushed ? "exact" : "MISMATCH");
	fflush(stdout);
	ring_consumer_detach(&monitor.consumer);
	return monitor.received + monitor.lost == monitor.info.pushed ? 0 : 1;
}

/* ---- the parent, in msrd's place ---- */

static pid_t start_child(int (*run)(int socket), int *parent_end)
{
	int sockets[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(sockets[0]);
		_exit(run(sockets[1]));
	}
	close(sockets[1]);
	*parent_end = sockets[0];
	return pid;
}

static int exit_status(pid_t pid)
{
	int status = 0;

	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main(void)
{
	struct ring_params params = {
		.major = 1,
		.capacity = CAPACITY,
		.flags = RING_SINGLE_PRODUCER,
		.clock = RING_CLOCK_MONOTONIC_RAW,
		.counter_count = COUNTERS,
		.counters = {
			{"RAPL_PKG", PKG_ENERGY, RING_COUNTER_ENERGY, ENERGY_UNIT_EXPONENT, 0, -1, 0},
			{"RAPL_DRAM", DRAM_ENERGY, RING_COUNTER_ENERGY, ENERGY_UNIT_EXPONENT, 0, -1,
			 0},
			{"INSTRUCTIONS", INSTRUCTIONS, RING_COUNTER_FIXED, 0, -1, 0, 0},
			{"CYCLES", CYCLES, RING_COUNTER_FIXED, 0, -1, 0, 0},
			{"MARKER", MARKER, RING_COUNTER_SOFTWARE, 0, -1, -1, 0},
		},
	};
	int producer_socket, consumer_socket, fd, readonly, rc, producer_status, consumer_status;
	pid_t producer, consumer;
	char attached;

	setvbuf(stdout, NULL, _IOLBF, 0);
	producer = start_child(run_producer, &producer_socket);
	consumer = start_child(run_consumer, &consumer_socket);
	if (producer < 0 || consumer < 0)
		return 1;
	params.producer_pid = producer;
	rc = ring_memfd_create(&params, &fd);
	readonly = rc ? rc : ring_reopen_readonly(fd);
	if (rc || readonly < 0) {
		fprintf(stderr, "ring_demo: creating the ring: %s\n", strerror(rc ? -rc : -readonly));
		return 1;
	}
	printf("ring_demo: ring %u.%u, %u records of 32 bytes in a sealed memfd; producer pid %d "
	       "(read-write fd), consumer pid %d (read-only fd)\n",
	       params.major, params.minor, CAPACITY, producer, consumer);
	/* The consumer attaches before the first push, so it answers for every record. */
	if (send_fd(consumer_socket, readonly) || read(consumer_socket, &attached, 1) != 1 ||
	    send_fd(producer_socket, fd))
		return 1;
	close(readonly);
	close(fd);
	producer_status = exit_status(producer);
	close(producer_socket);
	close(consumer_socket);
	consumer_status = exit_status(consumer);
	printf("ring_demo: %s\n", producer_status == 0 && consumer_status == 0
					  ? "every record is accounted for (received + lost = pushed)"
					  : "FAILED");
	return producer_status == 0 && consumer_status == 0 ? 0 : 1;
}
