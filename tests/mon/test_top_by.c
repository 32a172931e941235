/*
 * haecer-mon top --by process on the simulated Sandy Bridge with two real processes, one busy
 * and one mostly asleep: the CSV has one row per process (pid, uid, comm, cgroup, watts and
 * their ±) plus [idle] and [other]; the busy one's watts are well above the sleepy one's and a
 * real part of the package's; --by with anything but process, cgroup or service is bad usage.
 * Who sees whose processes (issue 25): run as uid 65534, `top --by process` shows only uid
 * 65534's processes by name and root's busy one inside an "[others]" row, and serve run as
 * 65534 exports per-process series of uid 65534's processes only.
 */
#include "tests/mon/serve_test.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "tests/lib/msrd_group.h"

#define TOP_POLICY                                                                        \
	MON_TEST_RAPL_MSRS                                                                \
	"  - {match: {uid: 0}, allow: [rapl], create_rings: [1-99], monitor_rings: [1-99]}\n" \
	"  - {match: {uid: 65534}, allow: [rapl], create_rings: [99], monitor_rings: [99]}\n"

#define STRANGER 65534

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

/* A busy process of uid STRANGER. */
static pid_t start_stranger_spinner(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (setgid(STRANGER) != 0 || setuid(STRANGER) != 0)
			_exit(1);
		for (volatile unsigned long spin = 0;; spin++)
			;
	}
	return pid;
}

/* haecer-mon as uid STRANGER (setpriv), with the words after its socket. */
static void stranger_argv(const char **argv, size_t size, const char *const *words)
{
	static const char *const setpriv[] = { "/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
					       "--clear-groups" };
	size_t n = 0;

	for (size_t i = 0; i < 4; i++)
		argv[n++] = setpriv[i];
	argv[n++] = mon_test_path("haecer-mon");
	argv[n++] = "--socket";
	argv[n++] = server.socket_path;
	for (size_t i = 0; words[i] != NULL && n + 1 < size; i++)
		argv[n++] = words[i];
	argv[n] = NULL;
}

static void top_as_stranger(pid_t root_pid, pid_t stranger_pid)
{
	const char *words[] = { "top", "--by", "process", "--interval", "400", "--count", "3",
				"--format", "csv", NULL };
	const char *argv[32];
	char *out = NULL, *err = NULL, *save = NULL, *line;
	unsigned own_rows = 0, others_rows = 0;
	double others_watts = 0;

	stranger_argv(argv, 32, words);
	if (harness_run(argv, &out, &err) != 0)
		fail_msg("top as uid %d failed: %s", STRANGER, err != NULL ? err : "");
	strtok_r(out, "\n", &save);
	while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
		double seconds, watts, error;
		char pid[16], uid[16], comm[64];
		assert_int_equal(sscanf(line, "%lf,%15[^,],%15[^,],%63[^,],%*[^,],%lf,%lf", &seconds,
					pid, uid, comm, &watts, &error), 6);
		assert_true(strcmp(uid, "65534") == 0 || strcmp(uid, "-") == 0);
		assert_true(atoi(pid) != root_pid);
		own_rows += atoi(pid) == stranger_pid;
		if (strcmp(comm, "[others]") == 0) {
			others_rows++;
			others_watts += watts;
		}
	}
	assert_int_equal(own_rows, 3);
	assert_int_equal(others_rows, 3);
	assert_true(others_watts > 0); /* root's busy process is in it */
	free(out);
	free(err);
}

static void serve_as_stranger(pid_t stranger_pid)
{
	const char *words[] = { "serve", "--listen", "127.0.0.1:0", "--interval", "200",
				"--top", "1000", NULL };
	const char *argv[32];
	char line[128], own[64];
	struct proc serve;
	unsigned port = 0;
	bool found = false;

	stranger_argv(argv, 32, words);
	proc_start(&serve, argv);
	serve_test_running = serve.pid;
	assert_true(read_line(serve.out, line, sizeof(line), MON_TEST_TIMEOUT_MS));
	assert_int_equal(sscanf(line, "listening on 127.0.0.1:%u", &port), 1);
	snprintf(own, sizeof(own), "haecer_process_energy_joules_total{pid=\"%d\"", stranger_pid);
	for (int round = 0; round < 600 && !found; round++) {
		struct http_reply reply;
		http_get(port, "/metrics", NULL, &reply);
		assert_int_equal(reply.code, 200);
		found = strstr(reply.body, own) != NULL;
		for (const char *series = strstr(reply.body, "\nhaecer_process_energy_joules_total{");
		     series != NULL;
		     series = strstr(series + 1, "\nhaecer_process_energy_joules_total{"))
			assert_true(strncmp(strstr(series, "uid=\""), "uid=\"65534\"", 11) == 0);
		free(reply.text);
		usleep(100000);
	}
	assert_true(found);
	serve_stop(&serve, NULL);
}

static void test_stranger_sees_own(void **state)
{
	pid_t root_busy = start_child(50000000, 0), stranger_busy = start_stranger_spinner();

	(void)state;
	top_as_stranger(root_busy, stranger_busy);
	serve_as_stranger(stranger_busy);
	kill(root_busy, SIGKILL);
	kill(stranger_busy, SIGKILL);
	waitpid(root_busy, NULL, 0);
	waitpid(stranger_busy, NULL, 0);
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
		cmocka_unit_test_teardown(test_stranger_sees_own, serve_teardown),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	return MSRD_RUN_GROUP(&server, TOP_POLICY, arguments, NULL, tests);
}
