/*
 * prof/timer.c — record's side of the timer sampler (libhaecer-prof-agent.so, prof/agent/):
 * the pipe the agent writes its samples into, the agent's place in the program's environment,
 * and the conversion of what it sends into the data file perf's records make, so report reads
 * both alike.
 *
 * What perf gives and the agent cannot, record adds here: the program's executable mappings
 * (read from /proc/PID/maps when the agent first speaks, then at most every
 * MAPS_RECHECK_NS while the program runs: a library loaded and unloaded between two reads is
 * not symbolised), and each thread's task clock per CPU (a thread's end reports its total; it
 * is split over the CPUs its samples were taken on, the part after its last sample going to the
 * CPU of that sample).
 */
#include "prof/prof.h"
#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAPS_RECHECK_NS 100000000ull
#define PIPE_BYTES (1u << 20)
#define MAX_RECORD 4096u

struct seen_map {
	uint64_t start, end, offset;
	char *path;
};

struct task_share {
	uint32_t tid, cpu;
	uint64_t ns;
	bool last; /* the CPU of the thread's latest sample */
};

struct prof_timer {
	int read_fd, write_fd;
	pid_t pid;
	char library[PATH_MAX];
	unsigned char buffer[65536 + MAX_RECORD];
	size_t used;
	bool broken;       /* a record that makes no sense: the rest is not trusted */
	bool spoke;
	uint64_t maps_read_ns;
	struct seen_map *maps;
	size_t map_count;
	struct task_share *tasks;
	size_t task_count, task_capacity;
	uint64_t samples, lost;
	/* Threads that ended with CPU time but without a sample (no tick fell in their runs). */
	uint64_t unsampled_threads, unsampled_ns;
};

/* $HAECER_PROF_AGENT, else beside haecer-prof (the build directory), else ../lib from it. */
static int find_library(char *path, size_t size)
{
	const char *given = getenv(PROF_AGENT_LIBRARY_ENV);
	char self[PATH_MAX];
	ssize_t length;

	if (given && *given) {
		if (access(given, R_OK) != 0)
			return -errno;
		snprintf(path, size, "%s", given);
		return 0;
	}
	length = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (length <= 0)
		return -ENOENT;
	self[length] = '\0';
	char *slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	int length_beside = snprintf(path, size, "%s/%s", self, PROF_AGENT_LIBRARY);
	if (length_beside > 0 && (size_t)length_beside < size && access(path, R_OK) == 0)
		return 0;
	int length_lib = snprintf(path, size, "%s/../lib/%s", self, PROF_AGENT_LIBRARY);
	return length_lib > 0 && (size_t)length_lib < size && access(path, R_OK) == 0 ? 0 : -ENOENT;
}

int prof_timer_open(struct prof_timer **out)
{
	struct prof_timer *timer = calloc(1, sizeof(*timer));
	int fds[2], status;

	if (!timer)
		return -ENOMEM;
	timer->read_fd = timer->write_fd = -1;
	status = find_library(timer->library, sizeof(timer->library));
	if (status < 0) {
		free(timer);
		return status;
	}
	if (pipe2(fds, O_CLOEXEC) < 0) {
		status = -errno;
		free(timer);
		return status;
	}
	timer->read_fd = fds[0];
	timer->write_fd = fds[1];
	/* Room for about a second of samples of a few threads while record is off the CPU. */
	fcntl(timer->read_fd, F_SETPIPE_SZ, PIPE_BYTES);
	fcntl(timer->read_fd, F_SETFL, O_NONBLOCK);
	*out = timer;
	return 0;
}

const char *prof_timer_library(const struct prof_timer *timer)
{
	return timer->library;
}

int prof_timer_fd(const struct prof_timer *timer)
{
	return timer->read_fd;
}

/* In the forked child, before exec: the pipe's write end open across exec, the agent first in
 * LD_PRELOAD, the rate and the pipe in the environment. The parent is single-threaded, so
 * setenv is safe here. */
void prof_timer_child(struct prof_timer *timer, unsigned hz)
{
	char text[PATH_MAX + 4096];
	const char *preload = getenv("LD_PRELOAD");
	int fd;

	close(timer->read_fd);
	fd = dup(timer->write_fd); /* without O_CLOEXEC */
	if (fd < 0)
		return;
	snprintf(text, sizeof(text), "%d", fd);
	setenv(PROF_AGENT_FD_ENV, text, 1);
	snprintf(text, sizeof(text), "%u", hz);
	setenv(PROF_AGENT_HZ_ENV, text, 1);
	if (preload && *preload)
		snprintf(text, sizeof(text), "%s:%s", timer->library, preload);
	else
		snprintf(text, sizeof(text), "%s", timer->library);
	setenv("LD_PRELOAD", text, 1);
}

