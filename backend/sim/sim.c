/*
 * backend/sim/sim.c — the simulated CPU (configs/models/README.md, "What the simulation does"):
 * time, load, RAPL energy and the register map. Performance counters are in sim_pmu.c; building
 * the machine from its model in sim_build.c.
 *
 * Time is CLOCK_MONOTONIC_RAW, or virtual (starts at 0, moves by sim_advance and an optional
 * step per register access). Load is piecewise constant per CPU: from the host's /proc/stat
 * (sampled at most every 100 ms, when a register is read), a load script, or set explicitly.
 *
 * Everything advances lazily and analytically: a CPU's busy time and a domain's energy are
 * brought up to date only when something observes them or their load changes, so advancing by an
 * hour costs the same as advancing by a millisecond (plus one step per scripted load change).
 *
 * A host sample applies from each object's last observation onwards: what nobody has seen can
 * still take the newer load, what somebody has seen never changes. Script and set_load changes
 * apply exactly at their time.
 */
#include "backend/sim/sim.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "backend/sim/sim_internal.h"

#define FEMTOJOULES_PER_JOULE 1000000000000000ull

/* ---- time and load ---- */

struct sim_progress sim_cpu_progress_at(struct sim *sim, struct sim_cpu *cpu, uint64_t t)
{
	if (t > cpu->t) {
		uint64_t running = (t - cpu->t) - sim_rough_smi_time(sim, cpu->t, t);
		sim_u128 delta = (sim_u128)cpu->load * running;

		cpu->core += sim_clock_core_delta(sim, cpu, cpu->busy, delta);
		cpu->busy += delta;
		cpu->t = t;
	}
	return (struct sim_progress){ .busy = cpu->busy, .core = cpu->core,
				      .smis = sim_rough_smi_count(sim, cpu->t) };
}

/* Energy of the law from its start to seg_t0 + x (x <= seg_len for a ramp); differences of it
 * telescope, so integrating in many pieces gives exactly the one-piece result. */
static sim_u128 law_energy(const struct sim_power_law *law, uint64_t x)
{
	__int128 energy = (__int128)law->from_uw * x;

	if (law->seg_len && law->to_uw != law->from_uw)
		energy += ((__int128)law->to_uw - (__int128)law->from_uw) * ((__int128)x * x) /
			  (2 * (__int128)law->seg_len);
	return (sim_u128)energy;
}

static uint64_t law_power(const struct sim_power_law *law, uint64_t t)
{
	uint64_t x = t > law->seg_t0 ? t - law->seg_t0 : 0;

	if (!law->seg_len || law->to_uw == law->from_uw)
		return law->from_uw;
	if (x >= law->seg_len)
		return law->to_uw;
	return (uint64_t)((__int128)law->from_uw +
			  ((__int128)law->to_uw - (__int128)law->from_uw) * x /
				  (__int128)law->seg_len);
}

/* Energy of the domain over [a, b], both within its current law. */
static sim_u128 domain_energy(const struct sim_domain *domain, uint64_t a, uint64_t b)
{
	const struct sim_power_law *law = &domain->law;

	return law_energy(law, b - law->seg_t0) - law_energy(law, a - law->seg_t0);
}

/* Integrate the domain's power up to t, noting the energy at its last register update <= t. */
static void domain_advance(const struct sim *sim, struct sim_domain *domain, uint64_t t)
{
	uint64_t update;

	if (t <= domain->t)
		return;
	if (sim_rough_last_update(sim, domain, t, &update) && update > domain->t) {
		domain->update_fj = domain->energy_fj + domain_energy(domain, domain->t, update);
		domain->update_ns = update;
	}
	domain->energy_fj += domain_energy(domain, domain->t, t);
	domain->t = t;
}

