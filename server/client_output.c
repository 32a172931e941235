/*
 * server/client_output.c — a client's replies: the queue and its sends.
 *
 * Replies are appended to `pending`; one send at a time is in flight from `sending` (the kernel
 * reads that memory until the send completes, so it is never reallocated meanwhile); when it
 * completes the two swap. A reply that carries a descriptor is sent by its own sendmsg with
 * SCM_RIGHTS, so the descriptor arrives with the reply's first bytes.
 */
#include "server/client_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <unistd.h>

#define KEEP_BUFFER_BYTES 4096u /* larger buffers are freed once empty */
#define REPLY_BUFFER_BYTES 256u /* a reply buffer's first size */
#define SPARE_REPLY_BUFFERS 64u

/*
 * Reply buffers whose send completed, the most recently given back on top. A buffer kept per
 * client is, with thousands of busy clients, a cold line each reply writes (callgrind at 10 000
 * clients: 1.15 last-level misses per READ); the next reply takes the buffer a send gave back
 * last, still in the cache. Not malloc's own cache: past its 7 blocks per size, free and malloc
 * took 220 instructions per READ. File-scope: msrd serves its clients from one thread.
 */
static struct {
	uint8_t *data[SPARE_REPLY_BUFFERS];
	unsigned count;
} spares;

static void release_output(struct output_buffer *buffer)
{
	if (buffer->capacity == REPLY_BUFFER_BYTES && spares.count < SPARE_REPLY_BUFFERS)
		spares.data[spares.count++] = buffer->data;
	else
		free(buffer->data);
	*buffer = (struct output_buffer){ 0 };
}

