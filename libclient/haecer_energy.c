/*
 * libclient/haecer_energy.c — energy regions below the RAPL update step (seed 001 2.3.3):
 * synchronise the start to an update, wait for the update after the end, and subtract the
 * energy of that wait.
 *
 * The seed calibrated the energy per TSC tick of polling once, at initialisation. That breaks as
 * soon as the package's power changes (other cores, frequency, temperature): the calibration of
 * a 30 W moment is applied at 50 W. Here every region measures the power of its own wait: after
 * the closing update, endEnergyRead polls through one more update interval — the same loop under
 * the same conditions, right after the region — and uses that interval's power (energy between
 * two updates over the time between them) for the wait. The cost is one more update interval
 * (about 1 ms) per endEnergyRead.
 *
 * Update times are estimated, not taken as the time of the poll that saw the change: through
 * msrd a poll is a round trip of tens of microseconds, so the update lies anywhere between the
 * previous poll's read and this one's; the middle of the two is the estimate, at both ends of the
 * region, and the energy from the start update to startEnergyRead's return (the first part of
 * startEnergyRead's last poll) is subtracted like the wait. That leaves an error of up to half a
 * round trip of power at each end (+-15 % of a 300 us region). So regions ask for msrd's energy
 * page with precise edges (server/energy_edges.c): msrd reads the register densely around each
 * predicted update and writes the update's bracket into the page; the region polls the page (a
 * memory copy: the thesis's tight loop) and takes the middle of msrd's bracket, half the bracket
 * being the doubt. A bracket wider than PAGE_SHARP_NS (a window that missed) is treated like a
 * blurred round-trip detection. HAECER_ENERGY_EXACT (or no page) keeps the round trips.
 *
 * SMIs (seed 001 2.1.2.6): MSR_SMI_COUNT (on AMD a counter of PMCx02B; haecer_energy_smi.c),
 * read in every poll where the model has it and the policy grants it, counts them exactly; a
 * region an SMI hit says so (smi_count > 0) and callers filter it. Without it (refused, or no
 * counter free) the count is unknown (HAECER_SMI_UNKNOWN):
 * the seed's TSC-gap test assumes a tight rdtsc loop, and a poll here takes far longer than an
 * SMI's 300-400 k cycles would stand out from.
 *
 * Clocks: on real hardware the TSC (rdtsc) before and after each poll; with a simulated CPU in
 * real time the simulated TSC, which msrd derives from CLOCK_MONOTONIC_RAW (so the client reads
 * it after the reply, as rdtsc would be); in virtual time it is read through msrd in the poll's
 * batch, after the energy register.
 */
#include "libclient/haecer_internal.h"
#include "libclient/haecer_energy_cost.h"
#include "libclient/msrd_conn.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#define CALIBRATION_UPDATES 4u
#define CALIBRATION_MAX_UPDATES 1000u
#define POLL_OPS 3
/* How many updates a region end waits for sharp ones before it takes what it has. */
#define SHARP_TRIES 8u
#define WAIT_UPDATES_MAX 32u
/* A detection is sharp when its two polls were at most this much further apart than typical
 * (2x, plus 10 us of slack): a preempted msrd or client blurs the update time. */
#define SHARP_FACTOR 2u
#define SHARP_SLACK_NS 10000ull

struct poll_plan {
	struct haecer_msr_op ops[POLL_OPS];
	size_t count;
	int tsc, energy, smi;       /* op index, -1 when not in the batch */
};

unsigned haecer__package_domain(const struct haecer_context *ctx)
{
	return event_db_caps(ctx->db)->vendor == EVENT_VENDOR_AMD ? RAPL_DOMAIN_AMD_PKG
								 : RAPL_DOMAIN_PKG;
}

bool haecer__energy_virtual_time(const struct haecer_context *ctx)
{
	return ctx->simulated && (ctx->machine.flags & HAECER_MACHINE_VIRTUAL_TIME);
}

/* The TSC as this process sees it now (not for virtual time, where only msrd knows it). */
static uint64_t tsc_now(const struct haecer_context *ctx)
{
	uint64_t tsc;

	if (ctx->simulated) {
		/* msrd's simulated TSC: CLOCK_MONOTONIC_RAW ns x tsc_hz (backend/sim/sim.c). */
		unsigned __int128 ticks = (unsigned __int128)clock_monotonic_raw_ns() *
					  ctx->machine.tsc_hz / 1000000000ull;

		return (uint64_t)ticks;
	}
	_mm_lfence();
	tsc = __rdtsc();
	_mm_lfence();
	return tsc;
}

static void plan_poll(const struct haecer_counter *counter, struct poll_plan *plan)
{
	const struct haecer_context *ctx = counter->ctx;
	uint32_t cpu = counter->info.cpu;

	plan->count = 0;
	plan->tsc = plan->smi = -1;
	plan->energy = (int)plan->count;
	plan->ops[plan->count++] = (struct haecer_msr_op){
		.kind = ctx->energy_totals ? HAECER_MSR_ENERGY_READ : HAECER_MSR_READ,
		.cpu = cpu, .address = counter->info.counter_address};
	if (haecer__smi_op(counter, &plan->ops[plan->count]))
		plan->smi = (int)plan->count++;
	if (haecer__energy_virtual_time(ctx)) {
		plan->tsc = (int)plan->count;
		plan->ops[plan->count++] = (struct haecer_msr_op){
			.kind = HAECER_MSR_READ, .cpu = cpu, .address = MSR_IA32_TSC};
	}
}

