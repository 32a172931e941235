/*
 * An energy page's value is never newer than the sample time it is published with.
 *
 * msrd folds every read of an energy register into its total: its own samples, and clients'
 * round trips. The page pairs a total with the time of msrd's sample. Before, it published the
 * current total, which a round trip may have moved on since the last sample, with that sample's
 * older time: on a page that precise edges publish every update (for another register) while
 * its own sampling runs at the policy's 10 Hz, a page reader got a value holding an update from
 * after the time it was dated at (by up to 100 ms), and a region placed that update early
 * without saying so. Now the page publishes the total as of the sample.
 *
 * On the simulated Sandy Bridge, with precise edges on for PKG (page sampling 10 Hz): another
 * context reads PP0 by round trip; then this context's page reads of PP0, once they show that
 * value, must be dated no earlier than the PP0 update the round trip's value holds (the
 * simulator's truth: its last update before the round trip began).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "haecer/perfmon.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"energy_page: {max_rate_hz: 10}\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"  - {name: PP0_ENERGY_STATUS, address: 0x639, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl], capabilities: [sim_control]}\n";

static const char *const arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
					 "--sim-seed", "5", NULL };
static struct msrd_server server;

static void test_page_value_not_newer_than_its_time(void **state)
{
	struct haecer_context *pages, *exact;
	struct haecer_counter *pkg, *pp0, *pp0_exact;
	struct haecer_energy_reading reading;
	struct haecer_conn *conn;
	unsigned rounds = harness_small_scale() ? 4 : 12, checked = 0;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_context_open(server.socket_path, &pages), 0);
	assert_int_equal(haecer_counter_open_energy(pages, 0, RAPL_PKG, &pkg), 0);
	assert_int_equal(haecer_counter_open_energy(pages, 0, RAPL_PP0, &pp0), 0);
	assert_int_equal(haecer_context_open(server.socket_path, &exact), 0);
	assert_int_equal(haecer_context_set_energy_exact(exact, true), 0);
	assert_int_equal(haecer_counter_open_energy(exact, 0, RAPL_PP0, &pp0_exact), 0);
	/* Precise edges for PKG: the page is published at each of its updates. */
	assert_int_equal(haecer_counter_read_energy(pkg, &reading), 0);
	assert_true(msrd_wait_log(&server, "precise edges on", 5000));
	for (unsigned round = 0; round < rounds; round++) {
		struct haecer_sim_energy_at truth;
		uint64_t began = clock_monotonic_raw_ns(), value = 0, paged = 0, age = 0, dated = 0;

		assert_int_equal(haecer_counter_read(pp0_exact, &value), 0);
		/* The PP0 update that value holds for certain. */
		assert_int_equal(haecer_sim_energy_at(conn, 0, RAPL_DOMAIN_PP0, began, &truth), 0);
		/* Until the page shows it (msrd's next own sample of PP0: at most 100 ms), keeping
		 * PKG's lease (150 ms) alive. */
		for (int i = 0; i < 400 && paged < value; i++) {
			uint64_t now;

			assert_int_equal(haecer_counter_read_aged(pp0, &paged, &age), 0);
			now = clock_monotonic_raw_ns();
			dated = now > age ? now - age : 0;
			if (paged >= value)
				break;
			assert_int_equal(haecer_counter_read_energy(pkg, &reading), 0);
			usleep(1000);
		}
		if (paged < value)
			continue; /* a slow host: nothing to judge this round */
		if (dated < truth.last_update_ns)
			fail_msg("the page shows %llu units of PP0, dated %.1f us before the update "
				 "that brought them (a round trip read them first)",
				 (unsigned long long)paged,
				 (double)(truth.last_update_ns - dated) / 1e3);
		checked++;
	}
	print_message("%u page readings checked against their dates\n", checked);
	assert_true(checked >= 1);
	haecer_counter_free(pp0_exact);
	haecer_counter_free(pp0);
	haecer_counter_free(pkg);
	haecer_context_close(exact);
	haecer_context_close(pages);
	haecer_close(conn);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_page_value_not_newer_than_its_time),
	};

	unsetenv(HAECER_ENERGY_EXACT_ENV);
	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
