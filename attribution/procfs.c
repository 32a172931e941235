/*
 * attribution/procfs.c — one snapshot of what the kernel counts per task, CPU and cgroup. Every
 * file is read with one read(2) into a fixed buffer and parsed with bounds: the files come from
 * outside the process (and from stand-in trees in tests).
 */
#include "attribution/procfs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SCHEDSTAT_ERROR_NS 2000.0

/* The file's first size - 1 bytes, NUL-terminated; the length or -errno. */
static ssize_t read_small(const char *path, char *buffer, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t got = read(fd, buffer, size - 1);
	int saved = errno;
	close(fd);
	if (got < 0)
		return -saved;
	buffer[got] = '\0';
	return got;
}

static bool is_number(const char *name)
{
	if (!*name)
		return false;
	for (; *name; name++)
		if (!isdigit((unsigned char)*name))
			return false;
	return true;
}

/* Fields of PROC/PID/stat after the comm: token i is field i + 3 (proc(5)). */
static int parse_stat(const char *text, struct attribution_process *process, uint64_t *ticks,
		      unsigned *cpu)
{
	const char *open = strchr(text, '('), *close = strrchr(text, ')');
	if (!open || !close || close < open)
		return -EINVAL;
	size_t length = (size_t)(close - open - 1);
	if (length >= sizeof(process->comm))
		length = sizeof(process->comm) - 1;
	memcpy(process->comm, open + 1, length);
	process->comm[length] = '\0';

	unsigned long long utime = 0, stime = 0, start = 0;
	unsigned long processor = 0;
	const char *cursor = close + 1;
	for (int token = 0; token <= 36 && *cursor; token++) {
		while (*cursor == ' ')
			cursor++;
		if (token == 11)
			utime = strtoull(cursor, NULL, 10);
		else if (token == 12)
			stime = strtoull(cursor, NULL, 10);
		else if (token == 19)
			start = strtoull(cursor, NULL, 10);
		else if (token == 36)
			processor = strtoul(cursor, NULL, 10);
		while (*cursor && *cursor != ' ')
			cursor++;
	}
	*ticks = utime + stime;
	*cpu = (unsigned)processor;
	process->start_ticks = start;
	return 0;
}

/* The sum of PROC/PID/task/TID/schedstat's first field (ns on a CPU), or -errno when any task
 * has none (the caller then counts ticks). */
static long long tasks_schedstat_ns(const char *process_dir)
{
	char path[1024], text[128];
	long long sum = 0;
	snprintf(path, sizeof(path), "%s/task", process_dir);
	DIR *tasks = opendir(path);
	if (!tasks)
		return -errno;
	struct dirent *entry;
	int found = 0;
	while ((entry = readdir(tasks)) != NULL) {
		if (!is_number(entry->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/task/%s/schedstat", process_dir, entry->d_name);
		if (read_small(path, text, sizeof(text)) <= 0) {
			sum = -ENOENT;
			break;
		}
		sum += strtoll(text, NULL, 10);
		found++;
	}
	closedir(tasks);
	return found || sum < 0 ? sum : -ENOENT;
}

/* "0::/path" of PROC/PID/cgroup (cgroup v2), "/" when there is none. */
static void read_cgroup(const char *process_dir, char *cgroup, size_t size)
{
	char path[1024], text[1024];
	snprintf(cgroup, size, "/");
	snprintf(path, sizeof(path), "%s/cgroup", process_dir);
	if (read_small(path, text, sizeof(text)) <= 0)
		return;
	for (char *line = text; line && *line;) {
		char *next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strncmp(line, "0::", 3) == 0) {
			snprintf(cgroup, size, "%s", line[3] ? line + 3 : "/");
			return;
		}
		line = next;
	}
}

static int read_process(const struct procfs_roots *roots, const char *pid,
			struct attribution_process *process)
{
	char dir[600], path[700], text[1024];
	uint64_t ticks;
	unsigned cpu;
	struct stat status;

	memset(process, 0, sizeof(*process));
	snprintf(dir, sizeof(dir), "%s/%s", roots->proc, pid);
	snprintf(path, sizeof(path), "%s/stat", dir);
	if (read_small(path, text, sizeof(text)) <= 0 || parse_stat(text, process, &ticks, &cpu))
		return -ENOENT;
	process->pid = (pid_t)strtol(pid, NULL, 10);
	process->uid = stat(dir, &status) == 0 ? status.st_uid : (uid_t)-1;
	process->cpu = cpu;
	long long ns = tasks_schedstat_ns(dir);
	process->tick_counted = ns < 0;
	process->cpu_ns = ns < 0 ? (uint64_t)((double)ticks * roots->ns_per_tick) : (uint64_t)ns;
	process->error_ns = ns < 0 ? roots->ns_per_tick : SCHEDSTAT_ERROR_NS;
	read_cgroup(dir, process->cgroup, sizeof(process->cgroup));
	return 0;
}

static int by_pid(const void *a, const void *b)
{
	pid_t left = ((const struct attribution_process *)a)->pid;
	pid_t right = ((const struct attribution_process *)b)->pid;
	return (left > right) - (left < right);
}

static int read_processes(const struct procfs_roots *roots, struct procfs_snapshot *snapshot)
{
	DIR *proc = opendir(roots->proc);
	if (!proc)
		return -errno;
	struct dirent *entry;
	int ret = 0;
	snapshot->count = 0;
	snapshot->dropped = 0;
	while ((entry = readdir(proc)) != NULL) {
		if (!is_number(entry->d_name))
			continue;
		if (snapshot->count == snapshot->capacity) {
			size_t grown = snapshot->capacity ? snapshot->capacity * 2 : 256;
			if (grown > snapshot->limit)
				grown = snapshot->limit;
			void *bigger = grown > snapshot->capacity ?
				reallocarray(snapshot->processes, grown, sizeof(*snapshot->processes)) : NULL;
			if (!bigger) {
				snapshot->dropped++;
				continue;
			}
			snapshot->processes = bigger;
			snapshot->capacity = grown;
		}
		/* A process gone between readdir and read is simply not in this snapshot. */
		if (read_process(roots, entry->d_name, &snapshot->processes[snapshot->count]) == 0)
			snapshot->count++;
	}
	closedir(proc);
	qsort(snapshot->processes, snapshot->count, sizeof(*snapshot->processes), by_pid);
	return ret;
}

/* Per-CPU lines of PROC/stat: total = user..steal, idle = idle + iowait. */
int procfs_read_cpus(const struct procfs_roots *roots, struct procfs_snapshot *snapshot)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/stat", roots->proc);
	FILE *file = fopen(path, "re");
	if (!file)
		return -errno;
	char line[512];
	snapshot->cpu_count = 0;
	while (fgets(line, sizeof(line), file)) {
		unsigned cpu;
		unsigned long long f[8] = { 0 };
		if (strncmp(line, "cpu", 3) != 0 || !isdigit((unsigned char)line[3]))
			continue;
		if (sscanf(line + 3, "%u %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &f[0],
			   &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7]) < 5 ||
		    cpu >= PROCFS_MAX_CPUS)
			continue;
		snapshot->cpus[cpu].total_ticks = f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
		snapshot->cpus[cpu].idle_ticks = f[3] + f[4];
		if (cpu + 1 > snapshot->cpu_count)
			snapshot->cpu_count = cpu + 1;
	}
	fclose(file);
	return snapshot->cpu_count ? 0 : -ENODATA;
}

