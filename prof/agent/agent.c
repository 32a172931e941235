/*
 * libhaecer-prof-agent.so — haecer-prof's sampler where perf_event_open is not allowed
 * (`record --sampler timer`, or perf refused with EACCES/EPERM/ENOENT/ENOSYS). haecer-prof
 * preloads it into the unmodified program; it is inert unless HAECER_PROF_AGENT_FD names the
 * pipe haecer-prof reads.
 *
 * Each thread gets a timer on its own CPU clock (timer_create(CLOCK_THREAD_CPUTIME_ID),
 * SIGEV_THREAD_ID: the signal goes to that thread) firing every 1/HZ s of its CPU time: the main
 * thread from the constructor, every other one from pthread_create, which this library wraps.
 * The kernel checks CPU-time timers on its scheduler tick, so the real rate is at most CONFIG_HZ
 * per running thread; each sample therefore carries its thread's exact CPU time since the one
 * before (CLOCK_THREAD_CPUTIME_ID), and a thread's exit reports its total, so the report
 * charges CPU time exactly whatever the rate.
 *
 * The signal handler runs async-signal-safe code only: clock_gettime, getcpu, prctl, write, and
 * a frame-pointer walk bounded by the interrupted thread's stack (its bounds are found when the
 * timer is armed, never in the handler). A sample is one write(2) of at most PIPE_BUF bytes, so
 * samples of different threads never interleave; when the pipe is full the sample is counted
 * lost, never waited for.
 *
 * The signal is a real-time one, SIGRTMAX-3 unless HAECER_PROF_SIGNAL names another: the program
 * keeps all its other signals (SIGPROF, SIGALRM...) to itself. Should it install a handler for
 * that signal too (sigaction or signal, which this library wraps), the handler is kept and
 * called for every instance of the signal that is not one of the agent's timer expiries, and
 * sigaction reports it back as the program's; signals the program blocks are not sampled.
 *
 * Exported: pthread_create, sigaction and signal, and nothing else (agent.map).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "prof/prof.h"
#include "common/clock.h"
#include "common/number.h"

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))
_Static_assert(sizeof(struct prof_record_head) == 8 &&
		       8 + sizeof(struct prof_sample) + PROF_MAX_FRAMES * 8 <= PIPE_BUF,
	       "a sample with its whole call chain fits one atomic pipe write");

/* si_value of the agent's own timer expiries, to tell them from anything else on the signal */
#define TIMER_COOKIE 0x48505246

struct thread_state {
	bool armed;
	bool ending;
	timer_t timer;
	uint64_t stack_low, stack_high;
	uint64_t last_cpu_ns;
	char comm[16];
};

static TLS struct thread_state thread_state;

static struct {
	bool active;
	int fd;
	int signal_number;
	uint64_t period_ns;
	pid_t pid;
	uint64_t lost;      /* samples the full pipe refused (atomic) */
	int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
	/* The program's own disposition of the agent's signal. The handler copies it unlocked: a
	 * program changing it while the signal arrives from elsewhere may have the old or the new
	 * one called, as with the kernel's own disposition. */
	struct sigaction program_action;
} agent = { .fd = -1 };

/* One record, head and payload in one write (at most PIPE_BUF bytes: never interleaved with
 * another thread's); a full pipe loses it, counted. */
static void send_bytes(const void *record, size_t size)
{
	if (write(agent.fd, record, size) != (ssize_t)size)
		__atomic_add_fetch(&agent.lost, 1, __ATOMIC_RELAXED);
}

/* A small record (COMM, TASK_TIME, LOST). */
static void send_record(uint32_t type, const void *payload, size_t size)
{
	unsigned char buffer[sizeof(struct prof_record_head) + sizeof(struct prof_task_time) +
			     sizeof(struct prof_comm)];
	struct prof_record_head head = { .type = type, .size = (uint32_t)size };

	if (size > sizeof(buffer) - sizeof(head))
		return;
	memcpy(buffer, &head, sizeof(head));
	memcpy(buffer + sizeof(head), payload, size);
	send_bytes(buffer, sizeof(head) + size);
}

