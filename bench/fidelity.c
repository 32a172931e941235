/*
 * bench/fidelity — how close the measurement methods come to the truth on the rough simulated
 * CPU: the real msrd (simulated Sandy Bridge in real time, rough, seed FIDELITY_SEED), the real
 * library, the simulator's exact energy at the two ends of every measurement (SIM_ENERGY_AT) as
 * the truth.
 *
 *   readCounter over 10 ms, 100 ms and 1 s, started at a random phase of the 1 ms update: mean,
 *   p95 and max of the error against the truth between the middles of the two reads' round
 *   trips (the estimates': between the calls' ends, the moments they are for), in % (and the
 *   p95 in J beside one update's energy, haecer_counter_read_energy's +-),
 *   in two rows: the register's totals (what readCounter returns) and haecer_counter_read_energy's
 *   estimates at the moment of the read (the last update's total + the power of its interval x
 *   the time since it, from the page's precise edges); the read10ms/read100ms keys are the
 *   estimate's;
 *
 *   startEnergyRead/endEnergyRead on regions of 100 us, 300 us, 1 ms and 2.5 ms (a busy loop) at
 *   a constant 30 W, and right after the package power stepped to 45 W (x1.5) or 15 W (x0.5):
 *   median and p95 of |error| against the truth from startEnergyRead's return to the
 *   endEnergyRead call. Regions an SMI hit (the result says so) are filtered, as the library
 *   tells callers to, and counted. Beside each: the seed's method as the library did it before
 *   (one calibration of the polling power at the first startEnergyRead, kept for the process
 *   life; no lead correction), computed from the same regions (raw energy, the detecting poll's
 *   wait, the calibration made at 30 W at the start) — the baseline of this run;
 *
 *   SMIs: counted by the regions vs begun in the same windows by the simulator — in real time
 *   (approximate: the windows are known only to a round trip) and, exactly, with a second msrd
 *   in virtual time on sandybridge (the key figures) and on zen3 (no MSR_SMI_COUNT: unknown).
 *
 * Power comes from a power trace on the package domain (the host's load does not reach it),
 * except in the load-following part.
 * The program runs on host CPU 0, msrd on CPU 1. The machine may be loaded by others: round
 * trips then grow and so do the short-region errors; the table shows the median round trip.
 *
 * FIDELITY_VERBOSE=PCT prints every region off by more than PCT % (its parts and stated +-).
 * In the load-following part it prints every region beyond its +- or off by more than PCT %,
 * its error split into lead, wait and update times. FIDELITY_FOLLOW_ONLY=1 runs only the
 * load-following part; with FIDELITY_POWER_TRACE=1 too, it prints the simulated power through a
 * loop of regions instead (bench/parts/fidelity/follow.c).
 *
 * Then the same under load-following power (no trace; bench/parts/fidelity/follow.c): coverage,
 * the share of results within their own stated +-, for regions, register differences and
 * estimates, in four conditions (quiet or busy host, spinning or sleeping client).
 *
 * Last line: read10ms_p95_pct=… read100ms_p95_pct=… short100us_med_pct=… short300us_p95_pct=…
 * step1ms_p95_pct=… smi_detected=N smi_true=N follow_region_coverage_pct=…
 * follow_estimate_coverage_pct=… follow_read_coverage_pct=… follow_region300us_p95_pct=…
 * follow_region1ms_p95_pct=… worst_err_over_stated=… measurement_added_pct=…
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "common/clock.h"
#include "haecer/perfmon.h"
#include "hw/msr.h"
#include "bench/lib/bench_stats.h"
#include "harness/msrd_harness.h"
#include "bench/parts/fidelity/cost.h"
#include "bench/parts/fidelity/follow.h"

#define FIDELITY_SEED "12"
#define TSC_HZ 2500000000.0     /* sandybridge */
#define BASE_WATTS 30.0
#define REGIONS 120             /* per region length and power condition */
#define MAX_SAMPLES 400

enum condition { CONSTANT, STEP_UP, STEP_DOWN, CONDITIONS };

static const char *const condition_names[CONDITIONS] = { "constant 30 W", "step x1.5",
							 "step x0.5" };
static const double condition_watts[CONDITIONS] = { BASE_WATTS, BASE_WATTS * 1.5,
						    BASE_WATTS * 0.5 };
static const uint64_t region_ns[] = { 100000, 300000, 1000000, 2500000 };
#define LENGTHS (sizeof(region_ns) / sizeof(region_ns[0]))

