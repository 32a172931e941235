/*
 * Energy counter reads through msrd's energy page (libclient/haecer_page.c), on the simulated
 * CPU in real time:
 *  - with $HAECER_ENERGY_EXACT=1 a context never asks for a page (msrd never starts sampling
 *    for one) and reads are round trips;
 *  - by default the first read maps the page (msrd starts sampling), haecer_counter_read_aged
 *    says how old each reading is, and the value is never ahead of msrd's exact total;
 *  - the API switch turns round trips back on for a context already using the page;
 *  - a policy reload that makes the grant coarse coarsens the next read; one that takes the
 *    grant away makes it fail — never a fine value from the old page;
 *  - msrd restarting on the same socket: the page is DEAD, the context reconnects and reads on.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "haecer/perfmon.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"

#define UNITS_PER_JOULE 65536ull

#define HEADER                                                                                      \
	"version: 1\n"                                                                              \
	"default: deny\n"                                                                           \
	"msrs:\n"                                                                                   \
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"                     \
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"                   \
	"  - {name: TSC, address: 0x10, read: true, set: time}\n"                                   \
	"rules:\n"

static const char policy_fine[] = HEADER
	"  - {match: {uid: 0}, allow: [rapl, time], capabilities: [sim_control]}\n";
static const char policy_coarse[] = HEADER
	"  - match: {uid: 0}\n"
	"    allow: [rapl, time]\n"
	"    energy: {min_interval_ms: 10, resolution_uj: 1000000}\n";
static const char policy_none[] = HEADER "  - {match: {uid: 0}, allow: [time]}\n";

static const char *const arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
static struct msrd_server server;

static void open_energy(struct haecer_context **ctx, struct haecer_counter **counter)
{
	assert_int_equal(haecer_context_open(server.socket_path, ctx), 0);
	assert_int_equal(haecer_counter_open_energy(*ctx, 0, RAPL_PKG, counter), 0);
}

static void test_exact_by_environment(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	uint64_t value, age;

	(void)state;
	setenv(HAECER_ENERGY_EXACT_ENV, "1", 1);
	open_energy(&ctx, &counter);
	unsetenv(HAECER_ENERGY_EXACT_ENV);
	for (int i = 0; i < 5; i++)
		assert_int_equal(haecer_counter_read_aged(counter, &value, &age), 0);
	assert_true(value > 0);
	assert_true(age < 1000000000ull);
	assert_false(msrd_log_contains(&server, "energy pages: sampling at"));
	haecer_context_close(ctx);
}

static void test_page_reads_and_opt_out(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	uint64_t value, later, age;
	size_t sampling;

	(void)state;
	open_energy(&ctx, &counter);
	assert_int_equal(haecer_counter_read_aged(counter, &value, &age), 0);
	assert_true(msrd_wait_log(&server, "energy pages: sampling at 1000 Hz", 5000));
	assert_true(age < 1000000000ull);
	/* The page moves with msrd's sampler: a loaded host may delay it by many periods. */
	later = value;
	for (int i = 0; i < 200 && later <= value; i++) {
		usleep(10000);
		assert_int_equal(haecer_counter_read_aged(counter, &later, &age), 0);
	}
	assert_true(later > value);
	assert_true(age < 1000000000ull);
	/* The API switch: round trips from now on (the page is not asked for again). */
	sampling = msrd_log_count(&server, "energy pages: sampling at");
	assert_int_equal(haecer_context_set_energy_exact(ctx, true), 0);
	assert_int_equal(haecer_counter_read(counter, &value), 0);
	assert_true(value >= later);
	assert_int_equal(msrd_log_count(&server, "energy pages: sampling at"), sampling);
	haecer_context_close(ctx);
	assert_true(msrd_wait_log(&server, "sampling at 0 Hz (none held)", 5000));
}

static void test_reload_coarsens_or_fails(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	uint64_t value;

	(void)state;
	open_energy(&ctx, &counter);
	assert_int_equal(haecer_counter_read(counter, &value), 0);
	assert_int_equal(msrd_install_policy(&server, policy_coarse, 30000), 0);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(haecer_counter_read(counter, &value), 0);
		assert_int_equal(value % UNITS_PER_JOULE, 0);
		usleep(2000);
	}
	assert_int_equal(msrd_install_policy(&server, policy_none, 30000), 0);
	assert_int_equal(haecer_counter_read(counter, &value), -EPERM);
	assert_int_equal(msrd_install_policy(&server, policy_fine, 30000), 0);
	haecer_context_close(ctx);
}

static void test_restart_reconnects(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	uint64_t value;
	int status;

	(void)state;
	open_energy(&ctx, &counter);
	assert_int_equal(haecer_counter_read(counter, &value), 0);
	assert_int_equal(msrd_signal(&server, SIGTERM), 0);
	assert_int_equal(waitpid(server.pid, &status, 0), server.pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(msrd_launch(&server, arguments), 0);
	/* The old page says DEAD: the context reconnects to the new msrd. The new simulated CPU's
	 * register started again from 0, which no package can draw in the time: the counter's
	 * value cannot go on, and the read says so instead of jumping back (or by 2^32 units). */
	assert_int_equal(haecer_counter_read(counter, &value), -EIDRM);
	assert_non_null(strstr(haecer_error_detail(), "lost its continuity when msrd restarted"));
	assert_int_equal(haecer_counter_read(counter, &value), -EIDRM);
	/* A counter set up on the new msrd reads on (after the first energy update: a read before
	 * it is rightly 0). */
	haecer_counter_free(counter);
	assert_int_equal(haecer_counter_open_energy(ctx, 0, RAPL_PKG, &counter), 0);
	value = 0;
	for (int i = 0; i < 200 && value == 0; i++) {
		usleep(10000);
		assert_int_equal(haecer_counter_read(counter, &value), 0);
	}
	assert_true(value > 0);
	assert_true(msrd_wait_log(&server, "energy pages: sampling at 1000 Hz", 5000));
	haecer_context_close(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_by_environment),
		cmocka_unit_test(test_page_reads_and_opt_out),
		cmocka_unit_test(test_reload_coarsens_or_fails),
		cmocka_unit_test(test_restart_reconnects),
	};

	return MSRD_RUN_GROUP(&server, policy_fine, arguments, NULL, tests);
}
