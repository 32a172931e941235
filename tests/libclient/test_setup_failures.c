/*
 * Every setup that cannot succeed fails cleanly, with the reason, and the failed counter never
 * causes a side effect (simulated Sandy Bridge):
 *  - events and domains the model lacks: -EOPNOTSUPP / -ENOENT with the event database's
 *    sentence; bad flags and masks: -EINVAL; a flag the policy's write mask refuses: -EACCES;
 *  - a policy that grants no PMU (uid 4101) or no energy (uid 4102), or nothing (uid 4103):
 *    -EPERM with msrd's text; a ring major the policy does not grant: -EPERM;
 *  - no msrd at all: the connection error, for every setup, and getEnergyUnit() -1.0,
 *    endEnergyRead NaN;
 *  - after all of it: the failed PerfCounters read -1 (alone and in simultaneousReadCounter),
 *    enable/disable/reset/free/setupFerretMonitor do nothing, the thread was never pinned, and
 *    every counter of the CPU is still free for this process to take.
 */
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/lib/test_check.h"
#include "tests/libclient/libclient_test.h"

#define NOBODY_UID 4103
#define MAX_FAILED 32

static PerfCounter failed[MAX_FAILED];
static size_t failed_count;

static void expect_failure(PerfCounter ctr, int error, const char *reason)
{
	assert_false(ctr.valid);
	if (ctr.error != error)
		libclient_explain("unexpected", ctr.error);
	assert_int_equal(ctr.error, error);
	fprintf(stderr, "%-12s %s\n", haecer_strerror(ctr.error), haecer_error_detail());
	assert_non_null(strstr(haecer_error_detail(), reason));
	assert_true(failed_count < MAX_FAILED);
	failed[failed_count++] = ctr;
}

static void test_unavailable_events(void **state)
{
	(void)state;
	expect_failure(setupFFCounter((FF_counter)3, 0), -EOPNOTSUPP, "fixed counter 3");
	expect_failure(setupEnergyCounter(RAPL_DRAM), -EOPNOTSUPP, "RAPL_DRAM is not available");
	expect_failure(setupEnergyCounter(RAPL_PSYS), -EOPNOTSUPP, "RAPL_PSYS");
	expect_failure(setupEnergyCounter(RAPL_AMD_PKG), -EOPNOTSUPP, "AMD");
	expect_failure(setupNonArchCounter(0xFF, 0xFF, 0, 0), -ENOENT, "0xff");
	expect_failure(setupNamedCounter("NO_SUCH_EVENT", 0, 0), -ENOENT, "NO_SUCH_EVENT");
	expect_failure(setupNamedCounter("amd64_fam19h_zen3::RETIRED_INSTRUCTIONS", 0, 0),
		       -EOPNOTSUPP, "");
	expect_failure(setupArchCounter((ARCH_counter)7, 0, 0), -EINVAL, "does not exist");
}

static void test_bad_flags(void **state)
{
	(void)state;
	expect_failure(setupArchCounter(LL_CACHE_MISSES, HAECER_FLAG_INV, 0), -EINVAL,
		       "needs a non-zero counter mask");
	expect_failure(setupFFCounter(INST_RETIRED_ANY, HAECER_FLAG_EDGE), -EINVAL, "EDGE");
	expect_failure(setupArchCounter(LL_CACHE_MISSES, 0x200, 0), -EINVAL, "unknown flag");
	/* AnyThread exists on this CPU, but the policy's write masks exclude it. */
	expect_failure(setupArchCounter(UNHALTED_CORE_CYCLES, HAECER_FLAG_ANY, 0), -EACCES,
		       "mask");
}

struct denial {
	uid_t uid;
	bool pmu, energy;
};

/* In a process of another uid (its own default context after fork). */
static int setups_under_policy(void *argument)
{
	const struct denial *denial = argument;
	PerfCounter events[2], pkg;

	/* One with a fixed counter (then a programmable one) to try, one programmable only. */
	events[0] = setupArchCounter(INSTRUCTIONS_RETIRED, 0, 0);
	libclient_explain("INSTRUCTIONS_RETIRED", events[0].error);
	events[1] = setupArchCounter(LL_CACHE_MISSES, 0, 0);
	libclient_explain("LL_CACHE_MISSES", events[1].error);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(events[i].valid, denial->pmu);
		if (!denial->pmu) {
			CHECK_EQ(events[i].error, -EPERM);
			CHECK_EQ(readCounter(&events[i]), -1);
		}
	}
	if (!denial->pmu)
		CHECK(strstr(haecer_error_detail(), "policy") != NULL);
	pkg = setupEnergyCounter(RAPL_PKG);
	libclient_explain("RAPL_PKG", pkg.error);
	CHECK_EQ(pkg.valid, denial->energy);
	if (!denial->energy) {
		CHECK_EQ(pkg.error, -EPERM);
		CHECK(strstr(haecer_error_detail(), "0x611") != NULL);
		CHECK(getEnergyUnit() > 0.0); /* the unit is msrd's machine description */
	}
	if (denial->energy) {
		/* Ring majors 1-99 only. */
		CHECK_EQ(setupFerretMonitor(&pkg, 500, 1), -EPERM);
		CHECK_EQ(setupFerretMonitor(&pkg, 50, 1), 0);
	}
	haecer_shutdown();
	return 0;
}