struct fd_send {
	struct msghdr message;
	struct iovec vector;
	union {
		char buffer[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
};

static int reserve_output(struct output_buffer *buffer, size_t extra)
{
	size_t needed = (size_t)buffer->used + extra;
	size_t capacity;
	uint8_t *bigger;

	if (needed <= buffer->capacity)
		return 0;
	if (buffer->capacity == 0 && needed <= REPLY_BUFFER_BYTES && spares.count > 0) {
		buffer->data = spares.data[--spares.count];
		buffer->capacity = REPLY_BUFFER_BYTES;
		return 0;
	}
	capacity = buffer->capacity > 0 ? buffer->capacity : REPLY_BUFFER_BYTES;
	while (capacity < needed)
		capacity *= 2;
	bigger = realloc(buffer->data, capacity);
	if (bigger == NULL)
		return -ENOMEM;
	buffer->data = bigger;
	buffer->capacity = (uint32_t)capacity;
	return 0;
}

static void mark_dirty(struct client *client)
{
	if (client->dirty)
		return;
	client->dirty = true;
	client->next_dirty = client->server->dirty;
	client->server->dirty = client;
}

uint8_t *client_reply_space(struct client *client, size_t max_length)
{
	if (client->closing)
		return NULL;
	if (client_queued_bytes(client) + max_length > CLIENT_MAX_QUEUED) {
		client_close(client, "reply queue full: the client does not read its replies");
		return NULL;
	}
	if (reserve_output(&client->pending, max_length) < 0) {
		client_close(client, "out of memory for replies");
		return NULL;
	}
	return client->pending.data + client->pending.used;
}

void client_reply_commit(struct client *client, size_t frame_length, int fd)
{
	if (fd >= 0) {
		client->fd_marks[client->fd_mark_count++] = (struct fd_mark){
			.offset = client->stream_queued,
			.fd = fd,
		};
	}
	client->pending.used += (uint32_t)frame_length;
	client->stream_queued += frame_length;
	client->replies_pending++;
	mark_dirty(client);
}

void client_reply_error(struct client *client, uint16_t op, uint32_t request_id, uint16_t status,
			const char *format, ...)
{
	char detail[WIRE_MAX_DETAIL + 1];
	uint8_t *space = client_reply_space(client, WIRE_HEADER_SIZE + WIRE_MAX_DETAIL);
	va_list arguments;
	int length;

	if (space == NULL)
		return;
	va_start(arguments, format);
	vsnprintf(detail, sizeof(detail), format, arguments);
	va_end(arguments);
	if (!client->refusal_logged && client_refusal_loggable(client)) {
		log_notice("refused: uid %u pid %d op %s: %s (%s)", (unsigned)client->uid,
			   (int)client->pid, wire_op_name(op), detail, wire_status_text(status));
		client->refusal_logged = true;
	}
	length = wire_encode_error(space, WIRE_HEADER_SIZE + WIRE_MAX_DETAIL, op, status,
				   request_id, detail);
	if (length > 0)
		client_reply_commit(client, (size_t)length, -1);
}

void client_fail(struct client *client, uint32_t request_id, uint16_t status, const char *detail)
{
	uint8_t *space;
	int length;
	char line[WIRE_MAX_DETAIL + 64];

	if (client->closing || client->draining)
		return;
	snprintf(line, sizeof(line), "protocol error (%s): %s; closing", wire_status_text(status),
		 detail);
	client_log(client, LOG_LEVEL_NOTICE, line);
	space = client_reply_space(client, WIRE_HEADER_SIZE + WIRE_MAX_DETAIL);
	if (space == NULL)
		return;
	length = wire_encode_error(space, WIRE_HEADER_SIZE + WIRE_MAX_DETAIL, WIRE_OP_ERROR, status,
				   request_id, detail);
	if (length > 0)
		client_reply_commit(client, (size_t)length, -1);
	client->draining = true;
	client->frame_started_ns = 0;
	client_cancel_recv(client);
}

static void prepare_fd_send(struct client *client, struct io_uring_sqe *sqe, const uint8_t *data,
			    size_t length, int fd)
{
	struct fd_send *send = client->fd_send;
	struct cmsghdr *cmsg;

	send->vector = (struct iovec){ .iov_base = (void *)data, .iov_len = length };
	send->message = (struct msghdr){
		.msg_iov = &send->vector,
		.msg_iovlen = 1,
		.msg_control = send->control.buffer,
		.msg_controllen = sizeof(send->control.buffer),
	};
	cmsg = CMSG_FIRSTHDR(&send->message);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	io_uring_prep_sendmsg(sqe, client->fd, &send->message, MSG_NOSIGNAL);
}

/* Make `sending` hold unsent bytes: swap in the pending replies when it is used up. */
static bool refill_sending(struct client *client)
{
	struct output_buffer spent = client->sending;

	if (client->sending_offset < client->sending.used)
		return true;
	if (client->pending.used == 0)
		return false;
	if (spent.capacity > KEEP_BUFFER_BYTES) {
		free(spent.data);
		spent = (struct output_buffer){ 0 };
	}
	client->sending = client->pending;
	client->pending = (struct output_buffer){ .data = spent.data, .capacity = spent.capacity };
	client->sending_offset = 0;
	client->replies_sending = client->replies_pending;
	client->replies_pending = 0;
	return true;
}

static void start_send(struct client *client)
{
	const uint8_t *data;
	size_t length;
	struct io_uring_sqe *sqe;
	int fd = -1;

	if (client->send_armed || client->closing)
		return;
	if (!refill_sending(client)) {
		if (client->draining)
			client_close(client, "closed after a protocol error");
		return;
	}
	data = client->sending.data + client->sending_offset;
	length = client->sending.used - client->sending_offset;
	if (client->fd_mark_count > 0) {
		uint64_t next = client->fd_marks[0].offset;
		if (next == client->stream_sent) {
			/* This reply carries a descriptor: send it alone, up to the next one. */
			fd = client->fd_marks[0].fd;
			if (client->fd_mark_count > 1)
				next = client->fd_marks[1].offset;
			else
				next = client->stream_sent + length;
		}
		if (next - client->stream_sent < length)
			length = (size_t)(next - client->stream_sent);
	}
	if (fd >= 0 && client->fd_send == NULL) {
		client->fd_send = malloc(sizeof(*client->fd_send));
		if (client->fd_send == NULL) {
			client_close(client, "out of memory for a descriptor reply");
			return;
		}
	}
	sqe = loop_sqe(&client->server->loop);
	if (fd >= 0)
		prepare_fd_send(client, sqe, data, length, fd);
	else
		io_uring_prep_send(sqe, client->fd, data, length, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, loop_user_data(client, TAG_SEND, fd >= 0 ? 1 : 0));
	if (fd < 0 && client->pending.used == 0 && !client->draining && !client->peer_closed &&
	    length == client->sending.used - client->sending_offset && !client_blocked(client))
		client->server->loop.quiet_sends++;
	client->send_armed = true;
	client->sqes_in_flight++;
	client->send_started_ns = msrd_now_ns();
	client_watch_deadline(client);
}

void client_flush(struct client *client)
{
	start_send(client);
}

bool client_idle_output(const struct client *client)
{
	return !client->closing && !client->send_armed && !client->draining &&
	       !client->peer_closed && client->pending.used == 0 &&
	       client->sending_offset >= client->sending.used && client->fd_mark_count == 0 &&
	       client->input_used == 0 && !client_blocked(client);
}

uint8_t *client_queue_linked(struct client *client, const uint8_t *frame, size_t length)
{
	uint8_t *space = client_reply_space(client, length);

	if (space == NULL)
		return NULL;
	memcpy(space, frame, length);
	client_reply_commit(client, length, -1);
	refill_sending(client);
	return client->sending.data;
}

void client_send_linked(struct client *client)
{
	struct io_uring_sqe *sqe = loop_sqe(&client->server->loop);

	io_uring_prep_send(sqe, client->fd, client->sending.data, client->sending.used,
			   MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, loop_user_data(client, TAG_SEND, 0));
	client->server->loop.quiet_sends++;
	client->linked_send = true;
	client->send_armed = true;
	client->sqes_in_flight++;
	client->send_started_ns = msrd_now_ns();
	client_watch_deadline(client);
}

void client_on_send(struct client *client, const struct io_uring_cqe *cqe)
{
	bool carried_fd = loop_index_of(io_uring_cqe_get_data64(cqe)) == 1;
	bool was_blocked = client_blocked(client);

	client->send_armed = false;
	client->send_started_ns = 0;
	if (client->frame_started_ns == 0)
		client_unwatch_deadline(client); /* the tick then sees only the sends still in flight */
	if (carried_fd) {
		free(client->fd_send);
		client->fd_send = NULL;
	}
	if (client->linked_send && cqe->res == -ECANCELED && !client->closing) {
		/* Its device read failed: the reply it would have sent is dropped; the error
		 * reply queued behind it goes out instead. Every reply queued since moves up by
		 * the dropped bytes, and so do the descriptors marked on them (the linked reply
		 * carries none): a mark left behind would send a descriptor with a later reply's
		 * middle bytes. */
		client->linked_send = false;
		for (uint8_t i = 0; i < client->fd_mark_count; i++)
			client->fd_marks[i].offset -= client->sending.used;
		client->stream_queued -= client->sending.used;
		client->sending.used = 0;
		client->sending_offset = 0;
		client->replies_sending = 0;
		start_send(client);
		client_sqe_done(client);
		return;
	}
	client->linked_send = false;
	if (cqe->res <= 0) {
		if (!client->closing) {
			char reason[96];
			snprintf(reason, sizeof(reason), "send failed: %s",
				 cqe->res < 0 ? strerror(-cqe->res) : "nothing sent");
			client_close(client, reason);
		}
		client_sqe_done(client);
		return;
	}
	if (carried_fd) {
		/* The descriptor went with the first byte; ours is no longer needed. */
		close(client->fd_marks[0].fd);
		memmove(&client->fd_marks[0], &client->fd_marks[1],
			sizeof(struct fd_mark) * (size_t)(client->fd_mark_count - 1));
		client->fd_mark_count--;
	}
	client->sending_offset += (uint32_t)cqe->res;
	client->stream_sent += (uint64_t)cqe->res;
	if (client->sending_offset >= client->sending.used) {
		release_output(&client->sending); /* for whichever client replies next */
		client->replies_sending = 0;
		client->sending_offset = 0;
	}
	if (!client->closing) {
		start_send(client);
		if (was_blocked && !client_blocked(client))
			client_process_input(client);
		client_close_if_answered(client);
	}
	client_sqe_done(client);
}

