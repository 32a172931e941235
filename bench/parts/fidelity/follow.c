/*
 * bench/parts/fidelity/follow.c — coverage under load-following power. No trace: the simulated
 * package's power follows what runs (this client by its CPU-time clock, msrd and every other
 * process by /proc/stat, which the simulator reads at the kernel's 10 ms ticks: coarser than a
 * real package, which follows them within microseconds). Conditions: a quiet host or one other
 * busy process (a forked spinner), a client that spins or sleeps in its regions. For every
 * result that states a +-: the share whose true error lies within it (coverage), median and p95
 * of |error| in %, the worst |error| / stated. Truth: haecer_sim_energy_at at the ends.
 *
 * The cost of measuring: cost.c (the same work measured and not, in alternating blocks).
 */
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/parts/fidelity/cost.h"
#include "bench/parts/fidelity/follow.h"
#include "harness/sim_control.h"
#include "harness/text_file.h"
#include "common/clock.h"
#include "hw/msr.h"

#define FOLLOW_REGIONS 30       /* per condition and length */
#define FOLLOW_TRIES (FOLLOW_REGIONS * 6)
#define FOLLOW_READS 30         /* pairs of reads per condition */
#define READ_SPAN_NS 10000000ull

enum follow_condition { QUIET_SPIN, QUIET_SLEEP, BUSY_SPIN, BUSY_SLEEP, FOLLOW_CONDITIONS };

static const char *const follow_names[FOLLOW_CONDITIONS] = {
	"quiet, spinning", "quiet, sleeping", "busy other, spinning", "busy other, sleeping" };
static const uint64_t follow_ns[] = { 100000, 300000, 1000000, 2500000, 10000000 };
#define FOLLOW_LENGTHS (sizeof(follow_ns) / sizeof(follow_ns[0]))

/* Results that state a +-: their errors (J, %) and what they stated. */
struct coverage {
	size_t count, covered;
	double error_pct[FOLLOW_REGIONS * 2], worst_ratio;
};

static struct haecer_conn *truth_conn;
static pid_t msrd_pid;

static double truth_at(uint64_t ns)
{
	struct haecer_sim_energy_at at;

	if (haecer_sim_energy_at(truth_conn, 0, RAPL_DOMAIN_PKG, ns, &at) < 0) {
		fprintf(stderr, "bench/fidelity: SIM_ENERGY_AT failed\n");
		exit(1);
	}
	return at.joules;
}

