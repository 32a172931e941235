/*
 * tools/mon/serve_attribution.c — `haecer-mon serve`'s per-process and per-cgroup energy:
 *   haecer_process_energy_joules_total{pid,comm,uid,cgroup}  the --top N heaviest processes
 *   haecer_cgroup_energy_joules_total{cgroup}                 cgroups cut to --cgroup-depth D
 *   haecer_unattributed_energy_joules_total{to="idle"|"other"} what no process was charged
 *   haecer_attributed_package_energy_joules_total             the package energy so split
 *   haecer_attribution_error_joules_total                     the sum of the intervals' ±
 * from the attribution engine (attribution/attribution.h) fed each tick with the energy-pkg
 * energy msrd counted per package since the previous tick.
 *
 * Per-process series follow who may see whose processes (rank.c): an exporter run as root (the
 * operator's) exports every process; one run as another user only that user's processes (the
 * others' energy stays in the cgroup and unattributed series).
 *
 * Cardinality is bounded: N process series (a process that leaves the top N loses its series;
 * its energy stays in its cgroup's) and one series per distinct cgroup path cut to D levels
 * (at most SERVE_ATTRIBUTION_MAX_CGROUPS; the rest go to "/"). A cgroup's figure is its live
 * processes' joules plus the joules of its processes that exited (the engine's exited_joules),
 * so it covers the same processes on cgroup v1 and v2 hosts; the exporter keeps the highest
 * value it has written, so a counter never goes back (e.g. when a process leaves a cgroup).
 */
#include "tools/mon/serve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "attribution/attribution.h"

#define SERVE_ATTRIBUTION_MAX_CGROUPS 1024u

struct exported_cgroup {
	char path[ATTRIBUTION_CGROUP_MAX];
	double joules; /* the highest value written: the counter never goes back */
	double sum;    /* scratch: this tick's sum */
};

struct serve_attribution {
	struct attribution *engine;
	unsigned top;
	unsigned depth;
	bool have_previous;
	double previous_joules[ATTRIBUTION_MAX_PACKAGES];
	double package_joules;
	double idle_joules;
	double other_joules;
	double error_joules;
	struct mon_rank rank;      /* visible processes by joules so far */
	size_t top_count;
	size_t cgroup_count;
	struct exported_cgroup cgroups[SERVE_ATTRIBUTION_MAX_CGROUPS];
};

int serve_attribution_open(struct serve_state *state, unsigned top, unsigned depth)
{
	struct serve_attribution *view = calloc(1, sizeof(*view));
	int status;

	if (view == NULL)
		return -ENOMEM;
	status = attribution_open(&view->engine, NULL);
	if (status < 0) {
		free(view);
		return status;
	}
	view->top = top;
	view->depth = depth;
	state->attribution = view;
	return 0;
}

void serve_attribution_close(struct serve_state *state)
{
	struct serve_attribution *view = state->attribution;

	if (view == NULL)
		return;
	attribution_close(view->engine);
	mon_rank_free(&view->rank);
	free(view);
	state->attribution = NULL;
}

/* path cut to `depth` levels ("/a/b/c" at 2: "/a/b"); "/" stays "/". */
static void cut_path(const char *path, unsigned depth, char *out, size_t size)
{
	size_t end = 0;
	unsigned levels = 0;

	for (; path[end] != '\0'; end++)
		if (path[end] == '/' && ++levels > depth)
			break;
	if (end == 0)
		end = 1;
	snprintf(out, size, "%.*s", (int)end, path);
}

static struct exported_cgroup *find_cgroup(struct serve_attribution *view, const char *path)
{
	for (size_t i = 0; i < view->cgroup_count; i++)
		if (strcmp(view->cgroups[i].path, path) == 0)
			return &view->cgroups[i];
	if (view->cgroup_count == SERVE_ATTRIBUTION_MAX_CGROUPS)
		return strcmp(path, "/") == 0 ? NULL : find_cgroup(view, "/");
	struct exported_cgroup *cgroup = &view->cgroups[view->cgroup_count++];
	snprintf(cgroup->path, sizeof(cgroup->path), "%s", path);
	return cgroup;
}

static void add_to_cgroup(struct serve_attribution *view, const char *path, double joules)
{
	char cut[ATTRIBUTION_CGROUP_MAX];
	struct exported_cgroup *cgroup;

	cut_path(path, view->depth, cut, sizeof(cut));
	cgroup = find_cgroup(view, cut);
	if (cgroup != NULL)
		cgroup->sum += joules;
}

static void sum_cgroups(struct serve_attribution *view)
{
	const struct attribution_process *processes;
	const struct attribution_cgroup *cgroups;
	size_t process_count = attribution_processes(view->engine, &processes);
	size_t cgroup_count = attribution_cgroups(view->engine, &cgroups);

	for (size_t i = 0; i < view->cgroup_count; i++)
		view->cgroups[i].sum = 0;
	for (size_t i = 0; i < process_count; i++)
		add_to_cgroup(view, processes[i].cgroup, processes[i].joules_total);
	for (size_t i = 0; i < cgroup_count; i++)
		add_to_cgroup(view, cgroups[i].path, cgroups[i].exited_joules);
	for (size_t i = 0; i < view->cgroup_count; i++)
		if (view->cgroups[i].sum > view->cgroups[i].joules)
			view->cgroups[i].joules = view->cgroups[i].sum;
}

/* The top N visible processes by joules so far, in view->rank. 0 or -ENOMEM. */
static int order_top(struct serve_attribution *view)
{
	long count = mon_rank_processes(&view->rank, view->engine, MON_RANK_TOTAL);

	if (count < 0)
		return (int)count;
	view->top_count = (size_t)count < view->top ? (size_t)count : view->top;
	return 0;
}