/* The domain's power follows `law` from domain->t on (the caller advanced it to there). */
static void domain_set_law(struct sim_domain *domain, const struct sim_power_law *law)
{
	struct sim_history_entry *entry;

	if (memcmp(&domain->law, law, sizeof(*law)) == 0)
		return;
	domain->law = *law;
	entry = &domain->history[domain->history_count % SIM_HISTORY];
	entry->t = domain->t;
	entry->energy_fj = domain->energy_fj;
	entry->law = *law;
	domain->history_count++;
}

/* A load-driven domain: idle + (max - idle) x mean load of its CPUs, each weighted by its power
 * factor (sim_clock.c: 1 at the all-core clock), from domain->t on; never above max. */
void sim_domain_set_power(const struct sim *sim, struct sim_domain *domain)
{
	sim_u128 weighted = 0, span;
	uint64_t power;
	struct sim_power_law law = { .seg_t0 = domain->t };

	if (domain->traced)
		return;
	for (uint32_t i = domain->first_cpu; i < domain->first_cpu + domain->span; i++) {
		const struct sim_cpu *cpu = &sim->cpus[i];

		if (cpu->domain[domain->kind] != domain->index)
			continue;
		weighted += (sim_u128)cpu->load * (domain->clocked ? cpu->power_q : SIM_POWER_ONE);
	}
	span = (sim_u128)domain->span_uw * weighted /
	       ((sim_u128)domain->cpus * SIM_LOAD_ONE * SIM_POWER_ONE);
	power = domain->idle_uw + (span < domain->span_uw ? (uint64_t)span : domain->span_uw);
	law.from_uw = law.to_uw = power;
	if (domain->law.seg_len == 0 && domain->law.from_uw == power)
		return;
	domain_set_law(domain, &law);
}

static bool domain_in_package(const struct sim *sim, const struct sim_domain *domain,
			      uint32_t package)
{
	return sim->cpus[domain->first_cpu].package == package;
}

/* Bring the package's CPUs and domains up to t, then give `index` (a CPU of it, or UINT32_MAX
 * for none) the load `load` and the package's CPUs the clocks and domains the powers that
 * follow: one CPU's load moves every clock of its package (the active cores change). */
void sim_package_set(struct sim *sim, uint32_t package, uint32_t index, uint32_t load,
			uint64_t t)
{
	uint32_t first = package * sim->model->cpus_per_package;

	for (uint32_t i = first; i < first + sim->model->cpus_per_package; i++)
		sim_cpu_progress_at(sim, &sim->cpus[i], t);
	for (uint32_t i = 0; i < sim->domain_count; i++) {
		if (domain_in_package(sim, &sim->domains[i], package))
			domain_advance(sim, &sim->domains[i], t);
	}
	if (index != UINT32_MAX)
		sim->cpus[index].load = load;
	sim_clock_update(sim, package);
	for (uint32_t i = 0; i < sim->domain_count; i++) {
		if (domain_in_package(sim, &sim->domains[i], package))
			sim_domain_set_power(sim, &sim->domains[i]);
	}
}

/* Change one CPU's load at time t (objects are first brought up to t with the old load). */
void sim_cpu_set_load(struct sim *sim, uint32_t index, uint32_t load, uint64_t t)
{
	sim_package_set(sim, sim->cpus[index].package, index, load, t);
}

static void timeline_enter(struct sim *sim, size_t timeline, size_t segment, uint64_t t)
{
	const struct sim_timeline *line = &sim->script->timelines[timeline];
	struct sim_timeline_state *state = &sim->timeline_state[timeline];

	state->segment = segment;
	state->segment_end = t + line->duration_ns[segment];
	for (uint32_t cpu = 0; cpu < sim->cpu_count; cpu++) {
		if (sim->cpus[cpu].source == SIM_LOAD_SCRIPT &&
		    sim->script->cpu_timeline[cpu] == (int32_t)timeline)
			sim_cpu_set_load(sim, cpu, line->load[segment], t);
	}
}

