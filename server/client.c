/*
 * server/client.c — one connected client: input framing, the reply queue, limits, timeouts.
 *
 * Input: received bytes come in the loop's shared provided buffers; whole frames are handled
 * straight from them, and only the bytes of a frame that is not complete yet (or frames waiting
 * behind an asynchronous request) are copied into the client's own input buffer, which exists
 * only while it holds something. Requests of one client are handled strictly in order, one at a
 * time, so replies leave in request order.
 *
 * Output: replies are appended to `pending`; one send at a time is in flight from `sending`
 * (the kernel reads that memory until the send completes, so it is never reallocated meanwhile);
 * when it completes the two swap. A reply that carries a descriptor is sent by its own sendmsg
 * with SCM_RIGHTS, so the descriptor arrives with the reply's first bytes.
 *
 * Limits: a client with CLIENT_MAX_IN_FLIGHT replies or CLIENT_PAUSE_BYTES queued is not
 * served further until they drain; once CLIENT_MAX_INPUT bytes wait in its input buffer its
 * multishot recv is cancelled, so msrd stops reading from it (throttled, not dropped: what the
 * kernel had already received by then is kept, at most what the shared receive buffers hold).
 * A reply queue over CLIENT_MAX_QUEUED, a send that makes no progress for --client-timeout, or a
 * frame not completed within --frame-timeout drops the client.
 *
 * End of input: a client that shut down only its sending side (shutdown(SHUT_WR)) still gets the
 * replies to everything it sent, then msrd closes the connection; one that closed its socket
 * whole (POLLHUP: nobody is left to read) is closed at once.
 *
 * Lifetime: a closed client is retired when its last SQE completes, and freed only at the end
 * of that loop turn (client_free_retired), since the turn's lists may still name it.
 */
#include "server/server.h"
#include "backend/backend_sim.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <valgrind/memcheck.h>

#define KEEP_BUFFER_BYTES 4096u /* larger buffers are freed once empty */

