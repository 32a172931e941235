/*
 * tools/mon/top_by.c — `haecer-mon top --by process|cgroup|service`: like top(1) sorted by
 * watts. Each interval's package energy (from top's msrd schedule) is charged by the
 * attribution engine (attribution/attribution.h: the kernel's CPU time of each process and
 * cgroup, idle and other apart); rows show the TOP_BY_ROWS heaviest, then idle and other, so the
 * watts of a set add up to the package's. By cgroup, each cgroup v2 cgroup a process is in is
 * charged its own cpu.stat usage (the engine's, without its tracked children's); by service,
 * the cgroups are summed by the systemd unit their path names (unit_of), "[no unit]" for slices
 * and the root.
 * By process, a user other than root sees their own processes by name and everyone else's as
 * one "[others]" row (rank.c).
 */
#include "tools/mon/mon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attribution/attribution.h"

#define TOP_BY_ROWS 20u

struct mon_top_by {
	enum mon_by by;
	struct attribution *engine;
	struct mon_row row;
	struct mon_rank processes;  /* by process: the visible ones, heaviest first */
	struct group_row *groups;   /* by cgroup or service, heaviest first */
	size_t groups_size;
};

bool mon_parse_by(const char *text, enum mon_by *by)
{
	static const struct {
		const char *name;
		enum mon_by by;
	} names[] = { { "process", MON_BY_PROCESS }, { "cgroup", MON_BY_CGROUP },
		      { "service", MON_BY_SERVICE } };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(text, names[i].name) == 0) {
			*by = names[i].by;
			return true;
		}
	return false;
}

int mon_top_by_open(enum mon_by by, struct mon_top_by **out)
{
	struct mon_top_by *view = calloc(1, sizeof(*view));
	if (!view)
		return -ENOMEM;
	view->by = by;
	int ret = attribution_open(&view->engine, NULL);
	if (ret < 0) {
		free(view);
		return ret;
	}
	*out = view;
	return 0;
}

void mon_top_by_close(struct mon_top_by *view)
{
	if (!view)
		return;
	attribution_close(view->engine);
	mon_rank_free(&view->processes);
	free(view->groups);
	free(view);
}

/* A row of the cgroup or service view: a cgroup's path, or a unit's name and its cgroups'. */
struct group_row {
	char name[ATTRIBUTION_CGROUP_MAX];
	double joules;
};

static int heavier_group(const void *a, const void *b)
{
	double left = ((const struct group_row *)a)->joules;
	double right = ((const struct group_row *)b)->joules;
	return (left < right) - (left > right);
}

/* The systemd unit a cgroup path belongs to, as systemd names it: its first component that is
 * a service or a scope (/system.slice/foo.service/worker -> foo.service; a container's
 * docker-ID.scope); slices and the root are no unit. */
static void unit_of(const char *path, char *unit, size_t size)
{
	for (const char *component = path; *component;) {
		while (*component == '/')
			component++;
		size_t length = strcspn(component, "/");
		if ((length > 8 && strncmp(component + length - 8, ".service", 8) == 0) ||
		    (length > 6 && strncmp(component + length - 6, ".scope", 6) == 0)) {
			snprintf(unit, size, "%.*s", (int)length, component);
			return;
		}
		component += length;
	}
	snprintf(unit, size, "[no unit]");
}

static void add_to_group(struct mon_top_by *view, size_t *count, const char *name, double joules)
{
	for (size_t i = 0; i < *count; i++)
		if (strcmp(view->groups[i].name, name) == 0) {
			view->groups[i].joules += joules;
			return;
		}
	snprintf(view->groups[*count].name, sizeof(view->groups[*count].name), "%s", name);
	view->groups[(*count)++].joules = joules;
}

/* The cgroups seen (or their units), heaviest first, in view->groups; their count or
 * -ENOMEM. */
static long order_groups(struct mon_top_by *view)
{
	const struct attribution_cgroup *cgroups;
	size_t count = attribution_cgroups(view->engine, &cgroups);
	size_t kept = 0;

	if (count > view->groups_size) {
		struct group_row *bigger = reallocarray(view->groups, count, sizeof(*bigger));
		if (!bigger)
			return -ENOMEM;
		view->groups = bigger;
		view->groups_size = count;
	}
	for (size_t i = 0; i < count; i++) {
		char unit[ATTRIBUTION_CGROUP_MAX];
		if (!cgroups[i].seen)
			continue;
		if (view->by == MON_BY_SERVICE)
			unit_of(cgroups[i].path, unit, sizeof(unit));
		add_to_group(view, &kept, view->by == MON_BY_SERVICE ? unit : cgroups[i].path,
			     cgroups[i].interval_joules);
	}
	qsort(view->groups, kept, sizeof(*view->groups), heavier_group);
	return (long)kept;
}