static void script_schedule(struct sim *sim)
{
	sim->next_script_change = UINT64_MAX;
	for (size_t i = 0; sim->script && i < sim->script->timeline_count; i++) {
		if (sim->script->timelines[i].count &&
		    sim->timeline_state[i].segment_end < sim->next_script_change)
			sim->next_script_change = sim->timeline_state[i].segment_end;
	}
}

static void script_step(struct sim *sim, uint64_t change)
{
	for (size_t i = 0; i < sim->script->timeline_count; i++) {
		const struct sim_timeline *line = &sim->script->timelines[i];
		struct sim_timeline_state *state = &sim->timeline_state[i];

		if (line->count && state->segment_end == change)
			timeline_enter(sim, i, (state->segment + 1) % line->count, change);
	}
	script_schedule(sim);
}

/* Domains of `kind` follow segment `segment` of the trace from t on (past the last: hold its
 * end power; no trace for the kind: the load again). */
static void power_enter(struct sim *sim, unsigned kind, size_t segment, uint64_t t)
{
	const struct sim_power_trace *trace = sim->power;
	struct sim_power_state *state = &sim->power_state[kind];
	size_t count = trace ? trace->count[kind] : 0;
	struct sim_power_law law = { .seg_t0 = t };

	state->segment = segment;
	state->segment_end = UINT64_MAX;
	if (segment < count) {
		const struct sim_power_segment *now = &trace->segments[kind][segment];

		law.from_uw = now->from_uw;
		law.to_uw = now->to_uw;
		law.seg_len = now->duration_ns;
		state->segment_end = t + now->duration_ns;
	} else if (count) {
		law.from_uw = law.to_uw = trace->segments[kind][count - 1].to_uw;
	}
	for (uint32_t i = 0; i < sim->domain_count; i++) {
		struct sim_domain *domain = &sim->domains[i];

		if (domain->kind != kind)
			continue;
		domain_advance(sim, domain, t);
		domain->traced = count != 0;
		if (count)
			domain_set_law(domain, &law);
		else
			sim_domain_set_power(sim, domain);
	}
}

static void power_schedule(struct sim *sim)
{
	sim->next_power_change = UINT64_MAX;
	for (unsigned kind = 0; kind < RAPL_DOMAIN_COUNT; kind++) {
		if (sim->power_state[kind].segment_end < sim->next_power_change)
			sim->next_power_change = sim->power_state[kind].segment_end;
	}
}

static void power_step(struct sim *sim, uint64_t change)
{
	for (unsigned kind = 0; kind < RAPL_DOMAIN_COUNT; kind++) {
		if (sim->power_state[kind].segment_end == change)
			power_enter(sim, kind, sim->power_state[kind].segment + 1, change);
	}
	power_schedule(sim);
}

/* Apply every scripted load and power change up to t, in time order. */
static void script_run_until(struct sim *sim, uint64_t t)
{
	for (;;) {
		uint64_t change = sim->next_script_change < sim->next_power_change ?
					  sim->next_script_change : sim->next_power_change;

		if (change > t)
			return;
		if (sim->next_script_change == change)
			script_step(sim, change);
		if (sim->next_power_change == change)
			power_step(sim, change);
	}
}

/* The followed processes' loads (sim_follow.c) on the CPUs that follow the host. */
static void follow_sample(struct sim *sim, uint64_t now)
{
	const uint32_t *loads;
	uint32_t host_cpus;
	uint64_t from;

	if (!sim_follow_sample(sim, now, &from, &loads, &host_cpus))
		return;
	for (uint32_t cpu = 0; cpu < sim->cpu_count; cpu++) {
		if (sim->cpus[cpu].source == SIM_LOAD_HOST)
			sim_cpu_set_load(sim, cpu, loads[cpu % host_cpus], from);
	}
}

