/*
 * bench/soak — msrd under a long, mixed, randomly timed load: does anything grow or break?
 *
 * 200 clients read registers at random rates (exponential inter-arrival, each client's mean
 * drawn between 1 and 100 ms; a mix of READ, energy READ, BATCH, registered batch by handle and,
 * 1 in 100, a read the policy refuses), now and then reconnecting. Four rings carry records:
 * two that msrd fills itself from 1 ms schedules, two that producer threads fill through
 * haecer_ring_create at 4 records per ms. 50 monitors connect, open a random ring, attach,
 * consume for a random time, detach, and after one to three such cycles reconnect; they check
 * that records arrive in order and untorn, and count records received and lost.
 *
 * Every window (a tenth of the run, at most 10 s) prints p50/p99 of the round trips in it, the
 * requests, msrd's VmRSS, RssAnon and open descriptors, and the ring records received and lost.
 * The start figures are taken after the first window, with every client and monitor connected
 * and warm, and compared with the end figures taken in the same state: growth means a leak.
 * Once everything has disconnected and msrd's rings have passed their grace period, its
 * descriptors are counted again and compared with the count before anyone connected.
 *
 * Judge growth on a build without sanitizers: under ASan msrd's RSS climbs for the whole run as
 * its allocator maps fresh memory, though the bytes it holds stay the same.
 *
 * Not a test (not run by make check). Duration: argv[1] or HAECER_SOAK_SECONDS (default 60);
 * HAECER_SOAK_CLIENTS and HAECER_SOAK_MONITORS change the 200 and 50. Any failure other than
 * the expected policy refusal is counted in errors= and printed once per kind; the program
 * exits 1 when there was one (or msrd did not stop cleanly), else 0 whatever the verdict.
 *
 * Last line: soak_seconds=… clients=… monitors=… ops=… p50_us=… p99_us=… rss_start_kib=…
 * rss_end_kib=… fds_start=… fds_end=… fds_idle_before=… fds_idle_after=… ring_records=…
 * ring_lost=… ring_lost_backlog=… producer_dropped=… errors=…
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "shm/ring.h"
#include "tests/lib/bench_stats.h"
#include "tests/lib/msrd_harness.h"
#include "tests/lib/policy_text.h"

#define DEFAULT_SECONDS 60.0
#define DEFAULT_CLIENTS 200u
#define DEFAULT_MONITORS 50u
#define NS_PER_S 1000000000ull
#define NS_PER_MS 1000000ull
#define WINDOW_MAX_NS (10 * NS_PER_S)

#define TSC 0x10u
#define PKG_ENERGY 0x611u
#define PP0_ENERGY 0x639u
#define REFUSED_ADDRESS 0x1a0u /* IA32_MISC_ENABLE: not in the policy */
#define CPUS 4u                /* the simulated Sandy Bridge */
#define BATCH_OPS 4u
#define RECONNECT_ONE_IN 1000u /* a client reconnects after about this many requests */

#define RING_MAJOR 1u
#define SCHEDULED_RINGS 2u /* minors 1, 2: msrd produces */
#define PRODUCED_RINGS 2u  /* minors 3, 4: producer threads */
#define RINGS (SCHEDULED_RINGS + PRODUCED_RINGS)
#define SCHEDULE_CAPACITY 8192u
#define PRODUCED_CAPACITY 4096u
#define PRODUCED_PER_MS 4u
#define RING_GRACE_MS 500u
/* Clients and monitors reconnect all the time, so under load msrd's descriptor count moves by a
 * few either way from one moment to the next; a leak of one per connection would exceed this
 * within seconds, and the idle comparison at the end is exact. */
#define LOADED_FDS_SLACK 5
#define MONITOR_BATCH 512u

static const char policy[] = POLICY_HEADER POLICY_TSC_MSR POLICY_RAPL_MSRS
	"rules:\n"
	"  - {match: {any: true}, allow: [time, rapl], create_rings: [1], monitor_rings: [1]}\n";

static const struct haecer_msr_op batch_ops[BATCH_OPS] = {
	{ .kind = HAECER_MSR_READ, .cpu = 0, .address = TSC },
	{ .kind = HAECER_MSR_READ, .cpu = 3, .address = TSC },
	{ .kind = HAECER_MSR_ENERGY_READ, .cpu = 0, .address = PKG_ENERGY },
	{ .kind = HAECER_MSR_READ, .cpu = 1, .address = PP0_ENERGY },
};

static struct msrd_server server;
static atomic_bool stopping;

/* ---- counters every thread adds to; the reporter reads them ---- */

