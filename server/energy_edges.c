/*
 * server/energy_edges.c — precise update edges for energy pages (seed 001 2.3.2-2.3.3).
 *
 * A RAPL energy register changes about once a millisecond (SDM vol. 3B 14.9.3), each update
 * within about +-20 us of its mark (seed 001 2.3.2), SMIs shifting some. A region shorter than a
 * few updates is measured from update to update (libclient/haecer_energy.c), so its error is how
 * well the two update times are known. The thesis knew them to a tight loop's ~250 ns; a client
 * polling through msrd knows them only to a round trip (tens of microseconds).
 *
 * While a holder of a fine energy page asked for precise edges, msrd learns each such
 * register's update grid from its own samples (a phase-locked estimate: the grid point of the
 * last edge and the interval, corrected by a fraction of each new edge's offset; the spread of
 * those offsets sizes the window) and reads the register back to back only in a window of +-3.5
 * standard deviations (at most +-EDGE_WINDOW_MAX_NS) around the predicted edge, opened earlier
 * still by a margin that follows how late msrd's timer wakes come (tens of microseconds on a
 * busy host, 60-150 us on the same VM another day: without it a quarter, then 80 %, of the
 * windows missed their update on the 2-core build host). A
 * timer wakes msrd at the window's start; at the end of that loop turn (its replies submitted)
 * msrd reads the register until it changes, the window ends, or any completion arrives (a
 * client's request: the spin stops at once and goes on at the end of the next turn; under
 * IORING_SETUP_DEFER_TASKRUN the CQ stays empty until msrd enters the kernel, so "arrives" is
 * the ring's IORING_SQ_TASKRUN flag, loop_work_waiting: io_uring_cq_ready alone never saw a
 * waiting request, measured with a recv on a socketpair). The spin is
 * bounded by the window (at most 2 x EDGE_WINDOW_MAX_NS + EDGE_WAKE_MARGIN_MAX_NS = 350 us) and
 * never delays a request by more than the one register read under way when it arrived. No timer
 * runs inside a window (it would only interrupt the spin); the window's end is its backstop, armed
 * only when the spin gave way to waiting work (a backstop armed with every window fired after
 * the spin had seen the update: 2.7 timer wakes per window, 1.7 without it).
 * Timer wakes every few microseconds were tried first: they came 15-100 us apart, brackets as
 * wide as a round trip. Each change carries its bracket — the time before the read of the last
 * sample that did not see it, the time after the read of the first that did — published in the
 * page: a client takes the edge from there, with the bracket as its uncertainty. A window that
 * missed its edge (an SMI, a late wake, an early update) ends in sampling every
 * EDGE_SEARCH_SPACING_NS until the change is seen, and the wide bracket says so.
 *
 * Why windows miss, measured (bench/fidelity's 10 ms reads, 2026-11-25, msrd instrumented per
 * edge): on a quiet host 0.5-2.8 % of edges, from two causes only. SMIs: a read during an SMI
 * waits for its end, so an update inside one is bracketed by at least the SMI (120-160 us on the
 * simulated Sandy Bridge, every 16 ms), often from a read before the window (150 us-1 ms). The
 * SMI's phase against the update grid drifts only ~4 us per SMI (16 updates of 999.76 us vs 16
 * ms), so for about 1.6 s of every 4 s SMIs blur an edge in a third to a half of their periods,
 * then none: runs differ by a factor of ten (4 vs 44 SMI-blurred edges of ~2100). No window
 * can see inside an SMI: inherent. Late wakes: the timer's wake came 50-100 us late (another
 * process's spin on this CPU) or 1-4 ms late (a CPU-bound process: the wake waits for a tick);
 * the margin covers tens of microseconds only. Neither the spin's stop on completions nor a
 * relock of the grid missed an edge. A read takes the current and the previous edge, so each
 * blurred edge costs the reads of the two update intervals after it their estimate.
 *
 * io_uring's timeouts are hrtimers armed without the thread's timer slack (io_uring/timeout.c),
 * so no prctl(PR_SET_TIMERSLACK) is needed (msrd's seccomp filter does not allow it anyway).
 *
 * Cost, bounded here and not by the page rate: msrd spins for at most 350 us per update of each
 * wanted register, typically the margin less the wake's own lateness plus half a window (about
 * 60 us, ~6 % of one CPU per register, where wakes came 40 us late; 16 % of a CPU in
 * bench/fidelity where they came 60-150 us late, which prints msrd's CPU with and without). A
 * fine grant can already poll the register by round trip as densely, so precise edges tell its
 * holder nothing its grant does not; coarse grants never get them (energy_page.c). What a
 * holder can make msrd spend is bounded by the policy all the same (issue 28: a holder renewing
 * its lease kept msrd at 40-65 % of a CPU): each window's time is charged to its register, and
 * energy_page.c leaves out, for the rest of the second, the holders of a uid whose registers'
 * windows took its energy_page.edge_cpu_percent_per_uid, or everyone once edge_cpu_percent is
 * spent.
 *
 * The lease: a holder's ask counts only within EDGE_LEASE_NS (150 ms) of its connection's last
 * ENERGY_READ, or EDGE_SHORT_LEASE_NS (6 ms) of any other request (energy_page.c keeps the
 * wanted set; dispatch renews), and of a page only for the entries it read once it read any (a
 * zen4 core-energy page has 32). A short lease for regions alone was tried (a region asking before
 * its start update, at its end call and every 3 ms between, so that the windows ran around its
 * edges and not through its body): the windows then stopped and started between regions, the
 * first windows after each start missed their update often, and bench/fidelity's 300 us regions
 * under an imposed constant power went from a p95 error of 1.5 % to 115 %. Regions keep the
 * long lease, and pause it only through their bodies (WIRE_ENERGY_READ_REGION,
 * energy_pages_note_region): the start asks, with its lease renewal, for windows until its own
 * two updates and the body's first are past, the end's first request starts them again; the
 * windows between regions, and so the start's, run as before. A program that measured one
 * region and then computes for an hour would otherwise keep msrd spinning on the package it
 * measures for that hour. The windows' own timer (at least once per update while any run)
 * computes the set again when the earliest lease lapses, so they stop within about a
 * millisecond of it; a request from a lapsed holder starts them at once, with the grid learnt
 * before when the lapse was under EDGE_KEEP_GRID_NS (its first window is then sharp; else a
 * search, about an update, with a wide first bracket). Why 150 ms: a region's end polls the page
 * without round trips for up to ~40 updates (the closing update, then sharp ones for its power),
 * and libhaecer renews only when it sent nothing for half a lease (75 ms, a register read), so
 * at least 75 ms of lease covers those 40 ms; and what a lapse costs after the last use, ~6 % of
 * a CPU for 150 ms (9 ms of CPU), is lost in any program's noise. Regions shorter than the lease
 * never see a lapse (their start's round trip covers their end); a longer one's end renews and
 * its closing update may come before the first window: libhaecer then treats it as blurred
 * (placed from a later sharp update, or the wide bracket in its uncertainty).
 *
 * Reading a package-scoped register from another CPU of the package costs that CPU an IPI (the
 * msr driver's rdmsr_on_cpu). The windows read it through the CPU msrd runs on when that CPU is
 * in the register's package (sched_getcpu just before the read: a migration in between costs at
 * most one IPI), so dense sampling does not interrupt the measured CPUs; a register of another
 * package is read through its own CPU (no way around the IPI there).
 */
