/*
 * bench/ring — what a push costs, against a floor and a reference, and how fast a consumer in
 * another process drains a ring. Not a test: it prints figures, the last line machine-readable.
 *
 * Every candidate is called out of line, as an application calls ring_push from libhaecer: the
 * floor (store the 24-byte record into a private array) and ConcurrencyKit's ck_ring SPSC
 * enqueue are wrapped in functions the compiler may neither inline nor analyse across, so the
 * figures compare the work done per record, not the luck of inlining. (The inlined floor is
 * printed too, for reference.) The pushed records are built before the clock starts. Each
 * figure is the median over REPETITIONS batches of BATCH pushes, timed with CLOCK_MONOTONIC,
 * the pushing thread pinned to one CPU, the candidates interleaved in rounds.
 *
 * Multi-producer: ns per push of one thread alone, then of each of two threads pushing into
 * one ring at once from two CPUs (contended: dominated by moving head's cache line).
 * Drain: a child process, pinned to the other CPU, drains a full ring of DRAIN_CAPACITY
 * records the parent just pushed; median of 15 rounds.
 *
 *   build/bench/ring [REPETITIONS]
 */
#include <ck_ring.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm/ring.h"
#include "bench/lib/bench_stats.h"

#define CAPACITY 4096u
#define BATCH 1024u
#define DRAIN_CAPACITY (1u << 20)
#define DRAIN_BATCH 4096u
#define ROUNDS 20u

#ifdef __clang__
#define OUT_OF_LINE __attribute__((noinline))
#else
#define OUT_OF_LINE __attribute__((noipa))
#endif

CK_RING_PROTOTYPE(record, ring_record)

struct floor_array {
	struct ring_record *records;
	uint64_t next;
	uint64_t mask;
};

struct ck_reference {
	struct ck_ring ring;
	struct ring_record *buffer;
};

static unsigned repetitions = 4001; /* batches per candidate */

static void pin_to_cpu(int cpu)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpus > 0 ? cpu % (int)cpus : 0, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *values, unsigned count)
{
	qsort(values, count, sizeof(values[0]), compare_doubles);
	return values[count / 2];
}

static void die(const char *what, int error)
{
	fprintf(stderr, "bench/ring: %s: %s\n", what, strerror(error));
	exit(1);
}

static OUT_OF_LINE int floor_push(struct floor_array *array, const struct ring_record *record)
{
	array->records[array->next++ & array->mask] = *record;
	return 0;
}

static OUT_OF_LINE int ck_push(struct ck_reference *reference, const struct ring_record *record)
{
	return ck_ring_enqueue_spsc_record(&reference->ring, reference->buffer,
					   (struct ring_record *)record) ? 0 : -ENOSPC;
}

/* The records a batch pushes, built beforehand: built inside the loop, each would be read back
 * right after being written field by field, and a copy with 16-byte loads (the floor's, ck's
 * memcpy) would then stall on store forwarding, a cost of the benchmark, not of the candidate. */
static struct ring_record batch_records[BATCH];

static void batch_records_fill(uint64_t seed)
{
	for (uint32_t i = 0; i < BATCH; i++)
		batch_records[i] = (struct ring_record){
			.value = seed + i, .timestamp = seed * 3 + i, .counter_id = 1,
			.unit_exponent = 14};
}

/* ns per push over one batch; push_call sees `record`, a different one every push. */
#define TIMED_BATCH(push_call)                                                                 \
	({                                                                                     \
		uint64_t start = bench_now_ns();                                               \
		for (uint32_t i = 0; i < BATCH; i++) {                                         \
			const struct ring_record *record = &batch_records[i];                  \
			if (push_call)                                                         \
				die("push", EIO);                                              \
		}                                                                              \
		(double)(bench_now_ns() - start) / BATCH;                                      \
	})

static int create_producer(uint32_t flags, uint32_t capacity, struct ring_producer *producer)
{
	struct ring_params params = {.capacity = capacity, .flags = flags,
				     .clock = RING_CLOCK_MONOTONIC_RAW};
	int fd, rc;

	rc = ring_memfd_create(&params, &fd);
	if (rc)
		return rc;
	rc = ring_producer_attach(producer, fd);
	close(fd);
	return rc;
}

static double ring_batch(void *context)
{
	struct ring_producer *producer = context;

	return TIMED_BATCH(ring_push(producer, record));
}

static double floor_batch(void *context)
{
	return TIMED_BATCH(floor_push(context, record));
}

