/*
 * Every field of a frame at and past its limits, against the real msrd, while a bystander
 * client reads through the same msrd and must see every reply (tests/hardening/hardening.h).
 * What test_malformed already shows (garbage, version 2, length 8 and max + 1, a READ payload of
 * the wrong size, the reply flag, a frame that never completes) is not repeated; here:
 *   - length 0, 1, 15 (below a header): ERROR MALFORMED, close; 16 (a header alone): a request
 *     that takes no payload is served, one that needs one is MALFORMED; exactly WIRE_MAX_FRAME
 *     (a frame across many receive buffers) is read whole and judged by its payload; max + 1 and
 *     UINT32_MAX: ERROR TOO_LARGE with the request id; a length far past the data followed by
 *     shutdown(SHUT_WR): the connection closes without waiting for the frame timeout;
 *   - every version but 1, every flags value but 0, a wrong magic, a non-zero status: ERROR
 *     and close; request ids 0 and UINT32_MAX come back as sent;
 *   - every op number: the ones msrd does not implement are UNSUPPORTED and the connection
 *     stays; each implemented one with an empty and with a maximal payload is MALFORMED (only
 *     MACHINE_INFO takes an empty payload) and closes;
 *   - counts and reserved fields inside payloads at their limits: batches of 0, 1, 1024 and 1025
 *     ops, a count far past the data, header flags, op kinds 0, 5 and 0xffff, op flags and
 *     reserved words, slot-id lists of 0 and 257, a ring of 17 counters, HELLO ranges without
 *     version 1: each its documented status, the connection kept.
 * Every refusal is one log line: "protocol error" for those that close, "refused:" for the rest.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "proto/wire.h"
#include "tests/hardening/hardening.h"
#include "tests/lib/msrd_group.h"
#include "harness/raw_client.h"

#define TIMEOUT_MS 60000u

static struct msrd_server server;
static struct bystander bystander;
static uint8_t frame[WIRE_MAX_FRAME + 64];
static uint8_t reply[WIRE_MAX_FRAME];

/* Every request of the op table (a new op is covered without an edit here); ERROR is msrd's
 * reply, never a request it serves. */
#define REQUEST_OP(name, code, writes) WIRE_OP_##name,
static const uint16_t every_op[] = { WIRE_OPS(REQUEST_OP) };
#undef REQUEST_OP

static bool is_implemented(uint32_t op)
{
	if (op == WIRE_OP_ERROR)
		return false;
	for (size_t i = 0; i < sizeof(every_op) / sizeof(every_op[0]); i++) {
		if (every_op[i] == op)
			return true;
	}
	return false;
}

static int connect_raw(void)
{
	int fd = raw_connect(server.socket_path);

	assert_true(fd >= 0);
	return fd;
}

/* A header with every field given (the magic too); returns 16. */
static size_t raw_header(uint8_t *at, uint32_t length, uint16_t magic, uint8_t version,
			 uint8_t flags, uint16_t op, uint16_t status, uint32_t request_id)
{
	memcpy(at, &length, 4);
	memcpy(at + 4, &magic, 2);
	at[6] = version;
	at[7] = flags;
	memcpy(at + 8, &op, 2);
	memcpy(at + 10, &status, 2);
	memcpy(at + 12, &request_id, 4);
	return WIRE_HEADER_SIZE;
}

static size_t closes_expected; /* protocol errors msrd must have logged, one per close */

/* Send bytes on a new connection; expect an ERROR frame with `status` and `request_id`, then the
 * close. */
static void expect_close(const void *bytes, size_t length, uint16_t status, uint32_t request_id)
{
	struct wire_header header;
	int fd = connect_raw();

	assert_int_equal(raw_send(fd, bytes, length), 0);
	assert_int_equal(raw_read_frame(fd, reply, sizeof(reply), &header, TIMEOUT_MS, NULL), 0);
	assert_int_equal(header.op, WIRE_OP_ERROR);
	assert_int_equal(header.status, status);
	assert_int_equal(header.request_id, request_id);
	assert_int_equal(raw_wait_closed(fd, TIMEOUT_MS), 0);
	close(fd);
	closes_expected++;
}

