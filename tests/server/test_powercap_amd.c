/*
 * The powercap backend on an AMD machine: a stand-in Zen 2 (AuthenticAMD, family 17h model 31h)
 * of two packages, CPUs 0-1 on package 0 and 2-3 on package 1. The kernel's RAPL driver
 * registers AMD's zones under its one control type, intel-rapl (drivers/powercap/
 * intel_rapl_msr.c: package-N from MSR 0xC001029B, a core subzone from 0xC001029A read on the
 * package's lead CPU); the amd-rapl spelling some tools look for is accepted too. So the tree has
 * intel-rapl:0 "package-0" with its "core" subzone, and amd-rapl:1 "package-1" wrapping at 2 J.
 *   - each package zone is AMD's package domain of its own CPUs, read by AMD's address
 *     (0xC001029B) and by Intel's (0x611, a policy written for Intel still names the package),
 *     in exact joules after the test advances the files, through a wrap at 2 J;
 *   - the core zone (one core's energy, read on one CPU) is ignored with a log line, and AMD's
 *     per-core energy register reads as a register the machine does not have (EIO): powercap
 *     has no per-core zones.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/standin_tree.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"

#define UNITS_PER_JOULE 65536ull /* the powercap backend's 2^-16 J */
#define JOULE_UJ 1000000ull
#define PACKAGE1_RANGE_UJ (2 * JOULE_UJ)
#define CPUS 4u

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: AMD_RAPL_POWER_UNIT, address: 0xC0010299, read: true, set: rapl}\n"
	"  - {name: AMD_CORE_ENERGY_STATUS, address: 0xC001029A, read: true, set: rapl}\n"
	"  - {name: AMD_PKG_ENERGY_STATUS, address: 0xC001029B, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [rapl]\n";

static struct msrd_server server;
static struct haecer_conn *conn;
static char tree[PATH_MAX + 16];
static const char *const arguments[] = { "--backend", "powercap", "--sysfs-root", tree, NULL };

static uint64_t total_of(unsigned cpu)
{
	uint64_t total = 0;

	assert_int_equal(haecer_energy_read(conn, cpu, MSR_AMD_PKG_ENERGY_STATUS, NULL, &total), 0);
	return total;
}

static uint64_t register_of(unsigned cpu, uint32_t address)
{
	uint64_t value = 0;

	assert_int_equal(haecer_msr_read(conn, cpu, address, &value), 0);
	return value;
}

static void test_packages_by_either_address(void **state)
{
	uint64_t package0 = total_of(1), package1 = total_of(3);

	(void)state;
	tree_set_powercap_energy(tree, "intel-rapl:0", 40 * JOULE_UJ + 3 * JOULE_UJ);
	tree_set_powercap_energy(tree, "amd-rapl:1", JOULE_UJ / 2 + JOULE_UJ);
	assert_int_equal(total_of(0) - package0, 3 * UNITS_PER_JOULE);
	assert_int_equal(total_of(2) - package1, UNITS_PER_JOULE);
	/* Intel's package address names the same zone on each package's CPUs. */
	for (unsigned cpu = 0; cpu < CPUS; cpu++)
		assert_int_equal(register_of(cpu, MSR_PKG_ENERGY_STATUS),
				 register_of(cpu, MSR_AMD_PKG_ENERGY_STATUS));
	assert_int_equal((register_of(0, MSR_AMD_RAPL_POWER_UNIT) >> 8) & 0x1F, 16);
	assert_true(msrd_log_contains(&server, "powercap: zone amd-rapl:1 (\"package-1\") is domain "
					       "6 of package 1, wraps at 2000000 uJ"));
}

static void test_wrap_at_range(void **state)
{
	uint64_t before = total_of(3), after;

	(void)state;
	/* From 1.5 J: 0.5 J to the range, then 0.25 J past the wrap. */
	tree_set_powercap_energy(tree, "amd-rapl:1", JOULE_UJ / 4);
	after = total_of(2);
	assert_int_equal(after - before, 3 * UNITS_PER_JOULE / 4);
	tree_set_powercap_energy(tree, "amd-rapl:1", PACKAGE1_RANGE_UJ - JOULE_UJ / 4);
	assert_int_equal(total_of(3) - after, 3 * UNITS_PER_JOULE / 2);
}

static void test_no_core_zone(void **state)
{
	uint64_t value = 0;

	(void)state;
	assert_true(msrd_log_contains(&server, "powercap: zone intel-rapl:0:0 (\"core\") has no "
					       "haecer domain on AMD; ignored"));
	assert_int_equal(haecer_msr_read(conn, 0, MSR_AMD_CORE_ENERGY_STATUS, &value), -EIO);
}

static int prepare(const struct msrd_server *prepared)
{
	snprintf(tree, sizeof(tree), "%s/root", prepared->dir);
	tree_mkdir(prepared->dir, "root");
	tree_put_cpuid(tree, 0, 0, 0x10, 0x68747541, 0x444D4163, 0x69746E65); /* AuthenticAMD */
	tree_put_cpuid(tree, 0, 1, 0x00830F10, 0, 0, 0);                     /* 17h model 31h */
	for (unsigned cpu = 0; cpu < CPUS; cpu++) {
		char relative[96];

		snprintf(relative, sizeof(relative),
			 "sys/devices/system/cpu/cpu%u/topology/physical_package_id", cpu);
		tree_write_text(tree, relative, "%u\n", cpu / 2);
	}
	tree_put_powercap_zone(tree, "intel-rapl:0", "package-0", 40 * JOULE_UJ,
			       262143328850ull);
	tree_put_powercap_zone(tree, "intel-rapl:0:0", "core", 10 * JOULE_UJ, 262143328850ull);
	tree_put_powercap_zone(tree, "amd-rapl:1", "package-1", JOULE_UJ / 2, PACKAGE1_RANGE_UJ);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_packages_by_either_address),
		cmocka_unit_test(test_wrap_at_range),
		cmocka_unit_test(test_no_core_zone),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, prepare, arguments, &conn, tests);
}