static struct msrd_server server;
static struct haecer_conn *conn;

static void die(const char *what, int error)
{
	fprintf(stderr, "bench/fidelity: %s: %s (%s)\n", what, haecer_strerror(error),
		haecer_error_detail());
	haecer_shutdown();
	msrd_kill(&server);
	exit(1);
}

static void check(int error, const char *what)
{
	if (error < 0)
		die(what, error);
}

static uint64_t ctx_tsc_hz(const struct haecer_context *ctx)
{
	return haecer_context_machine(ctx)->tsc_hz;
}

static void set_power(double watts)
{
	char trace[64];

	snprintf(trace, sizeof(trace), "pkg: 3600000 %.3f\n", watts);
	check(haecer_sim_power_trace(conn, trace), "power trace");
}

static double energy_at(uint64_t ns, uint64_t *smi)
{
	struct haecer_sim_energy_at at;

	check(haecer_sim_energy_at(conn, 0, RAPL_DOMAIN_PKG, ns, &at), "SIM_ENERGY_AT");
	if (smi)
		*smi = at.smi_count;
	return at.joules;
}

static void spin_until(uint64_t ns)
{
	while (clock_monotonic_raw_ns() < ns)
		;
}

static int compare_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The p-th percentile of |values| (sorted copy). */
static double abs_percentile(const double *values, size_t count, double p)
{
	double sorted[MAX_SAMPLES * 2];

	if (count == 0)
		return NAN;
	for (size_t i = 0; i < count; i++)
		sorted[i] = fabs(values[i]);
	qsort(sorted, count, sizeof(double), compare_double);
	return sorted[(size_t)ceil(p / 100.0 * (double)count) - 1];
}

static double median(const double *values, size_t count)
{
	double sorted[MAX_SAMPLES * 2];

	if (count == 0)
		return NAN;
	memcpy(sorted, values, count * sizeof(double));
	qsort(sorted, count, sizeof(double), compare_double);
	return count % 2 ? sorted[count / 2] : (sorted[count / 2 - 1] + sorted[count / 2]) / 2;
}

/* msrd's CPU time so far (/proc/PID/schedstat: ns on the CPU), 0 when unreadable. */
static uint64_t msrd_cpu_ns(void)
{
	char path[64];
	unsigned long long on_cpu = 0;
	FILE *file;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)server.pid);
	file = fopen(path, "r");
	if (file == NULL)
		return 0;
	if (fscanf(file, "%llu", &on_cpu) != 1)
		on_cpu = 0;
	fclose(file);
	return on_cpu;
}

/* msrd's share of one CPU over `seconds` while this process sleeps, holding what it holds; with
 * `renew`, a request on it every 50 ms (what keeps a precise holder's lease, EDGE_LEASE_NS). */
static double msrd_cpu_share(double seconds, struct haecer_conn *renew)
{
	uint64_t cpu0 = msrd_cpu_ns(), t0 = clock_monotonic_raw_ns();
	uint64_t until = t0 + (uint64_t)(seconds * 1e9);

	while (clock_monotonic_raw_ns() < until) {
		usleep(renew != NULL ? 50000 : (useconds_t)(seconds * 1e6));
		if (renew != NULL)
			check(haecer_energy_read(renew, 0, MSR_PKG_ENERGY_STATUS, NULL, NULL),
			      "renew");
	}
	return 100.0 * (double)(msrd_cpu_ns() - cpu0) / (double)(clock_monotonic_raw_ns() - t0);
}

/* What precise edges cost msrd: its CPU with a plain page held (the page rate alone), then with
 * a precise one held too, 3 s each, a request every 50 ms in both (the lease); then the precise
 * page still held but no request any more (the lease lapsed: the windows must have stopped). */
