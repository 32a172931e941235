/*
 * attribution/attribution.c — charging each interval's package energy to processes, idle and
 * other, and the node's energy to cgroups (attribution.h says what and how exactly). The split is
 * common/energy_share.h's, the rule haecer-prof charges its samples by.
 */
#include "attribution/attribution.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attribution/procfs.h"
#include "common/energy_share.h"

struct attribution {
	struct procfs_roots roots;
	struct procfs_snapshot snapshots[2];
	int current; /* index of the latest snapshot */
	bool have_snapshot;
	unsigned cpu_package[PROCFS_MAX_CPUS];
	struct attribution_cgroup *cgroups;
	size_t cgroup_count, cgroup_limit;
	size_t *cgroup_index; /* open addressing, 2 × limit slots, SIZE_MAX empty */
	double *children_usec; /* per cgroup: its tracked children's usage of the interval */
	long long *read_usec;  /* per cgroup: this snapshot's usage_usec, or -errno */
	size_t cgroups_read;   /* how many of the cgroups read_usec holds */
	size_t index_size;
	uint64_t next_cgroup_id;
};

static void copy_root(char *to, size_t size, const char *given, const char *fallback)
{
	snprintf(to, size, "%s", given ? given : fallback);
}

/* The cgroup v2 hierarchy where PROC/self/mountinfo has it mounted (/sys/fs/cgroup/unified on a
 * hybrid host, whose /sys/fs/cgroup holds v1 controllers without cpu.stat's usage_usec); no
 * cgroup accounting when no cgroup2 is mounted; /sys/fs/cgroup when mountinfo is unreadable. */
static void find_cgroup2(struct attribution *engine)
{
	char mountinfo[300];
	snprintf(mountinfo, sizeof(mountinfo), "%s/self/mountinfo", engine->roots.proc);
	int ret = procfs_find_cgroup2(mountinfo, engine->roots.cgroup, sizeof(engine->roots.cgroup));
	if (ret == -ENOENT)
		engine->roots.cgroup[0] = '\0';
	else if (ret < 0)
		snprintf(engine->roots.cgroup, sizeof(engine->roots.cgroup), "/sys/fs/cgroup");
}

int attribution_open(struct attribution **out, const struct attribution_config *config)
{
	struct attribution_config none = { 0 };
	if (!out)
		return -EINVAL;
	if (!config)
		config = &none;
	struct attribution *engine = calloc(1, sizeof(*engine));
	if (!engine)
		return -ENOMEM;
	copy_root(engine->roots.proc, sizeof(engine->roots.proc), config->proc_root, "/proc");
	copy_root(engine->roots.sys, sizeof(engine->roots.sys), config->sys_root, "/sys");
	if (config->cgroup_root)
		copy_root(engine->roots.cgroup, sizeof(engine->roots.cgroup), config->cgroup_root, "");
	else
		find_cgroup2(engine);
	long ticks = config->ticks_per_second ? config->ticks_per_second : sysconf(_SC_CLK_TCK);
	engine->roots.ns_per_tick = 1e9 / (double)(ticks > 0 ? ticks : 100);
	for (int i = 0; i < 2; i++)
		engine->snapshots[i].limit = config->max_processes ? config->max_processes : 65536;
	engine->cgroup_limit = config->max_cgroups ? config->max_cgroups : 4096;
	engine->index_size = engine->cgroup_limit * 2;
	engine->cgroups = calloc(engine->cgroup_limit, sizeof(*engine->cgroups));
	engine->cgroup_index = malloc(engine->index_size * sizeof(*engine->cgroup_index));
	engine->children_usec = calloc(engine->cgroup_limit, sizeof(*engine->children_usec));
	engine->read_usec = calloc(engine->cgroup_limit, sizeof(*engine->read_usec));
	if (!engine->cgroups || !engine->cgroup_index || !engine->children_usec ||
	    !engine->read_usec) {
		attribution_close(engine);
		return -ENOMEM;
	}
	memset(engine->cgroup_index, 0xff, engine->index_size * sizeof(*engine->cgroup_index));
	for (unsigned cpu = 0; cpu < PROCFS_MAX_CPUS; cpu++)
		engine->cpu_package[cpu] = procfs_cpu_package(&engine->roots, cpu);
	*out = engine;
	return 0;
}