#include "server/server.h"
#include "backend/backend_sim.h"
#include "common/clock.h"

#include <math.h>
#include <sched.h>
#include <string.h>

#define EDGE_NOMINAL_NS 1000000.0     /* "approximately 1 ms" */
#define EDGE_SPACING_NS 4000ull       /* between reads inside a window */
#define EDGE_SEARCH_SPACING_NS 20000ull /* before the grid is known, and after a missed window */
#define EDGE_WINDOW_MIN_NS 12000.0
#define EDGE_WINDOW_MAX_NS 50000.0
#define EDGE_SIGMAS 3.5
/* The margin's floor: 40 us until the margin followed the wakes' 90th percentile; on a quiet host
 * that percentile + 10 us is 30-36 us, and the floor above it was spun through on every window
 * (bench/fidelity 2026-11-29: msrd's CPU over measured regions less unmeasured 6.2 -> 5.7 % of a
 * CPU at 25 us, imposed-power precision and coverage unchanged). */
#define EDGE_WAKE_MARGIN_NS 25000ull
/* The margin follows how late msrd's own timer wakes come (a moving mean + 3 sigma of their
 * lateness, each counted up to EDGE_WAKE_LATE_CAP_NS, the rare multi-millisecond wake behind a
 * CPU-bound process being no lateness a margin can cover), between EDGE_WAKE_MARGIN_NS and
 * EDGE_WAKE_MARGIN_MAX_NS: the same 2-core VM woke 40 us late one day and 70-120 us late
 * (median, even without timer slack) another, when a fixed 40 us margin missed 80 % of the
 * edges (bench/fidelity: 42 of 200 readings with precise edges, 300 us regions p95 160 %). */
