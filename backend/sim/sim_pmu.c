/*
 * backend/sim/sim_pmu.c — the simulated CPU's performance monitoring: Intel architectural perfmon
 * (SDM vol. 3B ch. 18: IA32_PERFEVTSELx, IA32_PMCx and their full-width aliases, the fixed
 * counters and FIXED_CTR_CTRL, PERF_GLOBAL_CTRL / STATUS / OVF_CTRL, PERF_CAPABILITIES), AMD's
 * core PERF_CTL/PERF_CTR pairs (PPR for family 19h, with the legacy aliases of counters 0..3),
 * and APERF/MPERF.
 *
 * Counting: core cycles = the CPU's busy time at its actual clock (sim_clock.c: core_hz on the
 * ideal CPU, the turbo bin of its active cores plus noise on the rough one); reference cycles =
 * busy time * TSC Hz (REF_XCLK: busy time * ref_xclk_hz); instructions = core cycles * model IPC; LLC references/misses, branches and branch misses and the
 * model's extra events = instructions * per_kinst / 1000. On AMD the events are 0x76 (cycles not
 * in halt), 0xC0 (retired instructions), 0xC2 / 0xC3 (retired / mispredicted branches), and
 * 0x2B (SMIs received: one per simulated SMI, as MSR_SMI_COUNT counts them on Intel, idle or
 * busy, with either the USR or the OS filter). A counter whose control selects only
 * USR (or only OS) counts the model's user_share (or 1 - user_share) of that. CMASK, INV, EDGE
 * and the PMI bits are accepted and stored but do not change what is counted. Unknown events,
 * architectural events CPUID 0xA.EBX marks unavailable, and those past the EBX vector length of
 * CPUID 0xA.EAX[31:24] (which enumerate nothing), count nothing.
 *
 * Intel TSX (SDM vol. 3B 18.3.6.5): on a part with HLE or RTM, IN_TX (bit 32) may be set in any
 * IA32_PERFEVTSELx and IN_TXCP (bit 33) in IA32_PERFEVTSEL2 only; elsewhere they are reserved
 * (#GP). The simulated load runs no transactions, so a counter with IN_TX counts nothing.
 *
 * Overflow: a counter that wrapped sets its bit in IA32_PERF_GLOBAL_STATUS. Wraps are noticed
 * when the counters are brought up to date: before any control write, a status read, and a write
 * of the counter itself (which would otherwise replace the wrapped count unseen).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/sim/sim_internal.h"

#define PERF_CAPABILITIES_FULL_WIDTH_WRITE (1ull << 13)
#define OVF_CTRL_EXTRA_BITS (3ull << 62) /* OvfBuf, CondChgd: accepted, nothing to clear */
#define PERFEVTSEL_IN_TX (1ull << 32)
#define PERFEVTSEL_IN_TXCP (1ull << 33)
#define IN_TXCP_COUNTER 2u               /* the one event select that has IN_TXCP */
/* AMD PPR for family 17h/19h, PMCx02B LsSmiRx: SMIs received. */
#define AMD_EVENT_SMI_RECEIVED 0x2Bu

static uint64_t width_mask(uint32_t width)
{
	return width >= 64 ? UINT64_MAX : (1ull << width) - 1;
}

/* Events by `progress` of a counter counting `rate` a second: of busy time, or of core cycles at
 * core_hz (the actual clock's cycles, SIM_CLOCK_ONE a clock of core_hz). */
static uint64_t events_at(const struct sim_counter *counter, struct sim_progress progress)
{
	if (counter->smis)
		return counter->rate ? progress.smis : 0;
	/* Truncation to 64 bits is harmless: only differences modulo 2^64 are used. */
	if (counter->core_clock)
		return (uint64_t)(progress.core * counter->rate /
				  (SIM_BUSY_PER_SECOND * SIM_CLOCK_ONE));
	return (uint64_t)(progress.busy * counter->rate / SIM_BUSY_PER_SECOND);
}

