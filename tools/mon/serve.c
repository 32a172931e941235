/*
 * tools/mon/serve.c — `haecer-mon serve [--listen HOST:PORT]`: a small HTTP/1.1 server for
 * Prometheus, in one thread around ppoll().
 *
 * Bounded in every direction a client controls: at most MAX_CLIENTS connections (further ones
 * wait in the listen backlog), SERVE_MAX_REQUEST bytes of request head, CLIENT_TIMEOUT_S seconds
 * per connection from accept to the last byte of the answer. Loopback by default; another
 * address is served with a warning, since anyone reaching it sees the readings. SIGINT and
 * SIGTERM end it cleanly (exit 0); the address actually bound is printed on stdout first
 * (port 0 picks a free one).
 *
 * Why not libmicrohttpd (Debian libmicrohttpd-dev), judged for issue 15: the server answers one
 * read-only resource, one request per connection, and shares its single poll loop with energy
 * sampling and ring draining; the hand-written part is the request-head parser of http.c (~130
 * lines) and the connection state machine here. libmicrohttpd would replace both but give users
 * nothing they lack today (keep-alive and chunked bodies do not matter at a scrape every 15 s),
 * while adding a dependency and either a second thread touching serve_state or its external-
 * select mode wired into this loop. It becomes clearly better the day serve needs TLS or HTTP
 * authentication for non-loopback addresses (node_exporter's web config): that must not be
 * written by hand, and libmicrohttpd has both (MHD_USE_TLS, basic auth).
 */
#include "tools/mon/serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CLIENTS 32u
#define CLIENT_TIMEOUT_S 10.0
#define LISTEN_BACKLOG 64

struct client {
	int fd;
	size_t received;
	char request[SERVE_MAX_REQUEST + 1];
	char *response;
	size_t length;
	size_t sent;
	double deadline;
};

struct server {
	int listener;
	struct serve_state state;
	struct client *clients[MAX_CLIENTS];
	size_t client_count;
};

/* "HOST:PORT", "[IPV6]:PORT" or ":PORT" (every interface, as node_exporter's --web.listen-address
 * takes it: host is then "") into host and port; false when it is none of them. */
static bool split_listen(const char *text, char *host, size_t host_size, char *port,
			 size_t port_size)
{
	const char *colon = strrchr(text, ':');
	const char *start = text;
	size_t host_length;
	uint16_t number;

	if (colon == NULL || !number_parse_u16(colon + 1, &number))
		return false;
	host_length = (size_t)(colon - text);
	if (text[0] == '[') {
		if (host_length < 2 || colon[-1] != ']')
			return false;
		start = text + 1;
		host_length -= 2;
	}
	if (host_length == 0 && text[0] == ':') {
		host[0] = '\0';
		snprintf(port, port_size, "%u", number);
		return true;
	}
	if (host_length == 0 || host_length >= host_size)
		return false;
	memcpy(host, start, host_length);
	host[host_length] = '\0';
	snprintf(port, port_size, "%u", number);
	return true;
}

static bool is_loopback(const struct sockaddr_storage *address)
{
	if (address->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)address;
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (address->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)address;
		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
	}
	return false;
}

/* Print where we listen ("listening on HOST:PORT" on stdout, for scripts and tests). */
static void announce(int fd)
{
	struct sockaddr_storage address;
	socklen_t size = sizeof(address);
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (getsockname(fd, (struct sockaddr *)&address, &size) < 0)
		return;
	if (address.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&address;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		port = ntohs(in->sin_port);
		printf("listening on %s:%u\n", host, port);
	} else if (address.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&address;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
		printf("listening on [%s]:%u\n", host, port);
	}
	fflush(stdout);
	if (!is_loopback(&address))
		fprintf(stderr, "haecer-mon: warning: serving on a non-loopback address: whoever "
				"reaches it reads these measurements\n");
}