static void read_uptime(const struct procfs_roots *roots, struct procfs_snapshot *snapshot)
{
	char path[300], text[128];
	snprintf(path, sizeof(path), "%s/uptime", roots->proc);
	snapshot->uptime_ticks = 0;
	if (read_small(path, text, sizeof(text)) > 0)
		snapshot->uptime_ticks = (uint64_t)(strtod(text, NULL) * 1e9 / roots->ns_per_tick);
}

int procfs_read_snapshot(const struct procfs_roots *roots, struct procfs_snapshot *snapshot)
{
	int ret = procfs_read_cpus(roots, snapshot);
	if (ret < 0)
		return ret;
	read_uptime(roots, snapshot);
	return read_processes(roots, snapshot);
}

unsigned procfs_cpu_package(const struct procfs_roots *roots, unsigned cpu)
{
	char path[400], text[32];
	snprintf(path, sizeof(path), "%s/devices/system/cpu/cpu%u/topology/physical_package_id",
		 roots->sys, cpu);
	if (read_small(path, text, sizeof(text)) <= 0)
		return 0;
	long package = strtol(text, NULL, 10);
	return package >= 0 && package < (long)ATTRIBUTION_MAX_PACKAGES ? (unsigned)package : 0;
}

/* Mountinfo's octal escapes (\040 for a space, \011, \012, \134) undone in place. */
static void unescape_mount_point(char *text)
{
	char *to = text;
	for (const char *from = text; *from; to++) {
		if (from[0] == '\\' && from[1] >= '0' && from[1] <= '3' && from[2] >= '0' &&
		    from[2] <= '7' && from[3] >= '0' && from[3] <= '7') {
			*to = (char)((from[1] - '0') * 64 + (from[2] - '0') * 8 + (from[3] - '0'));
			from += 4;
		} else {
			*to = *from++;
		}
	}
	*to = '\0';
}

/* The mount point of a mountinfo line (proc(5): "ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS] -
 * FSTYPE SOURCE SUPER") when its file system is cgroup2 and it mounts the hierarchy's root. */
static bool cgroup2_mount_point(char *line, char *point, size_t size)
{
	char *fields[5] = { 0 }, *save = NULL, *token = strtok_r(line, " \n", &save);
	for (int i = 0; token && i < 5; i++, token = strtok_r(NULL, " \n", &save))
		fields[i] = token;
	const char *separator = strstr(save ? save : "", "- ");
	if (!fields[4] || !separator || strncmp(separator + 2, "cgroup2 ", 8) != 0 ||
	    strcmp(fields[3], "/") != 0)
		return false;
	unescape_mount_point(fields[4]);
	return (size_t)snprintf(point, size, "%s", fields[4]) < size;
}

int procfs_find_cgroup2(const char *mountinfo, char *point, size_t size)
{
	FILE *file = fopen(mountinfo, "re");
	if (!file)
		return -errno;
	char line[4096];
	int ret = -ENOENT;
	while (ret == -ENOENT && fgets(line, sizeof(line), file))
		if (cgroup2_mount_point(line, point, size))
			ret = 0;
	fclose(file);
	return ret;
}

long long procfs_cgroup_usage_usec(const struct procfs_roots *roots, const char *path)
{
	char file[1024], text[1024];
	snprintf(file, sizeof(file), "%s%s/cpu.stat", roots->cgroup, path);
	ssize_t got = read_small(file, text, sizeof(text));
	if (got < 0)
		return got;
	const char *usage = strstr(text, "usage_usec ");
	return usage ? strtoll(usage + 11, NULL, 10) : -ENODATA;
}