uint64_t sim_counter_value(const struct sim_counter *counter, struct sim_progress busy)
{
	uint64_t delta = events_at(counter, busy) - events_at(counter, counter->busy_base);

	return (counter->base + delta) & counter->mask;
}

/* Fold the events counted so far into base; true when the counter wrapped meanwhile. */
static bool counter_rebase(struct sim_counter *counter, struct sim_progress busy)
{
	uint64_t delta = events_at(counter, busy) - events_at(counter, counter->busy_base);
	uint64_t raw = counter->base + delta;
	bool wrapped = raw < counter->base || raw > counter->mask;

	counter->base = raw & counter->mask;
	counter->busy_base = busy;
	return wrapped;
}

void sim_counter_set(struct sim_counter *counter, struct sim_progress busy, uint64_t value)
{
	counter->base = value & counter->mask;
	counter->busy_base = busy;
}

/* ---- configuration ---- */

static uint64_t per_kinst_rate(uint64_t instructions_rate, double per_kinst)
{
	return (uint64_t)llround((double)instructions_rate * per_kinst / 1000.0);
}

static int add_event_clocked(struct sim_pmu *pmu, uint32_t ebx, int arch_index, unsigned event,
			     unsigned umask, uint64_t rate, bool reference)
{
	struct sim_event_rate *events;

	if (arch_index >= 0 &&
	    ((uint32_t)arch_index >= pmu->arch_events_length || (ebx & (1u << arch_index))))
		return 0;
	events = realloc(pmu->events, (pmu->event_count + 1) * sizeof(*events));
	if (!events)
		return -ENOMEM;
	pmu->events = events;
	events[pmu->event_count++] = (struct sim_event_rate){ .event = (uint16_t)event,
							      .umask = (uint8_t)umask,
							      .rate = rate,
							      .reference = reference };
	return 0;
}

/* An event that counts with the core clock (cycles, and what instructions cause). */
static int add_event(struct sim_pmu *pmu, uint32_t ebx, int arch_index, unsigned event,
		     unsigned umask, uint64_t rate)
{
	return add_event_clocked(pmu, ebx, arch_index, event, umask, rate, false);
}

static int add_model_events(struct sim_pmu *pmu, const struct sim_model_pmu *rates)
{
	int ret = 0;

	for (unsigned i = 0; i < rates->events_count; i++) {
		ret |= add_event(pmu, 0, -1, rates->events[i].event, rates->events[i].umask,
				 per_kinst_rate(pmu->instructions_rate, rates->events[i].per_kinst));
	}
	return ret;
}

static int configure_amd_events(struct sim_pmu *pmu, const struct sim_model_pmu *rates)
{
	uint64_t instructions = pmu->instructions_rate;
	int ret = 0;

	ret |= add_event(pmu, 0, -1, 0x76, 0x00, pmu->cycles_rate);
	ret |= add_event(pmu, 0, -1, 0xC0, 0x00, instructions);
	ret |= add_event(pmu, 0, -1, 0xC2, 0x00,
			 per_kinst_rate(instructions, rates->branches_per_kinst));
	ret |= add_event(pmu, 0, -1, 0xC3, 0x00,
			 per_kinst_rate(instructions, rates->branch_misses_per_kinst));
	ret |= add_event(pmu, 0, -1, AMD_EVENT_SMI_RECEIVED, 0x00, 1);
	if (ret == 0)
		pmu->events[pmu->event_count - 1].smis = true;
	ret |= add_model_events(pmu, rates);
	return ret ? -ENOMEM : 0;
}