/* After fork, in the parent: only the child writes. */
void prof_timer_started(struct prof_timer *timer, pid_t pid)
{
	timer->pid = pid;
	if (timer->write_fd >= 0)
		close(timer->write_fd);
	timer->write_fd = -1;
}

static bool map_seen(struct prof_timer *timer, uint64_t start, uint64_t end, uint64_t offset,
		     const char *path)
{
	for (size_t i = 0; i < timer->map_count; i++) {
		const struct seen_map *map = &timer->maps[i];
		if (map->start == start && map->end == end && map->offset == offset &&
		    strcmp(map->path, path) == 0)
			return true;
	}
	struct seen_map *grown = realloc(timer->maps, (timer->map_count + 1) * sizeof(*grown));
	char *copy = strdup(path);
	if (!grown || !copy) {
		if (grown)
			timer->maps = grown;
		free(copy);
		return true; /* not recorded; the report says unknown for it */
	}
	timer->maps = grown;
	timer->maps[timer->map_count++] = (struct seen_map){ start, end, offset, copy };
	return false;
}

/* The program's executable file mappings, as perf's MMAP records give them, each once. */
static void read_maps(struct prof_timer *timer, struct prof_writer *writer)
{
	char name[64], line[PATH_MAX + 256];
	FILE *file;

	snprintf(name, sizeof(name), "/proc/%d/maps", (int)timer->pid);
	file = fopen(name, "re");
	timer->maps_read_ns = clock_monotonic_ns();
	if (!file)
		return;
	while (fgets(line, sizeof(line), file)) {
		unsigned long long start, end, offset;
		char perms[8];
		int path_at = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset,
			   &path_at) < 4 || path_at == 0 || perms[2] != 'x')
			continue;
		char *path = line + path_at;
		path[strcspn(path, "\n")] = '\0';
		size_t length = strlen(path);
		bool deleted = length > 10 && strcmp(path + length - 10, " (deleted)") == 0;
		if (path[0] != '/' || deleted)
			continue;
		if (map_seen(timer, start, end, offset, path))
			continue;
		struct prof_mmap map = { .pid = (uint32_t)timer->pid, .tid = (uint32_t)timer->pid,
					 .addr = start, .len = end - start, .pgoff = offset };
		prof_write(writer, PROF_REC_MMAP, &map, sizeof(map), path, length);
	}
	fclose(file);
}

static struct task_share *share_of(struct prof_timer *timer, uint32_t tid, uint32_t cpu)
{
	for (size_t i = timer->task_count; i-- > 0;)
		if (timer->tasks[i].tid == tid && timer->tasks[i].cpu == cpu)
			return &timer->tasks[i];
	if (timer->task_count == timer->task_capacity) {
		size_t capacity = timer->task_capacity ? timer->task_capacity * 2 : 64;
		struct task_share *grown = realloc(timer->tasks, capacity * sizeof(*grown));
		if (!grown)
			return NULL;
		timer->tasks = grown;
		timer->task_capacity = capacity;
	}
	timer->tasks[timer->task_count] = (struct task_share){ .tid = tid, .cpu = cpu };
	return &timer->tasks[timer->task_count++];
}

static void note_sample(struct prof_timer *timer, const struct prof_sample *sample)
{
	struct task_share *share = share_of(timer, sample->tid, sample->cpu);

	if (!share)
		return;
	for (size_t i = 0; i < timer->task_count; i++)
		if (timer->tasks[i].tid == sample->tid)
			timer->tasks[i].last = false;
	share->ns += sample->period_ns;
	share->last = true;
}

/* A thread ended with `total` ns of CPU time: its time per CPU, as perf's READ records give it. */
static void thread_ended(struct prof_timer *timer, struct prof_writer *writer,
			 const struct prof_task_time *end)
{
	uint64_t sampled = 0;

	for (size_t i = 0; i < timer->task_count; i++)
		if (timer->tasks[i].tid == end->tid)
			sampled += timer->tasks[i].ns;
	uint64_t tail = end->ns > sampled ? end->ns - sampled : 0;
	bool any = false;
	for (size_t i = 0; i < timer->task_count; i++)
		any = any || timer->tasks[i].tid == end->tid;
	if (!any && end->ns > 0) {
		timer->unsampled_threads++;
		timer->unsampled_ns += end->ns;
	}
	for (size_t i = 0; i < timer->task_count;) {
		struct task_share *share = &timer->tasks[i];
		if (share->tid != end->tid) {
			i++;
			continue;
		}
		struct prof_task_time time = { .pid = end->pid, .tid = end->tid, .cpu = share->cpu,
					       .ns = share->ns + (share->last ? tail : 0) };
		prof_write(writer, PROF_REC_TASK_TIME, &time, sizeof(time), NULL, 0);
		*share = timer->tasks[--timer->task_count];
	}
}

