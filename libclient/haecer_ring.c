/*
 * libclient/haecer_ring.c — <haecer/ring.h>: the public face of shm/ring for monitors and for
 * application events. A thin layer: the ring protocol stays in shm/, msrd hands out the
 * descriptors; this file only translates records and keys.
 *
 * Application events share the ring (and the record layout) with the counter's readings: their
 * counter_id has bit 31 set (HAECER__RING_EVENT_BIT), which no counter id of this library and
 * no op index of an msrd schedule ever has, so a reader tells them apart by the record alone.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "haecer/ring.h"

/* Records copied per ring_consume call while translating into the caller's array. */
#define READ_CHUNK 64u

struct haecer_ring_reader {
	struct ring_consumer consumer;
};

_Static_assert(HAECER_RING_MAX_COUNTERS == RING_MAX_COUNTERS, "public and ring counter limits");
_Static_assert(HAECER_RING_CLOCK_MONOTONIC_RAW == RING_CLOCK_MONOTONIC_RAW &&
		       HAECER_RING_CLOCK_TSC == RING_CLOCK_TSC,
	       "public and ring clocks");
_Static_assert(HAECER_RING_COUNTER_ENERGY == RING_COUNTER_ENERGY &&
		       HAECER_RING_COUNTER_FIXED == RING_COUNTER_FIXED &&
		       HAECER_RING_COUNTER_PROGRAMMABLE == RING_COUNTER_PROGRAMMABLE &&
		       HAECER_RING_COUNTER_MSR == RING_COUNTER_MSR &&
		       HAECER_RING_COUNTER_SOFTWARE == RING_COUNTER_SOFTWARE,
	       "public and ring counter kinds");
_Static_assert(HAECER_RING_EVENT_ID_MAX == HAECER__RING_EVENT_BIT - 1, "event ids below the bit");

int haecer_ring_post(struct haecer_counter *counter, uint32_t event_id, uint64_t value)
{
	struct haecer_context *ctx;
	struct ring_record record;
	int error;

	if (event_id > HAECER_RING_EVENT_ID_MAX)
		return haecer__fail(-EINVAL, "event id %u is above %u", event_id,
				    HAECER_RING_EVENT_ID_MAX);
	error = haecer__counter_lock(counter, &ctx);
	if (error < 0)
		return haecer__fail(error, "posting an event through an invalid or freed counter");
	if (!counter->info.monitored) {
		error = haecer__fail(-ENOTCONN, "%s has no ring to post into (haecer_counter_monitor "
				     "first)", counter->info.name);
		goto out;
	}
	record = (struct ring_record){
		.value = value,
		.timestamp = clock_monotonic_raw_ns(),
		.counter_id = HAECER__RING_EVENT_BIT | event_id,
	};
	error = ring_push(&counter->ring, &record);
out:
	pthread_mutex_unlock(&ctx->lock);
	return error;
}

int haecer_ring_attach(struct haecer_conn *conn, uint16_t major, uint16_t minor,
		       uint32_t instance, struct haecer_ring_reader **out)
{
	struct haecer_ring_reader *reader;
	int fd = -1, error;

	if (conn == NULL || out == NULL)
		return haecer__fail(-EINVAL, "haecer_ring_attach needs a connection and a result");
	error = haecer_ring_open(conn, major, minor, instance, NULL, &fd);
	if (error < 0)
		return haecer__fail(error, "opening ring (%u, %u): %s", major, minor,
				    haecer_conn_error(conn));
	reader = calloc(1, sizeof(*reader));
	if (reader == NULL) {
		error = haecer__fail(-ENOMEM, "out of memory for a ring reader");
		goto out;
	}
	error = ring_consumer_attach(&reader->consumer, fd);
	if (error < 0) {
		haecer__fail(error, "ring (%u, %u) from msrd is not a ring this library reads: %s",
			     major, minor, haecer_strerror(error));
		free(reader);
		goto out;
	}
	*out = reader;
out:
	close(fd);
	return error;
}

