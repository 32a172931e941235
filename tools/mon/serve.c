/*
 * tools/mon/serve.c — `haecer-mon serve [--listen HOST:PORT]`: Prometheus' endpoint, served by
 * libmicrohttpd (Debian libmicrohttpd-dev) in one thread: its epoll descriptor and serve's
 * interval share one ppoll() loop, so no lock guards serve_state.
 *
 * Bounded in every direction a client controls, by libmicrohttpd: at most SERVE_MAX_CONNECTIONS
 * connections (fewer when the descriptor limit is lower), SERVE_CONNECTION_MEMORY bytes per
 * connection (a longer request head is answered 431 and closed), SERVE_CLIENT_TIMEOUT_S seconds
 * of silence per connection; keep-alive for Prometheus, which keeps its connection. An idle or
 * half-sent request costs one descriptor and a few kilobytes, never the loop's attention, so a
 * thousand slow clients do not delay a scrape (tests/mon/test_serve_abuse). Loopback by default;
 * another address is served with a warning, since anyone reaching it sees the readings; TLS
 * (--tls-cert, --tls-key) and basic auth (--basic-auth-file) are libmicrohttpd's. SIGINT and
 * SIGTERM end it cleanly (exit 0); the address actually bound is printed on stdout first
 * (port 0 picks a free one).
 */
#include "tools/mon/serve_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define LISTEN_BACKLOG 1024
#define FILE_LIMIT (1u << 20) /* a PEM file or the auth file: far more than either needs */
#define HTTP_LOG_LINES 20u    /* libmicrohttpd's messages printed before the rest are dropped */