/* One record from the agent, checked as anything from outside is. */
static bool take_record(struct prof_timer *timer, struct prof_writer *writer, uint32_t type,
			const unsigned char *payload, uint32_t size)
{
	switch (type) {
	case PROF_REC_SAMPLE: {
		struct prof_sample sample;
		if (size < sizeof(sample))
			return false;
		memcpy(&sample, payload, sizeof(sample));
		if (sample.nr > PROF_MAX_FRAMES || size != sizeof(sample) + sample.nr * 8u ||
		    sample.pid != (uint32_t)timer->pid)
			return false;
		note_sample(timer, &sample);
		timer->samples++;
		break;
	}
	case PROF_REC_COMM: {
		struct prof_comm comm;
		if (size != sizeof(comm))
			return false;
		memcpy(&comm, payload, sizeof(comm));
		if (comm.pid != (uint32_t)timer->pid)
			return false;
		break;
	}
	case PROF_REC_TASK_TIME: {
		struct prof_task_time end;
		if (size != sizeof(end))
			return false;
		memcpy(&end, payload, sizeof(end));
		if (end.pid != (uint32_t)timer->pid || end.cpu != PROF_TASK_TIME_ALL_CPUS)
			return false;
		thread_ended(timer, writer, &end);
		return true;
	}
	case PROF_REC_LOST: {
		uint64_t lost;
		if (size != sizeof(lost))
			return false;
		memcpy(&lost, payload, sizeof(lost));
		timer->lost += lost;
		return true;
	}
	default:
		return false;
	}
	prof_write(writer, type, payload, size, NULL, 0);
	return true;
}

void prof_timer_drain(struct prof_timer *timer, struct prof_writer *writer)
{
	for (;;) {
		ssize_t got = 0;
		if (!timer->broken && timer->read_fd >= 0)
			got = read(timer->read_fd, timer->buffer + timer->used,
				   sizeof(timer->buffer) - timer->used);
		if (got <= 0)
			break;
		timer->used += (size_t)got;
		if (!timer->spoke) {
			/* The agent's first record comes from its constructor: the program and its
			 * libraries are mapped. */
			timer->spoke = true;
			read_maps(timer, writer);
		}
		size_t at = 0;
		while (timer->used - at >= sizeof(struct prof_record_head)) {
			struct prof_record_head head;
			memcpy(&head, timer->buffer + at, sizeof(head));
			if (head.size > MAX_RECORD) {
				timer->broken = true;
				break;
			}
			if (timer->used - at - sizeof(head) < head.size)
				break;
			const unsigned char *payload = timer->buffer + at + sizeof(head);
			if (!take_record(timer, writer, head.type, payload, head.size)) {
				timer->broken = true;
				break;
			}
			at += sizeof(head) + head.size;
		}
		memmove(timer->buffer, timer->buffer + at, timer->used - at);
		timer->used -= at;
		if ((size_t)got < sizeof(timer->buffer) / 2)
			break;
	}
	if (timer->spoke && clock_monotonic_ns() - timer->maps_read_ns >= MAPS_RECHECK_NS)
		read_maps(timer, writer);
}

/* The program exited: whatever its threads wrote, without waiting for writers that may live on
 * (its own children hold the pipe). */
void prof_timer_finish(struct prof_timer *timer, struct prof_writer *writer)
{
	/* The program is gone: nothing more to read there. */
	timer->maps_read_ns = clock_monotonic_ns();
	prof_timer_drain(timer, writer);
}

void prof_timer_counts(const struct prof_timer *timer, uint64_t *samples, uint64_t *lost,
		       bool *broken, bool *started)
{
	*started = timer->spoke;
	*samples = timer->samples;
	*lost = timer->lost;
	*broken = timer->broken;
}

void prof_timer_unsampled(const struct prof_timer *timer, uint64_t *threads, uint64_t *cpu_ns)
{
	*threads = timer->unsampled_threads;
	*cpu_ns = timer->unsampled_ns;
}

void prof_timer_close(struct prof_timer *timer)
{
	if (!timer)
		return;
	if (timer->read_fd >= 0)
		close(timer->read_fd);
	if (timer->write_fd >= 0)
		close(timer->write_fd);
	for (size_t i = 0; i < timer->map_count; i++)
		free(timer->maps[i].path);
	free(timer->maps);
	free(timer->tasks);
	free(timer);
}
