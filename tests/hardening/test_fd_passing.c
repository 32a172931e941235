/*
 * File descriptors sent TO msrd (SCM_RIGHTS) are never installed in it, never used, and cost it
 * nothing: msrd receives with recv (no control buffer), so the kernel closes whatever came along.
 * A client attaches the most descriptors one message can carry (SCM_MAX_FD, 253) of every kind
 * (a memfd, pipe ends, /dev/null, its own socket, a directory) to well-formed requests, to a
 * frame split across messages, and to garbage. Every request is answered as if nothing came
 * with it; msrd's descriptor count (/proc/PID/fd) is the same before and after, none of its
 * descriptors is one of ours, and a bystander client is served throughout.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "proto/wire.h"
#include "tests/hardening/hardening.h"
#include "tests/lib/msrd_group.h"
#include "harness/raw_client.h"

#define TIMEOUT_MS 60000u
#define MAX_FDS 253 /* SCM_MAX_FD */
#define MEMFD_NAME "haecer-hostile-fd"

static struct msrd_server server;
static struct bystander bystander;
static uint8_t reply[WIRE_MAX_FRAME];

/* Descriptors of every kind, repeated up to MAX_FDS. */
static int collect_fds(int *fds, int connection)
{
	int pipe_ends[2];
	int kinds[5];
	int count = 0;

	assert_int_equal(pipe2(pipe_ends, O_CLOEXEC), 0);
	kinds[0] = memfd_create(MEMFD_NAME, MFD_CLOEXEC);
	kinds[1] = pipe_ends[0];
	kinds[2] = pipe_ends[1];
	kinds[3] = open("/dev/null", O_RDWR | O_CLOEXEC);
	kinds[4] = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < 5; i++)
		assert_true(kinds[i] >= 0);
	fds[count++] = connection;
	while (count < MAX_FDS) {
		fds[count] = kinds[count % 5];
		count++;
	}
	return count;
}

static void close_kinds(const int *fds)
{
	for (int i = 1; i <= 5; i++)
		close(fds[i]);
}

/* bytes with `count` descriptors attached to their first byte. */
static void send_with_fds(int fd, const void *bytes, size_t length, const int *fds, int count)
{
	union {
		char buffer[CMSG_SPACE(sizeof(int) * MAX_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec vector = { .iov_base = (void *)bytes, .iov_len = length };
	struct msghdr message = {
		.msg_iov = &vector,
		.msg_iovlen = 1,
		.msg_control = control.buffer,
		.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count),
	};
	struct cmsghdr *header = CMSG_FIRSTHDR(&message);

	memset(&control, 0, sizeof(control));
	header->cmsg_level = SOL_SOCKET;
	header->cmsg_type = SCM_RIGHTS;
	header->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
	memcpy(CMSG_DATA(header), fds, sizeof(int) * (size_t)count);
	assert_int_equal(sendmsg(fd, &message, MSG_NOSIGNAL), (ssize_t)length);
}

static void expect_tsc_reply(int fd, uint32_t request_id)
{
	struct wire_header header;
	int received = -1;

	assert_int_equal(raw_read_frame(fd, reply, sizeof(reply), &header, TIMEOUT_MS, &received),
			 0);
	assert_int_equal(received, -1);
	assert_int_equal(header.op, WIRE_OP_READ);
	assert_int_equal(header.request_id, request_id);
	assert_int_equal(header.status, WIRE_STATUS_OK);
}

/* Whether any descriptor of msrd is one of ours: our memfd by name, or our pipe. */
static bool msrd_holds_ours(const char *pipe_name)
{
	char path[PATH_MAX], target[PATH_MAX];
	struct dirent *entry;
	bool found = false;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)server.pid);
	dir = opendir(path);
	assert_non_null(dir);
	while ((entry = readdir(dir)) != NULL && !found) {
		ssize_t length;
		snprintf(path, sizeof(path), "/proc/%d/fd/%s", (int)server.pid, entry->d_name);
		length = readlink(path, target, sizeof(target) - 1);
		if (length <= 0)
			continue;
		target[length] = '\0';
		found = strstr(target, MEMFD_NAME) != NULL || strcmp(target, pipe_name) == 0;
	}
	closedir(dir);
	return found;
}

static void test_descriptors_sent_to_msrd(void **state)
{
	uint8_t frames[4 * (WIRE_HEADER_SIZE + WIRE_READ_REQUEST_SIZE)];
	int fds[MAX_FDS];
	char pipe_name[PATH_MAX], link[64];
	int before, during, fd, count;
	size_t length;
	ssize_t name_length;

	(void)state;
	assert_true(bystander_progress(&bystander, 3));
	before = process_fd_count(server.pid);
	assert_true(before > 0);
	fd = raw_connect(server.socket_path);
	assert_true(fd >= 0);
	count = collect_fds(fds, fd);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fds[2]);
	name_length = readlink(link, pipe_name, sizeof(pipe_name) - 1);
	assert_true(name_length > 0);
	pipe_name[name_length] = '\0';

	/* Well-formed requests, each carrying 253 descriptors. */
	for (uint32_t id = 1; id <= 20; id++) {
		length = raw_read_request(frames, sizeof(frames), id, 0, 0x10);
		send_with_fds(fd, frames, length, fds, count);
		expect_tsc_reply(fd, id);
	}
	/* Two requests in one message, then one split across three messages, all with fds. */
	length = raw_read_request(frames, sizeof(frames), 21, 0, 0x10);
	length += raw_read_request(frames + length, sizeof(frames) - length, 22, 0, 0x10);
	send_with_fds(fd, frames, length, fds, count);
	expect_tsc_reply(fd, 21);
	expect_tsc_reply(fd, 22);
	length = raw_read_request(frames, sizeof(frames), 23, 0, 0x10);
	send_with_fds(fd, frames, 5, fds, count);
	send_with_fds(fd, frames + 5, 10, fds, count);
	send_with_fds(fd, frames + 15, length - 15, fds, count);
	expect_tsc_reply(fd, 23);
	during = process_fd_count(server.pid);
	assert_int_equal(during, before + 1); /* our connection, nothing else */
	assert_false(msrd_holds_ours(pipe_name));
	close(fd);

	/* Garbage with descriptors: the ERROR frame and the close as for any garbage. */
	fd = raw_connect(server.socket_path);
	assert_true(fd >= 0);
	fds[0] = fd;
	memset(frames, 0xEE, sizeof(frames));
	send_with_fds(fd, frames, sizeof(frames), fds, count);
	assert_int_equal(raw_wait_closed(fd, TIMEOUT_MS), 0);
	close(fd);
	close_kinds(fds);

	assert_int_equal(process_fd_count_settled(server.pid, before), before);
	assert_false(msrd_holds_ours(pipe_name));
	assert_true(bystander_progress(&bystander, 3));
}

HARDENING_BYSTANDER_FIXTURES(server, bystander)

int main(void)
{
	const char *arguments[] = { "--backend", "sim", NULL };
	const struct CMUnitTest tests[] = {
		BYSTANDER_TEST(test_descriptors_sent_to_msrd),
	};

	return MSRD_RUN_GROUP(&server, HARDENING_POLICY, arguments, NULL, tests);
}
