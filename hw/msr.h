/*
 * hw/msr.h — x86 model-specific register facts shared by msrd, its simulated CPU and libclient.
 * Header only: addresses and bit fields from the Intel SDM vol. 3B (ch. 18-19, 14.9) and the
 * AMD PPR for families 17h/19h/1Ah. No state, no policy: constants and the arithmetic on them.
 */
#ifndef HAECER_HW_MSR_H
#define HAECER_HW_MSR_H

#include <stdbool.h>
#include <stdint.h>

/* ---- time ---- */
#define MSR_IA32_TSC 0x10u
#define MSR_SMI_COUNT 0x34u /* Intel, since Nehalem: SMIs since reset, bits 31:0 */
#define MSR_IA32_MPERF 0xE7u /* counts at the TSC rate while not halted (C0) */
#define MSR_IA32_APERF 0xE8u /* counts actual core cycles while not halted (C0) */

/* TSC frequency (the kernel's native_calibrate_tsc and amd P-state facts): Intel CPUID 0x15
 * (EAX denominator, EBX numerator, ECX crystal Hz: TSC = ECX * EBX / EAX), CPUID 0x16 (EAX base
 * MHz), MSR_PLATFORM_INFO bits 15:8 (maximum non-turbo ratio x 100 MHz; 133.33 MHz on Nehalem
 * and Westmere); AMD family 17h+ counts the TSC at the P0 frequency, MSRC001_0064 (PStateDef0:
 * PstateEn 63; 17h/19h CpuDfsId 13:8, CpuFid 7:0, MHz = 200 * Fid / DfsId; 1Ah CpuFid 11:0,
 * MHz = 5 * Fid). */
#define MSR_PLATFORM_INFO 0xCEu
/* Highest ratio (x 100 MHz) with N active cores: bits 8(N-1)+7:8(N-1) on Sandy Bridge client
 * parts (SDM vol. 4); per group of MSR_TURBO_RATIO_LIMIT_CORES (0x1AE) on Skylake-SP. */
#define MSR_TURBO_RATIO_LIMIT 0x1ADu
#define MSR_AMD_PSTATE_DEF0 0xC0010064u
#define AMD_PSTATE_ENABLED (1ull << 63)

enum tsc_source {
	TSC_SOURCE_UNKNOWN = 0,
	TSC_SOURCE_SIMULATED = 1,     /* the simulated CPU's model */
	TSC_SOURCE_CPUID_15 = 2,
	TSC_SOURCE_CPUID_16 = 3,
	TSC_SOURCE_PLATFORM_INFO = 4,
	TSC_SOURCE_AMD_P0 = 5,
	TSC_SOURCE_CALIBRATED = 6,    /* against CLOCK_MONOTONIC_RAW */
	TSC_SOURCE_CRYSTAL_TABLE = 7, /* CPUID 0x15's ratio x the SDM's crystal of the model */
	TSC_SOURCE_COUNT = 8,
};

static inline const char *tsc_source_name(unsigned source)
{
	static const char *const names[TSC_SOURCE_COUNT] = {
		"unknown", "the simulated CPU's model", "CPUID 0x15", "CPUID 0x16",
		"MSR_PLATFORM_INFO", "the AMD P0 frequency (MSRC001_0064)",
		"calibration against CLOCK_MONOTONIC_RAW",
		"CPUID 0x15 ratio x the SDM's crystal frequency of the model",
	};

	return source < TSC_SOURCE_COUNT ? names[source] : "unknown";
}

