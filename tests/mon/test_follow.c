/*
 * haecer-mon follow against a real msrd and real producer processes:
 *  - text, CSV and JSON carry exactly the records the producer pushed, in order, each naming
 *    msrd's backend behind it (sim here), with joules =
 *    value * 2^-exponent and the watts between consecutive records of one counter, through a
 *    32-bit RAPL wrap and for 64-bit totals; a counter that is not energy gets neither;
 *  - attached after the producer exited, follow drains the ring and ends by itself;
 *  - live: records pushed while following appear, and a producer killed while followed ends
 *    the follow (exit 0) after its last records;
 *  - --count N prints N records; --duration ends a follow of a silent ring;
 *  - a producer that laps a stopped follower: what was printed plus what was reported lost is
 *    exactly what was pushed, the loss is reported, and the newest record arrives.
 */
#include "tests/mon/mon_test.h"

#include <inttypes.h>
#include <math.h>

#include "tests/lib/msrd_group.h"

#define STEP_NS 100000000ull  /* 0.1 s between a counter's records */
#define T0 5000000000ull
#define PKG_STEP 16384u       /* 1 J at 2^-14 J: 10 W */
#define DRAM_STEP 32768u      /* 0.5 J at 2^-16 J: 5 W */
#define DRAM_FIRST (UINT64_C(5) << 32) /* a 64-bit total */

struct expected {
	uint32_t id;
	const char *name;
	uint64_t value;
	uint64_t timestamp;
	int exponent;     /* -1: not energy */
	double watts;     /* < 0: none */
};

static struct msrd_server server;

/* The known sequence: PKG wraps its 32 bits after the second record, DRAM is a 64-bit total. */
static size_t known_sequence(struct expected *out)
{
	size_t count = 0;

	for (unsigned i = 0; i < 5; i++) {
		uint64_t t = T0 + i * STEP_NS;
		out[count++] = (struct expected){ 0, "RAPL_PKG",
			(UINT64_C(0x100000000) - 2 * PKG_STEP + (uint64_t)i * PKG_STEP) & 0xffffffffu,
			t, 14, i == 0 ? -1.0 : 10.0 };
		out[count++] = (struct expected){ 2, "DRAM", DRAM_FIRST + (uint64_t)i * DRAM_STEP, t,
						  16, i == 0 ? -1.0 : 5.0 };
		if (i % 2 == 0)
			out[count++] = (struct expected){ 1, "INSTRUCTIONS", 1000u * (i + 1), t, -1,
							  -1.0 };
	}
	return count;
}

static void push_all(struct producer *producer, const struct expected *records, size_t count)
{
	for (size_t i = 0; i < count; i++)
		producer_say(producer, "push %u %" PRIu64 " %" PRIu64, records[i].id,
			     records[i].value, records[i].timestamp);
	producer_sync(producer);
}

/* The fields of one printed record, as text. */
struct printed {
	char seconds[40], counter[40], value[40], joules[40], watts[40];
};

static void check_record(const struct printed *got, const struct expected *want)
{
	double joules;

	assert_true(near(strtod(got->seconds, NULL), (double)want->timestamp / 1e9));
	assert_string_equal(got->counter, want->name);
	assert_int_equal(strtoull(got->value, NULL, 10), want->value);
	if (want->exponent < 0) {
		assert_true(got->joules[0] == '\0' || strcmp(got->joules, "-") == 0);
	} else {
		joules = (double)want->value / (double)(1ull << want->exponent);
		assert_true(fabs(strtod(got->joules, NULL) - joules) < 1e-6);
	}
	if (want->watts < 0)
		assert_true(got->watts[0] == '\0' || strcmp(got->watts, "-") == 0);
	else
		assert_true(fabs(strtod(got->watts, NULL) - want->watts) < 1e-3);
}

static void parse_text(const char *line, struct printed *got)
{
	*got = (struct printed){ 0 };
	assert_int_equal(sscanf(line, "%39s %39s %39s %39s %39s", got->seconds, got->counter,
				got->value, got->joules, got->watts), 5);
	assert_non_null(strstr(line, " sim       (simulated)")); /* msrd's backend: sim */
}

