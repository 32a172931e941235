/*
 * prof/record_perf.c — haecer-prof record's sampling: task-clock perf events on every CPU that
 * follow the program and its threads, their rings copied into the data file as they fill.
 */
#include "prof/recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "common/fdpass.h"
#include "proto/perf_profile.h"
#include "shm/ring.h"

#define PERF_DATA_PAGES 128u

static int perf_open(const struct perf_event_attr *attr, pid_t pid, int cpu)
{
	long fd = syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : (int)fd;
}

/* What perf_event_open says when perf is not to be had here (paranoid setting, seccomp, no
 * software events, no such system call): the timer agent can sample instead. */
bool recorder_perf_refused(int error)
{
	return error == -EACCES || error == -EPERM || error == -ENOENT || error == -ENOSYS;
}

static long ring_pages(bool dwarf)
{
	return dwarf ? 8 * PERF_DATA_PAGES : PERF_DATA_PAGES;
}

/* Wake the reader when a quarter of the ring is full, not every few samples. */
static uint32_t wakeup_bytes(bool dwarf)
{
	return (uint32_t)((size_t)ring_pages(dwarf) * (size_t)sysconf(_SC_PAGESIZE) / 4);
}

static int alloc_cpus(struct recorder *recorder)
{
	recorder->cpu_count = (int)sysconf(_SC_NPROCESSORS_CONF);
	recorder->cpus = calloc((size_t)recorder->cpu_count, sizeof(*recorder->cpus));
	if (!recorder->cpus)
		return -ENOMEM;
	for (int cpu = 0; cpu < recorder->cpu_count; cpu++)
		recorder->cpus[cpu].fd = -1;
	return 0;
}