static void precise_edge_cost(void)
{
	struct haecer_energy_page_info info;
	struct haecer_conn *plain, *precise;
	int fd_plain = -1, fd_precise = -1;
	double base, with, lapsed;

	check(haecer_connect(server.socket_path, &plain), "connect");
	check(haecer_energy_page_request(plain, MSR_PKG_ENERGY_STATUS, 0, 0, &info, &fd_plain),
	      "plain page");
	base = msrd_cpu_share(3.0, plain);
	check(haecer_connect(server.socket_path, &precise), "connect");
	check(haecer_energy_page_request(precise, MSR_PKG_ENERGY_STATUS, 0,
					 HAECER_ENERGY_PAGE_PRECISE, &info, &fd_precise),
	      "precise page");
	with = msrd_cpu_share(3.0, precise);
	usleep(300000);
	lapsed = msrd_cpu_share(3.0, NULL);
	printf("msrd CPU, nobody polling: %.2f %% of one CPU with a %u Hz page held, %.2f %% with "
	       "precise edges on it too (%s, requests every 50 ms), %.2f %% once its requests "
	       "stopped (lease lapsed)\n", base, info.rate_hz, with,
	       info.precise_edges ? "granted" : "NOT granted", lapsed);
	close(fd_plain);
	close(fd_precise);
	haecer_close(precise);
	haecer_close(plain);
}

/* ---- readCounter ---- */

struct read_row {
	uint64_t span_ns;
	size_t count, estimated;
	double error_pct[MAX_SAMPLES];
	double error_j[MAX_SAMPLES];
	double estimate_pct[MAX_SAMPLES];   /* the same reads' estimates at the moment of the read */
	double estimate_j[MAX_SAMPLES];
	double estimate_pm_j[MAX_SAMPLES];  /* their stated +- (both ends) */
	double update_j;
};

static void read_span(struct haecer_counter *pkg, struct read_row *row)
{
	struct haecer_energy_reading first, last;
	uint64_t a0, a1, b0, b1;
	double truth, measured;

	/* A random phase against the 1 ms update grid. */
	spin_until(clock_monotonic_raw_ns() + (uint64_t)(rand() % 1000) * 1000);
	a0 = clock_monotonic_raw_ns();
	check(haecer_counter_read_energy(pkg, &first), "read");
	a1 = clock_monotonic_raw_ns();
	spin_until(a0 + row->span_ns);
	b0 = clock_monotonic_raw_ns();
	check(haecer_counter_read_energy(pkg, &last), "read");
	b1 = clock_monotonic_raw_ns();
	truth = energy_at(b0 + (b1 - b0) / 2, NULL) - energy_at(a0 + (a1 - a0) / 2, NULL);
	measured = last.joules - first.joules;
	row->error_pct[row->count] = 100.0 * (measured - truth) / truth;
	row->error_j[row->count] = measured - truth;
	/* The estimate is for the moment the call took its clock after the read, the call's end
	 * but for a clock read: a call that renewed the lease first (a round trip, at most every
	 * 75 ms) read the page after it, not in the middle. */
	truth = energy_at(b1, NULL) - energy_at(a1, NULL);
	measured = last.estimate_joules - first.estimate_joules;
	row->estimate_pct[row->count] = 100.0 * (measured - truth) / truth;
	row->estimate_j[row->count] = measured - truth;
	row->estimate_pm_j[row->count] = last.estimate_uncertainty_joules +
					 first.estimate_uncertainty_joules;
	row->estimated += first.estimated && last.estimated;
	row->update_j = last.update_joules;
	row->count++;
}

static const char *span_name(uint64_t span_ns)
{
	return span_ns == 1000000000ull ? "1 s" : span_ns == 100000000ull ? "100 ms" : "10 ms";
}

static void print_read_row(const struct read_row *row)
{
	double sum = 0.0, max = 0.0, esum = 0.0, emax = 0.0;

	for (size_t i = 0; i < row->count; i++) {
		sum += row->error_pct[i];
		esum += row->estimate_pct[i];
		if (fabs(row->error_pct[i]) > max)
			max = fabs(row->error_pct[i]);
		if (fabs(row->estimate_pct[i]) > emax)
			emax = fabs(row->estimate_pct[i]);
	}
	printf("register %-6s %4zu  mean %+7.3f %%  p95 %7.3f %%  max %7.3f %%  "
	       "p95 %.5f J (one update: +-%.5f J)\n",
	       span_name(row->span_ns), row->count, sum / (double)row->count,
	       abs_percentile(row->error_pct, row->count, 95), max,
	       abs_percentile(row->error_j, row->count, 95), row->update_j);
	printf("estimate %-6s %4zu  mean %+7.3f %%  p95 %7.3f %%  max %7.3f %%  "
	       "p95 %.5f J (stated +-, p95: %.5f J; %zu of %zu from precise edges)\n",
	       span_name(row->span_ns), row->count, esum / (double)row->count,
	       abs_percentile(row->estimate_pct, row->count, 95), emax,
	       abs_percentile(row->estimate_j, row->count, 95),
	       abs_percentile(row->estimate_pm_j, row->count, 95), row->estimated, row->count);
}

