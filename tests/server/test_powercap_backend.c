/*
 * msrd's powercap backend (issue 24, item 1) on a stand-in sysfs tree (--backend powercap
 * --sysfs-root): zones intel-rapl:0 (package-0), intel-rapl:0:0 (core), intel-rapl:0:1 (dram,
 * wrapping at 10 J), intel-rapl:1 (psys) and intel-rapl:0:2 (a name haecer has no domain for),
 * intel-rapl:0:3 (uncore: energy-gpu, wrapping at 5 J), whose energy_uj files the test
 * advances. The zones answer as the energy-status registers
 * would, in units of 2^-16 J, so:
 *   - an unprivileged client (uid 65534) reads energy-pkg through msrd by the MSR address the
 *     policy grants (0x611), both by round trip and through the energy page (haecer_counter);
 *   - a zone that wraps at max_energy_range_uj keeps a 64-bit total that grows by exactly what
 *     was consumed across the wrap;
 *   - a zone file holding garbage, and one that went away, make that read fail with -EIO and
 *     one log line naming the zone; other domains keep reading and msrd does not crash (it must
 *     stop cleanly); the garbage zone reads again once its file is sane again;
 *   - haecer-stat list and haecer-mon follow name powercap as the backend behind the figures.
 */
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

#include "haecer/haecer.h"
#include "haecer/msrd.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"
#include "harness/standin_tree.h"
#include "harness/tool_argv.h"
#include "tests/lib/test_check.h"
#include "tests/mon/mon_test.h"

#define PKG 0x611u
#define PP0 0x639u
#define PP1 0x641u
#define DRAM 0x619u
#define PSYS 0x64Du
#define UNITS_PER_JOULE 65536ull /* 2^-16 J */
#define NOBODY 65534
#define DRAM_RANGE_UJ 10000000ull
#define UNCORE_RANGE_UJ 5000000ull
#define POLL_MS 5000

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"  - {name: PP0_ENERGY_STATUS, address: 0x639, read: true, set: rapl}\n"
	"  - {name: PP1_ENERGY_STATUS, address: 0x641, read: true, set: rapl}\n"
	"  - {name: DRAM_ENERGY_STATUS, address: 0x619, read: true, set: rapl}\n"
	"  - {name: PLATFORM_ENERGY_STATUS, address: 0x64D, read: true, set: rapl}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [rapl]\n"
	"    create_rings: [1]\n"
	"    monitor_rings: [1]\n"
	"  - match: {uid: 65534}\n"
	"    allow: [rapl]\n";

static struct msrd_server server;
static struct haecer_conn *root_conn;
static char tree[PATH_MAX + 16];
static const char *const arguments[] = { "--backend", "powercap", "--sysfs-root", tree, NULL };

static void set_energy(const char *zone, const char *text)
{
	tree_set_powercap_energy_text(tree, zone, text);
}

static void set_energy_uj(const char *zone, uint64_t microjoules)
{
	tree_set_powercap_energy(tree, zone, microjoules);
}

static void put_zone(const char *zone, const char *name, uint64_t energy_uj, uint64_t range_uj)
{
	tree_put_powercap_zone(tree, zone, name, energy_uj, range_uj);
}

static uint64_t total_of(struct haecer_conn *conn, uint32_t address)
{
	uint64_t total = 0;

	assert_int_equal(haecer_energy_read(conn, 0, address, NULL, &total), 0);
	return total;
}

/* ---- an unprivileged client ---- */

static int nobody_reads_pkg(void *argument)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	struct haecer_conn *conn;
	uint64_t before = 0, after = 0, value = 0;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_energy_read(conn, 0, PKG, NULL, &before), 0);
	CHECK_EQ(haecer_context_open(server.socket_path, &ctx), 0);
	CHECK_EQ(haecer_counter_open_energy(ctx, 0, HAECER_ENERGY_PKG, &counter), 0);
	CHECK_EQ(haecer_counter_read(counter, &value), 0);
	CHECK_EQ(value & 0xFFFFFFFFull, before & 0xFFFFFFFFull);
	/* Nothing consumed between the two reads: the same total. */
	CHECK_EQ(haecer_energy_read(conn, 0, PKG, NULL, &after), 0);
	CHECK_EQ(after - before, 0);
	haecer_counter_free(counter);
	haecer_context_close(ctx);
	haecer_close(conn);
	return 0;
}