static int configure_events(struct sim_pmu *pmu, const struct sim_model *model)
{
	const struct sim_model_pmu *rates = model->pmu;
	uint32_t ebx = model->cpuid_0a[1];
	uint64_t instructions = pmu->instructions_rate;
	int ret = 0;

	ret |= add_event(pmu, ebx, ARCH_EVENT_CORE_CYCLES, 0x3C, 0x00, pmu->cycles_rate);
	ret |= add_event(pmu, ebx, ARCH_EVENT_INSTRUCTIONS, 0xC0, 0x00, instructions);
	/* The architectural event 3CH/01H counts REF_XCLK (100 MHz on Sandy Bridge to Skylake:
	 * SDM vol. 3B, the model-specific event tables, CPU_CLK_THREAD_UNHALTED.REF_XCLK), while
	 * fixed counter 2 (CPU_CLK_UNHALTED.REF_TSC) counts at the TSC rate. */
	ret |= add_event_clocked(pmu, ebx, ARCH_EVENT_REFERENCE_CYCLES, 0x3C, 0x01,
				 pmu->ref_xclk_rate, true);
	ret |= add_event(pmu, ebx, ARCH_EVENT_LLC_REFERENCES, 0x2E, 0x4F,
			 per_kinst_rate(instructions, rates->llc_references_per_kinst));
	ret |= add_event(pmu, ebx, ARCH_EVENT_LLC_MISSES, 0x2E, 0x41,
			 per_kinst_rate(instructions, rates->llc_misses_per_kinst));
	ret |= add_event(pmu, ebx, ARCH_EVENT_BRANCHES, 0xC4, 0x00,
			 per_kinst_rate(instructions, rates->branches_per_kinst));
	ret |= add_event(pmu, ebx, ARCH_EVENT_BRANCH_MISSES, 0xC5, 0x00,
			 per_kinst_rate(instructions, rates->branch_misses_per_kinst));
	ret |= add_model_events(pmu, rates);
	return ret ? -ENOMEM : 0;
}

static void configure_valid_bits(struct sim_pmu *pmu)
{
	uint64_t nibble = FIXED_CTR_CTRL_OS | FIXED_CTR_CTRL_USR | FIXED_CTR_CTRL_PMI;

	/* AnyThread (PERFEVTSEL bit 21, fixed nibble bit 2) is reserved before perfmon v3. */
	pmu->evtsel_valid = PERFEVTSEL_VALID_BITS;
	if (pmu->version < 3)
		pmu->evtsel_valid &= ~PERFEVTSEL_ANY;
	else
		nibble |= FIXED_CTR_CTRL_ANY;
	pmu->fixed_ctrl_valid = 0;
	for (uint32_t i = 0; i < pmu->fixed_count; i++)
		pmu->fixed_ctrl_valid |= nibble << (i * FIXED_CTR_CTRL_BITS_PER_COUNTER);
	pmu->global_ctrl_valid = width_mask(pmu->gp_count) |
				 (width_mask(pmu->fixed_count) << GLOBAL_CTRL_FIXED_SHIFT);
}

int sim_pmu_configure(struct sim *sim)
{
	const struct sim_model *model = sim->model;
	struct sim_pmu *pmu = &sim->pmu;
	uint32_t eax, edx;

	memset(pmu, 0, sizeof(*pmu));
	pmu->perf_capabilities = model->perf_capabilities;
	pmu->full_width_writes = (model->perf_capabilities & PERF_CAPABILITIES_FULL_WIDTH_WRITE) != 0;
	pmu->tsx = sim_model_has_tsx(model);
	if (model->pmu) {
		pmu->cycles_rate = model->core_hz;
		pmu->ref_cycles_rate = model->tsc_hz;
		pmu->ref_xclk_rate = model->ref_xclk_hz ? model->ref_xclk_hz : model->tsc_hz;
		pmu->instructions_rate = (uint64_t)llround((double)model->core_hz * model->pmu->ipc);
		pmu->user_permille = (uint32_t)lround(model->pmu->user_share * 1000.0);
	}
	if (model->core_counters) {
		pmu->amd = true;
		pmu->perfmon_v2 = model->perfmon_v2;
		pmu->gp_count = model->core_counters;
		pmu->global_ctrl_valid = width_mask(pmu->gp_count);
		pmu->gp_mask = width_mask(model->core_counter_width);
		pmu->evtsel_valid = AMD_PERF_CTL_VALID_BITS;
		return configure_amd_events(pmu, model->pmu);
	}
	if (!model->cpuid_0a)
		return 0;
	eax = model->cpuid_0a[0];
	edx = model->cpuid_0a[3];
	pmu->version = CPUID_0A_EAX_VERSION(eax);
	pmu->arch_events_length = eax >> 24;
	pmu->gp_count = CPUID_0A_EAX_GP_COUNTERS(eax);
	pmu->gp_mask = width_mask(CPUID_0A_EAX_GP_WIDTH(eax));
	if (pmu->version >= 2) {
		pmu->fixed_count = CPUID_0A_EDX_FIXED_COUNTERS(edx);
		pmu->fixed_mask = width_mask(CPUID_0A_EDX_FIXED_WIDTH(edx));
	}
	configure_valid_bits(pmu);
	return configure_events(pmu, model);
}