struct totals {
	atomic_ullong ops;
	atomic_ullong refused; /* the expected policy refusals */
	atomic_ullong reconnects;
	atomic_ullong ring_records;
	atomic_ullong ring_lost;
	atomic_ullong ring_lost_catching_up; /* of ring_lost: while reading a full ring's backlog */
	atomic_ullong attaches;
	atomic_ullong producer_dropped;
	atomic_ullong errors;
};

static struct totals totals;

/* ---- latency histogram: 16 buckets per power of two (under 6.25 % error), lock-free ---- */

#define HIST_SUB_BITS 4u
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS ((64u - HIST_SUB_BITS + 1u) * HIST_SUB)

static atomic_ullong window_histogram[HIST_BUCKETS];

static unsigned hist_bucket(uint64_t ns)
{
	unsigned msb;

	if (ns < 2 * HIST_SUB)
		return (unsigned)ns;
	msb = 63u - (unsigned)__builtin_clzll(ns);
	return ((msb - HIST_SUB_BITS + 1u) << HIST_SUB_BITS) |
	       (unsigned)((ns >> (msb - HIST_SUB_BITS)) & (HIST_SUB - 1u));
}

/* The middle of a bucket's range of nanoseconds. */
static double hist_bucket_ns(unsigned bucket)
{
	unsigned group = bucket >> HIST_SUB_BITS;
	double low, width;

	if (bucket < 2 * HIST_SUB)
		return bucket;
	low = ldexp(HIST_SUB + (bucket & (HIST_SUB - 1u)), (int)group - 1);
	width = ldexp(1.0, (int)group - 1);
	return low + width / 2;
}

static void hist_add(uint64_t ns)
{
	atomic_fetch_add_explicit(&window_histogram[hist_bucket(ns)], 1, memory_order_relaxed);
}

/* Move the window's counts into `window` (and add them to `run` when not NULL). */
static uint64_t hist_take(uint64_t *window, uint64_t *run)
{
	uint64_t count = 0;

	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		window[i] = atomic_exchange_explicit(&window_histogram[i], 0, memory_order_relaxed);
		count += window[i];
		if (run != NULL)
			run[i] += window[i];
	}
	return count;
}

/* The percentile in microseconds, 0 for an empty histogram. */
static double hist_percentile_us(const uint64_t *counts, uint64_t total, unsigned percent)
{
	uint64_t rank = (total * percent + 99) / 100, seen = 0;

	if (total == 0)
		return 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += counts[i];
		if (seen >= rank && counts[i] > 0)
			return hist_bucket_ns(i) / 1000.0;
	}
	return 0;
}

/* ---- randomness: splitmix64, one state per thread ---- */

static uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *state)
{
	return (double)(rng_next(state) >> 11) * 0x1.0p-53;
}

static unsigned rng_below(uint64_t *state, unsigned bound)
{
	return (unsigned)(rng_next(state) % bound);
}

static uint64_t rng_between_ns(uint64_t *state, uint64_t low, uint64_t high)
{
	return low + (uint64_t)(rng_unit(state) * (double)(high - low));
}

static uint64_t rng_exponential_ns(uint64_t *state, double mean_ns)
{
	return (uint64_t)(-mean_ns * log1p(-rng_unit(state)));
}

/* ---- unexpected errors: counted always, printed once per kind ---- */

#define ERROR_KINDS 64u

struct error_kind {
	const char *what;
	int code;
};

static struct error_kind error_kinds[ERROR_KINDS];
static unsigned error_kind_count;
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;

static bool error_kind_is_new(const char *what, int code)
{
	bool fresh = error_kind_count < ERROR_KINDS;

	for (unsigned i = 0; i < error_kind_count && fresh; i++)
		fresh = strcmp(error_kinds[i].what, what) != 0 || error_kinds[i].code != code;
	if (fresh)
		error_kinds[error_kind_count++] = (struct error_kind){ .what = what, .code = code };
	return fresh;
}

/* code: a negative errno value from the API, or 0 for a finding of the soak's own checks. */
static void soak_error(const char *what, int code, const char *detail)
{
	const char *text = code != 0 ? haecer_msrd_strerror(code) : "check failed";
	bool fresh;

	atomic_fetch_add(&totals.errors, 1);
	pthread_mutex_lock(&error_lock);
	fresh = error_kind_is_new(what, code);
	pthread_mutex_unlock(&error_lock);
	/* The server's detail, when it says more than the status text. */
	if (detail == NULL || strcmp(detail, text) == 0)
		detail = "";
	if (fresh)
		fprintf(stderr, "soak: unexpected: %s: %s%s%s%s%s\n", what,
			code != 0 ? strerrorname_np(-code) : "", code != 0 ? " " : "", text,
			detail[0] != '\0' ? ": " : "", detail);
}

static void conn_error(const char *what, int code, const struct haecer_conn *conn)
{
	soak_error(what, code, conn != NULL ? haecer_conn_error(conn) : NULL);
}