static int bind_first(const struct addrinfo *list, int *fd_out)
{
	int status = -EADDRNOTAVAIL;
	int one = 1;

	for (const struct addrinfo *ai = list; ai != NULL; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				ai->ai_protocol);
		if (fd < 0) {
			status = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		/* "::" of ":PORT" serves IPv4 too (dual stack), whatever the sysctl default. */
		if (ai->ai_family == AF_INET6) {
			int zero = 0;
			const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ai->ai_addr;
			if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
				setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		}
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, LISTEN_BACKLOG) == 0) {
			*fd_out = fd;
			return 0;
		}
		status = -errno;
		close(fd);
	}
	return status;
}

/* The listening socket, or MON_EXIT_USAGE / MON_EXIT_FAILED (printed) as a negative number. */
static int open_listener(const char *text, int *fd_out)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *list = NULL;
	char host[256], port[8];
	int status;

	if (!split_listen(text, host, sizeof(host), port, sizeof(port)))
		return -tool_usage_error("--listen takes HOST:PORT, [IPV6]:PORT or :PORT, not '%s'",
					 text);
	/* ":PORT": every interface, IPv6 and IPv4 on "::", or IPv4 alone without IPv6. */
	bool every = host[0] == '\0';
	status = getaddrinfo(every ? "::" : host, port, &hints, &list);
	if (status != 0 && every)
		status = getaddrinfo("0.0.0.0", port, &hints, &list);
	if (status != 0)
		return -mon_fail("cannot resolve '%s': %s", host, gai_strerror(status));
	status = bind_first(list, fd_out);
	freeaddrinfo(list);
	if (status < 0 && every && getaddrinfo("0.0.0.0", port, &hints, &list) == 0) {
		status = bind_first(list, fd_out);
		freeaddrinfo(list);
	}
	if (status < 0)
		return -mon_fail("cannot listen on %s: %s", text, strerror(-status));
	announce(*fd_out);
	return 0;
}

static void client_close(struct server *server, size_t index)
{
	struct client *client = server->clients[index];

	shutdown(client->fd, SHUT_WR);
	close(client->fd);
	free(client->response);
	free(client);
	server->clients[index] = server->clients[--server->client_count];
}

