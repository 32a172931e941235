/*
 * tools/mon/watch.c — open a ring through msrd and read it as it fills.
 *
 * A consumer that polls without pause keeps pulling the slots' cache lines away from the
 * producer (shm/ring.c: every push writes the slot a reader is spinning on), so the loop sleeps
 * between polls that found nothing. When the producer is gone its half-written records will
 * never complete: ring_consume_final counts them as lost and the watch ends.
 */
#include "tools/mon/mon.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH_RECORDS 256u
#define DIRECTORY_CHECK_SECONDS 1.0
#define LIST_MAX 4096u

int mon_ring_open(struct haecer_conn *conn, uint16_t major, uint16_t minor, uint32_t instance,
		  struct mon_ring *ring)
{
	int fd = -1;
	int status;

	memset(ring, 0, sizeof(*ring));
	status = haecer_ring_open(conn, major, minor, instance, &ring->entry, &fd);
	if (status < 0)
		return status;
	status = ring_consumer_attach(&ring->consumer, fd);
	close(fd);
	if (status < 0)
		return status;
	ring_consumer_info(&ring->consumer, &ring->info);
	/* msrd saw the producer's pid on its socket; the header carries what msrd wrote there. */
	if (ring->info.producer_pid <= 0)
		ring->info.producer_pid = ring->entry.producer_pid;
	ring->attached = true;
	return 0;
}

void mon_ring_close(struct mon_ring *ring)
{
	if (ring->attached)
		ring_consumer_detach(&ring->consumer);
	ring->attached = false;
}

int mon_ring_open_failed(struct haecer_conn *conn, const struct mon_ring_key *key, int status)
{
	const char *detail = haecer_conn_error(conn);
	char which[48];

	if (key->instance != 0)
		snprintf(which, sizeof(which), "%u.%u.%u", key->major, key->minor, key->instance);
	else
		snprintf(which, sizeof(which), "%u.%u", key->major, key->minor);
	if (status == -ENOENT)
		return mon_fail("no ring %s", which);
	if (detail[0] != '\0')
		return mon_fail("cannot open ring %s: %s", which, detail);
	/* No word from msrd: the ring itself could not be attached. */
	return mon_fail("cannot attach ring %s: %s", which, strerror(-status));
}

/* Anyone allowed to create rings of a major may publish a newer instance of any (major, minor)
 * of it, and "the newest" then shows their readings: say so, once, when it happens. */
static void warn_if_shadowed(struct mon_ring *ring, const struct haecer_ring_entry *entry)
{
	if (ring->shadow_warned || entry->major != ring->entry.major ||
	    entry->minor != ring->entry.minor || entry->instance <= ring->entry.instance ||
	    entry->owner_uid == ring->entry.owner_uid)
		return;
	tool_warn("warning: ring %u.%u has a newer instance %u by uid %u (pid %d), "
		  "not by uid %u who created the followed instance %u",
		  entry->major, entry->minor, entry->instance, entry->owner_uid,
		  (int)entry->owner_pid, ring->entry.owner_uid, ring->entry.instance);
	ring->shadow_warned = true;
}

/* msrd's directory entry of this ring says its producer is still connected; true (no news) when
 * msrd cannot be asked. */
static bool directory_says_connected(struct haecer_conn *conn, struct mon_ring *ring)
{
	struct haecer_ring_entry *entries = calloc(LIST_MAX, sizeof(*entries));
	bool connected = true;
	int count;

	if (entries == NULL)
		return true;
	count = haecer_ring_list(conn, entries, LIST_MAX);
	if (count >= 0 && (size_t)count <= LIST_MAX) {
		connected = false;
		for (int i = 0; i < count; i++) {
			if (entries[i].instance == ring->entry.instance)
				connected = entries[i].flags & HAECER_RING_PRODUCER_CONNECTED;
			warn_if_shadowed(ring, &entries[i]);
		}
	}
	free(entries);
	return connected;
}

bool mon_ring_producer_gone(struct haecer_conn *conn, struct mon_ring *ring)
{
	if (!ring_producer_alive(&ring->info))
		return true;
	return conn != NULL && !directory_says_connected(conn, ring);
}

const char *mon_watch_end_text(enum mon_watch_end end)
{
	switch (end) {
	case MON_END_PRODUCER_GONE: return "producer gone, ring drained";
	case MON_END_COUNT: return "count reached";
	case MON_END_DURATION: return "duration reached";
	case MON_END_SIGNAL: return "interrupted";
	case MON_END_ERROR:
	default: return "failed";
	}
}

/* Hand over one batch; false when the watch must end (count reached or a handler failed). */
static bool deliver(struct mon_decoder *decoder, const struct ring_record *records, ssize_t got,
		    uint64_t lost, const struct mon_watch_options *options,
		    const struct mon_watch_handler *handler, struct mon_watch_result *result)
{
	struct mon_reading reading;

	if (lost > 0) {
		result->lost += lost;
		result->error = handler->lost != NULL
			? handler->lost(handler->context, lost, result->lost) : 0;
		if (result->error < 0)
			return false;
	}
	for (ssize_t i = 0; i < got; i++) {
		mon_decode(decoder, &records[i], &reading);
		result->records++;
		result->error = handler->reading(handler->context, &reading);
		if (result->error < 0)
			return false;
		if (options->count != 0 && result->records >= options->count) {
			result->end = MON_END_COUNT;
			return false;
		}
	}
	return true;
}

/* One poll: consume (final once the producer is gone) and deliver; the number of records read,
 * or -1 when the watch must end. */
