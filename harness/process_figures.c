/* harness/process_figures.c — /proc/PID/status and /proc/PID/stat fields of a process. */
#include "harness/process_figures.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long harness_process_status_kib(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t length = strlen(field);
	long kib = -1;
	FILE *status;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	status = fopen(path, "r");
	if (status == NULL)
		return -1;
	while (kib < 0 && fgets(line, sizeof(line), status) != NULL)
		if (strncmp(line, field, length) == 0 && sscanf(line + length, "%ld", &kib) != 1)
			kib = -1;
	fclose(status);
	return kib;
}

unsigned long long harness_process_status_number(pid_t pid, const char *field, int base)
{
	char path[64], line[256];
	size_t length = strlen(field);
	unsigned long long value = ~0ull;
	FILE *status;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	status = fopen(path, "r");
	if (status == NULL)
		return value;
	while (fgets(line, sizeof(line), status) != NULL) {
		if (strncmp(line, field, length) == 0) {
			value = strtoull(line + length, NULL, base);
			break;
		}
	}
	fclose(status);
	return value;
}

long long harness_process_cpu_ticks(pid_t pid)
{
	char path[64], text[1024];
	unsigned long long utime = 0, stime = 0;
	const char *after_name;
	FILE *stat;
	size_t got;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	stat = fopen(path, "r");
	if (stat == NULL)
		return -1;
	got = fread(text, 1, sizeof(text) - 1, stat);
	fclose(stat);
	text[got] = '\0';
	/* Fields after the command name in parentheses: state is field 3, utime 14, stime 15. */
	after_name = strrchr(text, ')');
	if (after_name == NULL ||
	    sscanf(after_name + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
		   &stime) != 2)
		return -1;
	return (long long)(utime + stime);
}

long long harness_process_cpu_ns(pid_t pid)
{
	char path[64];
	unsigned long long ns;
	FILE *file;
	int got;

	/* The scheduler's own count of the thread's time on a CPU, in ns (not ticks). */
	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	file = fopen(path, "r");
	if (file == NULL)
		return -1;
	got = fscanf(file, "%llu", &ns);
	fclose(file);
	return got == 1 ? (long long)ns : -1;
}

long harness_process_fd_count(pid_t pid)
{
	char path[64];
	struct dirent *entry;
	long count = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (dir == NULL)
		return -1;
	while ((entry = readdir(dir)) != NULL)
		if (entry->d_name[0] != '.')
			count++;
	closedir(dir);
	return count;
}
