/*
 * harness/msrd_harness.h — start the real msrd for a test, talk to it, stop it, check it.
 *
 * msrd_start() makes a fresh directory under /tmp, writes the policy text into it, and starts
 * $HAECER_BUILD/msrd there on its own socket (foreground, log to DIR/msrd.log), waiting on
 * --ready-fd until it listens. With HAECER_VALGRIND=1 msrd itself runs under valgrind memcheck
 * and any error fails msrd_stop(). msrd_stop() sends SIGTERM and requires exit status 0 and a
 * log free of sanitizer and valgrind reports and of system calls its filter refused; on failure
 * it prints the log.
 *
 * run_as() runs a function in a child process under another uid/gid/groups (tests run as root).
 *
 * With --backend sim among a test's arguments the harness passes --sim-seed HARNESS_SIM_SEED
 * first, so the rough simulated CPU is the same in every run (a test's own --sim-seed wins).
 *
 * msrd keeps its journal in that directory (--state-dir) and runs with its system call filter
 * enforced (--seccomp enforce), except under valgrind, whose own system calls the filter would
 * refuse (--seccomp off).
 *
 * Environment: HAECER_TEST_KEEP=1 keeps msrd's directory (and log) after a clean stop;
 * HAECER_MSRD_LOG_LEVEL overrides msrd's log level (debug by default: tests count some of its
 * debug lines, "precise edges on/off"); HAECER_MSRD_SECCOMP the filter's mode (enforce, log,
 * off).
 */
#ifndef HAECER_HARNESS_MSRD_HARNESS_H
#define HAECER_HARNESS_MSRD_HARNESS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/clock.h" /* clock_monotonic_raw_ns: msrd's clock for sample times */
#include "harness/sim_control.h" /* the simulated CPU msrd runs by default: its control, truth */

#define HARNESS_SIM_SEED "12"

struct msrd_server {
	char dir[PATH_MAX];
	char socket_path[PATH_MAX];
	char policy_path[PATH_MAX];
	char log_path[PATH_MAX];
	char valgrind_log_path[PATH_MAX];
	pid_t pid;
	bool valgrind;
};

/* The build and source trees (HAECER_BUILD, HAECER_SOURCE; "build" and "." by default). */
const char *harness_build_dir(void);
const char *harness_source_dir(void);
/* HAECER_TEST_SCALE=small (the valgrind pass). */
bool harness_small_scale(void);
/* msrd runs under valgrind in this run. */
bool harness_valgrind(void);
/* Drop every capability of this process (its uid stays): a program as a user runs it. The
 * simulator follows a client by its perf task clock only when the client's capabilities are
 * no more than msrd's (backend/sim/sim_follow.c); a root client with all of them is followed
 * by its CPU-time clock, which another process sees move only at the scheduler's tick, so the
 * simulated power swings by a CPU's worth in 4 ms steps however steady the client is.
 * 0 or -errno. */
int harness_drop_capabilities(void);
/* Keep this CPU busy for ns (CLOCK_MONOTONIC_RAW): a region's work, or a stretch timed exactly. */
void harness_spin_ns(uint64_t ns);
/* A child process that spins spin_ns, then sleeps sleep_us (0: never), for ever, and dies with
 * its parent (PR_SET_PDEATHSIG): a busy or a mostly asleep program whose energy a test
 * attributes. Its pid, or -errno. */
pid_t harness_start_duty_cycle(uint64_t spin_ns, useconds_t sleep_us);
/* A loopback TCP port free now (the kernel's pick), for a server a test starts; 0 on failure. */
unsigned harness_free_loopback_port(void);

/* Prepare server->dir etc. and write the policy (mode 0644) without starting anything. */
int msrd_prepare(struct msrd_server *server, const char *policy_yaml);
/* Start msrd in the prepared directory. `arguments` is NULL-terminated and added after the
 * harness's own (--socket, --policy, --foreground, --ready-fd, --models-dir, --log-level debug,
 * --state-dir, --seccomp, --refusal-log-burst 0 so tests can count every refusal): a test's own
 * --seccomp, --state-dir or --refusal-log-burst comes later and wins.
 * 0 once msrd listens; -1 when it exited or did not get ready (its log is printed). */
