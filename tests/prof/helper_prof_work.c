/*
 * A program with known behaviour for haecer-prof's tests (built with frame pointers, -g):
 *
 *   helper_prof_work functions SECONDS   one thread: burn_heavy 3 ms, burn_light 1 ms, repeat
 *   helper_prof_work functions-odd SECONDS  the same 3:1 in 2.7 ms and 0.9 ms: a cycle out of
 *                                        step with a 4 ms (250 Hz) or 10 ms kernel tick, on
 *                                        which CPU-time timers fire
 *   helper_prof_work threads SECONDS     thread "heavy" busy all the time, thread "light" busy
 *                                        1 ms in every 2 ms
 *   helper_prof_work sleeper SECONDS     thread "busy" busy, thread "sleepy" busy 1 ms in
 *                                        every 20 ms
 *   helper_prof_work sleeper-odd SECONDS the same with "sleepy" busy 1.7 ms in every 18.3 ms:
 *                                        20 ms is five 4 ms ticks, and a thread woken by a
 *                                        timer each 20 ms can run between the same two ticks
 *                                        every time, never seen by a CPU-time timer
 *   helper_prof_work main-exits SECONDS  the first thread starts thread "late", busy all the
 *                                        time, and ends at once (pthread_exit): the program
 *                                        runs on in "late" after its first thread is gone
 *   helper_prof_work handlers SECONDS    as functions, with its own SIGPROF profiling timer
 *                                        and its own handler for the timer sampler's signal
 *                                        ($HAECER_PROF_SIGNAL, else SIGRTMAX-3), which it sends
 *                                        itself; exits 3 unless every handler ran as due
 *
 * It prints its own truth, the CPU time each function and thread really used
 * (CLOCK_THREAD_CPUTIME_ID), as `truth function NAME NS` and `truth thread NAME TID NS`, so a test
 * can compare the profile's shares with what happened rather than with what was intended.
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

static uint64_t thread_cpu_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static volatile uint64_t sink;

/* The hot loop, always inlined into spin(): samples land in an inlined frame, which the
 * profile shows as mix called from spin. */