struct fd_send {
	struct msghdr message;
	struct iovec vector;
	union {
		char buffer[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
};

static void process_input(struct client *client);

static uint64_t queued_bytes(const struct client *client)
{
	return client->stream_queued - client->stream_sent;
}

/* Whether the client must wait before its next request is handled. */
static bool client_blocked(const struct client *client)
{
	return client->job != NULL || client->draining || client->closing || client->lock_waiting ||
	       (uint32_t)client->replies_sending + client->replies_pending >= CLIENT_MAX_IN_FLIGHT ||
	       queued_bytes(client) >= CLIENT_PAUSE_BYTES || client->fd_mark_count >= CLIENT_FD_MARKS;
}

static void log_client(const struct client *client, enum log_level level, const char *what)
{
	log_message(level, "client %u (uid %u pid %d): %s", client->number, (unsigned)client->uid,
		    (int)client->pid, what);
}

int client_accept(struct msrd *server, int fd)
{
	size_t size = (sizeof(struct client) + 15u) & ~(size_t)15u;
	struct client *client = aligned_alloc(16, size);
	int status;

	if (client == NULL)
		return -ENOMEM;
	memset(client, 0, sizeof(*client));
	client->server = server;
	client->fd = fd;
	status = listener_identify(fd, &client->pid, &client->uid, &client->gid, &client->groups,
				   &client->group_count);
	if (status < 0)
		goto fail;
	client->account = accounts_get(&server->accounts, client->uid);
	if (client->account == NULL) {
		status = -ENOMEM;
		goto fail;
	}
	if (accounts_take(&server->accounts, client->account, ACCOUNT_CONNECTIONS, 1) < 0) {
		char reason[160];
		accounts_describe_limit(&server->accounts, client->account, ACCOUNT_CONNECTIONS,
					reason, sizeof(reason));
		log_notice("refused a connection (pid %d): %s", (int)client->pid, reason);
		accounts_drop_unused(&server->accounts, client->account);
		client->account = NULL;
		status = -EUSERS;
		goto fail;
	}
	status = msrd_resolve_grant(server, client, &client->grant);
	if (status < 0)
		goto fail;
	client->grant_generation = server->policy_generation;
	/* On the simulated CPU, the client's load to the microsecond (its CPU-time clock), not to
	 * /proc/stat's tick: its measured code and its polling then draw different power. Not
	 * available in virtual time or on hardware: nothing to do then. */
	client->followed = backend_sim_follow_process(server->backend, (int)client->pid, true) == 0;
	client->number = ++server->next_client_number;
	client->next = server->clients;
	if (server->clients != NULL)
		server->clients->prev = client;
	server->clients = client;
	server->client_count++;
	if (log_get_level() >= LOG_LEVEL_INFO) {
		char line[160];
		snprintf(line, sizeof(line), "connected (gid %u, %u groups%s)",
			 (unsigned)client->gid, client->group_count,
			 policy_grant_matched(client->grant) ? "" : ", no policy rule matches");
		log_client(client, LOG_LEVEL_INFO, line);
	}
	client_rearm_recv(client);
	return 0;
fail:
	if (client->account != NULL)
		accounts_give_back(&server->accounts, client->account, ACCOUNT_CONNECTIONS, 1);
	free(client->groups);
	free(client);
	return status;
}

/* On the tick's list: a deadline was set (a partial frame or a send started). Only these are
 * looked at by the tick, so a loop turn or a tick never costs anything per idle client. */
static void watch_deadline(struct client *client)
{
	struct msrd *server = client->server;

	loop_want_tick(server);
	if (client->timed)
		return;
	client->timed = true;
	client->prev_timed = NULL;
	client->next_timed = server->timed;
	if (server->timed != NULL)
		server->timed->prev_timed = client;
	server->timed = client;
}

static void unwatch_deadline(struct client *client)
{
	struct msrd *server = client->server;

	if (!client->timed)
		return;
	if (client->prev_timed != NULL)
		client->prev_timed->next_timed = client->next_timed;
	else
		server->timed = client->next_timed;
	if (client->next_timed != NULL)
		client->next_timed->prev_timed = client->prev_timed;
	client->prev_timed = NULL;
	client->next_timed = NULL;
	client->timed = false;
}

/* Out of the client list, onto the dead list: completions of this turn may still name it (on
 * server->dirty or server->rearm), so its memory stays until the turn is over. */
static void client_retire(struct client *client)
{
	struct msrd *server = client->server;

	if (client->prev != NULL)
		client->prev->next = client->next;
	else
		server->clients = client->next;
	if (client->next != NULL)
		client->next->prev = client->prev;
	server->client_count--;
	unwatch_deadline(client);
	accounts_give_back(&server->accounts, client->account, ACCOUNT_CONNECTIONS, 1);
	client->account = NULL;
	client->prev = NULL;
	client->next = server->dead;
	server->dead = client;
}

static void client_free(struct client *client)
{
	for (uint8_t i = 0; i < client->fd_mark_count; i++)
		close(client->fd_marks[i].fd);
	close(client->fd);
	policy_grant_free(client->grant);
	free(client->fd_send);
	free(client->input);
	free(client->sending.data);
	free(client->pending.data);
	free(client->groups);
	free(client->rings);
	free(client->stale_slots);
	handles_release_client(client);
	free(client);
}

void client_free_retired(struct msrd *server)
{
	while (server->dead != NULL) {
		struct client *client = server->dead;
		server->dead = client->next;
		client_free(client);
	}
}

void client_sqe_done(struct client *client)
{
	client->sqes_in_flight--;
	if (client->closing && client->sqes_in_flight == 0)
		client_retire(client);
}

#define REFUSAL_LOG_INTERVAL_NS (5ull * 1000000000ull)
#define REFUSAL_LOG_UID_FACTOR 4u /* a uid's lines: those of a few of its connections */

static void summarise_refusals(struct client *client)
{
	struct uid_account *account = client->account;

	if (account == NULL || account->refusals.suppressed == 0)
		return;
	log_notice("refused: %llu more refusals of uid %u suppressed",
		   (unsigned long long)account->refusals.suppressed, (unsigned)client->uid);
	account->refusals.suppressed = 0;
}

bool client_refusal_loggable(struct client *client)
{
	struct uid_account *account = client->account;
	unsigned burst = client->server->config->refusal_log_burst;
	uint64_t now = msrd_now_ns();

	if (burst == 0)
		return true;
	if (account != NULL && account->refusals.suppressed > 0 &&
	    now - account->refusals.window_start_ns >= REFUSAL_LOG_INTERVAL_NS)
		summarise_refusals(client);
	if (!log_ratelimit_pass(&client->refusals, now, REFUSAL_LOG_INTERVAL_NS,
				burst)) {
		if (account != NULL)
			account->refusals.suppressed++;
		return false;
	}
	return account == NULL || log_ratelimit_pass(&account->refusals, now,
						     REFUSAL_LOG_INTERVAL_NS,
						     REFUSAL_LOG_UID_FACTOR * burst);
}

void client_close(struct client *client, const char *reason)
{
	uint64_t now = msrd_now_ns();

	char line[160];

	if (client->closing)
		return;
	client->closing = true;
	/* One uniform word, whatever the reason: tests and operators grep for it. */
	snprintf(line, sizeof(line), "disconnected (%s)", reason);
	log_client(client, LOG_LEVEL_INFO, line);
	summarise_refusals(client);
	for (uint16_t i = 0; i < client->ring_count; i++)
		ringdir_release(&client->server->rings, client->rings[i].entry,
				client->rings[i].producer, now);
	accounts_give_back(&client->server->accounts, client->account, ACCOUNT_RINGS,
			   client->ring_count);
	client->ring_count = 0;
	/* Whatever it held goes back now, not when its last SQE completes: the counters to the
	 * state msrd found them in, its schedules stopped (unless persistent). */
	slots_release_client(client);
	schedule_release_client(client);
	handles_release_client(client);
	energy_pages_release_client(client);
	perf_requests_release_client(client);
	if (client->followed)
		backend_sim_follow_process(client->server->backend, (int)client->pid, false);
	client->followed = false;
	if (client->server->rings.count > 0)
		loop_want_tick(client->server);
	/* Wakes the recv (it completes with 0) and fails a send in flight; the client is freed
	 * when the last of its SQEs has completed. */
	shutdown(client->fd, SHUT_RDWR);
	if (client->sqes_in_flight == 0)
		client_retire(client);
}

/* ---- input ---- */

static void cancel_recv(struct client *client)
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
		cancel_recv(client);
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
		watch_deadline(client);
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
		process_input(client); /* older bytes were waiting: the new ones may complete them */
	else
		note_partial_frame(client);
}

static void process_input(struct client *client)
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
static void close_if_answered(struct client *client)
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
	close_if_answered(client);
}

