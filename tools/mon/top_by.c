/*
 * tools/mon/top_by.c — `haecer-mon top --by process|cgroup|service`: like top(1) sorted by
 * watts. Each interval's package energy (from top's msrd schedule) is charged by the
 * attribution engine (attribution/attribution.h: the kernel's CPU time of each process and
 * cgroup, idle and other apart); rows show the TOP_BY_ROWS heaviest, then idle and other, so the
 * watts of a set add up to the package's. A service is a cgroup whose name ends in ".service".
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
	const struct attribution_cgroup **cgroups; /* by cgroup or service, heaviest first */
	size_t cgroups_size;
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
	free(view->cgroups);
	free(view);
}

static int heavier_cgroup(const void *a, const void *b)
{
	double left = (*(const struct attribution_cgroup *const *)a)->interval_joules;
	double right = (*(const struct attribution_cgroup *const *)b)->interval_joules;
	return (left < right) - (left > right);
}

static bool is_service(const char *path)
{
	size_t length = strlen(path);
	return length > 8 && strcmp(path + length - 8, ".service") == 0;
}

/* The cgroups (or services) of the set, heaviest first, in view->cgroups; their count or
 * -ENOMEM. */
static long order_cgroups(struct mon_top_by *view)
{
	const struct attribution_cgroup *cgroups;
	size_t count = attribution_cgroups(view->engine, &cgroups);
	size_t kept = 0;

	if (count > view->cgroups_size) {
		const struct attribution_cgroup **bigger =
			reallocarray(view->cgroups, count, sizeof(*bigger));
		if (!bigger)
			return -ENOMEM;
		view->cgroups = bigger;
		view->cgroups_size = count;
	}
	for (size_t i = 0; i < count; i++)
		if (cgroups[i].seen && (view->by == MON_BY_CGROUP || is_service(cgroups[i].path)))
			view->cgroups[kept++] = &cgroups[i];
	qsort(view->cgroups, kept, sizeof(*view->cgroups), heavier_cgroup);
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
			    : order_cgroups(view);
	if (rows < 0)
		return (int)rows;
	for (long i = 0; i < rows && i < (long)TOP_BY_ROWS; i++) {
		if (view->by == MON_BY_PROCESS) {
			const struct attribution_process *process = view->processes.order[i];
			print_row(view, format, header_done, seconds, process, NULL,
				  process->interval_joules / interval_s,
				  process->error_joules / interval_s, simulated);
		} else {
			const struct attribution_cgroup *cgroup = view->cgroups[i];
			print_row(view, format, header_done, seconds, NULL, cgroup->path,
				  cgroup->interval_joules / interval_s, 0, simulated);
		}
	}
	if (view->by == MON_BY_PROCESS && !mon_sees_every_process())
		print_row(view, format, header_done, seconds, NULL, "[others]",
			  view->processes.hidden_joules / interval_s,
			  view->processes.hidden_error_joules / interval_s, simulated);
	if (view->by == MON_BY_PROCESS) {
		print_row(view, format, header_done, seconds, NULL, "[idle]",
			  interval.idle_joules / interval_s, 0, simulated);
		print_row(view, format, header_done, seconds, NULL, "[other]",
			  interval.other_joules / interval_s, interval.error_joules / interval_s,
			  simulated);
	}
	fflush(stdout);
	return 0;
}