static int nobody_sees_three_joules(void *argument)
{
	const uint64_t *start = argument;
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	uint64_t total = 0, value = 0;
	struct haecer_conn *conn;

	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_energy_read(conn, 0, PKG, NULL, &total), 0);
	CHECK_EQ(total - *start, 3 * UNITS_PER_JOULE);
	/* Through the energy page: msrd publishes the same total at its sampling rate. */
	CHECK_EQ(haecer_context_open(server.socket_path, &ctx), 0);
	CHECK_EQ(haecer_counter_open_energy(ctx, 0, HAECER_ENERGY_PKG, &counter), 0);
	for (int i = 0; i < POLL_MS && value != total; i++) {
		CHECK_EQ(haecer_counter_read(counter, &value), 0);
		usleep(1000);
	}
	CHECK_EQ(value, total);
	/* A register the zones do not stand for is refused as the CPU would refuse it. */
	CHECK_EQ(haecer_msr_read(conn, 0, 0x10, &value), -EPERM);
	haecer_counter_free(counter);
	haecer_context_close(ctx);
	haecer_close(conn);
	return 0;
}

static void test_unprivileged_client(void **state)
{
	uint64_t start;
	uint64_t unit = 0;

	(void)state;
	assert_int_equal(haecer_msr_read(root_conn, 0, 0x606, &unit), 0);
	assert_int_equal((unit >> 8) & 0x1F, 16);
	assert_int_equal(run_as(NOBODY, NOBODY, NULL, 0, nobody_reads_pkg, NULL), 0);
	start = total_of(root_conn, PKG);
	set_energy_uj("intel-rapl:0", 50000000ull + 3000000ull);
	assert_int_equal(run_as(NOBODY, NOBODY, NULL, 0, nobody_sees_three_joules, &start), 0);
	/* The core subzone is its own domain, energy-cores. */
	start = total_of(root_conn, PP0);
	set_energy_uj("intel-rapl:0:0", 20000000ull + 1500000ull);
	assert_int_equal(total_of(root_conn, PP0) - start, 3 * UNITS_PER_JOULE / 2);
	assert_true(msrd_log_contains(&server, "powercap: zone intel-rapl:0:2 (\"weird\") has no "
					       "haecer domain; ignored"));
}

/* ---- a wrap at max_energy_range_uj ---- */

static void test_wrap(void **state)
{
	uint64_t before, after;

	(void)state;
	set_energy_uj("intel-rapl:0:1", DRAM_RANGE_UJ - 1000000ull);
	before = total_of(root_conn, DRAM);
	/* 1 J up to the range, then 2 J after it wrapped to 0. */
	set_energy_uj("intel-rapl:0:1", 2000000ull);
	after = total_of(root_conn, DRAM);
	assert_int_equal(after - before, 3 * UNITS_PER_JOULE);
	set_energy_uj("intel-rapl:0:1", 2500000ull);
	assert_int_equal(total_of(root_conn, DRAM) - after, UNITS_PER_JOULE / 2);
}

/* ---- uncore: energy-gpu ---- */

/* intel-rapl:0:3, named uncore (a client part's graphics), is energy-gpu: read by PP1's
 * address and through the energy page as HAECER_ENERGY_PP1, exact across its wrap at 5 J. */
static void test_uncore_is_energy_gpu(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	uint64_t before, after, value = 0;

	(void)state;
	before = total_of(root_conn, PP1);
	set_energy_uj("intel-rapl:0:3", 4000000ull + 250000ull);
	after = total_of(root_conn, PP1);
	assert_int_equal(after - before, UNITS_PER_JOULE / 4);
	/* 0.75 J up to the range, then 1.5 J after the wrap to 0. */
	set_energy_uj("intel-rapl:0:3", 1500000ull);
	before = after;
	after = total_of(root_conn, PP1);
	assert_int_equal(after - before, 9 * UNITS_PER_JOULE / 4);
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_counter_open_energy(ctx, 0, HAECER_ENERGY_PP1, &counter), 0);
	for (int i = 0; i < POLL_MS && value != after; i++) {
		assert_int_equal(haecer_counter_read(counter, &value), 0);
		usleep(1000);
	}
	assert_int_equal(value, after);
	haecer_counter_free(counter);
	haecer_context_close(ctx);
	assert_true(msrd_log_contains(&server, "powercap: zone intel-rapl:0:3 (\"uncore\") is "
					       "domain 2 of package 0, wraps at 5000000 uJ"));
}

/* ---- haecer-stat list names the backend behind each entry ---- */

/* No perf_event in the stand-in tree, so no broker: energy through powercap, events nothing. */
static void test_stat_list_names_powercap(void **state)
{
	const char *list[] = { "-s", server.socket_path, "list", NULL };
	char tool[PATH_MAX], *out = NULL, *err = NULL;

	(void)state;
	snprintf(tool, sizeof(tool), "%s/haecer-stat", harness_build_dir());
	assert_int_equal(harness_run_program(tool, list, &out, &err), 0);
	assert_non_null(strstr(out, "backend: msrd --backend powercap\n"));
	assert_non_null(strstr(out, "power/energy-pkg/"));
	assert_non_null(strstr(out, "power/energy-gpu/"));
	assert_non_null(strstr(out, "package-wide energy (J), via powercap]\n"));
	assert_null(strstr(out, "Hardware event"));
	assert_non_null(strstr(out, "CPU_CLK_UNHALTED_*), via nothing (msrd's backend has no "
				    "counters, its perf broker is off)]\n"));
	free(out);
	free(err);
}

