/*
 * Choosing a backend (issue 24, item 3) on stand-in trees: `--backend auto` without an MSR
 * device takes powercap for energy, or, without zones but with perf_event, the perf backend
 * (no registers), says which and why in its log, and runs its perf broker (it keeps
 * CAP_PERFMON) since no register backend programs the counters; without either it still fails
 * (a production msrd never invents values). `msrd --probe` says per event class which backend
 * serves it and what is missing, and `haecer-stat list` names the backend. The perf broker
 * checks an encoding against the PMU's sysfs format files (stand-in power PMU) first. On a
 * stand-in Tiger Lake with the kernel's Intel core-PMU format files, the counter API's events
 * (perf's cycles, an architectural event, a libpfm4 name with inv and cmask) reach the real
 * kernel through the broker as the exact attr perf would give (the kernel's refusal names it).
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
#include "harness/msrd_harness.h"
#include "harness/standin_tree.h"

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - match: {any: true}\n"
	"    allow: [rapl]\n"
	"    perf: {events: [software, power]}\n";

static const char policy_cpu_wide[] =
	"version: 1\n"
	"default: deny\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    perf: {events: [software, power, core], scope: cpu}\n";

/* An Intel CPU (stand-in CPUID), one package; with `zones` a package-0 powercap zone; with
 * `perf` the kernel's perf_event, an msr PMU (tsc, aperf) and a power PMU (energy-pkg). */
static void make_tree(const char *root, bool zones, bool perf)
{
	tree_put_cpuid(root, 0, 0, 0xD, 0x756E6547u, 0x6C65746Eu, 0x49656E69u);
	tree_put_cpuid(root, 0, 1, 0x806C1u, 0, 0, 0);
	tree_write_text(root, "sys/devices/system/cpu/cpu0/topology/physical_package_id", "0\n");
	tree_mkdir(root, "dev/cpu/0");
	if (zones) {
		tree_write_text(root, "sys/class/powercap/intel-rapl:0/name", "package-0\n");
		tree_write_text(root, "sys/class/powercap/intel-rapl:0/max_energy_range_uj",
				"262143328850\n");
		tree_write_text(root, "sys/class/powercap/intel-rapl:0/energy_uj", "5000000\n");
	}
	if (perf) {
		tree_write_text(root, "proc/sys/kernel/perf_event_paranoid", "3\n");
		tree_write_text(root, "sys/bus/event_source/devices/msr/type", "9\n");
		tree_write_text(root, "sys/bus/event_source/devices/msr/events/tsc", "event=0x00\n");
		tree_write_text(root, "sys/bus/event_source/devices/msr/events/aperf",
				"event=0x01\n");
		tree_write_text(root, "sys/bus/event_source/devices/power/type", "23\n");
		tree_write_text(root, "sys/bus/event_source/devices/power/events/energy-pkg",
				"event=0x02\n");
		tree_write_text(root, "sys/bus/event_source/devices/power/events/energy-pkg.unit",
				"Joules\n");
		tree_write_text(root, "sys/bus/event_source/devices/power/format/event",
				"config:0-7\n");
	}
}

static char *new_root(void)
{
	char *root = strdup("/tmp/haecer-choice-XXXXXX");

	assert_non_null(root);
	assert_non_null(mkdtemp(root));
	return root;
}

/* msrd --backend auto on the tree: its log must hold every needle. */
static void auto_chooses(bool zones, bool perf, const char *const *needles, size_t count)
{
	char *root = new_root();
	const char *arguments[] = { "--backend", "auto", "--dev-root", root, NULL };
	struct msrd_server server;

	make_tree(root, zones, perf);
	assert_int_equal(msrd_start(&server, policy, arguments), 0);
	for (size_t i = 0; i < count; i++) {
		if (!msrd_log_contains(&server, needles[i])) {
			msrd_print_log(&server);
			fail_msg("msrd's log lacks \"%s\"", needles[i]);
		}
	}
	if (perf) { /* the broker serves the counters: no slots (libhaecer then uses it) */
		struct haecer_conn *conn;

		assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
		assert_true(haecer_server_info(conn)->features & HAECER_FEATURE_PERF);
		assert_false(haecer_server_info(conn)->features & HAECER_FEATURE_SLOTS);
		haecer_close(conn);
	}
	if (zones) {
		char msrd_socket[PATH_MAX + 32], *out = NULL;
		char list_path[PATH_MAX];

		snprintf(msrd_socket, sizeof(msrd_socket), "%s", server.socket_path);
		snprintf(list_path, sizeof(list_path), "%s/haecer-stat", harness_build_dir());
		assert_int_equal(harness_run((const char *[]){ list_path, "-s", msrd_socket, "list",
							       NULL }, &out, NULL), 0);
		assert_non_null(strstr(out, "backend: msrd --backend powercap; perf events"));
		assert_non_null(strstr(out, "power/energy-pkg/"));
		/* Each entry names what serves it: energy the zones, events the broker. */
		assert_non_null(strstr(out, "package-wide energy (J), via powercap]\n"));
		assert_non_null(strstr(out, "CPU_CLK_UNHALTED_*), via perf broker]\n"));
		free(out);
	}
	assert_int_equal(msrd_stop(&server), 0);
	harness_remove_tree(root);
	free(root);
}