void attribution_close(struct attribution *engine)
{
	if (!engine)
		return;
	free(engine->snapshots[0].processes);
	free(engine->snapshots[1].processes);
	free(engine->cgroups);
	free(engine->cgroup_index);
	free(engine->children_usec);
	free(engine->read_usec);
	free(engine);
}

static size_t *cgroup_slot(const struct attribution *engine, const char *path, size_t length)
{
	size_t hash = 5381;
	for (size_t i = 0; i < length; i++)
		hash = hash * 33 + (unsigned char)path[i];
	for (size_t probe = 0; probe < engine->index_size; probe++) {
		size_t *slot = &engine->cgroup_index[(hash + probe) % engine->index_size];
		if (*slot == SIZE_MAX || (strncmp(engine->cgroups[*slot].path, path, length) == 0 &&
					  engine->cgroups[*slot].path[length] == '\0'))
			return slot;
	}
	return NULL;
}

/* The cgroup of path, added when new; NULL when the table is full (the caller counts it as
 * other). */
static struct attribution_cgroup *cgroup_of(struct attribution *engine, const char *path)
{
	size_t *slot = cgroup_slot(engine, path, strlen(path));
	if (!slot)
		return NULL;
	if (*slot == SIZE_MAX) {
		if (engine->cgroup_count == engine->cgroup_limit)
			return NULL;
		struct attribution_cgroup *cgroup = &engine->cgroups[engine->cgroup_count];
		memset(cgroup, 0, sizeof(*cgroup)); /* the place of one dropped before */
		snprintf(cgroup->path, sizeof(cgroup->path), "%s", path);
		cgroup->id = engine->next_cgroup_id++;
		*slot = engine->cgroup_count++;
	}
	return &engine->cgroups[*slot];
}

/* Drops the cgroups that ended in the previous step (their final totals were listed once),
 * keeping the others' order, and rebuilds the index over what is left. */
static void drop_ended_cgroups(struct attribution *engine)
{
	size_t kept = 0;
	for (size_t i = 0; i < engine->cgroup_count; i++)
		if (!engine->cgroups[i].ended)
			engine->cgroups[kept++] = engine->cgroups[i];
	if (kept == engine->cgroup_count)
		return;
	engine->cgroup_count = kept;
	memset(engine->cgroup_index, 0xff, engine->index_size * sizeof(*engine->cgroup_index));
	for (size_t i = 0; i < kept; i++) {
		const char *path = engine->cgroups[i].path;
		*cgroup_slot(engine, path, strlen(path)) = i;
	}
}

/* The nearest cgroup above path that the engine tracks and saw in this snapshot, or NULL. */
static struct attribution_cgroup *tracked_parent(const struct attribution *engine,
						 const char *path)
{
	size_t length = strlen(path);
	while (length > 1) {
		while (length > 0 && path[length - 1] != '/')
			length--;
		if (length > 1)
			length--; /* "/a/b" -> "/a"; "/a" -> "/" */
		size_t *slot = cgroup_slot(engine, path, length);
		if (slot && *slot != SIZE_MAX && engine->cgroups[*slot].seen)
			return &engine->cgroups[*slot];
	}
	return NULL;
}

static struct attribution_process *find_in(struct procfs_snapshot *snapshot, pid_t pid)
{
	struct attribution_process key = { .pid = pid };
	size_t low = 0, high = snapshot->count;
	while (low < high) {
		size_t middle = low + (high - low) / 2;
		if (snapshot->processes[middle].pid < key.pid)
			low = middle + 1;
		else
			high = middle;
	}
	return low < snapshot->count && snapshot->processes[low].pid == pid ?
		       &snapshot->processes[low] : NULL;
}

