/*
 * Malformed and hostile frames, byte by byte: garbage, an unknown version, an oversized or
 * undersized length, a payload of the wrong shape, a reply flag in a request each get an ERROR
 * frame with the right status and then the connection closes; a frame that never completes is
 * dropped after --frame-timeout-ms, and while such a client holds its half frame another client
 * is served. Well-formed requests msrd cannot serve (unknown op, bad values) get an error reply
 * and the connection stays usable. Frames split into single bytes and 200 pipelined requests are
 * answered correctly and in order.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "proto/wire.h"
#include "tests/lib/msrd_group.h"
#include "harness/policy_text.h"
#include "harness/raw_client.h"

#define TIMEOUT_MS 60000u
#define FRAME_TIMEOUT "1500" /* long enough for a frame sent byte by byte on a busy machine */

static const char policy[] = POLICY_TSC_FOR_ROOT;

static struct msrd_server server;
static uint8_t buffer[WIRE_MAX_FRAME];

static int connect_raw(void)
{
	int fd = raw_connect(server.socket_path);

	assert_true(fd >= 0);
	return fd;
}

/* Send bytes, expect an ERROR frame with `status` (and request id), then the close. */
static void expect_error_then_close(const void *bytes, size_t length, uint16_t status,
				    uint32_t request_id)
{
	struct wire_header header;
	int fd = connect_raw();

	assert_int_equal(raw_send(fd, bytes, length), 0);
	assert_int_equal(raw_read_frame(fd, buffer, sizeof(buffer), &header, TIMEOUT_MS, NULL), 0);
	assert_int_equal(header.op, WIRE_OP_ERROR);
	assert_int_equal(header.flags & WIRE_FLAG_REPLY, WIRE_FLAG_REPLY);
	assert_int_equal(header.status, status);
	assert_int_equal(header.request_id, request_id);
	assert_true(header.length > WIRE_HEADER_SIZE); /* a text says what was wrong */
	assert_int_equal(raw_wait_closed(fd, TIMEOUT_MS), 0);
	close(fd);
}

/* A READ of the TSC on CPU 0 at frame (room for exactly one). */
static size_t read_request(uint8_t *frame, uint32_t request_id)
{
	return raw_read_request(frame, WIRE_HEADER_SIZE + WIRE_READ_REQUEST_SIZE, request_id, 0,
				0x10);
}

static void test_garbage(void **state)
{
	static const char http[] = "GET / HTTP/1.1\r\nHost: msrd\r\n\r\n";

	(void)state;
	expect_error_then_close(http, sizeof(http) - 1, WIRE_STATUS_MALFORMED, 0);
}

static void test_unknown_version(void **state)
{
	uint8_t frame[64];
	size_t length = read_request(frame, 41);

	(void)state;
	frame[6] = 2; /* version byte */
	expect_error_then_close(frame, length, WIRE_STATUS_VERSION, 41);
}

static void test_oversized_and_undersized(void **state)
{
	uint8_t frame[64];
	size_t length = read_request(frame, 42);
	uint32_t huge = WIRE_MAX_FRAME + 1;
	uint32_t tiny = 8;

	(void)state;
	memcpy(frame, &huge, sizeof(huge));
	expect_error_then_close(frame, length, WIRE_STATUS_TOO_LARGE, 42);
	memcpy(frame, &tiny, sizeof(tiny));
	expect_error_then_close(frame, length, WIRE_STATUS_MALFORMED, 0);
}

static void test_wrong_payload_shape(void **state)
{
	uint8_t frame[64];
	uint8_t payload[12] = { 0 };
	size_t length = raw_frame(frame, sizeof(frame), WIRE_OP_READ, 43, payload, sizeof(payload));

	(void)state;
	/* A READ whose payload is 12 bytes instead of 8: the length covers more than a READ. */
	expect_error_then_close(frame, length, WIRE_STATUS_MALFORMED, 43);
	/* A BATCH whose count does not match its length. */
	{
		uint8_t batch[WIRE_BATCH_HEADER_SIZE + WIRE_BATCH_OP_SIZE];
		struct wire_writer writer;
		struct wire_batch_op op = { .kind = WIRE_BATCH_READ, .address = 0x10 };
		wire_writer_init(&writer, batch, sizeof(batch));
		wire_put_batch_header(&writer, 2);
		wire_put_batch_op(&writer, &op);
		length = raw_frame(frame, sizeof(frame), WIRE_OP_BATCH, 44, batch, sizeof(batch));
		expect_error_then_close(frame, length, WIRE_STATUS_MALFORMED, 44);
	}
}

static void test_reply_flag_in_request(void **state)
{
	uint8_t frame[64];
	size_t length = read_request(frame, 45);

	(void)state;
	frame[7] = WIRE_FLAG_REPLY;
	expect_error_then_close(frame, length, WIRE_STATUS_MALFORMED, 45);
}

