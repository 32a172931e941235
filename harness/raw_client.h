/*
 * harness/raw_client.h — a client that speaks protocol v1 byte by byte, for tests that send
 * malformed frames or need to see exactly what msrd answers (no libclient in between).
 */
#ifndef HAECER_HARNESS_RAW_CLIENT_H
#define HAECER_HARNESS_RAW_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "proto/wire.h"

/* A connected socket, or -errno. */
int raw_connect(const char *path);
/* Write all bytes (MSG_NOSIGNAL); 0 or -errno. */
int raw_send(int fd, const void *data, size_t length);
/* A request frame with the given payload into buffer; returns its length. */
size_t raw_frame(uint8_t *buffer, size_t size, uint16_t op, uint32_t request_id,
		 const void *payload, size_t payload_length);
/* A READ request frame (header + payload) for `address` on `cpu`; returns its length, 0 when
 * it does not fit in size bytes. */
size_t raw_read_request(uint8_t *buffer, size_t size, uint32_t request_id, uint32_t cpu,
			uint32_t address);
/* A HELLO frame from client `name` (request id `id`) followed by a READ of the TSC on CPU 0
 * (request id `id` + 1): what a minimal client sends first. Returns their length (at most 256). */
size_t raw_hello_and_read(uint8_t *frames, const char *name, uint32_t id);
/* Read the replies to raw_hello_and_read's frames (request ids id and id + 1) within timeout_ms:
 * 1 when both came, in order, OK; 0 when the server turned the connection away instead (an
 * ERROR frame with LIMIT) and closed it; -EPROTO for any other reply, or raw_read_frame's error. */
int raw_read_hello_and_read(int fd, uint32_t id, unsigned timeout_ms);
/* Read one whole frame (header + payload) within timeout_ms. 0, -ECONNRESET when the server
 * closed the connection first, -ETIMEDOUT, -EBADMSG for an undecodable header. *fd_received (may
 * be NULL) gets a descriptor that came with it, or -1. */
int raw_read_frame(int fd, uint8_t *buffer, size_t size, struct wire_header *header,
		   unsigned timeout_ms, int *fd_received);
/* Whether the server closes the connection within timeout_ms (any bytes before are dropped). */
int raw_wait_closed(int fd, unsigned timeout_ms);

#endif