static int poll_refused(struct haecer_counter *counter, const struct poll_plan *plan, int error)
{
	const struct haecer_msr_op *refused = &plan->ops[plan->energy];
	const char *text = haecer_conn_error(counter->ctx->conn);

	/* A refused batch marks the refused op(s) and cancels the rest; a broken connection
	 * marks nothing. */
	for (size_t i = 0; i < plan->count; i++) {
		if (plan->ops[i].status != 0 && plan->ops[i].status != -ECANCELED) {
			refused = &plan->ops[i];
			break;
		}
	}
	if (plan->tsc >= 0 && refused == &plan->ops[plan->tsc])
		return haecer__fail(error, "energy regions on a simulated CPU in virtual time read "
				    "its TSC (MSR 0x10) through msrd: %s", text);
	return haecer__fail(error, "polling %s (MSR %#x) on CPU %u: %s", counter->info.name,
			    refused->address, counter->info.cpu, text);
}

/* One poll of the energy register under the context's lock: the one place that reads it (a
 * shared energy page could answer here instead). A policy that refuses MSR_SMI_COUNT only costs
 * the SMI count: the poll goes on without it. */
static int poll_locked(struct haecer_counter *counter, struct energy_sample *sample)
{
	const struct haecer_context *ctx = counter->ctx;
	struct poll_plan plan;
	const struct haecer_msr_op *energy;
	uint64_t before = 0;
	int error;

	sample->edge_lo = sample->edge_hi = 0;
	if (!haecer__energy_virtual_time(ctx)) {
		before = tsc_now(ctx);
		if (haecer__page_sample(counter, sample) == 0) {
			sample->before = before;
			sample->after = tsc_now(ctx);
			return 0;
		}
	}
	plan_poll(counter, &plan);
	if (plan.tsc < 0)
		before = tsc_now(ctx);
	error = haecer_msr_batch(counter->ctx->conn, plan.ops, plan.count);
	if (plan.tsc < 0) {
		sample->after = tsc_now(ctx);
		sample->before = before;
		/* The register was read somewhere in the round trip: its middle. */
		sample->tsc = before + (sample->after - before) / 2;
	} else {
		sample->tsc = sample->after = sample->before = plan.ops[plan.tsc].value;
	}
	if (error == -EPERM && plan.smi >= 0 && plan.ops[plan.smi].status == -EPERM &&
	    plan.ops[plan.energy].status == -ECANCELED) {
		counter->smi_unreadable = true;
		return poll_locked(counter, sample);
	}
	if (error < 0)
		return poll_refused(counter, &plan, error);
	for (size_t i = 0; i < plan.count; i++) {
		if (plan.ops[i].status < 0)
			return haecer__fail(plan.ops[i].status, "polling MSR %#x on CPU %u: %s",
					    plan.ops[i].address, counter->info.cpu,
					    haecer_strerror(plan.ops[i].status));
	}
	energy = &plan.ops[plan.energy];
	sample->total = haecer__fold_energy(counter, energy->value,
					    counter->ctx->energy_totals ? &energy->total : NULL);
	sample->smi = plan.smi >= 0 ? plan.ops[plan.smi].value : 0;
	sample->smi_exact = plan.smi >= 0;
	return haecer__continuity_error(counter);
}

static int poll_once(struct haecer_counter *counter, struct energy_sample *sample)
{
	struct haecer_context *ctx;
	int error = haecer__counter_lock(counter, &ctx);

	if (error < 0)
		return error;
	error = poll_locked(counter, sample);
	pthread_mutex_unlock(&ctx->lock);
	return error;
}

/* An update seen: `before` is the last poll that did not show it, `after` the first that did. */
struct update_seen {
	struct energy_sample before, after;
	uint64_t tsc;               /* estimate: the middle of its bracket */
	uint64_t bracket;           /* ticks it is known to: between the two polls, or msrd's
				     * bracket on an energy page */
	bool from_page;             /* the bracket is msrd's (precise edges) */
	bool extrapolated;          /* tsc counted back from a later, sharp update */
	uint64_t anchor_bracket;    /* when extrapolated: that update's bracket */
};

/* A page bracket at most this wide is sharp (msrd's precise windows read every few us; a wider
 * one is a window that missed its update). */
#define PAGE_SHARP_NS 20000ull
/* A page bracket at most this wide is at least placed on msrd's update grid (energy_edges_place:
 * 4 sigmas of the grid's spread, at most +-50 us): its time is known to tens of microseconds,
 * enough to place a region's pause and to bound its tail, not to take as a region's start. */
#define PAGE_PLACED_NS 100000ull

/* The typical time between two polls (a moving average over about 16), the yardstick of a
 * sharp detection. */
static void note_gap(struct haecer_counter *counter, uint64_t gap)
{
	uint64_t typical = __atomic_load_n(&counter->typical_gap, __ATOMIC_RELAXED);

	/* Threads of one package share the counter: a lost race only loses one sample. */
	typical = typical == 0 ? gap : typical - typical / 16 + gap / 16;
	__atomic_store_n(&counter->typical_gap, typical, __ATOMIC_RELAXED);
}

static bool sharp(const struct haecer_counter *counter, const struct update_seen *seen)
{
	uint64_t slack = counter->ctx->machine.tsc_hz * SHARP_SLACK_NS / 1000000000ull;

	if (seen->from_page)
		return seen->bracket <= counter->ctx->machine.tsc_hz * PAGE_SHARP_NS / 1000000000ull;
	return seen->bracket <=
	       SHARP_FACTOR * __atomic_load_n(&counter->typical_gap, __ATOMIC_RELAXED) + slack;
}

