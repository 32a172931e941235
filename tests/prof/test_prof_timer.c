/*
 * The timer sampler (`record --sampler timer`: CPU-time timers in libhaecer-prof-agent.so,
 * preloaded) charges functions and threads what the simulator says they drew, by the same checks
 * as test_prof_attribution's perf sampler (its source, built with PROF_SAMPLER "timer"): two
 * functions 3:1, two threads, a sleeping thread. Then a program with its own SIGPROF timer and
 * its own handler for the agent's signal still gets every signal it is due (the helper exits 3
 * otherwise) while it is profiled.
 */
static int check_program_handlers(void);
#define PROF_SAMPLER "timer"
/* CPU-time timers fire on the kernel's tick: a program whose 3 ms + 1 ms cycle repeats in step
 * with a 250 Hz tick is seen at one phase of it (aliasing, said in haecer-prof(1)); the same 3:1
 * split in a cycle out of step is what this test measures. */
#define PROF_FUNCTIONS_MODE "functions-odd"
#define PROF_EXTRA_CHECK check_program_handlers
#include "tests/prof/test_prof_attribution.c"

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
	failed = 0;
out:
	free(out);
	free(folded);
	return failed;
}
