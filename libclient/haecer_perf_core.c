/*
 * libclient/haecer_perf_core.c — core-PMU events through msrd's perf broker, for an msrd whose
 * counters come from perf (--backend perf, or auto where lockdown leaves the MSR device
 * read-only): its HELLO offers HAECER_FEATURE_PERF and no HAECER_FEATURE_SLOTS. Then the
 * counter API (haecer_counter_open_arch/_fixed/_raw/_named, the seed's setup*Counter,
 * haecer-stat) opens the same events through the broker instead of a counter slot.
 *
 * The event database's encoding is the PERFEVTSEL / PERF_CTL layout libpfm4 produces. It is
 * taken apart into perf's terms (event, umask, edge, inv, cmask, any) and put together again at
 * the bits the core PMU's sysfs format files name (/sys/bus/event_source/devices/cpu/format/,
 * cpu_core or cpu_atom on a hybrid part), exactly as perf resolves "cpu/event=0x3c,umask=0x0/"
 * (haecer_perf_event_by_name does the resolving); the privilege levels become exclude_user /
 * exclude_kernel, as perf's :u and :k modifiers do. perf's generic names (cycles, instructions,
 * ...) are PERF_TYPE_HARDWARE, the kernel's own choice of encoding. Without a core PMU in sysfs
 * (a VM without a virtual PMU) the encoding goes as PERF_TYPE_RAW in the kernel's x86 raw
 * layout, and the kernel's refusal (ENOENT) is what the caller sees, with msrd's reason.
 *
 * The event counts every task on the counter's CPU (CPU-wide), as a counter slot does: the
 * policy must grant the core class with scope cpu.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>

#ifndef PERF_PMU_TYPE_SHIFT
#define PERF_PMU_TYPE_SHIFT 32 /* linux/perf_event.h from 5.17: a hybrid PMU's generic event */
#endif

/* What x86's core PMUs take as a raw config: the kernel's X86_RAW_EVENT_MASK, AnyThread, and
 * AMD's EventSelect[11:8] (AMD64_RAW_EVENT_MASK); the enable, interrupt and level bits are
 * the kernel's own. */
#define RAW_CONFIG_MASK                                                                        \
	(PERFEVTSEL_EVENT_MASK | (0xFFull << PERFEVTSEL_UMASK_SHIFT) | PERFEVTSEL_EDGE |        \
	 PERFEVTSEL_ANY | PERFEVTSEL_INV | (0xFFull << PERFEVTSEL_CMASK_SHIFT) |                \
	 (0xFull << AMD_PERF_CTL_EVENT_HI_SHIFT))

bool haecer__counters_brokered(const struct haecer_context *ctx)
{
	uint64_t features = haecer_server_info(ctx->conn)->features;

	return (features & HAECER_FEATURE_PERF) && !(features & HAECER_FEATURE_SLOTS);
}

/* The core PMU counting on a CPU of this core type: "cpu", or on a hybrid part "cpu_atom" for
 * an E-core and "cpu_core" for a P-core; NULL when sysfs has none. *type its type number. */
static const char *core_pmu(uint32_t core_type, uint32_t *type)
{
	const char *hybrid = core_type == HAECER_CORE_TYPE_ATOM ? "cpu_atom" : "cpu_core";

	if (haecer__perf_pmu_type("cpu", type) == 0)
		return "cpu";
	return haecer__perf_pmu_type(hybrid, type) == 0 ? hybrid : NULL;
}

/* perf's exclude bits for the encoding's privilege levels (USR, OS). */
static uint32_t level_flags(uint64_t evtsel)
{
	uint32_t flags = HAECER_PERF_CPU_WIDE;

	if (!(evtsel & PERFEVTSEL_OS))
		flags |= HAECER_PERF_EXCLUDE_KERNEL;
	if (!(evtsel & PERFEVTSEL_USR))
		flags |= HAECER_PERF_EXCLUDE_USER;
	return flags;
}

/* "PMU/event=0x..,umask=0x..[,edge][,inv][,any][,cmask=0x..]/": perf's spelling of the
 * encoding, only the terms it sets. */
