/*
 * A ring producer for haecer-mon's tests, driven line by line on stdin so a test decides exactly
 * what is pushed and when:
 *
 *   helper_producer SOCKET MAJOR MINOR CAPACITY
 *
 * Creates ring (MAJOR, MINOR) through the client API (haecer_ring_create) with three counters:
 * id 0 "RAPL_PKG" (energy, 2^-14 J), id 1 "INSTRUCTIONS" (fixed PMC, cpu 0), id 2 "DRAM"
 * (energy, 2^-16 J), clock CLOCK_MONOTONIC_RAW; prints "instance N pid P", then obeys:
 *
 *   push ID VALUE TIMESTAMP                    one record (the counter's unit exponent)
 *   pushx ID VALUE TIMESTAMP EXPONENT          one record with a unit exponent of its own
 *   burst N ID FIRST STEP T0 DT                N records: FIRST + i*STEP at T0 + i*DT
 *   sync                                       answer "ok" (everything before is pushed)
 *   exit                                       disconnect and exit 0 (also at end of input)
 *   die                                        SIGKILL itself (a producer that crashes)
 *
 * Exit status: 0, or 1 with a message when a command or the ring fails.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "shm/ring.h"

static const struct haecer_ring_counter counters[] = {
	{ .name = "RAPL_PKG", .id = 0, .kind = RING_COUNTER_ENERGY, .unit_exponent = 14,
	  .package = 0, .cpu = -1 },
	{ .name = "INSTRUCTIONS", .id = 1, .kind = RING_COUNTER_FIXED, .unit_exponent = 0,
	  .package = -1, .cpu = 0 },
	{ .name = "DRAM", .id = 2, .kind = RING_COUNTER_ENERGY, .unit_exponent = 16,
	  .package = 0, .cpu = -1 },
};

#define COUNTER_COUNT (sizeof(counters) / sizeof(counters[0]))

static int push_with(struct ring_producer *producer, uint32_t id, uint64_t value,
		     uint64_t timestamp, int16_t exponent)
{
	struct ring_record record = { .value = value, .timestamp = timestamp, .counter_id = id,
				      .unit_exponent = exponent };

	return ring_push(producer, &record);
}

static int push(struct ring_producer *producer, uint32_t id, uint64_t value, uint64_t timestamp)
{
	return push_with(producer, id, value, timestamp,
			 id < COUNTER_COUNT ? (int16_t)counters[id].unit_exponent : 0);
}

/* One command line; 1 to stop (exit), -1 on a bad command. */
static int obey(struct ring_producer *producer, const char *line)
{
	uint64_t count, first, step, t0, dt, value, timestamp;
	int16_t exponent;
	uint32_t id;

	if (sscanf(line, "pushx %" SCNu32 " %" SCNu64 " %" SCNu64 " %" SCNd16, &id, &value,
		   &timestamp, &exponent) == 4)
		return push_with(producer, id, value, timestamp, exponent) < 0 ? -1 : 0;
	if (sscanf(line, "push %" SCNu32 " %" SCNu64 " %" SCNu64, &id, &value, &timestamp) == 3)
		return push(producer, id, value, timestamp) < 0 ? -1 : 0;
	if (sscanf(line, "burst %" SCNu64 " %" SCNu32 " %" SCNu64 " %" SCNu64 " %" SCNu64
		   " %" SCNu64, &count, &id, &first, &step, &t0, &dt) == 6) {
		for (uint64_t i = 0; i < count; i++)
			if (push(producer, id, first + i * step, t0 + i * dt) < 0)
				return -1;
		return 0;
	}
	if (strcmp(line, "sync\n") == 0) {
		printf("ok\n");
		fflush(stdout);
		return 0;
	}
	if (strcmp(line, "exit\n") == 0)
		return 1;
	if (strcmp(line, "die\n") == 0)
		raise(SIGKILL);
	return -1;
}

int main(int argc, char **argv)
{
	struct haecer_ring_spec spec = { .clock = RING_CLOCK_MONOTONIC_RAW,
					 .counter_count = COUNTER_COUNT };
	struct haecer_ring_entry entry;
	struct ring_producer producer;
	struct haecer_conn *conn = NULL;
	char line[256];
	int fd = -1;
	int status;

	if (argc != 5) {
		fprintf(stderr, "usage: helper_producer SOCKET MAJOR MINOR CAPACITY\n");
		return 1;
	}
	spec.major = (uint16_t)strtoul(argv[2], NULL, 0);
	spec.minor = (uint16_t)strtoul(argv[3], NULL, 0);
	spec.capacity = (uint32_t)strtoul(argv[4], NULL, 0);
	memcpy(spec.counters, counters, sizeof(counters));
	status = haecer_connect(argv[1], &conn);
	if (status == 0)
		status = haecer_ring_create(conn, &spec, &entry, &fd);
	if (status == 0)
		status = ring_producer_attach(&producer, fd);
	if (status < 0) {
		fprintf(stderr, "helper_producer: %s\n", conn != NULL ? haecer_conn_error(conn)
								   : "cannot connect");
		haecer_close(conn);
		return 1;
	}
	close(fd);
	printf("instance %u pid %d\n", entry.instance, (int)getpid());
	fflush(stdout);
	status = 0;
	while (status == 0 && fgets(line, sizeof(line), stdin) != NULL)
		status = obey(&producer, line);
	if (status < 0)
		fprintf(stderr, "helper_producer: failed at: %s", line);
	ring_producer_detach(&producer);
	haecer_close(conn);
	return status < 0 ? 1 : 0;
}
