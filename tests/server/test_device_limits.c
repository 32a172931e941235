/*
 * What limits the real MSR device, detected at start on stand-in trees (--dev-root) that
 * simulate each limitation, and said in msrd's log with what to do: the msr module not loaded,
 * its device missing, msr.allow_writes=off, kernel lockdown, no CAP_SYS_RAWIO. With --backend
 * auto msrd runs the device with the limitation, or without a usable device falls back to the
 * simulated CPU only with --allow-sim-fallback; with --backend msr, or auto without the opt-in,
 * a device it cannot use is fatal, with the advice on its standard error. A tree without limits
 * logs none. Under lockdown (writes forbidden, reads allowed) with perf_event, auto keeps the
 * msr driver read-only for RAPL, says so, and offers its perf broker for the counters.
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
#include <sys/stat.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"
#include "harness/standin_tree.h"

static const char policy[] = POLICY_TSC_FOR_ROOT;

#define NO_CAP_SYS_RAWIO "Name:\tmsrd\nCapEff:\t0000000000000000\n"
#define CAP_SYS_RAWIO "Name:\tmsrd\nCapEff:\t0000000000020000\n"

/* A file in the tree with its directories, or a directory when text is NULL. */
static void tree_file(const char *root, const char *relative, const char *text)
{
	if (text != NULL)
		tree_write_text(root, relative, "%s", text);
	else
		tree_mkdir(root, relative);
}

/* A tree with a working device unless `device` is false, plus what `files` adds. */
static void build_tree(const char *root, bool device, const char *const *files)
{
	assert_int_equal(mkdir(root, 0755), 0);
	if (device)
		assert_int_equal(harness_standin_msr_tree(root, 2, 1u << 16), 0);
	else
		tree_file(root, "dev/cpu/0", NULL);
	for (size_t i = 0; files != NULL && files[i] != NULL; i += 2)
		tree_file(root, files[i], files[i + 1]);
}

/* Whether the msrd of the next expect_log must offer its perf broker in HELLO. */
static bool expect_broker;

/* Start msrd --backend auto on the tree; every needle must be in its log, `absent` must not. */
static void expect_log(bool device, const char *const *files, const char *const *needles,
		       const char *absent)
{
	struct msrd_server server;
	char root[PATH_MAX + 8];
	const char *arguments[] = { "--backend", "auto", "--dev-root", root,
				    device ? NULL : "--allow-sim-fallback", NULL };

	assert_int_equal(msrd_prepare(&server, policy), 0);
	snprintf(root, sizeof(root), "%s/tree", server.dir);
	build_tree(root, device, files);
	assert_int_equal(msrd_launch(&server, arguments), 0);
	for (size_t i = 0; needles[i] != NULL; i++) {
		if (!msrd_log_contains(&server, needles[i])) {
			fprintf(stderr, "not in the log: %s\n", needles[i]);
			msrd_print_log(&server);
		}
		assert_true(msrd_log_contains(&server, needles[i]));
	}
	if (absent != NULL)
		assert_false(msrd_log_contains(&server, absent));
	if (expect_broker) {
		struct haecer_conn *conn;
		assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
		assert_true(haecer_server_info(conn)->features & HAECER_FEATURE_PERF);
		haecer_close(conn);
	}
	assert_int_equal(msrd_stop(&server), 0);
}

static void test_module_not_loaded(void **state)
{
	static const char *const needles[] = {
		"device limit: the msr module is not loaded",
		"device advice: the msr driver is not loaded: modprobe msr",
		"using the simulated CPU",
		NULL,
	};

	(void)state;
	expect_log(false, NULL, needles, NULL);
}

static void test_device_missing(void **state)
{
	static const char *const files[] = { "sys/module/msr", NULL, NULL };
	static const char *const needles[] = {
		"device limit: dev/cpu/0/msr is missing although the msr module is loaded",
		"bind-mount /dev/cpu",
		NULL,
	};

	(void)state;
	expect_log(false, files, needles, NULL);
}

static void test_writes_disabled(void **state)
{
	static const char *const files[] = {
		"sys/module/msr/parameters/allow_writes", "off\n", NULL,
	};
	static const char *const needles[] = {
		"device limit: msr.allow_writes is off",
		"set msr.allow_writes=on",
		"backend msr",
		NULL,
	};

	(void)state;
	expect_log(true, files, needles, NULL);
}

