/*
 * attribution/attribution.h — whose energy is it: each interval's package energy charged to
 * processes and cgroups by the CPU time the kernel counted for them (seed 003 §4, CHAPPIE's
 * method; the arithmetic is common/energy_share.h, the one haecer-prof charges samples by).
 *
 * Each attribution_step() reads the kernel's figures (a "snapshot"): every process of
 * PROC/[0-9]* (its tasks' CPU time from PROC/PID/task/TID/schedstat in ns, or utime+stime of
 * PROC/PID/task/TID/stat in ticks when schedstat is missing, and the CPU each task last ran on,
 * which SYS/devices/system/cpu/cpuN/topology/physical_package_id maps to a package), PROC/stat
 * per CPU (capacity and idle), and each process's cgroup v2 usage (CGROUP/PATH/cpu.stat
 * usage_usec). Between two snapshots, package p's energy E_p is split:
 *   process:  E_p × its CPU time on p / capacity_p (capacity: the ticks PROC/stat counted for p's
 *             CPUs; the tasks' own sum when jitter makes that larger)
 *   idle:     E_p × idle+iowait ticks of p's CPUs / capacity_p
 *   other:    the rest (kernel threads' and interrupts' time not in a process, processes over
 *             the table's bound, and processes that came and went between two snapshots)
 * The sum of the three is E_p exactly. A process's CPU time is charged to the package of the CPU
 * its main thread last ran on (the kernel keeps no per-CPU split of it): a process whose threads
 * ran on several packages is charged wholly to that one, which on a one-package node changes
 * nothing. In schedstat mode a process's time is its live threads' sum: a thread that exited
 * inside the interval takes its time since the last snapshot with it (to "other").
 *
 * ± (error_joules): E_p × the CPU-time error / capacity_p, the error being per reading one tick
 * for a tick-counted task (two readings: 2 ticks) or 2 µs for a schedstat one, plus one tick per
 * CPU of PROC/stat. It is a bound, not a standard deviation.
 *
 * What it cannot see: a process that started and exited between two snapshots is in no process
 * snapshot. Its CPU time is in its cgroup's usage_usec (cgroup v2: the cgroup view charges it)
 * and lands in "other" in the process view. A process seen before that exits: its CPU time since
 * the last snapshot is lost to the process view (also "other"), its cumulative joules fold into
 * its cgroup's exited_joules so no total ever goes back. A pid reused inside an interval is told
 * apart by its start time (field 22): a new process, charged its whole CPU time when it started
 * after the previous snapshot. Cgroups' usage is not split per CPU, so a cgroup is charged
 * E_node × own usage / capacity_node, its own usage being its cpu.stat usage less that of the
 * cgroups below it the engine tracks (cgroup v2 counts a child's time in its parents too): the
 * tracked cgroups' charges do not overlap, and with the root cgroup among them (whose usage is
 * the busy time of PROC/stat) cgroups + idle = the node's energy, ± cgroup_error_joules = E_node
 * × (two ticks per CPU + two ticks per charged cgroup: cpu.stat's usage of a running task is
 * brought up to date at the scheduler tick) / capacity_node. Memory: at most max_processes
 * processes and max_cgroups cgroups are tracked (the rest count in dropped and go to "other");
 * removed cgroups leave the table (attribution_cgroups()).
 */
#ifndef HAECER_ATTRIBUTION_ATTRIBUTION_H
#define HAECER_ATTRIBUTION_ATTRIBUTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ATTRIBUTION_MAX_PACKAGES 64u
#define ATTRIBUTION_COMM_MAX 32u
#define ATTRIBUTION_CGROUP_MAX 256u

struct attribution_config {
	const char *proc_root;	 /* "/proc" when NULL */
	const char *sys_root;	 /* "/sys" when NULL (cpu topology) */
	const char *cgroup_root; /* cgroup2's mount per PROC/self/mountinfo when NULL (none: no
				  * accounting; mountinfo unreadable: "/sys/fs/cgroup"); "" turns
				  * cgroup accounting off */
	size_t max_processes;	 /* 65536 when 0 */
	size_t max_cgroups;	 /* 4096 when 0 */
	long ticks_per_second;	 /* sysconf(_SC_CLK_TCK) when 0 */
};

/* One process as of the latest snapshot: what its last interval and its life so far were
 * charged. */