/* Each process's CPU time since the previous snapshot, its totals carried over; returns how
 * many appeared. A process first seen now is charged its whole CPU time only when it started
 * after the previous snapshot (else its earlier time is not of this interval). */
static size_t carry_over(struct attribution *engine, struct procfs_snapshot *previous,
			 struct procfs_snapshot *latest)
{
	size_t appeared = 0;
	for (size_t i = 0; i < previous->count; i++)
		previous->processes[i].matched = false;
	for (size_t i = 0; i < latest->count; i++) {
		struct attribution_process *process = &latest->processes[i];
		struct attribution_process *before = find_in(previous, process->pid);
		process->package = process->cpu < PROCFS_MAX_CPUS ? engine->cpu_package[process->cpu] : 0;
		if (before && before->start_ticks == process->start_ticks) {
			before->matched = true;
			process->interval_cpu_ns = process->cpu_ns > before->cpu_ns ?
				(double)(process->cpu_ns - before->cpu_ns) : 0.0;
			process->joules_total = before->joules_total;
			process->error_ns += before->error_ns;
			continue;
		}
		appeared++;
		bool started_inside = process->start_ticks >= previous->uptime_ticks;
		process->interval_cpu_ns = started_inside ? (double)process->cpu_ns : 0.0;
	}
	return appeared;
}

/* Processes of the previous snapshot not in the latest (exited, or their pid reused): their
 * totals fold into their cgroup's exited_joules. Returns how many. */
static size_t fold_exited(struct attribution *engine, const struct procfs_snapshot *previous)
{
	size_t exited = 0;
	for (size_t i = 0; i < previous->count; i++) {
		const struct attribution_process *process = &previous->processes[i];
		if (process->matched)
			continue;
		exited++;
		struct attribution_cgroup *cgroup = cgroup_of(engine, process->cgroup);
		if (cgroup)
			cgroup->exited_joules += process->joules_total;
	}
	return exited;
}

struct package_time {
	double capacity_ns, idle_ns, used_ns, error_ns;
};

static void package_times(const struct attribution *engine, const struct procfs_snapshot *previous,
			  const struct procfs_snapshot *latest, struct package_time *times,
			  double *interval_ns)
{
	double ns = engine->roots.ns_per_tick, total = 0;
	unsigned cpus = 0;
	for (unsigned cpu = 0; cpu < latest->cpu_count && cpu < previous->cpu_count; cpu++) {
		const struct procfs_cpu *now = &latest->cpus[cpu], *then = &previous->cpus[cpu];
		if (now->total_ticks < then->total_ticks || now->idle_ticks < then->idle_ticks)
			continue; /* a CPU gone offline and back: its counts restarted */
		struct package_time *time = &times[engine->cpu_package[cpu]];
		time->capacity_ns += (double)(now->total_ticks - then->total_ticks) * ns;
		time->idle_ns += (double)(now->idle_ticks - then->idle_ticks) * ns;
		time->error_ns += 2 * ns; /* one tick at each end of the interval */
		total += (double)(now->total_ticks - then->total_ticks) * ns;
		cpus++;
	}
	*interval_ns = cpus ? total / cpus : 0;
	for (size_t i = 0; i < latest->count; i++) {
		const struct attribution_process *process = &latest->processes[i];
		times[process->package].used_ns += process->interval_cpu_ns;
		if (process->interval_cpu_ns > 0)
			times[process->package].error_ns += process->error_ns;
	}
}

/* processes + idle + other = E_p for every package; the shares come from energy_share() with
 * the processes' and idle's time as what is used, so they never exceed E_p. */