static ssize_t poll_once(struct mon_ring *ring, struct mon_decoder *decoder, bool final,
			 struct ring_record *records, const struct mon_watch_options *options,
			 const struct mon_watch_handler *handler, struct mon_watch_result *result)
{
	uint64_t lost = 0;
	ssize_t got = final ? ring_consume_final(&ring->consumer, records, BATCH_RECORDS, &lost)
			    : ring_consume(&ring->consumer, records, BATCH_RECORDS, &lost);

	if (got < 0) {
		result->error = (int)got;
		result->end = MON_END_ERROR;
		return -1;
	}
	if (!deliver(decoder, records, got, lost, options, handler, result)) {
		if (result->error < 0)
			result->end = MON_END_ERROR;
		got = -1;
	}
	if ((got != 0 || lost > 0) && handler->batch_done != NULL)
		handler->batch_done(handler->context);
	return got;
}

/* Whether to stop before the next poll for a reason other than the ring itself. */
static bool should_stop(const struct mon_watch_options *options, double deadline,
			struct mon_watch_result *result)
{
	if (mon_stop_requested()) {
		result->end = MON_END_SIGNAL;
		return true;
	}
	if (options->duration > 0 && mon_now() >= deadline) {
		result->end = MON_END_DURATION;
		return true;
	}
	return false;
}

bool mon_msrd_simulated(struct haecer_conn *conn)
{
	struct haecer_machine_info *machine = calloc(1, sizeof(*machine));
	bool simulated = machine != NULL && conn != NULL &&
			 haecer_machine_info(conn, machine) == 0 &&
			 (machine->flags & HAECER_MACHINE_SIMULATED) != 0;

	free(machine);
	return simulated;
}

const char *mon_msrd_backend(const struct haecer_conn *conn)
{
	return conn != NULL ? haecer_backend_name(haecer_server_info(conn)->backend) : "unknown";
}

void mon_watch(struct haecer_conn *conn, struct mon_ring *ring,
	       const struct mon_watch_options *options, const struct mon_watch_handler *handler,
	       struct mon_watch_result *result)
{
	struct ring_record *records = calloc(BATCH_RECORDS, sizeof(*records));
	struct mon_decoder *decoder = malloc(sizeof(*decoder));
	double deadline = mon_now() + options->duration;
	double next_directory_check = 0;
	bool gone = mon_ring_producer_gone(conn, ring);
	ssize_t got;

	*result = (struct mon_watch_result){ .end = MON_END_ERROR };
	if (records == NULL || decoder == NULL) {
		result->error = -ENOMEM;
		goto out;
	}
	mon_decoder_init(decoder, &ring->info);
	decoder->simulated = mon_msrd_simulated(conn);
	decoder->backend = mon_msrd_backend(conn);
	for (;;) {
		got = poll_once(ring, decoder, gone, records, options, handler, result);
		if (got < 0)
			break;
		if (gone && got == 0) {
			result->end = MON_END_PRODUCER_GONE;
			break;
		}
		if (should_stop(options, deadline, result))
			break;
		if (got == BATCH_RECORDS || gone)
			continue; /* more is waiting */
		if (!ring_producer_alive(&ring->info)) {
			gone = true;
		} else if (mon_now() >= next_directory_check) {
			/* One round trip to msrd, so not on every poll. */
			gone = mon_ring_producer_gone(conn, ring);
			next_directory_check = mon_now() + DIRECTORY_CHECK_SECONDS;
		}
		if (!gone)
			mon_sleep_ms(options->interval_ms);
	}
out:
	free(records);
	free(decoder);
}

/* key->instance: the newest instance of (major, minor) that uid created; 0 or the exit status. */
static int newest_of_owner(struct haecer_conn *conn, struct mon_ring_key *key, uint32_t uid)
{
	struct haecer_ring_entry *entries = calloc(LIST_MAX, sizeof(*entries));
	int count, status = 0;

	if (entries == NULL)
		return mon_fail("out of memory");
	count = haecer_ring_list(conn, entries, LIST_MAX);
	if (count < 0) {
		status = mon_fail("cannot list rings: %s", haecer_conn_error(conn));
		goto out;
	}
	for (int i = 0; i < count && (size_t)i < LIST_MAX; i++) {
		if (entries[i].major == key->major && entries[i].minor == key->minor &&
		    entries[i].owner_uid == uid && entries[i].instance > key->instance)
			key->instance = entries[i].instance;
	}
	if (key->instance == 0)
		status = mon_fail("no ring %u.%u created by uid %u", key->major, key->minor, uid);
out:
	free(entries);
	return status;
}

int mon_watch_ring(const struct mon_options *options, int count, char *const *words,
		   const struct mon_watch_options *watch, const struct mon_watch_handler *handler,
		   struct ring_info *info, struct mon_watch_result *result)
{
	struct haecer_conn *conn = NULL;
	struct mon_ring_key key;
	struct mon_ring ring;
	int status = mon_parse_ring_key(words, count, &key);

	if (status != 0)
		return status;
	status = mon_connect(options->socket_path, &conn);
	if (status != 0)
		return status;
	if ((options->given & MON_OPT_UID) && key.instance == 0) {
		status = newest_of_owner(conn, &key, options->uid);
		if (status != 0)
			goto out;
	}
	status = mon_ring_open(conn, key.major, key.minor, key.instance, &ring);
	if (status < 0) {
		status = mon_ring_open_failed(conn, &key, status);
		goto out;
	}
	if ((options->given & MON_OPT_UID) && ring.entry.owner_uid != options->uid) {
		status = mon_fail("ring %u.%u.%u was created by uid %u, not by uid %u", key.major,
				  key.minor, ring.entry.instance, ring.entry.owner_uid, options->uid);
		mon_ring_close(&ring);
		goto out;
	}
	mon_catch_stop_signals();
	mon_watch(conn, &ring, watch, handler, result);
	*info = ring.info;
	mon_ring_close(&ring);
out:
	haecer_close(conn);
	return status;
}