void sim_pmu_free(struct sim *sim)
{
	free(sim->pmu.events);
	sim->pmu.events = NULL;
}

/* The counters a CPU has: its core type's on a hybrid part (whose leaf 0AH gives only the
 * common ones), else the part's. */
static void cpu_counter_counts(const struct sim *sim, struct sim_cpu *cpu)
{
	const struct sim_model *model = sim->model;
	const struct sim_model_core_type *type =
		sim_core_type_of(model, (uint32_t)(cpu - sim->cpus) % model->cpus_per_package);

	cpu->gp_count = type ? type->gp_counters : sim->pmu.gp_count;
	cpu->fixed_count = type ? type->fixed_counters : sim->pmu.fixed_count;
	cpu->slots_per_cycle = type ? type->slots_per_cycle : 0;
}

void sim_pmu_reset_cpu(const struct sim *sim, struct sim_cpu *cpu)
{
	const struct sim_pmu *pmu = &sim->pmu;

	cpu_counter_counts(sim, cpu);

	for (uint32_t i = 0; i < SIM_MAX_GP_COUNTERS; i++)
		cpu->gp[i] = (struct sim_counter){ .mask = pmu->gp_mask, .core_clock = true };
	for (uint32_t i = 0; i < SIM_MAX_FIXED_COUNTERS; i++)
		cpu->fixed[i] = (struct sim_counter){ .mask = pmu->fixed_mask, .core_clock = i != 2 };
	/* At reset the GP enable bits of PERF_GLOBAL_CTRL are set, so software that only knows
	 * PERFEVTSEL.EN still counts (SDM 18.2.2). AMD's PerfCntrGlobalCtl starts clear, as Linux
	 * leaves it while perf is idle: PERF_CTL.EN alone then counts nothing. */
	cpu->global_ctrl = pmu->version >= 2 ? width_mask(cpu->gp_count) : 0;
	/* SDM vol. 3B 14.2: APERF counts at the actual clock, MPERF at the TSC's fixed rate, both
	 * only in C0 (here: while busy). */
	cpu->aperf = (struct sim_counter){ .mask = UINT64_MAX, .rate = sim->model->core_hz,
					   .core_clock = true };
	cpu->mperf = (struct sim_counter){ .mask = UINT64_MAX, .rate = sim->model->tsc_hz };
}

/* ---- counting ---- */

static uint64_t share_of(const struct sim_pmu *pmu, uint64_t rate, bool user, bool os)
{
	if (user && os)
		return rate;
	if (!user && !os)
		return 0;
	return (uint64_t)((sim_u128)rate * (user ? pmu->user_permille : 1000 - pmu->user_permille) /
			  1000);
}

static const struct sim_event_rate *event_of(const struct sim_pmu *pmu, uint64_t evtsel)
{
	uint16_t event = (uint16_t)(evtsel & PERFEVTSEL_EVENT_MASK);
	uint8_t umask = (uint8_t)(evtsel >> PERFEVTSEL_UMASK_SHIFT);

	if (pmu->amd)
		event |= (uint16_t)(((evtsel >> AMD_PERF_CTL_EVENT_HI_SHIFT) & 0xF) << 8);

	for (uint32_t i = 0; i < pmu->event_count; i++) {
		if (pmu->events[i].event == event && pmu->events[i].umask == umask)
			return &pmu->events[i];
	}
	return NULL;
}

