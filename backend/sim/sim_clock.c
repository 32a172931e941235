/*
 * backend/sim/sim_clock.c — the clock a busy simulated CPU runs at (configs/models/README.md,
 * "clock"), as Turbo Boost (Intel) or Precision Boost (AMD) sets it:
 *
 * - a turbo bin by the number of active cores of its package (MSR_TURBO_RATIO_LIMIT 0x1AD on
 *   Intel: the highest ratio with 1, 2, ... cores in C0). Loads are shares of time, so a core's
 *   activity is the chance that one of its threads is busy (1 - the product of their idle shares)
 *   and a busy CPU's active cores are 1 + the other cores' activities, between whose bins the
 *   clock is interpolated. Threads are numbered as Linux numbers them: CPU n and n + cores of a
 *   package are the two threads of one core.
 * - noise: each noise_interval_us of a CPU's busy time runs at its bin plus a seeded draw (normal,
 *   truncated at +-noise_mhz), from a table of SIM_NOISE_TABLE draws summing to 0 that each CPU
 *   walks from its own offset. Drawn by busy time rather than wall time, a CPU's cycles over any
 *   stretch are a closed form of its busy time (no walk over every interval of an hour's
 *   advance), and an idle CPU draws nothing.
 * - the power limit (if the model's clock says power_limit): when the package's load-driven power
 *   at these clocks exceeds PL1 of MSR_PKG_POWER_LIMIT (enabled), every clock of the package is
 *   scaled down until it does not, to min_mhz at the lowest. Applied at once, not over PL1's time
 *   window.
 *
 * Power follows the clock: a busy CPU's share of its domain's (max - idle) is scaled by
 * (clock / all-core clock)^power_exponent, so a package with every core busy draws max_watts as
 * before, and one busy core at a higher bin draws more than its share. The noise is left out of
 * the power (it averages out within milliseconds).
 *
 * The ideal CPU, and a model without a clock or rough section, run at core_hz whenever busy.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/sim/sim_internal.h"

#define DRAW_NOISE 0x4E4F495345000000ull        /* "NOISE" */
#define DRAW_NOISE_OFFSET 0x4E4F4F4646000000ull /* "NOOFF" */
#define POWER_UNIT_FIELD 0xFull                 /* MSR_RAPL_POWER_UNIT bits 3:0 */

static uint64_t mhz_to_q(const struct sim *sim, double mhz)
{
	return (uint64_t)llround(mhz * 1e6 * SIM_CLOCK_ONE / (double)sim->model->core_hz);
}

static int build_noise(struct sim *sim)
{
	struct sim_clock *clock = &sim->clock;
	double spread = (double)sim->model->clock->noise_mhz;
	int64_t sum = 0;

	clock->noise = calloc(SIM_NOISE_TABLE, sizeof(*clock->noise));
	clock->noise_prefix = calloc(SIM_NOISE_TABLE + 1, sizeof(*clock->noise_prefix));
	if (!clock->noise || !clock->noise_prefix)
		return -ENOMEM;
	for (uint32_t i = 0; i < SIM_NOISE_TABLE && spread > 0; i++) {
		double mhz = sim_rough_draw_normal(sim, DRAW_NOISE, i, spread);

		clock->noise[i] = (int64_t)mhz_to_q(sim, fabs(mhz)) * (mhz < 0 ? -1 : 1);
		sum += clock->noise[i];
	}
	/* Mean zero: over whole tables a CPU runs at its bin exactly. */
	for (uint32_t i = 0; i < SIM_NOISE_TABLE; i++)
		clock->noise[i] -= sum / (int64_t)SIM_NOISE_TABLE;
	clock->noise[0] -= sum % (int64_t)SIM_NOISE_TABLE;
	for (uint32_t i = 0; i < SIM_NOISE_TABLE; i++)
		clock->noise_prefix[i + 1] = clock->noise_prefix[i] + clock->noise[i];
	clock->noise_busy = (sim_u128)sim->model->clock->noise_interval_us * 1000u * SIM_LOAD_ONE;
	for (uint32_t cpu = 0; cpu < sim->cpu_count; cpu++)
		sim->cpus[cpu].noise_offset =
			(uint32_t)(sim_rough_draw(sim, DRAW_NOISE_OFFSET, cpu) % SIM_NOISE_TABLE);
	return 0;
}

