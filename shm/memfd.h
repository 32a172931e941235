/*
 * shm/memfd.h — inside shm/ only (not installed, not exported): the memfd plumbing that the ring
 * (shm/ring.c) and the energy page (shm/energy_page.c) share. Neither the hot paths nor any
 * layout live here, only creating, sealing, checking and reopening the descriptor.
 */
#ifndef HAECER_SHM_MEMFD_H
#define HAECER_SHM_MEMFD_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

/* A new sealable memfd `name` (close-on-exec) of `bytes`, mapped read-write and shared. 0 with
 * *fd_out and *mapping_out set, or -errno with nothing left open or mapped. */
int shm_memfd_map(const char *name, size_t bytes, int *fd_out, void **mapping_out);

/* chmod the memfd inode to `mode` (a memfd is 0777: a lower mode keeps /proc/self/fd
 * reopenings from gaining write access), then add `seals`. 0 or -errno. */
int shm_memfd_seal(int fd, mode_t mode, int seals);

/* fstat of fd into *status: 0 for a regular file (what a ring's fd must be before its seals and
 * header are read), -EBADF for fd < 0, -EINVAL for a pipe, socket or device, or -errno. */
int shm_fd_regular(int fd, struct stat *status);

/* 0 when fd's seals include every one of `required` (F_SEAL_*), -EPERM when one is missing or
 * fd is no memfd (it cannot be sealed), or -errno. An attach checks this before it reads the
 * size: seals are never removed, so a size read after F_SEAL_SHRINK (and F_SEAL_GROW) were seen
 * is the size the mapping keeps; a size read before could be shrunk under the mapping (SIGBUS on
 * the first access past the new end). */
int shm_fd_sealed(int fd, int required);

/* fd reopened through /proc/self/fd read-only and close-on-exec: a new descriptor, -EBADF for
 * fd < 0, or -errno. */
int shm_reopen_readonly(int fd);

#endif