static uint64_t event_rate(const struct sim_pmu *pmu, uint64_t evtsel)
{
	const struct sim_event_rate *known = event_of(pmu, evtsel);

	return known ? known->rate : 0;
}

static bool gp_counts_smis(const struct sim_pmu *pmu, const struct sim_cpu *cpu, uint32_t index)
{
	const struct sim_event_rate *known = event_of(pmu, cpu->evtsel[index]);

	return known && known->smis;
}

static bool gp_core_clock(const struct sim_pmu *pmu, const struct sim_cpu *cpu, uint32_t index)
{
	const struct sim_event_rate *known = event_of(pmu, cpu->evtsel[index]);

	return !known || !known->reference;
}

static uint64_t gp_rate(const struct sim_pmu *pmu, const struct sim_cpu *cpu, uint32_t index)
{
	uint64_t evtsel = cpu->evtsel[index];

	if (!(evtsel & PERFEVTSEL_EN) || (evtsel & PERFEVTSEL_IN_TX))
		return 0;
	if ((pmu->version >= 2 || pmu->perfmon_v2) && !(cpu->global_ctrl & (1ull << index)))
		return 0;
	/* An SMI is taken in neither user nor OS mode: counted with either filter. */
	if (gp_counts_smis(pmu, cpu, index))
		return (evtsel & (PERFEVTSEL_USR | PERFEVTSEL_OS)) ? 1 : 0;
	return share_of(pmu, event_rate(pmu, evtsel), evtsel & PERFEVTSEL_USR,
			evtsel & PERFEVTSEL_OS);
}

static uint64_t fixed_rate(const struct sim_pmu *pmu, const struct sim_cpu *cpu, uint32_t index)
{
	/* Fixed counter 0 counts instructions, 1 core cycles, 2 reference cycles, 3 (Golden Cove)
	 * TOPDOWN.SLOTS: the pipeline's width each core cycle. */
	const uint64_t rates[SIM_MAX_FIXED_COUNTERS] = { pmu->instructions_rate, pmu->cycles_rate,
							 pmu->ref_cycles_rate,
							 pmu->cycles_rate * cpu->slots_per_cycle };
	uint64_t nibble = cpu->fixed_ctrl >> (index * FIXED_CTR_CTRL_BITS_PER_COUNTER);
	uint64_t rate = rates[index];

	if (!(cpu->global_ctrl & (1ull << (GLOBAL_CTRL_FIXED_SHIFT + index))))
		return 0;
	return share_of(pmu, rate, nibble & FIXED_CTR_CTRL_USR, nibble & FIXED_CTR_CTRL_OS);
}

/* Bring every counter up to `busy` (noting wraps in GLOBAL_STATUS) and give each the rate the
 * current control registers select. Called after any control register changes. */
static void counters_reprogram(struct sim *sim, struct sim_cpu *cpu, struct sim_progress busy)
{
	const struct sim_pmu *pmu = &sim->pmu;

	for (uint32_t i = 0; i < cpu->gp_count; i++) {
		if (counter_rebase(&cpu->gp[i], busy))
			cpu->global_status |= 1ull << i;
		cpu->gp[i].rate = gp_rate(pmu, cpu, i);
		cpu->gp[i].core_clock = gp_core_clock(pmu, cpu, i);
		cpu->gp[i].smis = gp_counts_smis(pmu, cpu, i);
	}
	for (uint32_t i = 0; i < cpu->fixed_count; i++) {
		if (counter_rebase(&cpu->fixed[i], busy))
			cpu->global_status |= 1ull << (GLOBAL_CTRL_FIXED_SHIFT + i);
		cpu->fixed[i].rate = fixed_rate(pmu, cpu, i);
		/* 0 instructions and 1 core cycles follow the clock, 2 (REF_TSC) the TSC */
		cpu->fixed[i].core_clock = i != 2;
	}
}

