/*
 * libclient/haecer_energy_reading.c — haecer_counter_read_energy: an energy reading with what
 * it cannot tell, and, from the update times msrd's precise edges give (server/energy_edges.c,
 * the energy page), an estimate of the energy at the moment of the read with its own
 * uncertainty. haecer_energy.c has the polls, the lease and the regions it builds on.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

/* haecer_counter_read_energy extrapolates only from updates bracketed at least this well: a
 * bracket's half is in the estimate's stated doubt, at the power and in the power's own doubt,
 * so a wider bracket costs a wider doubt, not a wrong value. At 50 us, a quarter of the
 * readings fell back to the register (off by up to a whole update) on a host whose timer wakes
 * came 60-150 us late, the windows that missed leaving brackets of 60-100 us (2026-11-28:
 * bench/fidelity's 100 ms reads, 26 of 60 with an estimate, p95 0.99 %); at 200 us the doubt is
 * at most about a third of an update. */
#define ESTIMATE_BRACKET_MAX_NS 200000ull

/* An update's time from the page: the middle of where msrd placed it inside its bracket (the
 * bracket, or the part of it the learnt update grid allows, server/energy_edges.c), with half
 * that as its doubt; the bracket's middle when msrd placed nothing. */
static uint64_t placed(uint64_t lo, uint64_t hi, uint64_t placed_lo, uint64_t placed_hi,
		       uint64_t *half)
{
	if (placed_lo != 0 && placed_lo >= lo && placed_hi <= hi && placed_hi >= placed_lo) {
		lo = placed_lo;
		hi = placed_hi;
	}
	*half = (hi - lo) / 2;
	return lo + *half;
}

/* The estimate of the energy at the moment of the read from a page reading with precise edges:
 * the total the last update brought, plus the power of the last update interval (its energy over
 * the time between the middles of its two brackets) times the time since the last update. The
 * uncertainty: the unit, the last update's half bracket at that power and its doubt, and the
 * power's own error from both brackets over the age; a change of power since the last update is
 * not in it (it cannot be seen before the next update). false when the reading has no such
 * edges. */
static bool estimate_now(const struct haecer_counter *counter,
			 const struct energy_page_reading *page, uint64_t value, uint64_t now_ns,
			 struct haecer_energy_reading *out)
{
	uint64_t edge, previous, half, previous_half, age;
	double unit = counter->info.unit, watts, seconds, watts_doubt, joules;

	if (page->update_lo_ns == 0 || page->previous_update_lo_ns == 0 ||
	    page->update_ns < page->update_lo_ns ||
	    page->previous_update_ns < page->previous_update_lo_ns ||
	    page->total < page->previous_total)
		return false;
	edge = placed(page->update_lo_ns, page->update_ns, page->update_placed_lo_ns,
		      page->update_placed_hi_ns, &half);
	previous = placed(page->previous_update_lo_ns, page->previous_update_ns,
			  page->previous_placed_lo_ns, page->previous_placed_hi_ns, &previous_half);
	/* Only brackets of a window's or a search's reads (the page sampler's alone can be a
	 * whole update wide), an interval of about one update (+-20 %), and a reading that is the
	 * page's own total. */
	if (2 * half > ESTIMATE_BRACKET_MAX_NS || 2 * previous_half > ESTIMATE_BRACKET_MAX_NS ||
	    edge <= previous || edge - previous > RAPL_UPDATE_NS * 6 / 5 ||
	    edge - previous < RAPL_UPDATE_NS * 4 / 5 ||
	    (value & RAPL_ENERGY_COUNTER_MASK) != (page->total & RAPL_ENERGY_COUNTER_MASK))
		return false;
	seconds = (double)(edge - previous) / 1e9;
	joules = (double)(page->total - page->previous_total) * unit;
	watts = joules / seconds;
	age = now_ns > edge ? now_ns - edge : 0;
	out->estimated = true;
	out->update_age_ns = age;
	out->update_bracket_ns = 2 * half;
	/* Each edge is known to half its bracket, and each total to one unit. */
	watts_doubt = haecer__power_doubt(joules, unit, seconds, (double)(half + previous_half) / 1e9,
				  haecer__energy_max_watts(counter));
	out->estimate_joules = out->joules + watts * (double)age / 1e9;
	/* The update's time is known to half its bracket at the true power, which may be as high
	 * as the power's own doubt allows. */
	out->estimate_uncertainty_joules =
		unit + (watts + watts_doubt) * (double)half / 1e9 + watts_doubt * (double)age / 1e9;
	out->watts_last_update = watts;
	out->watts_last_update_uncertainty = watts_doubt;
	return true;
}