#define EDGE_WAKE_MARGIN_MAX_NS 250000.0
#define EDGE_WAKE_LATE_CAP_NS 500000.0
#define EDGE_WAKE_GAIN 0.05
#define EDGE_WAKE_HISTORY 64u
#define EDGE_WAKE_MIN_HISTORY 16u
#define EDGE_WAKE_PERCENTILE 90u
#define EDGE_INITIAL_SIGMA_NS 12000.0
/* An edge whose bracket is at most this wide teaches the grid; wider ones only keep its count.
 * A window's reads come EDGE_SPACING_NS apart at best; a wake and a read of the simulated CPU
 * took 15-20 us on the 2-core build host, so brackets of about 20 us are the window working. */
#define EDGE_SHARP_NS 30000ull
/* The first edge locks the grid when bracketed at most this well: the search reads every
 * EDGE_SEARCH_SPACING_NS by timer, and where timer wakes come 60-150 us late (2026-11-28) its
 * brackets were 60-100 us wide, so a lock at twice the spacing never came and no window ran (a
 * 100 Hz page got no sharp edge in 3 s). A lock on a wide bracket may put the first windows
 * off; a blurred bracket that misses the grid then starts it again (learn). */
#define EDGE_LOCK_MAX_NS 200000ull
/* The grid is tracked as an alpha-beta filter on the sharp edges (phase and period), with the
 * gains of a growing least-squares fit of a line (2(2k-1)/(k(k+1)) and 6/(k(k+1)) at the k-th
 * sharp edge since the lock) down to these floors, a memory of about 50 updates. The updates
 * scatter around a fixed grid (seed 001 2.3.2); gains of 0.25 and 0.02 made the anchor follow
 * each edge's own jitter, so the grid's prediction of an edge was off by 15 us (sd, up to
 * 67 us) where the scatter itself is 6.6 us (up to 20 us); at these floors it is 7 us (up to
 * 24 us), measured offline on 10 000 edges of the simulated Sandy Bridge against its truth. */
#define EDGE_PHASE_GAIN 0.02
#define EDGE_PERIOD_GAIN 0.0002
#define EDGE_VARIANCE_GAIN 0.1
/* A grid learnt before a lease lapsed is used again when renewed within this long: the period
 * is learnt to well below a part in 10^4 (EDGE_PERIOD_GAIN over hundreds of edges), so after a
 * second the prediction is off by a few microseconds, inside the window; longer, search anew. */
#define EDGE_KEEP_GRID_NS 1000000000ull
/* A blurred change is placed on the grid only once this many sharp ones taught it since it
 * locked (the spread's moving average, gain EDGE_VARIANCE_GAIN, has then forgotten most of its
 * initial guess), and at most this many points after its last edge (one second, as above). */
#define EDGE_PLACE_MIN_SHARP 16u
/* 4 sigma: none of 1991 blurred edges of the simulated Sandy Bridge lay outside it (offline,
 * against its truth; 3.5 sigma missed 0.5 %). */
#define EDGE_PLACE_SIGMAS 4.0
#define EDGE_PLACE_MAX_POINTS 1000.0

/* A CPU of the register's package (die, on Intel) that is this thread's own, if msrd runs
 * there: another die's CPU would read the other die's register. */
static uint32_t read_cpu(const struct msrd *server, const struct energy_counter *counter)
{
	const struct machine_info *machine = &server->machine;
	int here = sched_getcpu();

	if (counter->domain == RAPL_DOMAIN_AMD_CORE || here < 0 ||
	    (uint32_t)here >= machine->cpu_count)
		return counter->cpu;
	return machine_energy_key(machine, counter->domain, (uint32_t)here) ==
			       machine_energy_key(machine, counter->domain, counter->cpu)
		       ? (uint32_t)here
		       : counter->cpu;
}

/* The EDGE_WAKE_PERCENTILE-th percentile of the recent latenesses, or -1 before there are
 * EDGE_WAKE_MIN_HISTORY of them. */
static double late_percentile(const struct energy_state *energy)
{
	uint32_t sorted[EDGE_WAKE_HISTORY];
	uint32_t count = energy->edge_wake_count < EDGE_WAKE_HISTORY ? energy->edge_wake_count
								      : EDGE_WAKE_HISTORY;

	if (count < EDGE_WAKE_MIN_HISTORY)
		return -1.0;
	memcpy(sorted, energy->edge_wake_history, count * sizeof(sorted[0]));
	/* Insertion sort: 64 values once per window. */
	for (uint32_t i = 1; i < count; i++) {
		uint32_t value = sorted[i], j = i;

		for (; j > 0 && sorted[j - 1] > value; j--)
			sorted[j] = sorted[j - 1];
		sorted[j] = value;
	}
	return (double)sorted[(count * EDGE_WAKE_PERCENTILE + 99) / 100 - 1];
}

