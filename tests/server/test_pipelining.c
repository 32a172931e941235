/*
 * A client that pipelines far more than msrd buffers (here 128 BATCH requests of 1024 reads,
 * about 3 MiB) without reading a reply is throttled, not dropped (review finding 6): msrd
 * stops reading from it while its replies are unread, and once the client reads, every request
 * is answered in order on the same connection. Only --client-timeout-ms (left long here) ends
 * a client that never reads again. Before, msrd closed it as soon as more than 128 KiB of input
 * had arrived behind unread replies.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

#include "haecer/msrd.h"
#include "proto/wire.h"
#include "tests/lib/msrd_group.h"
#include "harness/policy_text.h"
#include "harness/raw_client.h"

#define REQUESTS 128u
#define STALL_MS 1000 /* no progress for this long: msrd stopped reading */

static const char policy[] = POLICY_TSC_FOR_ANYONE;

static struct msrd_server server;

/* REQUESTS BATCH frames of WIRE_MAX_BATCH_OPS reads of the TSC, back to back. */
static uint8_t *batch_frames(size_t *length)
{
	size_t payload_size = WIRE_BATCH_HEADER_SIZE + WIRE_MAX_BATCH_OPS * WIRE_BATCH_OP_SIZE;
	uint8_t *payload = malloc(payload_size);
	size_t frame_size = WIRE_HEADER_SIZE + payload_size;
	uint8_t *frames = malloc(REQUESTS * frame_size);
	struct wire_writer writer;

	assert_non_null(payload);
	assert_non_null(frames);
	wire_writer_init(&writer, payload, payload_size);
	wire_put_batch_header(&writer, WIRE_MAX_BATCH_OPS);
	for (uint32_t i = 0; i < WIRE_MAX_BATCH_OPS; i++) {
		struct wire_batch_op op = { .kind = WIRE_BATCH_READ, .cpu = i % 2, .address = 0x10 };
		wire_put_batch_op(&writer, &op);
	}
	for (uint32_t i = 0; i < REQUESTS; i++)
		raw_frame(frames + i * frame_size, frame_size, WIRE_OP_BATCH, i + 1, payload,
			  writer.used);
	free(payload);
	*length = REQUESTS * frame_size;
	return frames;
}

/* Send until the socket takes nothing for STALL_MS; returns how much was sent. */
static size_t send_until_stalled(int fd, const uint8_t *data, size_t length)
{
	size_t sent = 0;

	while (sent < length) {
		struct pollfd writable = { .fd = fd, .events = POLLOUT };
		ssize_t put = send(fd, data + sent, length - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (put > 0) {
			sent += (size_t)put;
			continue;
		}
		assert_true(put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
		if (poll(&writable, 1, STALL_MS) == 0)
			break;
	}
	return sent;
}

static void test_throttled_not_dropped(void **state)
{
	size_t reply_size = WIRE_HEADER_SIZE + WIRE_BATCH_HEADER_SIZE +
			    WIRE_MAX_BATCH_OPS * WIRE_BATCH_RESULT_SIZE;
	uint8_t *reply = malloc(reply_size);
	struct wire_header header;
	size_t length, sent;
	uint8_t *frames = batch_frames(&length);
	int fd = raw_connect(server.socket_path);

	(void)state;
	assert_non_null(reply);
	assert_true(fd >= 0);
	sent = send_until_stalled(fd, frames, length);
	fprintf(stderr, "pipelined %zu of %zu bytes before msrd stopped reading\n", sent, length);
	/* Well past what msrd keeps of one client's input behind its unread replies. */
	assert_true(sent > 256u * 1024u);
	assert_true(sent < length);
	/* Reading makes room: the rest goes out as msrd takes it. */
	for (uint32_t i = 0; i < REQUESTS;) {
		struct pollfd ready = { .fd = fd, .events = POLLIN | (sent < length ? POLLOUT : 0) };
		assert_true(poll(&ready, 1, 60000) > 0);
		if (ready.revents & POLLOUT) {
			ssize_t put = send(fd, frames + sent, length - sent,
					   MSG_NOSIGNAL | MSG_DONTWAIT);
			sent += put > 0 ? (size_t)put : 0;
		}
		if (!(ready.revents & POLLIN))
			continue;
		assert_int_equal(raw_read_frame(fd, reply, reply_size, &header, 60000, NULL), 0);
		assert_int_equal(header.op, WIRE_OP_BATCH);
		assert_int_equal(header.status, WIRE_STATUS_OK);
		assert_int_equal(header.request_id, ++i);
	}
	assert_int_equal(sent, length);
	assert_false(msrd_log_contains(&server, "disconnected"));
	close(fd);
	free(frames);
	free(reply);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--client-timeout-ms", "600000", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_throttled_not_dropped),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