static void host_sample(struct sim *sim, uint64_t t)
{
	int ret = sim_host_load_sample(sim->host);

	sim->host_sampled_at = t;
	if (ret < 0) {
		if (!sim->host_failed)
			log_warn_errno(ret, "sim: host load sample (loads stay as they were)");
		sim->host_failed = true;
		return;
	}
	/* While processes are followed, /proc/stat gives only the rest of the host's load; the
	 * next fine sample applies it with theirs. */
	sim_follow_host_sampled(sim, t);
	if (sim_follow_active(sim))
		return;
	for (uint32_t cpu = 0; cpu < sim->cpu_count; cpu++) {
		if (sim->cpus[cpu].source == SIM_LOAD_HOST)
			sim_cpu_set_load(sim, cpu, sim_host_load_of(sim->host, cpu), t);
	}
}

/* Move time to "now" for an observation and apply the load changes due by then. */
static uint64_t sim_observe(struct sim *sim, bool register_access)
{
	uint64_t now;

	if (sim->virtual_time) {
		now = sim->now + (register_access ? sim->access_step_ns : 0);
	} else {
		now = clock_monotonic_raw_ns();
		if (now < sim->now)
			now = sim->now;
	}
	if (register_access && sim->rough.on) {
		/* An access during an SMI waits for its end: the CPU runs nothing meanwhile. */
		uint64_t end = sim_rough_smi_end(sim, now);

		while (!sim->virtual_time && end > now && clock_monotonic_raw_ns() < end)
			;
		now = end;
	}
	sim->now = now;
	/* Before anything is brought up to now: the followed load applies from its interval's
	 * start to what nobody observed since. */
	follow_sample(sim, now);
	script_run_until(sim, now);
	if (sim->takeover_count > 0)
		sim_kernel_run_until(sim, now);
	if (sim->host && now - sim->host_sampled_at >= sim->rough.host_sample_ns)
		host_sample(sim, now);
	return now;
}

/* ---- RAPL ---- */

#define FEMTOJOULES_PER_MICROJOULE 1000000000u

/* Whole register units in the energy up to the last update (a unit code: 2^-e J, or 2^e uJ). */
static uint64_t domain_units(const struct sim_domain *domain)
{
	if (rapl_unit_code_is_microjoule(domain->exponent))
		return (uint64_t)(domain->update_fj /
				  ((sim_u128)FEMTOJOULES_PER_MICROJOULE
				   << (domain->exponent & RAPL_UNIT_CODE_MICROJOULE_MAX_E)));
	return (uint64_t)((domain->update_fj << domain->exponent) / FEMTOJOULES_PER_JOULE);
}

/* The out-of-order option: of every N reads of a domain, the first is remembered and the last
 * returns it, as if that completion had been delivered after the N-2 newer ones between. */
static void late_completion(const struct sim *sim, struct sim_domain *domain, uint64_t *value)
{
	uint64_t phase;

	if (sim->late_energy_reads == 0)
		return;
	phase = domain->reads++ % sim->late_energy_reads;
	if (phase == 0)
		domain->held = *value;
	else if (phase == sim->late_energy_reads - 1)
		*value = domain->held;
}

/* Energy status, unit and power-info registers: all read-only, writes are #GP. */
static int rapl_access(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t *value)
{
	int kind;

	if (!sim->unit_address)
		return -ENOENT;
	if (address == sim->unit_address) {
		*value = sim->model->rapl->unit;
		return 0;
	}
	if (address == MSR_PKG_POWER_INFO && sim->model->rapl->power_info) {
		*value = *sim->model->rapl->power_info;
		return 0;
	}
	kind = rapl_domain_of_address(address);
	if (kind < 0 || cpu->domain[kind] == SIM_NO_DOMAIN)
		return -ENOENT;
	domain_advance(sim, &sim->domains[cpu->domain[kind]], sim->now);
	*value = domain_units(&sim->domains[cpu->domain[kind]]) & RAPL_ENERGY_COUNTER_MASK;
	late_completion(sim, &sim->domains[cpu->domain[kind]], value);
	return 0;
}

/* ---- the register map ---- */

