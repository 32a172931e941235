/*
 * Core-PMU events as msrd's perf broker is asked for them (libclient/haecer_perf_core.c): the
 * event database's encoding (libpfm4's for a named model event, the SDM's for an architectural
 * one) becomes the perf_event_attr the kernel's perf tool would give for the same event, by the
 * core PMU's sysfs format files. This machine's kernel has no core PMU, so the format files are
 * stand-ins ($HAECER_SYSFS_ROOT) with the kernel's own text:
 *  - Intel (arch/x86/events/intel/core.c): event=config:0-7 umask=config:8-15 edge=config:18
 *    inv=config:23 cmask=config:24-31 any=config:21, on Skylake-SP's tables (libpfm4 skx):
 *    UOPS_ISSUED:ANY is perf's uops_issued.any, event=0x0e,umask=0x01 -> config 0x10e;
 *    UOPS_ISSUED:ANY with inv and cmask 1 (uops_issued.stall_cycles) -> 0x180010e;
 *    CYCLE_ACTIVITY:STALLS_L1D_MISS:u (cmask 12) -> 0xc000ca3 with exclude_kernel; the
 *    architectural LLC misses (2E/41) -> 0x412e;
 *  - AMD (arch/x86/events/amd/core.c): event=config:0-7,32-35, on Zen 4's tables (libpfm4
 *    amd64_fam19h_zen4): RETIRED_FUSED_INSTRUCTIONS (PMCx1D0, perf's ex_ret_fused_instr)
 *    -> 0x1000000d0; IC_TAG_HIT_MISS:IC_MISS (PMCx18E umask 0x18) -> 0x10000188e;
 *  - a hybrid part (cpu_core type 4, cpu_atom type 10): an E-core's event goes to cpu_atom's
 *    type; perf's generic cycles is PERF_TYPE_HARDWARE with the PMU's type in config's upper
 *    half, as perf gives "cpu_atom/cycles/"; fixed counter 0 is generic instructions;
 *  - without a core PMU in sysfs: PERF_TYPE_RAW in the kernel's x86 layout (the kernel then
 *    refuses it: server/test_perf_broker checks that on this machine's real kernel);
 *  - a format that cannot hold the encoding is refused with the reason: AMD's event 0x1D0
 *    against an Intel-style 8-bit event field (-ERANGE), AnyThread on a PMU without `any`.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "harness/msrd_harness.h"
#include "harness/standin_tree.h"
#include "libclient/haecer_internal.h"
#include "tests/events/machines.h"

#define DEVICES "sys/bus/event_source/devices"
#define USR_OS (EVENT_FLAG_USR | EVENT_FLAG_OS)

static char root[] = "/tmp/haecer-perf-core-XXXXXX";

/* The kernel's format attributes (PMU_FORMAT_ATTR) of its Intel and AMD core PMUs, as
 * tree/sys/bus/event_source/devices/pmu. */
static void put_pmu(const char *tree, const char *pmu, const char *type, bool amd)
{
	static const char *const intel[][2] = {
		{ "event", "config:0-7" }, { "umask", "config:8-15" }, { "edge", "config:18" },
		{ "pc", "config:19" },     { "any", "config:21" },     { "inv", "config:23" },
		{ "cmask", "config:24-31" },
	};
	char path[256];

	snprintf(path, sizeof(path), "%s/" DEVICES "/%s/type", tree, pmu);
	tree_write_text(root, path, "%s\n", type);
	for (size_t i = 0; i < sizeof(intel) / sizeof(intel[0]); i++) {
		const char *bits = amd && strcmp(intel[i][0], "event") == 0 ? "config:0-7,32-35"
									     : intel[i][1];
		if (amd && strcmp(intel[i][0], "any") == 0)
			continue; /* AMD's core PMU has no AnyThread */
		snprintf(path, sizeof(path), "%s/" DEVICES "/%s/format/%s", tree, pmu, intel[i][0]);
		tree_write_text(root, path, "%s\n", bits);
	}
}

static void use_tree(const char *tree)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", root, tree);
	setenv(HAECER_SYSFS_ROOT_ENV, path, 1);
}

