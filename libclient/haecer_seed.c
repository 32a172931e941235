/*
 * libclient/haecer_seed.c — the HAECER API of the seed design as thin wrappers over haecer_*:
 * the default context, counters on the calling thread's CPU, PerfCounter values whose failure
 * never causes a side effect (reads give -1, other operations do nothing).
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>

/* startEnergyRead / endEnergyRead state: per thread and domain. */
struct region_state {
	struct haecer_counter *counter;
	uint32_t generation;
	struct haecer_energy_region region;
	struct haecer_energy_result result;
	bool has_result;
};

static __thread struct region_state regions[RAPL_DOMAIN_COUNT];

static PerfCounter perf_counter(int error, struct haecer_counter *counter)
{
	PerfCounter ctr = {.error = error, .valid = error == 0 && counter != NULL};

	if (ctr.valid) {
		ctr.counter = counter;
		ctr.generation = __atomic_load_n(&counter->generation, __ATOMIC_ACQUIRE);
	}
	return ctr;
}

/* A generation that moved on means the counter was freed (through another copy, or by
 * haecer_shutdown) and its structure may serve another counter now. */
static bool same_counter(const struct haecer_counter *counter, uint32_t generation)
{
	return haecer__counter_live(counter) &&
	       __atomic_load_n(&counter->generation, __ATOMIC_ACQUIRE) == generation;
}

struct haecer_counter *haecer_perf_counter(const PerfCounter *ctr)
{
	if (ctr == NULL || !ctr->valid || !same_counter(ctr->counter, ctr->generation))
		return NULL;
	return ctr->counter;
}

static uint8_t counter_mask(char mask)
{
	return (uint8_t)(unsigned char)mask;
}

PerfCounter setupArchCounter(ARCH_counter ctr, int flags, char mask)
{
	struct haecer_counter *counter = NULL;
	struct haecer_context *ctx;
	int error = haecer_default_context(&ctx);

	if (error == 0)
		error = haecer_counter_open_arch(ctx, HAECER_CPU_CURRENT, (unsigned)ctr,
						 (uint32_t)flags, counter_mask(mask), &counter);
	return perf_counter(error, counter);
}

PerfCounter setupFFCounter(FF_counter ctr, int flags)
{
	struct haecer_counter *counter = NULL;
	struct haecer_context *ctx;
	int error = haecer_default_context(&ctx);

	if (error == 0)
		error = haecer_counter_open_fixed(ctx, HAECER_CPU_CURRENT, (unsigned)ctr,
						  (uint32_t)flags, &counter);
	return perf_counter(error, counter);
}

PerfCounter setupNonArchCounter(haecer_event_select ev, haecer_umask um, int flags, char mask)
{
	struct haecer_counter *counter = NULL;
	struct haecer_context *ctx;
	int error = haecer_default_context(&ctx);

	if (error == 0)
		error = haecer_counter_open_raw(ctx, HAECER_CPU_CURRENT, ev, um, (uint32_t)flags,
						counter_mask(mask), &counter);
	return perf_counter(error, counter);
}

PerfCounter setupNamedCounter(const char *name, int flags, char mask)
{
	struct haecer_counter *counter = NULL;
	struct haecer_context *ctx;
	int error = haecer_default_context(&ctx);

	if (error == 0)
		error = haecer_counter_open_named(ctx, HAECER_CPU_CURRENT, name, (uint32_t)flags,
						  counter_mask(mask), &counter);
	return perf_counter(error, counter);
}

/* The seed API predates AMD's RAPL (it was Intel-only in 2012): on AMD a program asking for the
 * package or the cores (PP0) gets AMD's package energy (MSRC001_029B) or the core energy of its
 * core (MSRC001_029A), the same quantities. PP1, DRAM and PSYS have no AMD counterpart. */
static unsigned seed_domain(const struct haecer_context *ctx, RAPLCounter type)
{
	if (event_db_caps(ctx->db)->vendor != EVENT_VENDOR_AMD)
		return (unsigned)type;
	if (type == RAPL_PKG)
		return RAPL_DOMAIN_AMD_PKG;
	if (type == RAPL_PP0)
		return RAPL_DOMAIN_AMD_CORE;
	return (unsigned)type;
}

PerfCounter setupEnergyCounter(RAPLCounter type)
{
	struct haecer_counter *counter = NULL;
	struct haecer_context *ctx;
	int error = haecer_default_context(&ctx);

	if (error == 0)
		error = haecer_counter_open_energy(ctx, HAECER_CPU_CURRENT, seed_domain(ctx, type),
						   &counter);
	return perf_counter(error, counter);
}

