/*
 * backend/sim/sim_kernel.c — "the kernel holds counters" on the simulated CPU (msrd
 * --sim-kernel-counters SPEC): what a real machine's PMU looks like when Linux uses it behind
 * msrd's back, so msrd's refusal to take such counters, and its check at read time that its
 * own programming is still in place, can be tested.
 *
 * SPEC is a comma-separated list of
 *   nmi          the NMI watchdog, as arch/x86/events programs it for the hard-lockup detector:
 *                cycles with a PMI, on fixed counter 1 where the CPU has one (FIXED_CTR_CTRL
 *                field 1 = OS|USR|PMI, its IA32_PERF_GLOBAL_CTRL bit set), else on programmable
 *                counter 0 (Intel 3C/00, AMD 76h, OS|USR|INT|EN); kernel.nmi_watchdog reads 1
 *   pmcN         a perf session on programmable counter N from the start (instructions)
 *   pmcN@MS      ... that takes counter N at MS ms of simulated time, overwriting whatever
 *                is programmed there (a perf session reprogramming a counter msrd lent out)
 *   zeroN@MS     at MS ms writes 0 to programmable counter N and nothing else, as Linux's
 *                perf_clear_dirty_counters (5.13 and later) does to a counter a perf event
 *                used when an RDPMC-allowed task is scheduled in
 *   enableall@MS at MS ms writes every counter's bit to IA32_PERF_GLOBAL_CTRL, as Intel's
 *                __intel_pmu_enable_all does on every perf enable (the whole register)
 * on every CPU.
 */
#include "backend/sim/sim_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

#define NS_PER_MS 1000000ull
#define INTEL_CYCLES 0x3Cull
#define INTEL_INSTRUCTIONS 0xC0ull
#define AMD_CYCLES 0x76ull
#define AMD_INSTRUCTIONS 0xC0ull
#define NMI_FIXED_FIELD (FIXED_CTR_CTRL_OS | FIXED_CTR_CTRL_USR | FIXED_CTR_CTRL_PMI)

static uint32_t select_address(const struct sim *sim, uint32_t index)
{
	return sim->pmu.amd ? msr_amd_perf_ctl(index) : msr_ia32_perfevtsel(index);
}

/* Write as the kernel does: straight to the CPU's registers. */
static void kernel_write(struct sim *sim, uint32_t address, uint64_t bits, uint64_t value)
{
	for (uint32_t cpu = 0; cpu < sim->cpu_count; cpu++) {
		uint64_t current = 0;

		sim_pmu_read(sim, &sim->cpus[cpu], address, &current);
		if (sim_pmu_write(sim, &sim->cpus[cpu], address, (current & ~bits) | value) < 0)
			log_warnx("sim: the simulated kernel could not write MSR %#x", address);
	}
}

static void take_programmable(struct sim *sim, uint32_t index, uint64_t event)
{
	if (!sim->pmu.amd && sim->pmu.version >= 2)
		kernel_write(sim, MSR_IA32_PERF_GLOBAL_CTRL, 1ull << index, 1ull << index);
	if (sim->pmu.perfmon_v2)
		kernel_write(sim, MSR_AMD_PERF_CNTR_GLOBAL_CTL, 1ull << index, 1ull << index);
	kernel_write(sim, select_address(sim, index), UINT64_MAX,
		     event | PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN);
}

static void take_nmi_watchdog(struct sim *sim)
{
	if (!sim->pmu.amd && sim->pmu.fixed_count > 1) {
		uint64_t shift = FIXED_CTR_CTRL_BITS_PER_COUNTER;

		kernel_write(sim, MSR_IA32_FIXED_CTR_CTRL, 0xFull << shift, NMI_FIXED_FIELD << shift);
		kernel_write(sim, MSR_IA32_PERF_GLOBAL_CTRL, 1ull << (GLOBAL_CTRL_FIXED_SHIFT + 1),
			     1ull << (GLOBAL_CTRL_FIXED_SHIFT + 1));
		return;
	}
	take_programmable(sim, 0, (sim->pmu.amd ? AMD_CYCLES : INTEL_CYCLES) | PERFEVTSEL_INT);
}

static int parse_item(struct sim *sim, const char *item)
{
	struct sim_kernel_takeover *takeover;
	unsigned index, ms;
	int used = 0;

	if (strcmp(item, "nmi") == 0) {
		sim->kernel_nmi_watchdog = true;
		return 0;
	}
	bool zero = sscanf(item, "zero%u%n", &index, &used) == 1;
	bool enable_all = strncmp(item, "enableall", 9) == 0;

	if (enable_all) {
		index = 0;
		used = 9;
	} else if (!zero && sscanf(item, "pmc%u%n", &index, &used) != 1) {
		return -EINVAL;
	}
	if (index >= sim->pmu.gp_count)
		return -EINVAL;
	if (sim->takeover_count == SIM_MAX_TAKEOVERS)
		return -EINVAL;
	takeover = &sim->takeovers[sim->takeover_count++];
	*takeover = (struct sim_kernel_takeover){ .index = index, .zero = zero,
						  .enable_all = enable_all };
	if (item[used] == '\0')
		return 0;
	if (sscanf(item + used, "@%u%n", &ms, &used) != 1 || item[strlen(item) - 1] == '@')
		return -EINVAL;
	takeover->at_ns = sim->start_ns + (uint64_t)ms * NS_PER_MS;
	takeover->later = true;
	return 0;
}

int sim_kernel_configure(struct sim *sim, const char *spec, char *why, size_t why_size)
{
	char *copy, *save = NULL;
	int ret = 0;

	if (spec == NULL || *spec == '\0')
		return 0;
	copy = strdup(spec);
	if (copy == NULL)
		return -ENOMEM;
	for (char *item = strtok_r(copy, ",", &save); item != NULL && ret == 0;
	     item = strtok_r(NULL, ",", &save))
		ret = parse_item(sim, item);
	free(copy);
	if (ret < 0) {
		snprintf(why, why_size, "sim: --sim-kernel-counters %s: expected nmi, pmcN, "
			 "pmcN@MS, zeroN@MS or enableall@MS, N below %u", spec, sim->pmu.gp_count);
		return ret;
	}
	if (sim->kernel_nmi_watchdog)
		take_nmi_watchdog(sim);
	sim_kernel_run_until(sim, sim->now);
	return 0;
}

void sim_kernel_run_until(struct sim *sim, uint64_t now)
{
	for (uint32_t i = 0; i < sim->takeover_count; i++) {
		struct sim_kernel_takeover *takeover = &sim->takeovers[i];

		if (takeover->done || (takeover->later && now < takeover->at_ns))
			continue;
		takeover->done = true;
		if (takeover->enable_all) {
			kernel_write(sim, MSR_IA32_PERF_GLOBAL_CTRL, UINT64_MAX,
				     ((1ull << sim->pmu.gp_count) - 1) |
					     (((1ull << sim->pmu.fixed_count) - 1)
					      << GLOBAL_CTRL_FIXED_SHIFT));
			continue;
		}
		if (takeover->zero) {
			kernel_write(sim, sim->pmu.amd ? msr_amd_perf_ctr(takeover->index)
						       : msr_ia32_pmc(takeover->index),
				     UINT64_MAX, 0);
			continue;
		}
		take_programmable(sim, takeover->index,
				  sim->pmu.amd ? AMD_INSTRUCTIONS : INTEL_INSTRUCTIONS);
	}
}