/* A failure after which the connection is no use. */
static bool connection_broken(int code)
{
	return code == -EPIPE || code == -ECONNRESET || code == -EPROTO || code == -EBADMSG;
}

/* ---- sleeping so that stopping is never held up for long ---- */

static void sleep_ns(uint64_t ns)
{
	struct timespec pause = { .tv_sec = (time_t)(ns / NS_PER_S),
				  .tv_nsec = (long)(ns % NS_PER_S) };

	nanosleep(&pause, NULL);
}

/* Sleep ns, waking at least every 50 ms to see whether the soak is stopping. */
static void sleep_unless_stopping(uint64_t ns)
{
	const uint64_t slice = 50 * NS_PER_MS;

	while (ns > 0 && !atomic_load_explicit(&stopping, memory_order_relaxed)) {
		uint64_t now = ns < slice ? ns : slice;
		sleep_ns(now);
		ns -= now;
	}
}

static void sleep_until(uint64_t deadline_ns)
{
	struct timespec at = { .tv_sec = (time_t)(deadline_ns / NS_PER_S),
			       .tv_nsec = (long)(deadline_ns % NS_PER_S) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
		;
}

/* ---- what client and monitor threads share ---- */

struct worker_kind {
	int (*connect)(void *worker); /* 0 or -errno */
	void (*step)(void *worker);   /* may close the connection (and set it to NULL) */
};

/* Steps until the soak stops, connecting whenever the connection is closed (waiting 100 ms
 * after a failed attempt); closes it at the end. */
static void worker_run(const struct worker_kind *kind, void *worker, struct haecer_conn **conn)
{
	while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
		if (*conn == NULL && kind->connect(worker) < 0) {
			sleep_unless_stopping(100 * NS_PER_MS);
			continue;
		}
		kind->step(worker);
	}
	haecer_close(*conn);
	*conn = NULL;
}

/* ---- clients: requests at random rates ---- */

struct client {
	uint64_t rng;
	double mean_ns;
	struct haecer_conn *conn;
	uint32_t handle;
	uint64_t requests_left; /* before the next reconnect */
};

static int client_connect(void *argument)
{
	struct client *client = argument;
	int status = haecer_connect(server.socket_path, &client->conn);

	if (status < 0) {
		conn_error("connect", status, NULL);
		return status;
	}
	status = haecer_batch_register(client->conn, batch_ops, BATCH_OPS, &client->handle);
	if (status < 0) {
		conn_error("register a batch", status, client->conn);
		haecer_close(client->conn);
		client->conn = NULL;
		return status;
	}
	client->requests_left = 1 + rng_below(&client->rng, 2 * RECONNECT_ONE_IN);
	return 0;
}

static int batch_status(const struct haecer_msr_op *ops, int status)
{
	for (unsigned i = 0; i < BATCH_OPS && status == 0; i++)
		status = ops[i].status;
	return status;
}

static int request_read(struct client *client)
{
	uint64_t value;

	return haecer_msr_read(client->conn, rng_below(&client->rng, CPUS),
			       rng_below(&client->rng, 2) ? TSC : PKG_ENERGY, &value);
}

static int request_energy(struct client *client)
{
	uint64_t raw, total;

	return haecer_energy_read(client->conn, rng_below(&client->rng, CPUS),
				  rng_below(&client->rng, 2) ? PKG_ENERGY : PP0_ENERGY, &raw, &total);
}

static int request_batch(struct client *client)
{
	struct haecer_msr_op ops[BATCH_OPS];

	memcpy(ops, batch_ops, sizeof(ops));
	return batch_status(ops, haecer_msr_batch(client->conn, ops, BATCH_OPS));
}

static int request_handle(struct client *client)
{
	struct haecer_msr_op ops[BATCH_OPS];

	memset(ops, 0, sizeof(ops));
	return batch_status(ops, haecer_batch_run(client->conn, client->handle, ops, BATCH_OPS));
}

static int request_refused(struct client *client)
{
	uint64_t value;

	return haecer_msr_read(client->conn, 0, REFUSED_ADDRESS, &value);
}

struct request_kind {
	const char *name;
	unsigned percent;
	int expected; /* what msrd must answer */
	int (*run)(struct client *client);
};

static const struct request_kind request_kinds[] = {
	{ "read", 50, 0, request_read },
	{ "energy read", 20, 0, request_energy },
	{ "batch", 15, 0, request_batch },
	{ "batch by handle", 14, 0, request_handle },
	{ "read outside the policy", 1, -EPERM, request_refused },
};

static const struct request_kind *pick_request(struct client *client)
{
	unsigned roll = rng_below(&client->rng, 100);
	size_t i = 0;

	while (roll >= request_kinds[i].percent) {
		roll -= request_kinds[i].percent;
		i++;
	}
	return &request_kinds[i];
}