static int model_register_index(const struct sim *sim, uint32_t address)
{
	for (unsigned i = 0; i < sim->model->registers_count; i++) {
		if (sim->model->registers[i].address == address)
			return (int)i;
	}
	return -1;
}

static int read_time_register(struct sim *sim, struct sim_cpu *cpu, uint32_t address,
			      uint64_t *value)
{
	if (address == MSR_IA32_TSC) {
		sim_u128 ticks = (sim_u128)sim->now * sim->model->tsc_hz / SIM_NS_PER_SECOND;

		*value = (uint64_t)ticks + (uint64_t)cpu->tsc_offset;
		return 0;
	}
	if (address == MSR_SMI_COUNT && sim->model->smi_count) {
		*value = sim_rough_smi_count(sim, sim->now) & 0xFFFFFFFFull;
		return 0;
	}
	return -ENOENT;
}

int sim_read_register(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t *value)
{
	int ret = read_time_register(sim, cpu, address, value);
	int index;

	if (ret == -ENOENT)
		ret = rapl_access(sim, cpu, address, value);
	if (ret == -ENOENT)
		ret = sim_pmu_read(sim, cpu, address, value);
	if (ret != -ENOENT)
		return ret;
	index = model_register_index(sim, address);
	if (index < 0 || !cpu->registers)
		return -EIO; /* the model lacks it: rdmsr raises #GP, the driver says EIO */
	*value = cpu->registers[index];
	return 0;
}

/* MSR_PKG_POWER_LIMIT is one register per package (SDM vol. 4, "Package" scope): every CPU of
 * it reads what one wrote, and PL1 may cap the package's clock from now on. */
static void set_power_limit(struct sim *sim, uint32_t package, int index, uint64_t value)
{
	uint32_t first = package * sim->model->cpus_per_package;

	for (uint32_t i = first; i < first + sim->model->cpus_per_package; i++)
		sim->cpus[i].registers[index] = value;
	sim_clock_set_power_limit(sim, package, value);
	sim_package_set(sim, package, UINT32_MAX, 0, sim->now);
}

static int write_register(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t value)
{
	uint64_t ignored;
	int ret, index;

	if (address == MSR_IA32_TSC) {
		sim_u128 ticks = (sim_u128)sim->now * sim->model->tsc_hz / SIM_NS_PER_SECOND;

		cpu->tsc_offset = (int64_t)(value - (uint64_t)ticks);
		return 0;
	}
	ret = read_time_register(sim, cpu, address, &ignored);
	if (ret == -ENOENT)
		ret = rapl_access(sim, cpu, address, &ignored);
	if (ret != -ENOENT)
		return -EIO; /* SMI count and RAPL status/unit/info are read-only */
	ret = sim_pmu_write(sim, cpu, address, value);
	if (ret != -ENOENT)
		return ret;
	index = model_register_index(sim, address);
	if (index < 0 || !cpu->registers)
		return -EIO;
	if ((value ^ cpu->registers[index]) & ~sim->model->registers[index].write_mask)
		return -EIO;
	cpu->registers[index] = value;
	if (address == MSR_PKG_POWER_LIMIT)
		set_power_limit(sim, cpu->package, index, value);
	return 0;
}

int sim_read(struct sim *sim, uint32_t cpu, uint32_t address, uint64_t *value)
{
	if (cpu >= sim->cpu_count)
		return -ENXIO;
	sim_observe(sim, true);
	return sim_read_register(sim, &sim->cpus[cpu], address, value);
}

int sim_write(struct sim *sim, uint32_t cpu, uint32_t address, uint64_t value)
{
	if (cpu >= sim->cpu_count)
		return -ENXIO;
	sim_observe(sim, true);
	return write_register(sim, &sim->cpus[cpu], address, value);
}

/* ---- the backend_sim_* calls ---- */

int sim_now(struct sim *sim, uint64_t *now_ns)
{
	*now_ns = sim_observe(sim, false);
	return 0;
}