static double floor_inline_batch(void *context)
{
	struct floor_array *array = context;
	double ns = TIMED_BATCH((array->records[array->next++ & array->mask] = *record, 0));

	__asm__ volatile("" : : "r"(array->records) : "memory");
	return ns;
}

/* ck_ring never overwrites: empty it after each batch (untimed) so every enqueue succeeds. */
static double ck_batch(void *context)
{
	struct ck_reference *reference = context;
	double ns = TIMED_BATCH(ck_push(reference, record));
	struct ring_record out;

	while (ck_ring_dequeue_spsc_record(&reference->ring, reference->buffer, &out))
		;
	return ns;
}

struct candidate {
	double (*batch)(void *context);
	void *context;
	double *samples;
	unsigned count;
};

/* Rounds interleave the candidates, so a noisy moment on this shared machine hits them all
 * alike; each figure is the median over all of its batches. */
static void measure_single_thread(double *ring_ns, double *floor_ns, double *floor_inline_ns,
				  double *ck_ns)
{
	static struct ck_reference reference;
	struct floor_array array = {.mask = CAPACITY - 1}, inline_array = {.mask = CAPACITY - 1};
	struct ring_producer producer;
	struct candidate candidates[] = {
		{.batch = ring_batch, .context = &producer},
		{.batch = floor_batch, .context = &array},
		{.batch = floor_inline_batch, .context = &inline_array},
		{.batch = ck_batch, .context = &reference},
	};
	enum { COUNT = sizeof(candidates) / sizeof(candidates[0]) };
	unsigned per_round = repetitions / ROUNDS + 1;
	int rc = create_producer(RING_SINGLE_PRODUCER, CAPACITY, &producer);

	if (rc)
		die("ring", -rc);
	array.records = calloc(CAPACITY, sizeof(struct ring_record));
	inline_array.records = calloc(CAPACITY, sizeof(struct ring_record));
	reference.buffer = calloc(CAPACITY, sizeof(struct ring_record));
	ck_ring_init(&reference.ring, CAPACITY);
	for (unsigned c = 0; c < COUNT; c++)
		candidates[c].samples = calloc(per_round * ROUNDS, sizeof(double));
	for (unsigned round = 0; round < ROUNDS; round++)
		for (unsigned c = 0; c < COUNT; c++)
			for (unsigned k = 0; k < per_round; k++)
				candidates[c].samples[candidates[c].count++] =
					candidates[c].batch(candidates[c].context);
	*ring_ns = median(candidates[0].samples, candidates[0].count);
	*floor_ns = median(candidates[1].samples, candidates[1].count);
	*floor_inline_ns = median(candidates[2].samples, candidates[2].count);
	*ck_ns = median(candidates[3].samples, candidates[3].count);
	for (unsigned c = 0; c < COUNT; c++)
		free(candidates[c].samples);
	free(array.records);
	free(inline_array.records);
	free(reference.buffer);
	ring_producer_detach(&producer);
}

struct mp_thread {
	pthread_t thread;
	struct ring_producer *producer;
	pthread_barrier_t *barrier;
	int cpu;
	double median_ns;
};

static void *mp_pusher(void *argument)
{
	struct mp_thread *self = argument;
	double *samples = calloc(repetitions, sizeof(double));

	pin_to_cpu(self->cpu);
	pthread_barrier_wait(self->barrier);
	for (unsigned r = 0; r < repetitions; r++)
		samples[r] = TIMED_BATCH(ring_push(self->producer, record) == -EINVAL);
	self->median_ns = median(samples, repetitions);
	free(samples);
	return NULL;
}

/* Several threads pushing into one multi-producer ring at once; ns per push seen by each
 * thread (the median over threads' medians is reported). */
static double measure_mp(unsigned threads)
{
	struct mp_thread workers[2];
	struct ring_producer producer;
	pthread_barrier_t barrier;
	double sum = 0;
	int rc = create_producer(0, CAPACITY, &producer);

	if (rc)
		die("ring", -rc);
	pthread_barrier_init(&barrier, NULL, threads);
	for (unsigned t = 0; t < threads; t++) {
		workers[t] = (struct mp_thread){
			.producer = &producer, .barrier = &barrier, .cpu = 1 - (int)t};
		pthread_create(&workers[t].thread, NULL, mp_pusher, &workers[t]);
	}
	for (unsigned t = 0; t < threads; t++) {
		pthread_join(workers[t].thread, NULL);
		sum += workers[t].median_ns;
	}
	pthread_barrier_destroy(&barrier);
	ring_producer_detach(&producer);
	return sum / threads;
}