double getEnergyUnit(void)
{
	char why[EVENT_DB_WHY_SIZE];
	struct haecer_context *ctx;
	struct event_rapl rapl;

	if (haecer_default_context(&ctx) < 0)
		return -1.0;
	if (event_db_rapl_lookup(ctx->db, haecer__package_domain(ctx), &rapl, why,
				 sizeof(why)) < 0) {
		haecer__fail(-EOPNOTSUPP, "%s", why);
		return -1.0;
	}
	return rapl.joules_per_count;
}

void disableCounter(PerfCounter *ctr)
{
	struct haecer_counter *counter = haecer_perf_counter(ctr);

	if (counter != NULL)
		haecer_counter_disable(counter);
}

void enableCounter(PerfCounter *ctr)
{
	struct haecer_counter *counter = haecer_perf_counter(ctr);

	if (counter != NULL)
		haecer_counter_enable(counter);
}

void resetCounter(PerfCounter *ctr)
{
	struct haecer_counter *counter = haecer_perf_counter(ctr);

	if (counter != NULL)
		haecer_counter_reset(counter);
}

void freeCounter(PerfCounter *ctr)
{
	struct haecer_counter *counter = haecer_perf_counter(ctr);

	if (counter == NULL)
		return;
	haecer_counter_free(counter);
	ctr->valid = false;
	ctr->counter = NULL;
	ctr->error = -EBADF;
}

unsigned long long readCounter(PerfCounter *ctr)
{
	struct haecer_counter *counter = haecer_perf_counter(ctr);
	uint64_t value;

	if (counter == NULL || haecer_counter_read(counter, &value) < 0)
		return ULLONG_MAX;
	return value;
}

/* One synchronized read of up to HAECER_READ_MAX counters; invalid ones read -1. */
static void read_chunk(PerfCounter *ctr, unsigned long long *buffer, size_t count)
{
	struct haecer_counter *counters[HAECER_READ_MAX];
	uint64_t values[HAECER_READ_MAX];
	size_t position[HAECER_READ_MAX];
	size_t valid = 0;

	for (size_t i = 0; i < count; i++) {
		buffer[i] = ULLONG_MAX;
		counters[valid] = haecer_perf_counter(&ctr[i]);
		if (counters[valid] != NULL)
			position[valid++] = i;
	}
	if (valid == 0 ||
	    haecer_counter_read_many(counters, valid, values, HAECER_READ_SYNCHRONIZED) < 0)
		return;
	for (size_t i = 0; i < valid; i++)
		buffer[position[i]] = values[i];
}

void simultaneousReadCounter(PerfCounter *ctr, unsigned long long *buffer, int count)
{
	if (ctr == NULL || buffer == NULL || count <= 0)
		return;
	for (size_t done = 0; done < (size_t)count; done += HAECER_READ_MAX) {
		size_t chunk = (size_t)count - done;
		read_chunk(ctr + done, buffer + done, chunk < HAECER_READ_MAX ? chunk
									: HAECER_READ_MAX);
	}
}

int setupFerretMonitor(PerfCounter *ctr, uint16_t major, uint16_t minor)
{
	struct haecer_counter *counter = haecer_perf_counter(ctr);

	if (counter == NULL)
		return haecer__fail(-EBADF, "setupFerretMonitor of an invalid or freed counter");
	return haecer_counter_monitor(counter, major, minor, HAECER_FERRET_SEED_CAPACITY);
}

void startEnergyRead(RAPLCounter domain)
{
	struct haecer_context *ctx;
	struct region_state *state;

	if ((unsigned)domain >= RAPL_DOMAIN_COUNT)
		return;
	state = &regions[domain];
	state->region.active = false;
	state->counter = NULL;
	if (haecer_default_context(&ctx) < 0 ||
	    haecer__region_counter(ctx, seed_domain(ctx, domain), &state->counter) < 0)
		return;
	state->generation = __atomic_load_n(&state->counter->generation, __ATOMIC_ACQUIRE);
	haecer_energy_start(state->counter, &state->region);
}

double endEnergyRead(RAPLCounter domain)
{
	struct region_state *state;

	if ((unsigned)domain >= RAPL_DOMAIN_COUNT)
		return NAN;
	state = &regions[domain];
	state->has_result = false;
	/* A failed startEnergyRead left its reason as the thread's detail: keep it. */
	if (state->counter == NULL || !state->region.active)
		return NAN;
	if (!same_counter(state->counter, state->generation)) {
		haecer__fail(-EBADF, "the energy counter of startEnergyRead was closed since");
		return NAN;
	}
	if (haecer_energy_end(state->counter, &state->region, &state->result) < 0)
		return NAN;
	state->has_result = true;
	return state->result.joules;
}

int haecer_last_energy_result(RAPLCounter domain, struct haecer_energy_result *out)
{
	if ((unsigned)domain >= RAPL_DOMAIN_COUNT || out == NULL)
		return -EINVAL;
	if (!regions[domain].has_result)
		return -ENOENT;
	*out = regions[domain].result;
	return 0;
}
