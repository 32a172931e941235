/*
 * libclient/haecer_energy_cost.c — what measuring a region cost (issue 23, item 3).
 *
 * msrd counts the CPU time it spends for each energy register's pages (its precise-edge
 * windows, its page samples) and publishes the running sum on the register's fine page, with
 * the energy the simulated CPU's model says that CPU time drew (server/energy_cost.c). A region
 * takes both at startEnergyRead's return and at the end call: their differences are what msrd
 * spent on the register during the region.
 *
 * The energy: on the simulated CPU the model's figure. Its +- is half of it: the simulator sees
 * msrd's CPU time only through /proc/stat's 10 ms ticks (backend/sim/sim_follow.c), so the
 * energy lands in the simulated package spread over up to 10 ms around when it was spent, in
 * or out of the region. On real hardware no one says what one core draws: a busy CPU draws
 * between none and all of the package's power, so the estimate is the CPU time at half the
 * highest power the region observed (before, after, over the span), +- the same.
 */
#include "libclient/haecer_energy_cost.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

void haecer__energy_cost_mark(struct haecer_counter *counter,
			      struct haecer_energy_cost_mark *mark)
{
	struct energy_page_reading full;
	struct energy_page_total lean;
	struct haecer_context *ctx;
	int error;

	*mark = (struct haecer_energy_cost_mark){ 0 };
	full.state = ENERGY_PAGE_DEAD;
	if (haecer__counter_lock(counter, &ctx) < 0)
		return;
	/* An old sample (-ESTALE: msrd late) still carries the running sums as of it: only a
	 * page that is no longer written says nothing. */
	error = haecer__page_reading(counter, &lean, &full);
	if ((error == 0 || error == -ESTALE) && full.state == ENERGY_PAGE_LIVE)
		*mark = (struct haecer_energy_cost_mark){ .cpu_ns = full.measurement_cpu_ns,
							  .nj = full.measurement_nj,
							  .known = full.measurement_cpu_ns != 0 };
	pthread_mutex_unlock(&ctx->lock);
}

void haecer__energy_cost_start(struct haecer_counter *counter, struct haecer_energy_region *region)
{
	struct haecer_energy_cost_mark mark;

	haecer__energy_cost_mark(counter, &mark);
	region->start_measurement_cpu_ns = mark.cpu_ns;
	region->start_measurement_nj = mark.nj;
	region->start_measurement_known = mark.known;
}

/* On real hardware no one says what one core draws: a busy CPU draws between none and all of
 * the package's power, so CPU time at half the package's power, +- the same. */
static void estimate_joules(double cpu_seconds, double package_watts, double *joules,
			    double *doubt)
{
	*joules = cpu_seconds * package_watts / 2.0;
	*doubt = *joules;
}

static double highest_power_watts(const struct haecer_energy_result *result, double tsc_hz)
{
	double per_tick = result->joules_per_tick;

	if (result->before_joules_per_tick > per_tick)
		per_tick = result->before_joules_per_tick;
	if (result->after_joules_per_tick > per_tick)
		per_tick = result->after_joules_per_tick;
	if (result->span_joules_per_tick > per_tick)
		per_tick = result->span_joules_per_tick;
	return per_tick * tsc_hz;
}

void haecer__energy_cost_result(const struct haecer_energy_region *region,
				const struct haecer_energy_cost_mark *end,
				struct haecer_energy_result *result)
{
	double seconds, tsc_hz;

	result->measurement_cpu_ns = 0;
	result->measurement_joules = 0.0;
	result->measurement_uncertainty_joules = 0.0;
	result->measurement_known = region->start_measurement_known && end->known &&
				    end->cpu_ns >= region->start_measurement_cpu_ns &&
				    end->nj >= region->start_measurement_nj;
	if (!result->measurement_known)
		return;
	result->measurement_cpu_ns = end->cpu_ns - region->start_measurement_cpu_ns;
	if (result->simulated) {
		result->measurement_joules = (double)(end->nj - region->start_measurement_nj) * 1e-9;
		result->measurement_uncertainty_joules = result->measurement_joules / 2.0;
		return;
	}
	seconds = (double)result->measurement_cpu_ns * 1e-9;
	tsc_hz = result->seconds > 0.0 ? (double)result->region_ticks / result->seconds : 0.0;
	estimate_joules(seconds, highest_power_watts(result, tsc_hz),
			&result->measurement_joules, &result->measurement_uncertainty_joules);
}