static void parse_csv(const char *line, struct printed *got)
{
	/* type,seconds,timestamp,counter_id,counter,value,joules,watts,lost,backend,simulated */
	char type[16], backend[16], simulated[8];

	csv_field(line, 0, type, sizeof(type));
	assert_string_equal(type, "record");
	csv_field(line, 9, backend, sizeof(backend));
	assert_string_equal(backend, "sim"); /* msrd's backend behind the figure */
	csv_field(line, 10, simulated, sizeof(simulated));
	assert_string_equal(simulated, "1"); /* msrd runs the simulated CPU */
	csv_field(line, 1, got->seconds, sizeof(got->seconds));
	csv_field(line, 4, got->counter, sizeof(got->counter));
	csv_field(line, 5, got->value, sizeof(got->value));
	csv_field(line, 6, got->joules, sizeof(got->joules));
	csv_field(line, 7, got->watts, sizeof(got->watts));
}

static void parse_json(const char *line, struct printed *got)
{
	char type[16], backend[16], simulated[8];

	*got = (struct printed){ 0 };
	assert_true(json_field(line, "type", type, sizeof(type)));
	assert_string_equal(type, "record");
	assert_true(json_field(line, "backend", backend, sizeof(backend)));
	assert_string_equal(backend, "sim");
	assert_true(json_field(line, "simulated", simulated, sizeof(simulated)));
	assert_string_equal(simulated, "true");
	assert_true(json_field(line, "seconds", got->seconds, sizeof(got->seconds)));
	assert_true(json_field(line, "counter", got->counter, sizeof(got->counter)));
	assert_true(json_field(line, "value", got->value, sizeof(got->value)));
	json_field(line, "joules", got->joules, sizeof(got->joules));
	json_field(line, "watts", got->watts, sizeof(got->watts));
}

/* follow --format FORMAT on a finished ring: every record, then exit 0 by itself. */
static void expect_follow(const char *format, const char *ring[2], const struct expected *want,
			  size_t count)
{
	const char *arguments[] = { "follow", "--format", format, ring[0], ring[1], NULL };
	char *lines[64];
	char *out, *err;
	size_t first = strcmp(format, "json") == 0 ? 0 : 1; /* text and CSV have a header */
	size_t got;

	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 0);
	assert_non_null(strstr(err, "producer gone, ring drained"));
	got = split_lines(out, lines, 64);
	assert_int_equal(got, count + first);
	if (strcmp(format, "csv") == 0)
		assert_string_equal(lines[0],
				    "type,seconds,timestamp,counter_id,counter,value,joules,watts,lost,"
				    "backend,simulated");
	for (size_t i = 0; i < count; i++) {
		struct printed printed;
		if (strcmp(format, "text") == 0)
			parse_text(lines[first + i], &printed);
		else if (strcmp(format, "csv") == 0)
			parse_csv(lines[first + i], &printed);
		else
			parse_json(lines[first + i], &printed);
		check_record(&printed, &want[i]);
	}
	free(out);
	free(err);
}

static void test_formats_after_exit(void **state)
{
	struct expected want[16];
	size_t count = known_sequence(want);
	struct producer producer;
	const char *ring[2] = { "1", "1" };

	(void)state;
	producer_start(&producer, server.socket_path, 1, 1, 64);
	push_all(&producer, want, count);
	assert_int_equal(producer_end(&producer, "exit"), 0);
	expect_follow("text", ring, want, count);
	expect_follow("csv", ring, want, count);
	expect_follow("json", ring, want, count);
}

static void expect_line_with(struct proc *follower, const char *needle)
{
	char line[512];

	do
		assert_true(read_line(follower->out, line, sizeof(line), MON_TEST_TIMEOUT_MS));
	while (strstr(line, needle) == NULL);
}