/* ---- regions ---- */

struct region_cell {
	size_t count, smi_hit;
	double error_pct[MAX_SAMPLES];
	double old_pct[MAX_SAMPLES];
};

struct region_totals {
	uint64_t smi_detected, smi_true;
	double lifetime_per_tick;   /* the old method's calibration */
};

static void one_region(struct haecer_counter *pkg, uint64_t length, enum condition condition,
		       struct region_totals *totals, struct region_cell *cell)
{
	struct haecer_energy_region region;
	struct haecer_energy_result result;
	double truth, old;
	uint64_t start_ns, end_ns, smi_start, smi_end;

	set_power(condition_watts[condition]);
	check(haecer_energy_start(pkg, &region), "startEnergyRead");
	/* The region, by this program's clock (the simulator's in real time): from
	 * startEnergyRead's return to the endEnergyRead call. */
	start_ns = clock_monotonic_raw_ns();
	spin_until(start_ns + length);
	end_ns = clock_monotonic_raw_ns();
	check(haecer_energy_end(pkg, &region, &result), "endEnergyRead");
	truth = energy_at(end_ns, NULL) - energy_at(start_ns, NULL);
	/* The SMIs the simulator began between the two polls the result's count comes from. */
	energy_at((uint64_t)llround((double)result.first_poll_tsc * 1e9 / TSC_HZ), &smi_start);
	energy_at((uint64_t)llround((double)result.last_poll_tsc * 1e9 / TSC_HZ), &smi_end);
	totals->smi_true += smi_end - smi_start;
	old = result.raw_joules - (double)result.detected_wait_ticks * totals->lifetime_per_tick;
	if (result.smi_count_exact)
		totals->smi_detected += result.smi_count;
	if (result.smi_count_exact && result.smi_count > 0) {
		cell->smi_hit++;
		return;
	}
	cell->error_pct[cell->count] = 100.0 * (result.joules - truth) / truth;
	if (getenv("FIDELITY_VERBOSE") &&
	    fabs(cell->error_pct[cell->count]) > atof(getenv("FIDELITY_VERBOSE")))
		fprintf(stderr, "outlier %llu us %s: %+.1f %% raw %.6f wait %.6f (lead %llu wait "
			"%llu ticks) +-%.6f truth %.6f power %.2f W region %.1f us\n",
			(unsigned long long)(length / 1000), condition_names[condition],
			cell->error_pct[cell->count], result.raw_joules, result.wait_joules,
			(unsigned long long)result.lead_ticks, (unsigned long long)result.wait_ticks,
			result.uncertainty_joules, truth, result.joules_per_tick * TSC_HZ,
			result.seconds * 1e6);
	cell->old_pct[cell->count] = 100.0 * (old - truth) / truth;
	cell->count++;
}

/* SMIs on `model` in virtual time (a second msrd, 1 us per register access): regions of 300 us
 * of simulated time, the SMIs they count against those the simulator began between their first
 * and last poll (exact here: no host scheduling between a read and its reply). *unknown counts
 * the regions that could not know. */