/* ---- a difference of two plain readings (region markers, haecer-stat) ---- */

int haecer__energy_mark_joules(struct haecer_counter *counter, double joules, uint64_t before_ns,
			       uint64_t after_ns, uint64_t round_trip_ns,
			       struct haecer_energy_mark *out)
{
	struct haecer_energy_cost_mark cost = { 0 };
	struct haecer_context *ctx;
	bool held;
	int error = haecer__counter_lock(counter, &ctx);

	if (error < 0)
		return error;
	held = counter->info.kind == HAECER_COUNTER_ENERGY && haecer__page_held(counter);
	pthread_mutex_unlock(&ctx->lock);
	if (counter->info.kind != HAECER_COUNTER_ENERGY)
		return haecer__fail(-EINVAL, "%s is not an energy counter", counter->info.name);
	/* Only a page held already: asking for one would start the cost it is to count. */
	if (held)
		haecer__energy_cost_mark(counter, &cost);
	*out = (struct haecer_energy_mark){
		.joules = joules,
		.read_ns = before_ns + (after_ns > before_ns ? (after_ns - before_ns) / 2 : 0),
		.doubt_ns = after_ns > before_ns ? after_ns - before_ns : 0,
		.round_trip_ns = round_trip_ns,
		.measurement_cpu_ns = cost.cpu_ns,
		.measurement_nj = cost.nj,
		.measurement_known = cost.known,
	};
	return 0;
}

int haecer_energy_mark(struct haecer_counter *counter, uint64_t value, uint64_t before_ns,
		       uint64_t after_ns, struct haecer_energy_mark *out)
{
	haecer__clear_detail();
	if (counter == NULL || out == NULL)
		return haecer__fail(-EINVAL, "no counter or no mark");
	return haecer__energy_mark_joules(counter, (double)value * counter->info.unit, before_ns,
					  after_ns, after_ns > before_ns ? after_ns - before_ns : 0,
					  out);
}

int haecer_energy_span(struct haecer_counter *counter, const struct haecer_energy_mark *from,
		       const struct haecer_energy_mark *to, struct haecer_energy_span *out)
{
	double watts = 0.0, page_j = 0.0, page_doubt = 0.0, trips_j, trips_doubt;
	uint64_t page_cpu = 0, trips = 0;
	bool pages;

	haecer__clear_detail();
	if (counter == NULL || from == NULL || to == NULL || out == NULL)
		return haecer__fail(-EINVAL, "no counter, marks or span");
	if (to->read_ns < from->read_ns)
		return haecer__fail(-EINVAL, "the marks are in the wrong order");
	memset(out, 0, sizeof(*out));
	out->joules = to->joules - from->joules;
	out->seconds = (double)(to->read_ns - from->read_ns) / 1e9;
	if (out->seconds > 0.0 && out->joules > 0.0)
		watts = out->joules / out->seconds;
	out->uncertainty_joules = haecer__difference_doubt(
		counter, watts, from->doubt_ns > to->doubt_ns ? from->doubt_ns : to->doubt_ns);
	pages = from->measurement_known && to->measurement_known &&
		to->measurement_cpu_ns >= from->measurement_cpu_ns &&
		to->measurement_nj >= from->measurement_nj;
	if (pages) {
		page_cpu = to->measurement_cpu_ns - from->measurement_cpu_ns;
		page_j = (double)(to->measurement_nj - from->measurement_nj) * 1e-9;
		page_doubt = page_j / 2.0;
		if (page_j == 0.0) /* real hardware: msrd does not know what one core draws */
			estimate_joules((double)page_cpu * 1e-9, watts, &page_j, &page_doubt);
	}
	/* The two reads' round trips bound msrd's CPU for them (errs high). */
	trips = from->round_trip_ns + to->round_trip_ns;
	estimate_joules((double)trips * 1e-9, watts, &trips_j, &trips_doubt);
	out->measurement_pages_known = pages;
	out->measurement_cpu_ns = page_cpu + trips;
	out->measurement_joules = page_j + trips_j;
	out->measurement_uncertainty_joules = page_doubt + trips_doubt;
	return 0;
}
