/*
 * backend/sim/sim_follow.c — the load of the processes that talk to msrd, to the microsecond.
 *
 * /proc/stat counts each CPU's busy time in ticks of 1/USER_HZ (10 ms): a program that measures
 * a 300 us region (busy) and then polls msrd (blocked in recv) looks the same to it, so the
 * simulated package drew the same power for the measured code and the measuring loop. The
 * kernel keeps each process's CPU time, and msrd knows its clients' pids (SO_PEERCRED). But the
 * process's CPU-time clock (clock_getcpuclockid), read from another process, adds a running
 * thread's time only at the scheduler's tick or when the thread blocks (thread_group_cputime
 * brings only the reader's own thread up to date): a client spinning through its regions showed
 * 0, 0, 0 and then 4 ms of CPU in 1 ms samples (HZ 250), and the simulated package swung between
 * 11 and 35 W for a load that never changed (bench/fidelity's 300 us regions: p95 error 190 %,
 * 9 % once followed exactly). A perf task-clock counter of the process is brought up to date when
 * read (an IPI to the CPU it runs on), so a process msrd may read one of (open_task_clock: its
 * uid, capabilities no more than msrd's) is followed by that; any other by its clock, at the
 * tick's granularity. So msrd tells the simulator whom to follow (sim_follow_process), and:
 *  - at each observation at least SIM_FOLLOW_SAMPLE_NS after the last, the followed processes'
 *    CPU time since then, over that interval, is their load, placed on the host CPU where
 *    /proc/PID/stat last saw each run (a process busier than one CPU spills the rest evenly over
 *    the others);
 *  - the rest of each host CPU's load (everything the followed processes are not) is
 *    /proc/stat's busy share less what they ran there, over windows of SIM_FOLLOW_REST_NS: over
 *    one 10 ms sample, /proc/stat's ticks make a half-busy CPU 0 % or 100 % busy, and the rest,
 *    never below 0, came out a quarter of a CPU too high;
 *  - a host CPU's load is the rest plus its followed share, at most one CPU.
 * The fine load applies from the start of its interval for what nobody observed since (the
 * sim's objects are advanced lazily: a CPU or domain observed within the interval takes it from
 * that observation on), so a busy phase between two reads of the register is drawn as busy.
 *
 * Cost: a clock read (a system call) per followed process per sample, a read of /proc/PID/stat
 * per process per /proc/stat sample; at most SIM_FOLLOW_MAX processes (a further client is not
 * followed, and the log says so once). Why SIM_FOLLOW_SAMPLE_NS is 1 ms (the issue's
 * granularity) and not 100 us: at 100 us nearly every round-trip read of a followed client paid
 * one more system call (bench/msrd's syscalls_per_read rose from 3.02 to 4.12; at 1 ms, 3.22),
 * while a phase between two observations is drawn exactly either way (the load applies from its
 * interval's start); what a finer sample added was only a shorter lag where msrd observes the
 * CPU in between (its page sampler, its windows): at most one sample.
 *
 * A process's CPU-time clock costs the kernel a walk over all its threads (thread_group_cputime):
 * one process with 10 000 threads, each with a connection, took ~135 us a read, 13 % of msrd's
 * CPU at one sample a millisecond, charged to every read (issue 31). So the next fine sample
 * waits at least SIM_FOLLOW_COST_SHARE times what the clocks' reads cost: the follow takes at
 * most about 0.25 % of a CPU, and a process with few threads is still sampled every
 * millisecond. A task clock's read costs its IPI, ~10 us on the 2-core VM the suite runs on, and
 * counts SIM_FOLLOW_FINE_COST_SHARE times (at most about 1 % of a CPU): at 400 times it was
 * sampled every 4 ms, and a sleeping region's dip was spread over 4 of them. (Clocks at 100
 * times too would sample four times as often under valgrind, where their reads cost tens of
 * microseconds, for no gain: they move only at the tick.)
 * The same holds for where the processes ran (/proc/PID/stat sums over the threads too: ~2.5 ms
 * for that process).
 *
 * A pid names a process only while it lives: a client that exits while a child keeps its
 * connection leaves a pid the kernel may give to another process, whose /proc/PID/stat and CPU
 * clock would then be followed. So each followed process is held from its first connection on
 * by a descriptor of its /proc/PID directory, which keeps naming that process: its stat is read
 * through it, and a clock reading is used only when a lookup in it still succeeds after the
 * read (it fails once the process is gone, whoever has the pid since); once gone the process is
 * forgotten. Not a pidfd (pidfd_open): valgrind, which the tests run msrd under, does not know
 * that system call and says so on every connection.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "backend/sim/sim_internal.h"

#define SIM_FOLLOW_MAX 32u
#define SIM_FOLLOW_SAMPLE_NS 1000000ull
#define SIM_FOLLOW_REST_NS 50000000ull
#define SIM_FOLLOW_COST_SHARE 400u
#define SIM_FOLLOW_FINE_COST_SHARE 100u

struct sim_followed {
	pid_t pid;
	int procfd;             /* its /proc/PID: the process itself, not whoever has its pid later */
	uint32_t holds;         /* connections of the process: followed while any is open */
	clockid_t clock;
	int task_clock;         /* its perf task-clock count (all its threads), -1: the clock */
	uint64_t cpu_ns;        /* its CPU time at the last fine sample */
	uint32_t host_cpu;      /* where /proc/PID/stat last saw it run */
};

