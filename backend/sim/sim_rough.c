/*
 * backend/sim/sim_rough.c — what makes the simulated CPU as rough as the hardware (the thesis,
 * seed 001 §2.3, measured ±20 µs of update jitter and an SMI about every 16 ms): energy
 * registers that update on a jittered grid with a phase per domain, and SMIs that stop the CPU
 * for a while and count in MSR_SMI_COUNT.
 *
 * Every random draw is a pure function of (seed, what, index) — a counter-based generator
 * (splitmix64) — so the n-th update or SMI is the same whenever and however often it is asked
 * for: a replay with the same seed and the same requests gives the same registers.
 *
 * The ideal CPU is the special case: updates exactly every 1 ms in phase, SMIs every period that
 * take no time (the count still moves).
 */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "backend/sim/sim_internal.h"

#define DRAW_UPDATE 0x5550444154450000ull /* "UPDATE" */
#define DRAW_SMI_START 0x534D495354000000ull
#define DRAW_SMI_LENGTH 0x534D494C454E0000ull
#define DRAW_SMI_OFFSET 0x534D494F46460000ull

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static uint64_t draw(const struct sim *sim, uint64_t what, uint64_t index)
{
	return splitmix64(sim->rough.seed ^ splitmix64(what ^ splitmix64(index)));
}

/* Uniform in [0, 1). */
static double draw_unit(const struct sim *sim, uint64_t what, uint64_t index)
{
	return (double)(draw(sim, what, index) >> 11) * 0x1.0p-53;
}

double sim_rough_draw_normal(const struct sim *sim, uint64_t what, uint64_t index, double spread)
{
	double value = spread;

	/* Box-Muller, sigma = spread / 3; redraw the rare tail beyond 3 sigma. */
	for (uint64_t attempt = 0; attempt < 8 && fabs(value) >= spread; attempt++) {
		double u1 = draw_unit(sim, what, index * 16 + 2 * attempt) + 0x1.0p-54;
		double u2 = draw_unit(sim, what, index * 16 + 2 * attempt + 1);

		value = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2) * spread / 3.0;
	}
	return fabs(value) >= spread ? 0.0 : value;
}

uint64_t sim_rough_draw(const struct sim *sim, uint64_t what, uint64_t index)
{
	return draw(sim, what, index);
}

/* An offset in [-spread, spread] ns from the configured distribution. */
static int64_t draw_jitter(const struct sim *sim, uint64_t what, uint64_t index)
{
	double spread = (double)sim->rough.jitter_spread_ns, value;

	if (sim->rough.jitter_spread_ns == 0)
		return 0;
	if (sim->rough.jitter == SIM_JITTER_UNIFORM)
		value = (2.0 * draw_unit(sim, what, index) - 1.0) * spread;
	else
		value = sim_rough_draw_normal(sim, what, index, spread);
	return (int64_t)llround(value);
}

static uint64_t host_tick_ns(void)
{
	long ticks_per_second = sysconf(_SC_CLK_TCK);

	return ticks_per_second > 0 ? SIM_NS_PER_SECOND / (uint64_t)ticks_per_second : 0;
}

void sim_rough_configure(struct sim *sim, bool ideal, uint64_t seed)
{
	const struct sim_model_rough *model = sim->model->rough;
	struct sim_rough *rough = &sim->rough;
	uint64_t tsc_hz = sim->model->tsc_hz;
	uint64_t period = (uint64_t)sim->model->smi_period_ms * 1000000ull;

	memset(rough, 0, sizeof(*rough));
	rough->seed = seed;
	rough->update_interval_ns = SIM_UPDATE_NS;
	rough->host_sample_ns = SIM_HOST_SAMPLE_NS;
	if (ideal || !model)
		return;
	rough->on = true;
	rough->update_interval_ns = model->update_interval_ns;
	rough->jitter = model->jitter;
	rough->jitter_spread_ns = model->jitter_spread_ns;
	rough->smi_min_ns = (uint64_t)model->smi_min_cycles * SIM_NS_PER_SECOND / tsc_hz;
	rough->smi_max_ns = (uint64_t)model->smi_max_cycles * SIM_NS_PER_SECOND / tsc_hz;
	rough->smi_jitter_ns = (uint64_t)model->smi_jitter_us * 1000ull;
	rough->smi_offset_ns = period ? draw(sim, DRAW_SMI_OFFSET, 0) % period : 0;
	rough->host_sample_ns = (uint64_t)model->host_sample_us * 1000ull;
	/* /proc/stat counts busy time in ticks of 1/USER_HZ (10 ms): a read between two ticks
	 * finds nothing new and costs its generation in the kernel (most of msrd's CPU while a
	 * page is sampled at 1 kHz). Scripted loads and power traces are not sampled: they apply
	 * at every observation. */
	if (rough->host_sample_ns < host_tick_ns())
		rough->host_sample_ns = host_tick_ns();
}

