/*
 * libclient/haecer_energy.c — energy regions below the 1 ms RAPL update step (seed 2.3.3):
 * synchronise the start to an update, wait for the update after the end, and subtract the
 * calibrated energy of that wait. Also counts SMIs inside a region (seed 2.1.2.6).
 *
 * One poll = one msrd batch: [TSC,] energy register [, MSR_SMI_COUNT]. With a simulated CPU the
 * TSC is the simulated one, read in the same batch as the energy register, so time and energy
 * come from one clock (also in virtual time, where msrd's --sim-access-step-ns moves time per
 * register access and polling loops run deterministically). On real hardware the TSC is read
 * here (rdtsc, fenced) when the batch returns.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <x86intrin.h>

#define CALIBRATION_UPDATES 4u
#define CALIBRATION_MAX_UPDATES 1000u
/* Seed listing 3: an SMI takes 300-400k cycles; a poll that took this much longer than the
 * fastest one seen was interrupted by one (on models without MSR_SMI_COUNT). */
#define SMI_GAP_TICKS 100000ull
#define POLL_OPS 3

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

static uint64_t tsc_now(void)
{
	uint64_t tsc;

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
	if (ctx->simulated) {
		plan->tsc = (int)plan->count;
		plan->ops[plan->count++] = (struct haecer_msr_op){
			.kind = HAECER_MSR_READ, .cpu = cpu, .address = MSR_IA32_TSC};
	}
	plan->energy = (int)plan->count;
	plan->ops[plan->count++] = (struct haecer_msr_op){
		.kind = ctx->energy_totals ? HAECER_MSR_ENERGY_READ : HAECER_MSR_READ,
		.cpu = cpu, .address = counter->info.counter_address};
	if ((ctx->machine.flags & HAECER_MACHINE_HAS_SMI_COUNT) && !counter->smi_unreadable) {
		plan->smi = (int)plan->count;
		plan->ops[plan->count++] = (struct haecer_msr_op){
			.kind = HAECER_MSR_READ, .cpu = cpu, .address = MSR_SMI_COUNT};
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
		return haecer__fail(error, "energy regions on a simulated CPU read its TSC (MSR "
				    "0x10) through msrd: %s", text);
	return haecer__fail(error, "polling %s (MSR %#x) on CPU %u: %s", counter->info.name,
			    refused->address, counter->info.cpu, text);
}

/* One poll under the context's lock. A policy that refuses MSR_SMI_COUNT only costs the exact
 * SMI count: the poll goes on without it. */
static int poll_locked(struct haecer_counter *counter, struct energy_sample *sample)
{
	struct poll_plan plan;
	const struct haecer_msr_op *energy;
	int error;

	if (haecer__page_sample(counter, sample) == 0)
		return 0;
	plan_poll(counter, &plan);
	error = haecer_msr_batch(counter->ctx->conn, plan.ops, plan.count);
	sample->tsc = plan.tsc < 0 ? tsc_now() : plan.ops[plan.tsc].value;
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
	return 0;
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

/* Poll until the register differs from `from`. `gaps` (may be NULL) counts polls that took
 * SMI_GAP_TICKS longer than the fastest. */
static int wait_for_update(struct haecer_counter *counter, const struct energy_sample *from,
			   struct energy_sample *to, uint32_t *gaps)
{
	uint64_t deadline = haecer__monotonic_raw_ns() + HAECER_ENERGY_TIMEOUT_MS * 1000000ull;
	uint64_t previous = from->tsc, fastest = UINT64_MAX;
	int error;

	for (;;) {
		error = poll_once(counter, to);
		if (error < 0)
			return error;
		uint64_t interval = to->tsc - previous;
		previous = to->tsc;
		if (interval < fastest)
			fastest = interval;
		else if (gaps != NULL && interval - fastest > SMI_GAP_TICKS)
			(*gaps)++;
		if (to->total != from->total)
			return 0;
		if (haecer__monotonic_raw_ns() > deadline)
			return haecer__fail(-ETIMEDOUT, "%s on CPU %u did not change for %u ms",
					    counter->info.name, counter->info.cpu,
					    HAECER_ENERGY_TIMEOUT_MS);
	}
}

/* Poll once, then until the next update: *at is the first sample after it. */
static int next_update(struct haecer_counter *counter, struct energy_sample *first,
		       struct energy_sample *at, uint32_t *gaps)
{
	int error = poll_once(counter, first);

	if (error < 0)
		return error;
	return wait_for_update(counter, first, at, gaps);
}

/* The counter's unit and calibration, checking it is an energy counter. */
static int energy_facts(const struct haecer_counter *counter, double *unit, double *per_tick,
			bool *calibrated)
{
	struct haecer_context *ctx;
	int error = haecer__counter_lock(counter, &ctx);

	if (error < 0)
		return error;
	if (counter->info.kind != HAECER_COUNTER_ENERGY)
		error = haecer__fail(-EINVAL, "%s is not an energy counter", counter->info.name);
	*unit = counter->info.unit;
	*per_tick = counter->joules_per_tick;
	*calibrated = counter->calibrated;
	pthread_mutex_unlock(&ctx->lock);
	return error;
}

int haecer_energy_calibrate(struct haecer_counter *energy, unsigned updates,
			    double *joules_per_tick)
{
	struct energy_sample first, start, current, next;
	struct haecer_context *ctx;
	double unit, per_tick;
	bool calibrated;
	int error;

	haecer__clear_detail();
	error = energy_facts(energy, &unit, &per_tick, &calibrated);
	if (error < 0)
		return error;
	if (updates == 0)
		updates = CALIBRATION_UPDATES;
	if (updates > CALIBRATION_MAX_UPDATES)
		return haecer__fail(-EINVAL, "calibrate over 1 to %u updates",
				    CALIBRATION_MAX_UPDATES);
	error = next_update(energy, &first, &start, NULL);
	current = start;
	for (unsigned i = 0; i < updates && error == 0; i++) {
		error = wait_for_update(energy, &current, &next, NULL);
		current = next;
	}
	if (error < 0)
		return error;
	if (current.tsc <= start.tsc)
		return haecer__fail(-EIO, "the TSC did not advance while %s updated",
				    energy->info.name);
	per_tick = (double)(current.total - start.total) * unit /
		   (double)(current.tsc - start.tsc);
	error = haecer__counter_lock(energy, &ctx);
	if (error < 0)
		return error;
	energy->joules_per_tick = per_tick;
	energy->calibrated = true;
	pthread_mutex_unlock(&ctx->lock);
	if (joules_per_tick != NULL)
		*joules_per_tick = per_tick;
	return 0;
}

int haecer_energy_start(struct haecer_counter *energy, struct haecer_energy_region *region)
{
	struct energy_sample first, at;
	double unit, per_tick;
	bool calibrated;
	int error;

	haecer__clear_detail();
	if (region == NULL)
		return haecer__fail(-EINVAL, "no region");
	region->active = false;
	error = energy_facts(energy, &unit, &per_tick, &calibrated);
	if (error == 0 && !calibrated)
		error = haecer_energy_calibrate(energy, 0, NULL);
	if (error == 0)
		error = next_update(energy, &first, &at, NULL);
	if (error < 0)
		return error;
	region->start_total = at.total;
	region->start_tsc = at.tsc;
	region->start_smi = at.smi;
	region->active = true;
	return 0;
}

static void region_result(const struct haecer_counter *energy,
			  const struct haecer_energy_region *region,
			  const struct energy_sample *called, const struct energy_sample *update,
			  uint32_t gaps, struct haecer_energy_result *result)
{
	uint64_t tsc_hz = energy->ctx->machine.tsc_hz;
	double unit = energy->info.unit;

	result->joules_per_tick = energy->joules_per_tick;
	result->raw_joules = (double)(update->total - region->start_total) * unit;
	result->wait_ticks = update->tsc - called->tsc;
	result->wait_joules = (double)result->wait_ticks * result->joules_per_tick;
	result->joules = result->raw_joules - result->wait_joules;
	result->region_ticks = called->tsc - region->start_tsc;
	result->seconds = tsc_hz ? (double)result->region_ticks / (double)tsc_hz : 0.0;
	result->tsc_source = HAECER_MACHINE_TSC_SOURCE(energy->ctx->machine.flags);
	result->smi_count_exact = update->smi_exact;
	result->simulated = energy->ctx->simulated;
	/* MSR_SMI_COUNT is 32 bits wide. */
	result->smi_count = update->smi_exact ? (uint32_t)(update->smi - region->start_smi) : gaps;
}

int haecer_energy_end(struct haecer_counter *energy, struct haecer_energy_region *region,
		      struct haecer_energy_result *result)
{
	struct energy_sample called, update;
	struct haecer_context *ctx;
	uint32_t gaps = 0;
	int error;

	haecer__clear_detail();
	if (region == NULL || result == NULL || !region->active)
		return haecer__fail(-EINVAL, "no energy region was started");
	region->active = false;
	error = next_update(energy, &called, &update, &gaps);
	if (error < 0)
		return error;
	error = haecer__counter_lock(energy, &ctx);
	if (error < 0)
		return error;
	region_result(energy, region, &called, &update, gaps, result);
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

/* ---- the per-domain counters of startEnergyRead / endEnergyRead ---- */

static bool serves(const struct haecer_counter *counter, unsigned domain, uint32_t cpu)
{
	const struct event_rapl_domain *facts = event_db_rapl_domain(domain);
	const struct haecer_context *ctx = counter->ctx;

	if (!counter->region_counter || counter->info.counter_address != facts->energy_msr)
		return false;
	if (facts->scope == EVENT_RAPL_CORE)
		return counter->info.cpu == cpu;
	return counter->info.package == ctx->machine.cpu_package[cpu];
}

static struct haecer_counter *find_region_counter(struct haecer_context *ctx, unsigned domain,
						  uint32_t cpu)
{
	struct haecer_counter *found = NULL;

	pthread_mutex_lock(&ctx->lock);
	for (struct haecer_counter *counter = ctx->counters; counter != NULL && found == NULL;
	     counter = counter->next)
		if (serves(counter, domain, cpu))
			found = counter;
	pthread_mutex_unlock(&ctx->lock);
	return found;
}

int haecer__region_counter(struct haecer_context *ctx, unsigned domain,
			   struct haecer_counter **out)
{
	struct haecer_counter *counter;
	uint32_t cpu;
	int error;

	if (event_db_rapl_domain(domain) == NULL)
		return haecer__fail(-EINVAL, "RAPL domain %u does not exist", domain);
	error = haecer_context_current_cpu(ctx, &cpu);
	if (error < 0)
		return error;
	counter = find_region_counter(ctx, domain, cpu);
	if (counter == NULL) {
		error = haecer_counter_open_energy(ctx, (int)cpu, domain, &counter);
		if (error < 0)
			return error;
		pthread_mutex_lock(&ctx->lock);
		counter->region_counter = true;
		pthread_mutex_unlock(&ctx->lock);
	}
	*out = counter;
	return 0;
}
