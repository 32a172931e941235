/*
 * bench/parts/fidelity/cost.c — what measuring added to the regions (issue 23, item 3).
 *
 * The figure (added_pct, bench/fidelity's measurement_added_pct): msrd's whole CPU time over the
 * measured regions' spans (a perf task clock of its main thread, brought up to date when read,
 * read just outside each span), at the power the simulator's model adds for a busy CPU (the results' own
 * measurement_joules per measurement_cpu_ns: msrd charges the model exactly), over the regions'
 * true energy, less msrd's CPU over the same work unmeasured (the unmeasured blocks below, at
 * the same share of the time: the simulator's own load following runs in msrd, and what
 * msrd does for nobody is no cost of measuring). The simulator follows msrd by its CPU-time
 * clock, so that is the energy msrd's work for the measurement put into the package during
 * the regions, up to the simulator's 1 ms follow sample; it covers every kind of msrd work
 * (windows, page samples, round trips), not only what the results count. Both CPU times are
 * the kernel's counts, not noisy powers: the figure is stable between runs (with schedstat it
 * scattered 0.8-1.75 % over seven runs of one tree, 0.6-0.8 % with the task clock).
 *
 * Beside it, the comparison this bench made first (paired_pct), printed as a cross-check: the
 * same work (every region length, COST_SETS times) in pairs of blocks: measured (each
 * region between haecer_energy_start and haecer_energy_end: msrd's windows run around its
 * edges, its page sampler runs), then unmeasured (the same work alone, after the lease of the
 * regions' asks has lapsed: no windows; the page, held by the connection, is still sampled,
 * so its 1 kHz samples, about 2.5 % of a CPU, are in neither figure's difference). The simulator's truth over each region's
 * own span (haecer_sim_energy_at at its ends) in both: the difference of the mean powers, in %
 * of the measured one, is the energy the measurement added to the regions. A third block spins
 * as long as the library's own polls took around each region's work, without msrd measuring:
 * the measured block against it is msrd's part (windows, page samples) alone; the rest is the
 * client's own polling that the simulator's 1 ms follow sample of the client's CPU clock
 * spreads into the region next to it (a real package follows within microseconds: on silicon
 * that polling lands outside the region). Pairs alternate so
 * that a loaded host's drift weighs on both alike; the median of the pairs is the figure and
 * half their range its noise. Beside it, what the results themselves said
 * (measurement_joules: the simulator's model's energy of msrd's CPU for the register during
 * each region) over the regions' truth.
 *
 * What the simulator can show of it: msrd follows itself on the simulated CPU by its CPU-time
 * clock (server/energy_cost.c), so its windows' CPU lands in the simulated package within the
 * simulator's 1 ms follow sample of when it was spent; a real package follows within
 * microseconds, so a window just outside a short region is partly smeared into it here.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench/parts/fidelity/cost.h"
#include "common/clock.h"
#include "harness/process_figures.h"
#include "harness/sim_control.h"
#include "hw/msr.h"

/* msrd's CPU over the measured bodies is ~10 ms per 7 pairs: the figure scattered by +-0.3
 * between runs of one tree (quiet host, sleeping client: 0.39-1.44 % in six runs); 15 pairs
 * halve that variance (0.58-1.03 in eight) for ~10 s more of the bench. */
#define COST_PAIRS 15
#define COST_SETS 3
#define COST_MAX_LENGTHS 8
/* Past the lease (150 ms: regions renew msrd's windows for that long after their last
 * ENERGY_READ, server/energy_edges.c) and a few of the simulator's follow samples: the
 * unmeasured blocks run without windows (with 30 ms they ran inside the lease, windows on). */
#define COST_SETTLE_US 160000

struct block {
	double truth_j, ns, reported_j, cpu_ns;
	double msrd_cpu_ns;         /* msrd's whole CPU time over the regions' spans */
};

