/*
 * bench/parts/attribution/slowloris.c — a real msrd on the simulated CPU and a real `haecer-mon
 * serve`; SCRAPES scrapes (each on a new connection: connect, GET /metrics, the whole reply by
 * its Content-Length) timed first alone (the baseline), then while cost->connections
 * connections each hold half a request head and wait (slowloris). Tests only check that such a
 * scrape is answered (tests/mon/test_serve_abuse.c); how fast is this benchmark's figure.
 */
#include "bench/parts/attribution/slowloris.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/lib/bench_stats.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"

#define SCRAPES 21
#define READ_TIMEOUT_MS 10000

static const char policy[] = POLICY_RAPL_PKG_FOR_ROOT;

/* serve on a loopback port of the kernel's choice; its pid, the port in *port, or -errno. */
static pid_t start_serve(const char *socket_path, unsigned *port)
{
	char path[4096], line[128] = "";
	int out[2];
	size_t length = 0;

	snprintf(path, sizeof(path), "%s/haecer-mon", harness_build_dir());
	if (pipe2(out, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(out[1], STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		execl(path, path, "--socket", socket_path, "serve", "--listen", "127.0.0.1:0",
		      "--interval", "1000", (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	struct pollfd ready = { .fd = out[0], .events = POLLIN };
	while (pid > 0 && length + 1 < sizeof(line) && !strchr(line, '\n') &&
	       poll(&ready, 1, READ_TIMEOUT_MS) == 1 && read(out[0], line + length, 1) == 1)
		line[++length] = '\0';
	close(out[0]);
	if (pid > 0 && sscanf(line, "listening on 127.0.0.1:%u", port) != 1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -EIO;
	}
	return pid < 0 ? -errno : pid;
}

static int connect_to(unsigned port)
{
	struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				       .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&address, sizeof(address)) < 0) {
		int error = -errno;
		close(fd);
		return error;
	}
	return fd;
}

/* One scrape's nanoseconds, or 0 when it got no whole 200 reply. */
static uint64_t scrape_ns(unsigned port)
{
	static const char request[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	static char reply[1 << 20];
	size_t length = 0;
	uint64_t start = bench_now_ns();
	int fd = connect_to(port);
	bool whole = false;

	if (fd < 0 || send(fd, request, sizeof(request) - 1, MSG_NOSIGNAL) < 0)
		goto out;
	struct pollfd readable = { .fd = fd, .events = POLLIN };
	while (!whole && length + 1 < sizeof(reply) && poll(&readable, 1, READ_TIMEOUT_MS) == 1) {
		ssize_t got = read(fd, reply + length, sizeof(reply) - 1 - length);
		if (got <= 0)
			break;
		length += (size_t)got;
		reply[length] = '\0';
		const char *end = strstr(reply, "\r\n\r\n");
		const char *field = strcasestr(reply, "\r\nContent-Length: ");
		whole = end && field && field < end &&
			length - (size_t)(end + 4 - reply) >= strtoull(field + 18, NULL, 10);
	}
out:
	if (fd >= 0)
		close(fd);
	return whole && strncmp(reply, "HTTP/1.1 200", 12) == 0 ? bench_now_ns() - start : 0;
}

/* SCRAPES scrapes sorted in times; -EIO when one got no answer. */
static int scrape_set(unsigned port, uint64_t *times)
{
	for (unsigned i = 0; i < SCRAPES; i++)
		if ((times[i] = scrape_ns(port)) == 0)
			return -EIO;
	bench_sort_u64(times, SCRAPES);
	return 0;
}

/* count connections holding half a request head each; they stay open until closed. */
static int open_partial(unsigned port, int *fds, unsigned count)
{
	static const char partial[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
	for (unsigned i = 0; i < count; i++) {
		fds[i] = connect_to(port);
		if (fds[i] < 0)
			return fds[i];
		if (send(fds[i], partial, sizeof(partial) - 1, MSG_NOSIGNAL) < 0)
			return -errno;
	}
	return 0;
}

static bool raise_file_limit(rlim_t need)
{
	struct rlimit limit;
	if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
		return false;
	limit.rlim_cur = limit.rlim_max;
	setrlimit(RLIMIT_NOFILE, &limit);
	return getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur >= need;
}

int slowloris_measure(struct slowloris_cost *cost)
{
	const char *arguments[] = { "--backend", "sim", NULL };
	uint64_t times[SCRAPES];
	struct msrd_server server;
	unsigned port = 0;
	int status;

	if (!raise_file_limit(cost->connections + 64))
		return -EMFILE;
	int *fds = malloc(cost->connections * sizeof(*fds));
	if (fds == NULL)
		return -ENOMEM;
	memset(fds, 0xff, cost->connections * sizeof(*fds));
	if (msrd_start(&server, policy, arguments) != 0) {
		free(fds);
		return -EIO;
	}
	pid_t serve = start_serve(server.socket_path, &port);
	status = serve < 0 ? (int)serve : scrape_set(port, times);
	if (status == 0) {
		cost->baseline_ms = (double)times[SCRAPES / 2] / 1e6;
		status = open_partial(port, fds, cost->connections);
	}
	if (status == 0)
		status = scrape_set(port, times);
	if (status == 0) {
		cost->slowloris_ms = (double)times[SCRAPES / 2] / 1e6;
		cost->slowloris_max_ms = (double)times[SCRAPES - 1] / 1e6;
	}
	for (unsigned i = 0; i < cost->connections; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	if (serve > 0) {
		kill(serve, SIGTERM);
		waitpid(serve, NULL, 0);
	}
	msrd_kill(&server);
	return status;
}