/* One row: who (pid, uid, comm, cgroup; "-" where it does not apply) and watts ± error. */
static void print_row(struct mon_top_by *view, enum mon_format format, bool *header_done,
		      double seconds, const struct attribution_process *process, const char *name,
		      double watts, double error_watts, bool simulated)
{
	struct mon_row *row = &view->row;
	char pid[16] = "-", uid[16] = "-";
	mon_row_reset(row);
	mon_row_number(row, "seconds", 12, "%.3f", seconds);
	if (view->by == MON_BY_PROCESS) {
		if (process) {
			snprintf(pid, sizeof(pid), "%d", (int)process->pid);
			snprintf(uid, sizeof(uid), "%u", (unsigned)process->uid);
		}
		mon_row_string(row, "pid", 8, pid);
		mon_row_string(row, "uid", 6, uid);
		mon_row_string(row, "comm", -16, process ? process->comm : name);
		mon_row_string(row, "cgroup", -40, process ? process->cgroup : "-");
	} else {
		mon_row_string(row, view->by == MON_BY_SERVICE ? "service" : "cgroup", -48, name);
	}
	mon_row_number(row, "watts", 10, "%.3f", watts);
	mon_row_number(row, "watts_error", 12, "%.3f", error_watts);
	mon_row_string(row, "source", -10, simulated ? "simulated" : "hardware");
	mon_row_print(stdout, format, row, header_done);
}

/* By process: the visible processes, [others] (a user's view), [idle] and [other]. */
static void print_processes(struct mon_top_by *view, enum mon_format format, bool *header_done,
			    double seconds, double interval_s, long rows,
			    const struct attribution_interval *interval, bool simulated)
{
	for (long i = 0; i < rows && i < (long)TOP_BY_ROWS; i++) {
		const struct attribution_process *process = view->processes.order[i];
		print_row(view, format, header_done, seconds, process, NULL,
			  process->interval_joules / interval_s, process->error_joules / interval_s,
			  simulated);
	}
	if (!mon_sees_every_process())
		print_row(view, format, header_done, seconds, NULL, "[others]",
			  view->processes.hidden_joules / interval_s,
			  view->processes.hidden_error_joules / interval_s, simulated);
	print_row(view, format, header_done, seconds, NULL, "[idle]",
		  interval->idle_joules / interval_s, 0, simulated);
	print_row(view, format, header_done, seconds, NULL, "[other]",
		  interval->other_joules / interval_s, interval->error_joules / interval_s,
		  simulated);
}

/* By cgroup or service: the heaviest rows, [more] for the rest, [idle] and [other] = package -
 * idle - cgroups, which is signed: cpu.stat and PROC/stat may disagree within the stated ±. */
static void print_groups(struct mon_top_by *view, enum mon_format format, bool *header_done,
			 double seconds, double interval_s, long rows,
			 const struct attribution_interval *interval, bool simulated)
{
	double more = 0;
	for (long i = 0; i < rows; i++) {
		if (i < (long)TOP_BY_ROWS)
			print_row(view, format, header_done, seconds, NULL, view->groups[i].name,
				  view->groups[i].joules / interval_s, 0, simulated);
		else
			more += view->groups[i].joules;
	}
	if (rows > (long)TOP_BY_ROWS)
		print_row(view, format, header_done, seconds, NULL, "[more]", more / interval_s, 0,
			  simulated);
	print_row(view, format, header_done, seconds, NULL, "[idle]",
		  interval->idle_joules / interval_s, 0, simulated);
	double other = interval->package_joules - interval->idle_joules - interval->cgroup_joules;
	print_row(view, format, header_done, seconds, NULL, "[other]", other / interval_s,
		  interval->cgroup_error_joules / interval_s, simulated);
}

int mon_top_by_print(struct mon_top_by *view, enum mon_format format, bool *header_done,
		     double seconds, double interval_s, const double *package_joules,
		     unsigned packages, bool simulated)
{
	struct attribution_interval interval;
	int ret = attribution_step(view->engine, package_joules, packages, &interval);
	if (ret < 0 || interval.package_joules <= 0 || interval_s <= 0)
		return ret < 0 ? ret : 0;
	long rows = view->by == MON_BY_PROCESS
			    ? mon_rank_processes(&view->processes, view->engine, MON_RANK_INTERVAL)
			    : order_groups(view);
	if (rows < 0)
		return (int)rows;
	if (view->by == MON_BY_PROCESS)
		print_processes(view, format, header_done, seconds, interval_s, rows, &interval,
				simulated);
	else
		print_groups(view, format, header_done, seconds, interval_s, rows, &interval,
			     simulated);
	fflush(stdout);
	return 0;
}
