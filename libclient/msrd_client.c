/*
 * libclient/msrd_client.c — connection to msrd: connect, HELLO, one request/reply exchange.
 *
 * A connection owns one receive and one send buffer of WIRE_MAX_FRAME bytes, allocated at
 * connect time, so no call allocates afterwards. Requests are strictly one at a time: the reply
 * to a request is the next frame the server sends (or an ERROR frame before it closes).
 */
#include "libclient/msrd_conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/fdpass.h"

#define HAECER_CLIENT_VERSION "haecer-msrd-client 1"

struct haecer_conn {
	int fd;
	uint32_t next_request_id;
	struct haecer_server_info server;
	char error[WIRE_MAX_DETAIL + 64];
	size_t received;              /* bytes in `in` not yet consumed */
	uint8_t in[WIRE_MAX_FRAME];
	uint8_t out[WIRE_MAX_FRAME];
};

static int errno_or(int fallback)
{
	return errno != 0 ? -errno : fallback;
}

int haecer_conn_fd(const struct haecer_conn *conn)
{
	return conn->fd;
}

const struct haecer_server_info *haecer_server_info(const struct haecer_conn *conn)
{
	return &conn->server;
}

const char *haecer_conn_error(const struct haecer_conn *conn)
{
	return conn->error;
}

const char *haecer_msrd_strerror(int negative_errno)
{
	if (negative_errno == -EPIPE || negative_errno == -ECONNRESET)
		return "connection to msrd closed";
	if (negative_errno == -EPROTO)
		return "protocol error in msrd's reply";
	if (negative_errno == -ECONNREFUSED)
		return "msrd is not running (nothing listens on its socket)";
	return wire_status_text(wire_status_from_errno(negative_errno));
}

struct wire_writer haecer__begin(struct haecer_conn *conn)
{
	struct wire_writer writer;

	wire_writer_init(&writer, conn->out + WIRE_HEADER_SIZE, sizeof(conn->out) - WIRE_HEADER_SIZE);
	return writer;
}

static int send_all(int fd, const uint8_t *data, size_t length)
{
	while (length > 0) {
		ssize_t sent = send(fd, data, length, MSG_NOSIGNAL);
		if (sent < 0) {
			if (errno == EINTR)
				continue;
			return errno_or(-EPIPE);
		}
		data += sent;
		length -= (size_t)sent;
	}
	return 0;
}

/* fdpass keeps at most one descriptor per reply and closes any other, so a misbehaving peer
 * cannot make us leak. */
static int receive_more(struct haecer_conn *conn, int *fd)
{
	ssize_t got;

	do {
		got = fdpass_receive(conn->fd, conn->in + conn->received,
				     sizeof(conn->in) - conn->received, 0, fd);
	} while (got == -EINTR);
	if (got < 0)
		return (int)got;
	if (got == 0)
		return -ECONNRESET;
	conn->received += (size_t)got;
	return 0;
}

/* Receive one whole frame into conn->in[0 .. header.length). */
static int receive_frame(struct haecer_conn *conn, struct wire_header *header, int *fd)
{
	int status;

	for (;;) {
		status = wire_header_decode(conn->in, conn->received, WIRE_MAX_FRAME, header);
		if (status == 0 && conn->received >= header->length)
			return 0;
		if (status < 0 && status != -EAGAIN)
			return -EPROTO;
		status = receive_more(conn, fd);
		if (status < 0)
			return status;
	}
}

static void set_error(struct haecer_conn *conn, const struct haecer_reply *reply)
{
	size_t length = reply->length < WIRE_MAX_DETAIL ? reply->length : WIRE_MAX_DETAIL;

	if (reply->status == WIRE_STATUS_OK) {
		conn->error[0] = '\0';
		return;
	}
	/* Error replies carry a text detail, except BATCH refusals which carry per-op results. */
	uint32_t count;
	bool has_results = (reply->op == WIRE_OP_BATCH || reply->op == WIRE_OP_BATCH_RUN) &&
			   wire_get_batch_count(reply->payload, reply->length,
						WIRE_BATCH_RESULT_SIZE, WIRE_MAX_BATCH_OPS, &count) == 0;
	if (!has_results && length > 0) {
		snprintf(conn->error, sizeof(conn->error), "%s: %.*s", wire_status_text(reply->status),
			 (int)length, (const char *)reply->payload);
		return;
	}
	snprintf(conn->error, sizeof(conn->error), "%s", wire_status_text(reply->status));
}

int haecer__call(struct haecer_conn *conn, uint16_t op, const struct wire_writer *request,
		 struct haecer_reply *reply)
{
	struct wire_header header;
	uint32_t request_id;
	int length;
	int status;