/* ---- architectural performance monitoring (CPUID 0xA) ---- */
#define MSR_IA32_PMC0 0xC1u              /* IA32_PMCx = 0xC1 + x; writes sign-extend bit 31 */
#define MSR_IA32_PERFEVTSEL0 0x186u      /* IA32_PERFEVTSELx = 0x186 + x */
#define MSR_IA32_A_PMC0 0x4C1u           /* full-width writes, when PERF_CAPABILITIES bit 13 */
#define MSR_IA32_PERF_CAPABILITIES 0x345u
#define MSR_IA32_FIXED_CTR0 0x309u       /* instructions retired */
#define MSR_IA32_FIXED_CTR1 0x30Au       /* unhalted core cycles */
#define MSR_IA32_FIXED_CTR2 0x30Bu       /* unhalted reference cycles */
#define MSR_IA32_FIXED_CTR_CTRL 0x38Du   /* 4 bits per fixed counter: OS, USR, AnyThread, PMI */
#define MSR_IA32_PERF_GLOBAL_STATUS 0x38Eu
#define MSR_IA32_PERF_GLOBAL_CTRL 0x38Fu /* bits 0..n-1 PMCs, 32..32+m-1 fixed counters */
#define MSR_IA32_PERF_GLOBAL_OVF_CTRL 0x390u

#define PERFEVTSEL_EVENT_MASK 0xFFull
#define PERFEVTSEL_UMASK_SHIFT 8
#define PERFEVTSEL_USR (1ull << 16)
#define PERFEVTSEL_OS (1ull << 17)
#define PERFEVTSEL_EDGE (1ull << 18)
#define PERFEVTSEL_PC (1ull << 19)
#define PERFEVTSEL_INT (1ull << 20)
#define PERFEVTSEL_ANY (1ull << 21) /* AnyThread, perfmon v3+; reserved before */
#define PERFEVTSEL_EN (1ull << 22)
#define PERFEVTSEL_INV (1ull << 23)
#define PERFEVTSEL_CMASK_SHIFT 24
/* Bits 63:32 are reserved; setting them raises #GP (EIO through the msr driver). */
#define PERFEVTSEL_VALID_BITS 0xFFFFFFFFull

#define FIXED_CTR_CTRL_OS 0x1u
#define FIXED_CTR_CTRL_USR 0x2u
#define FIXED_CTR_CTRL_ANY 0x4u
#define FIXED_CTR_CTRL_PMI 0x8u
#define FIXED_CTR_CTRL_BITS_PER_COUNTER 4
#define GLOBAL_CTRL_FIXED_SHIFT 32

/* CPUID leaf 0xA fields. */
#define CPUID_0A_EAX_VERSION(eax) ((eax) & 0xFFu)
#define CPUID_0A_EAX_GP_COUNTERS(eax) (((eax) >> 8) & 0xFFu)
#define CPUID_0A_EAX_GP_WIDTH(eax) (((eax) >> 16) & 0xFFu)
#define CPUID_0A_EAX_EBX_LENGTH(eax) (((eax) >> 24) & 0xFFu)
#define CPUID_0A_EDX_FIXED_COUNTERS(edx) ((edx) & 0x1Fu)
#define CPUID_0A_EDX_FIXED_WIDTH(edx) (((edx) >> 5) & 0xFFu)

/* Architectural events: index = bit in CPUID.0AH:EBX (bit set = NOT available). */
enum arch_event_index {
	ARCH_EVENT_CORE_CYCLES = 0,        /* 3C/00 */
	ARCH_EVENT_INSTRUCTIONS = 1,       /* C0/00 */
	ARCH_EVENT_REFERENCE_CYCLES = 2,   /* 3C/01 */
	ARCH_EVENT_LLC_REFERENCES = 3,     /* 2E/4F */
	ARCH_EVENT_LLC_MISSES = 4,         /* 2E/41 */
	ARCH_EVENT_BRANCHES = 5,           /* C4/00 */
	ARCH_EVENT_BRANCH_MISSES = 6,      /* C5/00 */
	ARCH_EVENT_COUNT = 7,
};

