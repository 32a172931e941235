/*
 * tests/shm/ring_testing.h — what the ring tests and their helper programs share: records that
 * carry their own sequence and checksum, a checker for what a consumer receives, and starting a
 * helper program with the ring's descriptor.
 */
#ifndef HAECER_TESTS_SHM_RING_TESTING_H
#define HAECER_TESTS_SHM_RING_TESTING_H

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/ring.h"

#define RING_TEST_MAX_THREADS 8u
#define RING_TEST_SEQUENCE_BITS 48
#define RING_TEST_SEQUENCE_MASK ((UINT64_C(1) << RING_TEST_SEQUENCE_BITS) - 1)
/* The descriptor number of the socket helpers receive the ring from. */
#define RING_TEST_CHILD_FD 3

/* Records pushed by full-scale stress tests, or the small figure under valgrind. */
static inline uint64_t ring_test_scaled(uint64_t full, uint64_t small)
{
	const char *scale = getenv("HAECER_TEST_SCALE");

	return scale && strcmp(scale, "small") == 0 ? small : full;
}

static inline uint64_t ring_test_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	x *= UINT64_C(0xc4ceb9fe1a85ec53);
	return x ^ (x >> 33);
}

/* Record number `sequence` of producer thread `thread`: every field is derived from the value,
 * so a record assembled from two different pushes fails ring_test_record_intact. */
static inline struct ring_record ring_test_record(uint32_t thread, uint64_t sequence)
{
	uint64_t value = (uint64_t)thread << RING_TEST_SEQUENCE_BITS | sequence;
	uint64_t check = ring_test_mix(value);

	return (struct ring_record){
		.value = value,
		.timestamp = check,
		.counter_id = thread,
		.unit_exponent = (int16_t)(check >> 49),
		.flags = (uint16_t)(check >> 16),
	};
}

static inline bool ring_test_record_intact(const struct ring_record *record)
{
	uint32_t thread = (uint32_t)(record->value >> RING_TEST_SEQUENCE_BITS);
	struct ring_record expected =
		ring_test_record(thread, record->value & RING_TEST_SEQUENCE_MASK);

	return thread < RING_TEST_MAX_THREADS && memcmp(&expected, record, sizeof(expected)) == 0;
}

/* What one consumer saw. With a single producer thread a record's sequence is its position, so
 * the gaps between received sequences must add up to exactly the reported losses. */
struct ring_test_tally {
	uint64_t received;
	uint64_t lost;
	uint64_t torn;
	uint64_t out_of_order;
	uint64_t gaps; /* thread 0's missing sequences before its last received record */
	bool seen[RING_TEST_MAX_THREADS];
	uint64_t last[RING_TEST_MAX_THREADS];
};

static inline void ring_test_tally_add(struct ring_test_tally *tally,
				       const struct ring_record *records, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		const struct ring_record *record = &records[i];
		uint32_t thread = (uint32_t)(record->value >> RING_TEST_SEQUENCE_BITS);
		uint64_t sequence = record->value & RING_TEST_SEQUENCE_MASK;
		uint64_t expected;

		tally->received++;
		if (!ring_test_record_intact(record)) {
			tally->torn++;
			continue;
		}
		expected = tally->seen[thread] ? tally->last[thread] + 1 : 0;
		if (sequence < expected)
			tally->out_of_order++;
		else if (thread == 0)
			tally->gaps += sequence - expected;
		tally->seen[thread] = true;
		tally->last[thread] = sequence;
	}
}

/* Thread 0's positions after its last received record, up to `pushed`, are gaps too. */
static inline uint64_t ring_test_final_gaps(const struct ring_test_tally *tally, uint64_t pushed)
{
	uint64_t next = tally->seen[0] ? tally->last[0] + 1 : 0;

	return tally->gaps + (pushed > next ? pushed - next : 0);
}

#ifdef assert_int_equal /* cmocka tests only: the helper programs have no cmocka */
/* After a final drain, every record the producers pushed is accounted for: none torn or out of
 * order, each received or reported lost, the consumer at the end, and with one producer thread
 * the gaps in its sequence are exactly the losses. */
static inline void ring_test_expect_accounted(const struct ring_consumer *consumer,
					      const struct ring_test_tally *tally, uint64_t pushed,
					      unsigned threads)
{
	assert_int_equal(tally->torn, 0);
	assert_int_equal(tally->out_of_order, 0);
	assert_int_equal(tally->received + tally->lost, pushed);
	assert_int_equal(consumer->position, pushed);
	if (threads == 1)
		assert_int_equal(ring_test_final_gaps(tally, pushed), tally->lost);
}
#endif

/* Drain with ring_consume_final until every position below head is decided. */
static inline int ring_test_drain_final(struct ring_consumer *consumer,
					struct ring_test_tally *tally)
{
	struct ring_record records[256];
	ssize_t count;

	while ((count = ring_consume_final(consumer, records, 256, &tally->lost)) > 0)
		ring_test_tally_add(tally, records, (size_t)count);
	return count < 0 ? (int)count : 0;
}

static inline struct ring_params ring_test_params(uint32_t capacity, uint32_t flags)
{
	struct ring_params params = {
		.major = 7,
		.minor = 3,
		.instance = 1,
		.capacity = capacity,
		.flags = flags,
		.clock = RING_CLOCK_MONOTONIC_RAW,
		.counter_count = 1,
		.counters = {{.name = "TEST_SEQUENCE", .id = 0, .kind = RING_COUNTER_SOFTWARE,
			      .package = -1, .cpu = -1}},
	};
	return params;
}