static void test_auto_takes_powercap(void **state)
{
	static const char *const needles[] = {
		"msr: ", "msr-safe: ", "using powercap (1 zones) for energy",
		"cap_perfmon", /* the broker runs: nothing programs the counters */
	};

	(void)state;
	auto_chooses(true, true, needles, 4);
}

static void test_auto_takes_perf(void **state)
{
	static const char *const needles[] = {
		"powercap: no usable zone", "using perf: perf events only", "cap_perfmon",
	};

	(void)state;
	auto_chooses(false, true, needles, 3);
}

static void test_auto_without_anything_fails(void **state)
{
	char *root = new_root(), *err = NULL, msrd_path[PATH_MAX], policy_path[PATH_MAX + 16];
	const char *argv[] = { msrd_path, "--backend", "auto", "--dev-root", root, "--foreground",
			       "--socket", "/nonexistent/socket", "--policy", policy_path, NULL };

	(void)state;
	make_tree(root, false, false);
	snprintf(policy_path, sizeof(policy_path), "%s/policy.yaml", root);
	assert_int_equal(harness_write_file(policy_path, policy, 0644), 0);
	snprintf(msrd_path, sizeof(msrd_path), "%s/msrd", harness_build_dir());
	assert_int_not_equal(harness_run(argv, NULL, &err), 0);
	assert_non_null(strstr(err, "perf: no perf_event"));
	free(err);
	harness_remove_tree(root);
	free(root);
}

/* The broker checks an encoding against the PMU's sysfs format files before the kernel sees it
 * (the stand-in power PMU defines config bits 0-7); what passes goes to the real kernel, which
 * has no PMU of the stand-in's type number and says so. */
static void test_encoding_against_format(void **state)
{
	char *root = new_root();
	const char *arguments[] = { "--backend", "perf", "--sysfs-root", root, NULL };
	struct haecer_perf_spec spec = { .type = 23, .config = 0x102, .cpu = 0,
					 .flags = HAECER_PERF_CPU_WIDE };
	struct msrd_server server;
	struct haecer_conn *conn;
	int fd = -1;

	(void)state;
	make_tree(root, false, true);
	assert_int_equal(msrd_start(&server, policy_cpu_wide, arguments), 0);
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_perf_open(conn, &spec, &fd, NULL), -EINVAL);
	assert_non_null(strstr(haecer_conn_error(conn), "has bits PMU power does not define"));
	spec.config = 0x02;
	assert_true(haecer_perf_open(conn, &spec, &fd, NULL) < 0);
	assert_non_null(strstr(haecer_conn_error(conn), "perf_event_open(type 23 config 0x2)"));
	assert_int_equal(fd, -1);
	haecer_close(conn);
	assert_int_equal(msrd_stop(&server), 0);
	harness_remove_tree(root);
	free(root);
}

/* The counter API through the broker on a stand-in Tiger Lake (dev-root CPUID, leaf 0xA of
 * perfmon v5) with the kernel's Intel core-PMU format files: msrd --backend perf offers no
 * slots, so the library encodes each event as perf would and msrd hands it to the real
 * kernel, whose refusal (no PMU of type 4 here) names the exact attr it was given: perf's
 * cycles PERF_TYPE_HARDWARE config 0; the architectural LLC misses (2E/41) type 4 config
 * 0x412e; libpfm4's UOPS_ISSUED:ANY with inv and cmask 1 (perf's uops_issued.stall_cycles)
 * 0x180010e, when the installed libpfm4 has the model's table. */