/* ---- AMD core performance counters (family 17h+, PerfCtrExtCore): no CPUID leaf 0xA ---- */
#define MSR_AMD_PERF_CTL0 0xC0010200u        /* PERF_CTLx = 0xC0010200 + 2x, x < 6 */
#define MSR_AMD_PERF_CTR0 0xC0010201u        /* PERF_CTRx = 0xC0010201 + 2x, 48 bits */
#define MSR_AMD_PERF_LEGACY_CTL0 0xC0010000u /* aliases of counters 0..3 */
#define MSR_AMD_PERF_LEGACY_CTR0 0xC0010004u
#define AMD_PERF_CTL_EVENT_HI_SHIFT 32       /* EventSelect[11:8] in bits 35:32 */
/* PerfMonV2 (Zen 4 and later; CPUID Fn8000_0022 EAX bit 0, AMD PPR 19h model 11h): one global
 * enable bit per core counter (bits 5:0), all of which must be set, with PERF_CTL.EN, for a
 * counter to count. Linux clears it while perf is idle (amd_pmu_v2_disable_all). */
#define CPUID_AMD_EXT_PERFMON 0x80000022u
#define CPUID_AMD_EXT_PERFMON_V2(eax) ((eax) & 1u)
#define MSR_AMD_PERF_CNTR_GLOBAL_STATUS 0xC0000300u     /* overflow bits, read-only */
#define MSR_AMD_PERF_CNTR_GLOBAL_CTL 0xC0000301u        /* counter enables, bits 5:0 */
#define MSR_AMD_PERF_CNTR_GLOBAL_STATUS_CLR 0xC0000302u /* write 1 to clear a status bit */
/* Event 7:0, unit mask 15:8, USR 16, OS 17, edge 18, INT 20, EN 22, INV 23, CMASK 31:24,
 * EventSelect[11:8] 35:32, GuestOnly 40, HostOnly 41; the rest is reserved. */
#define AMD_PERF_CTL_VALID_BITS 0x0000030FFFD7FFFFull

/* ---- counter registers by index (the arithmetic of the comments above, in one place) ---- */
static inline uint32_t msr_ia32_perfevtsel(uint32_t index) { return MSR_IA32_PERFEVTSEL0 + index; }
static inline uint32_t msr_ia32_pmc(uint32_t index) { return MSR_IA32_PMC0 + index; }
static inline uint32_t msr_ia32_a_pmc(uint32_t index) { return MSR_IA32_A_PMC0 + index; }
static inline uint32_t msr_ia32_fixed_ctr(uint32_t index) { return MSR_IA32_FIXED_CTR0 + index; }
static inline uint32_t msr_amd_perf_ctl(uint32_t index) { return MSR_AMD_PERF_CTL0 + 2 * index; }
static inline uint32_t msr_amd_perf_ctr(uint32_t index) { return MSR_AMD_PERF_CTR0 + 2 * index; }

/* Whether `address` is one of `count` consecutive registers from `first`; *index says which
 * (untouched when not). */
static inline bool msr_index_in(uint32_t address, uint32_t first, uint32_t count, uint32_t *index)
{
	if (address < first || address - first >= count)
		return false;
	*index = address - first;
	return true;
}

/* Whether `address` is PERF_CTLx or PERF_CTRx of one of the first `count` AMD core counters:
 * *index = x, *control = it is PERF_CTLx (both untouched when not). */
static inline bool msr_amd_counter_index(uint32_t address, uint32_t count, uint32_t *index,
					 bool *control)
{
	uint32_t offset;

	if (!msr_index_in(address, MSR_AMD_PERF_CTL0, 2 * count, &offset))
		return false;
	*index = offset / 2;
	*control = (offset & 1) == 0;
	return true;
}

/* The same for the legacy aliases PERF_CTL0..3 / PERF_CTR0..3 of counters 0..3. */
static inline bool msr_amd_legacy_index(uint32_t address, uint32_t *index, bool *control)
{
	if (msr_index_in(address, MSR_AMD_PERF_LEGACY_CTL0, 4, index)) {
		*control = true;
		return true;
	}
	if (msr_index_in(address, MSR_AMD_PERF_LEGACY_CTR0, 4, index)) {
		*control = false;
		return true;
	}
	return false;
}

