/*
 * Page reads and round trips mixed on one energy counter never go backwards within one grant
 * (libclient/haecer_read.c, haecer__fold_page), and a grant change still shows.
 *
 * msrd writes its energy page at each sample (here 10 Hz, the policy's bound) while a round trip
 * reads msrd's total at that moment: a page read right after a round trip usually still holds
 * the sample before it. Before, readCounter through the page, then a forced exact round trip,
 * then the page again returned a value lower than the round trip's. Now:
 *  - page, round trip, page: each value at least the one before, ten times over; the page read
 *    that is behind returns the round trip's value and dates it at that round trip;
 *  - once msrd samples again the page passes the round trip's value and is read on;
 *  - after a round trip's fine value, a reload to a coarse grant still coarsens the next page
 *    read (whole joules): the new grant's page is not held to a value of the old grant.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "haecer/perfmon.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"

#define UNITS_PER_JOULE 65536ull
#define ROUNDS 10

#define HEADER                                                                                      \
	"version: 1\n"                                                                              \
	"default: deny\n"                                                                           \
	"energy_page: {max_rate_hz: 10}\n"                                                          \
	"msrs:\n"                                                                                   \
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"                     \
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"                   \
	"rules:\n"

static const char policy_fine[] = HEADER "  - {match: {uid: 0}, allow: [rapl]}\n";
static const char policy_coarse[] = HEADER
	"  - match: {uid: 0}\n"
	"    allow: [rapl]\n"
	"    energy: {min_interval_ms: 10, resolution_uj: 1000000}\n";

static const char *const arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
static struct msrd_server server;

static uint64_t read_page(struct haecer_counter *counter, uint64_t *age)
{
	uint64_t value = 0;

	assert_int_equal(haecer_counter_read_aged(counter, &value, age), 0);
	return value;
}

static uint64_t read_exact(struct haecer_context *ctx, struct haecer_counter *counter)
{
	uint64_t value = 0;

	assert_int_equal(haecer_context_set_energy_exact(ctx, true), 0);
	assert_int_equal(haecer_counter_read(counter, &value), 0);
	assert_int_equal(haecer_context_set_energy_exact(ctx, false), 0);
	return value;
}

static void test_mixed_reads_never_go_back(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	uint64_t page, exact, after, age, later, oldest = 0;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_counter_open_energy(ctx, 0, RAPL_PKG, &counter), 0);
	page = read_page(counter, &age);
	assert_true(msrd_wait_log(&server, "energy pages: sampling at 10 Hz", 5000));
	for (int round = 0; round < ROUNDS; round++) {
		page = read_page(counter, &age);
		oldest = age > oldest ? age : oldest;
		exact = read_exact(ctx, counter);
		after = read_page(counter, &age);
		assert_true(exact >= page);
		assert_true(after >= exact);
		usleep(3000);
	}
	/* The reads were the page's: as old as msrd's sample (up to 100 ms at 10 Hz), where a
	 * round trip's value is a few microseconds old. */
	assert_true(oldest > 1000000);
	/* msrd's next samples pass the round trip: the page is read on, and moves. */
	later = after;
	for (int i = 0; i < 300 && later <= after; i++) {
		usleep(10000);
		later = read_page(counter, &age);
	}
	assert_true(later > after);

	/* A fine round trip, then a reload to a coarse grant: the next read is coarse. */
	exact = read_exact(ctx, counter);
	for (int i = 0; i < 3 && exact % UNITS_PER_JOULE == 0; i++) /* 1 in 65536 */
		exact = read_exact(ctx, counter);
	assert_int_not_equal(exact % UNITS_PER_JOULE, 0);
	assert_int_equal(msrd_install_policy(&server, policy_coarse, 30000), 0);
	after = read_page(counter, &age);
	assert_int_equal(after % UNITS_PER_JOULE, 0);
	assert_int_equal(msrd_install_policy(&server, policy_fine, 30000), 0);
	haecer_context_close(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mixed_reads_never_go_back),
	};

	unsetenv(HAECER_ENERGY_EXACT_ENV);
	return MSRD_RUN_GROUP(&server, policy_fine, arguments, NULL, tests);
}
