/*
 * attribution/procfs.h — private to attribution/: reading one snapshot of the kernel's figures
 * (processes, CPUs, cgroups) under configurable roots.
 */
#ifndef HAECER_ATTRIBUTION_PROCFS_H
#define HAECER_ATTRIBUTION_PROCFS_H

#include "attribution/attribution.h"

#define PROCFS_MAX_CPUS 4096u

struct procfs_roots {
	char proc[256];
	char sys[256];
	char cgroup[256]; /* "" without cgroup accounting */
	double ns_per_tick;
};

struct procfs_cpu {
	uint64_t total_ticks;
	uint64_t idle_ticks; /* idle + iowait */
};

struct procfs_snapshot {
	struct attribution_process *processes; /* by pid ascending */
	size_t count, capacity, limit;
	size_t dropped;
	struct procfs_cpu cpus[PROCFS_MAX_CPUS];
	unsigned cpu_count;
	uint64_t uptime_ticks;
};

/* Fill snapshot (its processes array reused, grown up to limit) from roots. 0 or -errno. */
int procfs_read_snapshot(const struct procfs_roots *roots, struct procfs_snapshot *snapshot);

/* Only the CPUs' part of the snapshot (PROC/stat), read again. 0 or -errno. */
int procfs_read_cpus(const struct procfs_roots *roots, struct procfs_snapshot *snapshot);

/* The package of cpu per SYS/devices/system/cpu/cpuN/topology/physical_package_id, 0 when
 * unreadable. */
unsigned procfs_cpu_package(const struct procfs_roots *roots, unsigned cpu);

/* The mount point of the cgroup v2 hierarchy (the first cgroup2 mount of its root in mountinfo,
 * e.g. /proc/self/mountinfo): /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified on a
 * hybrid one. 0, -ENOENT when none is mounted, or -errno when mountinfo is unreadable. */
int procfs_find_cgroup2(const char *mountinfo, char *point, size_t size);

/* usage_usec of CGROUP/path/cpu.stat, or -errno (-ENOENT: the cgroup was removed). */
long long procfs_cgroup_usage_usec(const struct procfs_roots *roots, const char *path);

#endif
