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
	result->measurement_joules = seconds * highest_power_watts(result, tsc_hz) / 2.0;
	result->measurement_uncertainty_joules = result->measurement_joules;
}