static void charge_processes(struct procfs_snapshot *latest, const double *package_joules,
			     unsigned packages, const struct package_time *times,
			     struct attribution_interval *interval)
{
	for (unsigned p = 0; p < packages; p++) {
		const struct package_time *time = &times[p];
		double used = time->used_ns + time->idle_ns;
		double idle = energy_share(package_joules[p], time->idle_ns, time->capacity_ns, 1, used);
		double error = energy_share(package_joules[p], time->error_ns, time->capacity_ns, 1, used);
		interval->package_joules += package_joules[p];
		interval->idle_joules += idle;
		interval->error_joules += error < package_joules[p] ? error : package_joules[p];
	}
	for (size_t i = 0; i < latest->count; i++) {
		struct attribution_process *process = &latest->processes[i];
		unsigned p = process->package;
		double joules = 0, error = 0;
		if (p < packages) {
			double used = times[p].used_ns + times[p].idle_ns;
			joules = energy_share(package_joules[p], process->interval_cpu_ns,
					      times[p].capacity_ns, 1, used);
			error = energy_share(package_joules[p], process->error_ns,
					     times[p].capacity_ns, 1, used);
		}
		process->interval_joules = joules;
		process->error_joules = process->interval_cpu_ns > 0 ? error : 0;
		process->joules_total += joules;
		interval->process_joules += joules;
	}
	double other = interval->package_joules - interval->process_joules - interval->idle_joules;
	interval->other_joules = other > 0 ? other : 0;
}

/* cpu.stat's usage_usec of the cgroups from `first` on into read_usec (-errno when unreadable).
 * The cgroups known before a snapshot are read just before it reads PROC/stat, so that their
 * interval and the CPUs' are the same (the process scan between them takes milliseconds). */
static void read_cgroups(struct attribution *engine, size_t first)
{
	bool accounting = engine->roots.cgroup[0] != '\0';
	for (size_t i = first; i < engine->cgroup_count; i++)
		engine->read_usec[i] = accounting ?
			procfs_cgroup_usage_usec(&engine->roots, engine->cgroups[i].path) : -ENOENT;
	engine->cgroups_read = engine->cgroup_count;
}

/* Each tracked cgroup's usage since the previous snapshot (interval_usec, 0 for a cgroup first
 * read now); a cgroup whose cpu.stat is gone (removed) and that no process is in any more keeps
 * its totals this once, ended, and is dropped at the next step. */
static void apply_cgroup_usage(struct attribution *engine, bool charge,
			       struct attribution_interval *interval)
{
	for (size_t i = 0; i < engine->cgroup_count; i++) {
		struct attribution_cgroup *cgroup = &engine->cgroups[i];
		cgroup->seen = false;
		cgroup->interval_usec = 0;
		cgroup->interval_joules = 0;
		long long usage = engine->read_usec[i];
		cgroup->ended = usage == -ENOENT && !cgroup->named;
		if (usage < 0)
			continue;
		cgroup->seen = true;
		interval->cgroup_accounting = true;
		if (charge && (uint64_t)usage > cgroup->usage_usec && cgroup->usage_usec > 0)
			cgroup->interval_usec = (double)((uint64_t)usage - cgroup->usage_usec);
		cgroup->usage_usec = (uint64_t)usage;
	}
}

/* Cgroups by their own usage (less their tracked children's, which cgroup v2 counts in the
 * parent too) against the node's capacity, so that their charges do not overlap. */
