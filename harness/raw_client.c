/*
 * harness/raw_client.c — protocol v1 by hand, for tests.
 */
#include "harness/raw_client.h"
#include "common/clock.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/fdpass.h"

int raw_connect(const char *path)
{
	struct sockaddr_un address = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(address.sun_path, sizeof(address.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0) {
		int status = -errno;
		close(fd);
		return status;
	}
	return fd;
}

int raw_send(int fd, const void *data, size_t length)
{
	const uint8_t *bytes = data;

	while (length > 0) {
		ssize_t sent = send(fd, bytes, length, MSG_NOSIGNAL);
		if (sent < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		bytes += sent;
		length -= (size_t)sent;
	}
	return 0;
}

size_t raw_frame(uint8_t *buffer, size_t size, uint16_t op, uint32_t request_id,
		 const void *payload, size_t payload_length)
{
	int length;

	if (size < WIRE_HEADER_SIZE + payload_length)
		return 0;
	if (payload_length > 0)
		memcpy(buffer + WIRE_HEADER_SIZE, payload, payload_length);
	length = wire_frame_finish(buffer, size, op, 0, 0, request_id, payload_length);
	return length > 0 ? (size_t)length : 0;
}

size_t raw_read_request(uint8_t *buffer, size_t size, uint32_t request_id, uint32_t cpu,
			uint32_t address)
{
	uint8_t payload[WIRE_READ_REQUEST_SIZE];
	struct wire_read_request request = { .cpu = cpu, .address = address };
	struct wire_writer writer;

	wire_writer_init(&writer, payload, sizeof(payload));
	wire_put_read_request(&writer, &request);
	return raw_frame(buffer, size, WIRE_OP_READ, request_id, payload, writer.used);
}

size_t raw_hello_and_read(uint8_t *frames, const char *name, uint32_t id)
{
	uint8_t payload[WIRE_HELLO_REQUEST_SIZE];
	struct wire_hello_request hello = { .min_version = 1, .max_version = 1 };
	struct wire_writer writer;
	size_t length;

	snprintf(hello.client_name, sizeof(hello.client_name), "%s", name);
	wire_writer_init(&writer, payload, sizeof(payload));
	wire_put_hello_request(&writer, &hello);
	length = raw_frame(frames, 128, WIRE_OP_HELLO, id, payload, writer.used);
	length += raw_read_request(frames + length, 128, id + 1, 0, 0x10);
	return length;
}

static long long now_ms(void)
{
	return (long long)(clock_monotonic_ns() / 1000000);
}

static int wait_readable(int fd, long long deadline)
{
	struct pollfd poller = { .fd = fd, .events = POLLIN };
	long long left = deadline - now_ms();
	int ready;

	if (left < 0)
		left = 0;
	ready = poll(&poller, 1, (int)left);
	if (ready < 0)
		return -errno;
	return ready == 0 ? -ETIMEDOUT : 0;
}

/* recvmsg of exactly `length` bytes in pieces, collecting one descriptor (fdpass closes any
 * other). */
static int receive_exactly(int fd, uint8_t *buffer, size_t length, long long deadline,
			   int *fd_received)
{
	size_t got = 0;

	while (got < length) {
		ssize_t now;
		int status = wait_readable(fd, deadline);
		if (status < 0)
			return status;
		now = fdpass_receive(fd, buffer + got, length - got, MSG_DONTWAIT, fd_received);
		if (now == -EAGAIN || now == -EINTR)
			continue;
		if (now < 0)
			return (int)now;
		if (now == 0)
			return -ECONNRESET;
		got += (size_t)now;
	}
	return 0;
}

int raw_read_frame(int fd, uint8_t *buffer, size_t size, struct wire_header *header,
		   unsigned timeout_ms, int *fd_received)
{
	long long deadline = now_ms() + timeout_ms;
	int status;

	if (fd_received != NULL)
		*fd_received = -1;
	if (size < WIRE_HEADER_SIZE)
		return -EINVAL;
	status = receive_exactly(fd, buffer, WIRE_HEADER_SIZE, deadline, fd_received);
	if (status < 0)
		return status;
	if (wire_header_decode(buffer, WIRE_HEADER_SIZE, (uint32_t)size, header) < 0)
		return -EBADMSG;
	return receive_exactly(fd, buffer + WIRE_HEADER_SIZE, header->length - WIRE_HEADER_SIZE,
			       deadline, fd_received);
}

int raw_wait_closed(int fd, unsigned timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;
	uint8_t sink[4096];

	for (;;) {
		ssize_t got;
		int status = wait_readable(fd, deadline);
		if (status < 0)
			return status;
		got = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (got == 0 || (got < 0 && errno == ECONNRESET))
			return 0;
		if (got < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
	}
}

int raw_read_hello_and_read(int fd, uint32_t id, unsigned timeout_ms)
{
	uint8_t reply[256];
	struct wire_header header;
	int status = raw_read_frame(fd, reply, sizeof(reply), &header, timeout_ms, NULL);

	if (status < 0)
		return status;
	if (header.op == WIRE_OP_ERROR && header.status == WIRE_STATUS_LIMIT)
		return raw_wait_closed(fd, timeout_ms) == 0 ? 0 : -EPROTO;
	if (header.op != WIRE_OP_HELLO || header.status != WIRE_STATUS_OK || header.request_id != id)
		return -EPROTO;
	status = raw_read_frame(fd, reply, sizeof(reply), &header, timeout_ms, NULL);
	if (status < 0)
		return status;
	if (header.op != WIRE_OP_READ || header.status != WIRE_STATUS_OK ||
	    header.request_id != id + 1)
		return -EPROTO;
	return 1;
}