static void accept_clients(struct server *server)
{
	while (server->client_count < MAX_CLIENTS) {
		int fd = accept4(server->listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct client *client;
		if (fd < 0)
			return; /* EAGAIN, or a connection that went away before we took it */
		client = calloc(1, sizeof(*client));
		if (client == NULL) {
			close(fd);
			return;
		}
		client->fd = fd;
		client->deadline = mon_now() + CLIENT_TIMEOUT_S;
		server->clients[server->client_count++] = client;
	}
}

static ssize_t too_large(char **response)
{
	static const char text[] =
		"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
		"Connection: close\r\n\r\n";

	*response = strdup(text);
	return *response != NULL ? (ssize_t)strlen(text) : -ENOMEM;
}

/* Read what the client sent; false when the connection is to be closed. */
static bool client_read(struct server *server, struct client *client)
{
	ssize_t got = recv(client->fd, client->request + client->received,
			   SERVE_MAX_REQUEST - client->received, 0);
	ssize_t answer;

	if (got < 0)
		return errno == EAGAIN || errno == EINTR;
	if (got == 0)
		return false;
	client->received += (size_t)got;
	client->request[client->received] = '\0';
	answer = serve_http_answer(&server->state, client->request, client->received,
				   &client->response);
	if (answer == -EAGAIN && client->received == SERVE_MAX_REQUEST)
		answer = too_large(&client->response);
	if (answer == -EAGAIN)
		return true;
	if (answer < 0)
		return false;
	client->length = (size_t)answer;
	return true;
}

/* Send what is left of the answer; false when done or failed. */
static bool client_write(struct client *client)
{
	ssize_t sent = send(client->fd, client->response + client->sent,
			    client->length - client->sent, MSG_NOSIGNAL);

	if (sent < 0)
		return errno == EAGAIN || errno == EINTR;
	client->sent += (size_t)sent;
	return client->sent < client->length;
}

static void handle_clients(struct server *server, const struct pollfd *fds, double now)
{
	/* Backwards: closing moves the last client into the freed place. */
	for (size_t i = server->client_count; i-- > 0;) {
		struct client *client = server->clients[i];
		bool keep = true;
		if (fds[i + 1].revents & (POLLERR | POLLHUP | POLLNVAL) && client->response == NULL)
			keep = false;
		else if (client->response == NULL && (fds[i + 1].revents & POLLIN))
			keep = client_read(server, client);
		else if (client->response != NULL && (fds[i + 1].revents & POLLOUT))
			keep = client_write(client);
		if (!keep || now >= client->deadline)
			client_close(server, i);
	}
}

/* Milliseconds until the next tick or client deadline, rounded up. */
static struct timespec poll_timeout(const struct server *server, double next_tick, double now)
{
	double wait = next_tick - now;
	struct timespec timeout;

	for (size_t i = 0; i < server->client_count; i++)
		if (server->clients[i]->deadline - now < wait)
			wait = server->clients[i]->deadline - now;
	if (wait < 0)
		wait = 0;
	timeout.tv_sec = (time_t)wait;
	timeout.tv_nsec = (long)((wait - floor(wait)) * 1e9);
	return timeout;
}

static void serve_loop(struct server *server, const sigset_t *wait_mask)
{
	struct pollfd fds[MAX_CLIENTS + 1];
	double next_tick = mon_now() + server->state.interval;

	serve_tick(&server->state);
	while (!mon_stop_requested()) {
		struct timespec timeout = poll_timeout(server, next_tick, mon_now());
		double now;
		fds[0] = (struct pollfd){ .fd = server->listener,
					  .events = server->client_count < MAX_CLIENTS ? POLLIN : 0 };
		for (size_t i = 0; i < server->client_count; i++)
			fds[i + 1] = (struct pollfd){ .fd = server->clients[i]->fd,
				.events = server->clients[i]->response == NULL ? POLLIN : POLLOUT };
		if (ppoll(fds, server->client_count + 1, &timeout, wait_mask) < 0 && errno != EINTR)
			break;
		now = mon_now();
		handle_clients(server, fds, now);
		if (fds[0].revents & POLLIN)
			accept_clients(server);
		if (now >= next_tick) {
			serve_tick(&server->state);
			next_tick = fmax(next_tick + server->state.interval, now);
		}
	}
}

int mon_serve_main(const struct mon_options *options, int count, char *const *words)
{
	unsigned interval_ms = options->given & MON_OPT_INTERVAL ? options->interval_ms
								 : SERVE_DEFAULT_INTERVAL_MS;
	const char *listen_at = options->listen != NULL ? options->listen : SERVE_DEFAULT_LISTEN;
	struct server *server;
	sigset_t stop_signals, wait_mask;
	int status;

	if (count > 0)
		return tool_usage_error("serve takes no arguments ('%s')", words[0]);
	server = calloc(1, sizeof(*server));
	if (server == NULL)
		return mon_fail("out of memory");
	status = open_listener(listen_at, &server->listener);
	if (status < 0) {
		free(server);
		return -status;
	}
	/* Stop signals arrive only inside ppoll, so none is lost between a check and the wait. */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop_signals, &wait_mask);
	sigdelset(&wait_mask, SIGINT);
	sigdelset(&wait_mask, SIGTERM);
	signal(SIGPIPE, SIG_IGN);
	mon_catch_stop_signals();
	serve_state_init(&server->state, options->socket_path, interval_ms / 1000.0,
			 options->given & MON_OPT_RESOLUTION ? options->resolution_uj
							    : SERVE_DEFAULT_RESOLUTION_UJ);
	if (serve_attribution_open(&server->state, options->top, options->cgroup_depth) < 0)
		fprintf(stderr, "haecer-mon: no per-process energy series: out of memory\n");
	serve_loop(server, &wait_mask);
	while (server->client_count > 0)
		client_close(server, server->client_count - 1);
	serve_state_free(&server->state);
	close(server->listener);
	free(server);
	return MON_EXIT_OK;
}
