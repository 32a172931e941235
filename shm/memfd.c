/*
 * shm/memfd.c — creating, sealing, checking and reopening the memfds of rings and energy pages.
 */
#include "shm/memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int shm_memfd_map(const char *name, size_t bytes, int *fd_out, void **mapping_out)
{
	void *mapping;
	int fd;
	int status;

	fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) < 0) {
		status = -errno;
		goto out;
	}
	mapping = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mapping == MAP_FAILED) {
		status = -errno;
		goto out;
	}
	*fd_out = fd;
	*mapping_out = mapping;
	return 0;
out:
	close(fd);
	return status;
}

int shm_memfd_seal(int fd, mode_t mode, int seals)
{
	if (fchmod(fd, mode) < 0 || fcntl(fd, F_ADD_SEALS, seals) < 0)
		return -errno;
	return 0;
}

int shm_fd_regular(int fd, struct stat *status)
{
	if (fd < 0)
		return -EBADF;
	if (fstat(fd, status))
		return -errno;
	return S_ISREG(status->st_mode) ? 0 : -EINVAL;
}

int shm_fd_sealed(int fd, int required)
{
	int seals = fcntl(fd, F_GET_SEALS);

	/* EINVAL: a file that cannot carry seals at all (not a memfd), as unsealed as it gets. */
	if (seals < 0)
		return errno == EINVAL ? -EPERM : -errno;
	return (seals & required) == required ? 0 : -EPERM;
}

int shm_reopen_readonly(int fd)
{
	char path[32];
	int readonly;

	if (fd < 0)
		return -EBADF;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	readonly = open(path, O_RDONLY | O_CLOEXEC);
	return readonly < 0 ? -errno : readonly;
}
