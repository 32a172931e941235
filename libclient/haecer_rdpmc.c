/*
 * libclient/haecer_rdpmc.c — reading event counters with RDPMC instead of a round trip.
 *
 * The counters msrd lends (counter slots) are the CPU's own PMCs, so a thread running on the
 * slot's CPU can read one with RDPMC where the kernel lets user space execute it (CR4.PCE):
 *  - /sys/bus/event_source/devices/cpu/rdpmc = 2: for every process;
 *  - = 1 (the default): only for a process that has a perf event mapped whose page says
 *    cap_user_rdpmc; the context then keeps one such event open and mapped (a hardware
 *    event, disabled: it counts nothing) so the permission stays for its lifetime;
 *  - 0, a missing file, no PMU for perf (this machine, virtual machines), or a simulated CPU
 *    (its counters are not the PMCs RDPMC reads): round trips.
 * The RDPMC index comes from the slot msrd handed out: a programmable counter's index (Intel
 * IA32_PMCx, AMD PERF_CTRx), or 2^30 + index for a fixed counter (Intel). A read is direct only
 * while the thread runs on the slot's CPU (event counters pin it there); otherwise a round trip.
 *
 * $HAECER_SYSFS_ROOT (tests) prefixes the sysfs path. NOT RUN: no machine this was developed on
 * let user space execute RDPMC (no PMU); only the detection and the fallback are tested.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RDPMC_FILE "/sys/bus/event_source/devices/cpu/rdpmc"
#define RDPMC_FIXED (1u << 30)

/* The value of the sysfs file: 0, 1, 2, or -errno (missing, unreadable, garbage). */
int haecer__rdpmc_sysfs(const char *root)
{
	char path[512];
	char text[16] = { 0 };
	FILE *file;
	char *end;
	long value;

	snprintf(path, sizeof(path), "%s%s", root != NULL ? root : "", RDPMC_FILE);
	file = fopen(path, "re");
	if (file == NULL)
		return -errno;
	if (fgets(text, sizeof(text), file) == NULL) {
		fclose(file);
		return -EIO;
	}
	fclose(file);
	value = strtol(text, &end, 10);
	if (end == text || (*end != '\n' && *end != '\0') || value < 0 || value > 2)
		return -EINVAL;
	return (int)value;
}

/* rdpmc = 1: a mapped perf event whose page grants RDPMC keeps CR4.PCE on for this process. */
static int open_perf_permission(struct haecer_rdpmc *rdpmc)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_HARDWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_HW_INSTRUCTIONS,
		.disabled = 1,
		.exclude_kernel = 1,
		.exclude_hv = 1,
	};
	struct perf_event_mmap_page *page;
	long page_size = sysconf(_SC_PAGESIZE);
	int fd = (int)syscall(__NR_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		return -errno;
	page = mmap(NULL, (size_t)page_size, PROT_READ, MAP_SHARED, fd, 0);
	if (page == MAP_FAILED) {
		int error = -errno;
		close(fd);
		return error;
	}
	if (!page->cap_user_rdpmc) {
		munmap(page, (size_t)page_size);
		close(fd);
		return -EPERM;
	}
	rdpmc->perf_fd = fd;
	rdpmc->perf_page = page;
	rdpmc->perf_page_bytes = (size_t)page_size;
	return 0;
}

void haecer__rdpmc_detect(struct haecer_context *ctx)
{
	struct haecer_rdpmc *rdpmc = &ctx->rdpmc;
	int sysfs;
	int error;

	*rdpmc = (struct haecer_rdpmc){ .perf_fd = -1 };
	if (ctx->simulated) {
		snprintf(rdpmc->why, sizeof(rdpmc->why), "the CPU is simulated: its counters are "
			 "not the PMCs RDPMC reads");
		return;
	}
	sysfs = haecer__rdpmc_sysfs(getenv(HAECER_SYSFS_ROOT_ENV));
	if (sysfs < 0) {
		snprintf(rdpmc->why, sizeof(rdpmc->why), "%s: %s", RDPMC_FILE, strerror(-sysfs));
		return;
	}
	if (sysfs == 0) {
		snprintf(rdpmc->why, sizeof(rdpmc->why), "%s is 0: RDPMC is off for user space",
			 RDPMC_FILE);
		return;
	}
	if (sysfs == 2) {
		rdpmc->usable = true;
		snprintf(rdpmc->why, sizeof(rdpmc->why), "%s is 2: RDPMC for every process",
			 RDPMC_FILE);
		return;
	}
	error = open_perf_permission(rdpmc);
	if (error < 0) {
		snprintf(rdpmc->why, sizeof(rdpmc->why), "%s is 1, but no perf event page grants "
			 "RDPMC (%s)", RDPMC_FILE, strerror(-error));
		return;
	}
	rdpmc->usable = true;
	snprintf(rdpmc->why, sizeof(rdpmc->why), "%s is 1 and a mapped perf event grants RDPMC",
		 RDPMC_FILE);
}

void haecer__rdpmc_close(struct haecer_context *ctx)
{
	struct haecer_rdpmc *rdpmc = &ctx->rdpmc;

	if (rdpmc->perf_page != NULL)
		munmap(rdpmc->perf_page, rdpmc->perf_page_bytes);
	if (rdpmc->perf_fd >= 0)
		close(rdpmc->perf_fd);
	*rdpmc = (struct haecer_rdpmc){ .perf_fd = -1 };
}

uint64_t haecer__rdpmc_counter(uint32_t index)
{
	uint32_t low, high;

	__asm__ volatile("rdpmc" : "=a"(low), "=d"(high) : "c"(index));
	return (uint64_t)high << 32 | low;
}

int haecer__rdpmc_read(struct haecer_counter *counter, uint64_t *raw)
{
	const struct haecer_rdpmc *rdpmc = &counter->ctx->rdpmc;
	uint32_t index;

	if (!rdpmc->usable || counter->host_cpu < 0 ||
	    counter->info.kind == HAECER_COUNTER_ENERGY || sched_getcpu() != counter->host_cpu)
		return -ENOENT;
	index = counter->slot.kind == HAECER_SLOT_FIXED ? RDPMC_FIXED | counter->slot.index
							: counter->slot.index;
	*raw = haecer__rdpmc_counter(index);
	return 0;
}

int haecer_context_direct_reads(struct haecer_context *ctx, char *why, size_t size)
{
	int usable;

	if (ctx == NULL)
		return haecer__fail(-EINVAL, "no context");
	pthread_mutex_lock(&ctx->lock);
	usable = ctx->rdpmc.usable ? 1 : 0;
	if (why != NULL && size > 0)
		snprintf(why, size, "%s", ctx->rdpmc.why);
	pthread_mutex_unlock(&ctx->lock);
	return usable;
}
