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
 * A cgroup's figure is the engine's cgroup accounting (the figures `top --by cgroup` shows): each
 * cgroup v2 cgroup's own cpu.stat usage (less its tracked children's) charged against the node's
 * energy, so a process that started and exited between two ticks counts in its cgroup, which no
 * process scan saw. A series is a path cut to --cgroup-depth D levels and adds up the engine's
 * cgroups at or below it: charges of own usage do not overlap, so nothing is counted twice.
 * cgroups + idle = the split package energy within kind="cgroup_bound" of the error series.
 * Without cgroup v2 (no cpu.stat usage) there is no cgroup series.
 *
 * Counters never go back: a series is the final totals of its cgroups that were removed (the
 * engine lists a removed cgroup once, ended, then drops it; the series keeps that total as
 * "retired") plus its live cgroups' totals, so a container that goes keeps its share in the
 * series and one made again at the same path adds to it. A series none of whose cgroups is live
 * any more keeps its last value for `retention` seconds (--cgroup-retention, 300 by default: a
 * few scrapes get the final value) and is then dropped; a counter that vanishes is an ended
 * series to Prometheus, whereas folding it into the parent's would make the parent's rate jump.
 * Cardinality is bounded: N process series (a process that leaves the top N loses its series)
 * and one series per cut path live or ended within the retention, at most
 * SERVE_ATTRIBUTION_MAX_CGROUPS; when a new path finds the table full, the series ended longest
 * ago goes before its retention is up, and only when every series is live does the new path
 * count in "/" (the table's first entry, never dropped). The exporter writes the highest value
 * it has written.
 */
#include "tools/mon/serve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "attribution/attribution.h"

#define SERVE_ATTRIBUTION_MAX_CGROUPS 1024u

struct exported_cgroup {
	char path[ATTRIBUTION_CGROUP_MAX];
	double joules;	 /* the highest value written: the counter never goes back */
	double retired;	 /* final totals of its cgroups the engine has dropped */
	double sum;	 /* scratch: this tick's sum */
	size_t members;	 /* engine cgroups in it now */
	double ended_at; /* mon_now() when its last member went */
	bool used;	 /* false: a free place */
};

/* An engine cgroup (known by its id, which the engine never reuses) and its series. */
struct cgroup_member {
	uint64_t id;
	size_t series;
	double total; /* its joules_total as of the last tick */
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
	double cgroup_error_joules;
	bool cgroup_accounting;	   /* some interval read a cgroup's cpu.stat */
	struct mon_rank rank;      /* visible processes by joules so far */
	size_t top_count;
	size_t cgroup_count;
	double retention; /* seconds a series with no live cgroup stays */
	struct exported_cgroup cgroups[SERVE_ATTRIBUTION_MAX_CGROUPS];
	struct cgroup_member *members; /* the engine's cgroups, in its (ascending id) order */
	size_t member_count;
	size_t member_size;
};

int serve_attribution_open(struct serve_state *state, unsigned top, unsigned depth,
			   double retention)
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
	view->retention = retention;
	view->cgroup_count = 1; /* "/": where the cgroups over the bound go */
	view->cgroups[0].used = true;
	snprintf(view->cgroups[0].path, sizeof(view->cgroups[0].path), "/");
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
	free(view->members);
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

/* A place for a new series: a free one, else that of the series ended longest ago (before its
 * retention is up), else 0 ("/"). */
static size_t free_series(struct serve_attribution *view)
{
	size_t oldest = 0;

	for (size_t i = 1; i < view->cgroup_count; i++) {
		const struct exported_cgroup *series = &view->cgroups[i];
		if (!series->used)
			return i;
		if (series->members == 0 &&
		    (oldest == 0 || series->ended_at < view->cgroups[oldest].ended_at))
			oldest = i;
	}
	if (view->cgroup_count < SERVE_ATTRIBUTION_MAX_CGROUPS)
		return view->cgroup_count++;
	return oldest;
}

/* The index of the series of path cut to the depth, added when new ("/"'s when full). */
static size_t series_of(struct serve_attribution *view, const char *path)
{
	char cut[ATTRIBUTION_CGROUP_MAX];

	cut_path(path, view->depth, cut, sizeof(cut));
	for (size_t i = 0; i < view->cgroup_count; i++)
		if (view->cgroups[i].used && strcmp(view->cgroups[i].path, cut) == 0)
			return i;
	size_t index = free_series(view);
	if (index == 0)
		return 0;
	struct exported_cgroup *series = &view->cgroups[index];
	memset(series, 0, sizeof(*series));
	snprintf(series->path, sizeof(series->path), "%s", cut);
	series->used = true;
	return index;
}

/* A cgroup the engine dropped (removed, its final total listed): its total stays in its
 * series. */
static void retire(struct serve_attribution *view, const struct cgroup_member *member, double now)
{
	struct exported_cgroup *series = &view->cgroups[member->series];

	series->retired += member->total;
	if (--series->members == 0)
		series->ended_at = now;
}

/* members to the engine's cgroups: both are in ascending id order and the engine's new ids are
 * above all it listed before, so one pass in place retires the dropped ones (before any new one
 * needs a place) and adds the new. 0 or -ENOMEM. */
static int follow_cgroups(struct serve_attribution *view, const struct attribution_cgroup *cgroups,
			  size_t count, double now)
{
	size_t kept = 0, old = 0, old_count = view->member_count;

	if (count > view->member_size) {
		struct cgroup_member *grown = reallocarray(view->members, count * 2, sizeof(*grown));
		if (grown == NULL)
			return -ENOMEM;
		view->members = grown;
		view->member_size = count * 2;
	}
	for (size_t i = 0; i < count; i++) {
		while (old < old_count && view->members[old].id < cgroups[i].id)
			retire(view, &view->members[old++], now);
		struct cgroup_member *member = &view->members[kept++];
		if (old < old_count && view->members[old].id == cgroups[i].id) {
			*member = view->members[old++];
		} else {
			member->id = cgroups[i].id;
			member->series = series_of(view, cgroups[i].path);
			view->cgroups[member->series].members++;
		}
		member->total = cgroups[i].joules_total;
	}
	while (old < old_count)
		retire(view, &view->members[old++], now);
	view->member_count = kept;
	return 0;
}

/* Each series: its retired totals and its live cgroups' totals; a series with none live past
 * the retention is dropped. */
static void sum_cgroups(struct serve_attribution *view)
{
	const struct attribution_cgroup *cgroups;
	size_t count = attribution_cgroups(view->engine, &cgroups);
	double now = mon_now();

	if (follow_cgroups(view, cgroups, count, now) < 0)
		return; /* the series keep their values; a cgroup dropped meanwhile keeps the total
			 * it had at the last tick */
	for (size_t i = 0; i < view->cgroup_count; i++)
		view->cgroups[i].sum = view->cgroups[i].retired;
	for (size_t i = 0; i < view->member_count; i++)
		view->cgroups[view->members[i].series].sum += view->members[i].total;
	for (size_t i = 0; i < view->cgroup_count; i++) {
		struct exported_cgroup *series = &view->cgroups[i];
		if (series->sum > series->joules)
			series->joules = series->sum;
		if (i > 0 && series->used && series->members == 0 &&
		    now - series->ended_at > view->retention)
			series->used = false;
	}
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
	view->cgroup_error_joules += interval.cgroup_error_joules;
	view->cgroup_accounting = view->cgroup_accounting || interval.cgroup_accounting;
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
	if (!view->cgroup_accounting)
		return;
	serve_write_joules_family(out, openmetrics, "haecer_cgroup_energy_joules",
		     "Node energy charged to a cgroup and those below it by their cgroup v2 CPU "
		     "usage, short-lived processes included.");
	for (size_t i = 0; i < view->cgroup_count; i++) {
		if (!view->cgroups[i].used)
			continue;
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
		     "processes + idle + other; cgroups + idle within the cgroup bound.");
	fputs("haecer_attributed_package_energy_joules_total{domain=\"energy-pkg\"", out);
	write_value(out, simulated, view->package_joules);
	serve_write_joules_family(out, openmetrics, "haecer_attribution_error_joules",
		     "The sum of the intervals' bounds: on the process/other split (bound), on "
		     "cgroups + idle against the package (cgroup_bound).");
	fputs("haecer_attribution_error_joules_total{kind=\"bound\"", out);
	write_value(out, simulated, view->error_joules);
	if (!view->cgroup_accounting)
		return;
	fputs("haecer_attribution_error_joules_total{kind=\"cgroup_bound\"", out);
	write_value(out, simulated, view->cgroup_error_joules);
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
