/*
 * RDPMC detection and fallback (libclient/haecer_rdpmc.c). This machine has no PMU, so the
 * RDPMC instruction itself is never executed here; what is tested:
 *  - the sysfs file (through $HAECER_SYSFS_ROOT, a stand-in tree): 0, 1, 2, a missing file and
 *    garbage are told apart;
 *  - detection on a real (not simulated) CPU: 2 allows it; 1 allows it only with a perf event
 *    page that grants it (none here: perf has no PMU, so not allowed); 0 and a missing file not;
 *  - a simulated CPU never uses RDPMC, whatever sysfs says: a context on msrd's simulator says
 *    why, and its event counters are read through msrd (the fallback) and count.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "libclient/haecer_internal.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"
#include "harness/standin_tree.h"

#define RDPMC_RELATIVE "sys/bus/event_source/devices/cpu/rdpmc"

#define POLICY_FIXED                                                                                \
	POLICY_HEADER POLICY_PMU_MSRS "rules:\n  - {match: {uid: 0}, allow: [pmu]}\n"

static char root[] = "/tmp/haecer-rdpmc-XXXXXX";
static struct msrd_server server;

static void put_rdpmc(const char *text)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", root, RDPMC_RELATIVE);
	unlink(path);
	if (text != NULL)
		tree_write_text(root, RDPMC_RELATIVE, "%s", text);
}

static void test_sysfs_values(void **state)
{
	(void)state;
	put_rdpmc(NULL);
	assert_int_equal(haecer__rdpmc_sysfs(root), -ENOENT);
	put_rdpmc("0\n");
	assert_int_equal(haecer__rdpmc_sysfs(root), 0);
	put_rdpmc("1\n");
	assert_int_equal(haecer__rdpmc_sysfs(root), 1);
	put_rdpmc("2\n");
	assert_int_equal(haecer__rdpmc_sysfs(root), 2);
	put_rdpmc("3\n");
	assert_int_equal(haecer__rdpmc_sysfs(root), -EINVAL);
	put_rdpmc("two\n");
	assert_int_equal(haecer__rdpmc_sysfs(root), -EINVAL);
	put_rdpmc("");
	assert_int_equal(haecer__rdpmc_sysfs(root), -EIO);
}

static bool detect_real_cpu(const char *text, char *why, size_t size)
{
	struct haecer_context ctx;
	bool usable;

	memset(&ctx, 0, sizeof(ctx));
	put_rdpmc(text);
	setenv(HAECER_SYSFS_ROOT_ENV, root, 1);
	haecer__rdpmc_detect(&ctx);
	unsetenv(HAECER_SYSFS_ROOT_ENV);
	usable = ctx.rdpmc.usable;
	snprintf(why, size, "%s", ctx.rdpmc.why);
	haecer__rdpmc_close(&ctx);
	return usable;
}

static void test_detection_on_a_real_cpu(void **state)
{
	char why[160];

	(void)state;
	assert_true(detect_real_cpu("2\n", why, sizeof(why)));
	assert_non_null(strstr(why, "is 2"));
	/* 1: only with a perf event page granting it; perf has no PMU here. */
	assert_false(detect_real_cpu("1\n", why, sizeof(why)));
	assert_non_null(strstr(why, "no perf event page grants RDPMC"));
	assert_false(detect_real_cpu("0\n", why, sizeof(why)));
	assert_non_null(strstr(why, "is 0"));
	assert_false(detect_real_cpu(NULL, why, sizeof(why)));
	assert_non_null(strstr(why, "No such file"));
}

static void test_simulated_cpu_falls_back(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	uint64_t first, second;
	char why[160];

	(void)state;
	put_rdpmc("2\n");
	setenv(HAECER_SYSFS_ROOT_ENV, root, 1);
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	unsetenv(HAECER_SYSFS_ROOT_ENV);
	assert_int_equal(haecer_context_direct_reads(ctx, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "simulated"));
	assert_int_equal(haecer_counter_open_fixed(ctx, 0, 0, 0, &counter), 0);
	assert_int_equal(haecer_counter_read(counter, &first), 0);
	usleep(2000);
	assert_int_equal(haecer_counter_read(counter, &second), 0);
	assert_true(second > first);
	haecer_context_close(ctx);
}

int main(void)
{
	/* The simulated CPUs are kept busy by a script, not by the host's load: a fixed counter
	 * of an idle simulated CPU would not move between the two reads on a quiet host. */
	char load_script[sizeof(root) + 16];
	const char *arguments[] = { "--backend",	 "sim",	      "--sim-model", "sandybridge",
				    "--sim-load-script", load_script, NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sysfs_values),
		cmocka_unit_test(test_detection_on_a_real_cpu),
		cmocka_unit_test(test_simulated_cpu_falls_back),
	};
	int failed;

	if (mkdtemp(root) == NULL)
		return 1;
	snprintf(load_script, sizeof(load_script), "%s/load", root);
	tree_write_text(root, "load", "1000 1.0\n");
	if (msrd_start(&server, POLICY_FIXED, arguments) < 0)
		return 1;
	failed = cmocka_run_group_tests(tests, NULL, NULL);
	if (msrd_stop(&server) < 0)
		failed = 1;
	harness_remove_tree(root);
	return failed ? 1 : 0;
}