static int setup(void **state)
{
	(void)state;
	if (mkdtemp(root) == NULL)
		return -1;
	/* One tree per machine: intel/, amd/, hybrid/, none/ (no core PMU). */
	put_pmu("intel", "cpu", "4", false);
	put_pmu("amd", "cpu", "4", true);
	put_pmu("hybrid", "cpu_core", "4", false);
	put_pmu("hybrid", "cpu_atom", "10", false);
	tree_write_text(root, "none/" DEVICES "/msr/type", "%s\n", "12");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unsetenv(HAECER_SYSFS_ROOT_ENV);
	harness_remove_tree(root);
	return 0;
}

/* The broker's spec of libpfm4's name on machine, through the stand-in tree. */
static struct haecer_perf_spec named(struct event_db *db, const char *name, uint32_t flags,
				     uint8_t cmask, uint32_t core_type)
{
	struct haecer_perf_spec spec = { 0 };
	struct event_encoding encoding;
	char why[EVENT_DB_WHY_SIZE] = "";

	if (event_db_pfm_encode(db, name, flags, cmask, &encoding, why, sizeof(why)) < 0)
		fail_msg("%s: %s", name, why);
	assert_int_equal(haecer__perf_core_spec(encoding.evtsel, core_type, 1, &spec), 0);
	fprintf(stderr, "%s: evtsel %#llx -> type %u config %#llx flags %#x\n", encoding.name,
		(unsigned long long)encoding.evtsel, spec.type, (unsigned long long)spec.config,
		spec.flags);
	return spec;
}

static void test_intel(void **state)
{
	struct event_machine machine = machine_skylake_sp();
	struct haecer_perf_spec spec;
	struct event_db *db = NULL;
	char why[EVENT_DB_WHY_SIZE] = "";
	uint64_t evtsel = 0;

	(void)state;
	use_tree("intel");
	assert_int_equal(event_db_open(&machine, &db), 0);
	spec = named(db, "UOPS_ISSUED:ANY", USR_OS, 0, 0);
	assert_int_equal(spec.type, 4);
	assert_int_equal(spec.config, 0x10e);
	assert_int_equal(spec.config1, 0);
	assert_int_equal(spec.cpu, 1);
	assert_int_equal(spec.flags, HAECER_PERF_CPU_WIDE); /* both levels: nothing excluded */
	spec = named(db, "UOPS_ISSUED:ANY", USR_OS | EVENT_FLAG_INV, 1, 0);
	assert_int_equal(spec.config, 0x180010e);
	spec = named(db, "CYCLE_ACTIVITY:STALLS_L1D_MISS", EVENT_FLAG_USR, 0, 0);
	assert_int_equal(spec.config, 0xc000ca3);
	assert_int_equal(spec.flags, HAECER_PERF_CPU_WIDE | HAECER_PERF_EXCLUDE_KERNEL);
	/* The kernel level only, with edge: perf's cpu/event=0xe,umask=0x1,edge/k. */
	assert_int_equal(haecer__perf_core_spec(0x010e | PERFEVTSEL_OS | PERFEVTSEL_EDGE, 0, 1,
						&spec), 0);
	assert_int_equal(spec.config, 0x4010e);
	assert_int_equal(spec.flags, HAECER_PERF_CPU_WIDE | HAECER_PERF_EXCLUDE_USER);
	assert_int_equal(event_db_encode_arch(db, ARCH_EVENT_LLC_MISSES, USR_OS, 0, &evtsel, why,
					      sizeof(why)), 0);
	assert_int_equal(haecer__perf_core_spec(evtsel, 0, 0, &spec), 0);
	assert_int_equal(spec.type, 4);
	assert_int_equal(spec.config, 0x412e);
	/* AnyThread (perfmon v4 has it): config bit 21, as perf's "any" term. */
	assert_int_equal(haecer__perf_core_spec(evtsel | PERFEVTSEL_ANY, 0, 0, &spec), 0);
	assert_int_equal(spec.config, 0x20412e);
	event_db_close(db);
}