/* How much earlier than a window's start msrd asks to be woken. The spin from the wake to the
 * update is msrd's CPU on the package being measured (issue 23: 28 % of a CPU where the margin
 * sat at its maximum), so the margin is a high percentile of how late the recent wakes came,
 * not their mean + 3 sigma: a loaded host's lateness is heavy-tailed (most wakes 40-120 us
 * late, some milliseconds), its sigma set by the tail that no margin covers anyway. A wake
 * later than the margin misses its update's window; the grid still places that update
 * (energy_edges_place) and the client counts back from a sharp one. The percentile itself,
 * with no slack above it: a wake up to half a window later than the margin still finds its
 * update ahead (the window opens that far before the predicted edge), and 10 us of slack were
 * 10 us spun through by every window (bench/fidelity, three runs each, alternating: the worst
 * condition's measurement_added_pct 0.92-1.23 with it, 0.68-0.73 without, imposed-power
 * short300us_p95_pct 1.98 / 2.05 and step1ms_p95_pct 1.52 / 1.41 in one full run each). */
static uint64_t wake_margin(const struct energy_state *energy)
{
	double percentile = late_percentile(energy);
	double margin = percentile >= 0.0 ? percentile
					  : energy->edge_wake_late_ns +
						    3.0 * sqrt(energy->edge_wake_late_var);

	if (margin < (double)EDGE_WAKE_MARGIN_NS)
		margin = (double)EDGE_WAKE_MARGIN_NS;
	if (margin > EDGE_WAKE_MARGIN_MAX_NS)
		margin = EDGE_WAKE_MARGIN_MAX_NS;
	return (uint64_t)margin;
}

/* A timer wake came `late` ns after it was due. */
static void note_wake(struct energy_state *energy, double late)
{
	double delta;

	if (late > EDGE_WAKE_LATE_CAP_NS)
		late = EDGE_WAKE_LATE_CAP_NS;
	energy->edge_wake_history[energy->edge_wake_count++ % EDGE_WAKE_HISTORY] = (uint32_t)late;
	delta = late - energy->edge_wake_late_ns;
	energy->edge_wake_late_ns += EDGE_WAKE_GAIN * delta;
	energy->edge_wake_late_var += EDGE_WAKE_GAIN * (delta * delta - energy->edge_wake_late_var);
}

static void plan_window(struct energy_edge_model *model, uint64_t margin)
{
	double sigma = sqrt(model->variance_ns2);
	double half = EDGE_SIGMAS * sigma;
	uint64_t predicted = model->anchor_ns + (uint64_t)llround(model->period_ns);

	if (half < EDGE_WINDOW_MIN_NS)
		half = EDGE_WINDOW_MIN_NS;
	if (half > EDGE_WINDOW_MAX_NS)
		half = EDGE_WINDOW_MAX_NS;
	/* The spin starts a margin earlier still: a timer wake comes late, and a wake after the
	 * update misses it. */
	model->window_from_ns = predicted - (uint64_t)half - margin;
	model->window_to_ns = predicted + (uint64_t)half;
	model->next_ns = model->window_from_ns;
	model->windows++;
}

