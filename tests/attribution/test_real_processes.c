/*
 * tests/attribution/test_real_processes.c — the attribution engine on the real /proc with two
 * real processes, one busy and one mostly asleep, and the package energy from the real msrd on
 * the simulated CPU: the busy one's share dominates in proportion to its CPU time, and the
 * processes' shares with idle and other add up to the package's energy within the stated ±.
 */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "attribution/attribution.h"
#include "haecer/haecer.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"

static const char policy[] = POLICY_HEADER POLICY_RAPL_MSRS
	"rules:\n"
	"  - {match: {any: true}, allow: [rapl]}\n";

static pid_t start_child(uint64_t spin_ns, useconds_t sleep_us)
{
	pid_t pid = harness_start_duty_cycle(spin_ns, sleep_us);

	assert_true(pid > 0);
	return pid;
}

static double package_joules(struct haecer_counter *counter)
{
	struct haecer_energy_reading reading;
	assert_int_equal(haecer_counter_read_energy(counter, &reading), 0);
	return reading.joules;
}

static void test_busy_and_sleepy(void **state)
{
	struct msrd_server server;
	struct haecer_context *ctx = NULL;
	struct haecer_counter *energy = NULL;
	struct attribution *engine = NULL;
	struct attribution_interval interval;
	const char *arguments[] = { NULL };

	(void)state;
	assert_int_equal(msrd_start(&server, policy, arguments), 0);
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_counter_open_energy(ctx, 0, HAECER_ENERGY_PKG, &energy), 0);
	assert_int_equal(attribution_open(&engine, NULL), 0);

	pid_t busy = start_child(50000000, 0);
	pid_t sleepy = start_child(2000000, 98000);
	assert_int_equal(attribution_step(engine, NULL, 0, &interval), 0);
	double before = package_joules(energy);
	usleep(1500000);
	double joules = package_joules(energy) - before;
	assert_int_equal(attribution_step(engine, &joules, 1, &interval), 0);

	const struct attribution_process *hot = attribution_find(engine, busy);
	const struct attribution_process *cold = attribution_find(engine, sleepy);
	assert_non_null(hot);
	assert_non_null(cold);
	fprintf(stderr,
		"package %.3f J over %.3f s: busy %.3f s CPU %.3f J ±%.3f, sleepy %.3f s CPU %.3f "
		"J ±%.3f, processes %.3f J, idle %.3f J, other %.3f J, ± %.3f J\n",
		joules, interval.interval_ns / 1e9, hot->interval_cpu_ns / 1e9, hot->interval_joules,
		hot->error_joules, cold->interval_cpu_ns / 1e9, cold->interval_joules,
		cold->error_joules, interval.process_joules, interval.idle_joules,
		interval.other_joules, interval.error_joules);
	assert_true(joules > 0);
	assert_true(hot->interval_cpu_ns > 5 * cold->interval_cpu_ns);
	assert_true(hot->interval_joules > 5 * cold->interval_joules);
	/* In double: cmocka's assert_float_equal compares floats, whose step near a ratio of 50 is
	 * 4e-6, so two doubles equal to 1e-14 failed an epsilon of 1e-6 (a fresh-clone check:
	 * 51.559296 != 51.559303). */
	if (hot->package == cold->package && cold->interval_cpu_ns > 0) {
		double by_joules = hot->interval_joules / cold->interval_joules;
		double by_cpu = hot->interval_cpu_ns / cold->interval_cpu_ns;

		if (fabs(by_joules - by_cpu) > 1e-9 * by_cpu)
			fail_msg("joules in the ratio %.12f, CPU time in %.12f", by_joules, by_cpu);
	}
	/* The busy process spun through the interval on one CPU (less than all of it when other
	 * work shares the CPUs). */
	assert_true(hot->interval_cpu_ns > 0.2 * interval.interval_ns);
	double sum = interval.process_joules + interval.idle_joules + interval.other_joules;
	assert_true(sum >= joules - interval.error_joules - 1e-9);
	assert_true(sum <= joules + interval.error_joules + 1e-9);
	assert_true(interval.error_joules < joules);

	kill(busy, SIGKILL);
	kill(sleepy, SIGKILL);
	waitpid(busy, NULL, 0);
	waitpid(sleepy, NULL, 0);
	attribution_close(engine);
	haecer_counter_free(energy);
	haecer_context_close(ctx);
	assert_int_equal(msrd_stop(&server), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_busy_and_sleepy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