static void charge_cgroups(struct attribution *engine, const struct procfs_snapshot *latest,
			   double node_joules, double node_capacity_ns, bool charge,
			   struct attribution_interval *interval)
{
	for (size_t i = 0; i < engine->cgroup_count; i++)
		engine->cgroups[i].named = false;
	for (size_t i = 0; i < latest->count; i++) {
		struct attribution_cgroup *cgroup = cgroup_of(engine, latest->processes[i].cgroup);
		if (cgroup)
			cgroup->named = true;
	}
	read_cgroups(engine, engine->cgroups_read); /* new since: exited processes' or new ones' */
	apply_cgroup_usage(engine, charge, interval);
	for (size_t i = 0; i < engine->cgroup_count; i++)
		engine->children_usec[i] = 0;
	for (size_t i = 0; i < engine->cgroup_count; i++) {
		struct attribution_cgroup *parent = tracked_parent(engine, engine->cgroups[i].path);
		if (parent)
			engine->children_usec[parent - engine->cgroups] += engine->cgroups[i].interval_usec;
	}
	double error_ns = 2 * engine->roots.ns_per_tick * latest->cpu_count;
	for (size_t i = 0; i < engine->cgroup_count; i++) {
		struct attribution_cgroup *cgroup = &engine->cgroups[i];
		double own = cgroup->interval_usec - engine->children_usec[i];
		cgroup->interval_usec = own > 0 ? own : 0;
		if (cgroup->interval_usec <= 0)
			continue;
		cgroup->interval_joules = energy_share(node_joules, cgroup->interval_usec * 1e3,
						       node_capacity_ns, 1, 0);
		cgroup->joules_total += cgroup->interval_joules;
		interval->cgroup_joules += cgroup->interval_joules;
		error_ns += 2 * engine->roots.ns_per_tick;
	}
	double error = energy_share(node_joules, error_ns, node_capacity_ns, 1, 0);
	interval->cgroup_error_joules = error < node_joules ? error : node_joules;
}

int attribution_step(struct attribution *engine, const double *package_joules, unsigned packages,
		     struct attribution_interval *interval)
{
	if (!engine || !interval || (packages && !package_joules))
		return -EINVAL;
	memset(interval, 0, sizeof(*interval));
	struct procfs_snapshot *previous = &engine->snapshots[engine->current];
	struct procfs_snapshot *latest = &engine->snapshots[!engine->current];
	drop_ended_cgroups(engine);
	read_cgroups(engine, 0);
	int ret = procfs_read_snapshot(&engine->roots, latest);
	if (ret < 0)
		return ret;
	if (packages > ATTRIBUTION_MAX_PACKAGES)
		packages = ATTRIBUTION_MAX_PACKAGES;
	bool charge = engine->have_snapshot;
	struct package_time times[ATTRIBUTION_MAX_PACKAGES] = { { 0 } };
	if (charge) {
		interval->appeared = carry_over(engine, previous, latest);
		interval->exited = fold_exited(engine, previous);
		package_times(engine, previous, latest, times, &interval->interval_ns);
		charge_processes(latest, package_joules, packages, times, interval);
	} else {
		packages = 0;
		for (size_t i = 0; i < latest->count; i++)
			latest->processes[i].package = latest->processes[i].cpu < PROCFS_MAX_CPUS ?
				engine->cpu_package[latest->processes[i].cpu] : 0;
	}
	double capacity = 0;
	for (unsigned p = 0; p < ATTRIBUTION_MAX_PACKAGES; p++)
		capacity += times[p].capacity_ns;
	charge_cgroups(engine, latest, interval->package_joules, capacity, charge, interval);
	if (!charge) /* the cgroups were first read after the process scan: the CPUs' figures too */
		procfs_read_cpus(&engine->roots, latest);
	interval->packages = packages;
	interval->processes = latest->count;
	interval->dropped = latest->dropped;
	engine->current = !engine->current;
	engine->have_snapshot = true;
	return 0;
}

size_t attribution_processes(const struct attribution *engine,
			     const struct attribution_process **processes)
{
	const struct procfs_snapshot *latest = &engine->snapshots[engine->current];
	*processes = latest->processes;
	return engine->have_snapshot ? latest->count : 0;
}

size_t attribution_cgroups(const struct attribution *engine,
			   const struct attribution_cgroup **cgroups)
{
	*cgroups = engine->cgroups;
	return engine->cgroup_count;
}

const char *attribution_cgroup_root(const struct attribution *engine)
{
	return engine->roots.cgroup;
}

const struct attribution_process *attribution_find(const struct attribution *engine, pid_t pid)
{
	struct attribution *mutable = (struct attribution *)engine;
	return engine->have_snapshot ? find_in(&mutable->snapshots[engine->current], pid) : NULL;
}
