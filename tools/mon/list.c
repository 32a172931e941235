/*
 * tools/mon/list.c — `haecer-mon list`: every ring msrd lists for the caller (only majors the
 * policy lets it monitor: msrd filters, so a denied ring is never shown), with what its header
 * says: producer, counters, records pushed and records the producers dropped.
 *
 * Reading a header needs the ring's descriptor, i.e. a RING_OPEN, which counts against msrd's
 * per-connection ring limit and holds the ring until we disconnect (restarting the grace period
 * of a ring whose producer left); past the limit a fresh connection takes over.
 */
#include "tools/mon/mon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LIST_MAX 4096u

/* Open the ring and read its header without mapping it; reconnects once past the ring limit. */
static int read_header(const char *socket_path, struct haecer_conn **conn,
		       const struct haecer_ring_entry *entry, struct ring_info *info)
{
	int fd = -1;
	int status = haecer_ring_open(*conn, entry->major, entry->minor, entry->instance, NULL,
				      &fd);

	if (status == -ENOSPC) {
		struct haecer_conn *fresh = NULL;
		if (haecer_connect(socket_path, &fresh) < 0)
			return status;
		haecer_close(*conn);
		*conn = fresh;
		status = haecer_ring_open(*conn, entry->major, entry->minor, entry->instance, NULL,
					  &fd);
	}
	if (status < 0)
		return status;
	status = ring_info_from_fd(fd, info);
	close(fd);
	return status;
}

static void counter_names(const struct ring_info *info, char *out, size_t size)
{
	size_t used = 0;

	out[0] = '\0';
	for (uint32_t i = 0; i < info->counter_count && i < RING_MAX_COUNTERS; i++) {
		char name[RING_NAME_MAX];
		int written;
		mon_safe_name(info->counters[i].name, sizeof(info->counters[i].name), name,
			      sizeof(name));
		written = snprintf(out + used, size - used, "%s%s", i > 0 ? "," : "", name);
		if (written < 0 || (size_t)written >= size - used)
			break;
		used += (size_t)written;
	}
}

static void print_ring(enum mon_format format, bool *header_done,
		       const struct haecer_ring_entry *entry, const struct ring_info *info)
{
	struct mon_row row;
	char names[MON_FIELD_TEXT];
	bool alive = (entry->flags & HAECER_RING_PRODUCER_CONNECTED) && ring_producer_alive(info);

	counter_names(info, names, sizeof(names));
	mon_row_reset(&row);
	mon_row_number(&row, "major", 5, "%u", entry->major);
	mon_row_number(&row, "minor", 5, "%u", entry->minor);
	mon_row_number(&row, "instance", 8, "%u", entry->instance);
	mon_row_number(&row, "producer", 8, "%d", (int)entry->producer_pid);
	mon_row_string(&row, "state", -5, alive ? "alive" : "gone");
	mon_row_number(&row, "capacity", 8, "%u", entry->capacity);
	mon_row_number(&row, "records", 12, "%" PRIu64, info->pushed);
	mon_row_number(&row, "lost", 8, "%" PRIu64, info->producer_dropped);
	mon_row_number(&row, "consumers", 9, "%u", entry->consumers);
	mon_row_string(&row, "counters", -8, names);
	/* Who created it: anyone may publish a newer instance of a (major, minor) it may create. */
	mon_row_number(&row, "owner_uid", 9, "%u", entry->owner_uid);
	mon_row_number(&row, "owner_pid", -9, "%d", (int)entry->owner_pid);
	mon_row_print(stdout, format, &row, header_done);
}

int mon_list_main(const struct mon_options *options, int count, char *const *words)
{
	struct haecer_ring_entry *entries = NULL;
	struct haecer_conn *conn = NULL;
	bool header_done = false;
	int status;
	int listed;

	if (count > 0)
		return tool_usage_error("list takes no arguments ('%s')", words[0]);
	status = mon_connect(options->socket_path, &conn);
	if (status != 0)
		return status;
	entries = calloc(LIST_MAX, sizeof(*entries));
	if (entries == NULL) {
		status = mon_fail("out of memory");
		goto out;
	}
	listed = haecer_ring_list(conn, entries, LIST_MAX);
	if (listed < 0) {
		status = mon_fail("cannot list rings: %s", haecer_conn_error(conn));
		goto out;
	}
	if ((size_t)listed > LIST_MAX)
		tool_warn("showing the first %u of %d rings", LIST_MAX, listed);
	for (int i = 0; i < listed && (size_t)i < LIST_MAX; i++) {
		struct ring_info info;
		/* A ring may leave the directory between the list and the open: skip it. */
		if (read_header(options->socket_path, &conn, &entries[i], &info) < 0)
			continue;
		print_ring(options->format, &header_done, &entries[i], &info);
	}
	status = MON_EXIT_OK;
out:
	free(entries);
	haecer_close(conn);
	return status;
}