/* A change was seen with bracket [lo, hi]: teach the grid (sharp) or keep its count (blurred). */
static void learn(struct energy_edge_model *model, uint64_t lo, uint64_t hi)
{
	uint64_t edge = lo + (hi - lo) / 2;
	bool sharp = lo != 0 && hi - lo <= EDGE_SHARP_NS;
	double n, residual, predicted, k;

	if (!model->locked) {
		/* The first edge, from the search's coarser reads: a wider first window. */
		double half_bracket = (double)(hi - lo) / 2.0;

		if (lo == 0 || hi - lo > EDGE_LOCK_MAX_NS)
			return;
		model->locked = true;
		model->sharp_since_lock = 0;
		model->anchor_ns = edge;
		model->period_ns = EDGE_NOMINAL_NS;
		model->variance_ns2 = EDGE_INITIAL_SIGMA_NS * EDGE_INITIAL_SIGMA_NS +
				      half_bracket * half_bracket;
		model->spread_ns2 = model->variance_ns2;
		return;
	}
	n = nearbyint((double)(int64_t)(edge - model->anchor_ns) / model->period_ns);
	if (n < 1.0)
		n = 1.0;
	predicted = (double)model->anchor_ns + n * model->period_ns;
	residual = (double)edge - predicted;
	if (!sharp && (predicted + EDGE_WINDOW_MAX_NS < (double)lo ||
		       predicted - EDGE_WINDOW_MAX_NS > (double)hi)) {
		/* The grid is off (a lock on a wide first bracket, a stall that skipped it): a
		 * blurred bracket still holds its update; start again from its middle. */
		double half_bracket = (double)(hi - lo) / 2.0;

		model->anchor_ns = edge;
		model->variance_ns2 = EDGE_INITIAL_SIGMA_NS * EDGE_INITIAL_SIGMA_NS +
				      half_bracket * half_bracket;
		model->spread_ns2 = model->variance_ns2;
		model->sharp_since_lock = 0;
		return;
	}
	if (!sharp) {
		/* Where the grid says it was. A second miss in a row widens the next windows: a
		 * lone miss is an SMI, a late wake or a spin that gave way, none of which a wider
		 * window catches, and widening on each (about one window in seven under a region
		 * loop) kept the windows +-36 us where the sharp edges' own offsets said +-26
		 * (bench/fidelity, msrd instrumented: 42 -> 32 us of CPU per window). */
		model->anchor_ns = (uint64_t)llround(predicted);
		if (model->missed_last)
			model->variance_ns2 += (EDGE_WINDOW_MAX_NS * EDGE_WINDOW_MAX_NS / 4.0 -
						model->variance_ns2) * EDGE_VARIANCE_GAIN;
		model->missed_last = true;
		return;
	}
	model->missed_last = false;
	if (fabs(residual) > model->period_ns / 4.0) {
		/* Lost (a long stall, a domain that skipped): start again from this edge. */
		model->anchor_ns = edge;
		model->variance_ns2 = EDGE_INITIAL_SIGMA_NS * EDGE_INITIAL_SIGMA_NS;
		model->spread_ns2 = model->variance_ns2;
		model->sharp_since_lock = 0;
		return;
	}
	k = (double)model->sharp_since_lock + 2.0; /* the lock's edge was the first */
	model->anchor_ns = (uint64_t)llround(predicted + fmax(EDGE_PHASE_GAIN,
							       2.0 * (2.0 * k - 1.0) /
								       (k * (k + 1.0))) *
								  residual);
	model->period_ns += fmax(EDGE_PERIOD_GAIN, 6.0 / (k * (k + 1.0))) * residual / n;
	model->variance_ns2 += (residual * residual - model->variance_ns2) * EDGE_VARIANCE_GAIN;
	model->spread_ns2 += (residual * residual - model->spread_ns2) * EDGE_VARIANCE_GAIN;
	model->sharp_edges++;
	model->sharp_since_lock++;
}

/* Where a change seen in [lo, hi] lay. Every update off SMM comes within +-20 us of its point
 * on the update grid, and one during an SMM comes on time, only seen late (seed 001 2.3.2,
 * figures 3 and 4): the grid places an update that a missed window, a late wake, a tick or an
 * SMI bracketed only to tens or hundreds of microseconds. The grid's spread is
 * EDGE_PLACE_SIGMAS standard deviations of the sharp edges' offsets from their predicted points
 * (the jitter, the brackets' own width and the grid's tracking error in one figure), at least
 * EDGE_WINDOW_MIN_NS.
 *
 * Which grid point: the change shows the last update before hi. The candidates are the points
 * whose spread meets [lo, hi], after the previous update's point when that update is known to
 * the spread; one candidate is it; of several (a bracket over more than one update), the last
 * is it only when its whole spread lies before hi (else it may not have come yet: unknown). No
 * placement either when the grid is not known that well (fewer than EDGE_PLACE_MIN_SHARP sharp
 * edges since it locked, a spread above EDGE_WINDOW_MAX_NS, a point more than
 * EDGE_PLACE_MAX_POINTS from its anchor), or when no point's spread meets the bracket (the
 * grid is off: the bracket alone is known). */
