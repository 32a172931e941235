/*
 * The timer sampler (`record --sampler timer`: CPU-time timers in libhaecer-prof-agent.so,
 * preloaded) charges functions and threads what the simulator says they drew, by the same checks
 * as test_prof_attribution's perf sampler (its source, built with PROF_SAMPLER "timer"): two
 * functions 3:1, two threads, a sleeping thread. Then a program with its own SIGPROF timer and
 * its own handler for the agent's signal still gets every signal it is due (the helper exits 3
 * otherwise) while it is profiled. Last, with perf_event_open refused (EACCES, by a seccomp
 * filter on this test and what it runs: the paranoid setting does not bind root), plain `record`
 * falls back to the timer sampler and its report says so.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

static int check_program_handlers(void);
#define PROF_SAMPLER "timer"
/* CPU-time timers fire on the kernel's tick: a program whose 3 ms + 1 ms cycle repeats in step
 * with a 250 Hz tick is seen at one phase of it (aliasing, said in haecer-prof(1)); the same 3:1
 * split in a cycle out of step is what this test measures. */
#define PROF_FUNCTIONS_MODE "functions-odd"
/* Likewise the sleeping thread: woken every 20 ms (five ticks) it can run between the same two
 * ticks every time and get no sample at all (the report then says so in a note). */
#define PROF_SLEEPER_MODE "sleeper-odd"
/* On a busy host the ticks that find the program running fall at random phases of it: the
 * function shares get a random sample's error on top of the 5 % (the threads' shares do not:
 * each thread's exact CPU time is reported at its end). */
#define PROF_TICK_SAMPLER 1
#define PROF_EXTRA_CHECK check_program_handlers
#include "tests/prof/test_prof_attribution.c"

/* From here on perf_event_open fails with EACCES in this process and its children. */
static int refuse_perf(void)
{
	struct sock_filter filter[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog program = { .len = sizeof(filter) / sizeof(filter[0]), .filter = filter };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) < 0)
		return -errno;
	return 0;
}

static int check_fallback(void)
{
	if (refuse_perf() < 0) {
		fprintf(stderr, "cannot install the seccomp filter: fallback not tested\n");
		return 1;
	}
	return short_profile_says(data_path, NULL, "sampler: timer (",
				  "record did not fall back to the timer sampler");
}

static int check_program_handlers(void)
{
	char *out = NULL, *folded = NULL;
	int failed = 1;

	if (record("handlers", &out) != 0)
		goto out;
	if (!strstr(out, "handlers profiling_ticks=")) {
		fprintf(stderr, "the program did not report its handlers:\n%s\n", out);
		goto out;
	}
	fprintf(stderr, "%s", strstr(out, "handlers "));
	if (report("folded", &folded) != 0 || folded_joules(folded, "burn_heavy") <= 0) {
		fprintf(stderr, "no samples in burn_heavy:\n%s\n", folded ? folded : "");
		goto out;
	}
	failed = check_fallback();
out:
	free(out);
	free(folded);
	return failed;
}