static void test_core_events_through_broker(void **state)
{
	static const char *const format[][2] = {
		{ "event", "config:0-7" }, { "umask", "config:8-15" }, { "edge", "config:18" },
		{ "inv", "config:23" },    { "cmask", "config:24-31" },
	};
	char *root = new_root(), path[128];
	const char *arguments[] = { "--backend", "perf", "--dev-root", root, NULL };
	struct haecer_counter *counter = NULL;
	struct haecer_context *ctx;
	struct haecer_conn *conn;
	struct msrd_server server;
	int error;

	(void)state;
	make_tree(root, false, true);
	tree_put_cpuid(root, 0, 0xA, 0x08300805u, 0, 0, 0x00008604u);
	tree_write_text(root, "sys/bus/event_source/devices/cpu/type", "4\n");
	for (size_t i = 0; i < sizeof(format) / sizeof(format[0]); i++) {
		snprintf(path, sizeof(path), "sys/bus/event_source/devices/cpu/format/%s",
			 format[i][0]);
		tree_write_text(root, path, "%s\n", format[i][1]);
	}
	setenv(HAECER_SYSFS_ROOT_ENV, root, 1);
	assert_int_equal(msrd_start(&server, policy_cpu_wide, arguments), 0);
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_false(haecer_server_info(conn)->features & HAECER_FEATURE_SLOTS);
	assert_true(haecer_server_info(conn)->features & HAECER_FEATURE_PERF);
	haecer_close(conn);
	assert_true(haecer_counter_open_named(ctx, 0, "cycles", 0, 0, &counter) < 0);
	assert_non_null(strstr(haecer_error_detail(), "perf_event_open(type 0 config 0)"));
	error = haecer_counter_open_arch(ctx, 0, HAECER_ARCH_LL_CACHE_MISSES, 0, 0, &counter);
	assert_true(error < 0);
	assert_non_null(strstr(haecer_error_detail(), "perf_event_open(type 4 config 0x412e)"));
	error = haecer_counter_open_named(ctx, 0, "UOPS_ISSUED:ANY", HAECER_FLAG_INV, 1, &counter);
	fprintf(stderr, "UOPS_ISSUED:ANY:i:c=1: %s\n", haecer_error_detail());
	assert_true(error < 0);
	if (error != -EOPNOTSUPP) /* libpfm4 without the model's table */
		assert_non_null(strstr(haecer_error_detail(), "type 4 config 0x180010e)"));
	haecer_context_close(ctx);
	unsetenv(HAECER_SYSFS_ROOT_ENV);
	assert_int_equal(msrd_stop(&server), 0);
	harness_remove_tree(root);
	free(root);
}

static void test_probe(void **state)
{
	char *root = new_root(), *out = NULL, msrd_path[PATH_MAX];
	const char *argv[] = { msrd_path, "--probe", "--dev-root", root, NULL };

	(void)state;
	make_tree(root, true, true);
	snprintf(msrd_path, sizeof(msrd_path), "%s/msrd", harness_build_dir());
	assert_int_equal(harness_run(argv, &out, NULL), 0);
	assert_non_null(strstr(out, "energy (RAPL): powercap (domain mask 0x1)\n"));
	assert_non_null(strstr(out, "core PMCs: none (no writable MSR device: "));
	assert_non_null(strstr(out, "msr PMU ("));
	assert_non_null(strstr(out, "aperf"));
	assert_non_null(strstr(out, "): perf (broker, class msr)\n"));
	assert_non_null(strstr(out, "power PMU (energy-pkg): perf (broker, class power)\n"));
	assert_non_null(strstr(out, "software events: perf (broker, class software)\n"));
	free(out);
	harness_remove_tree(root);
	free(root);
	root = new_root();
	argv[3] = root;
	make_tree(root, false, false);
	assert_int_equal(harness_run(argv, &out, NULL), 0);
	assert_non_null(strstr(out, "energy (RAPL): none (msr: "));
	assert_non_null(strstr(out, "software events: none (no perf_event in this kernel)\n"));
	free(out);
	harness_remove_tree(root);
	free(root);
}

/* Granite Rapids (06_AD) on the msr backend: PSYS has no MSR-side source, and --probe and the
 * log (backend/probe.c) point to powercap, whose psys zone the tree has (one msrd serves one backend's energy). */
static void test_probe_granite_rapids_psys(void **state)
{
	char *root = new_root(), *out = NULL, msrd_path[PATH_MAX];
	const char *argv[] = { msrd_path, "--probe", "--dev-root", root, NULL };

	(void)state;
	make_tree(root, true, false);
	tree_put_cpuid(root, 0, 1, 0x000A06D1u, 0, 0, 0);
	tree_put_msr(root, 0, "msr", 0x606, STANDIN_SNB_ENERGY_UNIT);
	tree_put_msr(root, 0, "msr", 0x611, 1000);
	tree_put_msr(root, 0, "msr", 0x64D, 5000); /* readable, yet not Granite Rapids' PSYS */
	tree_write_text(root, "sys/class/powercap/intel-rapl:1/name", "psys\n");
	tree_write_text(root, "sys/class/powercap/intel-rapl:1/max_energy_range_uj",
			"262143328850\n");
	tree_write_text(root, "sys/class/powercap/intel-rapl:1/energy_uj", "7000000\n");
	snprintf(msrd_path, sizeof(msrd_path), "%s/msrd", harness_build_dir());
	assert_int_equal(harness_run(argv, &out, NULL), 0);
	assert_non_null(strstr(out, "energy (RAPL): msr ("));
	assert_non_null(strstr(out, "energy-psys: no MSR-side source on this model (it is in "
				    "TPMI); psys: use --backend powercap (the kernel's psys zone "
				    "is there)\n"));
	free(out);
	harness_remove_tree(root);
	free(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_takes_powercap),
		cmocka_unit_test(test_auto_takes_perf),
		cmocka_unit_test(test_auto_without_anything_fails),
		cmocka_unit_test(test_encoding_against_format),
		cmocka_unit_test(test_core_events_through_broker),
		cmocka_unit_test(test_probe),
		cmocka_unit_test(test_probe_granite_rapids_psys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