/* The package's PL1 from the model's reset value of MSR_PKG_POWER_LIMIT, if it lists one. */
static void initial_power_limits(struct sim *sim)
{
	const struct sim_model *model = sim->model;

	for (unsigned i = 0; i < model->registers_count; i++) {
		if (model->registers[i].address != MSR_PKG_POWER_LIMIT)
			continue;
		for (uint32_t package = 0; package < model->packages; package++)
			sim_clock_set_power_limit(sim, package, model->registers[i].value);
	}
}

int sim_clock_configure(struct sim *sim, bool ideal)
{
	const struct sim_model_clock *model = sim->model->clock;
	struct sim_clock *clock = &sim->clock;
	int ret;

	memset(clock, 0, sizeof(*clock));
	for (uint32_t cpu = 0; cpu < sim->cpu_count; cpu++) {
		sim->cpus[cpu].clock_q = SIM_CLOCK_ONE;
		sim->cpus[cpu].power_q = SIM_POWER_ONE;
	}
	if (ideal || !model || !sim->model->rough)
		return 0;
	clock->on = true;
	clock->cores = sim->model->cpus_per_package / sim->model->threads_per_core;
	clock->bin_count = model->turbo_mhz_count;
	clock->bins_q = calloc(clock->bin_count, sizeof(*clock->bins_q));
	clock->activity = calloc(clock->cores, sizeof(*clock->activity));
	clock->limit_uw = calloc(sim->model->packages, sizeof(*clock->limit_uw));
	if (!clock->bins_q || !clock->activity || !clock->limit_uw)
		return -ENOMEM;
	for (uint32_t i = 0; i < clock->bin_count; i++)
		clock->bins_q[i] = mhz_to_q(sim, model->turbo_mhz[i]);
	clock->all_core_q = clock->bins_q[clock->bin_count - 1];
	clock->min_q = mhz_to_q(sim, model->min_mhz);
	clock->power_exponent = model->power_exponent;
	clock->power_limit = model->power_limit && sim->model->rapl;
	ret = build_noise(sim);
	if (ret < 0)
		return ret;
	initial_power_limits(sim);
	return 0;
}

void sim_clock_free(struct sim *sim)
{
	struct sim_clock *clock = &sim->clock;

	free(clock->bins_q);
	free(clock->activity);
	free(clock->limit_uw);
	free(clock->noise);
	free(clock->noise_prefix);
	memset(clock, 0, sizeof(*clock));
}

/* ---- cycles ---- */

/* Sum of the `count` table entries from entry `offset` on (wrapping). */
static int64_t noise_window(const struct sim_clock *clock, uint32_t offset, uint32_t count)
{
	const int64_t *prefix = clock->noise_prefix;

	if (offset + count <= SIM_NOISE_TABLE)
		return prefix[offset + count] - prefix[offset];
	return prefix[SIM_NOISE_TABLE] - prefix[offset] + prefix[offset + count - SIM_NOISE_TABLE];
}

/* The noise's part of a CPU's core progress over its first `busy` of busy time: whole tables
 * sum to 0, so only the entries since the last whole table and the current one's part count. */
static __int128 noise_integral(const struct sim_clock *clock, uint32_t offset, sim_u128 busy)
{
	sim_u128 interval = busy / clock->noise_busy;
	sim_u128 into = busy % clock->noise_busy;
	uint32_t entry = (uint32_t)(interval % SIM_NOISE_TABLE);
	__int128 whole = (__int128)noise_window(clock, offset, entry) * (__int128)clock->noise_busy;

	return whole + (__int128)clock->noise[(offset + entry) % SIM_NOISE_TABLE] * (__int128)into;
}

sim_u128 sim_clock_core_delta(const struct sim *sim, const struct sim_cpu *cpu, sim_u128 from,
			      sim_u128 delta)
{
	const struct sim_clock *clock = &sim->clock;
	__int128 core = (__int128)(delta * cpu->clock_q);

	if (clock->on && delta) {
		/* |noise| <= min_mhz / 4 <= the clock / 4: never negative. */
		core += noise_integral(clock, cpu->noise_offset, from + delta) -
			noise_integral(clock, cpu->noise_offset, from);
	}
	return (sim_u128)core;
}

/* ---- the clock from the load ---- */

