/*
 * The simulator does not follow a reused pid (issue 28, item 6). A client process P connects
 * (msrd follows P's load by its pid), forks a child that keeps the connection, and exits. The
 * test then makes the kernel give P's pid to a new, busy process Q (as root, through
 * /proc/sys/kernel/ns_last_pid; skipped where that cannot be done) and lets the child send
 * requests, which make msrd observe its followed processes:
 *   - msrd sees that P exited (its pidfd, held from P's connection on) and says so, where it used
 *     to read Q's CPU clock and /proc/PID/stat as P's load without a word.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "harness/msrd_harness.h"

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: time}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [time]}\n";

static struct msrd_server server;
static pid_t busy = -1; /* Q, killed in teardown when an assertion ends the test early */

/* P: connect, read once (followed from here), fork the child that keeps the connection, tell
 * the test P's pid, exit. The child waits for `go`, then reads until `go` closes. */
static void run_p(int told, int go)
{
	struct haecer_conn *conn;
	uint64_t tsc;
	pid_t p = getpid();
	char byte;

	if (haecer_connect(server.socket_path, &conn) < 0 ||
	    haecer_msr_read(conn, 0, MSR_IA32_TSC, &tsc) < 0)
		_exit(1);
	if (fork() == 0) {
		if (read(go, &byte, 1) != 1 || fcntl(go, F_SETFL, O_NONBLOCK) < 0)
			_exit(1);
		/* Until the test has seen the log line (it closes `go`), at most ~30 s: on a loaded
		 * host msrd may sample its followed processes seldom. */
		for (int i = 0; i < 15000 && read(go, &byte, 1) != 0; i++) {
			if (haecer_msr_read(conn, 0, MSR_IA32_TSC, &tsc) < 0)
				_exit(1);
			usleep(2000);
		}
		_exit(0);
	}
	if (write(told, &p, sizeof(p)) != sizeof(p))
		_exit(1);
	_exit(0);
}

/* A busy process with pid `want`, or -1 when the kernel gave another. */
static pid_t take_pid(pid_t want)
{
	char text[32];
	int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	pid_t q;

	if (fd < 0)
		return -1;
	snprintf(text, sizeof(text), "%d", (int)want - 1);
	if (write(fd, text, strlen(text)) < 0) {
		close(fd);
		return -1;
	}
	close(fd);
	q = fork();
	if (q == 0)
		for (;;)
			; /* busy: its CPU clock runs */
	if (q == want)
		return busy = q;
	kill(q, SIGKILL);
	waitpid(q, NULL, 0);
	return -1;
}

static void test_reused_pid_is_not_followed(void **state)
{
	int told[2], go[2], status;
	pid_t p, p_pid, q = -1;
	char text[160];

	(void)state;
	assert_int_equal(pipe(told), 0);
	assert_int_equal(pipe(go), 0);
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		close(go[1]); /* so that the child sees `go` close */
		run_p(told[1], go[0]);
	}
	assert_int_equal(read(told[0], &p_pid, sizeof(p_pid)), sizeof(p_pid));
	assert_int_equal(waitpid(p, &status, 0), p);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int attempt = 0; attempt < 20 && q < 0; attempt++)
		q = take_pid(p_pid);
	if (q < 0) {
		close(go[1]); /* the child ends */
		skip();
	}
	assert_int_equal(write(go[1], "g", 1), 1);
	snprintf(text, sizeof(text), "sim: pid %d exited while a connection of it is open",
		 (int)p_pid);
	assert_true(msrd_wait_log(&server, text, 20000));
	kill(q, SIGKILL); /* before `go` closes: Q holds a copy of it */
	waitpid(q, NULL, 0);
	busy = -1;
	close(go[1]);
	close(told[0]);
}

static int setup(void **state)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };

	(void)state;
	return msrd_start(&server, policy, arguments) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	if (busy > 0) {
		kill(busy, SIGKILL);
		waitpid(busy, NULL, 0);
	}
	return msrd_stop(&server) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reused_pid_is_not_followed),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