static void add(struct coverage *c, double error_j, double truth_j, double stated_j)
{
	double ratio = stated_j > 0.0 ? fabs(error_j) / stated_j : HUGE_VAL;

	c->error_pct[c->count++] = 100.0 * error_j / truth_j;
	c->covered += ratio <= 1.0;
	if (ratio > c->worst_ratio)
		c->worst_ratio = ratio;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The p-th percentile of |error %| (p = 50: the median). */
static double abs_pct(const struct coverage *c, double p)
{
	double sorted[FOLLOW_REGIONS * 2];

	if (c->count == 0)
		return NAN;
	for (size_t i = 0; i < c->count; i++)
		sorted[i] = fabs(c->error_pct[i]);
	qsort(sorted, c->count, sizeof(double), by_value);
	return sorted[(size_t)ceil(p / 100.0 * (double)c->count) - 1];
}

static double covered_pct(const struct coverage *c)
{
	return c->count ? 100.0 * (double)c->covered / (double)c->count : 0.0;
}

/* The work a region holds: a busy loop, or sleeping in the kernel, for `ns`. */
static void work(enum follow_condition condition, uint64_t ns)
{
	uint64_t until = clock_monotonic_raw_ns() + ns;

	if (condition == QUIET_SLEEP || condition == BUSY_SLEEP) {
		struct timespec pause = { .tv_sec = (time_t)(ns / 1000000000ull),
					  .tv_nsec = (long)(ns % 1000000000ull) };

		nanosleep(&pause, NULL);
		return;
	}
	while (clock_monotonic_raw_ns() < until)
		;
}

/* Why a region missed: its error split into the lead (start update to startEnergyRead's
 * return), the wait (the end call to the closing update) and the rest (the register between the
 * two estimated update times against the truth there: the update times' error), each the
 * counted energy minus the truth over the same stretch. */
static void explain(enum follow_condition condition, uint64_t ns,
		    const struct haecer_energy_result *r, uint64_t start_ns, uint64_t end_ns,
		    double truth)
{
	double tsc_hz = (double)r->region_ticks / r->seconds;
	double tick_ns = 1e9 / tsc_hz, per = r->joules_per_tick;
	uint64_t update0 = start_ns - (uint64_t)((double)r->lead_ticks * tick_ns);
	uint64_t update1 = end_ns + (uint64_t)((double)r->wait_ticks * tick_ns) -
			   (uint64_t)((double)r->tail_ticks * tick_ns);
	double lead_err = (double)r->lead_ticks * per - (truth_at(start_ns) - truth_at(update0));
	double wait_err = ((double)r->wait_ticks - (double)r->tail_ticks) * per -
			  (truth_at(update1) - truth_at(end_ns));
	double span_err = r->raw_joules - (truth_at(update1) - truth_at(update0));

	fprintf(stderr, "follow %s %llu us: err %+.1f uJ stated %.1f truth %.1f | lead %llu us "
		"err %+.1f | wait %llu us err %+.1f | span err %+.1f | W before %.2f after %.2f "
		"span %.2f used %.2f reasons %#x\n", follow_names[condition],
		(unsigned long long)(ns / 1000), (r->joules - truth) * 1e6,
		r->uncertainty_joules * 1e6, truth * 1e6,
		(unsigned long long)(r->lead_ticks * tick_ns / 1000), -lead_err * 1e6,
		(unsigned long long)(r->wait_ticks * tick_ns / 1000), -wait_err * 1e6,
		span_err * 1e6, r->before_joules_per_tick * tsc_hz,
		r->after_joules_per_tick * tsc_hz, r->span_joules_per_tick * tsc_hz, per * tsc_hz,
		r->doubt_reasons);
}

/* One region: its error against the truth from startEnergyRead's return to the end call. Its
 * true energy is added to *on_j (SMI-disturbed regions are skipped, as callers are told to). */
static void follow_region(struct haecer_counter *pkg, enum follow_condition condition,
			  uint64_t ns, struct coverage *c, double *on_j)
{
	struct haecer_energy_region region;
	struct haecer_energy_result result;
	uint64_t start_ns, end_ns;
	double truth;

	if (haecer_energy_start(pkg, &region) < 0)
		return;
	start_ns = clock_monotonic_raw_ns();
	work(condition, ns);
	end_ns = clock_monotonic_raw_ns();
	if (haecer_energy_end(pkg, &region, &result) < 0 ||
	    (result.smi_count_exact && result.smi_count > 0))
		return;
	truth = truth_at(end_ns) - truth_at(start_ns);
	*on_j += truth / (double)(end_ns - start_ns);
	add(c, result.joules - truth, truth, result.uncertainty_joules);
	if (getenv("FIDELITY_VERBOSE") &&
	    (fabs(result.joules - truth) > result.uncertainty_joules ||
	     100.0 * fabs(result.joules - truth) > atof(getenv("FIDELITY_VERBOSE")) * truth))
		explain(condition, ns, &result, start_ns, end_ns, truth);
}

static void work_of(int condition, uint64_t ns)
{
	work((enum follow_condition)condition, ns);
}

/* Pairs of reads READ_SPAN_NS apart with the condition's work between: the register's
 * difference against update_joules (the +- the API states for a difference), the estimates'
 * against the sum of their two stated +-. */
static void follow_reads(struct haecer_counter *pkg, enum follow_condition condition,
			 struct coverage *reads, struct coverage *estimates)
{
	for (size_t i = 0; i < FOLLOW_READS; i++) {
		struct haecer_energy_reading first, last;
		uint64_t a0, a1, b0, b1;
		double truth;

		a0 = clock_monotonic_raw_ns();
		if (haecer_counter_read_energy(pkg, &first) < 0)
			continue;
		a1 = clock_monotonic_raw_ns();
		work(condition, READ_SPAN_NS);
		b0 = clock_monotonic_raw_ns();
		if (haecer_counter_read_energy(pkg, &last) < 0)
			continue;
		b1 = clock_monotonic_raw_ns();
		/* The register was read somewhere inside each call: the truth at the calls'
		 * middles, the stated bound widened by half of each call's true energy (the API
		 * cannot place its read better than its round trip). */
		truth = truth_at(b0 + (b1 - b0) / 2) - truth_at(a0 + (a1 - a0) / 2);
		add(reads, last.joules - first.joules - truth, truth,
		    last.update_joules + (truth_at(a1) - truth_at(a0)) / 2.0 +
			    (truth_at(b1) - truth_at(b0)) / 2.0);
		truth = truth_at(b1) - truth_at(a1);
		add(estimates, last.estimate_joules - first.estimate_joules - truth, truth,
		    first.estimate_uncertainty_joules + last.estimate_uncertainty_joules);
	}
}

/* ---- region markers and haecer-stat's totals: differences of two plain readings ---- */

#define PLAIN_CALLS 6           /* per length and kind */

/* One result of a difference of two reads: each read lay somewhere in its call [a0, a1] and
 * [b0, b1]; the truth between the calls' middles, the stated +- widened by half of each call's
 * true energy (as follow_reads: no API places its read better than its round trip). */
static void add_plain(struct coverage *c, double joules, double stated, uint64_t a0, uint64_t a1,
		      uint64_t b0, uint64_t b1)
{
	double truth = truth_at(b0 + (b1 - b0) / 2) - truth_at(a0 + (a1 - a0) / 2);

	add(c, joules - truth, truth,
	    stated + (truth_at(a1) - truth_at(a0)) / 2.0 + (truth_at(b1) - truth_at(b0)) / 2.0);
}

/* haecer-stat's reading: one set read of the counter (a round trip), marked. */
static int stat_read(struct haecer_counter *pkg, uint64_t *a0, uint64_t *a1,
		     struct haecer_energy_mark *mark)
{
	uint64_t value;
	int error;

	*a0 = clock_monotonic_raw_ns();
	error = haecer_counter_read_many(&pkg, 1, &value, 0);
	*a1 = clock_monotonic_raw_ns();
	return error < 0 ? error : haecer_energy_mark(pkg, value, *a0, *a1, mark);
}

static void follow_stat(struct haecer_counter *pkg, enum follow_condition condition,
			struct coverage *c)
{
	for (size_t l = 0; l < FOLLOW_LENGTHS; l++) {
		for (size_t i = 0; i < PLAIN_CALLS; i++) {
			struct haecer_energy_mark from, to;
			struct haecer_energy_span span;
			uint64_t a0, a1, b0, b1;

			if (stat_read(pkg, &a0, &a1, &from) < 0)
				continue;
			work(condition, follow_ns[l]);
			if (stat_read(pkg, &b0, &b1, &to) < 0 ||
			    haecer_energy_span(pkg, &from, &to, &span) < 0)
				continue;
			add_plain(c, span.joules, span.uncertainty_joules, a0, a1, b0, b1);
		}
	}
}

/* Field `index` (0: path) of the markers' CSV row of region `name`; NAN when absent. */
static double csv_value(const char *text, const char *name, int index)
{
	char key[64];
	const char *row;

	snprintf(key, sizeof(key), "\n\"%s\",\"%s\",", name, name);
	row = strstr(text, key);
	if (row == NULL || index < 0)
		return NAN;
	row++;
	for (int i = 0; i < index; i++) {
		bool quoted = false;

		for (; *row != '\0' && (quoted || *row != ','); row++)
			if (*row == '"')
				quoted = !quoted;
		if (*row != ',')
			return NAN;
		row++;
	}
	return strtod(row, NULL);
}

static int csv_column(const char *header, const char *name)
{
	int index = 0;

	for (const char *at = header; *at != '\0' && *at != '\r'; index++) {
		size_t length = strcspn(at, ",\r\n");

		if (length == strlen(name) && strncmp(at, name, length) == 0)
			return index;
		at += length + (at[length] == ',');
	}
	return -1;
}

/* Region markers (the default context, as the bench's counter), each call its own region, read
 * back from the report's CSV: pkg-wide energy and its stated +-. */
static void follow_markers(enum follow_condition condition, struct coverage *c)
{
	uint64_t times[FOLLOW_LENGTHS][PLAIN_CALLS][4];
	char path[128], csv[160], name[32], *text;
	int value, stated;

	snprintf(path, sizeof(path), "/tmp/haecer-fidelity-markers-%d.txt", (int)getpid());
	snprintf(csv, sizeof(csv), "%s.csv", path);
	for (size_t l = 0; l < FOLLOW_LENGTHS; l++) {
		for (size_t i = 0; i < PLAIN_CALLS; i++) {
			uint64_t *t = times[l][i];

			snprintf(name, sizeof(name), "l%zu.%zu", l, i);
			t[0] = clock_monotonic_raw_ns();
			haecer_region_begin(name);
			t[1] = clock_monotonic_raw_ns();
			work(condition, follow_ns[l]);
			t[2] = clock_monotonic_raw_ns();
			haecer_region_end(name);
			t[3] = clock_monotonic_raw_ns();
		}
	}
	text = haecer_region_report(path) == 0 ? harness_read_text(csv, 1u << 22) : NULL;
	value = text ? csv_column(text, "pkg-wide_nJ") : -1;
	stated = text ? csv_column(text, "pkg-wide_uncertainty_nJ") : -1;
	for (size_t l = 0; text != NULL && l < FOLLOW_LENGTHS; l++) {
		for (size_t i = 0; i < PLAIN_CALLS; i++) {
			const uint64_t *t = times[l][i];
			double joules, doubt;

			snprintf(name, sizeof(name), "l%zu.%zu", l, i);
			joules = csv_value(text, name, value) / 1e9;
			doubt = csv_value(text, name, stated) / 1e9;
			if (!isnan(joules) && !isnan(doubt))
				add_plain(c, joules, doubt, t[0], t[1], t[2], t[3]);
		}
	}
	free(text);
	haecer_region_reset();
	for (const char *suffix = ""; suffix != NULL;
	     suffix = *suffix == '\0' ? ".csv" : strcmp(suffix, ".csv") == 0 ? ".json"
					: strcmp(suffix, ".json") == 0 ? ".callgrind" : NULL) {
		char file[192];

		snprintf(file, sizeof(file), "%s%s", path, suffix);
		unlink(file);
	}
}

static pid_t start_spinner(void)
{
	pid_t pid;

	fflush(stdout); /* the child must not hold a copy of what is buffered */
	pid = fork();

	if (pid == 0) {
		for (;;)
			;
	}
	return pid;
}

static void stop_spinner(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

static double min_or(double current, double value)
{
	return value < current ? value : current;
}

/* FIDELITY_POWER_TRACE=1: instead of the conditions, the simulated package's power at 100 us
 * steps through 60 ms of 300 us spinning regions, each step marked where a region started (S),
 * its work ended (E) and its end returned (e): what the regions measure, to see whether the
 * simulator's power follows the load or something else (it swung 11-35 W with the tick while
 * this loop's load never changed, until the simulator read clients' task clocks). */
#define TRACE_NS 60000000ull
#define TRACE_STEP_NS 100000ull
#define TRACE_MARKS 3000

static void trace_power(struct haecer_counter *pkg)
{
	static uint64_t marks[TRACE_MARKS];
	uint64_t from = clock_monotonic_raw_ns(), to;
	size_t count = 0, next = 0;
	double previous;

	while (clock_monotonic_raw_ns() < from + TRACE_NS && count + 3 <= TRACE_MARKS) {
		struct haecer_energy_region region;
		struct haecer_energy_result result;

		if (haecer_energy_start(pkg, &region) < 0)
			return;
		marks[count++] = clock_monotonic_raw_ns();
		work(QUIET_SPIN, 300000);
		marks[count++] = clock_monotonic_raw_ns();
		if (haecer_energy_end(pkg, &region, &result) < 0)
			return;
		marks[count++] = clock_monotonic_raw_ns();
	}
	to = clock_monotonic_raw_ns();
	previous = truth_at(from);
	for (uint64_t t = from + TRACE_STEP_NS; t < to; t += TRACE_STEP_NS) {
		double now = truth_at(t);
		char mark = ' ';

		for (; next < count && marks[next] <= t; next++)
			mark = "SEe"[next % 3];
		printf("power %8.1f us %6.2f W %c\n", (double)(t - from) / 1e3,
		       (now - previous) * 1e9 / (double)TRACE_STEP_NS, mark);
		previous = now;
	}
}

static void follow_condition(struct haecer_counter *pkg, enum follow_condition c,
			     struct follow_keys *keys)
{
	static struct coverage cells[FOLLOW_LENGTHS], reads, estimates, markers, stat;
	struct fidelity_cost cost;
	double on = 0.0;
	size_t regions = 0;

	memset(cells, 0, sizeof(cells));
	memset(&reads, 0, sizeof(reads));
	memset(&estimates, 0, sizeof(estimates));
	memset(&markers, 0, sizeof(markers));
	memset(&stat, 0, sizeof(stat));
	/* Until FOLLOW_REGIONS regions no SMI hit (the rough Sandy Bridge has one every 16 ms:
	 * most 10 ms regions with their waits see one), at most FOLLOW_TRIES rounds. */
	for (size_t i = 0; i < FOLLOW_TRIES; i++) {
		for (size_t l = 0; l < FOLLOW_LENGTHS; l++) {
			if (cells[l].count < FOLLOW_REGIONS)
				follow_region(pkg, c, follow_ns[l], &cells[l], &on);
		}
	}
	follow_reads(pkg, c, &reads, &estimates);
	follow_markers(c, &markers);
	follow_stat(pkg, c, &stat);
	for (size_t l = 0; l < FOLLOW_LENGTHS; l++)
		regions += cells[l].count;
	on /= (double)(regions ? regions : 1);
	cost = fidelity_cost(truth_conn, pkg, msrd_pid, work_of, (int)c, follow_ns,
			     FOLLOW_LENGTHS);
	for (size_t l = 0; l < FOLLOW_LENGTHS; l++) {
		const struct coverage *cell = &cells[l];

		printf("follow %-22s region %5.0f us %3zu  coverage %5.1f %%  median |%%| %8.2f  "
		       "p95 |%%| %8.2f  worst |err|/stated %7.2f\n", follow_names[c],
		       (double)follow_ns[l] / 1000.0, cell->count, covered_pct(cell),
		       abs_pct(cell, 50), abs_pct(cell, 95), cell->worst_ratio);
		/* A cell every region of which an SMI hit (10 ms regions on a loaded host) has
		 * no coverage to take the minimum of: its row says 0 regions. */
		if (cell->count > 0)
			keys->region_coverage_pct =
				min_or(keys->region_coverage_pct, covered_pct(cell));
		if (cell->worst_ratio > keys->worst_err_over_stated)
			keys->worst_err_over_stated = cell->worst_ratio;
		if (c == QUIET_SPIN && follow_ns[l] == 300000)
			keys->region300us_p95_pct = abs_pct(cell, 95);
		if (c == QUIET_SPIN && follow_ns[l] == 1000000)
			keys->region1ms_p95_pct = abs_pct(cell, 95);
	}
	printf("follow %-22s read 10 ms diff  %3zu  coverage %5.1f %%  p95 |%%| %6.2f  worst %.2f"
	       " | estimate diff coverage %5.1f %%  p95 |%%| %6.2f  worst %.2f\n", follow_names[c],
	       reads.count, covered_pct(&reads), abs_pct(&reads, 95), reads.worst_ratio,
	       covered_pct(&estimates), abs_pct(&estimates, 95), estimates.worst_ratio);
	printf("follow %-22s regions %.3f W; measuring added %.2f %% of the regions' true energy "
	       "(msrd's CPU in them %.2f %% of their time, %.2f %% unmeasured, x %.2f W a busy "
	       "CPU); the results said %.2f %% (msrd CPU for the register %.2f %%); cross-check, "
	       "paired blocks on/off: %.3f / %.3f W, %+.2f %% (+-%.2f), msrd's part %+.2f %%\n",
	       follow_names[c], on * 1e9, cost.added_pct, cost.msrd_cpu_pct,
	       cost.msrd_idle_cpu_pct, cost.busy_cpu_watts,
	       cost.reported_pct, cost.reported_cpu_pct, cost.on_watts, cost.off_watts,
	       cost.paired_pct, cost.spread_pct, cost.msrd_added_pct);
	printf("follow %-22s markers (100 us-10 ms) %3zu  coverage %5.1f %%  p95 |%%| %6.2f  worst "
	       "%.2f | haecer-stat totals coverage %5.1f %% (%zu)  p95 |%%| %6.2f  worst %.2f\n",
	       follow_names[c], markers.count, covered_pct(&markers), abs_pct(&markers, 95),
	       markers.worst_ratio, covered_pct(&stat), stat.count, abs_pct(&stat, 95),
	       stat.worst_ratio);
	/* Markers and haecer-stat's totals are differences of two plain readings, as reads are:
	 * the read coverage key is the minimum over the three (and the worst ratio over all). */
	keys->read_coverage_pct = min_or(keys->read_coverage_pct, covered_pct(&reads));
	if (markers.count > 0)
		keys->read_coverage_pct = min_or(keys->read_coverage_pct, covered_pct(&markers));
	if (stat.count > 0)
		keys->read_coverage_pct = min_or(keys->read_coverage_pct, covered_pct(&stat));
	keys->worst_err_over_stated = fmax(keys->worst_err_over_stated,
					   fmax(fmax(reads.worst_ratio, estimates.worst_ratio),
						fmax(markers.worst_ratio, stat.worst_ratio)));
	keys->estimate_coverage_pct = min_or(keys->estimate_coverage_pct, covered_pct(&estimates));
	if (cost.added_pct > keys->measurement_added_pct)
		keys->measurement_added_pct = cost.added_pct;
}

void fidelity_follow(struct haecer_conn *conn, struct haecer_counter *pkg, pid_t msrd,
		     struct follow_keys *keys)
{
	truth_conn = conn;
	msrd_pid = msrd;
	*keys = (struct follow_keys){ .region_coverage_pct = 100.0,
				      .estimate_coverage_pct = 100.0,
				      .read_coverage_pct = 100.0,
				      .measurement_added_pct = -HUGE_VAL };
	if (haecer_sim_power_trace(conn, "") < 0) {
		fprintf(stderr, "bench/fidelity: cannot give the power back to the load\n");
		exit(1);
	}
	if (getenv("FIDELITY_POWER_TRACE")) {
		trace_power(pkg);
		return;
	}
	for (int c = 0; c < FOLLOW_CONDITIONS; c++) {
		pid_t spinner = c == BUSY_SPIN || c == BUSY_SLEEP ? start_spinner() : 0;

		follow_condition(pkg, (enum follow_condition)c, keys);
		stop_spinner(spinner);
	}
}