/* Every close so far was one "protocol error" line in msrd's log (each is logged before its
 * ERROR frame is queued, so they are all there by now). */
static void closes_logged(void)
{
	assert_int_equal(msrd_log_count(&server, "protocol error ("), closes_expected);
}

/* One request on an open connection; its reply's status (the connection must stay usable). */
static uint16_t request(int fd, uint16_t op, uint32_t request_id, const void *payload,
			size_t length)
{
	struct wire_header header;
	size_t bytes = raw_frame(frame, sizeof(frame), op, request_id, payload, length);

	assert_true(bytes > 0);
	assert_int_equal(raw_send(fd, frame, bytes), 0);
	assert_int_equal(raw_read_frame(fd, reply, sizeof(reply), &header, TIMEOUT_MS, NULL), 0);
	assert_int_equal(header.op, op);
	assert_int_equal(header.request_id, request_id);
	assert_int_equal(header.flags, WIRE_FLAG_REPLY);
	return header.status;
}

static void test_lengths(void **state)
{
	int fd;

	(void)state;
	for (uint32_t length = 0; length < WIRE_HEADER_SIZE; length++) {
		raw_header(frame, length, WIRE_MAGIC, WIRE_VERSION, 0, WIRE_OP_READ, 0, 5);
		expect_close(frame, WIRE_HEADER_SIZE, WIRE_STATUS_MALFORMED, 0);
	}
	/* A header alone: MACHINE_INFO takes no payload; READ needs one. */
	fd = connect_raw();
	assert_int_equal(request(fd, WIRE_OP_MACHINE_INFO, 6, NULL, 0), WIRE_STATUS_OK);
	close(fd);
	raw_header(frame, WIRE_HEADER_SIZE, WIRE_MAGIC, WIRE_VERSION, 0, WIRE_OP_READ, 0, 7);
	expect_close(frame, WIRE_HEADER_SIZE, WIRE_STATUS_MALFORMED, 7);
	/* Exactly the limit: read whole (it spans 16 receive buffers), refused for its shape. */
	memset(frame, 0xA5, WIRE_MAX_FRAME);
	raw_header(frame, WIRE_MAX_FRAME, WIRE_MAGIC, WIRE_VERSION, 0, WIRE_OP_READ, 0, 8);
	expect_close(frame, WIRE_MAX_FRAME, WIRE_STATUS_MALFORMED, 8);
	assert_true(msrd_log_contains(&server, "READ payload of 32752 bytes has the wrong shape"));
	raw_header(frame, WIRE_MAX_FRAME + 1, WIRE_MAGIC, WIRE_VERSION, 0, WIRE_OP_READ, 0, 9);
	expect_close(frame, WIRE_HEADER_SIZE, WIRE_STATUS_TOO_LARGE, 9);
	raw_header(frame, UINT32_MAX, WIRE_MAGIC, WIRE_VERSION, 0, WIRE_OP_BATCH, 0, 10);
	expect_close(frame, WIRE_HEADER_SIZE, WIRE_STATUS_TOO_LARGE, 10);
	/* A length far past the data, then the end of input: nothing will ever complete it, so
	 * msrd closes at once (the frame timeout here is ten minutes). */
	fd = connect_raw();
	raw_header(frame, WIRE_MAX_FRAME, WIRE_MAGIC, WIRE_VERSION, 0, WIRE_OP_BATCH, 0, 11);
	assert_int_equal(raw_send(fd, frame, 100), 0);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	assert_int_equal(raw_wait_closed(fd, TIMEOUT_MS), 0);
	close(fd);
	closes_logged();
	assert_true(bystander_progress(&bystander, 5));
}

