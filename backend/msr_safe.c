/*
 * backend/msr_safe.c — LLNL's msr-safe: its per-CPU devices are opened like the msr driver's
 * (msr.c); this is its batch ioctl on dev/cpu/msr_batch, which runs a whole batch of reads and
 * writes in one system call, each op with its own status. The ABI below is written from
 * msr-safe's description (msr_safe.h), not copied.
 */
#include "backend/backend_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/log.h"

/* ---- msr-safe's batch ABI (msr_safe.h in LLNL/msr-safe), written from its description ---- */

struct msr_safe_batch_op {
	uint16_t cpu;       /* in */
	uint16_t isrdmsr;   /* in: non-zero = read */
	int32_t err;        /* out: 0 or -errno */
	uint32_t msr;       /* in */
	uint64_t msrdata;   /* in/out */
	uint64_t wmask;     /* out: the allowlist's write mask */
};

struct msr_safe_batch_array {
	uint32_t numops;
	uint32_t version;   /* msr-safe 1.8.0 encodes as (1 << 16) | (8 << 8) | 0 */
	struct msr_safe_batch_op *ops;
};

_Static_assert(sizeof(struct msr_safe_batch_op) == 32, "msr_batch_op is 32 bytes");
_Static_assert(offsetof(struct msr_safe_batch_op, msrdata) == 16, "msrdata at 16");
_Static_assert(sizeof(struct msr_safe_batch_array) == 16, "msr_batch_array is 16 bytes");

#define MSR_SAFE_VERSION ((1u << 16) | (8u << 8))
#define MSR_SAFE_IOC_BATCH _IOWR('c', 0xA2, struct msr_safe_batch_array)
#define MSR_SAFE_MAX_CPU UINT16_MAX

int backend_msr_safe_open_batch(struct msr_backend *backend, const char *dev_root)
{
	char path[PATH_MAX];
	bool writable;
	int fd;

	if (backend_root_path(path, sizeof(path), dev_root, "dev/cpu/msr_batch") < 0)
		return 0;
	fd = backend_open_device(path, &writable);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0) {
		log_warn_errno(fd, "backend: %s (batches run op by op)", path);
		return 0;
	}
	backend->batch_fd = fd;
	return 0;
}

int backend_msr_safe_reopen_read_only(struct msr_backend *backend)
{
	char path[PATH_MAX];
	int fd, ret;

	if (backend->batch_fd < 0)
		return 0;
	ret = backend_root_path(path, sizeof(path), backend->dev_root, "dev/cpu/msr_batch");
	if (ret < 0)
		return ret;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || dup3(fd, backend->batch_fd, O_CLOEXEC) < 0) {
		ret = -errno;
		log_warn_errno(ret, "backend: reopening %s read-only", path);
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

static int reserve_batch(struct msr_backend *backend, size_t count)
{
	struct msr_safe_batch_op *ops;

	if (count <= backend->batch_capacity)
		return 0;
	ops = realloc(backend->batch_ops, count * sizeof(*ops));
	if (!ops)
		return -ENOMEM;
	backend->batch_ops = ops;
	backend->batch_capacity = count;
	return 0;
}

/* The ioctl fails as a whole when msr-safe's allowlist refuses any op (-ENXIO, -EACCES, -EROFS
 * in that op's err): then nothing ran, and the others still run one by one. When an op fails
 * while running (-EIO), the others did run. */
static bool allowlist_refused(const struct msr_safe_batch_op *ops, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		if (ops[i].err == -ENXIO || ops[i].err == -EACCES || ops[i].err == -EROFS)
			return true;
	}
	return false;
}

static int run_msr_safe_batch(struct msr_backend *backend, struct msr_op *ops, size_t count)
{
	struct msr_safe_batch_array array = { .numops = (uint32_t)count,
					      .version = MSR_SAFE_VERSION };
	bool *refused = NULL;
	int ret = reserve_batch(backend, count);

	if (ret < 0)
		return ret;
	for (size_t i = 0; i < count; i++) {
		backend->batch_ops[i] = (struct msr_safe_batch_op){
			.cpu = (uint16_t)ops[i].cpu, .isrdmsr = !ops[i].write,
			.msr = ops[i].address, .msrdata = ops[i].write ? ops[i].value : 0 };
	}
	array.ops = backend->batch_ops;
	if (ioctl(backend->batch_fd, MSR_SAFE_IOC_BATCH, &array) < 0) {
		ret = -errno;
		if (ret == -ENOTTY) {
			log_info("backend: dev/cpu/msr_batch has no batch ioctl; ops run one by one");
			backend->batch_unsupported = true;
			return ret;
		}
		if (allowlist_refused(backend->batch_ops, count)) {
			refused = calloc(count, sizeof(*refused));
			if (!refused)
				return -ENOMEM;
			for (size_t i = 0; i < count; i++)
				refused[i] = backend->batch_ops[i].err != 0;
		} else if (ret != -EIO) {
			return ret; /* nothing ran: the caller runs the ops one by one */
		}
	}
	for (size_t i = 0; i < count; i++) {
		ops[i].status = backend->batch_ops[i].err;
		if (!ops[i].write && backend->batch_ops[i].err == 0)
			ops[i].value = backend->batch_ops[i].msrdata;
	}
	if (refused)
		backend_run_one_by_one(backend, ops, count, refused);
	free(refused);
	return 0;
}

unsigned long backend_ioctl_request(void)
{
	return MSR_SAFE_IOC_BATCH;
}

int backend_msr_safe_run(struct msr_backend *backend, struct msr_op *ops, size_t count)
{
	bool usable = backend->batch_fd >= 0 && !backend->batch_unsupported && count > 0 &&
		      count <= UINT32_MAX;

	for (size_t i = 0; usable && i < count; i++)
		usable = ops[i].cpu < backend->cpu_count && ops[i].cpu <= MSR_SAFE_MAX_CPU;
	if (!usable)
		return -EOPNOTSUPP;
	return run_msr_safe_batch(backend, ops, count);
}

void backend_msr_safe_close(struct msr_backend *backend)
{
	if (backend->batch_fd >= 0)
		close(backend->batch_fd);
	free(backend->batch_ops);
}