static void client_request(struct client *client)
{
	const struct request_kind *kind = pick_request(client);
	uint64_t start = bench_now_ns();
	int status = kind->run(client);

	hist_add(bench_now_ns() - start);
	atomic_fetch_add_explicit(&totals.ops, 1, memory_order_relaxed);
	if (status == kind->expected && status != 0)
		atomic_fetch_add_explicit(&totals.refused, 1, memory_order_relaxed);
	if (status != kind->expected)
		conn_error(kind->name, status, client->conn);
	if (connection_broken(status) || --client->requests_left == 0) {
		haecer_close(client->conn);
		client->conn = NULL;
		atomic_fetch_add_explicit(&totals.reconnects, 1, memory_order_relaxed);
	}
}

static void client_step(void *argument)
{
	struct client *client = argument;

	client_request(client);
	sleep_unless_stopping(rng_exponential_ns(&client->rng, client->mean_ns));
}

static void *client_main(void *argument)
{
	static const struct worker_kind kind = { .connect = client_connect, .step = client_step };
	struct client *client = argument;

	worker_run(&kind, client, &client->conn);
	return NULL;
}

/* ---- rings msrd produces: 1 ms schedules of the batch ---- */

static struct haecer_conn *scheduler;
static uint32_t schedule_ids[SCHEDULED_RINGS];

static int schedules_start(void)
{
	struct haecer_schedule_spec spec = { .period_ns = NS_PER_MS, .major = RING_MAJOR,
					     .capacity = SCHEDULE_CAPACITY };
	uint32_t instance;
	int status = haecer_connect(server.socket_path, &scheduler);

	if (status >= 0)
		status = haecer_batch_register(scheduler, batch_ops, BATCH_OPS, &spec.handle);
	for (unsigned i = 0; i < SCHEDULED_RINGS && status >= 0; i++) {
		spec.minor = (uint16_t)(1 + i);
		status = haecer_schedule_start(scheduler, &spec, &schedule_ids[i], &instance);
	}
	if (status < 0)
		conn_error("start a schedule", status, scheduler);
	return status;
}

static void schedules_stop(void)
{
	for (unsigned i = 0; i < SCHEDULED_RINGS; i++) {
		int status = haecer_schedule_stop(scheduler, schedule_ids[i]);
		if (status < 0)
			conn_error("stop a schedule", status, scheduler);
	}
	haecer_close(scheduler);
	scheduler = NULL;
}

/* ---- rings producer threads fill: value = position, flags = a check of the value ---- */

struct producer {
	uint16_t minor;
	struct haecer_conn *conn;
	struct ring_producer ring;
	uint64_t sequence;
};

static uint16_t sequence_check(uint64_t value)
{
	return (uint16_t)((value * 0x9e37u) >> 3);
}

static int producer_create(struct producer *producer)
{
	struct haecer_ring_spec spec = {
		.major = RING_MAJOR, .minor = producer->minor, .capacity = PRODUCED_CAPACITY,
		.flags = RING_SINGLE_PRODUCER, .clock = RING_CLOCK_MONOTONIC_RAW, .counter_count = 1,
		.counters = { { .name = "SOAK_SEQUENCE", .kind = RING_COUNTER_SOFTWARE,
				.package = -1, .cpu = -1 } },
	};
	int fd = -1;
	int status = haecer_connect(server.socket_path, &producer->conn);

	if (status >= 0)
		status = haecer_ring_create(producer->conn, &spec, NULL, &fd);
	if (status >= 0)
		status = ring_producer_attach(&producer->ring, fd);
	if (fd >= 0)
		close(fd);
	if (status < 0)
		conn_error("create a ring", status, producer->conn);
	return status;
}

static void producer_push(struct producer *producer)
{
	struct timespec now;
	struct ring_record record = { .counter_id = 0 };

	clock_gettime(CLOCK_MONOTONIC_RAW, &now);
	record.timestamp = (uint64_t)now.tv_sec * NS_PER_S + (uint64_t)now.tv_nsec;
	record.value = producer->sequence++;
	record.flags = sequence_check(record.value);
	if (ring_push(&producer->ring, &record) < 0)
		atomic_fetch_add_explicit(&totals.producer_dropped, 1, memory_order_relaxed);
}

static void *producer_main(void *argument)
{
	struct producer *producer = argument;
	uint64_t deadline = bench_now_ns();

	while (!atomic_load_explicit(&stopping, memory_order_relaxed)) {
		uint64_t now;
		for (unsigned i = 0; i < PRODUCED_PER_MS; i++)
			producer_push(producer);
		deadline += NS_PER_MS;
		now = bench_now_ns();
		/* Behind (a busy machine): carry on from now rather than catch up in a burst. */
		if (deadline < now)
			deadline = now;
		sleep_until(deadline);
	}
	return NULL;
}