/* Nothing but the update happened between the two polls: no SMI stretched them. */
static bool clean(const struct update_seen *seen)
{
	/* A poll from the energy page has no count (the region reads it by round trip at its
	 * two ends instead): unknown, not a change. */
	return !seen->after.smi_exact || !seen->before.smi_exact ||
	       seen->after.smi == seen->before.smi;
}

/* Poll until the register differs from `from` (a poll already taken). */
static int wait_for_update(struct haecer_counter *counter, const struct energy_sample *from,
			   struct update_seen *seen)
{
	uint64_t deadline = clock_monotonic_raw_ns() + HAECER_ENERGY_TIMEOUT_MS * 1000000ull;
	int error;

	seen->before = *from;
	seen->extrapolated = false;
	for (;;) {
		error = poll_once(counter, &seen->after);
		if (error < 0)
			return error;
		if (seen->after.edge_hi == 0)
			note_gap(counter, seen->after.tsc - seen->before.tsc);
		if (seen->after.total != seen->before.total)
			break;
		seen->before = seen->after;
		if (clock_monotonic_raw_ns() > deadline)
			return haecer__fail(-ETIMEDOUT, "%s on CPU %u did not change for %u ms",
					    counter->info.name, counter->info.cpu,
					    HAECER_ENERGY_TIMEOUT_MS);
	}
	/* msrd's bracket of the change when the page has one and it is this change's (the page
	 * showed the total before it at the previous poll); else the two polls around it. */
	seen->from_page = seen->after.edge_hi != 0 && seen->after.edge_hi >= seen->after.edge_lo &&
			  (seen->before.edge_hi == 0 || seen->before.edge_hi <= seen->after.edge_lo);
	if (seen->from_page) {
		seen->bracket = seen->after.edge_hi - seen->after.edge_lo;
		seen->tsc = seen->after.edge_lo + seen->bracket / 2;
	} else {
		seen->bracket = seen->after.tsc - seen->before.tsc;
		seen->tsc = seen->before.tsc + seen->bracket / 2;
	}
	return 0;
}

/* msrd runs a connection's precise windows only within its lease (150 ms, server/energy_edges.c)
 * of the connection's last request, so that a program that measured once does not keep msrd
 * spinning on its package. Regions and estimates renew it by a round trip (one read of the
 * register) when none was made for half a lease; a renewal after a lapse restarts the windows,
 * and the updates before their first window are bracketed only as wide as the page's sampling
 * (regions wait for a sharp one; estimates fall back to the reading's own doubt). */
#define LEASE_RENEW_NS 75000000ull

static void lease_renewed(struct haecer_context *ctx)
{
	__atomic_store_n(&ctx->lease_renewed_ns, clock_monotonic_raw_ns(), __ATOMIC_RELAXED);
}

/* A renewal now (a register read): `region_edges_us` > 0 says a region begins, whose windows
 * msrd pauses after that long (-EOPNOTSUPP: this msrd cannot). */
static int lease_renew_now(struct haecer_counter *counter, uint32_t region_edges_us)
{
	struct haecer_context *ctx;
	int error;

	/* The connection carries one request at a time: another thread's round trip on this
	 * context must not interleave its frames with ours. */
	error = haecer__counter_lock(counter, &ctx);
	if (error < 0)
		return error;
	if (region_edges_us > 0)
		error = haecer__energy_read_region(ctx->conn, counter->info.cpu,
						   counter->info.counter_address, region_edges_us);
	else
		error = haecer_energy_read(ctx->conn, counter->info.cpu,
					   counter->info.counter_address, NULL, NULL);
	pthread_mutex_unlock(&ctx->lock);
	if (error == 0)
		lease_renewed(ctx);
	return error;
}

void haecer__energy_lease_renew(struct haecer_counter *counter)
{
	struct haecer_context *ctx = counter->ctx;
	uint64_t now = clock_monotonic_raw_ns();

	if (haecer__energy_virtual_time(ctx) ||
	    now - __atomic_load_n(&ctx->lease_renewed_ns, __ATOMIC_RELAXED) < LEASE_RENEW_NS)
		return;
	lease_renew_now(counter, 0);
}

/* Regions pause msrd's windows through their bodies (WIRE_ENERGY_READ_REGION): a window per
 * update costs msrd ~5 % of a CPU on the package being measured, and inside a body no update is
 * waited for (bench/fidelity: the energy msrd's CPU added to regions' bodies, worst condition,
 * 5.1 -> 2.1 % of their energy with the pause 6 ms after the start's request, 0.8-1.75 % over
 * seven runs with it placed from the page as below).
 *
 * The start asks before its waits, for its own two updates and the body's first (a 1 ms
 * region's closing update is that one): from the page's last edge, the third update after the
 * first a window can still catch (REGION_EDGES_LATE_NS on: the request's round trip and the
 * window's margin), and half an update more. Where starts are slow (the last took over
 * REGION_EDGES_SLOW_NS: valgrind makes one last ten times as long), no sooner than half as long
 * again as the last one took. (That floor on every start, 1.5 times a native start's
 * 1-2.5 ms, often reached past the body's first update into its second: a window more in every
 * long body.) No pause while the page's last edge is known only to the sampler's period (wider
 * than PAGE_PLACED_NS): the windows have not found the grid yet (a first region); nor
 * when it is old (the lease lapsed: the windows may have to search again). The end's first
 * request ends the pause, and the closing update of a longer body gets its window again unless
 * the end call came within a window's margin of it (then it is placed from a later sharp
 * update, or its wide bracket counts in the +-).
 *
 * The last edge need not be sharp, only known to the grid: msrd places a blurred one from its
 * grid to a few tens of microseconds (energy_edges_place), and the pause has half an update to
 * spare. Only sharp ones at first (PAGE_SHARP_NS): a start after a window that missed asked no
 * pause, and its body kept a window per update (bench/fidelity: 3 % of starts on a quiet host,
 * 10-14 % on a busy one, each 10 ms body then 300-400 us of msrd's CPU more). */