/* ---- register access ---- */

static int read_global(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t *value)
{
	if (sim->pmu.version < 2)
		return -ENOENT;
	switch (address) {
	case MSR_IA32_FIXED_CTR_CTRL:
		*value = cpu->fixed_ctrl;
		return 0;
	case MSR_IA32_PERF_GLOBAL_CTRL:
		*value = cpu->global_ctrl;
		return 0;
	case MSR_IA32_PERF_GLOBAL_STATUS:
		counters_reprogram(sim, cpu, sim_cpu_progress_at(sim, cpu, sim->now));
		*value = cpu->global_status;
		return 0;
	case MSR_IA32_PERF_GLOBAL_OVF_CTRL:
		*value = 0;
		return 0;
	default:
		return -ENOENT;
	}
}

static int intel_read(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t *value)
{
	const struct sim_pmu *pmu = &sim->pmu;
	uint32_t index;

	if (msr_index_in(address, MSR_IA32_PERFEVTSEL0, cpu->gp_count, &index)) {
		*value = cpu->evtsel[index];
		return 0;
	}
	if (msr_index_in(address, MSR_IA32_PMC0, cpu->gp_count, &index) ||
	    (pmu->full_width_writes && msr_index_in(address, MSR_IA32_A_PMC0, cpu->gp_count, &index))) {
		*value = sim_counter_value(&cpu->gp[index], sim_cpu_progress_at(sim, cpu, sim->now));
		return 0;
	}
	if (msr_index_in(address, MSR_IA32_FIXED_CTR0, cpu->fixed_count, &index)) {
		*value = sim_counter_value(&cpu->fixed[index], sim_cpu_progress_at(sim, cpu, sim->now));
		return 0;
	}
	if (address == MSR_IA32_PERF_CAPABILITIES && pmu->perf_capabilities) {
		*value = pmu->perf_capabilities;
		return 0;
	}
	return read_global(sim, cpu, address, value);
}

/* Which AMD counter an address names: PERF_CTL/PERF_CTR pairs, or the legacy aliases of 0..3. */
static bool amd_counter(const struct sim_pmu *pmu, uint32_t address, bool *control,
			uint32_t *index)
{
	if (msr_amd_counter_index(address, pmu->gp_count, index, control))
		return true;
	return msr_amd_legacy_index(address, index, control) && *index < pmu->gp_count;
}

static int write_control(struct sim *sim, struct sim_cpu *cpu, uint64_t *control,
			 uint64_t valid, uint64_t value);

/* A write to the global status' clear register (Intel IA32_PERF_GLOBAL_OVF_CTRL, AMD
 * PerfCntrGlobalStatusClr): each 1 clears that status bit, after the counters are brought up to
 * now (a wrap until now still sets its bit first); a reserved bit is a #GP. */
static int clear_global_status(struct sim *sim, struct sim_cpu *cpu, uint64_t valid,
			       uint64_t value)
{
	if (value & ~valid)
		return -EIO;
	counters_reprogram(sim, cpu, sim_cpu_progress_at(sim, cpu, sim->now));
	cpu->global_status &= ~value;
	return 0;
}

/* PerfMonV2's global registers (AMD PPR 19h model 11h, MSRC000_0300..0302). */
static int amd_global_read(struct sim *sim, struct sim_cpu *cpu, uint32_t address,
			   uint64_t *value)
{
	switch (address) {
	case MSR_AMD_PERF_CNTR_GLOBAL_STATUS:
		counters_reprogram(sim, cpu, sim_cpu_progress_at(sim, cpu, sim->now));
		*value = cpu->global_status;
		return 0;
	case MSR_AMD_PERF_CNTR_GLOBAL_CTL:
		*value = cpu->global_ctrl;
		return 0;
	case MSR_AMD_PERF_CNTR_GLOBAL_STATUS_CLR:
		*value = 0;
		return 0;
	default:
		return -ENOENT;
	}
}