static void producer_close(struct producer *producer)
{
	ring_producer_detach(&producer->ring);
	haecer_close(producer->conn);
	producer->conn = NULL;
}

/* ---- monitors: attach, consume for a while, detach, reconnect ---- */

struct monitor {
	uint64_t rng;
	struct haecer_conn *conn;
	unsigned cycles_left; /* on this connection */
	struct ring_record records[MONITOR_BATCH];
};

/* What a monitor expects of the stream of one ring during one attachment. */
struct stream_check {
	bool produced; /* a producer thread's ring (else one msrd fills) */
	bool any;
	bool catching_up; /* attached at the oldest record and not yet through the backlog */
	uint64_t last;    /* value (produced) or timestamp (scheduled) of the last record */
	uint64_t start;   /* the consumer's first position */
	uint64_t decided; /* records received + records reported lost */
};

static bool record_in_order(struct stream_check *check, const struct ring_record *record)
{
	bool ok;

	if (check->produced) {
		ok = (!check->any || record->value > check->last) && record->counter_id == 0 &&
		     record->flags == sequence_check(record->value);
		check->last = record->value;
	} else {
		ok = (!check->any || record->timestamp >= check->last) &&
		     record->counter_id < BATCH_OPS;
		check->last = record->timestamp;
	}
	check->any = true;
	return ok;
}

/* Everything the ring has for this consumer now. */
static void monitor_drain(struct monitor *monitor, struct ring_consumer *consumer,
			  struct stream_check *check)
{
	ssize_t got;

	do {
		uint64_t lost = 0;
		got = ring_consume(consumer, monitor->records, MONITOR_BATCH, &lost);
		if (got < 0) {
			soak_error("consume", (int)got, NULL);
			return;
		}
		for (ssize_t i = 0; i < got; i++)
			if (!record_in_order(check, &monitor->records[i]))
				soak_error(check->produced ? "produced ring: record out of order or torn"
							   : "scheduled ring: record out of order",
					   0, NULL);
		check->decided += (uint64_t)got + lost;
		atomic_fetch_add_explicit(&totals.ring_records, (uint64_t)got, memory_order_relaxed);
		atomic_fetch_add_explicit(&totals.ring_lost, lost, memory_order_relaxed);
		if (check->catching_up)
			atomic_fetch_add_explicit(&totals.ring_lost_catching_up, lost,
						  memory_order_relaxed);
	} while (got == MONITOR_BATCH);
	check->catching_up = false;
}

static void monitor_consume(struct monitor *monitor, struct ring_consumer *consumer,
			    struct stream_check *check)
{
	uint64_t until = bench_now_ns() + rng_between_ns(&monitor->rng, 100 * NS_PER_MS,
							 3 * NS_PER_S);

	/* Half the monitors start with the backlog (the default after attach): on a full ring the
	 * producer overwrites its oldest records while they are read, which shows as lost. */
	if (rng_below(&monitor->rng, 2))
		ring_consumer_seek_newest(consumer);
	else
		check->catching_up = true;
	check->start = consumer->position;
	while (!atomic_load_explicit(&stopping, memory_order_relaxed) && bench_now_ns() < until) {
		monitor_drain(monitor, consumer, check);
		sleep_ns(rng_between_ns(&monitor->rng, 2 * NS_PER_MS, 20 * NS_PER_MS));
	}
	monitor_drain(monitor, consumer, check);
	/* shm/ring.h: records returned + records reported lost = positions passed, exactly. */
	if (check->decided != consumer->position - check->start)
		soak_error("ring accounting: received + lost differs from records pushed", 0, NULL);
}

static int monitor_connect(void *argument)
{
	struct monitor *monitor = argument;
	int status = haecer_connect(server.socket_path, &monitor->conn);

	if (status < 0) {
		conn_error("monitor connect", status, NULL);
		return status;
	}
	monitor->cycles_left = 1 + rng_below(&monitor->rng, 3);
	return 0;
}

static void monitor_cycle(void *argument)
{
	struct monitor *monitor = argument;
	unsigned ring = rng_below(&monitor->rng, RINGS);
	struct stream_check check = { .produced = ring >= SCHEDULED_RINGS };
	struct ring_consumer consumer;
	int fd = -1;
	int status = haecer_ring_open(monitor->conn, RING_MAJOR, (uint16_t)(1 + ring), 0, NULL, &fd);

	if (status < 0) {
		conn_error("open a ring", status, monitor->conn);
	} else {
		status = ring_consumer_attach(&consumer, fd);
		close(fd);
		if (status < 0)
			soak_error("attach to a ring", status, NULL);
	}
	if (status >= 0) {
		atomic_fetch_add_explicit(&totals.attaches, 1, memory_order_relaxed);
		monitor_consume(monitor, &consumer, &check);
		ring_consumer_detach(&consumer);
	}
	if (connection_broken(status) || --monitor->cycles_left == 0) {
		haecer_close(monitor->conn);
		monitor->conn = NULL;
	}
}

