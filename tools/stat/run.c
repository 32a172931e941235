/*
 * tools/stat/run.c — run the measured command: fork, pin the child only when --cpu asked, exec;
 * an exec failure travels back through a close-on-exec pipe (errno), so "no such command" is
 * told apart from a command that ran and exited 127.
 *
 * While the command runs, SIGINT and SIGQUIT from the terminal go to it as to any foreground
 * job; haecer-stat catches them (a handler, not SIG_IGN, which exec would pass on) and reports
 * what was measured once the command ends.
 */
#include "tools/stat/stat.h"
#include "common/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void ignore_signal(int signal_number)
{
	(void)signal_number;
}

static void catch_terminal_signals(struct sigaction *saved)
{
	struct sigaction action;

	memset(&action, 0, sizeof(action));
	action.sa_handler = ignore_signal;
	sigemptyset(&action.sa_mask);
	sigaction(SIGINT, &action, &saved[0]);
	sigaction(SIGQUIT, &action, &saved[1]);
}

static void restore_terminal_signals(const struct sigaction *saved)
{
	sigaction(SIGINT, &saved[0], NULL);
	sigaction(SIGQUIT, &saved[1], NULL);
}

static double monotonic_seconds(void)
{
	return (double)clock_monotonic_ns() / 1e9;
}

/* What the child reports: errno, plus this bit when pinning failed rather than exec. */
#define PIN_FAILED 0x10000

/* In the child: pin, exec; on failure send errno up the pipe and exit. Only async-signal-safe
 * calls after fork. */
static void __attribute__((noreturn)) run_child(char *const *command, int host_cpu, int report)
{
	int error;

	if (host_cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(host_cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0) {
			error = errno | PIN_FAILED;
			goto failed;
		}
	}
	execvp(command[0], command);
	error = errno;
failed:
	if (write(report, &error, sizeof(error)) < 0) {
		/* Nothing left to tell the parent with. */
	}
	_exit(STAT_EXIT_CANNOT_RUN);
}

static double timeval_seconds(struct timeval value)
{
	return (double)value.tv_sec + (double)value.tv_usec / 1e6;
}

/* Sleep until the command ends or `timeout_ms` passed: on its pidfd when there is one, else
 * (a kernel before 5.3, or valgrind) in steps of at most 10 ms. True when it ended. */
static bool sleep_unless_ended(pid_t pid, int pidfd, int timeout_ms)
{
	if (pidfd >= 0) {
		struct pollfd ready = { .fd = pidfd, .events = POLLIN };
		return poll(&ready, 1, timeout_ms) > 0;
	}
	siginfo_t info = { .si_pid = 0 };
	if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid)
		return true;
	struct timespec step = { 0, (long)(timeout_ms < 10 ? timeout_ms : 10) * 1000000L };
	nanosleep(&step, NULL);
	return false;
}

/* Wait for the command (wait4: its user and system time too); with an interval, wake every
 * interval_ms to let the caller print (perf stat -I). */
static int wait_for(pid_t pid, const struct stat_run_request *request, double start,
		    struct stat_times *times, int *status)
{
	struct rusage usage;
	int raw, pidfd = -1;
	double next = start + request->interval_ms / 1e3;

	if (request->interval_ms > 0)
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	while (request->interval_ms > 0) {
		double now = monotonic_seconds();
		int timeout = next > now ? (int)((next - now) * 1e3) + 1 : 0;
		if (sleep_unless_ended(pid, pidfd, timeout))
			break;
		now = monotonic_seconds();
		if (now >= next) {
			request->tick(request->tick_arg, now - start);
			next += request->interval_ms / 1e3;
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	while (wait4(pid, &raw, 0, &usage) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	times->user = timeval_seconds(usage.ru_utime);
	times->sys = timeval_seconds(usage.ru_stime);
	*status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
	return 0;
}

/* The errno the child sent, or 0 when exec succeeded (the pipe closed empty). */
static int exec_error(int report)
{
	int error = 0;
	ssize_t got;

	do {
		got = read(report, &error, sizeof(error));
	} while (got < 0 && errno == EINTR);
	return got == (ssize_t)sizeof(error) ? error : 0;
}

int stat_run_command(const struct stat_run_request *request, struct stat_times *times,
		     int *status)
{
	char *const *command = request->command;
	int host_cpu = request->host_cpu;
	struct sigaction saved[2];
	int pipe_fds[2];
	double start;
	int error;
	pid_t pid;

	if (pipe2(pipe_fds, O_CLOEXEC) < 0) {
		error = -errno;
		stat_error("cannot create a pipe: %s", strerror(errno));
		*status = STAT_EXIT_FAILED;
		return error;
	}
	catch_terminal_signals(saved);
	fflush(NULL);
	start = monotonic_seconds();
	pid = fork();
	if (pid == 0) {
		restore_terminal_signals(saved);
		close(pipe_fds[0]);
		run_child(command, host_cpu, pipe_fds[1]);
	}
	close(pipe_fds[1]);
	if (pid < 0) {
		error = -errno;
		stat_error("cannot fork: %s", strerror(errno));
		*status = STAT_EXIT_FAILED;
		goto out;
	}
	error = exec_error(pipe_fds[0]);
	int waited = wait_for(pid, request, start, times, status);
	times->elapsed = monotonic_seconds() - start;
	if (error & PIN_FAILED) {
		stat_error("cannot pin '%s' to CPU %d: %s", command[0], host_cpu,
			   strerror(error & ~PIN_FAILED));
		*status = STAT_EXIT_FAILED;
		error = -(error & ~PIN_FAILED);
		goto out;
	}
	if (error != 0) {
		stat_error("cannot run '%s': %s", command[0], strerror(error));
		*status = error == ENOENT ? STAT_EXIT_NOT_FOUND : STAT_EXIT_CANNOT_RUN;
		error = -error;
		goto out;
	}
	error = waited;
	if (error < 0) {
		stat_error("waiting for '%s' failed: %s", command[0], strerror(-error));
		*status = STAT_EXIT_FAILED;
	}
out:
	close(pipe_fds[0]);
	restore_terminal_signals(saved);
	return error;
}