static bool grid_point(const struct energy_edge_model *model,
		       const struct energy_page_reading *seen, double spread, uint64_t *point)
{
	uint64_t lo = seen->update_lo_ns, hi = seen->update_ns;
	uint64_t previous_lo = seen->previous_placed_lo_ns, previous_hi = seen->previous_placed_hi_ns;
	double anchor = (double)model->anchor_ns, period = model->period_ns;
	double first = ceil(((double)lo - spread - anchor) / period);
	double last = floor(((double)hi + spread - anchor) / period);

	if (previous_lo != 0 && previous_hi >= previous_lo &&
	    (double)(previous_hi - previous_lo) <= 2.0 * spread) {
		double previous = (double)(previous_lo + (previous_hi - previous_lo) / 2);
		double previous_point = nearbyint((previous - anchor) / period);

		if (first <= previous_point)
			first = previous_point + 1.0;
	}
	if (last < first || last < 1.0 || last > EDGE_PLACE_MAX_POINTS)
		return false;
	if (last > first && anchor + last * period + spread > (double)hi)
		return false;
	*point = model->anchor_ns + (uint64_t)llround(last * period);
	return true;
}

void energy_edges_place(struct energy_counter *counter)
{
	const struct energy_edge_model *model = &counter->edge;
	struct energy_page_reading *seen = &counter->sampled;
	uint64_t lo = seen->update_lo_ns, hi = seen->update_ns, point, from, to;
	double spread = EDGE_PLACE_SIGMAS * sqrt(model->spread_ns2);

	seen->update_placed_lo_ns = lo;
	seen->update_placed_hi_ns = lo != 0 ? hi : 0;
	if (lo == 0 || hi <= lo || hi - lo <= EDGE_SHARP_NS || !model->wanted || !model->locked ||
	    model->sharp_since_lock < EDGE_PLACE_MIN_SHARP || spread > EDGE_WINDOW_MAX_NS)
		return;
	if (spread < EDGE_WINDOW_MIN_NS)
		spread = EDGE_WINDOW_MIN_NS;
	if (!grid_point(model, seen, spread, &point))
		return;
	from = point - (uint64_t)spread;
	to = point + (uint64_t)spread;
	if (to <= lo || from >= hi)
		return;
	seen->update_placed_lo_ns = from > lo ? from : lo;
	seen->update_placed_hi_ns = to < hi ? to : hi;
}

/* One read of the register in its window, and what comes next. */
static bool sample(struct msrd *server, struct energy_counter *counter, uint64_t now)
{
	struct energy_edge_model *model = &counter->edge;
	bool changed = energy_sample_counter(server, counter, read_cpu(server, counter));

	server->energy.edge_samples++;
	now = counter->sampled.sample_ns ? counter->sampled.sample_ns : now;
	if (changed) {
		learn(model, counter->sampled.update_lo_ns, counter->sampled.update_ns);
		if (model->locked)
			plan_window(model, wake_margin(&server->energy));
		else
			model->next_ns = now + EDGE_SEARCH_SPACING_NS;
		return true;
	}
	if (!model->locked || now >= model->window_to_ns)
		model->next_ns = now + EDGE_SEARCH_SPACING_NS;
	else if (now >= model->window_from_ns)
		model->next_ns = now + EDGE_SPACING_NS;
	else
		model->next_ns = model->window_from_ns;
	return false;
}

/* A window's CPU: what its holders' regions are shown (energy_cost.c), and what their uids'
 * budgets are charged (energy_page.c). */
static void charge(struct msrd *server, struct energy_counter *counter, uint64_t cpu_ns)
{
	server->energy.edge_cpu_total_ns += cpu_ns;
	energy_cost_charge(server, counter, cpu_ns);
	energy_pages_charge_edges(server, counter, cpu_ns);
}

static void arm(struct msrd *server)
{
	struct energy_state *energy = &server->energy;
	uint64_t next = UINT64_MAX, now, delay;
	struct io_uring_sqe *sqe;

	if (energy->edge_armed || !energy->edges_on || server->stopping)
		return;
	for (uint32_t i = 0; i < energy->count; i++) {
		const struct energy_edge_model *model = &energy->counters[i].edge;
		uint64_t due = model->next_ns;

		/* Inside an open window the spin reads (it resumes after every loop turn that
		 * interrupted it): a timer every few microseconds would only interrupt it; the
		 * window's end is the backstop. */
		if (model->locked && due > model->window_from_ns && due < model->window_to_ns)
			due = model->window_to_ns;
		if (model->wanted && due < next)
			next = due;
	}
	if (next == UINT64_MAX)
		return;
	now = clock_monotonic_raw_ns();
	delay = next > now ? next - now : 1;
	energy->edge_due_ns = next > now ? next : 0; /* a wake due already says nothing */
	energy->edge_timeout = (struct __kernel_timespec){
		.tv_sec = (long long)(delay / 1000000000ull),
		.tv_nsec = (long long)(delay % 1000000000ull),
	};
	sqe = loop_sqe(&server->loop);
	io_uring_prep_timeout(sqe, &energy->edge_timeout, 0, 0);
	io_uring_sqe_set_data64(sqe, loop_user_data(server, TAG_ENERGY_EDGE, 0));
	energy->edge_armed = true;
}