static void test_header_fields(void **state)
{
	int fd;

	(void)state;
	for (unsigned version = 0; version <= UINT8_MAX; version++) {
		if (version == WIRE_VERSION)
			continue;
		raw_header(frame, WIRE_HEADER_SIZE, WIRE_MAGIC, (uint8_t)version, 0,
			   WIRE_OP_MACHINE_INFO, 0, 20 + version);
		expect_close(frame, WIRE_HEADER_SIZE, WIRE_STATUS_VERSION, 20 + version);
	}
	for (unsigned flags = 1; flags <= UINT8_MAX; flags++) {
		/* The reply bit alone is a readable header whose id comes back; any other bit
		 * makes the header unreadable (id 0). */
		raw_header(frame, WIRE_HEADER_SIZE, WIRE_MAGIC, WIRE_VERSION, (uint8_t)flags,
			   WIRE_OP_MACHINE_INFO, 0, 300);
		expect_close(frame, WIRE_HEADER_SIZE, WIRE_STATUS_MALFORMED,
			     flags == WIRE_FLAG_REPLY ? 300 : 0);
	}
	raw_header(frame, WIRE_HEADER_SIZE, 0x484D, WIRE_VERSION, 0, WIRE_OP_MACHINE_INFO, 0, 301);
	expect_close(frame, WIRE_HEADER_SIZE, WIRE_STATUS_MALFORMED, 0);
	raw_header(frame, WIRE_HEADER_SIZE, WIRE_MAGIC, WIRE_VERSION, 0, WIRE_OP_MACHINE_INFO, 1, 302);
	expect_close(frame, WIRE_HEADER_SIZE, WIRE_STATUS_MALFORMED, 302);
	raw_header(frame, WIRE_HEADER_SIZE, WIRE_MAGIC, WIRE_VERSION, 0, WIRE_OP_MACHINE_INFO,
		   UINT16_MAX, 303);
	expect_close(frame, WIRE_HEADER_SIZE, WIRE_STATUS_MALFORMED, 303);
	fd = connect_raw();
	assert_int_equal(request(fd, WIRE_OP_MACHINE_INFO, 0, NULL, 0), WIRE_STATUS_OK);
	assert_int_equal(request(fd, WIRE_OP_MACHINE_INFO, UINT32_MAX, NULL, 0), WIRE_STATUS_OK);
	close(fd);
	closes_logged();
	assert_true(bystander_progress(&bystander, 5));
}

/* Every op number msrd does not implement, pipelined 32 at a time on one connection. */
static void test_unimplemented_ops(void **state)
{
	uint32_t last = harness_small_scale() ? 0x1000 : UINT16_MAX;
	size_t logged = msrd_log_count(&server, "is not implemented");
	size_t sent = 0;
	int fd = connect_raw();

	(void)state;
	for (uint32_t first = 0; first <= last; first += 32) {
		size_t length = 0;
		uint32_t count = 0;
		for (uint32_t op = first; op < first + 32 && op <= last; op++) {
			if (is_implemented(op))
				continue;
			length += raw_frame(frame + length, sizeof(frame) - length, (uint16_t)op,
					    op, NULL, 0);
			count++;
		}
		assert_int_equal(raw_send(fd, frame, length), 0);
		for (uint32_t i = 0; i < count; i++) {
			struct wire_header header;
			assert_int_equal(raw_read_frame(fd, reply, sizeof(reply), &header,
							TIMEOUT_MS, NULL),
					 0);
			assert_int_equal(header.status, WIRE_STATUS_UNSUPPORTED);
			assert_int_equal(header.op, header.request_id);
		}
		sent += count;
	}
	/* Still usable. */
	assert_int_equal(request(fd, WIRE_OP_MACHINE_INFO, 1, NULL, 0), WIRE_STATUS_OK);
	close(fd);
	for (int i = 0; i < 3000 && msrd_log_count(&server, "is not implemented") < logged + sent;
	     i++)
		usleep(10000);
	assert_int_equal(msrd_log_count(&server, "is not implemented"), logged + sent);
	assert_true(bystander_progress(&bystander, 5));
}