static void test_amd(void **state)
{
	struct event_machine machine = machine_zen4();
	struct haecer_perf_spec spec;
	struct event_db *db = NULL;
	char why[EVENT_DB_WHY_SIZE] = "";
	uint64_t evtsel = 0;

	(void)state;
	use_tree("amd");
	assert_int_equal(event_db_open(&machine, &db), 0);
	spec = named(db, "RETIRED_FUSED_INSTRUCTIONS", USR_OS, 0, 0);
	assert_int_equal(spec.type, 4);
	assert_int_equal(spec.config, 0x1000000d0ull);
	spec = named(db, "IC_TAG_HIT_MISS:IC_MISS", USR_OS, 0, 0);
	assert_int_equal(spec.config, 0x10000188eull);
	/* The architectural instructions: AMD's PMCx0C0, retired instructions. */
	assert_int_equal(event_db_encode_arch(db, ARCH_EVENT_INSTRUCTIONS, USR_OS, 0, &evtsel, why,
					      sizeof(why)), 0);
	assert_int_equal(haecer__perf_core_spec(evtsel, 0, 0, &spec), 0);
	assert_int_equal(spec.config, 0xc0);
	/* AMD's core PMU has no `any`: refused with the reason, nothing opened. */
	assert_int_equal(haecer__perf_core_spec(evtsel | PERFEVTSEL_ANY, 0, 0, &spec), -ENOENT);
	assert_non_null(strstr(haecer_error_detail(), "cpu/event=0xc0,umask=0,any/"));
	/* Zen 4's event 0x1D0 does not fit an Intel-style 8-bit event field. */
	use_tree("intel");
	assert_int_equal(haecer__perf_core_spec(0x1000300d0ull, 0, 0, &spec), -ERANGE);
	assert_non_null(strstr(haecer_error_detail(), "sysfs format cannot hold"));
	event_db_close(db);
}

static void test_hybrid_and_generic(void **state)
{
	struct haecer_perf_spec spec;

	(void)state;
	use_tree("hybrid");
	/* An E-core's event: cpu_atom's type; a P-core's: cpu_core's. */
	assert_int_equal(haecer__perf_core_spec(0x3003c, HAECER_CORE_TYPE_ATOM, 3, &spec), 0);
	assert_int_equal(spec.type, 10);
	assert_int_equal(spec.config, 0x3c);
	assert_int_equal(haecer__perf_core_spec(0x3003c, HAECER_CORE_TYPE_CORE, 0, &spec), 0);
	assert_int_equal(spec.type, 4);
	assert_int_equal(haecer__perf_generic_spec(ARCH_EVENT_CORE_CYCLES, HAECER_FLAG_USR,
						   HAECER_CORE_TYPE_ATOM, 3, &spec), 0);
	assert_int_equal(spec.type, PERF_TYPE_HARDWARE);
	assert_int_equal(spec.config, (10ull << 32) | PERF_COUNT_HW_CPU_CYCLES);
	assert_int_equal(spec.flags, HAECER_PERF_CPU_WIDE | HAECER_PERF_EXCLUDE_KERNEL);
	assert_int_equal(spec.cpu, 3);
	/* Not hybrid: the generic event as perf gives "instructions". */
	use_tree("intel");
	assert_int_equal(haecer__perf_fixed_spec(0, HAECER_FLAG_USR | HAECER_FLAG_OS, 0, 0, &spec),
			 0);
	assert_int_equal(spec.type, PERF_TYPE_HARDWARE);
	assert_int_equal(spec.config, PERF_COUNT_HW_INSTRUCTIONS);
	assert_int_equal(spec.flags, HAECER_PERF_CPU_WIDE);
	assert_int_equal(haecer__perf_fixed_spec(3, HAECER_FLAG_USR, 0, 0, &spec), -EOPNOTSUPP);
}

static void test_no_core_pmu(void **state)
{
	struct haecer_perf_spec spec;

	(void)state;
	use_tree("none");
	/* The kernel's x86 raw layout; the enable, interrupt and level bits are the kernel's. */
	assert_int_equal(haecer__perf_core_spec(0x10053010eull | PERFEVTSEL_INT, 0, 0, &spec), 0);
	assert_int_equal(spec.type, PERF_TYPE_RAW);
	assert_int_equal(spec.config, 0x10000010eull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_intel),
		cmocka_unit_test(test_amd),
		cmocka_unit_test(test_hybrid_and_generic),
		cmocka_unit_test(test_no_core_pmu),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