void energy_edges_on_timeout(struct msrd *server, const struct io_uring_cqe *cqe)
{
	struct energy_state *energy = &server->energy;
	bool changed = false, due = false;
	uint64_t now;

	energy->edge_armed = false;
	if (cqe->res == -ECANCELED || !energy->edges_on)
		return;
	now = clock_monotonic_raw_ns();
	energy->edge_wakes++;
	if (cqe->res == -ETIME && energy->edge_due_ns != 0)
		note_wake(energy, now > energy->edge_due_ns ? (double)(now - energy->edge_due_ns)
							    : 0.0);
	/* The windows' own timer (at least once per update while on) notices a lapsed lease. */
	energy_pages_leases_check(server);
	if (!energy->edges_on)
		return;
	for (uint32_t i = 0; i < energy->count; i++) {
		struct energy_counter *counter = &energy->counters[i];

		if (counter->edge.wanted && counter->edge.next_ns <= now) {
			uint64_t cpu = energy_cost_thread_cpu_ns();

			changed |= sample(server, counter, now);
			charge(server, counter, energy_cost_thread_cpu_ns() - cpu);
			due = true;
		}
	}
	energy->edge_idle_wakes += !due;
	/* Only a change is worth a publication; the page sampler keeps sample times fresh. */
	if (changed)
		energy_pages_publish_fine(server);
	/* A window that is open now is read on at the end of this turn (energy_edges_spin). */
	for (uint32_t i = 0; i < energy->count; i++) {
		const struct energy_edge_model *model = &energy->counters[i].edge;

		if (model->wanted && model->locked && model->next_ns < model->window_to_ns &&
		    model->next_ns >= model->window_from_ns)
			energy->edge_spin_due = true;
	}
	/* A window open now is spun at the end of this very turn, and the spin arms the timer
	 * when it ends (the next window, or a backstop at this one's end when it gave way to
	 * waiting work). A backstop armed here would fire at the window's end after the spin had
	 * seen its update: one wasted wake per update (2.7 wakes per window, measured in
	 * bench/fidelity's region loops). */
	if (!energy->edge_spin_due)
		arm(server);
}

bool energy_edges_spin_due(const struct msrd *server)
{
	return server->energy.edge_spin_due;
}

void energy_edges_spin(struct msrd *server)
{
	struct energy_state *energy = &server->energy;
	bool changed = false;

	energy->edge_spin_due = false;
	if (!energy->edges_on)
		return;
	for (uint32_t i = 0; i < energy->count; i++) {
		struct energy_counter *counter = &energy->counters[i];
		struct energy_edge_model *model = &counter->edge;
		uint64_t now = clock_monotonic_raw_ns(), cpu;

		if (!model->wanted || !model->locked || now < model->window_from_ns)
			continue;
		/* Read until the change, the window's end, or work for the loop: a completion
		 * (a client's request, a timer) stops the spin at once, so no client waits for it
		 * longer than one register read; the window goes on by timer. */
		cpu = energy_cost_thread_cpu_ns();
		while (now < model->window_to_ns && model->next_ns < model->window_to_ns) {
			if (loop_work_waiting(&server->loop)) {
				/* Goes on after the loop's turn. The first time said once: the
				 * check works under DEFER_TASKRUN (tests look for the line). */
				if (energy->edge_yields++ == 0)
					log_debug("energy pages: a window gave way to waiting work "
						  "(a request or a timer)");
				energy->edge_spin_due = true;
				break;
			}
			if (sample(server, counter, now)) {
				changed = true;
				break;
			}
			now = clock_monotonic_raw_ns();
		}
		/* May turn the windows off (a budget spent): the loop checks edges_on. */
		charge(server, counter, energy_cost_thread_cpu_ns() - cpu);
		if (!energy->edges_on)
			break;
	}
	if (changed)
		energy_pages_publish_fine(server);
	arm(server);
}