static void test_denied_by_policy(void **state)
{
	struct denial energy_only = {ENERGY_ONLY_UID, false, true};
	struct denial pmu_only = {PMU_ONLY_UID, true, false};
	struct denial nobody = {NOBODY_UID, false, false};

	(void)state;
	assert_int_equal(run_as(ENERGY_ONLY_UID, ENERGY_ONLY_UID, NULL, 0, setups_under_policy,
				&energy_only), 0);
	assert_int_equal(run_as(PMU_ONLY_UID, PMU_ONLY_UID, NULL, 0, setups_under_policy,
				&pmu_only), 0);
	assert_int_equal(run_as(NOBODY_UID, NOBODY_UID, NULL, 0, setups_under_policy, &nobody),
			 0);
}

static void test_no_msrd(void **state)
{
	char *socket = strdup(getenv(HAECER_SOCKET_ENV));

	(void)state;
	haecer_shutdown();
	setenv(HAECER_SOCKET_ENV, "/nonexistent/msrd.sock", 1);
	expect_failure(setupArchCounter(INSTRUCTIONS_RETIRED, 0, 0), -ENOTCONN,
		       "cannot connect to msrd at /nonexistent/msrd.sock");
	expect_failure(setupEnergyCounter(RAPL_PKG), -ENOTCONN, "cannot connect");
	/* Not the text of a missing event, and the way out is named. */
	assert_null(strstr(haecer_strerror(-ENOTCONN), "event"));
	assert_non_null(strstr(haecer_error_detail(), "HAECER_SOCKET"));
	assert_true(getEnergyUnit() == -1.0);
	startEnergyRead(RAPL_PKG);
	assert_true(isnan(endEnergyRead(RAPL_PKG)));
	setenv(HAECER_SOCKET_ENV, socket, 1);
	free(socket);
}

/* A socket file nobody listens on (what a killed msrd leaves): the error names the cause. */
static void test_msrd_gone(void **state)
{
	struct sockaddr_un address = { .sun_family = AF_UNIX };
	char directory[] = "/tmp/haecer-gone-XXXXXX";
	struct haecer_conn *conn = NULL;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	(void)state;
	assert_non_null(mkdtemp(directory));
	snprintf(address.sun_path, sizeof(address.sun_path), "%s/msrd.sock", directory);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&address, sizeof(address)), 0);
	assert_int_equal(haecer_connect(address.sun_path, &conn), -ECONNREFUSED);
	assert_null(conn);
	assert_string_equal(haecer_msrd_strerror(-ECONNREFUSED),
			    "msrd is not running (nothing listens on its socket)");
	close(fd);
	unlink(address.sun_path);
	rmdir(directory);
}

/* Run last: nothing the failures did is visible. */
static void test_no_side_effects(void **state)
{
	unsigned long long values[MAX_FAILED];
	PerfCounter taken[8];
	cpu_set_t set;

	(void)state;
	for (size_t i = 0; i < failed_count; i++) {
		assert_true(readCounter(&failed[i]) == ULLONG_MAX);
		enableCounter(&failed[i]);
		disableCounter(&failed[i]);
		resetCounter(&failed[i]);
		assert_int_equal(setupFerretMonitor(&failed[i], 1, 1), -EBADF);
		freeCounter(&failed[i]);
	}
	simultaneousReadCounter(failed, values, (int)failed_count);
	for (size_t i = 0; i < failed_count; i++)
		assert_true(values[i] == ULLONG_MAX);
	readCounter(NULL);
	simultaneousReadCounter(NULL, values, 3);
	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	assert_int_equal(CPU_COUNT(&set), sysconf(_SC_NPROCESSORS_ONLN));
	/* Every counter of the CPU is still there for the taking: 3 fixed, 4 programmable. */
	for (int i = 0; i < 3; i++)
		taken[i] = setupFFCounter((FF_counter)i, 0);
	for (int i = 3; i < 7; i++)
		taken[i] = setupArchCounter(LL_CACHE_MISSES, 0, 0);
	for (int i = 0; i < 7; i++) {
		libclient_explain("taking", taken[i].error);
		assert_true(taken[i].valid);
		freeCounter(&taken[i]);
	}
}

int main(void)
{
	const char *arguments[] = {"--sim-virtual-time", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unavailable_events),
		cmocka_unit_test(test_bad_flags),
		cmocka_unit_test(test_denied_by_policy),
		cmocka_unit_test(test_no_msrd),
		cmocka_unit_test(test_msrd_gone),
		cmocka_unit_test(test_no_side_effects),
	};

	return LIBCLIENT_RUN_GROUP("sandybridge", NULL, arguments, tests);
}