	reply->fd = -1;
	if (conn->fd < 0)
		return -EPIPE;
	if (request->overflow)
		return -EMSGSIZE;
	request_id = conn->next_request_id++;
	length = wire_frame_finish(conn->out, sizeof(conn->out), op, 0, 0, request_id,
				   request->used);
	if (length < 0)
		return length;
	/* The previous reply is consumed only now: its payload stayed valid until this call. */
	status = send_all(conn->fd, conn->out, (size_t)length);
	if (status < 0)
		goto broken;
	status = receive_frame(conn, &header, &reply->fd);
	if (status < 0)
		goto broken;
	if (header.op == WIRE_OP_ERROR || (header.flags & WIRE_FLAG_REPLY) == 0 ||
	    header.op != op || header.request_id != request_id) {
		/* An ERROR frame, or a reply that answers something else: the server is closing the
		 * connection or speaks nonsense; either way this connection is done. */
		reply->op = header.op;
		reply->status = header.op == WIRE_OP_ERROR ? header.status : WIRE_STATUS_MALFORMED;
		reply->payload = conn->in + WIRE_HEADER_SIZE;
		reply->length = header.length - WIRE_HEADER_SIZE;
		set_error(conn, reply);
		status = header.op == WIRE_OP_ERROR ? wire_status_to_errno(header.status) : -EPROTO;
		if (status == 0)
			status = -EPROTO;
		goto broken;
	}
	reply->op = header.op;
	reply->status = header.status;
	reply->payload = conn->in + WIRE_HEADER_SIZE;
	reply->length = header.length - WIRE_HEADER_SIZE;
	set_error(conn, reply);
	/* Mark the frame consumed now; the bytes stay in place until the next receive. */
	conn->received -= header.length;
	if (conn->received > 0) {
		/* The server never sends ahead of a request; bytes after the reply are a protocol
		 * violation. */
		status = -EPROTO;
		goto broken;
	}
	return 0;
broken:
	if (reply->fd >= 0)
		close(reply->fd);
	reply->fd = -1;
	close(conn->fd);
	conn->fd = -1;
	if (conn->error[0] == '\0')
		snprintf(conn->error, sizeof(conn->error), "%s", haecer_msrd_strerror(status));
	return status;
}

int haecer__call_checked(struct haecer_conn *conn, uint16_t op, const struct wire_writer *request,
			 struct haecer_reply *reply)
{
	int status = haecer__call(conn, op, request, reply);

	if (status < 0)
		return status;
	if (reply->status == WIRE_STATUS_OK)
		return 0;
	if (reply->fd >= 0) {
		close(reply->fd);
		reply->fd = -1;
	}
	return wire_status_to_errno(reply->status);
}

int haecer_hello(struct haecer_conn *conn, struct haecer_server_info *out)
{
	struct wire_hello_request request = {
		.min_version = WIRE_VERSION,
		.max_version = WIRE_VERSION,
	};
	struct wire_writer writer = haecer__begin(conn);
	struct wire_hello_reply hello;
	struct haecer_reply reply;
	int status;

	snprintf(request.client_name, sizeof(request.client_name), "%s",
		 program_invocation_short_name);
	wire_put_hello_request(&writer, &request);
	status = haecer__call_checked(conn, WIRE_OP_HELLO, &writer, &reply);
	if (status < 0)
		return status;
	if (wire_get_hello_reply(reply.payload, reply.length, &hello) < 0 ||
	    hello.version != WIRE_VERSION)
		return -EPROTO;
	conn->server = (struct haecer_server_info){
		.version = hello.version,
		.backend = hello.backend,
		.max_frame = hello.max_frame,
		.max_batch_ops = hello.max_batch_ops,
		.max_in_flight = hello.max_in_flight,
		.max_rings = hello.max_rings,
		.uid = hello.uid,
		.gid = hello.gid,
		.pid = hello.pid,
		.features = hello.features,
	};
	memcpy(conn->server.server_version, hello.server_version, HAECER_NAME_MAX);
	if (out != NULL)
		*out = conn->server;
	return 0;
}

static int connect_socket(const char *path)
{
	struct sockaddr_un address = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(address.sun_path))
		return -ENAMETOOLONG;
	memcpy(address.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno_or(-EMFILE);
	if (connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0) {
		int status = errno_or(-ECONNREFUSED);
		close(fd);
		return status;
	}
	return fd;
}

const char *haecer_connect_hint(int error)
{
	switch (error) {
	case -ENOENT:
	case -ENOTDIR:
	case -ECONNREFUSED:
		return "start msrd (systemctl start msrd; or msrd --backend sim -f --socket PATH for "
		       "the simulator) or set HAECER_SOCKET to its socket";
	case -EACCES:
	case -EPERM:
		return "msrd's socket is for members of group haecer: add yourself (usermod -aG "
		       "haecer USER) and log in again";
	default:
		return "";
	}
}

int haecer_connect(const char *path, struct haecer_conn **out)
{
	struct haecer_conn *conn;
	int status;

	*out = NULL;
	if (path == NULL)
		path = getenv(HAECER_SOCKET_ENV);
	if (path == NULL || path[0] == '\0')
		path = HAECER_DEFAULT_SOCKET;
	conn = calloc(1, sizeof(*conn));
	if (conn == NULL)
		return -ENOMEM;
	conn->next_request_id = 1;
	conn->fd = connect_socket(path);
	if (conn->fd < 0) {
		status = conn->fd;
		goto out;
	}
	status = haecer_hello(conn, NULL);
	if (status < 0)
		goto out;
	*out = conn;
	conn = NULL;
out:
	haecer_close(conn);
	return status;
}

void haecer_close(struct haecer_conn *conn)
{
	if (conn == NULL)
		return;
	if (conn->fd >= 0)
		close(conn->fd);
	free(conn);
}
