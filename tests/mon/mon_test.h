/*
 * tests/mon/mon_test.h — what haecer-mon's tests share: running haecer-mon and the test
 * producer (tests/mon/helper_producer.c) as real processes with pipes, reading their output
 * line by line with a timeout, and picking fields out of CSV and JSON lines.
 *
 * Header-only (static inline) because each test is one program; timeouts are generous and only
 * turn a hang into a failure, never judge speed.
 */
#ifndef HAECER_TESTS_MON_TEST_H
#define HAECER_TESTS_MON_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/tool_argv.h"
#include "shm/ring.h"

#define MON_TEST_TIMEOUT_MS 60000u
#define MON_TEST_MAX_ARGS 48u

/* A policy's start: the Intel RAPL registers in the set `rapl`, up to "rules:". */
#define MON_TEST_RAPL_MSRS                                                               \
	"version: 1\n"                                                                   \
	"default: deny\n"                                                                \
	"msrs:\n"                                                                        \
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"           \
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"         \
	"  - {name: PP0_ENERGY_STATUS, address: 0x639, read: true, set: rapl}\n"         \
	"  - {name: PP1_ENERGY_STATUS, address: 0x641, read: true, set: rapl}\n"         \
	"rules:\n"

/* Ring majors of the tests' policy: 1-9 may be monitored, 10-20 only created. */
#define MON_TEST_POLICY                                                                  \
	MON_TEST_RAPL_MSRS                                                               \
	"  - {match: {uid: 0}, allow: [rapl], create_rings: [1-20], monitor_rings: [1-9]}\n"

struct proc {
	pid_t pid;
	int in;   /* its stdin, or -1 */
	int out;  /* its stdout */
	int err;  /* its stderr */
};

static inline const char *mon_test_path(const char *name)
{
	static char paths[4][PATH_MAX];
	static unsigned next;
	char *path = paths[next++ % 4];

	snprintf(path, PATH_MAX, "%s/%s", harness_build_dir(), name);
	return path;
}

static inline void proc_start(struct proc *proc, const char *const *argv)
{
	int in[2], out[2], err[2];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(err, O_CLOEXEC), 0);
	proc->pid = fork();
	assert_true(proc->pid >= 0);
	if (proc->pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	proc->in = in[1];
	proc->out = out[0];
	proc->err = err[0];
}

/* haecer-mon --socket SOCKET arguments...; in the valgrind pass under memcheck too, whose
 * findings make it exit 99. */
static inline void mon_start(struct proc *proc, const char *socket_path,
			     const char *const *arguments)
{
	const char *argv[MON_TEST_MAX_ARGS];

	harness_tool_argv(argv, MON_TEST_MAX_ARGS, mon_test_path("haecer-mon"), socket_path,
			  arguments);
	proc_start(proc, argv);
}

/* One line of fd (without its newline) within the timeout; false at end of file or timeout. */
static inline bool read_line(int fd, char *line, size_t size, unsigned timeout_ms)
{
	size_t used = 0;

	while (used + 1 < size) {
		struct pollfd poller = { .fd = fd, .events = POLLIN };
		char c;
		if (poll(&poller, 1, (int)timeout_ms) <= 0 || read(fd, &c, 1) != 1)
			return false;
		if (c == '\n')
			break;
		line[used++] = c;
	}
	line[used] = '\0';
	return true;
}

static inline void append(char **text, size_t *length, const char *data, size_t count)
{
	char *bigger = realloc(*text, *length + count + 1);

	assert_non_null(bigger);
	memcpy(bigger + *length, data, count);
	*length += count;
	bigger[*length] = '\0';
	*text = bigger;
}

/* Close its stdin, read the rest of stdout and stderr (each may be NULL: dropped), and wait.
 * Returns the exit status, 128 + signal, or -1 after killing it when it did not end in time. */