int sim_advance(struct sim *sim, uint64_t ns)
{
	if (!sim->virtual_time)
		return -EOPNOTSUPP;
	if (ns > UINT64_MAX - sim->now)
		return -EOVERFLOW;
	sim->now += ns;
	sim_observe(sim, false);
	return 0;
}

int sim_set_load(struct sim *sim, int cpu, double load)
{
	uint64_t now;
	uint32_t fixed;

	if (!isfinite(load) || load < 0.0 || load > 1.0)
		return -EINVAL;
	if (cpu >= (int)sim->cpu_count)
		return -ENXIO;
	fixed = (uint32_t)lround(load * SIM_LOAD_ONE);
	now = sim_observe(sim, false);
	for (uint32_t i = 0; i < sim->cpu_count; i++) {
		if (cpu >= 0 && i != (uint32_t)cpu)
			continue;
		sim->cpus[i].source = SIM_LOAD_FIXED;
		sim_cpu_set_load(sim, i, fixed, now);
	}
	return 0;
}

void sim_script_release(struct sim *sim)
{
	sim_script_free(sim->script);
	free(sim->timeline_state);
	sim->script = NULL;
	sim->timeline_state = NULL;
	sim->next_script_change = UINT64_MAX;
}

/* Only on the host's own /proc/stat, which virtual time never reads. */
int sim_follow_process(struct sim *sim, pid_t pid, bool follow)
{
	if (!sim->host_is_real)
		return -EOPNOTSUPP;
	return sim_follow_change(sim, pid, follow, sim_observe(sim, false));
}

/* Replace the load script: its CPUs follow it from now on, the others keep their load. */
int sim_load_script(struct sim *sim, const char *path)
{
	struct sim_script *script;
	uint64_t now = sim_observe(sim, false);
	int ret = sim_script_load(path, sim->cpu_count, &script);

	if (ret < 0)
		return ret;
	sim_script_release(sim);
	sim->timeline_state = calloc(script->timeline_count, sizeof(*sim->timeline_state));
	if (!sim->timeline_state) {
		sim_script_free(script);
		return -ENOMEM;
	}
	sim->script = script;
	for (uint32_t cpu = 0; cpu < sim->cpu_count; cpu++) {
		if (script->cpu_timeline[cpu] >= 0)
			sim->cpus[cpu].source = SIM_LOAD_SCRIPT;
	}
	for (size_t i = 0; i < script->timeline_count; i++) {
		if (script->timelines[i].count)
			timeline_enter(sim, i, 0, now);
	}
	script_schedule(sim);
	return 0;
}

int sim_package_first_cpu(const struct sim *sim, uint32_t package)
{
	if (package >= sim->model->packages)
		return -ENXIO;
	return (int)(package * sim->model->cpus_per_package);
}

static double femtojoules_to_joules(sim_u128 femtojoules)
{
	return (double)(uint64_t)(femtojoules / FEMTOJOULES_PER_JOULE) +
	       (double)(uint64_t)(femtojoules % FEMTOJOULES_PER_JOULE) /
		       (double)FEMTOJOULES_PER_JOULE;
}

static int truth_domain(struct sim *sim, uint32_t cpu, enum rapl_domain kind,
			struct sim_domain **out)
{
	if (cpu >= sim->cpu_count)
		return -ENXIO;
	if ((unsigned)kind >= RAPL_DOMAIN_COUNT || sim->cpus[cpu].domain[kind] == SIM_NO_DOMAIN)
		return -ENOENT;
	*out = &sim->domains[sim->cpus[cpu].domain[kind]];
	return 0;
}

int sim_energy_truth(struct sim *sim, uint32_t cpu, enum rapl_domain kind,
		     struct sim_energy_truth *out)
{
	struct sim_domain *domain;
	uint64_t now;
	int ret = truth_domain(sim, cpu, kind, &domain);