/* A half frame is dropped after the frame timeout; meanwhile another client is served. */
static void test_truncated_frame_and_others_served(void **state)
{
	struct haecer_conn *good;
	struct wire_header header;
	uint8_t frame[64];
	size_t length = read_request(frame, 46);
	uint64_t value = 0;
	int fd = connect_raw();
	uint32_t big = 1000;
	int other;

	(void)state;
	assert_int_equal(raw_send(fd, frame, length - 3), 0);
	assert_int_equal(haecer_connect(server.socket_path, &good), 0);
	for (int i = 0; i < 50; i++)
		assert_int_equal(haecer_msr_read(good, 0, 0x10, &value), 0);
	/* A length larger than the data that follows is the same: it never completes. */
	other = connect_raw();
	memcpy(frame, &big, sizeof(big));
	assert_int_equal(raw_send(other, frame, length), 0);
	assert_int_equal(haecer_msr_read(good, 0, 0x10, &value), 0);
	for (int i = 0; i < 2; i++) {
		int hostile = i == 0 ? fd : other;
		assert_int_equal(raw_read_frame(hostile, buffer, sizeof(buffer), &header, TIMEOUT_MS,
						NULL),
				 0);
		assert_int_equal(header.op, WIRE_OP_ERROR);
		assert_int_equal(header.status, WIRE_STATUS_TIMEOUT);
		assert_int_equal(raw_wait_closed(hostile, TIMEOUT_MS), 0);
		close(hostile);
	}
	assert_int_equal(haecer_msr_read(good, 0, 0x10, &value), 0);
	haecer_close(good);
	assert_true(msrd_log_contains(&server, "frame not completed within " FRAME_TIMEOUT " ms"));
}

static void test_errors_that_keep_the_connection(void **state)
{
	struct wire_header header;
	uint8_t frame[64];
	uint8_t batch[WIRE_BATCH_HEADER_SIZE];
	struct wire_writer writer;
	size_t length;
	int fd = connect_raw();

	(void)state;
	/* An op this server does not implement (a free number of the counter-slot family). */
	length = raw_frame(frame, sizeof(frame), WIRE_OP_SLOT_FREE + 1, 50, NULL, 0);
	assert_int_equal(raw_send(fd, frame, length), 0);
	assert_int_equal(raw_read_frame(fd, buffer, sizeof(buffer), &header, TIMEOUT_MS, NULL), 0);
	assert_int_equal(header.op, WIRE_OP_SLOT_FREE + 1);
	assert_int_equal(header.status, WIRE_STATUS_UNSUPPORTED);
	assert_int_equal(header.request_id, 50);
	/* An empty batch. */
	wire_writer_init(&writer, batch, sizeof(batch));
	wire_put_batch_header(&writer, 0);
	length = raw_frame(frame, sizeof(frame), WIRE_OP_BATCH, 51, batch, sizeof(batch));
	assert_int_equal(raw_send(fd, frame, length), 0);
	assert_int_equal(raw_read_frame(fd, buffer, sizeof(buffer), &header, TIMEOUT_MS, NULL), 0);
	assert_int_equal(header.status, WIRE_STATUS_INVALID);
	/* The connection still works. */
	length = read_request(frame, 52);
	assert_int_equal(raw_send(fd, frame, length), 0);
	assert_int_equal(raw_read_frame(fd, buffer, sizeof(buffer), &header, TIMEOUT_MS, NULL), 0);
	assert_int_equal(header.op, WIRE_OP_READ);
	assert_int_equal(header.status, WIRE_STATUS_OK);
	assert_int_equal(header.length, WIRE_HEADER_SIZE + WIRE_READ_REPLY_SIZE);
	close(fd);
}

static void test_split_and_pipelined(void **state)
{
	static uint8_t frames[200 * 32];
	struct wire_header header;
	size_t length = 0;
	int fd = connect_raw();

	(void)state;
	/* One frame a byte at a time. */
	length = read_request(frames, 60);
	for (size_t i = 0; i < length; i++)
		assert_int_equal(raw_send(fd, frames + i, 1), 0);
	assert_int_equal(raw_read_frame(fd, buffer, sizeof(buffer), &header, TIMEOUT_MS, NULL), 0);
	assert_int_equal(header.request_id, 60);
	assert_int_equal(header.status, WIRE_STATUS_OK);
	/* 200 requests in one write: 200 replies, in order. */
	length = 0;
	for (uint32_t id = 100; id < 300; id++)
		length += read_request(frames + length, id);
	assert_int_equal(raw_send(fd, frames, length), 0);
	for (uint32_t id = 100; id < 300; id++) {
		assert_int_equal(raw_read_frame(fd, buffer, sizeof(buffer), &header, TIMEOUT_MS,
						NULL),
				 0);
		assert_int_equal(header.request_id, id);
		assert_int_equal(header.status, WIRE_STATUS_OK);
	}
	close(fd);
}

static void test_half_header_then_gone(void **state)
{
	uint8_t frame[64];
	int fd = connect_raw();
	struct haecer_conn *good;
	uint64_t value;

	(void)state;
	read_request(frame, 70);
	assert_int_equal(raw_send(fd, frame, 5), 0);
	close(fd);
	assert_int_equal(haecer_connect(server.socket_path, &good), 0);
	assert_int_equal(haecer_msr_read(good, 0, 0x10, &value), 0);
	haecer_close(good);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--frame-timeout-ms", FRAME_TIMEOUT, NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_unknown_version),
		cmocka_unit_test(test_oversized_and_undersized),
		cmocka_unit_test(test_wrong_payload_shape),
		cmocka_unit_test(test_reply_flag_in_request),
		cmocka_unit_test(test_truncated_frame_and_others_served),
		cmocka_unit_test(test_errors_that_keep_the_connection),
		cmocka_unit_test(test_split_and_pipelined),
		cmocka_unit_test(test_half_header_then_gone),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