static inline __attribute__((always_inline)) uint64_t mix(uint64_t x)
{
	for (int i = 0; i < 20000; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

/* Spin on arithmetic for `ns` of this thread's CPU time; the clock is read only every few
 * thousand iterations so nearly every sample lands in the caller's own code. */
static __attribute__((noinline)) void spin(uint64_t ns)
{
	uint64_t end = thread_cpu_ns() + ns, x = sink;

	while (thread_cpu_ns() < end)
		x = mix(x);
	sink = x;
}

static uint64_t heavy_ns, light_ns;

static uint64_t heavy_spin_ns = 3000000, light_spin_ns = 1000000;

static __attribute__((noinline)) void burn_heavy(void)
{
	uint64_t start = thread_cpu_ns();

	spin(heavy_spin_ns);
	heavy_ns += thread_cpu_ns() - start;
}

static __attribute__((noinline)) void burn_light(void)
{
	uint64_t start = thread_cpu_ns();

	spin(light_spin_ns);
	light_ns += thread_cpu_ns() - start;
}

struct worker {
	const char *name;
	uint64_t busy_ns, period_ns; /* busy this much of every period; period 0: always */
	uint64_t until_ns;
	pid_t tid;
	uint64_t cpu_ns;
};

static __attribute__((noinline)) void work_loop(struct worker *worker)
{
	while (clock_monotonic_ns() < worker->until_ns) {
		if (worker->period_ns == 0) {
			spin(1000000);
			continue;
		}
		uint64_t start = clock_monotonic_ns();
		spin(worker->busy_ns);
		uint64_t used = clock_monotonic_ns() - start;
		if (used < worker->period_ns) {
			struct timespec pause = { 0, (long)(worker->period_ns - used) };
			nanosleep(&pause, NULL);
		}
	}
}

static void *worker_main(void *argument)
{
	struct worker *worker = argument;

	pthread_setname_np(pthread_self(), worker->name);
	worker->tid = (pid_t)syscall(SYS_gettid);
	work_loop(worker);
	worker->cpu_ns = thread_cpu_ns();
	return NULL;
}

/* The last thread of main-exits: it says its own truth, since nobody is left to join it. */
static void *late_main(void *argument)
{
	struct worker *worker = argument;

	worker_main(worker);

	printf("truth thread %s %d %llu\n", worker->name, (int)worker->tid,
	       (unsigned long long)worker->cpu_ns);
	fflush(stdout);
	return NULL;
}

static int two_threads(struct worker *a, struct worker *b)
{
	pthread_t threads[2];

	if (pthread_create(&threads[0], NULL, worker_main, a) != 0 ||
	    pthread_create(&threads[1], NULL, worker_main, b) != 0)
		return 1;
	pthread_join(threads[0], NULL);
	pthread_join(threads[1], NULL);
	printf("truth thread %s %d %llu\n", a->name, (int)a->tid, (unsigned long long)a->cpu_ns);
	printf("truth thread %s %d %llu\n", b->name, (int)b->tid, (unsigned long long)b->cpu_ns);
	return 0;
}

static volatile sig_atomic_t profiling_ticks, own_signals;

static void on_profiling_tick(int signal_number)
{
	(void)signal_number;
	profiling_ticks++;
}

static void on_own_signal(int signal_number, siginfo_t *info, void *context)
{
	(void)signal_number;
	(void)context;
	if (info->si_code == SI_QUEUE && info->si_value.sival_int == 77)
		own_signals++;
}

/* A program that profiles itself with SIGPROF and uses the agent's real-time signal. */
static int own_handlers(uint64_t until)
{
	const char *text = getenv("HAECER_PROF_SIGNAL");
	int own = text ? atoi(text) : SIGRTMAX - 3;
	struct sigaction action, back;
	int sent = 0;

	signal(SIGPROF, on_profiling_tick);
	memset(&action, 0, sizeof(action));
	action.sa_sigaction = on_own_signal;
	action.sa_flags = SA_SIGINFO;
	sigemptyset(&action.sa_mask);
	if (sigaction(own, &action, NULL) < 0 || sigaction(own, NULL, &back) < 0 ||
	    back.sa_sigaction != on_own_signal) {
		fprintf(stderr, "sigaction does not give back this program's handler\n");
		return 3;
	}
	struct itimerval every = { { 0, 1000 }, { 0, 1000 } };
	setitimer(ITIMER_PROF, &every, NULL);
	while (clock_monotonic_ns() < until) {
		burn_heavy();
		burn_light();
		if (sent < 100 && sigqueue(getpid(), own, (union sigval){ .sival_int = 77 }) == 0)
			sent++;
	}
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_PROF, &off, NULL);
	printf("truth function burn_heavy %llu\n", (unsigned long long)heavy_ns);
	printf("handlers profiling_ticks=%d own_signals=%d sent=%d\n", (int)profiling_ticks,
	       (int)own_signals, sent);
	return profiling_ticks > 0 && own_signals == sent && sent > 0 ? 0 : 3;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s functions|threads|sleeper|sleeper-odd|main-exits|handlers "
			"SECONDS\n", argv[0]);
		return 2;
	}
	uint64_t duration = (uint64_t)(atof(argv[2]) * 1e9);
	uint64_t until = clock_monotonic_ns() + duration;

	if (strcmp(argv[1], "functions-odd") == 0) {
		heavy_spin_ns = 2700000;
		light_spin_ns = 900000;
	}
	if (strcmp(argv[1], "functions") == 0 || strcmp(argv[1], "functions-odd") == 0) {
		while (clock_monotonic_ns() < until) {
			burn_heavy();
			burn_light();
		}
		printf("truth function burn_heavy %llu\n", (unsigned long long)heavy_ns);
		printf("truth function burn_light %llu\n", (unsigned long long)light_ns);
		return 0;
	}
	if (strcmp(argv[1], "threads") == 0) {
		struct worker heavy = { .name = "heavy", .until_ns = until };
		struct worker light = { .name = "light", .busy_ns = 1000000, .period_ns = 2000000,
					.until_ns = until };
		return two_threads(&heavy, &light);
	}
	if (strcmp(argv[1], "sleeper") == 0 || strcmp(argv[1], "sleeper-odd") == 0) {
		bool odd = strcmp(argv[1], "sleeper-odd") == 0;
		struct worker busy = { .name = "busy", .until_ns = until };
		struct worker sleepy = { .name = "sleepy", .busy_ns = odd ? 1700000 : 1000000,
					 .period_ns = odd ? 18300000 : 20000000,
					 .until_ns = until };
		return two_threads(&busy, &sleepy);
	}
	if (strcmp(argv[1], "main-exits") == 0) {
		static struct worker late;
		pthread_t thread;
		late = (struct worker){ .name = "late", .until_ns = until };
		if (pthread_create(&thread, NULL, late_main, &late) != 0)
			return 1;
		pthread_exit(NULL);
	}
	if (strcmp(argv[1], "handlers") == 0)
		return own_handlers(until);
	fprintf(stderr, "unknown mode %s\n", argv[1]);
	return 2;
}