/* Each package's energy-pkg joules since the previous tick; false until there are two. */
static bool package_energy(struct serve_attribution *view, const struct serve_state *state,
			   double *joules, unsigned *packages)
{
	double now[ATTRIBUTION_MAX_PACKAGES] = { 0 };
	bool complete = true;

	*packages = 0;
	for (size_t i = 0; i < state->domain_count; i++) {
		const struct serve_domain *domain = &state->domains[i];
		if (strcmp(domain->name, "energy-pkg") != 0 ||
		    domain->package >= ATTRIBUTION_MAX_PACKAGES)
			continue;
		complete = complete && domain->have_total && !domain->refused;
		now[domain->package] = mon_joules(domain->total, domain->exponent);
		if (domain->package + 1 > *packages)
			*packages = domain->package + 1;
	}
	if (!complete || *packages == 0)
		return false;
	for (unsigned p = 0; p < *packages; p++) {
		joules[p] = view->have_previous ? now[p] - view->previous_joules[p] : 0;
		if (joules[p] < 0)
			joules[p] = 0; /* msrd restarted: its totals began again */
		view->previous_joules[p] = now[p];
	}
	return true;
}

void serve_attribution_tick(struct serve_state *state)
{
	struct serve_attribution *view = state->attribution;
	double joules[ATTRIBUTION_MAX_PACKAGES];
	struct attribution_interval interval;
	unsigned packages;

	if (view == NULL || !package_energy(view, state, joules, &packages))
		return;
	if (attribution_step(view->engine, joules, packages, &interval) < 0)
		return; /* the engine kept its previous snapshot: the next tick covers this one */
	view->have_previous = true;
	view->package_joules += interval.package_joules;
	view->idle_joules += interval.idle_joules;
	view->other_joules += interval.other_joules;
	view->error_joules += interval.error_joules;
	sum_cgroups(view);
	if (order_top(view) < 0)
		view->top_count = 0;
}

void serve_write_joules_family(FILE *out, bool openmetrics, const char *name, const char *help)
{
	fprintf(out, "# HELP %s%s %s\n", name, openmetrics ? "" : "_total", help);
	fprintf(out, "# TYPE %s%s counter\n", name, openmetrics ? "" : "_total");
	if (openmetrics)
		fprintf(out, "# UNIT %s joules\n", name);
}

static void write_value(FILE *out, bool simulated, double joules)
{
	fprintf(out, "%s} %.15g\n", simulated ? ",simulated=\"1\"" : "", joules);
}

static void write_processes(FILE *out, const struct serve_attribution *view, bool openmetrics,
			    bool simulated)
{
	if (view->top_count == 0)
		return;
	serve_write_joules_family(out, openmetrics, "haecer_process_energy_joules",
		     "Package energy charged to a process by its CPU time (the top N by energy).");
	for (size_t i = 0; i < view->top_count; i++) {
		const struct attribution_process *process = view->rank.order[i];
		fprintf(out, "haecer_process_energy_joules_total{pid=\"%d\",comm=\"",
			(int)process->pid);
		serve_write_label_value(out, process->comm);
		fprintf(out, "\",uid=\"%u\",cgroup=\"", (unsigned)process->uid);
		serve_write_label_value(out, process->cgroup);
		fputc('"', out);
		write_value(out, simulated, process->joules_total);
	}
}

static void write_cgroups(FILE *out, const struct serve_attribution *view, bool openmetrics,
			  bool simulated)
{
	if (view->cgroup_count == 0)
		return;
	serve_write_joules_family(out, openmetrics, "haecer_cgroup_energy_joules",
		     "Package energy charged to a cgroup's processes, exited ones included.");
	for (size_t i = 0; i < view->cgroup_count; i++) {
		fputs("haecer_cgroup_energy_joules_total{cgroup=\"", out);
		serve_write_label_value(out, view->cgroups[i].path);
		fputc('"', out);
		write_value(out, simulated, view->cgroups[i].joules);
	}
}

static void write_rest(FILE *out, const struct serve_attribution *view, bool openmetrics,
		       bool simulated)
{
	serve_write_joules_family(out, openmetrics, "haecer_unattributed_energy_joules",
		     "Package energy charged to no process: idle CPUs, or other (kernel, "
		     "short-lived processes).");
	fputs("haecer_unattributed_energy_joules_total{to=\"idle\"", out);
	write_value(out, simulated, view->idle_joules);
	fputs("haecer_unattributed_energy_joules_total{to=\"other\"", out);
	write_value(out, simulated, view->other_joules);
	serve_write_joules_family(out, openmetrics, "haecer_attributed_package_energy_joules",
		     "Package energy the attribution has split since the exporter started: "
		     "cgroups + idle + other.");
	fputs("haecer_attributed_package_energy_joules_total{domain=\"energy-pkg\"", out);
	write_value(out, simulated, view->package_joules);
	serve_write_joules_family(out, openmetrics, "haecer_attribution_error_joules",
		     "The sum of the intervals' bounds on the process/other split.");
	fputs("haecer_attribution_error_joules_total{kind=\"bound\"", out);
	write_value(out, simulated, view->error_joules);
}

void serve_attribution_render(const struct serve_state *state, FILE *out, bool openmetrics)
{
	const struct serve_attribution *view = state->attribution;

	if (view == NULL || !view->have_previous)
		return;
	write_processes(out, view, openmetrics, state->simulated);
	write_cgroups(out, view, openmetrics, state->simulated);
	write_rest(out, view, openmetrics, state->simulated);
}
