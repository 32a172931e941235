/*
 * harness/policy_text.h — policy fragments several tests share (YAML text, for msrd_start).
 *
 * POLICY_HEADER starts a policy; POLICY_PMU_MSRS lists the Intel architectural PMU registers in
 * the set `pmu` with the masks configs/policies/default.yaml uses (counters fully writable, event
 * selects without PC, INT and AnyThread, fixed control OS and USR, global control PMC0-7 and
 * fixed 0-2); POLICY_TSC_MSR and POLICY_RAPL_MSRS add the TSC (set `time`) and the Intel RAPL
 * registers (set `rapl`). A test adds its own entries and rules after them, or takes one of the
 * whole policies below when what it tests is not the policy.
 */
#ifndef HAECER_HARNESS_POLICY_TEXT_H
#define HAECER_HARNESS_POLICY_TEXT_H

#define POLICY_HEADER "version: 1\ndefault: deny\nmsrs:\n"

/* The TSC in the set `time`. */
#define POLICY_TSC_MSR "  - {name: TSC, address: 0x10, read: true, set: time}\n"

/* The TSC, readable by anyone: for tests about connections, not policy. */
#define POLICY_TSC_FOR_ANYONE                                                                       \
	POLICY_HEADER                                                                               \
	POLICY_TSC_MSR                                                                              \
	"rules:\n"                                                                                 \
	"  - {match: {any: true}, allow: [time]}\n"

/* The TSC, readable by root only: for tests about msrd's start and its devices. */
#define POLICY_TSC_FOR_ROOT                                                                         \
	POLICY_HEADER                                                                               \
	POLICY_TSC_MSR                                                                              \
	"rules:\n"                                                                                 \
	"  - {match: {uid: 0}, allow: [time]}\n"

/* The TSC and the package energy counter, both in `time` and readable by anyone: for tests
 * about clients that need two registers (a batch alternating them), not policy. */
#define POLICY_TSC_PKG_FOR_ANYONE                                                                   \
	POLICY_HEADER                                                                               \
	POLICY_TSC_MSR                                                                              \
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: time}\n"                         \
	"rules:\n"                                                                                 \
	"  - {match: {any: true}, allow: [time]}\n"

#define POLICY_PMU_MSRS                                                                             \
	"  - {name: IA32_PMC, range: [0xC1, 0xC8], read: true, write_mask: 0xffffffffffff, "      \
	"set: pmu}\n"                                                                               \
	"  - {name: IA32_A_PMC, range: [0x4C1, 0x4C8], read: true, write_mask: 0xffffffffffff, "  \
	"set: pmu}\n"                                                                               \
	"  - {name: IA32_PERFEVTSEL, range: [0x186, 0x18D], read: true, write_mask: 0xffc7ffff, " \
	"set: pmu}\n"                                                                               \
	"  - {name: IA32_FIXED_CTR, range: [0x309, 0x30B], read: true, "                          \
	"write_mask: 0xffffffffffff, set: pmu}\n"                                                   \
	"  - {name: IA32_FIXED_CTR_CTRL, address: 0x38D, read: true, write_mask: 0x333, set: pmu}\n" \
	"  - {name: IA32_PERF_GLOBAL_CTRL, address: 0x38F, read: true, write_mask: 0x7000000ff, "  \
	"set: pmu}\n"

/* The PMU registers, root's: for tests of how msrd drives the PMU (its slots), not of policy. */
#define POLICY_PMU_FOR_ROOT                                                                         \
	POLICY_HEADER                                                                               \
	POLICY_PMU_MSRS                                                                             \
	"rules:\n"                                                                                 \
	"  - {match: {uid: 0}, allow: [pmu]}\n"

/* Intel RAPL's power unit and package energy counter, in the set `rapl`. */
#define POLICY_RAPL_PKG_MSRS                                                                        \
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"                    \
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"

/* Intel RAPL: the power unit and the package, PP0 and PP1 energy counters in the set `rapl`. */
#define POLICY_RAPL_MSRS                                                                            \
	POLICY_RAPL_PKG_MSRS                                                                        \
	"  - {name: PP0_ENERGY, address: 0x639, read: true, set: rapl}\n"                         \
	"  - {name: PP1_ENERGY, address: 0x641, read: true, set: rapl}\n"

/* The power unit and the package energy counter, readable by root: for tests of how msrd reads
 * energy (a stand-in device tree), not of policy. */
#define POLICY_RAPL_PKG_FOR_ROOT                                                                    \
	POLICY_HEADER                                                                               \
	POLICY_RAPL_PKG_MSRS                                                                        \
	"rules:\n"                                                                                 \
	"  - {match: {uid: 0}, allow: [rapl]}\n"

/* The same, and root drives the simulated CPU: for tests of the simulator's energy. */
#define POLICY_RAPL_PKG_FOR_SIM_ROOT                                                                \
	POLICY_HEADER                                                                               \
	POLICY_RAPL_PKG_MSRS                                                                        \
	"rules:\n"                                                                                 \
	"  - {match: {uid: 0}, allow: [rapl], capabilities: [sim_control]}\n"

#endif