static void test_implemented_ops_wrong_shape(void **state)
{
	static uint8_t zeros[WIRE_MAX_PAYLOAD];
	int fd;

	(void)state;
	for (size_t i = 0; i < sizeof(every_op) / sizeof(every_op[0]); i++) {
		uint16_t op = every_op[i];
		size_t length;

		if (!is_implemented(op))
			continue;
		if (op != WIRE_OP_MACHINE_INFO) {
			length = raw_frame(frame, sizeof(frame), op, 400 + op, NULL, 0);
			expect_close(frame, length, WIRE_STATUS_MALFORMED, 400 + op);
		}
		length = raw_frame(frame, sizeof(frame), op, 500 + op, zeros, sizeof(zeros));
		expect_close(frame, length, WIRE_STATUS_MALFORMED, 500 + op);
	}
	fd = connect_raw();
	assert_int_equal(request(fd, WIRE_OP_MACHINE_INFO, 1, NULL, 0), WIRE_STATUS_OK);
	close(fd);
	closes_logged();
	assert_true(bystander_progress(&bystander, 5));
}

/* A BATCH payload of `count` TSC reads; the header's count may be set apart from the ops. */
static size_t batch_payload(uint8_t *payload, uint32_t count, uint32_t ops, uint32_t flags,
			    uint16_t kind, uint16_t op_flags)
{
	struct wire_writer writer;

	wire_writer_init(&writer, payload, WIRE_MAX_PAYLOAD);
	wire_put_u32(&writer, count);
	wire_put_u32(&writer, flags);
	for (uint32_t i = 0; i < ops; i++) {
		wire_put_u16(&writer, kind);
		wire_put_u16(&writer, op_flags);
		wire_put_u32(&writer, 0);
		wire_put_u32(&writer, 0x10);
		wire_put_u32(&writer, 0);
		wire_put_u64(&writer, 0);
	}
	return writer.used;
}

