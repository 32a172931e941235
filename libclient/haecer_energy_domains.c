/*
 * libclient/haecer_energy_domains.c — the energy counters startEnergyRead / endEnergyRead use:
 * one per RAPL domain and package (or core, for per-core domains) the calling thread runs on,
 * opened on first use and kept on the context (the region method itself is haecer_energy.c).
 */
#include "libclient/haecer_internal.h"


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