int msrd_launch(struct msrd_server *server, const char *const *arguments);
/* msrd_prepare + msrd_launch. */
int msrd_start(struct msrd_server *server, const char *policy_yaml, const char *const *arguments);

/* SIGTERM; 0 when msrd exited 0 with a clean log (then the directory is removed), else -1. */
int msrd_stop(struct msrd_server *server);
/* SIGKILL without checks, and remove the directory. For tests that failed already. */
void msrd_kill(struct msrd_server *server);
int msrd_signal(const struct msrd_server *server, int signal_number);

/* The log so far (malloc'ed, NUL-terminated; NULL if unreadable). */
char *msrd_log(const struct msrd_server *server);
bool msrd_log_contains(const struct msrd_server *server, const char *needle);
/* How many times needle occurs in the log. */
size_t msrd_log_count(const struct msrd_server *server, const char *needle);
/* Poll the log until it contains needle (true) or timeout_ms passed (false). */
/* On a device backend: the server's pid and its descriptor of the channel to msrd's privileged
 * parent (server/privsep.h), from the parent's log line. 0, or -1 when msrd did not split. */
int msrd_privsep_server(const struct msrd_server *server, pid_t *pid, int *descriptor);
bool msrd_wait_log(const struct msrd_server *server, const char *needle, unsigned timeout_ms);
void msrd_print_log(const struct msrd_server *server);
/* SIGHUP, then wait up to timeout_ms until the log says "SIGHUP: policy reloaded" once more than
 * before. 0 when it did, else -1. */
int msrd_reload(const struct msrd_server *server, unsigned timeout_ms);
/* Replace the policy file (written beside it, mode 0644, then renamed over it) and msrd_reload. */
int msrd_install_policy(const struct msrd_server *server, const char *policy_yaml,
			unsigned timeout_ms);

/* Run fn(argument) in a child with the given identity; returns its exit status (0..255), or
 * 128 + signal when it was killed. groups may be NULL. */
int run_as(uid_t uid, gid_t gid, const gid_t *groups, size_t group_count,
	   int (*fn)(void *argument), void *argument);

/* Run a program (argv[0] is a path) with stdout and stderr captured into malloc'ed strings
 * (either pointer may be NULL); returns its exit status or -1. */
int harness_run(const char *const *argv, char **out, char **err);

/* Write text to path with mode. 0 or -errno. */
int harness_write_file(const char *path, const char *text, unsigned mode);
/* rm -rf */
void harness_remove_tree(const char *path);

/* A stand-in device tree under dir: dev/cpu/N/msr for N < cpus, each a sparse file of `size`
 * bytes (reads at offset >= size are short: the driver's EIO). */
int harness_standin_msr_tree(const char *dir, unsigned cpus, uint64_t size);
/* The 8 bytes at `address` of dir/dev/cpu/N/msr (the stand-in register). */
int harness_standin_read(const char *dir, unsigned cpu, uint32_t address, uint64_t *value);
int harness_standin_write(const char *dir, unsigned cpu, uint32_t address, uint64_t value);

/* dir/NAME.yaml: the shipped simulated model `from` (configs/models) with every replace[2i]
 * (which must occur) replaced by replace[2i + 1] and `extra` (may be NULL) appended: a variant
 * of a real part for one test, for --models-dir. 0 or -1 (with a message). */
int harness_model_variant(const char *dir, const char *name, const char *from,
			  const char *const *replace, size_t pairs, const char *extra);

/* Raise RLIMIT_NOFILE to at least `wanted` (up to the hard limit); returns the new soft limit. */
unsigned long harness_raise_fd_limit(unsigned long wanted);

#endif