static void *monitor_main(void *argument)
{
	static const struct worker_kind kind = { .connect = monitor_connect,
						 .step = monitor_cycle };
	struct monitor *monitor = argument;

	worker_run(&kind, monitor, &monitor->conn);
	return NULL;
}

/* ---- msrd's resources, from /proc ---- */

/* A "Name:   N kB" field of /proc/PID/status; -1 when msrd is gone (or a zombie). */
static long proc_fd_count(pid_t pid)
{
	char path[64];
	struct dirent *entry;
	long count = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (dir == NULL)
		return -1;
	while ((entry = readdir(dir)) != NULL)
		if (entry->d_name[0] != '.')
			count++;
	closedir(dir);
	return count;
}

struct server_figures {
	long rss_kib;
	long anon_kib;
	long fds;
};

static struct server_figures server_figures(void)
{
	return (struct server_figures){ .rss_kib = bench_process_status_kib(server.pid, "VmRSS:"),
					.anon_kib = bench_process_status_kib(server.pid, "RssAnon:"),
					.fds = proc_fd_count(server.pid) };
}

/* ---- the run ---- */

struct config {
	double seconds;
	unsigned clients;
	unsigned monitors;
	uint64_t window_ns;
};

struct workers {
	struct client *clients;
	struct monitor *monitors;
	struct producer producers[PRODUCED_RINGS];
	pthread_t *threads;
	size_t thread_count;
};

/* The totals at the end of the previous window. */
struct marks {
	uint64_t ops;
	uint64_t ring_records;
	uint64_t ring_lost;
	uint64_t attaches;
	uint64_t errors;
};

/* Figures the windows gather. */
struct run {
	struct marks last;
	uint64_t histogram[HIST_BUCKETS];
	uint64_t samples;
	struct server_figures start, end;
	long fds_idle_before, fds_idle_after;
	bool msrd_died;
};

static unsigned env_count(const char *name, unsigned fallback)
{
	const char *text = getenv(name);
	char *end = NULL;
	long value = text != NULL ? strtol(text, &end, 10) : -1;

	/* 0 is allowed: a soak of clients only, or of monitors only, tells which side grows. */
	return end != text && end != NULL && *end == '\0' && value >= 0 && value <= 100000
		       ? (unsigned)value
		       : fallback;
}

static struct config config_from(int argc, char **argv)
{
	const char *text = argc > 1 ? argv[1] : getenv("HAECER_SOAK_SECONDS");
	struct config config = { .seconds = text != NULL ? atof(text) : DEFAULT_SECONDS };

	if (!(config.seconds >= 1))
		config.seconds = DEFAULT_SECONDS;
	config.clients = env_count("HAECER_SOAK_CLIENTS", DEFAULT_CLIENTS);
	config.monitors = env_count("HAECER_SOAK_MONITORS", DEFAULT_MONITORS);
	config.window_ns = (uint64_t)(config.seconds * 1e9 / 10);
	if (config.window_ns > WINDOW_MAX_NS)
		config.window_ns = WINDOW_MAX_NS;
	return config;
}

static int spawn(struct workers *workers, void *(*main_function)(void *), void *argument)
{
	pthread_attr_t attributes;
	int status;

	pthread_attr_init(&attributes);
	pthread_attr_setstacksize(&attributes, 128 * 1024);
	status = pthread_create(&workers->threads[workers->thread_count], &attributes,
				main_function, argument);
	pthread_attr_destroy(&attributes);
	if (status != 0)
		return -status;
	workers->thread_count++;
	return 0;
}

static void client_init(struct client *client, unsigned index)
{
	client->rng = 0x50a4c11e47ull + index;
	/* Each client's mean inter-arrival time, uniform in [1 ms, 100 ms]. */
	client->mean_ns = (double)rng_between_ns(&client->rng, NS_PER_MS, 100 * NS_PER_MS);
}

static int rings_start(struct workers *workers)
{
	int status = schedules_start();

	for (unsigned i = 0; i < PRODUCED_RINGS && status >= 0; i++) {
		workers->producers[i].minor = (uint16_t)(1 + SCHEDULED_RINGS + i);
		status = producer_create(&workers->producers[i]);
		if (status >= 0)
			status = spawn(workers, producer_main, &workers->producers[i]);
	}
	return status;
}