/* Child: for each byte from the parent, drain the (full) ring from its oldest record and
 * report the rate in records/s as a double. */
static int drain_child(int fd, int commands, int results)
{
	static struct ring_record records[DRAIN_BATCH];
	struct ring_consumer consumer;
	char command;

	pin_to_cpu(0);
	if (ring_consumer_attach(&consumer, fd))
		return 1;
	while (read(commands, &command, 1) == 1) {
		uint64_t received = 0, lost = 0, start;
		double rate;
		ssize_t count;

		ring_consumer_seek_oldest(&consumer);
		start = bench_now_ns();
		while ((count = ring_consume(&consumer, records, DRAIN_BATCH, &lost)) > 0)
			received += (uint64_t)count;
		rate = (double)received / ((double)(bench_now_ns() - start) / 1e9);
		if (received != DRAIN_CAPACITY || lost)
			rate = 0;
		if (write(results, &rate, sizeof(rate)) != sizeof(rate))
			return 1;
	}
	ring_consumer_detach(&consumer);
	return 0;
}

static void fill(struct ring_producer *producer)
{
	for (uint32_t i = 0; i < DRAIN_CAPACITY; i++) {
		struct ring_record record = {.value = i, .timestamp = i, .counter_id = 1};

		ring_push(producer, &record);
	}
}

static double measure_drain(unsigned rounds)
{
	struct ring_params params = {.capacity = DRAIN_CAPACITY, .flags = RING_SINGLE_PRODUCER,
				     .clock = RING_CLOCK_MONOTONIC_RAW};
	struct ring_producer producer;
	int fd, readonly, commands[2], results[2], status;
	double *rates = calloc(rounds, sizeof(double));
	double result;
	pid_t child;

	if (ring_memfd_create(&params, &fd) || ring_producer_attach(&producer, fd))
		die("drain ring", EIO);
	readonly = ring_reopen_readonly(fd);
	if (readonly < 0 || pipe(commands) || pipe(results))
		die("drain setup", EIO);
	child = fork();
	if (child == 0) {
		close(commands[1]);
		close(results[0]);
		_exit(drain_child(readonly, commands[0], results[1]));
	}
	close(commands[0]);
	close(results[1]);
	for (unsigned r = 0; r < rounds; r++) {
		fill(&producer);
		if (write(commands[1], "d", 1) != 1 ||
		    read(results[0], &rates[r], sizeof(rates[r])) != sizeof(rates[r]))
			die("drain child", EPIPE);
	}
	close(commands[1]);
	waitpid(child, &status, 0);
	result = median(rates, rounds);
	ring_producer_detach(&producer);
	close(fd);
	close(readonly);
	close(results[0]);
	free(rates);
	return result;
}

int main(int argc, char **argv)
{
	double ring_ns, floor_ns, floor_inline_ns, ck_ns, mp1_ns, mp2_ns, drain;

	if (argc > 1)
		repetitions = (unsigned)strtoul(argv[1], NULL, 10) | 1;
	pin_to_cpu(1);
	batch_records_fill(42);
	measure_single_thread(&ring_ns, &floor_ns, &floor_inline_ns, &ck_ns);
	mp1_ns = measure_mp(1);
	mp2_ns = measure_mp(2);
	drain = measure_drain(15);

	printf("single-producer push  %.2f ns   (ring of %u, median of %u batches of %u in %u "
	       "rounds)\n",
	       ring_ns, CAPACITY, repetitions, BATCH, ROUNDS);
	printf("floor (out of line)   %.2f ns   inlined: %.2f ns\n", floor_ns, floor_inline_ns);
	printf("ck_ring spsc enqueue  %.2f ns\n", ck_ns);
	printf("multi-producer push   %.2f ns (1 thread)   %.2f ns per push per thread "
	       "(2 threads, one ring)\n",
	       mp1_ns, mp2_ns);
	printf("drain, other process  %.1f M records/s (full ring of %u, median of 15)\n",
	       drain / 1e6, DRAIN_CAPACITY);
	printf("mp2_push_ns=%.2f floor_inline_ns=%.2f\n", mp2_ns, floor_inline_ns);
	printf("ring_push_ns=%.2f floor_ns=%.2f ck_ring_ns=%.2f ratio_floor=%.2f ratio_ck=%.2f "
	       "mp_push_ns=%.2f drain_mrec_s=%.1f\n",
	       ring_ns, floor_ns, ck_ns, ring_ns / floor_ns, ring_ns / ck_ns, mp1_ns,
	       drain / 1e6);
	return 0;
}