void client_resume(struct client *client)
{
	if (client->closing || client->draining || client_blocked(client))
		return;
	process_input(client);
	close_if_answered(client);
}

void client_on_recv(struct client *client, const struct io_uring_cqe *cqe)
{
	bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
	int result = cqe->res;

	if (!more)
		client->recv_armed = false;
	if (cqe->flags & IORING_CQE_F_BUFFER) {
		uint16_t id = (uint16_t)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
		const uint8_t *data = loop_buffer(&client->server->loop, id);
		if (result > 0 && !client->closing && !client->draining) {
			/* The kernel wrote the buffer behind valgrind's back. */
			VALGRIND_MAKE_MEM_DEFINED(data, (size_t)result);
			take_bytes(client, data, (size_t)result);
		}
		loop_recycle_buffer(&client->server->loop, id);
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

/* ---- output ---- */

static int reserve_output(struct output_buffer *buffer, size_t extra)
{
	size_t needed = (size_t)buffer->used + extra;
	size_t capacity;
	uint8_t *bigger;

	if (needed <= buffer->capacity)
		return 0;
	capacity = buffer->capacity > 0 ? buffer->capacity : 256u;
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
	if (queued_bytes(client) + max_length > CLIENT_MAX_QUEUED) {
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
	log_client(client, LOG_LEVEL_NOTICE, line);
	space = client_reply_space(client, WIRE_HEADER_SIZE + WIRE_MAX_DETAIL);
	if (space == NULL)
		return;
	length = wire_encode_error(space, WIRE_HEADER_SIZE + WIRE_MAX_DETAIL, WIRE_OP_ERROR, status,
				   request_id, detail);
	if (length > 0)
		client_reply_commit(client, (size_t)length, -1);
	client->draining = true;
	client->frame_started_ns = 0;
	cancel_recv(client);
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
	watch_deadline(client);
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
	watch_deadline(client);
}

void client_on_send(struct client *client, const struct io_uring_cqe *cqe)
{
	bool carried_fd = loop_index_of(io_uring_cqe_get_data64(cqe)) == 1;
	bool was_blocked = client_blocked(client);

	client->send_armed = false;
	client->send_started_ns = 0;
	if (client->frame_started_ns == 0)
		unwatch_deadline(client); /* the tick then sees only the sends still in flight */
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
		client->replies_sending = 0;
		client->sending.used = 0;
		client->sending_offset = 0;
	}
	if (!client->closing) {
		start_send(client);
		if (was_blocked && !client_blocked(client))
			process_input(client);
		close_if_answered(client);
	}
	client_sqe_done(client);
}

/* ---- periodic checks ---- */

static bool check_timeouts(struct client *client, uint64_t now_ns)
{
	const struct msrd_config *config = client->server->config;

	if (client->closing)
		return false;
	if (client->frame_started_ns != 0 &&
	    now_ns - client->frame_started_ns > (uint64_t)config->frame_timeout_ms * 1000000ull) {
		char detail[96];
		snprintf(detail, sizeof(detail), "frame not completed within %u ms",
			 config->frame_timeout_ms);
		client_fail(client, 0, WIRE_STATUS_TIMEOUT, detail);
		return true;
	}
	if (client->send_started_ns != 0 &&
	    now_ns - client->send_started_ns > (uint64_t)config->client_timeout_ms * 1000000ull) {
		client_close(client, "its replies could not be sent: it stopped reading");
		return false;
	}
	return client->frame_started_ns != 0 || client->send_started_ns != 0;
}

bool clients_check_timeouts(struct msrd *server, uint64_t now_ns)
{
	bool needed = false;
	struct client *next;

	for (struct client *client = server->timed; client != NULL; client = next) {
		next = client->next_timed;
		if (check_timeouts(client, now_ns))
			needed = true;
		else
			unwatch_deadline(client); /* set again by its next partial frame or send */
	}
	return needed;
}

int client_add_ring(struct client *client, struct ring_entry *entry, bool producer)
{
	struct accounts *accounts = &client->server->accounts;

	if (client->ring_count >= client->server->config->max_rings_per_client)
		return -ENOSPC;
	if (client->ring_count == client->ring_capacity) {
		uint16_t capacity = client->ring_capacity > 0 ? (uint16_t)(client->ring_capacity * 2)
							       : 4;
		struct ring_ref *bigger = realloc(client->rings, sizeof(*bigger) * capacity);
		if (bigger == NULL)
			return -ENOMEM;
		client->rings = bigger;
		client->ring_capacity = capacity;
	}
	if (accounts_take(accounts, client->account, ACCOUNT_RINGS, 1) < 0)
		return -ENOSPC;
	client->rings[client->ring_count++] = (struct ring_ref){ .entry = entry,
								  .producer = producer };
	return 0;
}