struct sim_follow {
	struct sim_followed processes[SIM_FOLLOW_MAX];
	uint32_t count;
	bool said_full;
	uint64_t fine_at;       /* the last fine sample */
	uint64_t fine_pause;    /* the next one comes this long after it, at least */
	uint64_t placed_at;     /* the last look at where the processes ran */
	uint64_t place_pause;   /* the next one comes this long after it, at least */
	uint64_t window_at;     /* the start of the rest's window */
	uint32_t host_cpus;
	uint32_t *others;       /* per host CPU: the load the followed processes are not */
	uint64_t *ran;          /* per host CPU: their CPU time there in the window */
	uint64_t *busy_ticks;   /* per host CPU: /proc/stat's busy and total at the window's start */
	uint64_t *total_ticks;
	uint32_t *loads;        /* per host CPU: the load to apply (scratch) */
};

/* Whether the process procfd was opened for is gone (its pid may name another now). */
static bool exited(const struct sim_followed *process)
{
	struct stat status;

	return fstatat(process->procfd, "stat", &status, 0) != 0;
}

static int read_cpu_clock(clockid_t clock, uint64_t *ns)
{
	struct timespec now;

	if (clock_gettime(clock, &now) != 0)
		return -errno;
	*ns = (uint64_t)now.tv_sec * SIM_NS_PER_SECOND + (uint64_t)now.tv_nsec;
	return 0;
}

/* What a sample costs msrd: its own thread's CPU time, which has a task clock's IPI (the
 * reader spins until it is answered) but not the time msrd lay preempted midway. Real time
 * counted that too: on a loaded host one read that lost the CPU for 10 ms paused the follow for
 * a second, and a client's whole run went unsampled. */
static uint64_t cost_clock_ns(void)
{
	uint64_t ns = 0;

	read_cpu_clock(CLOCK_THREAD_CPUTIME_ID, &ns);
	return ns;
}

#define STAT_THREADS 20u  /* /proc/PID/stat: the number of threads */
#define STAT_LAST_CPU 39u /* the CPU the process last ran on */

/* Fields of /proc/PID/stat (3 or later, in increasing order: wanted[i] into values[i]), from
 * one read, counted after the command in parentheses, which may hold spaces and parentheses
 * itself. */