/* The simulated time in virtual time, from the simulated TSC read through msrd. There time moves
 * only when a client advances it (and by --sim-access-step-ns per register access), so
 * CLOCK_MONOTONIC_RAW says nothing about how long a span of simulated energy was: a client
 * preempted between two reads would divide their energy by its own delay. */
static int virtual_now_ns(const struct haecer_counter *counter, uint64_t *ns)
{
	uint64_t tsc_hz = counter->ctx->machine.tsc_hz, tsc;
	struct haecer_context *ctx;
	int error;

	if (tsc_hz == 0)
		return -ENODATA;
	error = haecer__counter_lock(counter, &ctx);
	if (error < 0)
		return error;
	error = haecer_msr_read(ctx->conn, counter->info.cpu, MSR_IA32_TSC, &tsc);
	pthread_mutex_unlock(&ctx->lock);
	if (error < 0)
		return error;
	*ns = (uint64_t)((unsigned __int128)tsc * 1000000000ull / tsc_hz);
	return 0;
}

int haecer_counter_read_energy(struct haecer_counter *counter,
			       struct haecer_energy_reading *out)
{
	struct haecer_context *ctx;
	struct energy_page_reading page = { 0 };
	struct energy_page_total lean;
	uint64_t value, before, after, age = 0, at, doubt, previous_value, previous_ns;
	double watts, max_watts;
	bool from_page, virtual, dated = true;
	int error;