#define REGION_EDGES_MAX_US 100000u
#define REGION_EDGES_LATE_NS 150000ull
#define REGION_EDGES_STALE_NS 5000000ull /* a last edge older: the windows have stopped */
#define REGION_EDGES_SLOW_NS 4000000ull

/* 0: no pause (the windows are not locked on the grid). */
static uint32_t region_edges_us(struct haecer_counter *counter)
{
	const struct haecer_context *ctx = counter->ctx;
	uint64_t last = __atomic_load_n(&ctx->region_start_ns, __ATOMIC_RELAXED);
	uint64_t tsc_hz = ctx->machine.tsc_hz;
	uint64_t update = tsc_hz * RAPL_UPDATE_NS / 1000000000ull;
	uint64_t late = tsc_hz * REGION_EDGES_LATE_NS / 1000000000ull;
	uint64_t us = last > REGION_EDGES_SLOW_NS ? last * 3 / 2 / 1000 : 0;
	uint64_t next, behind, until;
	struct energy_sample sample;

	if (tsc_hz == 0 || poll_once(counter, &sample) < 0 || sample.edge_hi == 0 ||
	    sample.edge_hi < sample.edge_lo || sample.edge_hi > sample.after ||
	    sample.edge_hi - sample.edge_lo > tsc_hz * PAGE_PLACED_NS / 1000000000ull ||
	    sample.after - sample.edge_hi > tsc_hz * REGION_EDGES_STALE_NS / 1000000000ull)
		return 0;
	next = sample.edge_hi + update;
	behind = sample.after + late > next ? sample.after + late - next : 0;
	next += (behind + update - 1) / update * update;
	until = next + 2 * update + update / 2 - sample.after;
	if (until * 1000000ull / tsc_hz > us)
		us = until * 1000000ull / tsc_hz;
	return us > REGION_EDGES_MAX_US ? REGION_EDGES_MAX_US : (uint32_t)us;
}

/* `now`: renew even within half a lease of the last renewal (a start that takes its windows
 * back from a pause). */
static void region_lease(struct haecer_counter *counter, bool now)
{
	struct haecer_context *ctx = counter->ctx;
	uint32_t us = ctx->energy_exact ? 0 : region_edges_us(counter);
	uint64_t asked = clock_monotonic_raw_ns();

	if (us == 0 || lease_renew_now(counter, us) < 0) {
		/* No pause (or an msrd without): windows for the lease, as before. */
		if (now)
			lease_renew_now(counter, 0);
		else
			haecer__energy_lease_renew(counter);
		return;
	}
	__atomic_store_n(&ctx->edges_pause_ns, asked + us * 1000ull, __ATOMIC_RELAXED);
}

/* A start whose update was not sharp waits for the next one: when that comes after the pause
 * asked for (an SMI blurred one of its updates: about one start in twenty on a quiet host, which
 * then took a sampler's bracket, 1 ms wide, as its start), the windows are asked again now, with
 * a pause placed anew from the update just seen (region_lease). Without a new pause this
 * region's body kept a window per update for the whole lease. */
