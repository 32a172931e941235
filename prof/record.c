/*
 * prof/record.c — haecer-prof record: run the program under task-clock sampling and record
 * msrd's energy readings of every package and domain beside the samples.
 *
 * Order matters for what is measured: the child is forked and waits on a pipe; the sampling
 * events (disabled, enable_on_exec) and the energy schedule are set up; the first energy set is
 * in the ring; only then does the child exec. So the first interval begins before the program's
 * first instruction, and the last ends after its exit (the loop waits for one more set).
 *
 * The recorder itself only copies records (when a perf ring is a quarter full, at the program's
 * exit, and at least every second) and never pins or touches the child.
 */
#include "prof/prof.h"
#include "common/clock.h"
#include "prof/recorder.h"
#include "tools/common/toolopt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "prof/sample_event.h"
#include "shm/ring.h"

/* How long record sleeps when nothing wakes it sooner. A perf ring wakes it at a quarter full
 * (the other three quarters hold seconds of samples while it copies) and the program's exit
 * wakes it through a pidfd, so with perf it need only wake in time for msrd's energy ring: at
 * most every POLL_MS_MAX, and four times per filling of that ring. Each wake costs the machine
 * the program runs on: about 0.1 ms of CPU time on a small VM, which the simulated CPU draws as
 * power (waking every 100 ms, it used 0.1-0.2 % of a CPU while a 1 kHz profile ran). The timer
 * agent's pipe is not polled (it would wake record at every sample) and holds about a second,
 * so that sampler keeps 100 ms. Without a pidfd (before Linux 5.3) the exit is seen only on a
 * wake, so the wakes come often enough not to stretch the run much. */
#define POLL_MS_MAX 1000
#define POLL_MS_TIMER 100
#define POLL_MS_NO_PIDFD 5
#define FIRST_SET_WAIT_MS 2000
#define EXIT_CODE_CANNOT_RUN 127

static uint64_t own_cpu_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

void recorder_meta(struct recorder *recorder, const char *format, ...)
{
	char line[4096];
	va_list args;
	int length;

	va_start(args, format);
	length = vsnprintf(line, sizeof(line) - 1, format, args);
	va_end(args);
	if (length < 0)
		return;
	if ((size_t)length > sizeof(line) - 2)
		length = sizeof(line) - 2;
	line[length++] = '\n';
	prof_write(&recorder->writer, PROF_REC_META, line, (size_t)length, NULL, 0);
}

/* ---- /proc/stat: what the host CPUs did, to tell other processes from idle ---- */

