/*
 * The descriptor passing libhaecer receives replies with (common/fdpass): bytes and a descriptor
 * arrive together; of several descriptors on one message the first is kept and the rest are
 * closed; one already held makes a new one closed; with no place for one (NULL) all are closed;
 * more descriptors than the control buffer holds (truncated control data) leave none open but
 * the one kept. "Closed" is checked by counting this process's open descriptors.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/fdpass.h"

#define MANY_FDS 12 /* more than fdpass's control buffer holds */

static int open_count(void)
{
	DIR *directory = opendir("/proc/self/fd");
	int count = 0;

	assert_non_null(directory);
	while (readdir(directory) != NULL)
		count++;
	closedir(directory);
	return count;
}

/* Send "hello" with `count` descriptors of /dev/null in one SCM_RIGHTS header, by hand. */
static void send_with_fds(int socket, int count)
{
	union {
		char buffer[CMSG_SPACE(sizeof(int) * MANY_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec vector = { .iov_base = "hello", .iov_len = 5 };
	struct msghdr message = { .msg_iov = &vector, .msg_iovlen = 1,
				  .msg_control = control.buffer,
				  .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)count) };
	struct cmsghdr *header;
	int fds[MANY_FDS];

	memset(&control, 0, sizeof(control));
	header = CMSG_FIRSTHDR(&message);
	header->cmsg_level = SOL_SOCKET;
	header->cmsg_type = SCM_RIGHTS;
	header->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)count);
	for (int i = 0; i < count; i++) {
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_true(fds[i] >= 0);
	}
	memcpy(CMSG_DATA(header), fds, sizeof(int) * (size_t)count);
	assert_int_equal(sendmsg(socket, &message, MSG_NOSIGNAL), 5);
	for (int i = 0; i < count; i++)
		close(fds[i]);
}

static void socket_pair(int sockets[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets), 0);
}

static void assert_dev_null(int fd)
{
	struct stat seen, expected;

	assert_int_equal(fstat(fd, &seen), 0);
	assert_int_equal(stat("/dev/null", &expected), 0);
	assert_int_equal(seen.st_rdev, expected.st_rdev);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

static void test_send_and_receive_one(void **state)
{
	int sockets[2], sent = open("/dev/null", O_RDONLY | O_CLOEXEC), fd = -1;
	char buffer[8];

	(void)state;
	socket_pair(sockets);
	assert_int_equal(fdpass_send(sockets[0], "R", 1, sent), 1);
	assert_int_equal(fdpass_receive(sockets[1], buffer, sizeof(buffer), 0, &fd), 1);
	assert_int_equal(buffer[0], 'R');
	assert_true(fd >= 0 && fd != sent);
	assert_dev_null(fd);
	close(fd);
	close(sent);
	close(sockets[0]);
	close(sockets[1]);
}

/* Send "hello" with `count` descriptors and receive it into *fd (fd may be NULL): how many
 * descriptors the receive left open in this process. */
static int opened_by_receive(int count, int *fd)
{
	int sockets[2], before, after;
	char buffer[8];

	socket_pair(sockets);
	before = open_count();
	send_with_fds(sockets[0], count);
	assert_int_equal(fdpass_receive(sockets[1], buffer, sizeof(buffer), 0, fd), 5);
	assert_memory_equal(buffer, "hello", 5);
	after = open_count();
	close(sockets[0]);
	close(sockets[1]);
	return after - before;
}

static void test_extra_fds_closed(void **state)
{
	int fd = -1;

	(void)state;
	assert_int_equal(opened_by_receive(3, &fd), 1);
	assert_dev_null(fd);
	close(fd);
}

static void test_fd_already_held(void **state)
{
	int held = open("/dev/null", O_RDONLY | O_CLOEXEC), fd = held;

	(void)state;
	assert_int_equal(opened_by_receive(2, &fd), 0);
	assert_int_equal(fd, held);
	close(held);
}

static void test_no_place_closes_all(void **state)
{
	(void)state;
	assert_int_equal(opened_by_receive(2, NULL), 0);
}

static void test_truncated_control(void **state)
{
	int fd = -1;

	(void)state;
	assert_int_equal(opened_by_receive(MANY_FDS, &fd), 1);
	assert_dev_null(fd);
	close(fd);
}

static void test_errors(void **state)
{
	int sockets[2], fd = -1;
	char buffer[8];

	(void)state;
	socket_pair(sockets);
	assert_int_equal(fdpass_receive(sockets[1], buffer, sizeof(buffer), MSG_DONTWAIT, &fd),
			 -EAGAIN);
	assert_int_equal(fdpass_send(sockets[0], "R", 0, sockets[0]), -EINVAL);
	close(sockets[0]);
	assert_int_equal(fdpass_receive(sockets[1], buffer, sizeof(buffer), 0, &fd), 0);
	assert_int_equal(fd, -1);
	assert_int_equal(fdpass_send(sockets[1], "R", 1, sockets[1]), -EPIPE);
	close(sockets[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_send_and_receive_one),
		cmocka_unit_test(test_extra_fds_closed),
		cmocka_unit_test(test_fd_already_held),
		cmocka_unit_test(test_no_place_closes_all),
		cmocka_unit_test(test_truncated_control),
		cmocka_unit_test(test_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