static void terms_of(const char *pmu, uint64_t evtsel, char *name, size_t size)
{
	uint64_t event = (evtsel & PERFEVTSEL_EVENT_MASK) |
			 (((evtsel >> AMD_PERF_CTL_EVENT_HI_SHIFT) & 0xF) << 8);
	uint64_t cmask = (evtsel >> PERFEVTSEL_CMASK_SHIFT) & 0xFF;
	int used = snprintf(name, size, "%s/event=%#llx,umask=%#llx%s%s%s", pmu,
			    (unsigned long long)event,
			    (unsigned long long)((evtsel >> PERFEVTSEL_UMASK_SHIFT) & 0xFF),
			    evtsel & PERFEVTSEL_EDGE ? ",edge" : "",
			    evtsel & PERFEVTSEL_INV ? ",inv" : "", evtsel & PERFEVTSEL_ANY ? ",any" : "");

	if (used > 0 && (size_t)used < size && cmask != 0)
		used += snprintf(name + used, size - (size_t)used, ",cmask=%#llx",
				 (unsigned long long)cmask);
	if (used > 0 && (size_t)used < size)
		snprintf(name + used, size - (size_t)used, "/");
}

int haecer__perf_core_spec(uint64_t evtsel, uint32_t core_type, uint32_t cpu,
			   struct haecer_perf_spec *spec)
{
	char name[160];
	uint32_t type;
	const char *pmu = core_pmu(core_type, &type);
	int error;

	if (pmu == NULL) {
		*spec = (struct haecer_perf_spec){ .type = PERF_TYPE_RAW,
						   .config = evtsel & RAW_CONFIG_MASK };
	} else {
		terms_of(pmu, evtsel, name, sizeof(name));
		error = haecer_perf_event_by_name(name, spec);
		if (error < 0)
			return haecer__fail(error, "%s: the core PMU's sysfs format cannot hold this "
					    "encoding (%#llx): %s", name,
					    (unsigned long long)evtsel, strerror(-error));
	}
	spec->flags = level_flags(evtsel);
	spec->cpu = (int)cpu;
	return 0;
}

/* The architectural events as perf's generic hardware events (linux/perf_event.h), by
 * enum arch_event_index. */
static const uint64_t generic_config[ARCH_EVENT_COUNT] = {
	[ARCH_EVENT_CORE_CYCLES] = PERF_COUNT_HW_CPU_CYCLES,
	[ARCH_EVENT_INSTRUCTIONS] = PERF_COUNT_HW_INSTRUCTIONS,
	[ARCH_EVENT_REFERENCE_CYCLES] = PERF_COUNT_HW_REF_CPU_CYCLES,
	[ARCH_EVENT_LLC_REFERENCES] = PERF_COUNT_HW_CACHE_REFERENCES,
	[ARCH_EVENT_LLC_MISSES] = PERF_COUNT_HW_CACHE_MISSES,
	[ARCH_EVENT_BRANCHES] = PERF_COUNT_HW_BRANCH_INSTRUCTIONS,
	[ARCH_EVENT_BRANCH_MISSES] = PERF_COUNT_HW_BRANCH_MISSES,
};

int haecer__perf_generic_spec(unsigned arch_index, uint32_t levels, uint32_t core_type,
			      uint32_t cpu, struct haecer_perf_spec *spec)
{
	uint32_t type;
	const char *pmu = core_pmu(core_type, &type);

	if (arch_index >= ARCH_EVENT_COUNT)
		return haecer__fail(-EINVAL, "architectural event %u has no generic perf event",
				    arch_index);
	*spec = (struct haecer_perf_spec){ .type = PERF_TYPE_HARDWARE,
					   .config = generic_config[arch_index] };
	/* A hybrid part's generic event names its PMU in the upper half (perf does the same). */
	if (pmu != NULL && strcmp(pmu, "cpu") != 0)
		spec->config |= (uint64_t)type << PERF_PMU_TYPE_SHIFT;
	spec->flags = level_flags((levels & HAECER_FLAG_USR ? PERFEVTSEL_USR : 0) |
				  (levels & HAECER_FLAG_OS ? PERFEVTSEL_OS : 0));
	spec->cpu = (int)cpu;
	return 0;
}

int haecer__perf_fixed_spec(unsigned fixed, uint32_t levels, uint32_t core_type, uint32_t cpu,
			    struct haecer_perf_spec *spec)
{
	/* Fixed counters 0-2 count what the generic events do; the kernel places them there. */
	static const unsigned arch_of_fixed[] = { ARCH_EVENT_INSTRUCTIONS, ARCH_EVENT_CORE_CYCLES,
						  ARCH_EVENT_REFERENCE_CYCLES };

	if (fixed >= sizeof(arch_of_fixed) / sizeof(arch_of_fixed[0]))
		return haecer__fail(-EOPNOTSUPP, "fixed counter %u has no perf event msrd's broker "
				    "can open (only 0-2: instructions, cycles, ref-cycles)", fixed);
	return haecer__perf_generic_spec(arch_of_fixed[fixed], levels, core_type, cpu, spec);
}