	haecer__clear_detail();
	if (out == NULL)
		return haecer__fail(-EINVAL, "no reading to fill");
	error = haecer__energy_check_counter(counter);
	if (error < 0)
		return error;
	haecer__energy_lease_renew(counter);
	/* In virtual time the reading is dated by the simulated clock on both sides of it (there
	 * are no pages there); when the policy refuses the TSC it is not dated at all and the
	 * power falls back to the domain's maximum. */
	virtual = haecer__energy_virtual_time(counter->ctx);
	if (virtual)
		dated = virtual_now_ns(counter, &before) == 0;
	else
		before = clock_monotonic_raw_ns();
	error = haecer_counter_read_aged(counter, &value, &age);
	if (error < 0)
		return error;
	if (!virtual) {
		after = clock_monotonic_raw_ns();
	} else if (dated && virtual_now_ns(counter, &after) == 0) {
		/* A round trip (no pages): read somewhere between the two. */
		age = (after - before) / 2;
	} else {
		dated = false;
		before = after = age = 0;
	}
	error = haecer__counter_lock(counter, &ctx);
	if (error < 0)
		return error;
	/* When the value was true: msrd's sample behind a page reading, else somewhere in the
	 * round trip (its whole length is the doubt). */
	at = after > age ? after - age : 0;
	from_page = counter->reading_dated;
	/* The page's brackets for the estimate: a full reading of the entry (the lean read of
	 * readCounter carries only the total and its time). */
	if (from_page && haecer__page_reading(counter, &lean, &page) < 0)
		from_page = false;
	doubt = counter->reading_dated ? after - at : after - before;
	previous_value = counter->energy_previous_value;
	previous_ns = counter->energy_previous_ns;
	counter->energy_previous_value = value;
	counter->energy_previous_ns = dated ? at : 0;
	max_watts = haecer__energy_max_watts(counter);
	pthread_mutex_unlock(&ctx->lock);
	/* The typical power of one update interval: from the previous reading when it is long
	 * enough ago (10 updates) to average out the steps, else the domain's maximum. It is not
	 * the bound of a difference: each end misses the energy since its last update at the
	 * power of that moment, which a load that changes within milliseconds puts well above the
	 * average (test_energy_accuracy's scripted load: 1.35 updates at the average power). */
	watts = max_watts;
	if (dated && previous_ns && at > previous_ns && at - previous_ns >= 10 * RAPL_UPDATE_NS &&
	    value >= previous_value)
		watts = (double)(value - previous_value) * counter->info.unit /
			((double)(at - previous_ns) / 1e9);
	memset(out, 0, sizeof(*out));
	out->value = value;
	out->joules = (double)value * counter->info.unit;
	/* The bound: as old as the value can be (an update interval at its longest, and how old
	 * msrd's sample behind it was, or the round trip) at the domain's maximum power. An
	 * update interval alone was exceeded by up to 21x under load-following power on a loaded
	 * host, where msrd's page samples were late (issue 23). */
	out->age_max_ns = RAPL_UPDATE_NS + RAPL_UPDATE_LATE_NS + doubt;
	out->update_joules = haecer__difference_doubt(counter, watts, doubt);
	out->watts_estimated = watts;
	/* The read happened between before and after: the page's copy is the latest ~100 ns. */
	if (!from_page || !estimate_now(counter, &page, value, after, out)) {
		out->estimate_joules = out->joules;
		out->estimate_uncertainty_joules = out->update_joules;
	} else {
		/* The power since the last update is not known: anywhere from none to the
		 * domain's maximum, so the extrapolation at the last interval's power can be off
		 * by the larger distance to either over the update's age. */
		out->estimate_uncertainty_joules +=
			fmax(out->watts_last_update, max_watts - out->watts_last_update) *
			(double)out->update_age_ns / 1e9;
	}
	return 0;
}

/* How far the power energy / span can be from the truth when the span's two ends are each
 * known to half a bracket (halves: the two halves together) and the energy to one unit at each
 * end (a register floors what it counts): the larger distance to the highest power those allow,
 * (energy + unit) / (span - halves), and to the lowest, (energy - unit) / (span + halves). The
 * first-order doubt, power x halves / span, understates the high side, and badly when the
 * brackets are a sizeable part of the span: under valgrind (brackets of 0.5-1 ms over 1.5 ms)
 * 20 W was read at a constant 30 W with 7 W stated. Brackets that leave no span allow any
 * power up to the domain's maximum (max_power, in the same units; 0 when unknown). */
double haecer__power_doubt(double energy, double unit, double span, double halves,
			  double max_power)
{
	double power = energy / span;
	double high = halves < span ? (energy + unit) / (span - halves) : HUGE_VAL;
	double low = energy > unit ? (energy - unit) / (span + halves) : 0.0;

	if (max_power > 0.0)
		high = fmin(high, fmax(max_power, power));
	return fmax(high - power, power - low);
}

double haecer__difference_doubt(const struct haecer_counter *counter, double watts,
				uint64_t doubt_ns)
{
	double age_s = (double)(RAPL_UPDATE_NS + RAPL_UPDATE_LATE_NS + doubt_ns) / 1e9;

	return fmax(haecer__energy_max_watts(counter), watts) * age_s + counter->info.unit;
}

/* The domain's maximum power in watts (PKG_POWER_INFO or msrd's default), 0 when unknown. */
double haecer__energy_max_watts(const struct haecer_counter *counter)
{
	unsigned domain = counter->rapl_domain;

	return domain < HAECER_RAPL_DOMAINS ?
		       (double)counter->ctx->machine.rapl_max_power_mw[domain] / 1000.0 : 0.0;
}
