/*
 * A domain that draws more than the machine says it can (the maximum power msrd sizes its wrap
 * deadlines and its stale-reading check by) still has its energy counted: msrd's 64-bit total
 * follows the register, it is never frozen at the last value it folded. The stale-reading check
 * once took every reading more than twice the maximum power x the time since the last fold for
 * an out-of-order completion and kept the total; as the kept total's time was not moved on, a
 * domain above twice its maximum never caught up and read 0 J for good (region/test_attribution
 * under valgrind: PP1 at 1.5 W on a model that says 0.25 W, read 50 ms or more apart).
 *
 * In virtual time, so the gap between readings is exact: PP1 of the ideal simulated Sandy Bridge
 * (maximum 0.25 W) draws 1.5 W for a simulated second between two reads, and the total must be
 * the simulator's ground truth; msrd logs that the domain drew above its maximum. A reading
 * older than the total is still re-read (tests/server/test_stale_energy_reads).
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

#define NS_PER_S 1000000000ull

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"  - {name: PP1_ENERGY_STATUS, address: 0x641, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl], capabilities: [sim_control]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

/* msrd's total of a domain of package 0 is the simulator's ground truth. */
static uint64_t expect_truth(uint32_t address, uint32_t domain)
{
	struct haecer_sim_truth truth;
	uint64_t raw, total;

	assert_int_equal(haecer_energy_read(conn, 0, address, &raw, &total), 0);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, domain, &truth), 0);
	fprintf(stderr, "%#x: total %llu units, truth %llu units\n", address,
		(unsigned long long)total, (unsigned long long)truth.units_at_update);
	assert_int_equal(total, truth.units_at_update);
	assert_int_equal(raw, total & RAPL_ENERGY_COUNTER_MASK);
	return total;
}

static void test_domain_above_its_maximum_is_counted(void **state)
{
	struct haecer_machine_info machine;
	uint64_t first, second;

	(void)state;
	assert_int_equal(haecer_machine_info(conn, &machine), 0);
	assert_int_equal(machine.rapl_max_power_mw[RAPL_DOMAIN_PP1], 250);
	/* Six times the stated maximum. */
	assert_int_equal(haecer_sim_power_trace(conn, "pp1: 3600000 1.5\npkg: 3600000 20\n"), 0);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_S / 10, NULL), 0);
	first = expect_truth(MSR_PP1_ENERGY_STATUS, RAPL_DOMAIN_PP1);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(haecer_sim_advance(conn, NS_PER_S, NULL), 0);
		second = expect_truth(MSR_PP1_ENERGY_STATUS, RAPL_DOMAIN_PP1);
		/* 1.5 J a second, 2^16 units a joule */
		assert_true(second - first > 98000 && second - first < 99000);
		first = second;
	}
	expect_truth(MSR_PKG_ENERGY_STATUS, RAPL_DOMAIN_PKG);
	assert_true(msrd_log_contains(&server, "more than its maximum power"));
	assert_false(msrd_log_contains(&server, "is older than the total"));
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-ideal", "--sim-virtual-time", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_domain_above_its_maximum_is_counted),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
