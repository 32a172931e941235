/*
 * server/client_internal.h — what msrd's client files share and nothing else uses: the client's
 * lifecycle (client.c: accept, close, deadlines, refusal logging), its input (client_input.c:
 * receives and framing) and its output (client_output.c: the reply queue and sends). The rest of
 * msrd uses the client_* calls of server/client.h.
 */
#ifndef HAECER_SERVER_CLIENT_INTERNAL_H
#define HAECER_SERVER_CLIENT_INTERNAL_H

#include "server/server.h"

/* Reply bytes queued and not yet sent. */
static inline uint64_t client_queued_bytes(const struct client *client)
{
	return client->stream_queued - client->stream_sent;
}

/* Whether the client must wait before its next request is handled. */
static inline bool client_blocked(const struct client *client)
{
	return client->job != NULL || client->draining || client->closing || client->lock_waiting ||
	       (uint32_t)client->replies_sending + client->replies_pending >= CLIENT_MAX_IN_FLIGHT ||
	       client_queued_bytes(client) >= CLIENT_PAUSE_BYTES ||
	       client->fd_mark_count >= CLIENT_FD_MARKS;
}

/* A log line that names the client (number, uid, pid). */
void client_log(const struct client *client, enum log_level level, const char *what);
/* Put the client on the tick's list (a partial frame or a send started); off it again. */
void client_watch_deadline(struct client *client);
void client_unwatch_deadline(struct client *client);
/* Cancel its multishot receive (it stops being read from until re-armed). */
void client_cancel_recv(struct client *client);
/* Handle what waits in its input buffer, then re-arm its receive if it ended. */
void client_process_input(struct client *client);
/* A half-closed client whose every request is answered and sent is closed. */
void client_close_if_answered(struct client *client);

#endif