static void record_cpustat(struct recorder *recorder)
{
	FILE *file = fopen("/proc/stat", "r");
	char line[512];
	uint64_t now = clock_monotonic_raw_ns();

	if (!file)
		return;
	while (fgets(line, sizeof(line), file)) {
		unsigned cpu;
		unsigned long long v[8] = { 0 };
		if (strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9')
			continue;
		if (sscanf(line + 3, "%u %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1],
			   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 5)
			continue;
		struct prof_cpustat stat = { .time_ns = now, .cpu = cpu };
		stat.busy_ticks = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
		stat.total_ticks = stat.busy_ticks + v[3] + v[4];
		prof_write(&recorder->writer, PROF_REC_CPUSTAT, &stat, sizeof(stat), NULL, 0);
	}
	fclose(file);
}

static uint64_t rusage_cpu_ns(const struct rusage *usage)
{
	return (uint64_t)(usage->ru_utime.tv_sec + usage->ru_stime.tv_sec) * 1000000000ull +
	       (uint64_t)(usage->ru_utime.tv_usec + usage->ru_stime.tv_usec) * 1000ull;
}

/* ---- the child ---- */

static void ignore_signal(int signal_number)
{
	(void)signal_number;
}

/* The go byte: run under perf's events, or with the timer agent preloaded. */
#define GO_PERF 'g'
#define GO_TIMER 't'

static void __attribute__((noreturn)) run_child(char *const *command, int go, int report,
						struct prof_timer *timer, unsigned hz)
{
	char byte = 0;
	int error;

	/* Wait until the parent has set up sampling and energy (or gave up: EOF). */
	while (read(go, &byte, 1) < 0 && errno == EINTR)
		;
	if (byte == GO_TIMER && timer)
		prof_timer_child(timer, hz);
	else if (byte != GO_PERF)
		_exit(EXIT_CODE_CANNOT_RUN);
	execvp(command[0], command);
	error = errno;
	if (write(report, &error, sizeof(error)) < 0) {
		/* nothing left to tell the parent with */
	}
	_exit(EXIT_CODE_CANNOT_RUN);
}

/* msrd's perf broker opens the sampling events when it is on (HELLO's HAECER_FEATURE_PERF):
 * haecer-prof then needs no perf_event_paranoid of its own. The child asks for them before it
 * execs (msrd opens events only on its client's own process) and passes them back here. */
static void open_broker_channel(const struct recorder *recorder,
				const struct prof_record_options *options, int broker[2])
{
	const struct haecer_server_info *info = haecer_server_info(recorder->conn);

	if (info == NULL || !(info->features & HAECER_FEATURE_PERF)) {
		if (!options->quiet)
			fprintf(stderr, "haecer-prof: msrd's perf broker is off (msrd --perf-broker "
				"or --backend perf): opening perf itself\n");
		return;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, broker) < 0) {
		broker[0] = broker[1] = -1;
		if (!options->quiet)
			fprintf(stderr, "haecer-prof: socketpair: %s: opening perf itself\n",
				strerror(errno));
	}
}

/* The child's events from msrd; false (and why, and the parent opens perf itself) when it
 * could not have them. */
static bool sample_through_broker(struct recorder *recorder,
				  const struct prof_record_options *options, int channel)
{
	int status = recorder_broker_receive(recorder, channel, options->dwarf_unwind);

	close(channel);
	if (status == 0) {
		recorder->brokered = true;
		return true;
	}
	recorder_close_sampling(recorder);
	if (!options->quiet)
		fprintf(stderr, "haecer-prof: msrd's perf broker did not open the sampling events "
			"(%s): opening perf itself\n", strerror(-status));
	return false;
}

static int wait_first_energy(struct recorder *recorder)
{
	for (int waited = 0; waited < FIRST_SET_WAIT_MS; waited += 2) {
		recorder_drain_energy(recorder, false);
		if (recorder->energy_sets > 0)
			return 0;
		usleep(2000);
	}
	tool_warn("msrd's energy schedule produced nothing in %d ms", FIRST_SET_WAIT_MS);
	return -ETIMEDOUT;
}

int prof_record(const struct prof_record_options *options)
{
	struct recorder recorder;
	struct sigaction action, saved[2];
	int go_pipe[2] = { -1, -1 }, report_pipe[2] = { -1, -1 }, broker[2] = { -1, -1 };
	uint64_t period_ns = 1000000000ull / options->hz;
	/* RAPL counters (and the simulated ones) move about once a millisecond: an interval of one
	 * millisecond holds zero, one or two updates, an error of up to 100 % each that only
	 * averages out slowly. Twenty updates per interval keep it near 5 %, and the samples
	 * inside an interval (twenty at 1 kHz) say who used it. Each reading is an msrd wake-up,
	 * which the machine pays for: about 50-60 us of msrd's CPU time on a small VM (a third of
	 * it the simulated CPU reading /proc/stat), 0.6 % of a CPU at every 10 ms, the largest
	 * part of a 1 kHz profile's energy overhead after the samples themselves; at 20 ms half
	 * of that. (Seed 003's CHAPPIE chose tens of ms for the same reason, calmness.) */
	uint64_t energy_period_ns = options->energy_period_ns ? options->energy_period_ns
							      : PROF_DEFAULT_ENERGY_PERIOD_NS;
	if (energy_period_ns < period_ns)
		energy_period_ns = period_ns;
	if (energy_period_ns < HAECER_SCHEDULE_MIN_PERIOD_NS)
		energy_period_ns = HAECER_SCHEDULE_MIN_PERIOD_NS;
	int status = 0, raw_status = 0, exec_errno = 0;
	pid_t child = -1;
	bool exited = false, signals_caught = false, use_timer = false;
	struct prof_timer *timer = NULL;
	int timer_error = 0;

	memset(&recorder, 0, sizeof(recorder));
	if (options->sampler != PROF_SAMPLER_PERF) {
		if (options->dwarf_unwind && options->sampler == PROF_SAMPLER_TIMER) {
			tool_warn("--call-graph dwarf needs perf's stack copies; the timer "
				  "sampler walks frame pointers only");
			return -EINVAL;
		}
		timer_error = prof_timer_open(&timer);
		if (timer_error < 0 && options->sampler == PROF_SAMPLER_TIMER) {
			tool_warn("the timer sampler's %s: %s (set %s to its path)",
				  PROF_AGENT_LIBRARY, strerror(-timer_error),
				  PROF_AGENT_LIBRARY_ENV);
			return timer_error;
		}
	}
	status = prof_writer_open(&recorder.writer, options->output);
	if (status < 0) {
		tool_warn("cannot write %s: %s", options->output, strerror(-status));
		return status;
	}
	if (pipe2(go_pipe, O_CLOEXEC) < 0 || pipe2(report_pipe, O_CLOEXEC) < 0) {
		status = -errno;
		tool_warn("pipe: %s", strerror(errno));
		goto out;
	}
	status = recorder_start_energy(&recorder, options->socket, energy_period_ns);
	if (status < 0)
		goto out;

	memset(&action, 0, sizeof(action));
	action.sa_handler = ignore_signal;
	sigemptyset(&action.sa_mask);
	sigaction(SIGINT, &action, &saved[0]);
	sigaction(SIGQUIT, &action, &saved[1]);
	signals_caught = true;
	if (options->sampler != PROF_SAMPLER_TIMER)
		open_broker_channel(&recorder, options, broker);
	fflush(NULL);
	child = fork();
	if (child == 0) {
		sigaction(SIGINT, &saved[0], NULL);
		sigaction(SIGQUIT, &saved[1], NULL);
		close(go_pipe[1]);
		close(report_pipe[0]);
		if (broker[1] >= 0) {
			close(broker[0]);
			recorder_broker_child(options->socket, broker[1], options->hz,
					      options->dwarf_unwind);
			close(broker[1]);
		}
		run_child(options->command, go_pipe[0], report_pipe[1], timer, options->hz);
	}
	if (broker[1] >= 0)
		close(broker[1]);
	if (timer && child > 0)
		prof_timer_started(timer, child);
	close(go_pipe[0]);
	go_pipe[0] = -1;
	close(report_pipe[1]);
	report_pipe[1] = -1;
	if (child < 0) {
		status = -errno;
		tool_warn("fork: %s", strerror(errno));
		goto out;
	}
	recorder.dwarf = options->dwarf_unwind;
	if (broker[0] >= 0 && child > 0) {
		sample_through_broker(&recorder, options, broker[0]);
		broker[0] = -1; /* closed there */
	}
	if (options->sampler == PROF_SAMPLER_TIMER) {
		use_timer = true;
	} else if (recorder.brokered) {
		status = 0;
	} else {
		bool may_fall_back = options->sampler == PROF_SAMPLER_AUTO && timer &&
				     !options->dwarf_unwind;
		status = recorder_open_sampling(&recorder, child, options->hz, options->dwarf_unwind,
				       may_fall_back);
		if (status < 0 && may_fall_back && recorder_perf_refused(status)) {
			recorder_close_sampling(&recorder);
			if (!options->quiet)
				tool_warn("perf_event_open refused (%s): sampling with "
					  "CPU-time timers in a preloaded agent instead",
					  strerror(-status));
			use_timer = true;
		} else if (status < 0) {
			if (recorder_perf_refused(status) && options->sampler == PROF_SAMPLER_AUTO)
				tool_warn("and the timer sampler cannot stand in: %s",
					  options->dwarf_unwind
					  ? "--call-graph dwarf needs perf"
					  : strerror(-timer_error));
			goto out;
		}
	}

	recorder_meta(&recorder, "version=1");
	{
		char line[3000];
		size_t used = 0;
		line[0] = '\0';
		for (char *const *word = options->command; *word && used < sizeof(line) - 2; word++)
			used += (size_t)snprintf(line + used, sizeof(line) - used, "%s%s",
						 word == options->command ? "" : " ", *word);
		recorder_meta(&recorder, "command=%s", line);
	}
	recorder_meta(&recorder, "pid=%d", (int)child);
	recorder_meta(&recorder, "frequency_hz=%u", options->hz);
	recorder_meta(&recorder, "period_ns=%" PRIu64, period_ns);
	recorder_meta(&recorder, "energy_period_ns=%" PRIu64, energy_period_ns);
	recorder_meta(&recorder, "unwinding=%s", options->dwarf_unwind ? "dwarf" : "frame-pointer");
	recorder_meta(&recorder, "sampler=%s", use_timer ? "timer" : "perf");
	if (!use_timer)
		recorder_meta(&recorder, "perf_opened_by=%s",
			      recorder.brokered ? "msrd" : "haecer-prof");
	if (!use_timer)
		recorder_meta(&recorder, "kernel_time=%s",
		     recorder.kernel_unsampled ? "unsampled" : "sampled");
	if (use_timer) {
		uint64_t signal_number;
		if (!number_parse(getenv(PROF_AGENT_SIGNAL_ENV), 10, (uint64_t)SIGRTMAX,
				  &signal_number) ||
		    signal_number < (uint64_t)SIGRTMIN)
			signal_number = PROF_AGENT_DEFAULT_SIGNAL;
		recorder_meta(&recorder, "timer_signal=%d", (int)signal_number);
		recorder_meta(&recorder, "timer_agent=%s", prof_timer_library(timer));
	}
	recorder_write_machine_meta(&recorder, haecer_server_info(recorder.conn));
	status = wait_first_energy(&recorder);
	if (status < 0)
		goto out;
	record_cpustat(&recorder);
	/* The whole machine's package energy at the two ends of the run, read as calm reads it
	 * around a plain run: calm compares the two, and interpolating between the schedule's
	 * readings would give the run's first and last interval the average power of the whole
	 * interval, idle part included. */
	double start_joules = NAN, end_joules = NAN;
	if (prof_package_joules(recorder.conn, &recorder.machine, &start_joules) < 0)
		start_joules = NAN;
	recorder_meta(&recorder, "start_ns=%" PRIu64, clock_monotonic_raw_ns());
	uint64_t run_cpu_start = own_cpu_ns(), run_cpu_end = 0;
	if (write(go_pipe[1], use_timer ? "t" : "g", 1) != 1) {
		status = -errno;
		goto out;
	}
	close(go_pipe[1]);
	go_pipe[1] = -1;
	{
		ssize_t got;
		do {
			got = read(report_pipe[0], &exec_errno, sizeof(exec_errno));
		} while (got < 0 && errno == EINTR);
		if (got != (ssize_t)sizeof(exec_errno))
			exec_errno = 0;
	}

	struct pollfd *fds = calloc((size_t)recorder.cpu_count + 1, sizeof(*fds));
	if (!fds) {
		status = -ENOMEM;
		goto out;
	}
	/* The exit wakes record at once, so the end of the run is when the program ended, not
	 * the next wake after it. (The timer agent's pipe is not polled: it would wake record at
	 * every sample; it holds about a second of them.) */
	int exit_fd = (int)syscall(SYS_pidfd_open, child, 0);
	uint64_t exit_ns = 0;
	uint64_t ring_ms = (uint64_t)recorder.energy_capacity / recorder.op_count *
			   energy_period_ns / 1000000u;
	int poll_ms = ring_ms / 4 < POLL_MS_MAX ? (int)(ring_ms / 4) : POLL_MS_MAX;
	struct rusage child_usage, own_usage;

	memset(&child_usage, 0, sizeof(child_usage));
	bool hung_up = false;
	while (!exited) {
		nfds_t count = 0, perf_fds;
		for (int cpu = 0; cpu < recorder.cpu_count && !hung_up; cpu++)
			if (recorder.cpus[cpu].fd >= 0)
				fds[count++] = (struct pollfd){ .fd = recorder.cpus[cpu].fd,
								.events = POLLIN };
		perf_fds = count;
		if (exit_fd >= 0)
			fds[count++] = (struct pollfd){ .fd = exit_fd, .events = POLLIN };
		poll(fds, count, exit_fd < 0 ? POLL_MS_NO_PIDFD
			  : use_timer || hung_up ? POLL_MS_TIMER : poll_ms);
		if (wait4(child, &raw_status, WNOHANG, &child_usage) == child) {
			exited = true;
			exit_ns = clock_monotonic_raw_ns();
			run_cpu_end = own_cpu_ns();
			if (prof_package_joules(recorder.conn, &recorder.machine, &end_joules) < 0)
				end_joules = NAN;
		}
		/* The events hang up when the program's first thread exits, a moment before the
		 * program can be waited for: wait for that (the pidfd) before copying, so copying a
		 * whole run's samples does not delay the end. Should other threads run on, the rings
		 * are copied every POLL_MS_TIMER meanwhile. */
		bool hanging_up = false;
		for (nfds_t i = 0; i < perf_fds; i++)
			hanging_up |= (fds[i].revents & (POLLHUP | POLLERR)) != 0;
		hung_up |= hanging_up;
		if (hanging_up && !exited && exit_fd >= 0)
			continue;
		if (use_timer)
			prof_timer_drain(timer, &recorder.writer);
		recorder_drain_perf(&recorder);
		recorder_drain_energy(&recorder, false);
	}
	if (exit_fd >= 0)
		close(exit_fd);
	free(fds);
	recorder_meta(&recorder, "end_ns=%" PRIu64, exit_ns);
	/* What record itself used while the program ran (start_ns to end_ns): the part of its
	 * CPU time inside the window calm measures; set-up and the last energy set are outside. */
	recorder_meta(&recorder, "recorder_run_cpu_ns=%" PRIu64, run_cpu_end - run_cpu_start);
	if (!isnan(start_joules) && !isnan(end_joules))
		recorder_meta(&recorder, "package_joules_at_start=%.9f\npackage_joules_at_end=%.9f",
		     start_joules, end_joules);
	record_cpustat(&recorder);
	/* One more energy set after the exit closes the last interval. */
	for (int waited = 0; waited < 500 && recorder.last_energy_ns < exit_ns + energy_period_ns;
	     waited += 2) {
		usleep(2000);
		recorder_drain_energy(&recorder, false);
	}
	recorder_drain_perf(&recorder);
	recorder_record_task_totals(&recorder);
	if (use_timer) {
		bool broken, started;
		uint64_t agent_lost;
		prof_timer_finish(timer, &recorder.writer);
		prof_timer_counts(timer, &recorder.samples, &agent_lost, &broken, &started);
		recorder.lost += agent_lost;
		if (broken)
			recorder_meta(&recorder, "timer_note=the agent sent a record that made no sense; "
					"what followed it was dropped");
		uint64_t unsampled_threads, unsampled_ns;
		prof_timer_unsampled(timer, &unsampled_threads, &unsampled_ns);
		if (unsampled_threads > 0) {
			recorder_meta(&recorder,
			     "timer_note=%" PRIu64 " thread(s) ran %.1f ms of CPU time in all but no "
			     "timer tick fell in their runs: they have no samples, and their energy "
			     "is under other/idle, not the program's (perf's sampler has no such gap)",
			     unsampled_threads, (double)unsampled_ns / 1e6);
			tool_warn("%" PRIu64 " thread(s) with %.1f ms of CPU time got no "
				  "timer sample; see the report's note", unsampled_threads,
				  (double)unsampled_ns / 1e6);
		}
		if (!started) {
			static const char never[] =
				"the timer agent never started in the program: it does not load "
				"into a statically linked or set-user-ID program, nor into one "
				"whose LD_PRELOAD was cleared";
			recorder_meta(&recorder, "timer_note=%s", never);
			tool_warn("%s", never);
		}
	}
	recorder_stop_energy(&recorder);
	if (exec_errno) {
		tool_warn("cannot run '%s': %s", options->command[0], strerror(exec_errno));
		status = EXIT_CODE_CANNOT_RUN;
	} else {
		status = WIFEXITED(raw_status) ? WEXITSTATUS(raw_status)
					       : 128 + WTERMSIG(raw_status);
	}
	recorder_meta(&recorder, "exit_status=%d", status);
	/* CPU time of the program (its threads and the children it waited for) and of record
	 * itself: what the profile cost, apart from what the host's load did to the wall time. */
	recorder_meta(&recorder, "program_cpu_ns=%" PRIu64, rusage_cpu_ns(&child_usage));
	if (getrusage(RUSAGE_SELF, &own_usage) == 0)
		recorder_meta(&recorder, "recorder_cpu_ns=%" PRIu64, rusage_cpu_ns(&own_usage));
	recorder_meta(&recorder, "lost_samples=%" PRIu64, recorder.lost);
	recorder_meta(&recorder, "lost_energy_records=%" PRIu64, recorder.energy_lost);
	if (!options->quiet)
		tool_warn("%" PRIu64 " samples, %" PRIu64 " energy sets%s into %s",
			  recorder.samples, recorder.energy_sets,
			  recorder.lost ? " (samples lost: the ring overflowed)" : "",
			  options->output);
out:
	if (broker[0] >= 0)
		close(broker[0]);
	if (signals_caught) {
		sigaction(SIGINT, &saved[0], NULL);
		sigaction(SIGQUIT, &saved[1], NULL);
	}
	if (child > 0 && !exited) {
		/* Set-up failed: the child sees EOF on its pipe and exits without running. */
		if (go_pipe[1] >= 0) {
			close(go_pipe[1]);
			go_pipe[1] = -1;
		}
		waitpid(child, NULL, 0);
	}
	for (int i = 0; i < 2; i++) {
		if (go_pipe[i] >= 0)
			close(go_pipe[i]);
		if (report_pipe[i] >= 0)
			close(report_pipe[i]);
	}
	recorder_close_sampling(&recorder);
	prof_timer_close(timer);
	if (recorder.conn)
		recorder_stop_energy(&recorder);
	int closed = prof_writer_close(&recorder.writer);
	if (status >= 0 && closed < 0) {
		tool_warn("writing %s failed: %s", options->output, strerror(-closed));
		status = closed;
	}
	/* No half profile is left behind to be reported as if it were one. */
	if (status < 0)
		unlink(options->output);
	return status;
}