/* A helper program with pipes to its stdin and stdout and a UNIX socket at RING_TEST_CHILD_FD,
 * over which it receives the ring's descriptor, as a producer receives it from msrd. */
struct ring_test_child {
	pid_t pid;
	int to_child;
	int from_child;
	int socket;
};

static inline void ring_test_exec_helper(int socket, int stdin_fd, int stdout_fd,
					 char *const arguments[])
{
	char self[PATH_MAX], path[PATH_MAX + 64];
	ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (length < 0)
		_exit(126);
	self[length] = '\0';
	snprintf(path, sizeof(path), "%s/%s", dirname(self), arguments[0]);
	/* The helper dies with the test, so a failing test leaves no producer spinning. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* dup2 clears close-on-exec on the copies. */
	if (dup2(stdin_fd, STDIN_FILENO) < 0 || dup2(stdout_fd, STDOUT_FILENO) < 0 ||
	    dup2(socket, RING_TEST_CHILD_FD) < 0)
		_exit(126);
	execv(path, arguments);
	_exit(127);
}

static inline void ring_test_close_pair(int pair[2])
{
	close(pair[0]);
	close(pair[1]);
}

/* arguments: argv for the helper, arguments[0] being its name in the tests' directory. */
static inline int ring_test_spawn(struct ring_test_child *child, char *const arguments[])
{
	int to_child[2], from_child[2], sockets[2];

	*child = (struct ring_test_child){.pid = -1, .to_child = -1, .from_child = -1, .socket = -1};
	if (pipe2(to_child, O_CLOEXEC))
		return -errno;
	if (pipe2(from_child, O_CLOEXEC)) {
		ring_test_close_pair(to_child);
		return -errno;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets)) {
		ring_test_close_pair(to_child);
		ring_test_close_pair(from_child);
		return -errno;
	}
	fflush(NULL);
	child->pid = fork();
	if (child->pid == 0)
		ring_test_exec_helper(sockets[1], to_child[0], from_child[1], arguments);
	close(to_child[0]);
	close(from_child[1]);
	close(sockets[1]);
	child->to_child = to_child[1];
	child->from_child = from_child[0];
	child->socket = sockets[0];
	return child->pid < 0 ? -EAGAIN : 0;
}

static inline int ring_test_send_fd(int socket, int fd)
{
	char control[CMSG_SPACE(sizeof(int))] = {0};
	char byte = 'R';
	struct iovec data = {.iov_base = &byte, .iov_len = 1};
	struct msghdr message = {.msg_iov = &data, .msg_iovlen = 1, .msg_control = control,
				 .msg_controllen = sizeof(control)};
	struct cmsghdr *header = CMSG_FIRSTHDR(&message);

	header->cmsg_level = SOL_SOCKET;
	header->cmsg_type = SCM_RIGHTS;
	header->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(header), &fd, sizeof(int));
	return sendmsg(socket, &message, MSG_NOSIGNAL) == 1 ? 0 : -EPIPE;
}

/* The descriptor sent with ring_test_send_fd, or -errno. */
static inline int ring_test_receive_fd(int socket)
{
	char control[CMSG_SPACE(sizeof(int))] = {0};
	char byte;
	struct iovec data = {.iov_base = &byte, .iov_len = 1};
	struct msghdr message = {.msg_iov = &data, .msg_iovlen = 1, .msg_control = control,
				 .msg_controllen = sizeof(control)};
	struct cmsghdr *header;
	int fd;

	if (recvmsg(socket, &message, MSG_CMSG_CLOEXEC) != 1)
		return -EPIPE;
	header = CMSG_FIRSTHDR(&message);
	if (!header || header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS ||
	    header->cmsg_len != CMSG_LEN(sizeof(int)))
		return -EBADMSG;
	memcpy(&fd, CMSG_DATA(header), sizeof(int));
	return fd;
}

/* The flow msrd follows: start the producer, create its ring (producer_pid = the helper), hand
 * it the read-write descriptor, and attach `consumer` through a read-only one. */
static inline int ring_test_start(struct ring_test_child *child, struct ring_params *params,
				  char *const arguments[], struct ring_consumer *consumer)
{
	int fd = -1, readonly = -1, rc;

	rc = ring_test_spawn(child, arguments);
	if (rc)
		return rc;
	params->producer_pid = child->pid;
	rc = ring_memfd_create(params, &fd);
	if (rc)
		return rc;
	readonly = ring_reopen_readonly(fd);
	rc = readonly < 0 ? readonly : ring_consumer_attach(consumer, readonly);
	if (rc == 0)
		rc = ring_test_send_fd(child->socket, fd);
	close(fd);
	if (readonly >= 0)
		close(readonly);
	return rc;
}

/* One line the helper wrote (without its newline); -EPIPE at end of file. */
static inline int ring_test_read_line(const struct ring_test_child *child, char *line,
				      size_t size)
{
	size_t used = 0;

	while (used + 1 < size) {
		ssize_t got = read(child->from_child, &line[used], 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -EPIPE;
		if (line[used] == '\n')
			break;
		used++;
	}
	line[used] = '\0';
	return 0;
}

static inline int ring_test_write_line(const struct ring_test_child *child, const char *line)
{
	size_t length = strlen(line);

	return write(child->to_child, line, length) == (ssize_t)length ? 0 : -EPIPE;
}

/* Exit status of the helper (waits), or 128 + signal. */
static inline int ring_test_wait(struct ring_test_child *child)
{
	int status = 0;

	while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR)
		;
	close(child->to_child);
	close(child->from_child);
	close(child->socket);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

#endif