static int read_stat_fields(int procfd, const unsigned *wanted, uint32_t *values, unsigned count)
{
	char text[1024];
	const char *at;
	unsigned field = 2;
	ssize_t length;
	int fd = openat(procfd, "stat", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	length = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (length < 0)
		return -EIO;
	text[length] = '\0';
	at = strrchr(text, ')');
	for (unsigned i = 0; i < count; i++) {
		while (at != NULL && field < wanted[i] && (at = strchr(at + 1, ' ')) != NULL)
			field++;
		if (at == NULL || sscanf(at + 1, "%" SCNu32, &values[i]) != 1)
			return -EINVAL;
	}
	return 0;
}

static int read_last_cpu(int procfd, uint32_t *cpu)
{
	return read_stat_fields(procfd, &(const unsigned){ STAT_LAST_CPU }, cpu, 1);
}

/* A task-clock counter of another process: the kernel brings a running task's count up to
 * date when it is read (an IPI to its CPU), where the process's CPU-time clock read from
 * another process adds a running thread's time only at the scheduler's tick (HZ) or when it
 * blocks (thread_group_cputime): a client spinning through several fine samples showed 0, 0,
 * 0 and then 4 ms of CPU in one 1 ms sample (HZ 250), and the simulated package drew 11 to 35 W
 * for a load that never changed. Only for a process with one thread when it is first followed:
 * inherit counts the threads it starts later, not those it has (their time would be missing).
 * Counting only (exclude_kernel is for samples; task-clock counts all the time on a CPU), so
 * perf_event_paranoid 2 allows it for a process of msrd's own uid; anything else (another uid,
 * no perf_event) keeps the clock. */
static int open_task_clock(const struct sim_followed *process, uint32_t threads)
{
	struct perf_event_attr attr;
	long fd;

	if (process->pid == getpid() || threads != 1)
		return -1; /* msrd reads its own clock exactly */
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_TASK_CLOCK;
	attr.inherit = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	fd = syscall(SYS_perf_event_open, &attr, process->pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -1 : (int)fd;
}

static int read_task_clock(int fd, uint64_t *ns)
{
	uint64_t count;

	if (read(fd, &count, sizeof(count)) != (ssize_t)sizeof(count))
		return -EIO;
	*ns = count;
	return 0;
}

/* The process's CPU time: its task clock when it has one, else its CPU-time clock. */
static int read_cpu_time(const struct sim_followed *process, uint64_t *ns)
{
	if (process->task_clock >= 0)
		return read_task_clock(process->task_clock, ns);
	return read_cpu_clock(process->clock, ns);
}

static int make_follow(struct sim *sim, uint64_t now)
{
	struct sim_follow *follow;
	uint32_t cpus = sim->host ? sim_host_load_cpus(sim->host) : 0;

	if (cpus == 0)
		return -EOPNOTSUPP; /* scripted or virtual time: nothing of the host to follow */
	follow = calloc(1, sizeof(*follow));
	if (follow == NULL)
		return -ENOMEM;
	follow->host_cpus = cpus;
	follow->others = calloc(cpus, sizeof(*follow->others));
	follow->ran = calloc(cpus, sizeof(*follow->ran));
	follow->busy_ticks = calloc(cpus, sizeof(*follow->busy_ticks));
	follow->total_ticks = calloc(cpus, sizeof(*follow->total_ticks));
	follow->loads = calloc(cpus, sizeof(*follow->loads));
	if (!follow->others || !follow->ran || !follow->busy_ticks || !follow->total_ticks ||
	    !follow->loads) {
		sim_follow_free(follow);
		return -ENOMEM;
	}
	/* Until the first window is over, the rest is /proc/stat's last share (with the first
	 * client's own load in it). */
	for (uint32_t k = 0; k < cpus; k++) {
		follow->others[k] = sim_host_load_of(sim->host, k);
		sim_host_load_ticks(sim->host, k, &follow->busy_ticks[k], &follow->total_ticks[k]);
	}
	follow->fine_at = follow->window_at = now;
	follow->fine_pause = SIM_FOLLOW_SAMPLE_NS;
	sim->follow = follow;
	return 0;
}

static struct sim_followed *find(struct sim_follow *follow, pid_t pid)
{
	for (uint32_t i = 0; follow && i < follow->count; i++) {
		if (follow->processes[i].pid == pid)
			return &follow->processes[i];
	}
	return NULL;
}

static void forget(struct sim_follow *follow, struct sim_followed *process)
{
	close(process->procfd);
	if (process->task_clock >= 0)
		close(process->task_clock);
	*process = follow->processes[--follow->count];
}

static int start_following(struct sim *sim, pid_t pid)
{
	struct sim_follow *follow = sim->follow;
	struct sim_followed process = { .pid = pid, .holds = 1, .task_clock = -1 };
	uint32_t fields[2]; /* threads, last CPU */
	char path[32];
	int ret, procfd;

	if (follow->count == SIM_FOLLOW_MAX) {
		if (!follow->said_full)
			log_info("sim: following %u processes already; pid %d's load comes from "
				 "/proc/stat only", SIM_FOLLOW_MAX, (int)pid);
		follow->said_full = true;
		return -ENOSPC;
	}
	/* The process's CPU-time clock (Linux's MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED), what
	 * clock_getcpuclockid returns after a clock_getres that msrd's seccomp filter refuses). */
	process.clock = (clockid_t)((~(unsigned)pid << 3) | 2u);
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	procfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (procfd < 0)
		return -errno; /* gone already: nothing of it to follow */
	process.procfd = procfd;
	/* Its threads and where it ran, from one read of its stat. */
	if (read_stat_fields(procfd, (const unsigned[]){ STAT_THREADS, STAT_LAST_CPU }, fields,
			     2) < 0)
		fields[0] = fields[1] = 0;
	process.host_cpu = fields[1] < follow->host_cpus ? fields[1] : 0;
	process.task_clock = open_task_clock(&process, fields[0]);
	ret = read_cpu_time(&process, &process.cpu_ns);
	if (ret == 0 && exited(&process))
		ret = -ESRCH;
	if (ret < 0) {
		if (process.task_clock >= 0)
			close(process.task_clock);
		close(procfd);
		return ret;
	}
	follow->processes[follow->count++] = process;
	log_debug("sim: following pid %d's load by its %s (host CPU %u)", (int)pid,
		  process.task_clock >= 0 ? "task clock" : "CPU-time clock", process.host_cpu);
	return 0;
}

int sim_follow_change(struct sim *sim, pid_t pid, bool follow, uint64_t now)
{
	struct sim_followed *process;
	int ret;

	if (pid <= 0)
		return -EINVAL;
	if (sim->follow == NULL && follow) {
		ret = make_follow(sim, now);
		if (ret < 0)
			return ret;
	}
	process = find(sim->follow, pid);
	if (!follow) {
		if (process != NULL && --process->holds == 0) {
			log_debug("sim: no longer following pid %d", (int)pid);
			forget(sim->follow, process);
		}
		return 0;
	}
	if (process != NULL) {
		process->holds++;
		return 0;
	}
	return start_following(sim, pid);
}

/* The followed processes' CPU time since the last fine sample, as loads per host CPU, plus the
 * rest of the host's; what was placed on each CPU also counts as theirs there for the next
 * /proc/stat sample (so a process's spill is not counted again in the rest). Returns how long
 * the next sample waits for what the CPU time cost to read: the part that grows with a
 * process's threads (the check that a process still lives costs the same for any). */
static uint64_t fine_loads(struct sim_follow *follow, uint64_t interval)
{
	uint64_t spill = 0, pause = 0;

	memset(follow->loads, 0, follow->host_cpus * sizeof(*follow->loads));
	for (uint32_t i = 0; i < follow->count;) {
		struct sim_followed *process = &follow->processes[i];
		uint32_t *load = &follow->loads[process->host_cpu];
		uint64_t now = 0, share, room, began = cost_clock_ns();
		int read = read_cpu_time(process, &now);

		pause += (cost_clock_ns() - began) * (process->task_clock >= 0
							     ? SIM_FOLLOW_FINE_COST_SHARE
							     : SIM_FOLLOW_COST_SHARE);
		if (read < 0 || exited(process)) {
			/* Gone without closing its connection yet (a child may hold it): the rest
			 * of its time is lost to the fine view, /proc/stat still has it; a reused
			 * pid's clock is never read as its. */
			log_debug("sim: pid %d exited while a connection of it is open: no longer "
				  "followed (its pid may name another process now)",
				  (int)process->pid);
			forget(follow, process);
			continue;
		}
		share = now > process->cpu_ns ? (now - process->cpu_ns) * SIM_LOAD_ONE / interval : 0;
		process->cpu_ns = now;
		room = SIM_LOAD_ONE - *load;
		*load += (uint32_t)(share < room ? share : room);
		spill += share > room ? share - room : 0;
		i++;
	}
	/* A process busier than one CPU (threads) ran on others too: spread what does not fit. */
	for (uint32_t k = 0; spill > 0 && k < follow->host_cpus; k++) {
		uint64_t room = SIM_LOAD_ONE - follow->loads[k];
		uint64_t even = spill / (follow->host_cpus - k) + 1;
		uint64_t put = even < room ? even : room;

		follow->loads[k] += (uint32_t)put;
		spill = spill > put ? spill - put : 0;
	}
	for (uint32_t k = 0; k < follow->host_cpus; k++) {
		uint64_t total = (uint64_t)follow->loads[k] + follow->others[k];

		follow->ran[k] += (uint64_t)follow->loads[k] * interval / SIM_LOAD_ONE;
		follow->loads[k] = total < SIM_LOAD_ONE ? (uint32_t)total : SIM_LOAD_ONE;
	}
	return pause;
}

bool sim_follow_sample(struct sim *sim, uint64_t now, uint64_t *from, const uint32_t **loads,
		       uint32_t *host_cpus)
{
	struct sim_follow *follow = sim->follow;
	uint64_t pause;

	if (follow == NULL || follow->count == 0 || now < follow->fine_at + follow->fine_pause)
		return false;
	pause = fine_loads(follow, now - follow->fine_at);
	follow->fine_pause = pause > SIM_FOLLOW_SAMPLE_NS ? pause : SIM_FOLLOW_SAMPLE_NS;
	*from = follow->fine_at;
	follow->fine_at = now;
	*loads = follow->loads;
	*host_cpus = follow->host_cpus;
	return true;
}

void sim_follow_host_sampled(struct sim *sim, uint64_t now)
{
	struct sim_follow *follow = sim->follow;
	uint64_t window;

	if (follow == NULL)
		return;
	if (now >= follow->placed_at + follow->place_pause) {
		uint64_t began = cost_clock_ns();

		for (uint32_t i = 0; i < follow->count; i++) {
			struct sim_followed *process = &follow->processes[i];
			uint32_t cpu;

			if (read_last_cpu(process->procfd, &cpu) == 0 && cpu < follow->host_cpus)
				process->host_cpu = cpu;
		}
		follow->placed_at = now;
		follow->place_pause = (cost_clock_ns() - began) * SIM_FOLLOW_COST_SHARE;
	}
	window = now - follow->window_at;
	if (now < follow->window_at || window < SIM_FOLLOW_REST_NS)
		return;
	for (uint32_t k = 0; k < follow->host_cpus; k++) {
		uint64_t busy, total, theirs, share;

		sim_host_load_ticks(sim->host, k, &busy, &total);
		if (total > follow->total_ticks[k] && busy >= follow->busy_ticks[k]) {
			share = (busy - follow->busy_ticks[k]) * SIM_LOAD_ONE /
				(total - follow->total_ticks[k]);
			theirs = follow->ran[k] * SIM_LOAD_ONE / window;
			follow->others[k] = share > theirs ? (uint32_t)(share - theirs) : 0;
		}
		follow->busy_ticks[k] = busy;
		follow->total_ticks[k] = total;
		follow->ran[k] = 0;
	}
	follow->window_at = now;
}

bool sim_follow_active(const struct sim *sim)
{
	return sim->follow != NULL && sim->follow->count > 0;
}

void sim_follow_free(struct sim_follow *follow)
{
	if (follow == NULL)
		return;
	for (uint32_t i = 0; i < follow->count; i++) {
		close(follow->processes[i].procfd);
		if (follow->processes[i].task_clock >= 0)
			close(follow->processes[i].task_clock);
	}
	free(follow->others);
	free(follow->ran);
	free(follow->busy_ticks);
	free(follow->total_ticks);
	free(follow->loads);
	free(follow);
}
