/*
 * backend/msr.c — the Linux msr driver's dev/cpu/N/msr: one descriptor per CPU, pread/pwrite of 8
 * bytes at offset = address, and the same accesses as io_uring verbs (backend_prep_read /
 * backend_prep_write) so that msrd can submit them without ever holding a descriptor. msr-safe's
 * dev/cpu/N/msr_safe has the same interface and is opened here too.
 *
 * The backend does what the driver does and reports what the driver reports: -EIO for an MSR the
 * CPU refuses (or a short transfer from a stand-in file), -EPERM for a write the driver does not
 * allow. A device that opens only read-only (no CAP_SYS_RAWIO for writing, a read-only stand-in)
 * is kept, and its writes fail with -EPERM, which is what the msr driver says when writes are
 * disabled or the kernel is locked down.
 */
#include "backend/backend_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

/* ---- paths under dev_root ---- */

static const char *root_of(const char *dev_root)
{
	if (!dev_root || !*dev_root || strcmp(dev_root, "/") == 0)
		return "";
	return dev_root;
}

int __attribute__((format(printf, 4, 5)))
backend_root_path(char *path, size_t size, const char *dev_root, const char *format, ...)
{
	size_t used = (size_t)snprintf(path, size, "%s/", root_of(dev_root));
	va_list arguments;
	int length;

	if (used >= size)
		return -ENAMETOOLONG;
	va_start(arguments, format);
	length = vsnprintf(path + used, size - used, format, arguments);
	va_end(arguments);
	return length < 0 || (size_t)length >= size - used ? -ENAMETOOLONG : 0;
}

/* CPUs are the numbered directories of dev/cpu; the count is the highest number + 1. */
static int count_cpu_directories(const char *dev_root, uint32_t *count)
{
	char path[PATH_MAX];
	struct dirent *entry;
	DIR *directory;
	int ret = backend_root_path(path, sizeof(path), dev_root, "dev/cpu");

	if (ret < 0)
		return ret;
	directory = opendir(path);
	if (!directory)
		return -errno;
	*count = 0;
	while ((entry = readdir(directory)) != NULL) {
		char *end;
		unsigned long number = strtoul(entry->d_name, &end, 10);

		if (end == entry->d_name || *end || entry->d_name[0] == '+')
			continue;
		if (number >= MACHINE_MAX_CPUS) {
			log_warnx("backend: %s/%s ignored (more than %u CPUs)", path,
				  entry->d_name, MACHINE_MAX_CPUS);
			continue;
		}
		if (number + 1 > *count)
			*count = (uint32_t)number + 1;
	}
	closedir(directory);
	return *count ? 0 : -ENOENT;
}

/* ---- device access ---- */

int backend_device_read(const struct msr_backend *backend, uint32_t cpu, uint32_t address,
			uint64_t *value)
{
	ssize_t got;

	/* No devices at all: the powercap backend probes the machine through here too. */
	if (!backend->fds || cpu >= backend->cpu_count || backend->fds[cpu] < 0)
		return -ENXIO;
	got = pread(backend->fds[cpu], value, sizeof(*value), (off_t)address);
	if (got < 0)
		return -errno;
	return got == sizeof(*value) ? 0 : -EIO;
}

int backend_device_write(const struct msr_backend *backend, uint32_t cpu, uint32_t address,
			 uint64_t value)
{
	ssize_t put;

	if (cpu >= backend->cpu_count || backend->fds[cpu] < 0)
		return -ENXIO;
	if (!backend->writable[cpu])
		return -EPERM;
	if (backend->write_delegate != NULL)
		return backend->write_delegate(backend->delegate_context, cpu, address, value);
	put = pwrite(backend->fds[cpu], &value, sizeof(value), (off_t)address);
	if (put < 0)
		return -errno;
	return put == sizeof(value) ? 0 : -EIO;
}