/* Take CPU `cpu`'s event and map its sample ring. */
static int map_cpu(struct recorder *recorder, int cpu, int fd, bool dwarf)
{
	struct perf_cpu *slot = &recorder->cpus[cpu];
	int error;

	slot->fd = fd;
	slot->bytes = (size_t)(ring_pages(dwarf) + 1) * (size_t)sysconf(_SC_PAGESIZE);
	slot->base = mmap(NULL, slot->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (slot->base == MAP_FAILED) {
		error = -errno;
		slot->base = NULL;
		tool_warn("cannot map the sample ring of CPU %d: %s", cpu, strerror(-error));
		return error;
	}
	return 0;
}

static int sampling_ready(struct recorder *recorder, int opened, bool quiet_refusal)
{
	if (opened == 0) {
		if (!quiet_refusal)
			tool_warn("perf_event_open: no CPU has a task-clock event");
		return -ENOENT;
	}
	recorder->record_buffer = malloc(65536);
	return recorder->record_buffer ? 0 : -ENOMEM;
}

/* quiet_refusal: say nothing when perf is refused (the caller falls back and says so). */
int recorder_open_sampling(struct recorder *recorder, pid_t child, unsigned hz, bool dwarf,
			 bool quiet_refusal)
{
	struct perf_event_attr attr;
	int error = 0, opened = 0;

	/* Kernel time too where perf allows it (perf_event_paranoid 1 or lower, CAP_PERFMON): a
	 * sample taken in the kernel carries the user call chain that entered it, so a function's
	 * system calls count as its own, and the program's start and exit (exec, the loader's and
	 * a sanitizer's page faults) as theirs. Without it that time is seen by no sample, and
	 * scaling each thread's samples to its task clock spreads it over whatever the thread ran
	 * most: under ASan on a loaded host the hot functions were charged up to 4 % (once 16 %)
	 * more than their CPU time. open_sampling falls back to user time only and says so. */
	perf_profile_attr(&attr, 1000000000ull / hz, false, dwarf, wakeup_bytes(dwarf));
	error = alloc_cpus(recorder);
	if (error < 0)
		return error;
	/* One event per CPU: the kernel does not let an inherited per-task event be mapped. */
	for (int cpu = 0; cpu < recorder->cpu_count; cpu++) {
		int fd = perf_open(&attr, child, cpu);
		if ((fd == -EACCES || fd == -EPERM) && !attr.exclude_kernel && opened == 0) {
			attr.exclude_kernel = 1;
			recorder->kernel_unsampled = true;
			fd = perf_open(&attr, child, cpu);
		}
		if (fd == -ENODEV || fd == -ENOENT)
			continue; /* offline CPU */
		if (fd < 0) {
			error = fd;
			if (quiet_refusal && recorder_perf_refused(fd))
				return error;
			tool_warn("perf_event_open (task clock, CPU %d) failed: %s%s", cpu,
				  strerror(-fd),
				  fd == -EACCES || fd == -EPERM
				  ? " (see /proc/sys/kernel/perf_event_paranoid: 2 or lower "
				  "is needed; --sampler timer samples without perf)"
				  : "");
			return error;
		}
		opened++;
		error = map_cpu(recorder, cpu, fd, dwarf);
		if (error < 0)
			return error;
	}
	return sampling_ready(recorder, opened, quiet_refusal);
}

/* ---- the same events through msrd's perf broker ---- */

/* One message of the child's answer: the CPU and how its open went (with the event's
 * descriptor when status is 0); cpu -1 ends the answer. */
struct broker_answer {
	int32_t cpu;
	int32_t status;
};

static void send_answer(int channel, int32_t cpu, int32_t status, int fd)
{
	struct broker_answer answer = { cpu, status };

	if (fd >= 0) {
		if (fdpass_send(channel, &answer, sizeof(answer), fd) >= 0)
			return;
		answer.status = -EIO; /* the descriptor did not go: the parent opens perf itself */
	}
	if (send(channel, &answer, sizeof(answer), MSG_NOSIGNAL) < 0) {
		/* the parent is gone: it will not sample */
	}
}

void recorder_broker_child(const char *socket_path, int channel, unsigned hz, bool dwarf)
{
	struct haecer_perf_spec spec = {
		.type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_TASK_CLOCK,
		.flags = HAECER_PERF_PROFILE | (dwarf ? HAECER_PERF_PROFILE_STACK : 0),
		.config1 = wakeup_bytes(dwarf), .sample_period = 1000000000ull / hz, .tid = 0,
	};
	int cpus = (int)sysconf(_SC_NPROCESSORS_CONF), fd = -1;
	struct haecer_conn *conn = NULL;
	int status = haecer_connect(socket_path, &conn);

	/* tid 0 is this process: msrd opens events only on its client's own threads. */
	for (int cpu = 0; cpu < cpus && status == 0; cpu++) {
		spec.cpu = cpu;
		int error = haecer_perf_open(conn, &spec, &fd, NULL);
		send_answer(channel, cpu, error, fd);
		if (error == 0)
			close(fd);
		else if (error != -ENODEV && error != -ENOENT)
			status = error; /* the parent opens perf itself */
	}
	send_answer(channel, -1, status, -1);
	haecer_close(conn);
}

/* A refusal's text for the fallback message: msrd's own words when the child got them. */
int recorder_broker_receive(struct recorder *recorder, int channel, bool dwarf)
{
	struct broker_answer answer;
	int error = alloc_cpus(recorder), opened = 0;

	while (error == 0) {
		int fd = -1;
		ssize_t got = fdpass_receive(channel, &answer, sizeof(answer), 0, &fd);
		if (got != (ssize_t)sizeof(answer)) {
			error = got < 0 ? (int)got : -EPROTO;
			break;
		}
		if (answer.cpu < 0) {
			error = answer.status;
			break;
		}
		if (answer.status == 0 && fd >= 0 && answer.cpu < recorder->cpu_count &&
		    recorder->cpus[answer.cpu].fd < 0) {
			error = map_cpu(recorder, answer.cpu, fd, dwarf);
			opened++;
		} else if (fd >= 0) {
			close(fd);
		}
	}
	return error < 0 ? error : sampling_ready(recorder, opened, false);
}

/* After the call chain: regs_user (abi, then one u64 per register of the mask) and stack_user
 * (size, the bytes, dyn_size: how many of them are valid). */
static void handle_user_stack(struct recorder *recorder, const unsigned char *body, size_t size,
			      size_t offset)
{
	struct prof_user_stack stack;
	uint64_t abi, bytes, valid;

	if (offset + 8 > size)
		return;
	memcpy(&abi, body + offset, 8);
	offset += 8;
	if (abi == PERF_SAMPLE_REGS_ABI_NONE || offset + sizeof(stack.regs) > size)
		return; /* a kernel thread, or no user state */
	memcpy(stack.regs, body + offset, sizeof(stack.regs));
	offset += sizeof(stack.regs);
	if (offset + 8 > size)
		return;
	memcpy(&bytes, body + offset, 8);
	offset += 8;
	if (bytes == 0 || bytes > size - offset || offset + bytes + 8 > size)
		return;
	memcpy(&valid, body + offset + bytes, 8);
	stack.size = valid < bytes ? valid : bytes;
	prof_write(&recorder->writer, PROF_REC_USER_STACK, &stack, sizeof(stack), body + offset,
		   (size_t)stack.size);
}

static void handle_perf_record(struct recorder *recorder, int cpu,
			       const struct perf_event_header *header)
{
	const unsigned char *body = (const unsigned char *)(header + 1);
	size_t size = header->size - sizeof(*header);

	switch (header->type) {
	case PERF_RECORD_SAMPLE: {
		/* ip, pid/tid, time, cpu/res, period, nr, ips[nr] */
		uint64_t fixed[6], ips[PROF_MAX_FRAMES];
		struct prof_sample sample;
		uint32_t nr = 0;
		if (size < sizeof(fixed))
			return;
		memcpy(fixed, body, sizeof(fixed));
		uint64_t chain = fixed[5];
		if (chain > (size - sizeof(fixed)) / 8)
			return;
		for (uint64_t i = 0; i < chain && nr < PROF_MAX_FRAMES; i++) {
			uint64_t ip;
			memcpy(&ip, body + sizeof(fixed) + i * 8, 8);
			if (ip >= (uint64_t)-4095) /* PERF_CONTEXT_* marker */
				continue;
			ips[nr++] = ip;
		}
		if (nr == 0)
			ips[nr++] = fixed[0];
		sample.pid = (uint32_t)fixed[1];
		sample.tid = (uint32_t)(fixed[1] >> 32);
		sample.time_ns = fixed[2];
		sample.cpu = (uint32_t)fixed[3];
		sample.period_ns = fixed[4];
		sample.nr = nr;
		prof_write(&recorder->writer, PROF_REC_SAMPLE, &sample, sizeof(sample), ips, nr * 8u);
		recorder->samples++;
		if (recorder->dwarf)
			handle_user_stack(recorder, body, size,
					  sizeof(fixed) + (size_t)chain * 8);
		return;
	}
	case PERF_RECORD_MMAP: {
		struct prof_mmap map;
		uint32_t ids[2];
		uint64_t ranges[3];
		if (size < 32)
			return;
		memcpy(ids, body, 8);
		memcpy(ranges, body + 8, 24);
		map.pid = ids[0];
		map.tid = ids[1];
		map.addr = ranges[0];
		map.len = ranges[1];
		map.pgoff = ranges[2];
		size_t name_length = strnlen((const char *)body + 32, size - 32);
		prof_write(&recorder->writer, PROF_REC_MMAP, &map, sizeof(map), body + 32,
			   name_length);
		return;
	}
	case PERF_RECORD_COMM: {
		struct prof_comm comm;
		if (size < 8)
			return;
		memset(&comm, 0, sizeof(comm));
		memcpy(&comm.pid, body, 4);
		memcpy(&comm.tid, body + 4, 4);
		size_t name_length = strnlen((const char *)body + 8, size - 8);
		memcpy(comm.comm, body + 8, name_length < 15 ? name_length : 15);
		prof_write(&recorder->writer, PROF_REC_COMM, &comm, sizeof(comm), NULL, 0);
		return;
	}
	case PERF_RECORD_READ: {
		struct prof_task_time task = { .cpu = (uint32_t)cpu };
		if (size < 16)
			return;
		memcpy(&task.pid, body, 4);
		memcpy(&task.tid, body + 4, 4);
		memcpy(&task.ns, body + 8, 8);
		prof_write(&recorder->writer, PROF_REC_TASK_TIME, &task, sizeof(task), NULL, 0);
		return;
	}
	case PERF_RECORD_LOST: {
		uint64_t lost[2];
		if (size >= sizeof(lost)) {
			memcpy(lost, body, sizeof(lost));
			recorder->lost += lost[1];
		}
		return;
	}
	default:
		return;
	}
}

/* `size` bytes at ring position `at` (it wraps at data_size). */
static void copy_from_ring(void *to, const unsigned char *data, uint64_t data_size, uint64_t at,
			   size_t size)
{
	size_t offset = (size_t)(at % data_size);
	size_t first = size < data_size - offset ? size : (size_t)(data_size - offset);

	memcpy(to, data + offset, first);
	memcpy((unsigned char *)to + first, data, size - first);
}

void recorder_drain_perf(struct recorder *recorder)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	for (int cpu = 0; cpu < recorder->cpu_count; cpu++) {
		struct perf_cpu *slot = &recorder->cpus[cpu];
		if (!slot->base)
			continue;
		struct perf_event_mmap_page *control = slot->base;
		const unsigned char *data = (const unsigned char *)slot->base + page;
		uint64_t data_size = slot->bytes - page;
		uint64_t head = __atomic_load_n(&control->data_head, __ATOMIC_ACQUIRE);
		uint64_t tail = control->data_tail;

		while (head - tail >= sizeof(struct perf_event_header)) {
			struct perf_event_header header;
			copy_from_ring(&header, data, data_size, tail, sizeof(header));
			if (header.size < sizeof(header) || header.size > head - tail)
				break;
			copy_from_ring(recorder->record_buffer, data, data_size, tail, header.size);
			handle_perf_record(recorder, cpu,
					   (const struct perf_event_header *)recorder->record_buffer);
			tail += header.size;
		}
		__atomic_store_n(&control->data_tail, tail, __ATOMIC_RELEASE);
	}
}

/* Each CPU's event counts every thread's task clock there (its own and its inherited ones'). */
void recorder_record_task_totals(struct recorder *recorder)
{
	for (int cpu = 0; cpu < recorder->cpu_count; cpu++) {
		struct prof_task_time task = { .cpu = (uint32_t)cpu };
		if (recorder->cpus[cpu].fd < 0 ||
		    read(recorder->cpus[cpu].fd, &task.ns, sizeof(task.ns)) != sizeof(task.ns))
			continue;
		prof_write(&recorder->writer, PROF_REC_TASK_TIME, &task, sizeof(task), NULL, 0);
	}
}

void recorder_close_sampling(struct recorder *recorder)
{
	for (int cpu = 0; cpu < recorder->cpu_count && recorder->cpus; cpu++) {
		if (recorder->cpus[cpu].base)
			munmap(recorder->cpus[cpu].base, recorder->cpus[cpu].bytes);
		if (recorder->cpus[cpu].fd >= 0)
			close(recorder->cpus[cpu].fd);
	}
	free(recorder->cpus);
	recorder->cpus = NULL;
	recorder->cpu_count = 0;
	free(recorder->record_buffer);
	recorder->record_buffer = NULL;
}
