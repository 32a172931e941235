/*
 * server/msrstate.c — the value every MSR had before msrd first wrote it, so SIGTERM can put the
 * machine back the way msrd found it.
 *
 * Recorded before a validated write is submitted (the value comes from the write-mask check's
 * read), once per (cpu, register): later writes do not change what is restored. Registers with
 * two addresses are one register here, so the first write through either alias is the one
 * whose original counts: Intel's IA32_PMCx and IA32_A_PMCx, AMD's legacy PERF_CTL0..3 /
 * PERF_CTR0..3 and PERF_CTLx / PERF_CTRx.
 *
 * A PMC is written back through IA32_A_PMCx where the CPU has full-width writes
 * (PERF_CAPABILITIES bit 13): through IA32_PMCx a write keeps only bits 31:0, sign-extended to
 * the counter's width. Without them that is all that can be done, and the log says which bits
 * were lost.
 */
#include "server/server.h"

#include "hw/vendor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define INTEL_PMCS 8u         /* IA32_PMC0..7 and their full-width aliases */
#define AMD_CORE_COUNTERS 6u  /* PERF_CTL0..5 / PERF_CTR0..5 */

void msrstate_init(struct msrstate *state, const struct machine_info *machine)
{
	bool amd = cpu_vendor_is_amd(machine->vendor);

	*state = (struct msrstate){
		.intel_pmcs = !amd && CPUID_0A_EAX_VERSION(machine->cpuid_0a[0]) >= 1,
		.amd_legacy = amd && machine->family >= 0x17,
		.full_width_writes = machine->pmc_full_width_writes,
		.pmc_width = (uint8_t)CPUID_0A_EAX_GP_WIDTH(machine->cpuid_0a[0]),
	};
}

/* The one address a register with aliases is recorded under. */
static uint32_t canonical(const struct msrstate *state, uint32_t address)
{
	uint32_t index;
	bool control;

	if (state->intel_pmcs && msr_index_in(address, MSR_IA32_A_PMC0, INTEL_PMCS, &index))
		return msr_ia32_pmc(index);
	if (state->amd_legacy && msr_amd_legacy_index(address, &index, &control))
		return control ? msr_amd_perf_ctl(index) : msr_amd_perf_ctr(index);
	return address;
}

static bool is_intel_pmc(const struct msrstate *state, uint32_t address)
{
	uint32_t index;

	return state->intel_pmcs && msr_index_in(address, MSR_IA32_PMC0, INTEL_PMCS, &index);
}

static int compare_saved(const struct msr_saved *saved, uint32_t cpu, uint32_t address)
{
	if (saved->cpu != cpu)
		return saved->cpu < cpu ? -1 : 1;
	if (saved->address != address)
		return saved->address < address ? -1 : 1;
	return 0;
}

static size_t lower_bound(const struct msrstate *state, uint32_t cpu, uint32_t address)
{
	size_t low = 0;
	size_t high = state->count;

	while (low < high) {
		size_t middle = low + (high - low) / 2;
		if (compare_saved(&state->entries[middle], cpu, address) < 0)
			low = middle + 1;
		else
			high = middle;
	}
	return low;
}

bool msrstate_has(const struct msrstate *state, uint32_t cpu, uint32_t address)
{
	size_t index;

	address = canonical(state, address);
	index = lower_bound(state, cpu, address);
	return index < state->count && compare_saved(&state->entries[index], cpu, address) == 0;
}

int msrstate_remember(struct msrstate *state, uint32_t cpu, uint32_t address, uint64_t original)
{
	size_t index;

	address = canonical(state, address);
	index = lower_bound(state, cpu, address);

	if (index < state->count && compare_saved(&state->entries[index], cpu, address) == 0)
		return 0;
	if (state->count == state->capacity) {
		size_t capacity = state->capacity > 0 ? state->capacity * 2 : 32;
		struct msr_saved *bigger = realloc(state->entries, sizeof(*bigger) * capacity);
		if (bigger == NULL)
			return -ENOMEM;
		state->entries = bigger;
		state->capacity = capacity;
	}
	memmove(&state->entries[index + 1], &state->entries[index],
		sizeof(*state->entries) * (state->count - index));
	state->entries[index] = (struct msr_saved){ .cpu = cpu, .address = address,
						    .original = original };
	state->count++;
	return 0;
}

void msrstate_touch(struct msrstate *state, uint32_t cpu, uint32_t address, uint64_t before,
		    uint64_t after)
{
	size_t index;

	address = canonical(state, address);
	index = lower_bound(state, cpu, address);
	if (index >= state->count || compare_saved(&state->entries[index], cpu, address) != 0)
		return;
	state->entries[index].touched |= before ^ after;
	state->entries[index].bitwise = true;
}

void msrstate_forget(struct msrstate *state, uint32_t cpu, uint32_t address)
{
	size_t index;

	address = canonical(state, address);
	index = lower_bound(state, cpu, address);
	if (index >= state->count || compare_saved(&state->entries[index], cpu, address) != 0)
		return;
	memmove(&state->entries[index], &state->entries[index + 1],
		sizeof(*state->entries) * (state->count - index - 1));
	state->count--;
}

/* Write one remembered value back: 0 or -errno. A PMC goes through its full-width alias where
 * there is one; without, what the legacy write cannot hold is logged. */