static void test_live_and_producer_killed(void **state)
{
	const char *arguments[] = { "follow", "--interval", "20", "1", "2", NULL };
	struct producer producer;
	struct proc follower;
	char *out, *err;

	(void)state;
	producer_start(&producer, server.socket_path, 1, 2, 64);
	producer_say(&producer, "push 1 111 1000");
	producer_sync(&producer);
	mon_start(&follower, server.socket_path, arguments);
	expect_line_with(&follower, " 111");
	/* Pushed while following: printed as it arrives. */
	producer_say(&producer, "push 1 222 2000");
	producer_sync(&producer);
	expect_line_with(&follower, " 222");
	producer_say(&producer, "push 1 333 3000");
	producer_sync(&producer);
	assert_int_equal(producer_end(&producer, "die"), 128 + SIGKILL);
	/* The follower notices by itself, prints the last record, and ends well. */
	assert_int_equal(proc_finish(&follower, &out, &err, MON_TEST_TIMEOUT_MS), 0);
	assert_non_null(strstr(out, " 333"));
	assert_non_null(strstr(err, "3 records, 0 lost (producer gone, ring drained)"));
	free(out);
	free(err);
}

static void test_count_and_duration(void **state)
{
	const char *count_arguments[] = { "follow", "-f", "json", "--count", "3", "1", "3", NULL };
	const char *duration_arguments[] = { "follow", "--duration", "0.3", "1", "3", NULL };
	struct producer producer;
	char *lines[16];
	char *out, *err;

	(void)state;
	producer_start(&producer, server.socket_path, 1, 3, 64);
	producer_say(&producer, "burst 5 1 10 1 100 100");
	producer_sync(&producer);
	/* The producer is alive, so only the count or the duration ends these. */
	assert_int_equal(mon_run(server.socket_path, count_arguments, &out, &err), 0);
	assert_int_equal(split_lines(out, lines, 16), 3);
	assert_non_null(strstr(lines[2], "\"value\":12"));
	assert_non_null(strstr(err, "count reached"));
	free(out);
	free(err);
	assert_int_equal(mon_run(server.socket_path, duration_arguments, &out, &err), 0);
	assert_int_equal(split_lines(out, lines, 16), 6); /* header + 5 */
	assert_non_null(strstr(err, "duration reached"));
	free(out);
	free(err);
	assert_int_equal(producer_end(&producer, "exit"), 0);
}

struct lost_tally {
	uint64_t records;
	uint64_t lost;
	uint64_t last_value;
	bool ordered;
};

static void tally_json(char *out, struct lost_tally *tally)
{
	char *save = NULL;

	*tally = (struct lost_tally){ .ordered = true };
	for (char *line = strtok_r(out, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char field[32];
		uint64_t value;
		if (json_field(line, "lost", field, sizeof(field))) {
			tally->lost += strtoull(field, NULL, 10);
			continue;
		}
		assert_true(json_field(line, "value", field, sizeof(field)));
		value = strtoull(field, NULL, 10);
		tally->ordered &= value > tally->last_value;
		tally->last_value = value;
		tally->records++;
	}
}

static void test_lost_when_lapped(void **state)
{
	const char *arguments[] = { "follow", "-f", "json", "--interval", "20", "1", "4", NULL };
	const unsigned capacity = 16;
	const unsigned burst = 10 * capacity;
	struct lost_tally tally;
	struct producer producer;
	struct proc follower;
	char *out, *err;

	(void)state;
	producer_start(&producer, server.socket_path, 1, 4, capacity);
	producer_say(&producer, "push 1 1 1");
	producer_sync(&producer);
	mon_start(&follower, server.socket_path, arguments);
	expect_line_with(&follower, "\"value\":1,\"backend\":\"sim\",\"simulated\":true}");
	/* The follower is attached and has read record 1: stop it while the producer laps it
	 * ten times. */
	assert_int_equal(kill(follower.pid, SIGSTOP), 0);
	producer_say(&producer, "burst %u 1 2 1 2 1", burst);
	producer_sync(&producer);
	assert_int_equal(kill(follower.pid, SIGCONT), 0);
	assert_int_equal(producer_end(&producer, "exit"), 0);
	assert_int_equal(proc_finish(&follower, &out, &err, MON_TEST_TIMEOUT_MS), 0);
	tally_json(out, &tally);
	/* Every record after the first (read above) is either printed or reported lost, exactly
	 * once. */
	assert_int_equal(tally.records + tally.lost, burst);
	assert_true(tally.lost >= burst - capacity);
	assert_true(tally.ordered);
	assert_int_equal(tally.last_value, burst + 1);
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_formats_after_exit),
		cmocka_unit_test(test_live_and_producer_killed),
		cmocka_unit_test(test_count_and_duration),
		cmocka_unit_test(test_lost_when_lapped),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
}