static pid_t msrd_pid;
/* msrd's main thread's task clock, -1 for none. /proc/PID/schedstat, read from here, adds a
 * running thread's time only when it is switched out or at the tick: the window msrd was
 * spinning in when a region's body began (its start's update: the body begins when the page
 * shows it) was counted in the body where it ended after the read, half a window per region. */
static int msrd_clock = -1;

int fidelity_cost_watch(pid_t msrd)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr), .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_TASK_CLOCK,
	};
	long fd = syscall(SYS_perf_event_open, &attr, msrd, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		return -errno;
	msrd_clock = (int)fd;
	return 0;
}

/* msrd's main thread's CPU time now, ns; -1 when unknown. */
static long long msrd_cpu_ns(void)
{
	uint64_t count;

	if (msrd_clock < 0)
		return harness_process_cpu_ns(msrd_pid);
	if (read(msrd_clock, &count, sizeof(count)) != (ssize_t)sizeof(count))
		return -1;
	return (long long)count;
}

/* How long a length's haecer_energy_start and haecer_energy_end took, last time (ns): the
 * library's own polling, which the polling-only blocks spin for without msrd measuring. */
struct phases {
	uint64_t start_ns, end_ns;
};

static void spin_ns(uint64_t ns)
{
	uint64_t until = clock_monotonic_raw_ns() + ns;

	while (clock_monotonic_raw_ns() < until)
		;
}

static double truth_at(struct haecer_conn *truth, uint64_t ns)
{
	struct haecer_sim_energy_at at;

	if (haecer_sim_energy_at(truth, 0, RAPL_DOMAIN_PKG, ns, &at) < 0) {
		fprintf(stderr, "bench/fidelity: SIM_ENERGY_AT failed\n");
		exit(1);
	}
	return at.joules;
}

static void add_span(struct haecer_conn *truth, struct block *block, uint64_t from, uint64_t to)
{
	block->truth_j += truth_at(truth, to) - truth_at(truth, from);
	block->ns += (double)(to - from);
}

static void measured(struct haecer_conn *truth, struct haecer_counter *pkg,
		     fidelity_work_fn work, int condition, uint64_t ns, struct block *block,
		     struct phases *phases)
{
	struct haecer_energy_region region;
	struct haecer_energy_result result;
	uint64_t called = clock_monotonic_raw_ns(), from, to;
	long long msrd_from, msrd_to;

	if (haecer_energy_start(pkg, &region) < 0)
		return;
	/* msrd's CPU over the span: read just outside it (the read is this process's CPU). */
	msrd_from = msrd_cpu_ns();
	from = clock_monotonic_raw_ns();
	work(condition, ns);
	to = clock_monotonic_raw_ns();
	msrd_to = msrd_cpu_ns();
	if (haecer_energy_end(pkg, &region, &result) < 0)
		return;
	if (msrd_from >= 0 && msrd_to >= msrd_from)
		block->msrd_cpu_ns += (double)(msrd_to - msrd_from);
	phases->start_ns = from - called;
	phases->end_ns = clock_monotonic_raw_ns() - to;
	add_span(truth, block, from, to);
	block->reported_j += result.measurement_joules;
	block->cpu_ns += (double)result.measurement_cpu_ns;
}

/* The work alone; with `phases`, between spins as long as the library's polls took (what the
 * client itself does to measure, without msrd's windows). */
static void unmeasured(struct haecer_conn *truth, fidelity_work_fn work, int condition,
		       uint64_t ns, const struct phases *phases, struct block *block)
{
	uint64_t from, to;
	long long msrd_from, msrd_to;

	if (phases != NULL)
		spin_ns(phases->start_ns);
	msrd_from = msrd_cpu_ns();
	from = clock_monotonic_raw_ns();
	work(condition, ns);
	to = clock_monotonic_raw_ns();
	msrd_to = msrd_cpu_ns();
	if (phases != NULL)
		spin_ns(phases->end_ns);
	add_span(truth, block, from, to);
	if (msrd_from >= 0 && msrd_to >= msrd_from)
		block->msrd_cpu_ns += (double)(msrd_to - msrd_from);
}