static inline int proc_finish(struct proc *proc, char **out, char **err, unsigned timeout_ms)
{
	struct pollfd fds[2] = { { .fd = proc->out, .events = POLLIN },
				 { .fd = proc->err, .events = POLLIN } };
	char *texts[2] = { NULL, NULL };
	size_t lengths[2] = { 0, 0 };
	int open_count = 2;
	int status = -1;

	if (proc->in >= 0)
		close(proc->in);
	proc->in = -1;
	for (int i = 0; i < 2; i++)
		append(&texts[i], &lengths[i], "", 0);
	while (open_count > 0 && poll(fds, 2, (int)timeout_ms) > 0) {
		for (int i = 0; i < 2; i++) {
			char buffer[4096];
			ssize_t got;
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP)))
				continue;
			got = read(fds[i].fd, buffer, sizeof(buffer));
			if (got > 0) {
				append(&texts[i], &lengths[i], buffer, (size_t)got);
				continue;
			}
			fds[i].fd = -1;
			open_count--;
		}
	}
	if (open_count > 0)
		kill(proc->pid, SIGKILL);
	if (waitpid(proc->pid, &status, 0) == proc->pid && open_count == 0)
		status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	else
		status = -1;
	close(proc->out);
	close(proc->err);
	if (out != NULL)
		*out = texts[0];
	else
		free(texts[0]);
	if (err != NULL)
		*err = texts[1];
	else
		free(texts[1]);
	return status;
}

/* Run haecer-mon to the end; its exit status, stdout and stderr (malloc'ed). */
static inline int mon_run(const char *socket_path, const char *const *arguments, char **out,
			  char **err)
{
	struct proc proc;

	mon_start(&proc, socket_path, arguments);
	return proc_finish(&proc, out, err, MON_TEST_TIMEOUT_MS);
}

/* ---- the test producer ---- */

struct producer {
	struct proc proc;
	uint32_t instance;
	pid_t pid;
};

static inline void producer_start(struct producer *producer, const char *socket_path,
				  unsigned major, unsigned minor, unsigned capacity)
{
	char numbers[3][16];
	const char *argv[] = { mon_test_path("tests/mon/helper_producer"), socket_path,
			       numbers[0], numbers[1], numbers[2], NULL };
	char line[128];
	int pid;

	snprintf(numbers[0], sizeof(numbers[0]), "%u", major);
	snprintf(numbers[1], sizeof(numbers[1]), "%u", minor);
	snprintf(numbers[2], sizeof(numbers[2]), "%u", capacity);
	proc_start(&producer->proc, argv);
	assert_true(read_line(producer->proc.out, line, sizeof(line), MON_TEST_TIMEOUT_MS));
	assert_int_equal(sscanf(line, "instance %u pid %d", &producer->instance, &pid), 2);
	producer->pid = pid;
}

