/*
 * tools/mon/follow.c — `haecer-mon follow MAJOR MINOR [INSTANCE]`: print a ring's records as
 * they arrive, with joules and watts for energy counters and a line whenever records were lost.
 *
 * Records and loss lines share one set of columns, so CSV stays rectangular and JSON lines
 * carry a "type" ("record" or "lost"). Every record names msrd's backend behind it (a "backend"
 * column: msr, msr-safe, powercap, perf, sim). Readings from msrd's simulated CPU say so: a
 * "simulated" column (1) in CSV and JSON, a "(simulated)" mark in text. A summary goes to
 * stderr at the end; stdout holds only data.
 */
#include "tools/mon/mon.h"

#include <inttypes.h>
#include <string.h>

struct follow {
	enum mon_format format;
	bool header_done;
	struct mon_row row;
};

/* The columns of every row; absent values stay absent. */
static void row_begin(struct mon_row *row, const char *type)
{
	mon_row_reset(row);
	mon_row_string(row, "type", 0, type);
}

/* The last column: a reading of a simulated CPU says so (text "(simulated)", CSV 1, JSON
 * true); absent otherwise. */
static void mark_simulated(struct mon_row *row, enum mon_format format, bool simulated)
{
	if (!simulated)
		mon_row_absent(row, "simulated", 0);
	else if (format == MON_FORMAT_TEXT)
		mon_row_number(row, "simulated", -11, "(simulated)");
	else
		mon_row_number(row, "simulated", 0, "%s", format == MON_FORMAT_JSON ? "true" : "1");
}

static int print_reading(void *context, const struct mon_reading *reading)
{
	struct follow *follow = context;
	struct mon_row *row = &follow->row;

	row_begin(row, "record");
	mon_row_number(row, "seconds", 18, "%.9f", reading->seconds);
	mon_row_number(row, "timestamp", 0, "%" PRIu64, reading->timestamp);
	mon_row_number(row, "counter_id", 0, "%" PRIu32, reading->counter_id);
	mon_row_string(row, "counter", -16, reading->name);
	mon_row_number(row, "value", 20, "%" PRIu64, reading->value);
	if (reading->is_energy)
		mon_row_number(row, "joules", 18, "%.6f", reading->joules);
	else
		mon_row_absent(row, "joules", 18);
	if (reading->have_watts)
		mon_row_number(row, "watts", 12, "%.3f", reading->watts);
	else
		mon_row_absent(row, "watts", 12);
	mon_row_absent(row, "lost", 0);
	mon_row_string(row, "backend", -9, reading->backend);
	mark_simulated(row, follow->format, reading->simulated);
	mon_row_print(stdout, follow->format, row, &follow->header_done);
	return 0;
}

static int print_lost(void *context, uint64_t lost, uint64_t lost_total)
{
	struct follow *follow = context;
	struct mon_row *row = &follow->row;
	static const char *const columns[] = { "seconds", "timestamp", "counter_id", "counter",
					       "value", "joules", "watts" };
	static const int widths[] = { 18, 0, 0, -16, 20, 18, 12 };

	if (follow->format == MON_FORMAT_TEXT) {
		printf("lost %" PRIu64 " records (%" PRIu64 " in all)\n", lost, lost_total);
		return 0;
	}
	row_begin(row, "lost");
	for (size_t i = 0; i < sizeof(columns) / sizeof(columns[0]); i++)
		mon_row_absent(row, columns[i], widths[i]);
	mon_row_number(row, "lost", 0, "%" PRIu64, lost);
	mon_row_absent(row, "backend", 0);
	mon_row_absent(row, "simulated", 0);
	mon_row_print(stdout, follow->format, row, &follow->header_done);
	return 0;
}

static void flush_output(void *context)
{
	(void)context;
	fflush(stdout);
}

int mon_follow_main(const struct mon_options *options, int count, char *const *words)
{
	struct follow follow = { .format = options->format };
	struct mon_watch_handler handler = { print_reading, print_lost, flush_output, &follow };
	struct mon_watch_options watch = { options->duration, options->count,
					   options->interval_ms };
	struct mon_watch_result result;
	struct ring_info info;
	int status = mon_watch_ring(options, count, words, &watch, &handler, &info, &result);

	if (status != 0)
		return status;
	fflush(stdout);
	tool_warn("ring %u.%u.%u: %" PRIu64 " records, %" PRIu64 " lost (%s)",
		  info.major, info.minor, info.instance, result.records, result.lost,
		  mon_watch_end_text(result.end));
	if (result.end == MON_END_ERROR && result.error == RING_CORRUPTED)
		return mon_fail("reading the ring failed: " RING_CORRUPTED_TEXT
				" (its header shows what no honest producer writes)");
	if (result.end == MON_END_ERROR)
		return mon_fail("reading the ring failed: %s", strerror(-result.error));
	return MON_EXIT_OK;
}
