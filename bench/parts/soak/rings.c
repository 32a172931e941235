/*
 * bench/parts/soak/rings.c — the soak's rings: two that msrd fills from 1 ms schedules of the batch,
 * two that producer threads fill, and the monitors that attach to them, check every record's
 * order and integrity, and count what they received and lost.
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "bench/lib/bench_stats.h"
#include "common/clock.h"
#include "bench/lib/random.h"
#include "bench/parts/soak/soak.h"
#include "haecer/msrd.h"
#include "shm/ring.h"

/* ---- rings msrd produces: 1 ms schedules of the batch ---- */

static struct haecer_conn *scheduler;
static uint32_t schedule_ids[SCHEDULED_RINGS];

int schedules_start(void)
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

void schedules_stop(void)
{
	if (scheduler == NULL)
		return;
	for (unsigned i = 0; i < SCHEDULED_RINGS; i++) {
		int status = haecer_schedule_stop(scheduler, schedule_ids[i]);
		if (status < 0)
			conn_error("stop a schedule", status, scheduler);
	}
	haecer_close(scheduler);
	scheduler = NULL;
}

/* ---- rings producer threads fill: value = position, flags = a check of the value ---- */


static uint16_t sequence_check(uint64_t value)
{
	return (uint16_t)((value * 0x9e37u) >> 3);
}

int producer_create(struct producer *producer)
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
	struct ring_record record = { .counter_id = 0 };

	record.timestamp = clock_monotonic_raw_ns();
	record.value = producer->sequence++;
	record.flags = sequence_check(record.value);
	if (ring_push(&producer->ring, &record) < 0)
		atomic_fetch_add_explicit(&totals.producer_dropped, 1, memory_order_relaxed);
}

void *producer_main(void *argument)
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

void producer_close(struct producer *producer)
{
	ring_producer_detach(&producer->ring);
	haecer_close(producer->conn);
	producer->conn = NULL;
}

/* ---- monitors: attach, consume for a while, detach, reconnect ---- */


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
	uint64_t until = bench_now_ns() + random_between_ns(&monitor->rng, 100 * NS_PER_MS,
							 3 * NS_PER_S);

	/* Half the monitors start with the backlog (the default after attach): on a full ring the
	 * producer overwrites its oldest records while they are read, which shows as lost. */
	if (random_below(&monitor->rng, 2))
		ring_consumer_seek_newest(consumer);
	else
		check->catching_up = true;
	check->start = consumer->position;
	while (!atomic_load_explicit(&stopping, memory_order_relaxed) && bench_now_ns() < until) {
		monitor_drain(monitor, consumer, check);
		sleep_ns(random_between_ns(&monitor->rng, 2 * NS_PER_MS, 20 * NS_PER_MS));
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
	monitor->cycles_left = 1 + random_below(&monitor->rng, 3);
	return 0;
}

static void monitor_cycle(void *argument)
{
	struct monitor *monitor = argument;
	unsigned ring = random_below(&monitor->rng, RINGS);
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

void *monitor_main(void *argument)
{
	static const struct worker_kind kind = { .connect = monitor_connect,
						 .step = monitor_cycle };
	struct monitor *monitor = argument;

	worker_run(&kind, monitor, &monitor->conn);
	return NULL;
}