static int restore_one(const struct msrstate *state, struct msr_backend *backend,
		       const struct msr_saved *saved)
{
	uint32_t address = saved->address;
	uint64_t mask = state->pmc_width > 0 && state->pmc_width < 64 ? (1ull << state->pmc_width) - 1
								      : UINT64_MAX;
	uint64_t legacy = (uint64_t)(int64_t)(int32_t)(uint32_t)saved->original & mask;
	int status;

	if (is_intel_pmc(state, address) && state->full_width_writes)
		address = msr_ia32_a_pmc(saved->address - MSR_IA32_PMC0);
	status = backend_write(backend, saved->cpu, address, saved->original);
	if (status < 0) {
		log_warn_errno(status, "restoring cpu %u MSR 0x%x to 0x%llx", saved->cpu, address,
			       (unsigned long long)saved->original);
		return status;
	}
	if (address != saved->address)
		log_info("restored cpu %u MSR 0x%x to 0x%llx through its full-width alias 0x%x",
			 saved->cpu, saved->address, (unsigned long long)saved->original, address);
	else if (is_intel_pmc(state, address) && legacy != saved->original)
		log_warnx("restored cpu %u MSR 0x%x to 0x%llx, not 0x%llx: this CPU has no "
			  "full-width counter writes, so bits 63:32 come from bit 31",
			  saved->cpu, address, (unsigned long long)legacy,
			  (unsigned long long)saved->original);
	else
		log_info("restored cpu %u MSR 0x%x to 0x%llx", saved->cpu, address,
			 (unsigned long long)saved->original);
	return 0;
}

/*
 * The order registers are written back in, so that no counter counts msrd's events after it
 * was restored (as slots.c does for one slot): counters first while what msrd programmed is
 * stopped, then the event selects, then the fixed counters' control, the global enable last.
 */
enum restore_phase {
	PHASE_COUNTERS,
	PHASE_OTHERS,
	PHASE_EVENT_SELECTS,
	PHASE_FIXED_CONTROL,
	PHASE_GLOBAL_ENABLE,
	PHASE_COUNT,
};

static enum restore_phase phase_of(const struct msrstate *state, uint32_t address)
{
	uint32_t index;
	bool control;

	if (is_intel_pmc(state, address) ||
	    (address >= MSR_IA32_FIXED_CTR0 && address <= MSR_IA32_FIXED_CTR2))
		return PHASE_COUNTERS;
	if (state->amd_legacy && msr_amd_counter_index(address, AMD_CORE_COUNTERS, &index, &control))
		return control ? PHASE_EVENT_SELECTS : PHASE_COUNTERS;
	if (state->intel_pmcs && msr_index_in(address, MSR_IA32_PERFEVTSEL0, INTEL_PMCS, &index))
		return PHASE_EVENT_SELECTS;
	if (state->intel_pmcs && address == MSR_IA32_FIXED_CTR_CTRL)
		return PHASE_FIXED_CONTROL;
	if (state->intel_pmcs && address == MSR_IA32_PERF_GLOBAL_CTRL)
		return PHASE_GLOBAL_ENABLE;
	/* AMD PerfMonV2's PerfCntrGlobalCtl gates the core counters the same way. */
	if (state->amd_legacy && address == MSR_AMD_PERF_CNTR_GLOBAL_CTL)
		return PHASE_GLOBAL_ENABLE;
	return PHASE_OTHERS;
}

static bool is_shared(enum restore_phase phase)
{
	return phase == PHASE_GLOBAL_ENABLE || phase == PHASE_FIXED_CONTROL;
}

/* What goes back into a shared register: the original in the bits msrd changed, the current
 * value (an NMI watchdog or perf session enabled since) in the others. A register remembered
 * without the bits (a crash journal's) goes back whole, as before. */
static uint64_t shared_value(const struct msr_saved *saved, struct msr_backend *backend,
			     uint64_t keep_for_ours)
{
	uint64_t current;

	if (!saved->bitwise || backend_read(backend, saved->cpu, saved->address, &current) < 0)
		return keep_for_ours == UINT64_MAX ? saved->original : 0;
	if (keep_for_ours == UINT64_MAX)
		return (current & ~saved->touched) | (saved->original & saved->touched);
	return current & ~saved->touched;
}

/* Stop every counter msrd enabled on this CPU before any is written back: msrd's bits of the
 * global enable (Intel; AMD PerfMonV2), and on AMD each event select msrd changed. */
static void stop_counting(const struct msrstate *state, struct msr_backend *backend)
{
	for (size_t i = 0; i < state->count; i++) {
		const struct msr_saved *saved = &state->entries[i];
		enum restore_phase phase = phase_of(state, saved->address);
		if (phase == PHASE_GLOBAL_ENABLE)
			(void)backend_write(backend, saved->cpu, saved->address,
					    shared_value(saved, backend, 0));
		else if (!state->intel_pmcs && phase == PHASE_EVENT_SELECTS)
			(void)backend_write(backend, saved->cpu, saved->address, 0);
	}
}

size_t msrstate_restore(struct msrstate *state, struct msr_backend *backend,
			struct msrstate *unrestored)
{
	bool lost = false;
	size_t failed = 0;

	/* Every phase runs even when a failure cannot be remembered: counting was stopped above,
	 * and the global enable comes back only in the last phase. */
	stop_counting(state, backend);
	for (enum restore_phase phase = 0; phase < PHASE_COUNT; phase++) {
		for (size_t i = 0; i < state->count; i++) {
			struct msr_saved saved = state->entries[i];
			if (phase_of(state, saved.address) != phase)
				continue;
			if (is_shared(phase))
				saved.original = shared_value(&saved, backend, UINT64_MAX);
			if (restore_one(state, backend, &saved) == 0)
				continue;
			failed++;
			if (unrestored != NULL && msrstate_remember(unrestored, saved.cpu,
								    saved.address,
								    state->entries[i].original) < 0)
				lost = true;
		}
	}
	return lost ? SIZE_MAX : failed;
}

void msrstate_free(struct msrstate *state)
{
	free(state->entries);
	state->entries = NULL;
	state->count = 0;
	state->capacity = 0;
}