/* Where the grid is taken up when the windows start again after a pause: the last grid point
 * whose update msrd has seen (the last change the page's sampler saw while the windows were
 * off, less EDGE_SEEN_SLACK_NS: an update comes within +-20 us of its grid point, seed 001
 * 2.3.2, so a point that far before the change is that change's update or an earlier one), but
 * at most one point behind the last point before now (a sampler slower than the updates, a page
 * rate under 1 kHz, saw none of the points between; the change the first window then sees is
 * placed on the last of them). The last point before now alone was taken first: when an update
 * had come since the sampler's last look, the grid stood a point ahead of the register, the
 * change that showed that update fell before its anchor, and msrd could not place it. A region's
 * end call restarts the windows just after the update before it, so a paused body's closing
 * update came with the sampler's 1 ms bracket (bench/fidelity: 10 ms regions off by 2-2.7 % at
 * the median, +-13 % stated; 0.1 % now, and +-0.4-1.1 % for most with libhaecer's tail bound
 * taking placed updates). */
#define EDGE_SEEN_SLACK_NS 30000ull

static uint64_t restart_anchor(const struct energy_edge_model *model,
			       const struct energy_page_reading *sampled, uint64_t now)
{
	double period = model->period_ns;
	double before_now = floor((double)(now - model->anchor_ns) / period);
	double seen_point = before_now;
	uint64_t seen = sampled->update_ns;

	if (seen != 0 && seen <= now)
		seen_point = seen < model->anchor_ns + EDGE_SEEN_SLACK_NS
				     ? 0.0
				     : floor((double)(seen - EDGE_SEEN_SLACK_NS - model->anchor_ns) /
					     period);
	if (seen_point < before_now - 1.0)
		seen_point = before_now - 1.0;
	if (seen_point < 0.0)
		seen_point = 0.0;
	return model->anchor_ns + (uint64_t)llround(seen_point * period);
}

void energy_edges_set(struct msrd *server, const bool *wanted)
{
	struct energy_state *energy = &server->energy;
	bool on = false;
	uint64_t now = clock_monotonic_raw_ns();
	uint32_t before = 0, after = 0;

	for (uint32_t i = 0; i < energy->count; i++) {
		struct energy_edge_model *model = &energy->counters[i].edge;
		bool want = wanted != NULL && wanted[i] &&
			    !backend_sim_virtual_time(server->backend);

		before += model->wanted;
		after += want;

		if (want && !model->wanted && model->locked && now > model->anchor_ns &&
		    now - model->anchor_ns < EDGE_KEEP_GRID_NS) {
			/* A lease renewed soon after it lapsed: the grid still holds, so the first
			 * window after the renewal is a sharp one (no search of up to an update): from
			 * the last grid point whose update msrd has seen, its next window. */
			model->anchor_ns = restart_anchor(model, &energy->counters[i].sampled, now);
			model->wanted = true;
			plan_window(model, wake_margin(energy));
		} else if (want && !model->wanted) {
			*model = (struct energy_edge_model){ .wanted = true, .next_ns = now };
		} else if (!want) {
			model->wanted = false;
		}
		on |= want;
	}
	/* Debug, not info: a program that starts a region every ~300 ms turns the windows on and
	 * off with each lease, several lines a second. Tests count these lines (the harness runs
	 * msrd at debug). */
	if (on != energy->edges_on && on)
		log_debug("energy pages: precise edges on");
	/* Which registers: a holder's windows run only for the entries it read (issue 28), and
	 * tests/server/test_energy_edges_entries checks that through this line. */
	if (on && after != before)
		log_debug("energy pages: precise edges for %u of %u registers", after,
			  energy->count);
	if (on != energy->edges_on && !on) {
		uint64_t windows = 0, sharp = 0;

		for (uint32_t i = 0; i < energy->count; i++) {
			windows += energy->counters[i].edge.windows;
			sharp += energy->counters[i].edge.sharp_edges;
		}
		log_debug("energy pages: precise edges off (so far %llu windows, %llu sharp edges, "
			  "%llu us of CPU in them, %llu timer wakes, %llu of them idle, "
			  "%llu gave way to waiting work; timer wakes %.0f +- %.0f us late, %u%% of "
			  "the last %u within %.0f us, margin %.0f us)", (unsigned long long)windows,
			  (unsigned long long)sharp,
			  (unsigned long long)(energy->edge_cpu_total_ns / 1000),
			  (unsigned long long)energy->edge_wakes,
			  (unsigned long long)energy->edge_idle_wakes,
			  (unsigned long long)energy->edge_yields,
			  energy->edge_wake_late_ns / 1e3, sqrt(energy->edge_wake_late_var) / 1e3,
			  EDGE_WAKE_PERCENTILE,
			  energy->edge_wake_count < EDGE_WAKE_HISTORY ? energy->edge_wake_count
								      : EDGE_WAKE_HISTORY,
			  late_percentile(energy) / 1e3, (double)wake_margin(energy) / 1e3);
	}
	energy->edges_on = on;
	arm(server);
}