/* ---- RAPL, Intel ---- */
#define MSR_RAPL_POWER_UNIT 0x606u /* power 3:0, energy 12:8, time 19:16; unit = 2^-field */
#define MSR_PKG_POWER_LIMIT 0x610u
#define PKG_POWER_LIMIT_PL1_POWER 0x7FFFull  /* 14:0, in power units */
#define PKG_POWER_LIMIT_PL1_ENABLE (1ull << 15)
#define MSR_PKG_ENERGY_STATUS 0x611u
#define MSR_PKG_POWER_INFO 0x614u  /* thermal spec power 14:0, in power units */
#define MSR_DRAM_ENERGY_STATUS 0x619u
#define MSR_PP0_ENERGY_STATUS 0x639u
#define MSR_PP1_ENERGY_STATUS 0x641u
#define MSR_PLATFORM_ENERGY_STATUS 0x64Du /* PSYS */

/* ---- RAPL, AMD family 17h+ ---- */
#define MSR_AMD_RAPL_POWER_UNIT 0xC0010299u
#define MSR_AMD_CORE_ENERGY_STATUS 0xC001029Au /* per core */
#define MSR_AMD_PKG_ENERGY_STATUS 0xC001029Bu

#define RAPL_UNIT_POWER(raw) ((unsigned)((raw) & 0xFu))
#define RAPL_UNIT_ENERGY(raw) ((unsigned)(((raw) >> 8) & 0x1Fu))
#define RAPL_UNIT_TIME(raw) ((unsigned)(((raw) >> 16) & 0xFu))
#define RAPL_ENERGY_COUNTER_MASK 0xFFFFFFFFull /* energy status registers count in 31:0 */

enum rapl_domain {
	RAPL_DOMAIN_PKG = 0,
	RAPL_DOMAIN_PP0 = 1,
	RAPL_DOMAIN_PP1 = 2,
	RAPL_DOMAIN_DRAM = 3,
	RAPL_DOMAIN_PSYS = 4,
	RAPL_DOMAIN_AMD_CORE = 5,
	RAPL_DOMAIN_AMD_PKG = 6,
	RAPL_DOMAIN_COUNT = 7,
};

/* The energy status register of a RAPL domain (Intel SDM vol. 4 ch. 2; AMD PPR 17h
 * MSRC001_029A/B), 0 for no domain. */
static inline uint32_t rapl_energy_status_address(enum rapl_domain domain)
{
	switch (domain) {
	case RAPL_DOMAIN_PKG: return MSR_PKG_ENERGY_STATUS;
	case RAPL_DOMAIN_PP0: return MSR_PP0_ENERGY_STATUS;
	case RAPL_DOMAIN_PP1: return MSR_PP1_ENERGY_STATUS;
	case RAPL_DOMAIN_DRAM: return MSR_DRAM_ENERGY_STATUS;
	case RAPL_DOMAIN_PSYS: return MSR_PLATFORM_ENERGY_STATUS;
	case RAPL_DOMAIN_AMD_CORE: return MSR_AMD_CORE_ENERGY_STATUS;
	case RAPL_DOMAIN_AMD_PKG: return MSR_AMD_PKG_ENERGY_STATUS;
	default: return 0;
	}
}

/* The domain whose energy status register is `address`, or -1. */
static inline int rapl_domain_of_address(uint32_t address)
{
	for (int domain = 0; domain < RAPL_DOMAIN_COUNT; domain++) {
		if (rapl_energy_status_address((enum rapl_domain)domain) == address)
			return domain;
	}
	return -1;
}

static inline bool rapl_domain_is_amd(enum rapl_domain domain)
{
	return domain == RAPL_DOMAIN_AMD_CORE || domain == RAPL_DOMAIN_AMD_PKG;
}

#endif