static void smi_virtual(const char *model, unsigned domain, uint64_t *detected, uint64_t *truth,
			unsigned *unknown)
{
	const char *arguments[] = {"--backend", "sim", "--sim-model", model, "--sim-seed",
				   FIDELITY_SEED, "--sim-virtual-time", "--sim-access-step-ns",
				   "1000", "--log-level", "notice", NULL};
	struct msrd_server virtual_server;
	struct haecer_conn *virtual_conn;
	struct haecer_context *ctx;
	struct haecer_counter *energy;

	*detected = *truth = 0;
	*unknown = 0;
	if (bench_start_msrd(&virtual_server, arguments) < 0)
		die("virtual-time msrd", -EIO);
	check(haecer_connect(virtual_server.socket_path, &virtual_conn), "connect");
	check(haecer_context_open(virtual_server.socket_path, &ctx), "context");
	check(haecer_counter_open_energy(ctx, 0, domain, &energy), "energy counter");
	for (int i = 0; i < 300; i++) {
		struct haecer_energy_region region;
		struct haecer_energy_result result;
		struct haecer_sim_energy_at first, last;

		/* A varying phase against the SMIs (one every 16 ms): in virtual time each region
		 * takes the same simulated time, and a cycle that divides 16 ms never meets one. */
		check(haecer_sim_advance(virtual_conn, (uint64_t)(i * 7919 % 1000) * 1000u, NULL),
		      "advance");
		check(haecer_energy_start(energy, &region), "startEnergyRead");
		check(haecer_sim_advance(virtual_conn, 300000, NULL), "advance");
		check(haecer_energy_end(energy, &region, &result), "endEnergyRead");
		if (!result.smi_count_exact) {
			(*unknown)++;
			*detected += result.smi_count == HAECER_SMI_UNKNOWN ? 0 : result.smi_count;
		} else {
			*detected += result.smi_count;
		}
		check(haecer_sim_energy_at(virtual_conn, 0, domain,
					   (uint64_t)llround((double)result.first_poll_tsc * 1e9 /
							     (double)ctx_tsc_hz(ctx)), &first),
		      "SIM_ENERGY_AT");
		check(haecer_sim_energy_at(virtual_conn, 0, domain,
					   (uint64_t)llround((double)result.last_poll_tsc * 1e9 /
							     (double)ctx_tsc_hz(ctx)), &last),
		      "SIM_ENERGY_AT");
		*truth += last.smi_count - first.smi_count;
	}
	haecer_counter_free(energy);
	haecer_context_close(ctx);
	haecer_close(virtual_conn);
	setenv(HAECER_SOCKET_ENV, server.socket_path, 1);
	if (msrd_stop(&virtual_server) < 0)
		die("virtual-time msrd did not stop cleanly", -EIO);
}

