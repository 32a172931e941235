/*
 * tests/mon/serve_test.h — running `haecer-mon serve` in tests and talking HTTP to it.
 */
#ifndef HAECER_TESTS_MON_SERVE_TEST_H
#define HAECER_TESTS_MON_SERVE_TEST_H

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "tests/mon/mon_test.h"

struct http_reply {
	int code;
	char content_type[128];
	char *text;        /* the whole reply, malloc'ed */
	const char *body;  /* inside text */
};

/* The serve process a test started, so a failed test's teardown can end it. */
static pid_t serve_test_running;

/* Teardown: kill a serve left behind by a failed test. */
static inline int serve_teardown(void **state)
{
	(void)state;
	if (serve_test_running > 0) {
		kill(serve_test_running, SIGKILL);
		waitpid(serve_test_running, NULL, 0);
	}
	serve_test_running = 0;
	return 0;
}

/* haecer-mon with `arguments` (serve --listen 127.0.0.1:0 ...); returns the port it printed. */
static inline unsigned serve_start_arguments(struct proc *proc, const char *socket_path,
					     const char *const *arguments)
{
	char line[128];
	unsigned port = 0;

	mon_start(proc, socket_path, arguments);
	serve_test_running = proc->pid;
	assert_true(read_line(proc->out, line, sizeof(line), MON_TEST_TIMEOUT_MS));
	assert_int_equal(sscanf(line, "listening on 127.0.0.1:%u", &port), 1);
	return port;
}

/* serve --listen 127.0.0.1:0 --interval MS; returns the port it printed. */
static inline unsigned serve_start(struct proc *proc, const char *socket_path,
				   const char *interval_ms)
{
	const char *arguments[] = { "serve", "--listen", "127.0.0.1:0", "--interval", interval_ms,
				    NULL };

	return serve_start_arguments(proc, socket_path, arguments);
}

/* SIGTERM; it must exit 0. Its stderr in *err (may be NULL). */
static inline void serve_stop(struct proc *proc, char **err)
{
	assert_int_equal(kill(proc->pid, SIGTERM), 0);
	serve_test_running = 0;
	assert_int_equal(proc_finish(proc, NULL, err, MON_TEST_TIMEOUT_MS), 0);
}

static inline int http_connect(unsigned port)
{
	struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	/* A hang fails the test (after the tests' generous timeout) instead of blocking it. */
	struct timeval limit = { .tv_sec = MON_TEST_TIMEOUT_MS / 1000 };

	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit)), 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof(address)), 0);
	return fd;
}

/* Whether `text` holds a whole reply: its head and as many body bytes as Content-Length says
 * (serve keeps an HTTP/1.1 connection alive after answering). */
static inline bool http_reply_complete(const char *text, size_t length)
{
	const char *end = strstr(text, "\r\n\r\n");
	const char *field = strcasestr(text, "\r\nContent-Length: ");

	if (end == NULL || field == NULL || field > end)
		return false;
	return length - (size_t)(end + 4 - text) >= strtoull(field + 18, NULL, 10);
}

/* Send `length` bytes as the request and read the reply until it is whole or the server
 * closes. */
static inline void http_exchange(unsigned port, const char *request, size_t length,
				 struct http_reply *reply)
{
	int fd = http_connect(port);
	size_t reply_length = 0;
	const char *type;

	*reply = (struct http_reply){ 0 };
	assert_int_equal(send(fd, request, length, MSG_NOSIGNAL), (ssize_t)length);
	append(&reply->text, &reply_length, "", 0);
	while (!http_reply_complete(reply->text, reply_length)) {
		char buffer[4096];
		ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
		if (got <= 0)
			break;
		append(&reply->text, &reply_length, buffer, (size_t)got);
	}
	close(fd);
	assert_int_equal(sscanf(reply->text, "HTTP/1.1 %d ", &reply->code), 1);
	type = strstr(reply->text, "\r\nContent-Type: ");
	if (type != NULL)
		sscanf(type + 16, "%127[^\r]", reply->content_type);
	reply->body = strstr(reply->text, "\r\n\r\n");
	assert_non_null(reply->body);
	reply->body += 4;
}

static inline void http_get(unsigned port, const char *path, const char *accept,
			    struct http_reply *reply)
{
	char request[512];
	int length = snprintf(request, sizeof(request),
			      "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s%sUser-Agent: test\r\n\r\n",
			      path, accept != NULL ? "Accept: " : "", accept != NULL ? accept : "",
			      accept != NULL ? "\r\n" : "");

	http_exchange(port, request, (size_t)length, reply);
}

/* Raise this process's descriptor limit to its hard limit; false when it stays below `need`. */
static inline bool raise_file_limit(rlim_t need)
{
	struct rlimit limit;

	if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
		return false;
	limit.rlim_cur = limit.rlim_max;
	setrlimit(RLIMIT_NOFILE, &limit);
	return getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur >= need;
}

/* Slowloris: `count` connections that each send half a request line and then wait. */
static inline int *slowloris_open(unsigned port, unsigned count)
{
	static const char partial[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
	int *fds = calloc(count, sizeof(*fds));

	assert_non_null(fds);
	for (unsigned i = 0; i < count; i++) {
		fds[i] = http_connect(port);
		assert_int_equal(send(fds[i], partial, sizeof(partial) - 1, MSG_NOSIGNAL),
				 (ssize_t)sizeof(partial) - 1);
	}
	return fds;
}

static inline void slowloris_close(int *fds, unsigned count)
{
	for (unsigned i = 0; i < count; i++)
		close(fds[i]);
	free(fds);
}

/* The value of the sample line that starts with `series` (name and labels), or NAN. */
static inline double sample_value(const char *body, const char *series)
{
	size_t length = strlen(series);

	for (const char *line = body; line != NULL && *line != '\0';
	     line = strchr(line, '\n') != NULL ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, series, length) == 0 && line[length] == ' ')
			return strtod(line + length + 1, NULL);
	}
	return NAN;
}

#endif