struct server {
	int listener;
	struct MHD_Daemon *daemon;
	struct serve_http http;
	char *tls_cert;
	char *tls_key;
	unsigned log_lines;
	struct serve_state state;
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
		tool_warn("warning: serving on a non-loopback address: whoever reaches it reads "
			  "these measurements");
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

/* The whole of a small file, NUL-terminated and malloc'ed; -errno. */
static int read_small_file(const char *path, char **text)
{
	FILE *file = fopen(path, "re");
	char *buffer = NULL;
	size_t length;
	int status = 0;

	if (file == NULL)
		return -errno;
	buffer = malloc(FILE_LIMIT + 1);
	if (buffer == NULL) {
		status = -ENOMEM;
		goto out;
	}
	length = fread(buffer, 1, FILE_LIMIT + 1, file);
	if (ferror(file) || length > FILE_LIMIT) {
		status = ferror(file) ? -EIO : -EFBIG;
		goto out;
	}
	buffer[length] = '\0';
	*text = buffer;
	buffer = NULL;
out:
	free(buffer);
	fclose(file);
	return status;
}

/* --basic-auth-file: its first line, "USER:PASSWORD" (a file, so the password is in no
 * process's command line). MON_EXIT_USAGE / MON_EXIT_FAILED (printed) as a negative number. */
static int load_basic_auth(const char *path, struct serve_http *http)
{
	char *text = NULL, *colon;
	int status = read_small_file(path, &text);

	if (status < 0)
		return -mon_fail("cannot read %s: %s", path, strerror(-status));
	text[strcspn(text, "\r\n")] = '\0';
	colon = strchr(text, ':');
	if (colon == NULL || colon == text || colon[1] == '\0') {
		free(text);
		return -tool_usage_error("%s must hold one line USER:PASSWORD", path);
	}
	*colon = '\0';
	http->user = text;
	http->password = strdup(colon + 1);
	if (http->password == NULL)
		return -mon_fail("out of memory");
	return 0;
}

static int load_web_options(const struct mon_options *options, struct server *server)
{
	int status;

	if ((options->tls_cert == NULL) != (options->tls_key == NULL))
		return -tool_usage_error("--tls-cert and --tls-key go together");
	if (options->basic_auth_file != NULL) {
		status = load_basic_auth(options->basic_auth_file, &server->http);
		if (status < 0)
			return status;
	}
	if (options->tls_cert == NULL)
		return 0;
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
		return -mon_fail("this libmicrohttpd has no TLS");
	status = read_small_file(options->tls_cert, &server->tls_cert);
	if (status == 0)
		status = read_small_file(options->tls_key, &server->tls_key);
	if (status < 0)
		return -mon_fail("cannot read --tls-cert or --tls-key: %s", strerror(-status));
	return 0;
}

/* libmicrohttpd's own messages (a bad TLS key, the connection limit reached, ...), prefixed and
 * bounded: a flood of connections must not become a flood of lines. */
static void http_log(void *context, const char *format, va_list arguments)
{
	struct server *server = context;
	char message[512];

	if (server->log_lines > HTTP_LOG_LINES)
		return;
	if (server->log_lines++ == HTTP_LOG_LINES) {
		tool_warn("http: further messages are not printed");
		return;
	}
	vsnprintf(message, sizeof(message), format, arguments);
	message[strcspn(message, "\n")] = '\0';
	tool_warn("http: %s", message);
}

/* As many connections as the descriptor limit allows (raised to its hard limit), up to
 * SERVE_MAX_CONNECTIONS, keeping some descriptors for msrd, rings and /proc. */
static unsigned connection_limit(void)
{
	struct rlimit limit;
	const rlim_t reserve = 64 + SERVE_MAX_RINGS + SERVE_MAX_MSRD_RINGS;

	if (getrlimit(RLIMIT_NOFILE, &limit) < 0)
		return 64;
	if (limit.rlim_cur < limit.rlim_max) {
		limit.rlim_cur = limit.rlim_max;
		setrlimit(RLIMIT_NOFILE, &limit);
		getrlimit(RLIMIT_NOFILE, &limit);
	}
	if (limit.rlim_cur <= reserve + 16)
		return 16;
	return limit.rlim_cur - reserve > SERVE_MAX_CONNECTIONS
		       ? SERVE_MAX_CONNECTIONS
		       : (unsigned)(limit.rlim_cur - reserve);
}

static int start_daemon(struct server *server)
{
	unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	struct MHD_OptionItem tls[] = {
		{ MHD_OPTION_HTTPS_MEM_CERT, 0, server->tls_cert },
		{ MHD_OPTION_HTTPS_MEM_KEY, 0, server->tls_key },
		{ MHD_OPTION_END, 0, NULL },
	};

	if (server->tls_cert != NULL)
		flags |= MHD_USE_TLS;
	else
		tls[0].option = MHD_OPTION_END;
	server->http.state = &server->state;
	server->daemon = MHD_start_daemon(
		flags, 0, NULL, NULL, serve_http_answer, &server->http,
		MHD_OPTION_EXTERNAL_LOGGER, http_log, server, /* first, or the default logs */
		MHD_OPTION_LISTEN_SOCKET, server->listener,
		MHD_OPTION_CONNECTION_LIMIT, connection_limit(),
		MHD_OPTION_CONNECTION_TIMEOUT, SERVE_CLIENT_TIMEOUT_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SERVE_CONNECTION_MEMORY,
		MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
	if (server->daemon == NULL)
		return -mon_fail("cannot start the HTTP server%s",
				 server->tls_cert != NULL ? " (is the TLS key that of the certificate?)"
							  : "");
	return 0;
}

/* Seconds until libmicrohttpd next has work of its own (a connection's timeout), or `wait`. */
static double http_wait(struct MHD_Daemon *daemon, double wait)
{
	MHD_UNSIGNED_LONG_LONG milliseconds;

	if (MHD_get_timeout(daemon, &milliseconds) == MHD_YES && milliseconds / 1000.0 < wait)
		return milliseconds / 1000.0;
	return wait;
}

static void serve_loop(struct server *server, const sigset_t *wait_mask)
{
	const union MHD_DaemonInfo *info =
		MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_EPOLL_FD);
	struct pollfd fd = { .fd = info != NULL ? info->epoll_fd : -1, .events = POLLIN };
	double next_tick = mon_now() + server->state.interval;

	serve_tick(&server->state);
	while (!mon_stop_requested()) {
		double now = mon_now();
		double wait = http_wait(server->daemon, fmax(next_tick - now, 0));
		struct timespec timeout = { .tv_sec = (time_t)wait,
					    .tv_nsec = (long)((wait - floor(wait)) * 1e9) };
		if (ppoll(&fd, 1, &timeout, wait_mask) < 0 && errno != EINTR)
			break;
		MHD_run(server->daemon);
		now = mon_now();
		if (now >= next_tick) {
			serve_tick(&server->state);
			next_tick = fmax(next_tick + server->state.interval, now);
		}
	}
}

static void server_free(struct server *server)
{
	if (server->daemon != NULL)
		MHD_stop_daemon(server->daemon); /* closes the listener it was given */
	else if (server->listener >= 0)
		close(server->listener);
	free(server->http.user);
	free(server->http.password);
	free(server->tls_cert);
	free(server->tls_key);
	free(server);
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
	server->listener = -1;
	status = load_web_options(options, server);
	if (status == 0)
		status = open_listener(listen_at, &server->listener);
	if (status == 0)
		status = start_daemon(server);
	if (status < 0) {
		server_free(server);
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
	server->state.interval_by_policy = !(options->given & MON_OPT_INTERVAL);
	server->state.resolution_by_policy = !(options->given & MON_OPT_RESOLUTION);
	if (serve_attribution_open(&server->state, options->top, options->cgroup_depth,
				   options->cgroup_retention_s) < 0)
		tool_warn("no per-process energy series: out of memory");
	if (serve_slurm_open(&server->state, options->slurm_dir != NULL
						     ? options->slurm_dir
						     : SERVE_DEFAULT_SLURM_DIR) < 0)
		tool_warn("no Slurm step series: out of memory");
	serve_loop(server, &wait_mask);
	serve_state_free(&server->state);
	server_free(server);
	return MON_EXIT_OK;
}
