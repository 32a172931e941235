/*
 * tests/libclient/libclient_test.h — what the libclient tests share: a policy that knows the
 * registers of every simulated model (Intel and AMD), msrd started on a model with the HAECER
 * default context pointed at it, and a second connection for simulator control.
 *
 * Identities: root may do everything (and control the sim); uid 4101 may read energy and the
 * TSC (no PMU, no SMI count); uid 4102 may use the PMU and read the TSC (no energy); uid 4104
 * may read energy only (no TSC).
 */
#ifndef HAECER_TESTS_LIBCLIENT_LIBCLIENT_TEST_H
#define HAECER_TESTS_LIBCLIENT_LIBCLIENT_TEST_H

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "haecer/perfmon.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"

/* The msrd of the test program, and a connection to it for simulator control. */
static struct msrd_server server;
static __attribute__((unused)) struct haecer_conn *sim;

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull
#define ENERGY_ONLY_UID 4101
#define PMU_ONLY_UID 4102
#define ENERGY_WITHOUT_TSC_UID 4104

static const char libclient_policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: time}\n"
	"  - {name: SMI_COUNT, address: 0x34, read: true, set: smi}\n"
	"  - {name: PMC, range: [0xC1, 0xC8], read: true, write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: A_PMC, range: [0x4C1, 0x4C8], read: true, write_mask: 0xffffffffffff, "
	"set: pmu}\n"
	"  - {name: FIXED_CTR, range: [0x309, 0x30B], read: true, write_mask: 0xffffffffffff, "
	"set: pmu}\n"
	"  - {name: PERFEVTSEL, range: [0x186, 0x18D], read: true, write_mask: 0xffc7ffff, "
	"set: pmu}\n"
	"  - {name: FIXED_CTR_CTRL, address: 0x38D, read: true, write_mask: 0x333, set: pmu}\n"
	"  - {name: GLOBAL_STATUS, address: 0x38E, read: true, set: pmu}\n"
	"  - {name: GLOBAL_CTRL, address: 0x38F, read: true, write_mask: 0x7000000ff, set: pmu}\n"
	"  - {name: PERF_CAPABILITIES, address: 0x345, read: true, set: pmu}\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"
	"  - {name: DRAM_ENERGY, address: 0x619, read: true, set: rapl}\n"
	"  - {name: PP0_ENERGY, address: 0x639, read: true, set: rapl}\n"
	"  - {name: PP1_ENERGY, address: 0x641, read: true, set: rapl}\n"
	"  - {name: PSYS_ENERGY, address: 0x64D, read: true, set: rapl}\n"
	"  - {name: AMD_RAPL_UNIT, address: 0xC0010299, read: true, set: rapl}\n"
	"  - {name: AMD_CORE_ENERGY, address: 0xC001029A, read: true, set: rapl}\n"
	"  - {name: AMD_PKG_ENERGY, address: 0xC001029B, read: true, set: rapl}\n"
	"  - {name: AMD_PERF, range: [0xC0010200, 0xC001020B], read: true, "
	"write_mask: 0xfffffffffffff, set: pmu}\n"
	"  - {name: AMD_PERF_LEGACY, range: [0xC0010000, 0xC0010007], read: true, "
	"write_mask: 0xfffffffffffff, set: pmu}\n"
	"  - {name: AMD_GLOBAL_STATUS, address: 0xC0000300, read: true, set: pmu}\n"
	"  - {name: AMD_GLOBAL_CTL, address: 0xC0000301, read: true, write_mask: 0x3f, set: pmu}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [all]\n"
	"    create_rings: [0-65535]\n"
	"    monitor_rings: [0-65535]\n"
	"    capabilities: [sim_control]\n"
	"  - {match: {uid: 4101}, allow: [time, rapl], create_rings: [1-99]}\n"
	"  - {match: {uid: 4102}, allow: [time, pmu]}\n"
	"  - {match: {uid: 4104}, allow: [rapl]}\n";

/* Start msrd on a simulated model with a load script (NULL for none) and extra arguments (may
 * be NULL), $HAECER_SOCKET pointing at it (msrd_start_sim). 0 or -1. */
static inline int libclient_start(const char *model, const char *script,
				  const char *const *extra)
{
	return msrd_start_sim(&server, libclient_policy, model, script, extra);
}

/* Close the default context (its slots go back), then stop msrd cleanly. 0 or -1. */
static inline int libclient_stop(void)
{
	haecer_shutdown();
	return msrd_stop(&server);
}

/* One msrd (libclient_start) around one cmocka group, with `sim` connected to it; after the
 * group the default context is closed and msrd must stop cleanly. main()'s exit status. */
#define LIBCLIENT_RUN_GROUP(model, script, extra, tests)                                    \
	msrd_run_sim_group(&server, libclient_policy, (model), (script), (extra), &sim, #tests, \
			   (tests), sizeof(tests) / sizeof((tests)[0]))

/* cmocka setup: every simulated CPU fully busy. */
static inline int libclient_full_load(void **state)
{
	(void)state;
	return haecer_sim_set_load(sim, -1, 1.0) == 0 ? 0 : -1;
}

/* Print a setup failure's reason, for the log of a failing test. */
static inline void libclient_explain(const char *what, int error)
{
	if (error < 0)
		fprintf(stderr, "%s: %s (%s)\n", what, haecer_strerror(error),
			haecer_error_detail());
}

/* Whether this msrd accepts an option (its --help mentions it). */
static inline bool libclient_msrd_has_option(const char *option)
{
	char msrd[4096];
	char *out = NULL;
	bool found;

	snprintf(msrd, sizeof(msrd), "%s/msrd", harness_build_dir());
	const char *argv[] = {msrd, "--help", NULL};
	harness_run(argv, &out, NULL);
	found = out != NULL && strstr(out, option) != NULL;
	free(out);
	return found;
}

#endif