static void add_block(struct block *sum, const struct block *block)
{
	sum->truth_j += block->truth_j;
	sum->ns += block->ns;
	sum->reported_j += block->reported_j;
	sum->cpu_ns += block->cpu_ns;
	sum->msrd_cpu_ns += block->msrd_cpu_ns;
}

static double added_pct(const struct block *on, const struct block *off)
{
	return 100.0 * (on->truth_j / on->ns - off->truth_j / off->ns) / (on->truth_j / on->ns);
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median_of(double *values, size_t count, double *spread)
{
	qsort(values, count, sizeof(double), by_value);
	*spread = (values[count - 1] - values[0]) / 2.0;
	return values[count / 2];
}

struct fidelity_cost fidelity_cost(struct haecer_conn *truth, struct haecer_counter *pkg,
				   pid_t msrd, fidelity_work_fn work, int condition,
				   const uint64_t *lengths, size_t length_count)
{
	struct block on_all = { 0 }, off_all = { 0 };
	struct fidelity_cost cost = { 0 };
	double pairs[COST_PAIRS], msrd_pairs[COST_PAIRS], unused;
	struct phases phases[COST_MAX_LENGTHS] = { { 0 } };

	msrd_pid = msrd;
	if (length_count > COST_MAX_LENGTHS)
		length_count = COST_MAX_LENGTHS;
	for (size_t p = 0; p < COST_PAIRS; p++) {
		struct block on = { 0 }, off = { 0 }, polling = { 0 };

		for (size_t s = 0; s < COST_SETS; s++)
			for (size_t l = 0; l < length_count; l++)
				measured(truth, pkg, work, condition, lengths[l], &on, &phases[l]);
		usleep(COST_SETTLE_US);
		for (size_t s = 0; s < COST_SETS; s++)
			for (size_t l = 0; l < length_count; l++)
				unmeasured(truth, work, condition, lengths[l], NULL, &off);
		for (size_t s = 0; s < COST_SETS; s++)
			for (size_t l = 0; l < length_count; l++)
				unmeasured(truth, work, condition, lengths[l], &phases[l],
					   &polling);
		pairs[p] = added_pct(&on, &off);
		msrd_pairs[p] = added_pct(&on, &polling);
		add_block(&on_all, &on);
		add_block(&off_all, &off);
	}
	cost.on_watts = on_all.truth_j / on_all.ns * 1e9;
	cost.off_watts = off_all.truth_j / off_all.ns * 1e9;
	cost.paired_pct = median_of(pairs, COST_PAIRS, &cost.spread_pct);
	/* The figure: msrd's whole CPU over the regions at what the simulator's model adds for
	 * a busy CPU (the results' measurement_joules per measurement_cpu_ns: msrd's own charge of
	 * the model, exact), which is what the simulator adds to the package for it (it follows
	 * msrd by its CPU-time clock). */
	cost.busy_cpu_watts = on_all.cpu_ns > 0 ? on_all.reported_j / on_all.cpu_ns * 1e9 : NAN;
	cost.msrd_cpu_pct = 100.0 * on_all.msrd_cpu_ns / on_all.ns;
	cost.msrd_idle_cpu_pct = 100.0 * off_all.msrd_cpu_ns / off_all.ns;
	/* Less what msrd spends when nobody measures (the simulator's own load following runs in
	 * msrd: on real hardware there is none of it), at the same share of the time. */
	cost.added_pct = (cost.msrd_cpu_pct - cost.msrd_idle_cpu_pct) * on_all.ns * 1e-9 *
			 cost.busy_cpu_watts / on_all.truth_j;
	cost.msrd_added_pct = median_of(msrd_pairs, COST_PAIRS, &unused);
	cost.reported_pct = 100.0 * on_all.reported_j / on_all.truth_j;
	cost.reported_cpu_pct = 100.0 * on_all.cpu_ns / on_all.ns;
	return cost;
}
