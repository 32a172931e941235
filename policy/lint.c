/*
 * policy/lint.c — warnings about entries that load but are probably wrong (msrd --check-policy
 * prints them; --strict makes them fatal):
 *   - an entry named like an architectural or RAPL register (the names of hw/msr.h and the
 *     shipped policy) whose address is not that register's: a typo grants another register;
 *   - a write mask that opens the bits the shipped policy's comments call unsafe: PERFEVTSEL
 *     PC (19, drives the PMi pins), INT (20, a PMI the kernel does not expect), AnyThread (21,
 *     counts the sibling hyperthread: another user's activity); FIXED_CTR_CTRL AnyThread and
 *     PMI (bits 2 and 3 of each 4-bit field); AMD PERF_CTL INT (20) and HostOnly/GuestOnly
 *     are left alone (they do not leak across users).
 */
#include "policy/internal.h"

#include <stdio.h>
#include <strings.h>

#include "hw/msr.h"

/* Registers whose names are spelled the same in hw/msr.h, the SDM and the shipped policy. */
static const struct {
	const char *name;
	uint32_t address;
} known[] = {
	{ "IA32_TIME_STAMP_COUNTER", MSR_IA32_TSC },   { "IA32_TSC", MSR_IA32_TSC },
	{ "TSC", MSR_IA32_TSC },                       { "MSR_SMI_COUNT", MSR_SMI_COUNT },
	{ "IA32_PMC", MSR_IA32_PMC0 },                 { "IA32_PMC0", MSR_IA32_PMC0 },
	{ "IA32_A_PMC", MSR_IA32_A_PMC0 },             { "IA32_A_PMC0", MSR_IA32_A_PMC0 },
	{ "IA32_PERFEVTSEL", MSR_IA32_PERFEVTSEL0 },   { "IA32_PERFEVTSEL0", MSR_IA32_PERFEVTSEL0 },
	{ "IA32_FIXED_CTR", MSR_IA32_FIXED_CTR0 },     { "IA32_FIXED_CTR0", MSR_IA32_FIXED_CTR0 },
	{ "IA32_FIXED_CTR_CTRL", MSR_IA32_FIXED_CTR_CTRL },
	{ "IA32_PERF_GLOBAL_CTRL", MSR_IA32_PERF_GLOBAL_CTRL },
	{ "IA32_PERF_GLOBAL_STATUS", MSR_IA32_PERF_GLOBAL_STATUS },
	{ "IA32_PERF_CAPABILITIES", MSR_IA32_PERF_CAPABILITIES },
	{ "MSR_RAPL_POWER_UNIT", MSR_RAPL_POWER_UNIT },
	{ "MSR_PKG_POWER_LIMIT", MSR_PKG_POWER_LIMIT },
	{ "MSR_PKG_ENERGY_STATUS", MSR_PKG_ENERGY_STATUS },
	{ "MSR_PKG_POWER_INFO", MSR_PKG_POWER_INFO },
	{ "MSR_DRAM_ENERGY_STATUS", MSR_DRAM_ENERGY_STATUS },
	{ "MSR_PP0_ENERGY_STATUS", MSR_PP0_ENERGY_STATUS },
	{ "MSR_PP1_ENERGY_STATUS", MSR_PP1_ENERGY_STATUS },
	{ "MSR_PLATFORM_ENERGY_STATUS", MSR_PLATFORM_ENERGY_STATUS },
	{ "MSR_AMD_RAPL_POWER_UNIT", MSR_AMD_RAPL_POWER_UNIT },
	{ "MSR_AMD_CORE_ENERGY_STATUS", MSR_AMD_CORE_ENERGY_STATUS },
	{ "MSR_AMD_PKG_ENERGY_STATUS", MSR_AMD_PKG_ENERGY_STATUS },
};

#define PERFEVTSEL_UNSAFE (PERFEVTSEL_PC | PERFEVTSEL_INT | PERFEVTSEL_ANY)
#define FIXED_CTRL_UNSAFE_FIELD (FIXED_CTR_CTRL_ANY | FIXED_CTR_CTRL_PMI)

static bool covers(const struct policy_msr *msr, uint32_t address)
{
	return msr->first <= address && address <= msr->last;
}

/* FIXED_CTR_CTRL's AnyThread and PMI bits of every field. */
static uint64_t fixed_ctrl_unsafe(void)
{
	uint64_t bits = 0;

	for (unsigned i = 0; i < 16; i++)
		bits |= (uint64_t)FIXED_CTRL_UNSAFE_FIELD << (i * FIXED_CTR_CTRL_BITS_PER_COUNTER);
	return bits;
}

int policy_lint_msr(struct policy *policy, const struct policy_msr *msr, unsigned line)
{
	int result = 0;

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]) && result == 0; i++) {
		if (strcasecmp(msr->name, known[i].name) != 0 || msr->first == known[i].address)
			continue;
		result = policy_warn(policy, line, "MSR entry '%s' starts at 0x%x, but %s is 0x%x: a "
				     "typo grants another register", msr->name, msr->first,
				     known[i].name, known[i].address);
	}
	if (result == 0 && (msr->write_mask & PERFEVTSEL_UNSAFE) &&
	    (covers(msr, MSR_IA32_PERFEVTSEL0) ||
	     (msr->first >= MSR_IA32_PERFEVTSEL0 && msr->first < MSR_IA32_PERFEVTSEL0 + 8)))
		result = policy_warn(policy, line, "MSR entry '%s': write_mask 0x%llx opens "
				     "PERFEVTSEL bits %s%s%s(PC 19 drives the PMi pins, INT 20 "
				     "raises PMIs the kernel does not expect, AnyThread 21 counts "
				     "another user's hyperthread)", msr->name,
				     (unsigned long long)msr->write_mask,
				     msr->write_mask & PERFEVTSEL_PC ? "PC " : "",
				     msr->write_mask & PERFEVTSEL_INT ? "INT " : "",
				     msr->write_mask & PERFEVTSEL_ANY ? "AnyThread " : "");
	if (result == 0 && covers(msr, MSR_IA32_FIXED_CTR_CTRL) &&
	    (msr->write_mask & fixed_ctrl_unsafe()))
		result = policy_warn(policy, line, "MSR entry '%s': write_mask 0x%llx opens "
				     "FIXED_CTR_CTRL AnyThread or PMI bits (another user's "
				     "hyperthread; interrupts the kernel does not expect)",
				     msr->name, (unsigned long long)msr->write_mask);
	return result;
}