struct attribution_process {
	pid_t pid;
	uid_t uid;
	uint64_t start_ticks; /* field 22 of stat: tells a reused pid apart */
	char comm[ATTRIBUTION_COMM_MAX];
	char cgroup[ATTRIBUTION_CGROUP_MAX]; /* "/" when unknown */
	unsigned cpu;			     /* the CPU its main thread last ran on */
	unsigned package;		     /* that CPU's package */
	uint64_t cpu_ns;		     /* cumulative CPU time the kernel reports */
	double interval_cpu_ns;		     /* of the last interval */
	double interval_joules;
	double error_joules; /* ± of interval_joules */
	double joules_total; /* every interval it was seen in */
	double error_ns;     /* the CPU-time error of one reading */
	bool tick_counted;   /* utime+stime ticks (no schedstat) */
	bool matched;	     /* private to the engine */
};

struct attribution_cgroup {
	char path[ATTRIBUTION_CGROUP_MAX];
	uint64_t usage_usec;	  /* cpu.stat usage_usec, 0 without accounting */
	double interval_usec;	  /* its own usage in the last interval (see below) */
	double interval_joules;	  /* charged for interval_usec */
	double joules_total;  /* by cpu.stat: every process of it, short-lived ones included */
	double exited_joules; /* process-view joules of its processes that have exited */
	uint64_t id;	      /* never reused: the table is in ascending id order */
	bool seen;	      /* in the latest snapshot */
	bool ended;	      /* removed: its totals are final; dropped at the next step */
	bool named;	      /* private to the engine */
};

/* What the last interval's energy went to; processes + idle + other = package exactly. */
struct attribution_interval {
	unsigned packages;
	double interval_ns; /* from PROC/stat's ticks, per CPU */
	double package_joules;
	double process_joules;
	double idle_joules;
	double other_joules;
	double error_joules; /* ± of the process/other split */
	double cgroup_joules;	    /* the cgroups' own shares: cgroups + idle ≈ package */
	double cgroup_error_joules; /* ± of cgroup_joules + idle against the package's */
	size_t processes;     /* tracked */
	size_t appeared;      /* new since the previous snapshot (reused pids included) */
	size_t exited;	      /* gone since the previous snapshot */
	size_t dropped;	      /* not tracked: over max_processes or unreadable */
	bool cgroup_accounting; /* some cgroup's cpu.stat was read (cgroup v2) */
};

struct attribution;

/* A new engine with config (copied); no snapshot yet. 0 or -errno. */
int attribution_open(struct attribution **out, const struct attribution_config *config);
void attribution_close(struct attribution *engine);

/* Take a snapshot and charge package_joules[0..packages) — the energy each package drew since
 * the previous call — to what ran since the previous snapshot. The first call only takes the
 * snapshot (interval->package_joules is 0). 0 or -errno (the engine keeps its previous
 * snapshot on error). */
int attribution_step(struct attribution *engine, const double *package_joules, unsigned packages,
		     struct attribution_interval *interval);

/* The processes and cgroups of the latest snapshot (processes by pid ascending); valid until the
 * next attribution_step(). Cgroups are in ascending id order (ids are never reused; a path
 * removed and made again is a new id). A cgroup whose cpu.stat is gone (removed) and that no
 * process of the snapshot is in is listed once more with ended set and its final totals (its
 * usage after the last snapshot that read it is in its parent's), then dropped at the next
 * step: the table holds the live cgroups and those ended in the last interval, so it stays
 * bounded on a node where containers come and go. A caller that keeps a cgroup's total beyond
 * that keeps it itself (serve retires it into its series). Unreadable for another reason
 * (permissions), a cgroup stays, not seen. */
size_t attribution_processes(const struct attribution *engine,
			     const struct attribution_process **processes);
size_t attribution_cgroups(const struct attribution *engine,
			   const struct attribution_cgroup **cgroups);

/* The cgroup v2 hierarchy's directory the engine reads cpu.stat under ("" without cgroup
 * accounting): config's cgroup_root, else found in PROC/self/mountinfo. */
const char *attribution_cgroup_root(const struct attribution *engine);

/* The process of pid in the latest snapshot, or NULL. */
const struct attribution_process *attribution_find(const struct attribution *engine, pid_t pid);

#endif