/* ---- haecer-mon follow names the backend behind each record ---- */

/* Root's energy-pkg counter on a ring (1, 1), read twice: follow prints both records, each
 * with powercap as its backend. */
static void test_follow_names_powercap(void **state)
{
	const char *follow[] = { "follow", "-f", "json", "--count", "2", "1", "1", NULL };
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	char *out = NULL, *err = NULL, *lines[4];
	uint64_t value;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_counter_open_energy(ctx, 0, HAECER_ENERGY_PKG, &counter), 0);
	assert_int_equal(haecer_counter_monitor(counter, 1, 1, 16), 0);
	assert_int_equal(haecer_counter_read(counter, &value), 0);
	assert_int_equal(haecer_counter_read(counter, &value), 0);
	assert_int_equal(mon_run(server.socket_path, follow, &out, &err), 0);
	assert_int_equal(split_lines(out, lines, 4), 2);
	for (unsigned i = 0; i < 2; i++)
		assert_non_null(strstr(lines[i], "\"backend\":\"powercap\""));
	free(out);
	free(err);
	haecer_counter_free(counter);
	haecer_context_close(ctx);
}

/* ---- garbage, and a zone that went away ---- */

static void test_garbage_and_gone(void **state)
{
	char path[PATH_MAX + 128];
	uint64_t value = 0, before;

	(void)state;
	before = total_of(root_conn, PKG);
	set_energy("intel-rapl:0", "garbage");
	assert_int_equal(haecer_msr_read(root_conn, 0, PKG, &value), -EIO);
	assert_int_equal(haecer_msr_read(root_conn, 0, PKG, &value), -EIO);
	assert_int_equal(msrd_log_count(&server, "powercap: zone intel-rapl:0: energy_uj "
						 "unreadable"), 1);
	/* The other domains are unaffected. */
	assert_int_equal(haecer_msr_read(root_conn, 0, PSYS, &value), 0);
	/* Sane again: reads resume, counting from where the zone is now. */
	set_energy_uj("intel-rapl:0", 50000000ull + 4000000ull);
	assert_int_equal(total_of(root_conn, PKG) - before, UNITS_PER_JOULE);
	assert_true(msrd_wait_log(&server, "powercap: zone intel-rapl:0: energy_uj reads again",
				  POLL_MS));
	/* The core zone goes away (the kernel unregistered it). */
	snprintf(path, sizeof(path), "%s/sys/class/powercap/intel-rapl:0:0/energy_uj", tree);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(haecer_msr_read(root_conn, 0, PP0, &value), -EIO);
	assert_true(msrd_wait_log(&server, "energy_uj unreadable (the zone went away)", POLL_MS));
	assert_int_equal(haecer_msr_read(root_conn, 0, PSYS, &value), 0);
}

/* An Intel Tiger Lake (stand-in CPUID, whatever the host is) with two CPUs of package 0;
 * zones with names from a client part with psys. */
static int prepare(const struct msrd_server *prepared)
{
	snprintf(tree, sizeof(tree), "%s/root", prepared->dir);
	tree_mkdir(prepared->dir, "root");
	tree_put_cpuid(tree, 0, 0, 0xD, 0x756E6547u, 0x6C65746Eu, 0x49656E69u);
	tree_put_cpuid(tree, 0, 1, 0x806C1u, 0, 0, 0);
	for (unsigned cpu = 0; cpu < 2; cpu++) {
		char relative[96];

		snprintf(relative, sizeof(relative),
			 "sys/devices/system/cpu/cpu%u/topology/physical_package_id", cpu);
		tree_write_text(tree, relative, "0\n");
	}
	put_zone("intel-rapl:0", "package-0", 50000000ull, 262143328850ull);
	put_zone("intel-rapl:0:0", "core", 20000000ull, 262143328850ull);
	put_zone("intel-rapl:0:1", "dram", 1000000ull, DRAM_RANGE_UJ);
	put_zone("intel-rapl:0:2", "weird", 1000000ull, 262143328850ull);
	put_zone("intel-rapl:0:3", "uncore", 4000000ull, UNCORE_RANGE_UJ);
	put_zone("intel-rapl:1", "psys", 90000000ull, 262143328850ull);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unprivileged_client),
		cmocka_unit_test(test_wrap),
		cmocka_unit_test(test_uncore_is_energy_gpu),
		cmocka_unit_test(test_stat_list_names_powercap),
		cmocka_unit_test(test_follow_names_powercap),
		cmocka_unit_test(test_garbage_and_gone),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, prepare, arguments, &root_conn, tests);
}