static pid_t current_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* The interrupted thread's frame-pointer chain: the ip, then each frame's return address, while
 * the frame pointer climbs inside the thread's stack above the interrupted stack pointer (all
 * mapped memory). Code without frame pointers ends the chain early, as perf's walk does.
 * Not instrumented by ASan: it reads other functions' frames on purpose. */
__attribute__((no_sanitize("address"))) static uint32_t
walk_stack(const ucontext_t *context, const struct thread_state *state, uint64_t *ips,
	   uint32_t max)
{
	uint32_t count = 0;
#if defined(__x86_64__)
	uint64_t ip = (uint64_t)context->uc_mcontext.gregs[REG_RIP];
	uint64_t fp = (uint64_t)context->uc_mcontext.gregs[REG_RBP];
	uint64_t sp = (uint64_t)context->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
	uint64_t ip = (uint64_t)context->uc_mcontext.pc;
	uint64_t fp = (uint64_t)context->uc_mcontext.regs[29];
	uint64_t sp = (uint64_t)context->uc_mcontext.sp;
#else
	uint64_t ip = 0, fp = 0, sp = 0;
#endif

	if (ip == 0)
		return 0;
	ips[count++] = ip;
	while (count < max && fp >= sp && fp >= state->stack_low && (fp & 7) == 0 &&
	       fp + 16 <= state->stack_high) {
		const uint64_t *frame = (const uint64_t *)(uintptr_t)fp;
		uint64_t next = frame[0], return_address = frame[1];
		if (return_address == 0)
			break;
		ips[count++] = return_address;
		if (next <= fp)
			break;
		fp = next;
	}
	return count;
}

static void chain_to_program(int signal_number, siginfo_t *info, void *context)
{
	struct sigaction action = agent.program_action;

	if (action.sa_flags & SA_SIGINFO) {
		if (action.sa_sigaction)
			action.sa_sigaction(signal_number, info, context);
		return;
	}
	if (action.sa_handler == SIG_IGN)
		return;
	if (action.sa_handler == SIG_DFL) {
		/* What the signal would have done without the agent: a real-time signal's default
		 * is to terminate. */
		struct sigaction fallback = { .sa_handler = SIG_DFL };
		sigemptyset(&fallback.sa_mask);
		agent.real_sigaction(signal_number, &fallback, NULL);
		raise(signal_number);
		return;
	}
	action.sa_handler(signal_number);
}

static void on_signal(int signal_number, siginfo_t *info, void *context)
{
	struct thread_state *state = &thread_state;
	int saved_errno = errno;
	/* the record head, then the sample and its call chain: one write */
	uint64_t words[1 + (sizeof(struct prof_sample) + 7) / 8 + PROF_MAX_FRAMES];
	struct prof_record_head *head = (struct prof_record_head *)words;
	struct prof_sample *sample = (struct prof_sample *)(words + 1);
	char comm[16] = { 0 };
	unsigned cpu = 0;

	if (info->si_code != SI_TIMER || info->si_value.sival_int != TIMER_COOKIE) {
		chain_to_program(signal_number, info, context);
		errno = saved_errno;
		return;
	}
	if (!agent.active || !state->armed || state->ending) {
		errno = saved_errno;
		return;
	}
	if (prctl(PR_GET_NAME, comm) == 0 && memcmp(comm, state->comm, sizeof(comm)) != 0) {
		struct prof_comm name = { .pid = (uint32_t)agent.pid,
					  .tid = (uint32_t)current_tid() };
		memcpy(state->comm, comm, sizeof(comm));
		memcpy(name.comm, comm, sizeof(name.comm));
		send_record(PROF_REC_COMM, &name, sizeof(name));
	}
	uint64_t cpu_ns = clock_ns_of(CLOCK_THREAD_CPUTIME_ID);
	if (syscall(SYS_getcpu, &cpu, NULL, NULL) < 0)
		cpu = 0;
	*sample = (struct prof_sample){
		.pid = (uint32_t)agent.pid,
		.tid = (uint32_t)current_tid(),
		.time_ns = clock_ns_of(CLOCK_MONOTONIC_RAW),
		.period_ns = cpu_ns - state->last_cpu_ns,
		.cpu = cpu,
	};
	state->last_cpu_ns = cpu_ns;
	sample->nr = walk_stack(context, state, sample->ips, PROF_MAX_FRAMES);
	*head = (struct prof_record_head){ .type = PROF_REC_SAMPLE,
					   .size = (uint32_t)(sizeof(*sample) + sample->nr * 8u) };
	send_bytes(words, sizeof(*head) + head->size);
	errno = saved_errno;
}

