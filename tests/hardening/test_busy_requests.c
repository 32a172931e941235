/*
 * Requests whose times would make msrd busy (issue 14, item 2). A schedule period near 2^64
 * wrapped msrd's next deadline (origin + (n + 1) * period) into the past, and its timer fired at
 * once for as long as the client stayed: a core at 100 %, every other client slower, every
 * energy measurement of the machine skewed. Now:
 *   - periods of 2^64 - 1, 2^63, and a day and a nanosecond are refused (INVALID, with a text
 *     naming the bounds); a period of exactly a day is accepted;
 *   - with the longest schedule running, msrd stays idle: it uses well under half of one second
 *     of CPU time in one second of wall time (a spinning loop would use all of it);
 *   - a simulated advance of more than a week is refused the same way (it was cut into energy
 *     sampling steps: 2^64 ns would have been billions of them).
 * A bystander reads throughout.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "proto/wire.h"
#include "proto/wire_sim.h"
#include "tests/hardening/hardening.h"
#include "harness/process_figures.h"
#include "tests/lib/msrd_group.h"

#define DAY_NS (86400ull * 1000000000ull)

static struct msrd_server server;
static struct haecer_conn *conn;
static struct bystander bystander;

HARDENING_BYSTANDER_FIXTURES(server, bystander)

/* msrd's user + system CPU time so far, in clock ticks (/proc/PID/stat fields 14 and 15). */
static unsigned long long cpu_ticks(pid_t pid)
{
	long long ticks = harness_process_cpu_ticks(pid);

	assert_true(ticks >= 0);
	return (unsigned long long)ticks;
}

static void test_periods_are_bounded(void **state)
{
	static const uint64_t refused[] = { UINT64_MAX, 1ull << 63, DAY_NS + 1, 999999 };
	struct haecer_msr_op read_tsc = { .kind = HAECER_MSR_READ, .address = 0x10 };
	struct haecer_schedule_spec spec = { .major = 1, .minor = 7, .capacity = 4 };
	unsigned long long before;
	long ticks_per_second = sysconf(_SC_CLK_TCK);
	uint32_t id;

	(void)state;
	assert_int_equal(haecer_batch_register(conn, &read_tsc, 1, &spec.handle), 0);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		spec.period_ns = refused[i];
		assert_int_equal(haecer_schedule_start(conn, &spec, &id, NULL), -EINVAL);
		assert_non_null(strstr(haecer_conn_error(conn), "at most a day"));
	}
	spec.period_ns = DAY_NS;
	assert_int_equal(haecer_schedule_start(conn, &spec, &id, NULL), 0);
	/* Let the first period's work settle, then watch a second of idling. */
	usleep(100000);
	before = cpu_ticks(server.pid);
	sleep(1);
	assert_true((cpu_ticks(server.pid) - before) * 2 < (unsigned long long)ticks_per_second);
	assert_int_equal(haecer_schedule_stop(conn, id), 0);
	assert_true(bystander_progress(&bystander, 3));
}

static void test_sim_advance_is_bounded(void **state)
{
	uint64_t now = 0;

	(void)state;
	assert_int_equal(haecer_sim_advance(conn, UINT64_MAX, &now), -EINVAL);
	assert_int_equal(haecer_sim_advance(conn, WIRE_SIM_MAX_ADVANCE_NS + 1, &now), -EINVAL);
	assert_int_equal(haecer_sim_advance(conn, 1000000, &now), 0);
	assert_true(now >= 1000000);
	assert_true(bystander_progress(&bystander, 3));
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-virtual-time", NULL };
	const struct CMUnitTest tests[] = {
		BYSTANDER_TEST(test_periods_are_bounded),
		BYSTANDER_TEST(test_sim_advance_is_bounded),
	};

	return MSRD_RUN_GROUP(&server, HARDENING_POLICY, arguments, &conn, tests);
}
