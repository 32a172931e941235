/*
 * Multi-die packages: on a stand-in Cascade Lake-AP (Xeon 9200, 06_55 stepping 7, two dies a
 * socket) RAPL is die-scope (the kernel's arch/x86/events/rapl.c reads energy per die on Intel;
 * powercap names the zones package-%d-die-%d), so each die has its own PKG_ENERGY_STATUS. Here
 * one package of four CPUs, CPUs 0-1 on die 0 and CPUs 2-3 on die 1 (topology/die_id), each
 * die's register holding its own count in every CPU file of that die. msrd keeps one total per
 * die and reads each through a CPU of that die: reads through CPUs 0, 2, 1, 3, 0, 2 give each
 * die's own total (1 J and 3 J); msrd used to keep one total per package, read through CPU 0,
 * and folded both dies' registers into it. haecer-stat sums the dies into the package (-e
 * energy-pkg: 3 J when die 0 draws 1 J and die 1 2 J during the command, which rewrites the
 * registers) and shows each die with --per-die.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/tool_argv.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "harness/policy_text.h"
#include "harness/standin_tree.h"

#define JOULE STANDIN_SNB_JOULE /* unit register 0xA0E03: 2^-14 J */
#define CPUS STANDIN_TWO_DIE_CPUS

static const char policy[] = POLICY_RAPL_PKG_FOR_ROOT;

static struct msrd_server server;
static struct haecer_conn *conn;
static char tree[PATH_MAX + 16];
static const char *const arguments[] = { "--backend", "msr", "--dev-root", tree, NULL };

static uint32_t die_of(unsigned cpu)
{
	return standin_two_die_of(cpu);
}

static void test_each_die_its_own_total(void **state)
{
	static const unsigned order[] = { 0, 2, 1, 3, 0, 2 };

	(void)state;
	for (unsigned i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		unsigned cpu = order[i];
		uint64_t raw = 0, total = 0;

		assert_int_equal(haecer_energy_read(conn, cpu, MSR_PKG_ENERGY_STATUS, &raw, &total), 0);
		assert_int_equal(raw, (die_of(cpu) ? 3 : 1) * JOULE);
		assert_int_equal(total, raw); /* one die's total, never folded with the other's */
	}
}

/* A shell command that moves die 0's register by `joules0` and die 1's by `joules1` (the
 * registers' new little-endian values written into every CPU file of the die). */
static void rewrite_command(char *command, size_t size, unsigned joules0, unsigned joules1)
{
	size_t used = 0;

	for (unsigned cpu = 0; cpu < CPUS; cpu++) {
		uint32_t value = (uint32_t)(((die_of(cpu) ? 3 + joules1 : 1 + joules0)) * JOULE);
		used += (size_t)snprintf(command + used, size - used,
					 "printf '\\%03o\\%03o\\%03o\\%03o' | dd of=%s/dev/cpu/%u/msr "
					 "bs=1 seek=%u conv=notrunc status=none; ",
					 value & 0xFF, (value >> 8) & 0xFF, (value >> 16) & 0xFF,
					 value >> 24, tree, cpu, MSR_PKG_ENERGY_STATUS);
	}
}

static void test_stat_sums_dies(void **state)
{
	static char command[4096];
	char *out = NULL, *err = NULL;
	const char *stat_arguments[] = { "-a", "-j", "--per-die", "-e", "energy-pkg", "--", "sh", "-c",
				    command, NULL };
	const char *tool_argv[32];
	char tool[PATH_MAX];

	(void)state;
	rewrite_command(command, sizeof(command), 1, 2);
	snprintf(tool, sizeof(tool), "%s/haecer-stat", harness_build_dir());
	harness_tool_argv(tool_argv, 32, tool, server.socket_path, stat_arguments);
	assert_int_equal(harness_run(tool_argv, &out, &err), 0);
	/* the report goes to stderr, as perf stat's */
	assert_non_null(strstr(err, "\"counters\": 2")); /* one a die */
	assert_non_null(strstr(err, "\"mean\": 3,")); /* both dies, summed into the package */
	assert_non_null(strstr(err, "{\"id\": \"S0-D0\", \"cpus\": 2, \"mean\": 1}"));
	assert_non_null(strstr(err, "{\"id\": \"S0-D1\", \"cpus\": 2, \"mean\": 2}"));
	free(out);
	free(err);
}

static int prepare(const struct msrd_server *prepared)
{
	snprintf(tree, sizeof(tree), "%s/root", prepared->dir);
	tree_put_two_die_package(tree, (uint32_t)JOULE, (uint32_t)(3 * JOULE));
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_die_its_own_total),
		cmocka_unit_test(test_stat_sums_dies),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, prepare, arguments, &conn, tests);
}