/* Arm the calling thread's CPU-time timer. Not async-signal-safe; called at thread start. */
static void arm_thread(void)
{
	struct thread_state *state = &thread_state;
	struct sigevent event;
	pthread_attr_t attributes;

	if (!agent.active || state->armed)
		return;
	if (pthread_getattr_np(pthread_self(), &attributes) == 0) {
		void *low;
		size_t size;
		if (pthread_attr_getstack(&attributes, &low, &size) == 0) {
			state->stack_low = (uint64_t)(uintptr_t)low;
			state->stack_high = state->stack_low + size;
		}
		pthread_attr_destroy(&attributes);
	}
	memset(&event, 0, sizeof(event));
	event.sigev_notify = SIGEV_THREAD_ID;
	event.sigev_signo = agent.signal_number;
	event.sigev_value.sival_int = TIMER_COOKIE;
	event._sigev_un._tid = current_tid();
	if (timer_create(CLOCK_THREAD_CPUTIME_ID, &event, &state->timer) < 0)
		return;
	struct itimerspec every = {
		.it_interval = { (time_t)(agent.period_ns / 1000000000ull),
				 (long)(agent.period_ns % 1000000000ull) },
	};
	every.it_value = every.it_interval;
	/* A thread's CPU time before the timer (the loader, a thread's start) counts too. */
	state->last_cpu_ns = 0;
	state->armed = true;
	if (timer_settime(state->timer, 0, &every, NULL) < 0) {
		state->armed = false;
		timer_delete(state->timer);
	}
}

/* The calling thread's end: its exact CPU time (the report scales its samples to it). */
static void disarm_thread(void)
{
	struct thread_state *state = &thread_state;

	if (!state->armed)
		return;
	state->ending = true;
	timer_delete(state->timer);
	state->armed = false;
	if (!agent.active)
		return;
	struct prof_task_time total = { .pid = (uint32_t)agent.pid, .tid = (uint32_t)current_tid(),
					.cpu = PROF_TASK_TIME_ALL_CPUS,
					.ns = clock_ns_of(CLOCK_THREAD_CPUTIME_ID) };
	send_record(PROF_REC_TASK_TIME, &total, sizeof(total));
}

struct start {
	void *(*routine)(void *);
	void *argument;
};

static void thread_cleanup(void *unused)
{
	(void)unused;
	disarm_thread();
}

static void *thread_trampoline(void *argument)
{
	struct start start = *(struct start *)argument;
	void *result;

	free(argument);
	arm_thread();
	pthread_cleanup_push(thread_cleanup, NULL);
	result = start.routine(start.argument);
	pthread_cleanup_pop(1);
	return result;
}

EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attributes,
			  void *(*routine)(void *), void *argument)
{
	if (!agent.real_pthread_create)
		agent.real_pthread_create = dlsym(RTLD_NEXT, "pthread_create");
	if (!agent.real_pthread_create)
		return ENOSYS;
	if (!agent.active)
		return agent.real_pthread_create(thread, attributes, routine, argument);
	struct start *start = malloc(sizeof(*start));
	if (!start)
		return agent.real_pthread_create(thread, attributes, routine, argument);
	*start = (struct start){ .routine = routine, .argument = argument };
	int status = agent.real_pthread_create(thread, attributes, thread_trampoline, start);
	if (status != 0)
		free(start);
	return status;
}

