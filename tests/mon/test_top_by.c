/*
 * haecer-mon top --by process on the simulated Sandy Bridge with two real processes, one busy
 * and one mostly asleep: the CSV has one row per process (pid, uid, comm, cgroup, watts and
 * their ±) plus [idle] and [other]; the busy one's watts are well above the sleepy one's and a
 * real part of the package's; --by with anything but process, cgroup or service is bad usage.
 */
#include "tests/mon/mon_test.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "tests/lib/msrd_group.h"

#define TOP_POLICY                                                                        \
	MON_TEST_RAPL_MSRS                                                                \
	"  - {match: {uid: 0}, allow: [rapl], create_rings: [1-99], monitor_rings: [1-99]}\n"

static struct msrd_server server;

static pid_t start_child(uint64_t spin_ns, useconds_t sleep_us)
{
	pid_t pid = harness_start_duty_cycle(spin_ns, sleep_us);

	assert_true(pid > 0);
	return pid;
}

static void test_by_process(void **state)
{
	const char *arguments[] = { "top", "--by", "process", "--interval", "400", "--count", "3",
				    "--format", "csv", NULL };
	char *out = NULL, *err = NULL, *save = NULL;
	pid_t busy = start_child(50000000, 0), sleepy = start_child(1000000, 99000);
	double busy_watts = 0, sleepy_watts = 0, all_watts = 0;
	unsigned busy_rows = 0, idle_rows = 0;

	(void)state;
	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 0);
	kill(busy, SIGKILL);
	kill(sleepy, SIGKILL);
	waitpid(busy, NULL, 0);
	waitpid(sleepy, NULL, 0);
	char *line = strtok_r(out, "\n", &save);
	assert_non_null(line);
	assert_string_equal(line, "seconds,pid,uid,comm,cgroup,watts,watts_error,source");
	while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
		double seconds, watts, error;
		char pid[16], uid[16], comm[64], cgroup[256], source[32];
		if (sscanf(line, "%lf,%15[^,],%15[^,],%63[^,],%255[^,],%lf,%lf,%31s", &seconds, pid,
			   uid, comm, cgroup, &watts, &error, source) != 8)
			fail_msg("unparsable row: %s", line);
		assert_string_equal(source, "simulated");
		assert_true(watts >= 0 && error >= 0);
		all_watts += watts;
		if (strcmp(comm, "[idle]") == 0)
			idle_rows++;
		if (atoi(pid) == busy) {
			busy_watts += watts;
			busy_rows++;
		}
		if (atoi(pid) == sleepy)
			sleepy_watts += watts;
	}
	fprintf(stderr, "busy %.3f W, sleepy %.3f W, every row %.3f W (3 sets)\n", busy_watts / 3,
		sleepy_watts / 3, all_watts / 3);
	assert_int_equal(idle_rows, 3);
	assert_int_equal(busy_rows, 3);
	assert_true(busy_watts > 5 * sleepy_watts);
	assert_true(busy_watts > 0.1 * all_watts);
	free(out);
	free(err);
}

static void test_bad_by(void **state)
{
	const char *arguments[] = { "top", "--by", "user", "--count", "1", NULL };
	char *out = NULL, *err = NULL;

	(void)state;
	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 2);
	assert_non_null(strstr(err, "--by takes process, cgroup or service"));
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_by_process),
		cmocka_unit_test(test_bad_by),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	return MSRD_RUN_GROUP(&server, TOP_POLICY, arguments, NULL, tests);
}