int main(void)
{
	const char *arguments[] = {"--backend", "sim", "--sim-model", "sandybridge", "--sim-seed",
				   FIDELITY_SEED, "--log-level", "notice", NULL};
	static struct read_row reads[3] = { { .span_ns = 10000000 }, { .span_ns = 100000000 },
					    { .span_ns = 1000000000 } };
	static struct region_cell cells[LENGTHS][CONDITIONS];
	const size_t read_counts[3] = { 200, 60, 6 };
	struct region_totals totals = { 0 };
	struct haecer_context *ctx;
	struct haecer_counter *pkg;
	uint64_t rtt[200];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	double key_short100_med = 0, key_short300_p95 = 0, key_step1ms_p95 = 0;
	uint64_t smi_detected, smi_true, zen_detected, zen_true;
	unsigned smi_unknown, zen_unknown;
	struct follow_keys follow;

	if (bench_start_msrd(&server, arguments) < 0) {
		fprintf(stderr, "bench/fidelity: cannot start msrd with the default policy\n");
		return 1;
	}
	bench_pin(server.pid, cpus > 1 ? 1 : 0);
	bench_pin(0, 0);
	if (fidelity_cost_watch(server.pid) < 0)
		fprintf(stderr, "bench/fidelity: no task clock of msrd: its CPU from schedstat\n");
	/* The measured program runs as a user's program would: without capabilities, so that the
	 * simulator follows it by its task clock, not by the tick (harness_drop_capabilities). */
	if (harness_drop_capabilities() < 0)
		die("cannot drop this process's capabilities", -errno);
	srand(12);
	check(haecer_connect(server.socket_path, &conn), "connect");
	check(haecer_default_context(&ctx), "context");
	check(haecer_counter_open_energy(ctx, 0, RAPL_DOMAIN_PKG, &pkg), "energy counter");
	if (getenv("FIDELITY_FOLLOW_ONLY")) { /* iterating on the load-following part alone */
		fidelity_follow(conn, pkg, server.pid, &follow);
		return msrd_stop(&server) < 0;
	}
	set_power(BASE_WATTS);
	/* Before anything of this process asks for precise edges (regions and estimates do). */
	precise_edge_cost();
	for (size_t i = 0; i < 200; i++) {
		uint64_t value, before = clock_monotonic_raw_ns();

		check(haecer_counter_read(pkg, &value), "read");
		rtt[i] = clock_monotonic_raw_ns() - before;
	}
	check(haecer_energy_calibrate(pkg, 4, &totals.lifetime_per_tick), "calibrate");

	printf("rough simulated Sandy Bridge (seed %s), real time; median round trip %llu ns; "
	       "old-method calibration %.2f W\n", FIDELITY_SEED,
	       (unsigned long long)bench_median_u64(rtt, 200), totals.lifetime_per_tick * TSC_HZ);
	printf("readCounter at random phase vs the truth between the reads' middles. 'register': "
	       "the register's total (what readCounter returns);\n'estimate': "
	       "haecer_counter_read_energy's estimate at the moment of the read (total + power of the "
	       "last update x time since it),\nagainst the truth between the calls' ends (the "
	       "moments the estimates are for). The read10ms/read100ms keys below are the "
	       "estimate's.\n");
	for (size_t r = 0; r < 3; r++) {
		for (size_t i = 0; i < read_counts[r]; i++)
			read_span(pkg, &reads[r]);
		print_read_row(&reads[r]);
	}
	for (size_t i = 0; i < REGIONS; i++) {
		for (size_t l = 0; l < LENGTHS; l++) {
			for (int c = 0; c < CONDITIONS; c++)
				one_region(pkg, region_ns[l], (enum condition)c, &totals,
					   &cells[l][c]);
		}
	}
	printf("%-8s %-14s %4s %5s | new: %9s %9s | old: %9s %9s\n", "region", "power", "n",
	       "SMI", "median %", "p95 |%|", "median %", "p95 |%|");
	for (size_t l = 0; l < LENGTHS; l++) {
		for (int c = 0; c < CONDITIONS; c++) {
			const struct region_cell *cell = &cells[l][c];
			double med = median(cell->error_pct, cell->count);
			double p95 = abs_percentile(cell->error_pct, cell->count, 95);

			printf("%5.0f us %-14s %4zu %5zu | new: %+9.2f %9.2f | old: %+9.2f %9.2f\n",
			       (double)region_ns[l] / 1000.0, condition_names[c], cell->count,
			       cell->smi_hit, med, p95, median(cell->old_pct, cell->count),
			       abs_percentile(cell->old_pct, cell->count, 95));
			if (region_ns[l] == 100000 && c == CONSTANT)
				key_short100_med = med;
			if (region_ns[l] == 300000 && p95 > key_short300_p95)
				key_short300_p95 = p95;
			if (region_ns[l] == 1000000 && c != CONSTANT && p95 > key_step1ms_p95)
				key_step1ms_p95 = p95;
		}
	}
	fidelity_follow(conn, pkg, server.pid, &follow);
	printf("SMIs, real time: %llu counted by the regions, %llu begun between the returns of "
	       "their first and last poll (they differ by SMIs between a read and its reply)\n",
	       (unsigned long long)totals.smi_detected, (unsigned long long)totals.smi_true);
	smi_virtual("sandybridge", RAPL_DOMAIN_PKG, &smi_detected, &smi_true, &smi_unknown);
	printf("SMIs, virtual time, sandybridge, 300 regions: %llu counted, %llu true, %u unknown\n",
	       (unsigned long long)smi_detected, (unsigned long long)smi_true, smi_unknown);
	smi_virtual("zen3", RAPL_DOMAIN_AMD_PKG, &zen_detected, &zen_true, &zen_unknown);
	printf("SMIs, virtual time, zen3 (no MSR_SMI_COUNT, no SMIs), 300 regions: %llu counted, "
	       "%llu true, %u unknown\n", (unsigned long long)zen_detected,
	       (unsigned long long)zen_true, zen_unknown);
	haecer_counter_free(pkg);
	haecer_close(conn);
	haecer_shutdown();
	if (msrd_stop(&server) < 0)
		return 1;
	printf("read10ms_p95_pct=%.3f read100ms_p95_pct=%.3f short100us_med_pct=%.2f "
	       "short300us_p95_pct=%.2f step1ms_p95_pct=%.2f smi_detected=%llu smi_true=%llu "
	       "follow_region_coverage_pct=%.1f follow_estimate_coverage_pct=%.1f "
	       "follow_read_coverage_pct=%.1f follow_region300us_p95_pct=%.2f "
	       "follow_region1ms_p95_pct=%.2f worst_err_over_stated=%.2f "
	       "measurement_added_pct=%.2f\n",
	       abs_percentile(reads[0].estimate_pct, reads[0].count, 95),
	       abs_percentile(reads[1].estimate_pct, reads[1].count, 95), key_short100_med,
	       key_short300_p95, key_step1ms_p95, (unsigned long long)smi_detected,
	       (unsigned long long)smi_true, follow.region_coverage_pct,
	       follow.estimate_coverage_pct, follow.read_coverage_pct, follow.region300us_p95_pct,
	       follow.region1ms_p95_pct, follow.worst_err_over_stated,
	       follow.measurement_added_pct);
	return 0;
}