	if (ret < 0)
		return ret;
	now = sim_observe(sim, false);
	domain_advance(sim, domain, now);
	out->now_ns = now;
	out->joules = femtojoules_to_joules(domain->energy_fj);
	out->units_at_update = domain_units(domain);
	out->last_update_ns = domain->update_ns;
	out->femtojoules = domain->energy_fj;
	out->power_microwatts = law_power(&domain->law, now);
	out->energy_exponent = domain->exponent;
	out->smi_count = sim_rough_smi_count(sim, now);
	return 0;
}

/* sim_domain_set_power's slope for one CPU: a whole CPU of load more adds span / cpus at its
 * power factor (the cap at max and the other cores' bins moving with it left out). A traced
 * domain follows its trace, not the load: nothing. */
int sim_busy_cpu_microwatts(struct sim *sim, uint32_t cpu, enum rapl_domain kind, uint64_t *uw)
{
	struct sim_domain *domain;
	int ret = truth_domain(sim, cpu, kind, &domain);
	sim_u128 slope;

	if (ret < 0)
		return ret;
	slope = (sim_u128)domain->span_uw *
		(domain->clocked ? sim->cpus[cpu].power_q : SIM_POWER_ONE) /
		((sim_u128)domain->cpus * SIM_POWER_ONE);
	*uw = domain->traced ? 0 : (uint64_t)slope;
	return 0;
}

int sim_energy_at(struct sim *sim, uint32_t cpu, enum rapl_domain kind, uint64_t at_ns,
		  struct sim_energy_truth *out)
{
	const struct sim_history_entry *entry = NULL;
	struct sim_domain *domain;
	uint64_t now, oldest, newest, low, high, update = 0;
	sim_u128 energy;
	int ret = truth_domain(sim, cpu, kind, &domain);

	if (ret < 0)
		return ret;
	now = sim_observe(sim, false);
	domain_advance(sim, domain, now);
	newest = domain->history_count;
	oldest = newest > SIM_HISTORY ? newest - SIM_HISTORY : 0;
	if (at_ns > now || newest == 0 || domain->history[oldest % SIM_HISTORY].t > at_ns)
		return -ERANGE;
	/* The latest entry at or before at_ns: its law held from then until the next entry. */
	low = oldest;
	high = newest - 1;
	while (low < high) {
		uint64_t middle = low + (high - low + 1) / 2;

		if (domain->history[middle % SIM_HISTORY].t <= at_ns)
			low = middle;
		else
			high = middle - 1;
	}
	entry = &domain->history[low % SIM_HISTORY];
	energy = entry->energy_fj + law_energy(&entry->law, at_ns - entry->law.seg_t0) -
		 law_energy(&entry->law, entry->t - entry->law.seg_t0);
	sim_rough_last_update(sim, domain, at_ns, &update);
	*out = (struct sim_energy_truth){
		.now_ns = at_ns,
		.joules = femtojoules_to_joules(energy),
		.last_update_ns = update,
		.femtojoules = energy,
		.power_microwatts = law_power(&entry->law, at_ns),
		.energy_exponent = domain->exponent,
		.smi_count = sim_rough_smi_count(sim, at_ns),
	};
	return 0;
}

/* Replace the power trace: the domains it names follow it from now on, the others their load. */
int sim_power_trace(struct sim *sim, const char *text, const char *where)
{
	struct sim_power_trace *trace;
	uint64_t now = sim_observe(sim, false);
	int ret = sim_power_parse(sim, text, where, &trace);

	if (ret < 0)
		return ret;
	sim_power_free(sim->power);
	sim->power = trace;
	sim->power_started = now;
	for (unsigned kind = 0; kind < RAPL_DOMAIN_COUNT; kind++)
		power_enter(sim, kind, 0, now);
	power_schedule(sim);
	return 0;
}

bool sim_is_rough(const struct sim *sim, uint64_t *seed)
{
	*seed = sim->rough.seed;
	return sim->rough.on;
}

const struct machine_info *sim_machine_info(const struct sim *sim)
{
	return &sim->info;
}
