/*
 * 64-bit energy totals: in virtual time, a scripted full load wraps the 32-bit package energy
 * register about twenty times between two client reads (ten simulated hours at 35 W), and the
 * total msrd returns is still exactly the simulator's ground truth in register units; the raw
 * part is the register. Plain reads, ENERGY_READ and batch energy reads agree; an address that
 * is no energy register is -EINVAL, one the policy does not grant -EPERM. msrd logs its sampling
 * period (half the fastest wrap at maximum power).
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
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"  - {name: PP0_ENERGY_STATUS, address: 0x639, read: true, set: rapl}\n"
	"  - {name: PP1_ENERGY_STATUS, address: 0x641, read: true}\n"
	"  - {name: TSC, address: 0x10, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl], capabilities: [sim_control]}\n";

/* Every CPU busy, for ever (the script repeats). */
static const char load_script[] = FULL_LOAD_SCRIPT;

static struct msrd_server server;
static struct haecer_conn *conn;
static char script_path[PATH_MAX + 16];

static void check_against_truth(uint32_t cpu, uint32_t address, uint32_t domain, uint64_t *total)
{
	struct haecer_sim_truth truth;
	uint64_t raw, plain;

	assert_int_equal(haecer_energy_read(conn, cpu, address, &raw, total), 0);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, domain, &truth), 0);
	assert_int_equal(*total, truth.units_at_update);
	assert_int_equal(raw, *total & RAPL_ENERGY_COUNTER_MASK);
	assert_int_equal(haecer_msr_read(conn, cpu, address, &plain), 0);
	assert_int_equal(plain, raw);
}

static void test_total_is_exact_across_many_wraps(void **state)
{
	uint64_t first, second;

	(void)state;
	assert_int_equal(haecer_sim_advance(conn, 10 * NS_PER_S, NULL), 0);
	check_against_truth(0, MSR_PKG_ENERGY_STATUS, RAPL_DOMAIN_PKG, &first);
	assert_true(first < (1ull << 32));
	/* Ten hours at 35 W: 1.26 MJ, 8.3e10 units of 2^-16 J: about 19 wraps. */
	assert_int_equal(haecer_sim_advance(conn, 36000 * NS_PER_S, NULL), 0);
	check_against_truth(2, MSR_PKG_ENERGY_STATUS, RAPL_DOMAIN_PKG, &second);
	assert_true((second - first) >> 32 >= 18);
	check_against_truth(1, MSR_PP0_ENERGY_STATUS, RAPL_DOMAIN_PP0, &second);
	assert_true(second >> 32 >= 10);
	assert_true(msrd_log_contains(&server, "energy: 3 energy-status registers kept as 64-bit "
					       "totals, sampled every 936.2 s"));
}

static void test_batch_energy_reads(void **state)
{
	struct haecer_msr_op ops[3] = {
		{ .kind = HAECER_MSR_ENERGY_READ, .cpu = 0, .address = MSR_PKG_ENERGY_STATUS },
		{ .kind = HAECER_MSR_READ, .cpu = 0, .address = MSR_PKG_ENERGY_STATUS },
		{ .kind = HAECER_MSR_ENERGY_READ, .cpu = 3, .address = MSR_PP0_ENERGY_STATUS },
	};
	struct haecer_sim_truth truth;

	(void)state;
	assert_int_equal(haecer_sim_advance(conn, 7200 * NS_PER_S, NULL), 0);
	assert_int_equal(haecer_msr_batch(conn, ops, 3), 0);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &truth), 0);
	assert_int_equal(ops[0].status, 0);
	assert_int_equal(ops[0].total, truth.units_at_update);
	assert_int_equal(ops[0].value, truth.units_at_update & RAPL_ENERGY_COUNTER_MASK);
	assert_int_equal(ops[1].value, ops[0].value);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PP0, &truth), 0);
	assert_int_equal(ops[2].total, truth.units_at_update);
}

static void test_refusals(void **state)
{
	uint64_t raw, total;
	struct haecer_msr_op op = { .kind = HAECER_MSR_ENERGY_READ, .address = 0x10 };

	(void)state;
	assert_int_equal(haecer_energy_read(conn, 0, 0x10, &raw, &total), -EINVAL);
	assert_int_equal(haecer_energy_read(conn, 0, MSR_RAPL_POWER_UNIT, NULL, NULL), -EINVAL);
	assert_int_equal(haecer_energy_read(conn, 0, MSR_PP1_ENERGY_STATUS, &raw, &total), -EPERM);
	assert_int_equal(haecer_energy_read(conn, 4, MSR_PKG_ENERGY_STATUS, &raw, &total), -ENXIO);
	/* The model has no DRAM domain. */
	assert_int_equal(haecer_energy_read(conn, 0, MSR_DRAM_ENERGY_STATUS, &raw, &total), -EINVAL);
	assert_int_equal(haecer_msr_batch(conn, &op, 1), -EINVAL);
	assert_int_equal(haecer_energy_read(conn, 0, MSR_PKG_ENERGY_STATUS, NULL, &total), 0);
}

static int write_load_script(const struct msrd_server *msrd)
{
	snprintf(script_path, sizeof(script_path), "%s/load.txt", msrd->dir);
	return harness_write_file(script_path, load_script, 0644);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-virtual-time", "--sim-load-script", script_path, NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_total_is_exact_across_many_wraps),
		cmocka_unit_test(test_batch_energy_reads),
		cmocka_unit_test(test_refusals),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, write_load_script, arguments, &conn, tests);
}