static int workers_start(struct workers *workers, const struct config *config)
{
	int status;

	workers->clients = calloc(config->clients, sizeof(*workers->clients));
	workers->monitors = calloc(config->monitors, sizeof(*workers->monitors));
	workers->threads = calloc(config->clients + config->monitors + PRODUCED_RINGS,
				  sizeof(*workers->threads));
	if (workers->clients == NULL || workers->monitors == NULL || workers->threads == NULL)
		return -ENOMEM;
	status = rings_start(workers);
	for (unsigned i = 0; i < config->clients && status >= 0; i++) {
		client_init(&workers->clients[i], i);
		status = spawn(workers, client_main, &workers->clients[i]);
	}
	for (unsigned i = 0; i < config->monitors && status >= 0; i++) {
		workers->monitors[i].rng = 0x3011170ull + i;
		status = spawn(workers, monitor_main, &workers->monitors[i]);
	}
	return status;
}

static void workers_stop(struct workers *workers)
{
	atomic_store(&stopping, true);
	for (size_t i = 0; i < workers->thread_count; i++)
		pthread_join(workers->threads[i], NULL);
	for (unsigned i = 0; i < PRODUCED_RINGS; i++)
		producer_close(&workers->producers[i]);
	if (scheduler != NULL)
		schedules_stop();
	free(workers->clients);
	free(workers->monitors);
	free(workers->threads);
}

static uint64_t since(atomic_ullong *counter, uint64_t *last)
{
	uint64_t now = atomic_load(counter), delta = now - *last;

	*last = now;
	return delta;
}

static void print_window_header(void)
{
	printf("%7s %9s %8s %8s %8s %9s %9s %5s %10s %8s %8s %6s\n", "t_s", "ops", "ops/s",
	       "p50_us", "p99_us", "rss_kib", "anon_kib", "fds", "ring_recs", "lost", "attaches",
	       "errors");
}

/* One line for the window that just ended; its latencies join the run's after the first. */
static int report_window(struct run *run, unsigned window, double elapsed_s, double window_s)
{
	uint64_t counts[HIST_BUCKETS];
	uint64_t samples = hist_take(counts, window > 0 ? run->histogram : NULL);
	struct server_figures figures = server_figures();
	uint64_t ops = since(&totals.ops, &run->last.ops);

	if (window > 0)
		run->samples += samples;
	printf("%7.1f %9llu %8.0f %8.1f %8.1f %9ld %9ld %5ld %10llu %8llu %8llu %6llu\n", elapsed_s,
	       (unsigned long long)ops, (double)ops / window_s,
	       hist_percentile_us(counts, samples, 50), hist_percentile_us(counts, samples, 99),
	       figures.rss_kib, figures.anon_kib, figures.fds,
	       (unsigned long long)since(&totals.ring_records, &run->last.ring_records),
	       (unsigned long long)since(&totals.ring_lost, &run->last.ring_lost),
	       (unsigned long long)since(&totals.attaches, &run->last.attaches),
	       (unsigned long long)since(&totals.errors, &run->last.errors));
	fflush(stdout);
	if (figures.rss_kib < 0)
		return -ESRCH;
	if (window == 0)
		run->start = figures;
	run->end = figures;
	return 0;
}

static int run_windows(struct run *run, const struct config *config)
{
	uint64_t began = bench_now_ns(), total = (uint64_t)(config->seconds * 1e9);
	uint64_t window_end = began;
	int status = 0;

	print_window_header();
	for (unsigned window = 0; window_end - began < total && status == 0; window++) {
		uint64_t previous = window_end;
		window_end += config->window_ns;
		if (window_end - began > total)
			window_end = began + total;
		sleep_until(window_end);
		status = report_window(run, window, (double)(window_end - began) / 1e9,
				       (double)(window_end - previous) / 1e9);
	}
	run->msrd_died = status < 0;
	if (run->msrd_died)
		fprintf(stderr, "soak: msrd is gone\n");
	return status;
}

/* Once nobody is connected and the rings' grace period is over, msrd should hold exactly the
 * descriptors it held before anyone connected. */
static void measure_idle_after(struct run *run)
{
	sleep_ns((RING_GRACE_MS + 1500) * NS_PER_MS);
	run->fds_idle_after = proc_fd_count(server.pid);
}

static double growth_percent(long start, long end)
{
	return start > 0 ? 100.0 * (double)(end - start) / (double)start : 0;
}

static void print_traffic(void)
{
	printf("requests %llu (%llu refused by policy, as meant), client reconnects %llu\n",
	       (unsigned long long)atomic_load(&totals.ops),
	       (unsigned long long)atomic_load(&totals.refused),
	       (unsigned long long)atomic_load(&totals.reconnects));
	printf("rings: %llu attachments, %llu records received, %llu lost (%llu of them while "
	       "reading a full ring's backlog), %llu dropped by producers\n",
	       (unsigned long long)atomic_load(&totals.attaches),
	       (unsigned long long)atomic_load(&totals.ring_records),
	       (unsigned long long)atomic_load(&totals.ring_lost),
	       (unsigned long long)atomic_load(&totals.ring_lost_catching_up),
	       (unsigned long long)atomic_load(&totals.producer_dropped));
}