static int resolve_sigaction(void)
{
	if (!agent.real_sigaction)
		agent.real_sigaction = dlsym(RTLD_NEXT, "sigaction");
	return agent.real_sigaction ? 0 : -1;
}

EXPORT int sigaction(int signal_number, const struct sigaction *action, struct sigaction *old)
{
	if (resolve_sigaction() < 0) {
		errno = ENOSYS;
		return -1;
	}
	if (!agent.active || signal_number != agent.signal_number)
		return agent.real_sigaction(signal_number, action, old);
	/* The program's handler for the agent's signal: kept, and called for every instance of
	 * the signal that is not a sampling timer's. */
	if (old)
		*old = agent.program_action;
	if (action)
		agent.program_action = *action;
	return 0;
}

EXPORT sighandler_t signal(int signal_number, sighandler_t handler)
{
	struct sigaction action = { .sa_handler = handler, .sa_flags = SA_RESTART }, old;

	sigemptyset(&action.sa_mask);
	if (sigaction(signal_number, &action, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* A forked child has no timers and is not the profiled process: it stays quiet. */
static void after_fork_in_child(void)
{
	agent.active = false;
	if (agent.fd >= 0)
		close(agent.fd);
	agent.fd = -1;
}

static void agent_exit(void)
{
	if (!agent.active)
		return;
	disarm_thread();
	uint64_t lost = __atomic_load_n(&agent.lost, __ATOMIC_RELAXED);
	if (lost)
		send_record(PROF_REC_LOST, &lost, sizeof(lost));
}

__attribute__((constructor)) static void agent_start(void)
{
	const char *fd_text = getenv(PROF_AGENT_FD_ENV);
	const char *hz_text = getenv(PROF_AGENT_HZ_ENV);
	const char *signal_text = getenv(PROF_AGENT_SIGNAL_ENV);
	struct stat status;
	struct sigaction action;

	agent.real_pthread_create = dlsym(RTLD_NEXT, "pthread_create");
	if (resolve_sigaction() < 0 || !fd_text || !hz_text)
		return;
	/* The pipe is for this process only: neither a program it runs (the variable goes, the
	 * descriptor closes on exec) nor a fork of it. */
	uint64_t fd, hz, signal_number;
	bool given = number_parse(fd_text, 10, INT_MAX, &fd) &&
		     number_parse(hz_text, 10, PROF_MAX_HZ, &hz) && hz > 0;
	unsetenv(PROF_AGENT_FD_ENV);
	agent.fd = given ? (int)fd : -1;
	if (agent.fd < 0 || fstat(agent.fd, &status) < 0 || !S_ISFIFO(status.st_mode)) {
		agent.fd = -1;
		return;
	}
	fcntl(agent.fd, F_SETFD, FD_CLOEXEC);
	fcntl(agent.fd, F_SETFL, fcntl(agent.fd, F_GETFL) | O_NONBLOCK);
	if (!number_parse(signal_text, 10, (uint64_t)SIGRTMAX, &signal_number) ||
	    signal_number < (uint64_t)SIGRTMIN)
		signal_number = PROF_AGENT_DEFAULT_SIGNAL;
	agent.signal_number = (int)signal_number;
	agent.period_ns = 1000000000ull / hz;
	agent.pid = getpid();
	memset(&action, 0, sizeof(action));
	action.sa_sigaction = on_signal;
	action.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&action.sa_mask);
	if (agent.real_sigaction(agent.signal_number, &action, &agent.program_action) < 0)
		return;
	pthread_atfork(NULL, NULL, after_fork_in_child);
	atexit(agent_exit);
	agent.active = true;
	/* The first record tells haecer-prof the program is mapped: it reads its mappings. */
	struct prof_comm name = { .pid = (uint32_t)agent.pid, .tid = (uint32_t)agent.pid };
	prctl(PR_GET_NAME, name.comm);
	memcpy(thread_state.comm, name.comm, sizeof(name.comm));
	send_record(PROF_REC_COMM, &name, sizeof(name));
	arm_thread();
}