static void test_counts_and_reserved_fields(void **state)
{
	static uint8_t payload[WIRE_MAX_PAYLOAD];
	size_t refused = msrd_log_count(&server, "refused: uid 0 ");
	struct wire_writer writer;
	size_t length;
	int fd = connect_raw();

	(void)state;
	length = batch_payload(payload, 0, 0, 0, WIRE_BATCH_READ, 0);
	assert_int_equal(request(fd, WIRE_OP_BATCH, 1, payload, length), WIRE_STATUS_INVALID);
	length = batch_payload(payload, 1, 1, 0, WIRE_BATCH_READ, 0);
	assert_int_equal(request(fd, WIRE_OP_BATCH, 2, payload, length), WIRE_STATUS_OK);
	length = batch_payload(payload, 1024, 1024, 0, WIRE_BATCH_READ, 0);
	assert_int_equal(request(fd, WIRE_OP_BATCH, 3, payload, length), WIRE_STATUS_OK);
	length = batch_payload(payload, 1025, 1025, 0, WIRE_BATCH_READ, 0);
	assert_int_equal(request(fd, WIRE_OP_BATCH, 4, payload, length), WIRE_STATUS_INVALID);
	length = batch_payload(payload, 1, 1, 1, WIRE_BATCH_READ, 0);
	assert_int_equal(request(fd, WIRE_OP_BATCH, 5, payload, length), WIRE_STATUS_INVALID);
	/* Op kinds outside 1..4 and op flags: the batch is refused whole, nothing runs. */
	length = batch_payload(payload, 1, 1, 0, 0, 0);
	assert_int_equal(request(fd, WIRE_OP_BATCH, 6, payload, length), WIRE_STATUS_UNSUPPORTED);
	length = batch_payload(payload, 1, 1, 0, 5, 0);
	assert_int_equal(request(fd, WIRE_OP_BATCH, 7, payload, length), WIRE_STATUS_UNSUPPORTED);
	length = batch_payload(payload, 1, 1, 0, UINT16_MAX, 0);
	assert_int_equal(request(fd, WIRE_OP_BATCH, 8, payload, length), WIRE_STATUS_UNSUPPORTED);
	length = batch_payload(payload, 1, 1, 0, WIRE_BATCH_READ, 1);
	assert_int_equal(request(fd, WIRE_OP_BATCH, 9, payload, length), WIRE_STATUS_INVALID);
	/* Slot-id lists of 0 and 257 ids (the lengths matching). */
	wire_writer_init(&writer, payload, sizeof(payload));
	wire_put_u16(&writer, WIRE_SLOT_ENABLE);
	wire_put_u16(&writer, 0);
	wire_put_u32(&writer, 0);
	assert_int_equal(request(fd, WIRE_OP_SLOT_CONTROL, 10, payload, writer.used),
			 WIRE_STATUS_INVALID);
	wire_writer_init(&writer, payload, sizeof(payload));
	wire_put_u16(&writer, 0);
	wire_put_u16(&writer, 0);
	wire_put_u32(&writer, WIRE_MAX_SLOT_IDS + 1);
	for (uint32_t i = 0; i <= WIRE_MAX_SLOT_IDS; i++)
		wire_put_u32(&writer, i + 1);
	assert_int_equal(request(fd, WIRE_OP_SLOT_READ, 11, payload, writer.used),
			 WIRE_STATUS_INVALID);
	/* A ring of 17 counters. */
	wire_writer_init(&writer, payload, sizeof(payload));
	wire_put_ring_create(&writer, &(struct wire_ring_create){ .major = 1, .capacity = 64,
								  .clock = 1 });
	memcpy(payload + 24, &(uint32_t){ WIRE_MAX_RING_COUNTERS + 1 }, 4);
	memset(payload + writer.used, 0, (WIRE_MAX_RING_COUNTERS + 1) * WIRE_RING_COUNTER_SIZE);
	assert_int_equal(request(fd, WIRE_OP_RING_CREATE, 12, payload,
				 writer.used + (WIRE_MAX_RING_COUNTERS + 1) * WIRE_RING_COUNTER_SIZE),
			 WIRE_STATUS_INVALID);
	/* HELLO: a version range without 1, and flags. */
	wire_writer_init(&writer, payload, sizeof(payload));
	wire_put_hello_request(&writer, &(struct wire_hello_request){ 2, UINT16_MAX, 0, "x" });
	assert_int_equal(request(fd, WIRE_OP_HELLO, 13, payload, writer.used), WIRE_STATUS_VERSION);
	wire_writer_init(&writer, payload, sizeof(payload));
	wire_put_hello_request(&writer, &(struct wire_hello_request){ 1, 0, 0, "x" });
	assert_int_equal(request(fd, WIRE_OP_HELLO, 14, payload, writer.used), WIRE_STATUS_VERSION);
	wire_writer_init(&writer, payload, sizeof(payload));
	wire_put_hello_request(&writer, &(struct wire_hello_request){ 1, 1, UINT32_MAX, "x" });
	assert_int_equal(request(fd, WIRE_OP_HELLO, 15, payload, writer.used), WIRE_STATUS_INVALID);
	/* A client name that fills its field without a terminating NUL is cut, not overrun. */
	wire_writer_init(&writer, payload, sizeof(payload));
	wire_put_hello_request(&writer, &(struct wire_hello_request){ 1, 1, 0, "" });
	memset(payload + 8, 'A', WIRE_NAME_MAX);
	assert_int_equal(request(fd, WIRE_OP_HELLO, 16, payload, writer.used), WIRE_STATUS_OK);
	close(fd);
	/* One refusal line each for the 13 requests refused above. */
	assert_true(msrd_wait_log(&server, "op HELLO: HELLO flags must be 0", TIMEOUT_MS));
	assert_int_equal(msrd_log_count(&server, "refused: uid 0 "), refused + 13);
	assert_true(bystander_progress(&bystander, 5));
}

HARDENING_BYSTANDER_FIXTURES(server, bystander)

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--frame-timeout-ms", "600000", NULL };
	const struct CMUnitTest tests[] = {
		BYSTANDER_TEST(test_lengths),
		BYSTANDER_TEST(test_header_fields),
		BYSTANDER_TEST(test_implemented_ops_wrong_shape),
		BYSTANDER_TEST(test_counts_and_reserved_fields),
		/* Last: its 65 000 log lines would make every later log search slow. */
		BYSTANDER_TEST(test_unimplemented_ops),
	};

	return MSRD_RUN_GROUP(&server, HARDENING_POLICY, arguments, NULL, tests);
}