static int amd_global_write(struct sim *sim, struct sim_cpu *cpu, uint32_t address,
			    uint64_t value)
{
	switch (address) {
	case MSR_AMD_PERF_CNTR_GLOBAL_STATUS:
		return -EIO; /* read-only */
	case MSR_AMD_PERF_CNTR_GLOBAL_CTL:
		return write_control(sim, cpu, &cpu->global_ctrl, sim->pmu.global_ctrl_valid, value);
	case MSR_AMD_PERF_CNTR_GLOBAL_STATUS_CLR:
		return clear_global_status(sim, cpu, sim->pmu.global_ctrl_valid, value);
	default:
		return -ENOENT;
	}
}

static int amd_read(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t *value)
{
	uint32_t index;
	bool control;

	if (sim->pmu.perfmon_v2 && amd_global_read(sim, cpu, address, value) == 0)
		return 0;
	if (!amd_counter(&sim->pmu, address, &control, &index))
		return -ENOENT;
	*value = control ? cpu->evtsel[index] :
			   sim_counter_value(&cpu->gp[index], sim_cpu_progress_at(sim, cpu, sim->now));
	return 0;
}

static struct sim_counter *aperf_mperf(const struct sim *sim, struct sim_cpu *cpu,
				       uint32_t address)
{
	if (!sim->model->aperf_mperf)
		return NULL;
	if (address == MSR_IA32_MPERF)
		return &cpu->mperf;
	return address == MSR_IA32_APERF ? &cpu->aperf : NULL;
}

int sim_pmu_read(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t *value)
{
	struct sim_counter *free_running = aperf_mperf(sim, cpu, address);

	if (free_running) {
		*value = sim_counter_value(free_running, sim_cpu_progress_at(sim, cpu, sim->now));
		return 0;
	}
	return sim->pmu.amd ? amd_read(sim, cpu, address, value) :
			      intel_read(sim, cpu, address, value);
}

/* A control register write: refuse reserved bits as #GP does, then re-derive the rates. */
static int write_control(struct sim *sim, struct sim_cpu *cpu, uint64_t *control,
			 uint64_t valid, uint64_t value)
{
	struct sim_progress busy;

	if (value & ~valid)
		return -EIO;
	busy = sim_cpu_progress_at(sim, cpu, sim->now);
	counters_reprogram(sim, cpu, busy);
	*control = value;
	counters_reprogram(sim, cpu, busy);
	return 0;
}

/* Set a counter. A wrap since it was last brought up to date is noted first (in
 * GLOBAL_STATUS at `status_bit`, 0 for counters without one), as the hardware noted it when it
 * happened. */
static int write_counter(struct sim *sim, struct sim_cpu *cpu, struct sim_counter *counter,
			 uint64_t status_bit, uint64_t value)
{
	struct sim_progress busy = sim_cpu_progress_at(sim, cpu, sim->now);

	if (counter_rebase(counter, busy) && sim->pmu.version >= 2)
		cpu->global_status |= status_bit;
	sim_counter_set(counter, busy, value);
	return 0;
}

/* The bits of IA32_PERF_GLOBAL_CTRL this CPU's counters have (a hybrid part's P-core more than
 * the common leaf 0AH says). */
static uint64_t global_ctrl_valid(const struct sim_cpu *cpu)
{
	return width_mask(cpu->gp_count) | (width_mask(cpu->fixed_count) << GLOBAL_CTRL_FIXED_SHIFT);
}

/* IA32_FIXED_CTR_CTRL: the part's field of a fixed counter, for each the CPU has. */
static uint64_t fixed_ctrl_valid(const struct sim_pmu *pmu, const struct sim_cpu *cpu)
{
	uint64_t field = pmu->fixed_ctrl_valid & ((1ull << FIXED_CTR_CTRL_BITS_PER_COUNTER) - 1);
	uint64_t valid = 0;

	for (uint32_t i = 0; i < cpu->fixed_count; i++)
		valid |= field << (i * FIXED_CTR_CTRL_BITS_PER_COUNTER);
	return valid;
}