/* Open read-write, or read-only when writing is what is refused. */
int backend_open_device(const char *path, bool *writable)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);

	*writable = fd >= 0;
	if (fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS))
		fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int backend_msr_open(struct msr_backend *backend, const char *dev_root, const char *device,
		     char *why, size_t why_size)
{
	char path[PATH_MAX];
	int ret = count_cpu_directories(dev_root, &backend->cpu_count);

	backend->dev_root = dev_root;
	backend->device = device;
	if (ret < 0) {
		backend_root_path(path, sizeof(path), dev_root, "dev/cpu");
		snprintf(why, why_size, "%s: %s", path, strerror(-ret));
		return ret;
	}
	backend->fds = malloc(backend->cpu_count * sizeof(*backend->fds));
	backend->writable = calloc(backend->cpu_count, sizeof(*backend->writable));
	if (!backend->fds || !backend->writable)
		return -ENOMEM;
	for (uint32_t cpu = 0; cpu < backend->cpu_count; cpu++)
		backend->fds[cpu] = -1;
	for (uint32_t cpu = 0; cpu < backend->cpu_count; cpu++) {
		ret = backend_root_path(path, sizeof(path), dev_root, "dev/cpu/%u/%s", cpu, device);
		if (ret == 0)
			ret = backend_open_device(path, &backend->writable[cpu]);
		if (ret == -ENOENT && cpu > 0)
			continue; /* an offline CPU keeps its directory but has no device */
		if (ret < 0) {
			snprintf(why, why_size, "%s: %s", path, strerror(-ret));
			return ret;
		}
		backend->fds[cpu] = ret;
	}
	if (!backend->writable[0])
		log_warnx("backend: %s opened read-only: every write will fail with EPERM", path);
	return 0;
}

/* dup3 puts the new descriptor under the old number at once: nothing sees the number closed. */
int backend_msr_reopen_read_only(struct msr_backend *backend)
{
	char path[PATH_MAX];

	for (uint32_t cpu = 0; backend->fds && cpu < backend->cpu_count; cpu++) {
		int fd, ret;

		if (backend->fds[cpu] < 0)
			continue;
		ret = backend_root_path(path, sizeof(path), backend->dev_root, "dev/cpu/%u/%s", cpu,
					backend->device);
		if (ret < 0)
			return ret;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || dup3(fd, backend->fds[cpu], O_CLOEXEC) < 0) {
			ret = -errno;
			if (fd >= 0)
				close(fd);
			log_warn_errno(ret, "backend: reopening %s read-only", path);
			return ret;
		}
		close(fd);
	}
	return 0;
}

void backend_msr_close(struct msr_backend *backend)
{
	for (uint32_t cpu = 0; backend->fds && cpu < backend->cpu_count; cpu++) {
		if (backend->fds[cpu] >= 0)
			close(backend->fds[cpu]);
	}
	free(backend->fds);
	free(backend->writable);
}

/* ---- io_uring verbs ---- */

int backend_prep_supported(const struct msr_backend *backend, uint32_t cpu, bool write)
{
	if (backend->sim || !backend->fds)
		return -EOPNOTSUPP; /* no devices: the simulated CPU, powercap, perf */
	if (cpu >= backend->cpu_count || backend->fds[cpu] < 0)
		return -ENXIO;
	if (write && !backend->writable[cpu])
		return -EPERM;
	if (write && backend->write_delegate != NULL)
		return -EOPNOTSUPP; /* this process's descriptors only read */
	return 0;
}

/* -1 for a CPU without a device, which the kernel completes with -EBADF. */
static int prep_fd(const struct msr_backend *backend, uint32_t cpu)
{
	if (backend->fds == NULL || cpu >= backend->cpu_count)
		return -1;
	return backend->fds[cpu];
}

void backend_prep_read(const struct msr_backend *backend, struct io_uring_sqe *sqe, uint32_t cpu,
		       uint32_t address, void *buffer)
{
	io_uring_prep_read(sqe, prep_fd(backend, cpu), buffer, sizeof(uint64_t), address);
}

void backend_prep_write(const struct msr_backend *backend, struct io_uring_sqe *sqe, uint32_t cpu,
			uint32_t address, const void *buffer)
{
	io_uring_prep_write(sqe, prep_fd(backend, cpu), buffer, sizeof(uint64_t), address);
}
