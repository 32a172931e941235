/*
 * ring_monitor — a FERRET-style monitor of one ring, built only against the installed
 * <haecer/ring.h> and `pkg-config haecer`:
 *
 *     cc -std=c11 -o ring_monitor ring_monitor.c $(pkg-config --cflags --libs haecer)
 *     ring_monitor MAJOR MINOR [SECONDS]
 *
 * It attaches to the ring (MAJOR, MINOR) in msrd's directory ($HAECER_SOCKET, or the default
 * socket), prints what the ring carries, then every application event as it arrives (with the
 * number of readings seen before it, so an event's place among the readings shows) and, once the
 * producer is gone (or SECONDS passed, 60 by default), what it received: readings per counter,
 * events, records lost, and the energy counters' mean power. An instrumented program makes such
 * a ring with setupFerretMonitor / haecer_counter_monitor and posts its events with
 * haecer_ring_post.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <haecer/haecer.h> /* the haecer_* API, with <haecer/ring.h> */

#define POLL_NS 10000000L /* 10 ms between reads when the ring has nothing new */
#define BATCH 256

struct counter_summary {
	uint64_t readings;
	struct haecer_ring_record first, last;
};

struct monitor {
	struct haecer_ring_info info;
	struct counter_summary counters[HAECER_RING_MAX_COUNTERS];
	uint64_t readings, events, lost, unknown;
};

static double seconds_now(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

static const char *kind_name(uint16_t kind)
{
	switch (kind) {
	case HAECER_RING_COUNTER_ENERGY:
		return "energy";
	case HAECER_RING_COUNTER_FIXED:
		return "fixed counter";
	case HAECER_RING_COUNTER_PROGRAMMABLE:
		return "programmable counter";
	case HAECER_RING_COUNTER_MSR:
		return "MSR";
	default:
		return "software";
	}
}

static void print_header(const struct haecer_ring_info *info)
{
	printf("ring %u.%u instance %u: capacity %u records, clock %s, producer pid %d\n",
	       info->major, info->minor, info->instance, info->capacity,
	       info->clock == HAECER_RING_CLOCK_TSC ? "tsc" : "monotonic_raw",
	       (int)info->producer_pid);
	for (uint32_t i = 0; i < info->counter_count; i++) {
		const struct haecer_ring_counter *counter = &info->counters[i];

		printf("counter %u %s: %s", counter->id, counter->name, kind_name(counter->kind));
		if (counter->kind == HAECER_RING_COUNTER_ENERGY)
			printf(", J = value * 2^-%d", counter->unit_exponent);
		printf(", cpu %d, package %d\n", (int)counter->cpu, (int)counter->package);
	}
	fflush(stdout);
}

static struct counter_summary *summary_of(struct monitor *monitor, uint32_t id)
{
	for (uint32_t i = 0; i < monitor->info.counter_count; i++)
		if (monitor->info.counters[i].id == id)
			return &monitor->counters[i];
	return NULL;
}

static void take(struct monitor *monitor, const struct haecer_ring_record *records, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const struct haecer_ring_record *record = &records[i];
		struct counter_summary *summary;

		if (record->event) {
			monitor->events++;
			printf("event %" PRIu32 " value %" PRIu64 " after %" PRIu64 " readings\n",
			       record->id, record->value, monitor->readings);
			continue;
		}
		summary = summary_of(monitor, record->id);
		if (summary == NULL) {
			monitor->unknown++;
			continue;
		}
		if (summary->readings++ == 0)
			summary->first = *record;
		summary->last = *record;
		monitor->readings++;
	}
	fflush(stdout);
}

/* Watts between an energy counter's first and last reading (NAN when it cannot tell). */
static double mean_watts(const struct haecer_ring_info *info,
			 const struct haecer_ring_counter *counter,
			 const struct counter_summary *summary)
{
	double seconds = (double)(summary->last.timestamp - summary->first.timestamp);

	if (summary->readings < 2 || seconds <= 0)
		return NAN;
	seconds /= info->clock == HAECER_RING_CLOCK_TSC ? (double)info->tsc_hz : 1e9;
	return ldexp((double)(summary->last.value - summary->first.value), -counter->unit_exponent) /
	       seconds;
}

static void print_summary(struct monitor *monitor)
{
	for (uint32_t i = 0; i < monitor->info.counter_count; i++) {
		const struct haecer_ring_counter *counter = &monitor->info.counters[i];
		const struct counter_summary *summary = &monitor->counters[i];

		printf("counter %u %s: %" PRIu64 " readings", counter->id, counter->name,
		       summary->readings);
		if (counter->kind == HAECER_RING_COUNTER_ENERGY)
			printf(", mean %.3f W", mean_watts(&monitor->info, counter, summary));
		printf("\n");
	}
	printf("summary: %" PRIu64 " readings, %" PRIu64 " events, %" PRIu64 " lost, %" PRIu64
	       " pushed\n",
	       monitor->readings, monitor->events, monitor->lost, monitor->info.pushed);
}

int main(int argc, char **argv)
{
	static struct haecer_ring_record records[BATCH];
	static struct monitor monitor;
	struct haecer_ring_reader *reader = NULL;
	struct haecer_conn *conn = NULL;
	const struct timespec pause = { 0, POLL_NS };
	double deadline;
	ssize_t got;
	int status;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s MAJOR MINOR [SECONDS]\n", argv[0]);
		return 2;
	}
	deadline = seconds_now() + (argc == 4 ? atof(argv[3]) : 60.0);
	status = haecer_connect(NULL, &conn);
	if (status == 0)
		status = haecer_ring_attach(conn, (uint16_t)atoi(argv[1]), (uint16_t)atoi(argv[2]), 0,
					    &reader);
	/* The reader keeps its own mapping: the connection was only needed to attach. */
	haecer_close(conn);
	if (status < 0) {
		fprintf(stderr, "ring_monitor: %s (%s)\n", haecer_strerror(status),
			haecer_error_detail());
		return 1;
	}
	haecer_ring_reader_info(reader, &monitor.info);
	print_header(&monitor.info);
	for (;;) {
		bool alive = haecer_ring_producer_alive(reader);

		got = haecer_ring_read(reader, records, BATCH, &monitor.lost);
		if (got > 0) {
			take(&monitor, records, (size_t)got);
			continue;
		}
		if (got < 0 || !alive || seconds_now() > deadline)
			break;
		nanosleep(&pause, NULL);
	}
	/* The producer is gone (or time is up): what it left half-written will not complete. */
	while ((got = haecer_ring_read_final(reader, records, BATCH, &monitor.lost)) > 0)
		take(&monitor, records, (size_t)got);
	haecer_ring_reader_info(reader, &monitor.info);
	print_summary(&monitor);
	haecer_ring_detach(reader);
	return got < 0 ? 1 : 0;
}