static void test_lockdown(void **state)
{
	static const char *const files[] = {
		"sys/module/msr", NULL,
		"sys/kernel/security/lockdown", "none [integrity] confidentiality\n",
		"proc/sys/kernel/perf_event_paranoid", "2\n", NULL,
	};
	/* Writes forbidden, reads allowed: RAPL through the msr driver, counters from perf. */
	static const char *const needles[] = {
		"device limit: the kernel is locked down",
		"boot without lockdown",
		"backend msr: using the msr driver read-only (writes fail with EPERM: the kernel is "
		"locked down",
		"energy (RAPL) from the msr driver; core PMCs: perf events through msrd's perf broker",
		NULL,
	};

	(void)state;
	expect_broker = true;
	expect_log(true, files, needles, NULL);
	expect_broker = false;
}

static void test_no_cap_sys_rawio(void **state)
{
	static const char *const files[] = {
		"sys/module/msr", NULL, "proc/self/status", NO_CAP_SYS_RAWIO, NULL,
	};
	static const char *const needles[] = {
		"device limit: msrd lacks CAP_SYS_RAWIO",
		"setcap cap_sys_rawio+ep msrd",
		NULL,
	};

	(void)state;
	expect_log(true, files, needles, NULL);
}

static void test_nothing_limits(void **state)
{
	static const char *const files[] = {
		"sys/module/msr/parameters/allow_writes", "on\n",
		"sys/kernel/security/lockdown", "[none] integrity confidentiality\n",
		"proc/self/status", CAP_SYS_RAWIO, NULL,
	};
	static const char *const needles[] = { "backend msr: using the msr driver", NULL };

	(void)state;
	expect_log(true, files, needles, "device limit");
}

/* msrd --backend KIND on a tree without a device: exit 1, the advice on standard error. */
static char *fails_without_device(const char *kind)
{
	struct msrd_server server;
	char root[PATH_MAX + 8], msrd[PATH_MAX], models[PATH_MAX];
	const char *argv[] = { msrd, "--foreground", "--socket", server.socket_path, "--policy",
			       server.policy_path, "--models-dir", models, "--backend", kind,
			       "--dev-root", root, NULL };
	char *err = NULL;

	assert_int_equal(msrd_prepare(&server, policy), 0);
	snprintf(root, sizeof(root), "%s/tree", server.dir);
	snprintf(msrd, sizeof(msrd), "%s/msrd", harness_build_dir());
	snprintf(models, sizeof(models), "%s/configs/models", harness_source_dir());
	build_tree(root, false, NULL);
	assert_int_equal(harness_run(argv, NULL, &err), 1);
	assert_non_null(err);
	assert_non_null(strstr(err, "device limit: the msr module is not loaded"));
	assert_non_null(strstr(err, "modprobe msr"));
	assert_non_null(strstr(err, "not starting"));
	harness_remove_tree(server.dir);
	return err;
}

static void test_msr_backend_fails_with_the_advice(void **state)
{
	char *err = fails_without_device("msr");

	(void)state;
	assert_non_null(strstr(err, "opening the msr backend"));
	free(err);
}

/* A production msrd (the default --backend auto) without a usable device does not simulate. */
static void test_auto_without_device_does_not_simulate(void **state)
{
	char *err = fails_without_device("auto");

	(void)state;
	assert_non_null(strstr(err, "opening the auto backend"));
	assert_non_null(strstr(err, "msr-safe: "));
	assert_non_null(strstr(err, "--allow-sim-fallback"));
	assert_null(strstr(err, "using the simulated CPU"));
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_module_not_loaded),
		cmocka_unit_test(test_device_missing),
		cmocka_unit_test(test_writes_disabled),
		cmocka_unit_test(test_lockdown),
		cmocka_unit_test(test_no_cap_sys_rawio),
		cmocka_unit_test(test_nothing_limits),
		cmocka_unit_test(test_msr_backend_fails_with_the_advice),
		cmocka_unit_test(test_auto_without_device_does_not_simulate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