void haecer_ring_detach(struct haecer_ring_reader *reader)
{
	if (reader == NULL)
		return;
	ring_consumer_detach(&reader->consumer);
	free(reader);
}

static void translate(const struct ring_record *from, struct haecer_ring_record *to)
{
	bool event = (from->counter_id & HAECER__RING_EVENT_BIT) != 0;

	*to = (struct haecer_ring_record){
		.value = from->value,
		.timestamp = from->timestamp,
		.id = event ? from->counter_id & ~HAECER__RING_EVENT_BIT : from->counter_id,
		.unit_exponent = from->unit_exponent,
		.flags = from->flags,
		.event = event,
	};
}

/* Consume in chunks into a local array (the internal record is not the public one), stopping at
 * the first short chunk: nothing more is complete now. */
static ssize_t read_records(struct haecer_ring_reader *reader, struct haecer_ring_record *records,
			    size_t max, uint64_t *lost, bool final)
{
	struct ring_record chunk[READ_CHUNK];
	uint64_t missed = 0;
	size_t copied = 0;

	while (copied < max) {
		size_t want = max - copied < READ_CHUNK ? max - copied : READ_CHUNK;
		ssize_t got = final ? ring_consume_final(&reader->consumer, chunk, want, &missed)
				    : ring_consume(&reader->consumer, chunk, want, &missed);

		if (got < 0)
			return got;
		for (ssize_t i = 0; i < got; i++)
			translate(&chunk[i], &records[copied + (size_t)i]);
		copied += (size_t)got;
		if ((size_t)got < want)
			break;
	}
	if (lost != NULL)
		*lost += missed;
	return (ssize_t)copied;
}

ssize_t haecer_ring_read(struct haecer_ring_reader *reader, struct haecer_ring_record *records,
			 size_t max, uint64_t *lost)
{
	if (reader == NULL || (records == NULL && max > 0))
		return -EINVAL;
	return read_records(reader, records, max, lost, false);
}

ssize_t haecer_ring_read_final(struct haecer_ring_reader *reader,
			       struct haecer_ring_record *records, size_t max, uint64_t *lost)
{
	if (reader == NULL || (records == NULL && max > 0))
		return -EINVAL;
	return read_records(reader, records, max, lost, true);
}

bool haecer_ring_producer_alive(const struct haecer_ring_reader *reader)
{
	struct ring_info info;

	ring_consumer_info(&reader->consumer, &info);
	return ring_producer_alive(&info);
}

void haecer_ring_seek_newest(struct haecer_ring_reader *reader)
{
	ring_consumer_seek_newest(&reader->consumer);
}

void haecer_ring_reader_info(const struct haecer_ring_reader *reader, struct haecer_ring_info *out)
{
	struct ring_info info;

	ring_consumer_info(&reader->consumer, &info);
	memset(out, 0, sizeof(*out));
	out->major = info.major;
	out->minor = info.minor;
	out->instance = info.instance;
	out->capacity = info.capacity;
	out->clock = info.clock;
	out->tsc_hz = info.tsc_hz;
	out->producer_pid = info.producer_pid;
	out->pushed = info.pushed;
	out->lost = reader->consumer.lost_total;
	out->counter_count = info.counter_count <= HAECER_RING_MAX_COUNTERS
				     ? info.counter_count
				     : HAECER_RING_MAX_COUNTERS;
	for (uint32_t i = 0; i < out->counter_count; i++) {
		const struct ring_counter_info *from = &info.counters[i];
		struct haecer_ring_counter *to = &out->counters[i];

		snprintf(to->name, sizeof(to->name), "%s", from->name);
		to->id = from->id;
		to->kind = from->kind;
		to->unit_exponent = from->unit_exponent;
		to->package = from->package;
		to->cpu = from->cpu;
	}
}
