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
#include "bench/lib/bench_stats.h"
#include "bench/lib/latency_histogram.h"
#include "bench/lib/random.h"
#include "harness/msrd_harness.h"
#include "harness/process_figures.h"
#include "harness/policy_text.h"
#include "bench/parts/soak/soak.h"

static const char policy[] = POLICY_HEADER POLICY_TSC_MSR POLICY_RAPL_MSRS
	"rules:\n"
	"  - {match: {any: true}, allow: [time, rapl], create_rings: [1], monitor_rings: [1]}\n";

const struct haecer_msr_op batch_ops[BATCH_OPS] = {
	{ .kind = HAECER_MSR_READ, .cpu = 0, .address = TSC },
	{ .kind = HAECER_MSR_READ, .cpu = 3, .address = TSC },
	{ .kind = HAECER_MSR_ENERGY_READ, .cpu = 0, .address = PKG_ENERGY },
	{ .kind = HAECER_MSR_READ, .cpu = 1, .address = PP0_ENERGY },
};

struct msrd_server server;
atomic_bool stopping;

/* ---- counters every thread adds to; the reporter reads them ---- */


struct totals totals;

static struct latency_histogram window_histogram;

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
void soak_error(const char *what, int code, const char *detail)
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

void conn_error(const char *what, int code, const struct haecer_conn *conn)
{
	soak_error(what, code, conn != NULL ? haecer_conn_error(conn) : NULL);
}

/* A failure after which the connection is no use. */
bool connection_broken(int code)
{
	return code == -EPIPE || code == -ECONNRESET || code == -EPROTO || code == -EBADMSG;
}

/* ---- sleeping so that stopping is never held up for long ---- */

void sleep_ns(uint64_t ns)
{
	struct timespec pause = { .tv_sec = (time_t)(ns / NS_PER_S),
				  .tv_nsec = (long)(ns % NS_PER_S) };

	nanosleep(&pause, NULL);
}

/* Sleep ns, waking at least every 50 ms to see whether the soak is stopping. */
void sleep_unless_stopping(uint64_t ns)
{
	const uint64_t slice = 50 * NS_PER_MS;

	while (ns > 0 && !atomic_load_explicit(&stopping, memory_order_relaxed)) {
		uint64_t now = ns < slice ? ns : slice;
		sleep_ns(now);
		ns -= now;
	}
}

void sleep_until(uint64_t deadline_ns)
{
	struct timespec at = { .tv_sec = (time_t)(deadline_ns / NS_PER_S),
			       .tv_nsec = (long)(deadline_ns % NS_PER_S) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
		;
}

/* ---- what client and monitor threads share ---- */


/* Steps until the soak stops, connecting whenever the connection is closed (waiting 100 ms
 * after a failed attempt); closes it at the end. */
void worker_run(const struct worker_kind *kind, void *worker, struct haecer_conn **conn)
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
	client->requests_left = 1 + random_below(&client->rng, 2 * RECONNECT_ONE_IN);
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

	return haecer_msr_read(client->conn, random_below(&client->rng, CPUS),
			       random_below(&client->rng, 2) ? TSC : PKG_ENERGY, &value);
}

static int request_energy(struct client *client)
{
	uint64_t raw, total;

	return haecer_energy_read(client->conn, random_below(&client->rng, CPUS),
				  random_below(&client->rng, 2) ? PKG_ENERGY : PP0_ENERGY, &raw, &total);
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
	unsigned roll = random_below(&client->rng, 100);
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

	latency_histogram_add(&window_histogram, bench_now_ns() - start);
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
	sleep_unless_stopping(random_exponential_ns(&client->rng, client->mean_ns));
}

static void *client_main(void *argument)
{
	static const struct worker_kind kind = { .connect = client_connect, .step = client_step };
	struct client *client = argument;

	worker_run(&kind, client, &client->conn);
	return NULL;
}

/* ---- msrd's resources, from /proc ---- */

struct server_figures {
	long rss_kib;
	long anon_kib;
	long fds;
};

static struct server_figures server_figures(void)
{
	return (struct server_figures){ .rss_kib = harness_process_status_kib(server.pid, "VmRSS:"),
					.anon_kib = harness_process_status_kib(server.pid, "RssAnon:"),
					.fds = harness_process_fd_count(server.pid) };
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
	uint64_t histogram[LATENCY_HISTOGRAM_BUCKETS];
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
	client->mean_ns = (double)random_between_ns(&client->rng, NS_PER_MS, 100 * NS_PER_MS);
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
	uint64_t counts[LATENCY_HISTOGRAM_BUCKETS];
	uint64_t samples = latency_histogram_take(&window_histogram, counts,
						  window > 0 ? run->histogram : NULL);
	struct server_figures figures = server_figures();
	uint64_t ops = since(&totals.ops, &run->last.ops);

	if (window > 0)
		run->samples += samples;
	printf("%7.1f %9llu %8.0f %8.1f %8.1f %9ld %9ld %5ld %10llu %8llu %8llu %6llu\n", elapsed_s,
	       (unsigned long long)ops, (double)ops / window_s,
	       latency_histogram_percentile_us(counts, samples, 50),
	       latency_histogram_percentile_us(counts, samples, 99),
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
	run->fds_idle_after = harness_process_fd_count(server.pid);
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
	       latency_histogram_percentile_us(run->histogram, run->samples, 50),
	       latency_histogram_percentile_us(run->histogram, run->samples, 99), run->start.rss_kib,
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
	run.fds_idle_before = harness_process_fd_count(server.pid);
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