static inline void producer_say(struct producer *producer, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

static inline void producer_say(struct producer *producer, const char *format, ...)
{
	char line[256];
	va_list arguments;
	int length;

	va_start(arguments, format);
	length = vsnprintf(line, sizeof(line) - 1, format, arguments);
	va_end(arguments);
	assert_true(length > 0 && (size_t)length < sizeof(line) - 1);
	line[length++] = '\n';
	assert_int_equal(write(producer->proc.in, line, (size_t)length), length);
}

/* Everything said before is in the ring. */
static inline void producer_sync(struct producer *producer)
{
	char line[16];

	producer_say(producer, "sync");
	assert_true(read_line(producer->proc.out, line, sizeof(line), MON_TEST_TIMEOUT_MS));
	assert_string_equal(line, "ok");
}

/* "exit" (disconnect, exit 0) or "die" (SIGKILL); returns its wait status as proc_finish. */
static inline int producer_end(struct producer *producer, const char *how)
{
	producer_say(producer, "%s", how);
	return proc_finish(&producer->proc, NULL, NULL, MON_TEST_TIMEOUT_MS);
}

/* ---- rings of another uid ---- */

/* A child process of another uid whose rings stay in msrd (they go with its connection) until
 * ring_owner_end. */
struct ring_owner {
	pid_t pid;
	int told;   /* what the child writes once its rings exist */
	int finish; /* closing it ends the child */
};

/* A spec for ring major.minor of 16 records with one counter, "FAKE", of no CPU or package. */
static inline struct haecer_ring_spec ring_owner_spec(uint16_t major, uint16_t minor)
{
	struct haecer_ring_spec spec = { .major = major, .minor = minor, .capacity = 16,
					 .clock = RING_CLOCK_MONOTONIC_RAW, .counter_count = 1 };

	snprintf(spec.counters[0].name, sizeof(spec.counters[0].name), "FAKE");
	spec.counters[0].cpu = -1;
	spec.counters[0].package = -1;
	return spec;
}

/* Forks a child that becomes `uid` (no supplementary groups), connects to msrd at socket_path
 * and calls make(conn, told, argument) to create its rings and tell the test through `told`;
 * a nonzero return is its exit status, else it keeps its connection until ring_owner_end. */
static inline void ring_owner_start(struct ring_owner *owner, const char *socket_path, uid_t uid,
				    int (*make)(struct haecer_conn *conn, int told, void *argument),
				    void *argument)
{
	int told[2], finish[2];

	assert_int_equal(pipe(told), 0);
	assert_int_equal(pipe(finish), 0);
	owner->pid = fork();
	assert_true(owner->pid >= 0);
	if (owner->pid == 0) {
		struct haecer_conn *conn;
		char byte;
		int status;

		close(told[0]);
		close(finish[1]);
		if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0 ||
		    haecer_connect(socket_path, &conn) < 0)
			_exit(1);
		status = make(conn, told[1], argument);
		if (status != 0)
			_exit(status);
		while (read(finish[0], &byte, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(told[1]);
	close(finish[0]);
	owner->told = told[0];
	owner->finish = finish[1];
}

/* Lets the child go (its rings leave with its connection); it must have exited 0. */
static inline void ring_owner_end(struct ring_owner *owner)
{
	int status;

	close(owner->finish);
	close(owner->told);
	assert_int_equal(waitpid(owner->pid, &status, 0), owner->pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- reading output ---- */

/* The raw text of "key": in a JSON line (up to , or }), without quotes; false if absent. */
static inline bool json_field(const char *line, const char *key, char *out, size_t size)
{
	char pattern[64];
	const char *start;
	size_t length;

	snprintf(pattern, sizeof(pattern), "\"%s\":", key);
	start = strstr(line, pattern);
	if (start == NULL)
		return false;
	start += strlen(pattern);
	if (*start == '"') {
		start++;
		length = strcspn(start, "\"");
	} else {
		length = strcspn(start, ",}");
	}
	if (length >= size)
		return false;
	memcpy(out, start, length);
	out[length] = '\0';
	return true;
}

/* Field `index` (from 0) of a CSV line without quoted commas; "" when absent. */
static inline void csv_field(const char *line, unsigned index, char *out, size_t size)
{
	const char *start = line;
	size_t length;

	for (unsigned i = 0; i < index && start != NULL; i++) {
		start = strchr(start, ',');
		if (start != NULL)
			start++;
	}
	out[0] = '\0';
	if (start == NULL)
		return;
	length = strcspn(start, ",\n");
	if (length >= size)
		length = size - 1;
	memcpy(out, start, length);
	out[length] = '\0';
}

/* Split text into lines in place; returns how many (at most max). */
static inline size_t split_lines(char *text, char **lines, size_t max)
{
	size_t count = 0;

	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line != NULL && count < max;
	     line = strtok_r(NULL, "\n", &save))
		lines[count++] = line;
	return count;
}

static inline bool near(double actual, double expected)
{
	double scale = expected < 0 ? -expected : expected;
	double difference = actual - expected;

	if (difference < 0)
		difference = -difference;
	return difference <= 1e-6 * (scale > 1 ? scale : 1);
}

#endif
