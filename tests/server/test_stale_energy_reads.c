/*
 * A reading of an energy register that is older than the last one msrd folded into its 64-bit
 * total (an io_uring completion delivered out of order, a synchronous read racing the sampler)
 * must not count as a whole wrap of 2^32 units. The simulated CPU's --sim-late-energy-reads 4
 * makes every fourth read of a domain return the value of the read three earlier, as a late
 * completion would; msrd must re-read it, keep every total it hands out monotonic and within
 * the simulator's ground truth, and log each stale reading.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl], capabilities: [sim_control]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

static void test_late_readings_never_add_a_wrap(void **state)
{
	struct haecer_sim_truth truth;
	uint64_t raw, total, previous = 0;

	(void)state;
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	for (int i = 0; i < 64; i++) {
		/* Each access moves virtual time by 1 ms: every read sees a new 1 ms update. */
		assert_int_equal(haecer_energy_read(conn, 0, MSR_PKG_ENERGY_STATUS, &raw, &total), 0);
		assert_int_equal(raw, total & RAPL_ENERGY_COUNTER_MASK);
		assert_true(total >= previous);
		assert_int_equal(haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &truth), 0);
		/* Never ahead of the register: a stale reading taken for a wrap would be 2^32 units
		 * ahead. */
		assert_true(total <= truth.units_at_update);
		previous = total;
	}
	assert_true(previous > 0 && previous < (1ull << 32));
	assert_true(msrd_log_contains(&server, "is older than the total"));
	assert_true(msrd_log_contains(&server, "re-read"));
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-virtual-time", "--sim-access-step-ns", "1000000",
				    "--sim-late-energy-reads", "4", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_late_readings_never_add_a_wrap),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
