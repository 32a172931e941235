/*
 * What a client can do to msrd's log (issue 14, items 5 and 11), with a bystander reading
 * throughout and msrd at debug level with its default refusal limit (--refusal-log-burst 10):
 *   - a HELLO name with a newline, a quote, a backslash and a control byte is logged escaped:
 *     no line of the log starts with what followed the newline, and the name shows as sent;
 *   - thousands of pipelined READs of a denied register by uid 65534 are all refused, but only
 *     a burst of them gets a "refused:" line; the rest are counted, and a summary line says how
 *     many ("N more refusals of uid 65534 suppressed"), so lines + suppressed = requests.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "proto/wire.h"
#include "tests/hardening/hardening.h"
#include "tests/lib/msrd_group.h"
#include "harness/raw_client.h"
#include "tests/lib/test_check.h"

#define NOBODY 65534
#define DENIED 0x611u /* PKG_ENERGY_STATUS: root's only */
#define PIPELINE 32u
#define TIMEOUT_MS 60000u

static struct msrd_server server;
static struct bystander bystander;

HARDENING_BYSTANDER_FIXTURES(server, bystander)

/* A line of the log that begins (after "HH:MM:SS.mmm msrd[level]: ") with text, or at the very
 * start of a line. */
static bool a_line_starts_with(const char *log, const char *text)
{
	for (const char *line = log; line != NULL && *line != '\0';) {
		const char *end = strchr(line, '\n');
		const char *message = strstr(line, "]: ");
		if (strncmp(line, text, strlen(text)) == 0)
			return true;
		if (message != NULL && (end == NULL || message < end) &&
		    strncmp(message + 3, text, strlen(text)) == 0)
			return true;
		line = end != NULL ? end + 1 : NULL;
	}
	return false;
}

static void test_hello_name_is_escaped(void **state)
{
	static const char name[] = "ev\"il\\\x01\nforged[notice]: hi";
	uint8_t frames[256], reply[256];
	struct wire_header header;
	size_t length = raw_hello_and_read(frames, name, 1);
	int fd = raw_connect(server.socket_path);
	char *log;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(raw_send(fd, frames, length), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(raw_read_frame(fd, reply, sizeof(reply), &header, TIMEOUT_MS, NULL),
				 0);
		assert_int_equal(header.status, WIRE_STATUS_OK);
	}
	close(fd);
	assert_true(msrd_wait_log(&server, "is \"ev\\\"il\\\\\\x01\\nforged[notice]: hi\"",
				  TIMEOUT_MS));
	log = msrd_log(&server);
	assert_non_null(log);
	assert_false(a_line_starts_with(log, "forged"));
	free(log);
}

struct flood {
	unsigned requests;
};

/* `requests` denied READs, PIPELINE at a time, each answered with a refusal. */
static int flood(void *argument)
{
	const struct flood *flood = argument;
	uint8_t frames[PIPELINE * 64], reply[512];
	struct wire_header header;
	int fd = raw_connect(server.socket_path);

	CHECK(fd >= 0);
	for (unsigned sent = 0; sent < flood->requests;) {
		size_t length = 0;
		unsigned batch = flood->requests - sent < PIPELINE ? flood->requests - sent : PIPELINE;
		for (unsigned i = 0; i < batch; i++)
			length += raw_read_request(frames + length, sizeof(frames) - length,
						   sent + i + 1, 0, DENIED);
		CHECK_EQ(raw_send(fd, frames, length), 0);
		for (unsigned i = 0; i < batch; i++) {
			CHECK_EQ(raw_read_frame(fd, reply, sizeof(reply), &header, TIMEOUT_MS, NULL),
				 0);
			CHECK_EQ(header.status, WIRE_STATUS_DENIED);
		}
		sent += batch;
	}
	close(fd);
	return 0;
}

/* The sum of N over every "N more refusals of uid 65534 suppressed" line. */
static unsigned long long suppressed_in(const char *log)
{
	static const char tail[] = " more refusals of uid 65534 suppressed";
	unsigned long long sum = 0;

	for (const char *at = strstr(log, tail); at != NULL; at = strstr(at + 1, tail)) {
		const char *digits = at;
		while (digits > log && digits[-1] >= '0' && digits[-1] <= '9')
			digits--;
		sum += strtoull(digits, NULL, 10);
	}
	return sum;
}

static void test_refusal_flood_is_summed_up(void **state)
{
	struct flood request = { .requests = harness_small_scale() ? 2000 : 20000 };
	size_t logged_before = msrd_log_count(&server, "refused: uid 65534 ");
	size_t logged;
	char *log;

	(void)state;
	assert_int_equal(run_as(NOBODY, NOBODY, NULL, 0, flood, &request), 0);
	assert_true(msrd_wait_log(&server, " more refusals of uid 65534 suppressed", TIMEOUT_MS));
	logged = msrd_log_count(&server, "refused: uid 65534 ") - logged_before;
	log = msrd_log(&server);
	assert_non_null(log);
	/* A burst per 5 s window; the flood takes well under a minute even under valgrind. */
	assert_true(logged >= 1 && logged <= 10 * 13);
	assert_int_equal(logged + suppressed_in(log), request.requests);
	free(log);
	assert_true(bystander_progress(&bystander, 3));
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--log-level", "debug",
				    "--refusal-log-burst", "10", NULL };
	const struct CMUnitTest tests[] = {
		BYSTANDER_TEST(test_hello_name_is_escaped),
		BYSTANDER_TEST(test_refusal_flood_is_summed_up),
	};

	return MSRD_RUN_GROUP(&server, HARDENING_POLICY, arguments, NULL, tests);
}
