/*
 * tests/attribution/test_fork_storm.c — thousands of short-lived processes between two
 * snapshots, and more live processes than the engine's table holds, on the real /proc: the
 * totals still add up (processes + idle + other = the package's energy within the ±), the
 * short-lived ones are in no process row (their time is other, or their cgroup's when cgroup v2
 * accounting is there), the table stays at its bound, and memory does not grow storm after storm.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "attribution/attribution.h"
#include "harness/msrd_harness.h"
#include "harness/process_figures.h"

#define TABLE 256

/* Sanitizers keep freed memory in quarantine: RSS says nothing of the engine's bound there. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_MEANINGFUL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_MEANINGFUL 0
#endif
#endif
#ifndef RSS_MEANINGFUL
#define RSS_MEANINGFUL 1
#endif
#define SLEEPERS 300

/* count children that spin 0.1 ms and exit, reaped as they go (the sleepers are not waited
 * for: waitpid on each storm child's own pid). */
static void storm(unsigned count)
{
	pid_t batch[64];
	for (unsigned i = 0; i < count; i += 64) {
		unsigned n = count - i < 64 ? count - i : 64;
		for (unsigned j = 0; j < n; j++) {
			batch[j] = fork();
			assert_true(batch[j] >= 0);
			if (batch[j] == 0) {
				harness_spin_ns(100000);
				_exit(0);
			}
		}
		for (unsigned j = 0; j < n; j++)
			waitpid(batch[j], NULL, 0);
	}
}

static void check_sums(const struct attribution_interval *interval, double joules)
{
	double sum = interval->process_joules + interval->idle_joules + interval->other_joules;
	assert_true(sum >= joules - interval->error_joules - 1e-9);
	assert_true(sum <= joules + interval->error_joules + 1e-9);
	assert_true(interval->processes <= TABLE);
}

static void test_fork_storm(void **state)
{
	struct attribution *engine = NULL;
	struct attribution_interval interval;
	struct attribution_config config = { .max_processes = TABLE };
	/* Forks are slow under sanitizers and valgrind: fewer, smaller storms there. */
	bool small = harness_small_scale() || !RSS_MEANINGFUL;
	unsigned storms = small ? 2 : 5, children = small ? 300 : 2000;
	pid_t sleepers[SLEEPERS];
	double joules = 100;
	long rss_first = 0;

	(void)state;
	for (unsigned i = 0; i < SLEEPERS; i++) {
		sleepers[i] = fork();
		assert_true(sleepers[i] >= 0);
		if (sleepers[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			pause();
			_exit(0);
		}
	}
	assert_int_equal(attribution_open(&engine, &config), 0);
	assert_int_equal(attribution_step(engine, NULL, 0, &interval), 0);
	for (unsigned round = 0; round < storms; round++) {
		storm(children);
		assert_int_equal(attribution_step(engine, &joules, 1, &interval), 0);
		check_sums(&interval, joules);
		/* Over the bound: the table holds TABLE processes, the rest are counted. */
		assert_int_equal(interval.processes, TABLE);
		assert_true(interval.dropped >= SLEEPERS - TABLE);
		if (round == 0)
			rss_first = harness_process_status_kib(getpid(), "VmRSS:");
	}
	long rss_last = harness_process_status_kib(getpid(), "VmRSS:");
	fprintf(stderr, "%u storms of %u processes: RSS %ld kB after the first, %ld kB after the "
		"last; other %.3f J of %.3f J, cgroup accounting %s\n", storms, children, rss_first,
		rss_last, interval.other_joules, joules, interval.cgroup_accounting ? "yes" : "no");
	/* Under valgrind the RSS is valgrind's as well: it grows with what it tracks. */
	if (RSS_MEANINGFUL && !harness_valgrind())
		assert_true(rss_last - rss_first < 1024);

	for (unsigned i = 0; i < SLEEPERS; i++) {
		kill(sleepers[i], SIGKILL);
		waitpid(sleepers[i], NULL, 0);
	}
	attribution_close(engine);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_storm),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