static void start_keeps_windows(struct haecer_counter *counter)
{
	struct haecer_context *ctx = counter->ctx;
	uint64_t next = clock_monotonic_raw_ns() + RAPL_UPDATE_NS + REGION_EDGES_LATE_NS;
	uint64_t pause = __atomic_load_n(&ctx->edges_pause_ns, __ATOMIC_RELAXED);

	if (pause != 0 && next >= pause &&
	    __atomic_compare_exchange_n(&ctx->edges_pause_ns, &pause, 0, false, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
		region_lease(counter, true);
}

/* The end: windows again at once if a start paused them (a round trip, in the wait). */
static void region_end_lease(struct haecer_counter *counter)
{
	if (__atomic_exchange_n(&counter->ctx->edges_pause_ns, 0, __ATOMIC_RELAXED) != 0 &&
	    lease_renew_now(counter, 0) == 0)
		return;
	haecer__energy_lease_renew(counter);
}

/* MSR_SMI_COUNT by round trip, for polls that came from the energy page (which has no SMI
 * count): the count stays unknown when the model has none or the policy refuses it. */
static void smi_poll(struct haecer_counter *counter, struct energy_sample *sample)
{
	const struct haecer_context *ctx = counter->ctx;
	struct haecer_msr_op op;
	struct haecer_context *locked;
	int error;

	if (sample->smi_exact || !haecer__smi_op(counter, &op))
		return;
	error = haecer__counter_lock(counter, &locked);
	if (error < 0)
		return;
	error = haecer_msr_batch(locked->conn, &op, 1);
	pthread_mutex_unlock(&locked->lock);
	if (error == -EPERM || op.status == -EPERM)
		counter->smi_unreadable = true;
	if (error < 0 || op.status < 0)
		return;
	sample->smi = op.value;
	sample->smi_exact = true;
	sample->after = tsc_now(ctx);
	/* Not a renewal: msrd leases windows for 150 ms on an ENERGY_READ only, any other request
	 * only for 6 ms (server/energy_edges.h). */
}

/* Poll once, then until the next update. */
static int next_update(struct haecer_counter *counter, struct update_seen *seen)
{
	struct energy_sample first;
	int error = poll_once(counter, &first);

	if (error < 0)
		return error;
	return wait_for_update(counter, &first, seen);
}

int haecer__energy_check_counter(struct haecer_counter *counter)
{
	struct haecer_context *ctx;
	int error = haecer__counter_lock(counter, &ctx);

	if (error < 0)
		return error;
	if (counter->info.kind != HAECER_COUNTER_ENERGY)
		error = haecer__fail(-EINVAL, "%s is not an energy counter", counter->info.name);
	else
		counter->wants_precise = true; /* regions and estimates: the page's precise edges */
	pthread_mutex_unlock(&ctx->lock);
	return error;
}

/* Energy per TSC tick between two seen updates, and how far off it can be (power_doubt): each
 * update time is known to half its bracket, each total to one unit. A wide bracket (a window
 * that missed, a preempted poll) makes a wide doubt, never a silent one. */
struct power {
	double per_tick;
	double doubt_per_tick;
};

static int power_between(const struct haecer_counter *counter, const struct update_seen *from,
			 const struct update_seen *to, struct power *power)
{
	double ticks, halves, energy, tsc_hz = (double)counter->ctx->machine.tsc_hz;

	if (to->tsc <= from->tsc)
		return haecer__fail(-EIO, "the TSC did not advance while %s updated",
				    counter->info.name);
	ticks = (double)(to->tsc - from->tsc);
	halves = (double)(from->bracket / 2 + to->bracket / 2);
	energy = (double)(to->after.total - from->after.total) * counter->info.unit;
	power->per_tick = energy / ticks;
	power->doubt_per_tick = haecer__power_doubt(energy, counter->info.unit, ticks, halves,
					    tsc_hz > 0.0 ? haecer__energy_max_watts(counter) / tsc_hz : 0.0);
	return 0;
}

int haecer_energy_calibrate(struct haecer_counter *energy, unsigned updates,
			    double *joules_per_tick)
{
	struct update_seen start, current;
	struct haecer_context *ctx;
	struct power power = { 0 };
	int error;

	haecer__clear_detail();
	error = haecer__energy_check_counter(energy);
	if (error < 0)
		return error;
	if (updates == 0)
		updates = CALIBRATION_UPDATES;
	if (updates > CALIBRATION_MAX_UPDATES)
		return haecer__fail(-EINVAL, "calibrate over 1 to %u updates",
				    CALIBRATION_MAX_UPDATES);
	haecer__energy_lease_renew(energy);
	error = next_update(energy, &start);
	current = start;
	for (unsigned i = 0; i < updates && error == 0; i++) {
		struct energy_sample from = current.after;

		error = wait_for_update(energy, &from, &current);
	}
	if (error == 0)
		error = power_between(energy, &start, &current, &power);
	if (error < 0)
		return error;
	error = haecer__counter_lock(energy, &ctx);
	if (error < 0)
		return error;
	energy->joules_per_tick = power.per_tick;
	energy->calibrated = true;
	pthread_mutex_unlock(&ctx->lock);
	if (joules_per_tick != NULL)
		*joules_per_tick = power.per_tick;
	return 0;
}

/* Until `at` is an update whose time is known: a blurred detection (a preempted poll) or one an
 * SMI stretched waits for the next update instead (at most SHARP_TRIES). Regions' starts only. */
static int sharp_update(struct haecer_counter *energy, struct update_seen *at)
{
	int error = 0;

	for (unsigned tries = 1; error == 0 && tries < SHARP_TRIES && !(sharp(energy, at) &&
	     clean(at)); tries++) {
		struct energy_sample from = at->after;

		start_keeps_windows(energy);
		error = wait_for_update(energy, &from, at);
	}
	return error;
}

int haecer_energy_start(struct haecer_counter *energy, struct haecer_energy_region *region)
{
	struct update_seen at, before;
	struct power power = { 0 };
	struct energy_sample smi_before = { 0 };
	uint64_t began = clock_monotonic_raw_ns();
	int error;

	haecer__clear_detail();
	if (region == NULL)
		return haecer__fail(-EINVAL, "no region");
	region->active = false;
	error = haecer__energy_check_counter(energy);
	if (error == 0)
		haecer__smi_prepare(energy);
	/* Polls from the energy page carry no SMI count: it is read by round trip before the
	 * wait for the start update (after it, the round trip would stand between the update
	 * and the region: a lead of tens of microseconds at a guessed power). An SMI during the
	 * wait is then counted against the region too: filtered, never missed. */
	if (error == 0 && !haecer__energy_virtual_time(energy->ctx)) { /* virtual time: no pages */
		smi_poll(energy, &smi_before);
		region_lease(energy, false);
	}
	if (error == 0)
		error = next_update(energy, &at);
	if (error == 0)
		error = sharp_update(energy, &at);
	/* The power before the region, from the update interval that ends at its start update:
	 * with the power after it, what the lead and the wait are counted at (the power of a
	 * package follows its load: one side alone can be far off). */
	before = at;
	if (error == 0)
		error = wait_for_update(energy, &before.after, &at);
	if (error == 0)
		error = sharp_update(energy, &at);
	if (error == 0)
		error = power_between(energy, &before, &at, &power);
	if (error < 0)
		return error;
	region->before_per_tick = power.per_tick;
	region->before_doubt_per_tick = power.doubt_per_tick;
	if (!at.after.smi_exact && smi_before.smi_exact) {
		at.after.smi = smi_before.smi;
		at.after.smi_exact = true;
	}
	region->start_total = at.after.total;
	region->start_update_tsc = at.tsc;
	region->start_bracket = at.bracket;
	region->start_tsc = at.after.after;
	region->start_poll_tsc = at.after.after;
	region->start_smi = at.after.smi;
	region->active = true;
	haecer__energy_cost_start(energy, region);
	__atomic_store_n(&energy->ctx->region_start_ns, clock_monotonic_raw_ns() - began,
			 __ATOMIC_RELAXED);
	return 0;
}

/* A blurred closing update (its polls were far apart: msrd or this thread was preempted) is
 * placed by counting back from the first sharp update after it: k updates of about 1 ms each,
 * k from the energy between them at the measured power. The two updates' own jitter (+-20 us on
 * the thesis's machine) and the later one's half bracket are then the error, instead of up to
 * the whole blur. Only from an update that is itself sharp, at a power measured between sharp
 * updates: counting back from a blurred one moves the closing update by up to its blur while
 * stating only the jitter (seen on a loaded host: 120 us off, +-50 us stated). */
static void closing_estimate(const struct haecer_counter *energy, struct update_seen *closing,
			     const struct update_seen *sharp_one, bool power_sharp,
			     double per_tick)
{
	double update_ticks = (double)energy->ctx->machine.tsc_hz * (double)RAPL_UPDATE_NS / 1e9;
	double updates;
	uint64_t back, lo, hi;

	if ((sharp(energy, closing) && clean(closing)) || sharp_one->tsc == closing->tsc ||
	    !sharp(energy, sharp_one) || !clean(sharp_one) || !power_sharp || per_tick <= 0.0)
		return;
	updates = (double)(sharp_one->after.total - closing->after.total) * energy->info.unit /
		  (per_tick * update_ticks);
	back = (uint64_t)llround(updates) * (uint64_t)llround(update_ticks);
	/* Where the update can have been: between the two polls around it, or inside msrd's
	 * bracket when it came from the energy page. */
	lo = closing->from_page ? closing->after.edge_lo : closing->before.before;
	hi = closing->from_page ? closing->after.edge_hi : closing->after.after;
	if (updates < 0.5 || back >= sharp_one->tsc || sharp_one->tsc - back < lo ||
	    sharp_one->tsc - back > hi)
		return; /* the count does not fit the polls: keep the middle */
	closing->tsc = sharp_one->tsc - back;
	closing->extrapolated = true;
	closing->anchor_bracket = sharp_one->bracket;
}

/* The power outside the region, from the averages observed before the start update, after
 * the closing one and over the span. The register shows only whole intervals' averages, and
 * the wait's power can lie beyond them (bench/fidelity: every miss was its wait, up to 2.2
 * spreads beyond, or at the maximum). So the bound is an interval: their range widened by
 * WIDEN_SPREAD spreads on each side, cut to 0 and the domain's maximum (all of that when they
 * disagree); the estimate is their middle (the spread alone was off by up to 4x its +-). */
#define WIDEN_SPREAD 2.0

static void outside_power(const struct haecer_energy_region *region,
			  const struct update_seen *closing, double raw_joules, double max_per_tick,
			  const struct power *after, struct power *outside,
			  struct haecer_energy_result *result)
{
	double lo = fmin(region->before_per_tick, after->per_tick);
	double hi = fmax(region->before_per_tick, after->per_tick);
	double own = fmax(region->before_doubt_per_tick, after->doubt_per_tick);
	double span = NAN, floor, ceiling;

	if (closing->tsc > region->start_update_tsc) {
		span = raw_joules / (double)(closing->tsc - region->start_update_tsc);
		lo = fmin(lo, span);
		hi = fmax(hi, span);
	}
	outside->per_tick = (lo + hi) / 2.0;
	result->power_changed = hi - lo > 2.0 * own;
	/* Averages that disagree: the power moved faster than the register shows (quiet host:
	 * waits ran at the maximum with every average near half of it). */
	floor = result->power_changed ? 0.0 : fmax(lo - WIDEN_SPREAD * (hi - lo), 0.0);
	ceiling = hi + WIDEN_SPREAD * (hi - lo);
	if (max_per_tick > hi)
		ceiling = result->power_changed ? max_per_tick : fmin(ceiling, max_per_tick);
	outside->doubt_per_tick =
		fmax(ceiling - outside->per_tick, outside->per_tick - floor) + own;
	result->before_joules_per_tick = region->before_per_tick;
	result->after_joules_per_tick = after->per_tick;
	result->span_joules_per_tick = span;
	if (result->power_changed)
		result->doubt_reasons |= HAECER_ENERGY_DOUBT_POWER_CHANGED;
}

/* The lead's power is bounded by what the package can draw (0 to the domain's maximum), not
 * by the powers observed around the region (region_result). */
static double lead_doubt_per_tick(const struct haecer_counter *energy, double per_tick,
				  double doubt_per_tick)
{
	double tsc_hz = (double)energy->ctx->machine.tsc_hz;
	double max_per_tick = tsc_hz > 0.0 ? haecer__energy_max_watts(energy) / tsc_hz : 0.0;

	return fmax(doubt_per_tick, fmax(per_tick, max_per_tick - per_tick));
}

/* The update before the end call, when msrd's page bracketed it (first: the end's first poll;
 * sharp or placed, PAGE_PLACED_NS: its half bracket is counted at the domain's maximum power),
 * bounds the region from the other side: its energy is the register up to that update plus
 * the tail from it to the call, and the tail ran the caller's own code, whose power nobody
 * observed apart from the span's average: anything from 0 to the domain's maximum. The region
 * lies in both intervals, the wait's (result) and this one, so in their intersection:
 * where the tail is short this one is the tighter, where the wait is short the wait's (the
 * tail at the observed polling powers stated +-55 uJ for a region 360 uJ off). Only the update
 * right before the closing one, half an interval after the start or more: a page whose bracket
 * is not its total's would put the region's end anywhere. Sharp ones only at first: a paused
 * body's last update comes from the page's sampler and is placed, never sharp, so 10 ms regions
 * whose closing update came a whole update after the call stated +-10 % (power_changed, the
 * wait at 0 to the maximum) where this bound gives +-0.4-1.1 % (bench/fidelity, quiet host). */
static void intersect_tail(const struct haecer_counter *energy,
			   const struct haecer_energy_region *region,
			   const struct energy_sample *first, uint64_t called,
			   const struct update_seen *closing, struct haecer_energy_result *result)
{
	struct update_seen previous = { .before = *first, .after = *first, .from_page = true };
	uint64_t update = energy->ctx->machine.tsc_hz * RAPL_UPDATE_NS / 1000000000ull;
	double max_per_tick = haecer__energy_max_watts(energy) / (double)energy->ctx->machine.tsc_hz;
	double unit = energy->info.unit, raw, lead_j, lead_doubt, lo, hi, own_lo, own_hi;

	if (first->edge_hi == 0 || first->edge_hi < first->edge_lo || max_per_tick <= 0.0 ||
	    first->total == region->start_total || first->total == closing->after.total)
		return;
	previous.bracket = first->edge_hi - first->edge_lo;
	previous.tsc = first->edge_lo + previous.bracket / 2;
	if (previous.bracket > energy->ctx->machine.tsc_hz * PAGE_PLACED_NS / 1000000000ull ||
	    previous.tsc >= called ||
	    previous.tsc - region->start_update_tsc < update / 2 || closing->tsc <= previous.tsc ||
	    closing->tsc - previous.tsc < update / 2 || closing->tsc - previous.tsc > update * 3 / 2)
		return;
	raw = (double)(first->total - region->start_total) * unit;
	lead_j = (double)result->lead_ticks * result->joules_per_tick;
	lead_doubt = (double)result->lead_ticks *
		     lead_doubt_per_tick(energy, result->joules_per_tick, 0.0);
	/* The lead as the wait's bound counts it, the tail and both ends' half brackets at
	 * anything from 0 to the maximum power, the units. */
	lo = raw - lead_j - lead_doubt -
	     (double)(region->start_bracket / 2 + previous.bracket / 2) * max_per_tick - 2.0 * unit;
	hi = raw - lead_j + lead_doubt + (double)(called - previous.tsc + previous.bracket / 2 +
				   region->start_bracket / 2) * max_per_tick + 2.0 * unit;
	own_lo = result->joules - result->uncertainty_joules;
	own_hi = result->joules + result->uncertainty_joules;
	if (hi <= own_lo || lo >= own_hi)
		return; /* disjoint: one of them does not hold; keep the wider wait's */
	lo = fmax(lo, own_lo);
	hi = fmin(hi, own_hi);
	/* The estimate stays the wait's (the power observed around the region), moved only as far
	 * as needed into the intersection, and the +- reaches both of its ends: the middle of an
	 * interval that is anything the package can draw is a worse estimate than the observed
	 * power (bench/fidelity, quiet host: 300 us regions' p95 error 18 % -> 84 % with it). */
	result->joules = fmin(fmax(result->joules, lo), hi);
	result->uncertainty_joules = fmax(result->joules - lo, hi - result->joules);
}

static void region_result(const struct haecer_counter *energy,
			  const struct haecer_energy_region *region, uint64_t called,
			  const struct update_seen *closing, const struct power *power,
			  struct haecer_energy_result *result)
{
	uint64_t tsc_hz = energy->ctx->machine.tsc_hz;
	double unit = energy->info.unit, per_tick = power->per_tick;
	uint64_t lead = region->start_tsc > region->start_update_tsc ?
				region->start_tsc - region->start_update_tsc : 0;
	/* How far each update estimate can be off: half its bracket (the gap between its two
	 * polls, or msrd's bracket on a page with precise edges); counted back, the jitter of
	 * two updates and the half bracket of the one counted from. */
	uint64_t jitter = energy->ctx->machine.tsc_hz * RAPL_UPDATE_LATE_NS / 1000000000ull;
	uint64_t blur = (closing->extrapolated ? jitter + closing->anchor_bracket / 2
					       : closing->bracket / 2) +
			region->start_bracket / 2;

	struct power outside;

	memset(result, 0, sizeof(*result));
	result->raw_joules = (double)(closing->after.total - region->start_total) * unit;
	outside_power(region, closing, result->raw_joules,
		      tsc_hz ? haecer__energy_max_watts(energy) / (double)tsc_hz : 0.0, power,
		      &outside, result);
	per_tick = outside.per_tick;
	result->joules_per_tick = per_tick;
	result->wait_ticks = closing->tsc > called ? closing->tsc - called : 0;
	result->tail_ticks = closing->tsc < called ? called - closing->tsc : 0;
	result->lead_ticks = lead;
	result->wait_joules =
		((double)(result->wait_ticks + lead) - (double)result->tail_ticks) * per_tick;
	result->joules = result->raw_joules - result->wait_joules;
	/* The units, the update times' blur at the power (which may be off itself), the power's
	 * doubt (its spread around the region and its own) over the wait and tail it is counted
	 * for, and over the lead anything the package can draw: the lead is the start's return
	 * path, not the polling loop the powers were measured on, and a preempted client makes it
	 * milliseconds of other processes' power (bench/fidelity, one other busy process: leads of
	 * 0.9-5 ms off by up to 11.6 mJ). A lead of a few microseconds costs little this way. */
	result->uncertainty_joules =
		2.0 * unit + (double)blur * (per_tick + outside.doubt_per_tick) +
		(double)(result->wait_ticks + result->tail_ticks) * outside.doubt_per_tick +
		(double)lead * lead_doubt_per_tick(energy, per_tick, outside.doubt_per_tick);
	if (!sharp(energy, closing) && !closing->extrapolated)
		result->doubt_reasons |= HAECER_ENERGY_DOUBT_BLURRED;
	if (result->tail_ticks > 0)
		result->doubt_reasons |= HAECER_ENERGY_DOUBT_MSRD_LATE;
	result->reliable = result->doubt_reasons == 0;
	result->region_ticks = called - region->start_tsc;
	result->seconds = tsc_hz ? (double)result->region_ticks / (double)tsc_hz : 0.0;
	result->detected_wait_ticks = closing->after.tsc - called;
	result->start_tsc = region->start_tsc;
	result->first_poll_tsc = region->start_poll_tsc;
	result->last_poll_tsc = closing->after.after;
	result->end_tsc = called;
	result->smi_count_exact = closing->after.smi_exact;
	/* Counted from the start update to the closing one. */
	result->smi_count = closing->after.smi_exact ?
				    haecer__smi_between(energy, region->start_smi,
							closing->after.smi) :
				    HAECER_SMI_UNKNOWN;
	result->tsc_source = HAECER_MACHINE_TSC_SOURCE(energy->ctx->machine.flags);
	result->simulated = energy->ctx->simulated;
}

/* msrd's own work for the register between the end call and the closing update (its windows'
 * CPU as energy: the page's running sums, at the call and when the closing update was seen)
 * lands in the wait, which is counted at the powers observed around the region. Those hold a
 * window per update interval at most, spread over it; the wait holds the windows' restart and
 * its closing update's window whole. On a quiet host a 10 ms region whose wait was 1 ms drew
 * 0.35 mJ more in it than every average showed, 1.4 x its +- (bench/fidelity; msrd's sums said
 * 0.3-0.5 mJ in such waits). So the +- takes that energy in whole. */
static void wait_measurement_doubt(const struct haecer_energy_cost_mark *at_call,
				   const struct haecer_energy_cost_mark *at_closing, bool waited,
				   struct haecer_energy_result *result)
{
	if (!waited || !at_call->known || !at_closing->known || at_closing->nj < at_call->nj)
		return;
	result->uncertainty_joules += (double)(at_closing->nj - at_call->nj) * 1e-9;
}

int haecer_energy_end(struct haecer_counter *energy, struct haecer_energy_region *region,
		      struct haecer_energy_result *result)
{
	struct energy_sample first;
	struct haecer_energy_cost_mark cost = { 0 }, at_closing = { 0 };
	struct update_seen closing, from, next;
	struct haecer_context *ctx;
	uint64_t called = 0, wait_updates, stretch;
	struct power power = { 0 };
	int error;

	haecer__clear_detail();
	if (region == NULL || result == NULL || !region->active)
		return haecer__fail(-EINVAL, "no energy region was started");
	region->active = false;
	if (!haecer__energy_virtual_time(energy->ctx)) {
		called = tsc_now(energy->ctx);
		haecer__energy_cost_mark(energy, &cost);
		/* The windows again for the closing update (the start paused them, or the region
		 * outlasted the lease; their grid is kept); this round trip is part of the wait,
		 * subtracted with it. */
		region_end_lease(energy);
	}
	error = poll_once(energy, &first);
	if (error == 0 && haecer__energy_virtual_time(energy->ctx))
		called = first.tsc;
	if (error == 0)
		error = wait_for_update(energy, &first, &closing);
	if (error < 0)
		return error;
	if (cost.known)
		haecer__energy_cost_mark(energy, &at_closing);
	smi_poll(energy, &closing.after);
	/* The power of the same polling right after: between two sharp updates (the closing one
	 * or a later one, and a sharp one at least as far on as the stretch the power is used for
	 * is long — the wait, or the tail when the closing update came before the call — so that
	 * the blur of the two update times weighs no more on its energy than on one update's), at
	 * most SHARP_TRIES updates (plus the stretch's length in updates) on. */
	stretch = closing.tsc > called ? closing.tsc - called : called - closing.tsc;
	wait_updates = stretch / (energy->ctx->machine.tsc_hz / 1000u + 1);
	if (wait_updates > WAIT_UPDATES_MAX)
		wait_updates = WAIT_UPDATES_MAX;
	from = closing;
	next = closing;
	for (unsigned tries = 0; error == 0 && tries < SHARP_TRIES + wait_updates; tries++) {
		struct energy_sample last = next.after;

		error = wait_for_update(energy, &last, &next);
		if (error == 0 && !(sharp(energy, &from) && clean(&from)))
			from = next;
		else if (error == 0 && sharp(energy, &next) && clean(&next) &&
			 next.tsc - from.tsc >= stretch)
			break;
	}
	if (error == 0 && next.tsc == from.tsc)
		error = wait_for_update(energy, &next.after, &next);
	if (error == 0)
		error = power_between(energy, &from, &next, &power);
	if (error < 0)
		return error;
	/* On a loaded host the tries can run out before two sharp updates came: the power is
	 * then measured between blurred ones and its doubt says so. */
	closing_estimate(energy, &closing, &from,
			 sharp(energy, &from) && clean(&from) && sharp(energy, &next) && clean(&next),
			 power.per_tick);
	error = haecer__counter_lock(energy, &ctx);
	if (error < 0)
		return error;
	region_result(energy, region, called, &closing, &power, result);
	wait_measurement_doubt(&cost, &at_closing, closing.tsc > called, result);
	intersect_tail(energy, region, &first, called, &closing, result);
	energy->joules_per_tick = power.per_tick;
	energy->calibrated = true;
	pthread_mutex_unlock(&ctx->lock);
	haecer__energy_cost_result(region, &cost, result);
	return 0;
}