static int write_global(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t value)
{
	const struct sim_pmu *pmu = &sim->pmu;

	if (pmu->version < 2)
		return -ENOENT;
	switch (address) {
	case MSR_IA32_FIXED_CTR_CTRL:
		return write_control(sim, cpu, &cpu->fixed_ctrl, fixed_ctrl_valid(pmu, cpu), value);
	case MSR_IA32_PERF_GLOBAL_CTRL:
		return write_control(sim, cpu, &cpu->global_ctrl, global_ctrl_valid(cpu), value);
	case MSR_IA32_PERF_GLOBAL_STATUS:
		return -EIO; /* read-only */
	case MSR_IA32_PERF_GLOBAL_OVF_CTRL:
		return clear_global_status(sim, cpu, global_ctrl_valid(cpu) | OVF_CTRL_EXTRA_BITS,
					   value);
	default:
		return -ENOENT;
	}
}

/* The writable bits of IA32_PERFEVTSEL`index`. */
static uint64_t evtsel_valid(const struct sim_pmu *pmu, uint32_t index)
{
	uint64_t valid = pmu->evtsel_valid;

	if (pmu->tsx)
		valid |= PERFEVTSEL_IN_TX | (index == IN_TXCP_COUNTER ? PERFEVTSEL_IN_TXCP : 0);
	return valid;
}

static int intel_write(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t value)
{
	const struct sim_pmu *pmu = &sim->pmu;
	uint32_t index;

	if (msr_index_in(address, MSR_IA32_PERFEVTSEL0, cpu->gp_count, &index))
		return write_control(sim, cpu, &cpu->evtsel[index], evtsel_valid(pmu, index), value);
	if (msr_index_in(address, MSR_IA32_PMC0, cpu->gp_count, &index)) {
		/* Legacy alias: bits 31:0 written, sign-extended to the counter width. */
		return write_counter(sim, cpu, &cpu->gp[index], 1ull << index,
				     (uint64_t)(int64_t)(int32_t)value);
	}
	if (pmu->full_width_writes && msr_index_in(address, MSR_IA32_A_PMC0, cpu->gp_count, &index)) {
		if (value & ~pmu->gp_mask)
			return -EIO;
		return write_counter(sim, cpu, &cpu->gp[index], 1ull << index, value);
	}
	if (msr_index_in(address, MSR_IA32_FIXED_CTR0, cpu->fixed_count, &index)) {
		if (value & ~pmu->fixed_mask)
			return -EIO;
		return write_counter(sim, cpu, &cpu->fixed[index],
				     1ull << (GLOBAL_CTRL_FIXED_SHIFT + index), value);
	}
	if (address == MSR_IA32_PERF_CAPABILITIES && pmu->perf_capabilities)
		return -EIO; /* read-only */
	return write_global(sim, cpu, address, value);
}

static int amd_write(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t value)
{
	uint32_t index;
	bool control;
	int status = sim->pmu.perfmon_v2 ? amd_global_write(sim, cpu, address, value) : -ENOENT;

	if (status != -ENOENT)
		return status;
	if (!amd_counter(&sim->pmu, address, &control, &index))
		return -ENOENT;
	if (control)
		return write_control(sim, cpu, &cpu->evtsel[index], sim->pmu.evtsel_valid, value);
	if (value & ~sim->pmu.gp_mask)
		return -EIO; /* bits 63:48 are reserved */
	return write_counter(sim, cpu, &cpu->gp[index], 0, value);
}

int sim_pmu_write(struct sim *sim, struct sim_cpu *cpu, uint32_t address, uint64_t value)
{
	struct sim_counter *free_running = aperf_mperf(sim, cpu, address);

	if (free_running)
		return write_counter(sim, cpu, free_running, 0, value);
	return sim->pmu.amd ? amd_write(sim, cpu, address, value) :
			      intel_write(sim, cpu, address, value);
}
