/*
 * server/client_input.c — a client's input: its multishot receive and the framing of what it
 * sends.
 *
 * Received bytes come in the loop's shared provided buffers; whole frames are handled straight
 * from them, and only the bytes of a frame that is not complete yet (or frames waiting behind an
 * asynchronous request) are copied into the client's own input buffer, which exists only while
 * it holds something. Requests of one client are handled strictly in order, one at a time, so
 * replies leave in request order.
 *
 * End of input: a client that shut down only its sending side (shutdown(SHUT_WR)) still gets the
 * replies to everything it sent, then msrd closes the connection; one that closed its socket
 * whole (POLLHUP: nobody is left to read) is closed at once.
 */
#include "server/client_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <valgrind/memcheck.h>

void client_cancel_recv(struct client *client)
{
	struct io_uring_sqe *sqe;

	if (!client->recv_armed || client->recv_cancelling)
		return;
	sqe = loop_sqe(&client->server->loop);
	io_uring_prep_cancel64(sqe, loop_user_data(client, TAG_RECV, 0), 0);
	io_uring_sqe_set_data64(sqe, loop_user_data(NULL, TAG_IGNORE, 0));
	client->recv_cancelling = true;
}

void client_rearm_recv(struct client *client)
{
	struct io_uring_sqe *sqe;

	if (client->recv_armed || client->closing || client->draining || client->peer_closed ||
	    client->input_used >= CLIENT_MAX_INPUT)
		return;
	sqe = loop_sqe(&client->server->loop);
	io_uring_prep_recv_multishot(sqe, client->fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = LOOP_BUFFER_GROUP;
	io_uring_sqe_set_data64(sqe, loop_user_data(client, TAG_RECV, 0));
	client->recv_armed = true;
	client->recv_cancelling = false;
	client->sqes_in_flight++;
}

static int append_input(struct client *client, const uint8_t *data, size_t length)
{
	size_t needed = (size_t)client->input_used + length;

	if (needed > client->input_capacity) {
		size_t capacity = client->input_capacity > 0 ? client->input_capacity : 512u;
		uint8_t *bigger;
		while (capacity < needed)
			capacity *= 2;
		bigger = realloc(client->input, capacity);
		if (bigger == NULL)
			return -ENOMEM;
		client->input = bigger;
		client->input_capacity = (uint32_t)capacity;
	}
	memcpy(client->input + client->input_used, data, length);
	client->input_used = (uint32_t)needed;
	if (client->input_used >= CLIENT_MAX_INPUT)
		client_cancel_recv(client);
	return 0;
}

/* Handle whole frames at the start of data; returns how many bytes were used. Stops at a partial
 * frame or when the client must wait. */
static size_t handle_frames(struct client *client, const uint8_t *data, size_t length)
{
	size_t offset = 0;

	while (offset < length && !client_blocked(client)) {
		struct wire_header header;
		int status = wire_header_decode(data + offset, length - offset, WIRE_MAX_FRAME,
						&header);
		if (status == -EAGAIN)
			break;
		if (status < 0) {
			char detail[96];
			if (status == -EPROTONOSUPPORT)
				snprintf(detail, sizeof(detail),
					 "protocol version %u (this server speaks %u)",
					 header.version, WIRE_VERSION);
			else if (status == -EMSGSIZE)
				snprintf(detail, sizeof(detail),
					 "frame of %u bytes (the limit is %u)", header.length,
					 WIRE_MAX_FRAME);
			else
				snprintf(detail, sizeof(detail), "bad frame header");
			client_fail(client, status == -EBADMSG ? 0 : header.request_id,
				    wire_status_from_errno(status), detail);
			return length;
		}
		if (header.length > length - offset)
			break;
		client->frame_started_ns = 0;
		if (msr_exec_must_wait(client, &header, data + offset + WIRE_HEADER_SIZE,
				       header.length - WIRE_HEADER_SIZE)) {
			msr_exec_wait_for_lock(client);
			break;
		}
		dispatch_frame(client, &header, data + offset + WIRE_HEADER_SIZE,
			       header.length - WIRE_HEADER_SIZE);
		offset += header.length;
	}
	return offset;
}

/* A partial frame is on the clock; frames waiting behind the client's own queue are not. */
static void note_partial_frame(struct client *client)
{
	if (client->input_used == 0 || client->peer_closed || client_blocked(client)) {
		client->frame_started_ns = 0;
		return;
	}
	if (client->frame_started_ns == 0) {
		client->frame_started_ns = msrd_now_ns();
		client_watch_deadline(client);
	}
}

static void take_bytes(struct client *client, const uint8_t *data, size_t length)
{
	size_t used = 0;

	if (client->input_used == 0) {
		used = handle_frames(client, data, length);
		if (client->closing || client->draining)
			return;
	}
	if (used < length && append_input(client, data + used, length - used) < 0) {
		client_close(client, "out of memory for its input");
		return;
	}
	if (used == 0 && client->input_used > length)
		client_process_input(client); /* older bytes were waiting: the new ones may complete them */
	else
		note_partial_frame(client);
}

void client_process_input(struct client *client)
{
	size_t used;

	if (client->input_used > 0) {
		used = handle_frames(client, client->input, client->input_used);
		if (client->closing || client->draining)
			return;
		if (used > 0) {
			memmove(client->input, client->input + used, client->input_used - used);
			client->input_used -= (uint32_t)used;
		}
		if (client->input_used == 0) {
			free(client->input);
			client->input = NULL;
			client->input_capacity = 0;
		}
	}
	note_partial_frame(client);
	if (!client->recv_armed && !client->recv_rearm)
		client_rearm_recv(client);
}

/* A half-closed client is closed once everything it sent is answered and sent: no request
 * running or waiting, no reply queued or in flight. What is left of its input then is a frame
 * that can never be completed. */
void client_close_if_answered(struct client *client)
{
	if (!client->peer_closed || client->closing || client->job != NULL ||
	    client->lock_waiting || client->send_armed || client->pending.used > 0 ||
	    client->sending_offset < client->sending.used)
		return;
	client_close(client, "closed by the client");
}

/* The peer ended its input. Closed whole (POLLHUP: nobody is left to read a reply): close now.
 * Only its sending side shut: answer what it sent, then close. */
static void on_end_of_input(struct client *client)
{
	struct pollfd hangup = { .fd = client->fd, .events = POLLOUT };

	if (client->closing)
		return;
	if (poll(&hangup, 1, 0) > 0 && (hangup.revents & (POLLHUP | POLLERR)) != 0) {
		client_close(client, "closed by the client");
		return;
	}
	log_debug("client %u: end of input; answering what it sent", client->number);
	client->peer_closed = true;
	client->frame_started_ns = 0;
	client_close_if_answered(client);
}

void client_resume(struct client *client)
{
	if (client->closing || client->draining || client_blocked(client))
		return;
	client_process_input(client);
	client_close_if_answered(client);
}

void client_on_recv(struct client *client, const struct io_uring_cqe *cqe)
{
	bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
	int result = cqe->res;

	if (!more)
		client->recv_armed = false;
	if (cqe->flags & IORING_CQE_F_BUFFER) {
		const uint8_t *data = loop_received(&client->server->loop, cqe);
		if (result > 0 && !client->closing && !client->draining) {
			/* The kernel wrote the buffer behind valgrind's back. */
			VALGRIND_MAKE_MEM_DEFINED(data, (size_t)result);
			take_bytes(client, data, (size_t)result);
		}
		loop_release_received(&client->server->loop, cqe);
	} else if (result == 0) {
		on_end_of_input(client);
	} else if (result == -ENOBUFS) {
		/* Every shared buffer was in use: try again once this turn gave them back. */
		log_debug("client %u: receive buffers exhausted, re-arming its receive",
			  client->number);
		loop_buffers_exhausted(&client->server->loop);
		if (!client->closing && !client->recv_rearm) {
			client->recv_rearm = true;
			client->next_rearm = client->server->rearm;
			client->server->rearm = client;
		}
	} else if (result < 0 && result != -ECANCELED && !client->closing) {
		char reason[96];
		snprintf(reason, sizeof(reason), "receive failed: %s", strerror(-result));
		client_close(client, reason);
	}
	if (!more) {
		client->recv_cancelling = false;
		if (!client->closing && !client->recv_rearm)
			client_rearm_recv(client);
		client_sqe_done(client);
	}
}