static void print_verdict(const struct run *run)
{
	double rss_growth = growth_percent(run->start.rss_kib, run->end.rss_kib);
	bool grew = rss_growth > 10.0 || run->end.fds > run->start.fds + LOADED_FDS_SLACK ||
		    run->fds_idle_after > run->fds_idle_before;

	if (run->msrd_died) {
		printf("verdict: msrd died during the soak\n");
		return;
	}
	printf("verdict: %s (VmRSS %+.1f %%, limit +10 %%; loaded fds %+ld, limit +%d; idle fds "
	       "%+ld, limit 0)\n",
	       grew ? "GREW" : "flat", rss_growth, run->end.fds - run->start.fds, LOADED_FDS_SLACK,
	       run->fds_idle_after - run->fds_idle_before);
}

static void print_summary(const struct run *run, const struct config *config)
{
	printf("msrd, loaded (after the first window -> at the end): VmRSS %ld -> %ld KiB "
	       "(%+.1f %%), RssAnon %ld -> %ld KiB, fds %ld -> %ld\n",
	       run->start.rss_kib, run->end.rss_kib,
	       growth_percent(run->start.rss_kib, run->end.rss_kib), run->start.anon_kib,
	       run->end.anon_kib, run->start.fds, run->end.fds);
	printf("msrd, idle (before anyone connected -> after everyone left): fds %ld -> %ld\n",
	       run->fds_idle_before, run->fds_idle_after);
	print_verdict(run);
	printf("soak_seconds=%.0f clients=%u monitors=%u ops=%llu p50_us=%.1f p99_us=%.1f "
	       "rss_start_kib=%ld rss_end_kib=%ld fds_start=%ld fds_end=%ld fds_idle_before=%ld "
	       "fds_idle_after=%ld ring_records=%llu ring_lost=%llu ring_lost_backlog=%llu "
	       "producer_dropped=%llu errors=%llu\n",
	       config->seconds, config->clients, config->monitors,
	       (unsigned long long)atomic_load(&totals.ops),
	       hist_percentile_us(run->histogram, run->samples, 50),
	       hist_percentile_us(run->histogram, run->samples, 99), run->start.rss_kib,
	       run->end.rss_kib, run->start.fds, run->end.fds, run->fds_idle_before,
	       run->fds_idle_after, (unsigned long long)atomic_load(&totals.ring_records),
	       (unsigned long long)atomic_load(&totals.ring_lost),
	       (unsigned long long)atomic_load(&totals.ring_lost_catching_up),
	       (unsigned long long)atomic_load(&totals.producer_dropped),
	       (unsigned long long)atomic_load(&totals.errors));
}

static void print_plan(const struct config *config)
{
	printf("soak: %.0f s, %u clients (mean inter-arrival 1-100 ms each), %u monitors, "
	       "%u rings (%u filled by msrd schedules, %u by producer threads), windows of %.1f s\n",
	       config->seconds, config->clients, config->monitors, RINGS, SCHEDULED_RINGS,
	       PRODUCED_RINGS, (double)config->window_ns / 1e9);
	printf("request mix: 50 %% read, 20 %% energy read, 15 %% batch of %u, 14 %% batch by "
	       "handle, 1 %% refused by policy; a client reconnects every ~%u requests\n",
	       BATCH_OPS, RECONNECT_ONE_IN);
}

int main(int argc, char **argv)
{
	char grace[16];
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--log-level", "notice", "--ring-grace-ms", grace, NULL };
	struct config config = config_from(argc, argv);
	static struct workers workers;
	static struct run run;
	int status;

	snprintf(grace, sizeof(grace), "%u", RING_GRACE_MS);
	unsetenv("HAECER_VALGRIND");
	harness_raise_fd_limit(2 * (config.clients + config.monitors) + 256);
	print_plan(&config);
	if (msrd_start(&server, policy, arguments) < 0)
		return 1;
	/* Right after it says it is ready msrd may still be closing what it started with. */
	sleep_ns(300 * NS_PER_MS);
	run.fds_idle_before = proc_fd_count(server.pid);
	status = workers_start(&workers, &config);
	if (status < 0)
		fprintf(stderr, "soak: cannot start the load: %s\n", strerror(-status));
	else
		status = run_windows(&run, &config);
	workers_stop(&workers);
	measure_idle_after(&run);
	print_traffic();
	print_summary(&run, &config);
	if (msrd_stop(&server) < 0 || status < 0 || atomic_load(&totals.errors) != 0)
		return 1;
	return 0;
}
