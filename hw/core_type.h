/*
 * hw/core_type.h — hybrid Intel parts (Alder Lake 06_97/9A, Raptor Lake 06_B7/BA/BF, Meteor Lake
 * 06_AA/AC and later): which kind of core a CPU is, and how many counters it has. The two kinds
 * have different counters and different model-specific event encodings, so every CPU is looked
 * at on its own. Header only.
 *
 * Sources: Intel SDM vol. 2A, CPUID leaf 07H EDX[15] (Hybrid), leaf 1AH EAX[31:24] (core type:
 * 20H Intel Atom, 40H Intel Core), leaf 23H (architectural performance monitoring extended
 * leaf: sub-leaf 0 EAX[1] says sub-leaf 1 is valid, whose EAX is the bitmap of general-purpose
 * counters and EBX that of fixed counters); leaf 0AH ECX (perfmon v5: bitmap of fixed counters,
 * "fixed counter i is supported if ECX[i] || EDX[4:0] > i"). The kernel reads them the same way
 * (arch/x86/events/intel/core.c: intel_pmu_check_hybrid_pmus, update_pmu_cap) and exposes the
 * kinds as /sys/devices/cpu_core and /sys/devices/cpu_atom. libpfm4 names their event tables
 * adl_glc (Golden Cove P-cores) and adl_grt (Gracemont E-cores).
 */
#ifndef HAECER_HW_CORE_TYPE_H
#define HAECER_HW_CORE_TYPE_H

#include <stdint.h>

#define CPUID_HYBRID_LEAF 0x07u
#define CPUID_07_EDX_HYBRID(edx) (((edx) >> 15) & 1u)
#define CPUID_CORE_TYPE_LEAF 0x1Au
#define CPUID_1A_EAX_CORE_TYPE(eax) (((eax) >> 24) & 0xFFu)
#define CPUID_PERFMON_EXT_LEAF 0x23u
#define CPUID_23_SUBLEAF1_VALID(eax) (((eax) >> 1) & 1u)

enum cpu_core_type {
	CPU_CORE_TYPE_NONE = 0,     /* not a hybrid part (or not known) */
	CPU_CORE_TYPE_ATOM = 0x20,  /* E-core (Gracemont, Crestmont) */
	CPU_CORE_TYPE_CORE = 0x40,  /* P-core (Golden Cove, Raptor Cove, Redwood Cove) */
};

/* "P-core", "E-core", or NULL when the part is not hybrid (or the type is unknown). */
static inline const char *cpu_core_type_name(uint8_t type)
{
	if (type == CPU_CORE_TYPE_CORE)
		return "P-core";
	if (type == CPU_CORE_TYPE_ATOM)
		return "E-core";
	return NULL;
}

/* Fixed counters of a perfmon leaf 0AH (ECX, EDX) as a bitmap: v5's ECX bitmap or-ed with the
 * contiguous count of EDX[4:0], as the SDM defines it. */
static inline uint32_t cpuid_0a_fixed_mask(uint32_t version, uint32_t ecx, uint32_t edx)
{
	uint32_t count = edx & 0x1Fu;
	uint32_t mask = count >= 32 ? UINT32_MAX : (1u << count) - 1u;

	return version >= 5 ? mask | ecx : mask;
}

#endif
