#include "common/fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Room for a few descriptors: one is all a reply carries; the rest are a misbehaving peer's,
 * closed below (those beyond the buffer the kernel discards itself and flags MSG_CTRUNC). */
#define FDPASS_CONTROL_FDS 4

ssize_t fdpass_send(int socket, const void *data, size_t length, int fd)
{
	union {
		char buffer[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec vector = { .iov_base = (void *)data, .iov_len = length };
	struct msghdr message = {
		.msg_iov = &vector,
		.msg_iovlen = 1,
		.msg_control = control.buffer,
		.msg_controllen = sizeof(control.buffer),
	};
	struct cmsghdr *header;
	ssize_t sent;

	if (length == 0 || fd < 0)
		return -EINVAL;
	memset(&control, 0, sizeof(control));
	header = CMSG_FIRSTHDR(&message);
	header->cmsg_level = SOL_SOCKET;
	header->cmsg_type = SCM_RIGHTS;
	header->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(header), &fd, sizeof(int));
	sent = sendmsg(socket, &message, MSG_NOSIGNAL);
	return sent < 0 ? -errno : sent;
}

/* The descriptors of one SCM_RIGHTS header, counted only as far as the received control data
 * reaches: a header cut short by truncation never makes us read past it. */
static void take_fds(const struct msghdr *message, const struct cmsghdr *header, int *fd)
{
	const unsigned char *data = CMSG_DATA(header);
	const unsigned char *end = (const unsigned char *)message->msg_control +
				   message->msg_controllen;
	size_t bytes = header->cmsg_len - CMSG_LEN(0);

	if (data > end)
		return;
	if (bytes > (size_t)(end - data))
		bytes = (size_t)(end - data);
	for (size_t i = 0; i < bytes / sizeof(int); i++) {
		int received;

		memcpy(&received, data + i * sizeof(int), sizeof(int));
		if (fd != NULL && *fd < 0)
			*fd = received;
		else
			close(received);
	}
}

ssize_t fdpass_receive(int socket, void *buffer, size_t size, int flags, int *fd)
{
	union {
		char buffer[CMSG_SPACE(sizeof(int) * FDPASS_CONTROL_FDS)];
		struct cmsghdr align;
	} control;
	struct iovec vector = { .iov_base = buffer, .iov_len = size };
	struct msghdr message = {
		.msg_iov = &vector,
		.msg_iovlen = 1,
		.msg_control = control.buffer,
		.msg_controllen = sizeof(control.buffer),
	};
	ssize_t got = recvmsg(socket, &message, flags | MSG_CMSG_CLOEXEC);

	if (got < 0)
		return -errno;
	for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL;
	     header = CMSG_NXTHDR(&message, header)) {
		if (header->cmsg_len < CMSG_LEN(0))
			break;
		if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS)
			take_fds(&message, header, fd);
	}
	return got;
}
