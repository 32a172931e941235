/*
 * common/fdpass.h — bytes with a descriptor over a UNIX socket (SCM_RIGHTS), both directions.
 *
 * Every process that hands ring descriptors around (msrd's clients, the ring demo, tests) needs
 * the same two calls, and the receiving one is easy to get subtly wrong: a peer may attach more
 * descriptors than expected, or more than the control buffer holds. fdpass_receive keeps at most
 * one and closes every other that reached this process, so no peer can make us leak.
 */
#ifndef HAECER_COMMON_FDPASS_H
#define HAECER_COMMON_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* Send `length` bytes (at least one) with descriptor `fd` attached, in one sendmsg without
 * SIGPIPE. Returns the number of bytes sent (a stream socket may take fewer than `length`; the
 * descriptor travels with the first of them) or -errno. */
ssize_t fdpass_send(int socket, const void *data, size_t length, int fd);

/* One recvmsg of at most `size` bytes into buffer, with `flags` plus MSG_CMSG_CLOEXEC; no retry
 * on EINTR. Returns the number of bytes received (0: the peer closed) or -errno.
 * Descriptors that came with the bytes: while *fd < 0 the first one is stored in *fd; every other
 * one (all of them when fd is NULL) is closed, including those of truncated control data. */
ssize_t fdpass_receive(int socket, void *buffer, size_t size, int flags, int *fd);

#endif
