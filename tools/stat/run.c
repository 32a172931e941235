/*
 * tools/stat/run.c — run the measured command: fork, pin the child to the counted CPU, exec;
 * an exec failure travels back through a close-on-exec pipe (errno), so "no such command" is
 * told apart from a command that ran and exited 127.
 *
 * While the command runs, SIGINT and SIGQUIT from the terminal go to it as to any foreground
 * job; haecer-stat catches them (a handler, not SIG_IGN, which exec would pass on) and reports
 * what was measured once the command ends.
 */
#include "tools/stat/stat.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
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
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
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

static int wait_for(pid_t pid, int *status)
{
	int raw;

	while (waitpid(pid, &raw, 0) < 0) {
		if (errno != EINTR)
			return -errno;
	}
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

int stat_run_command(char *const *command, int host_cpu, double *seconds, int *status)
{
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
	int waited = wait_for(pid, status);
	*seconds = monotonic_seconds() - start;
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