/* The bin clock with `active` (1..cores, fractional) active cores. */
static double bin_clock(const struct sim_clock *clock, double active)
{
	double low;
	uint32_t index;

	if (active <= 1.0)
		return (double)clock->bins_q[0];
	if (active >= (double)clock->bin_count)
		return (double)clock->bins_q[clock->bin_count - 1];
	low = floor(active);
	index = (uint32_t)low - 1;
	return (double)clock->bins_q[index] +
	       (active - low) * ((double)clock->bins_q[index + 1] - (double)clock->bins_q[index]);
}

static double power_factor(const struct sim_clock *clock, double clock_q)
{
	return pow(clock_q / (double)clock->all_core_q, clock->power_exponent);
}

/* The domain that PL1 limits: the package's pkg (or amd_pkg) instance. */
static const struct sim_domain *package_domain(const struct sim *sim, uint32_t first)
{
	for (uint32_t i = 0; i < sim->domain_count; i++) {
		const struct sim_domain *domain = &sim->domains[i];

		if ((domain->kind == RAPL_DOMAIN_PKG || domain->kind == RAPL_DOMAIN_AMD_PKG) &&
		    domain->first_cpu == first)
			return domain;
	}
	return NULL;
}

/* Scale the package's clocks down so that its load-driven power stays within PL1. */
static void apply_power_limit(struct sim *sim, uint32_t package, double *clocks)
{
	struct sim_clock *clock = &sim->clock;
	uint32_t first = package * sim->model->cpus_per_package, count = sim->model->cpus_per_package;
	const struct sim_domain *domain = package_domain(sim, first);
	double weighted = 0.0, limit = (double)clock->limit_uw[package], scale;

	if (!clock->power_limit || limit <= 0.0 || !domain || clock->power_exponent <= 0.0)
		return;
	for (uint32_t i = 0; i < count; i++)
		weighted += (double)sim->cpus[first + i].load / SIM_LOAD_ONE *
			    power_factor(clock, clocks[i]);
	weighted *= (double)domain->span_uw / count;
	if (weighted <= 0.0 || (double)domain->idle_uw + weighted <= limit)
		return;
	scale = limit > (double)domain->idle_uw ?
			pow((limit - (double)domain->idle_uw) / weighted, 1.0 / clock->power_exponent) :
			0.0;
	for (uint32_t i = 0; i < count; i++) {
		clocks[i] *= scale;
		if (clocks[i] < (double)clock->min_q)
			clocks[i] = (double)clock->min_q;
	}
}

void sim_clock_update(struct sim *sim, uint32_t package)
{
	struct sim_clock *clock = &sim->clock;
	uint32_t count = sim->model->cpus_per_package, threads = sim->model->threads_per_core;
	struct sim_cpu *cpus = &sim->cpus[package * count];
	double total = 0.0, clocks[MACHINE_MAX_CPUS];

	if (!clock->on)
		return;
	for (uint32_t core = 0; core < clock->cores; core++) {
		double idle = 1.0;

		for (uint32_t thread = 0; thread < threads; thread++)
			idle *= 1.0 - (double)cpus[core + thread * clock->cores].load / SIM_LOAD_ONE;
		clock->activity[core] = 1.0 - idle;
		total += clock->activity[core];
	}
	for (uint32_t i = 0; i < count; i++)
		clocks[i] = bin_clock(clock, 1.0 + total - clock->activity[i % clock->cores]);
	apply_power_limit(sim, package, clocks);
	for (uint32_t i = 0; i < count; i++) {
		cpus[i].clock_q = (uint64_t)llround(clocks[i]);
		cpus[i].power_q = (uint32_t)llround(power_factor(clock, clocks[i]) * SIM_POWER_ONE);
	}
}

void sim_clock_set_power_limit(struct sim *sim, uint32_t package, uint64_t value)
{
	struct sim_clock *clock = &sim->clock;
	unsigned unit = (unsigned)(sim->model->rapl->unit & POWER_UNIT_FIELD);

	if (!clock->power_limit || package >= sim->model->packages)
		return;
	clock->limit_uw[package] =
		value & PKG_POWER_LIMIT_PL1_ENABLE ?
			(uint64_t)llround(ldexp((double)(value & PKG_POWER_LIMIT_PL1_POWER), -(int)unit) * 1e6) :
			0;
}