/* ---- the update grid ---- */

/* Update k of the domain: phase + k * interval + jitter; false when that lies before time 0. */
static bool update_time(const struct sim *sim, const struct sim_domain *domain, uint64_t k,
			uint64_t *at)
{
	int64_t jitter = sim->rough.on ? draw_jitter(sim, DRAW_UPDATE ^ domain->index, k) : 0;
	uint64_t grid = domain->phase_ns + k * sim->rough.update_interval_ns;

	if (jitter < 0 && (uint64_t)-jitter > grid)
		return false;
	*at = grid + (uint64_t)jitter;
	return true;
}

bool sim_rough_last_update(const struct sim *sim, const struct sim_domain *domain, uint64_t t,
			   uint64_t *update_ns)
{
	uint64_t interval = sim->rough.update_interval_ns;
	uint64_t k = t < domain->phase_ns ? 0 : (t - domain->phase_ns) / interval + 1;

	/* |jitter| < interval / 2, so update k + 1 is after t and k - 2 before it. */
	for (int tries = 0; tries < 3; tries++, k--) {
		uint64_t at;

		if (update_time(sim, domain, k, &at) && at <= t) {
			*update_ns = at;
			return true;
		}
		if (k == 0)
			break;
	}
	return false;
}

/* ---- SMIs ---- */

/* SMI k (k >= 0): ideal, at start + (k + 1) * period taking no time; rough, at start + offset +
 * k * period + jitter, taking between smi_min_ns and smi_max_ns. */
static void smi_window(const struct sim *sim, uint64_t k, uint64_t *begin, uint64_t *end)
{
	uint64_t period = (uint64_t)sim->model->smi_period_ms * 1000000ull;
	const struct sim_rough *rough = &sim->rough;
	uint64_t late = 0;

	if (!rough->on) {
		*begin = *end = sim->start_ns + (k + 1) * period;
		return;
	}
	/* A jitter of +-smi_jitter_ns around a grid point smi_jitter_ns after the slot's offset. */
	if (rough->smi_jitter_ns)
		late = draw(sim, DRAW_SMI_START, k) % (2 * rough->smi_jitter_ns + 1);
	*begin = sim->start_ns + rough->smi_offset_ns + k * period + late;
	*end = *begin + rough->smi_min_ns +
	       (rough->smi_max_ns > rough->smi_min_ns ?
			draw(sim, DRAW_SMI_LENGTH, k) % (rough->smi_max_ns - rough->smi_min_ns + 1) :
			0);
}

/* The index of the SMI whose grid slot holds t (its window may start slightly later). */
static uint64_t smi_slot(const struct sim *sim, uint64_t t)
{
	uint64_t period = (uint64_t)sim->model->smi_period_ms * 1000000ull;

	return t <= sim->start_ns ? 0 : (t - sim->start_ns) / period;
}

uint64_t sim_rough_smi_count(const struct sim *sim, uint64_t t)
{
	uint64_t k, begin, end;

	if (!sim->model->smi_period_ms || t < sim->start_ns)
		return 0;
	/* Windows are ordered and each lies in its own period slot (checked with the model). */
	k = smi_slot(sim, t) + 1;
	for (;;) {
		smi_window(sim, k, &begin, &end);
		if (begin <= t)
			return k + 1;
		if (k == 0)
			return 0;
		k--;
	}
}

uint64_t sim_rough_smi_end(const struct sim *sim, uint64_t t)
{
	uint64_t count = sim_rough_smi_count(sim, t), begin, end;

	if (!sim->rough.on || count == 0)
		return t;
	smi_window(sim, count - 1, &begin, &end);
	return end > t ? end : t;
}

uint64_t sim_rough_smi_time(const struct sim *sim, uint64_t a, uint64_t b)
{
	uint64_t total = 0, first, last;

	if (!sim->rough.on || !sim->model->smi_period_ms || b <= a)
		return 0;
	first = sim_rough_smi_count(sim, a);
	last = sim_rough_smi_count(sim, b);
	/* The SMI in progress at a (index first - 1) and those that began in (a, b]. */
	for (uint64_t k = first ? first - 1 : 0; k < last; k++) {
		uint64_t begin, end;

		smi_window(sim, k, &begin, &end);
		if (begin < a)
			begin = a;
		if (end > b)
			end = b;
		if (end > begin)
			total += end - begin;
	}
	return total;
}
