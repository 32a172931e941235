/*
 * The simulated CPU end to end through msrd (virtual time, driven with SIM_ADVANCE and
 * SIM_SET_LOAD over the socket): MACHINE_INFO describes the model; the RAPL unit register holds
 * the manual's units; the energy register changes only at 1 ms update steps and equals the sim's
 * ground truth modulo 2^32, also after it wrapped; a programmable counter counts only while its
 * enable bits are set. Simulator control is refused to a client the policy does not grant it.
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
#include "tests/lib/test_check.h"

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"
	"  - {name: PMC0, address: 0xC1, read: true, write_mask: 0xFFFFFFFFFFFF, set: pmu}\n"
	"  - {name: PERFEVTSEL0, address: 0x186, read: true, write_mask: 0xFFCFFFFF, set: pmu}\n"
	"  - {name: GLOBAL_CTRL, address: 0x38F, read: true, write_mask: 0x70000000F, set: pmu}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl, pmu], capabilities: [sim_control]}\n"
	"  - {match: {uid: 4001}, allow: [rapl]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

static uint64_t read_msr(uint32_t address)
{
	uint64_t value = 0;

	assert_int_equal(haecer_msr_read(conn, 0, address, &value), 0);
	return value;
}

static void test_machine_and_units(void **state)
{
	struct haecer_machine_info *machine = test_malloc(sizeof(*machine));

	(void)state;
	assert_int_equal(haecer_server_info(conn)->backend, HAECER_BACKEND_SIM);
	assert_true(haecer_server_info(conn)->features & HAECER_FEATURE_SIM_CONTROL);
	assert_int_equal(haecer_machine_info(conn, machine), 0);
	assert_string_equal(machine->vendor, "GenuineIntel");
	assert_string_equal(machine->sim_model, "sandybridge");
	assert_int_equal(machine->family, 6);
	assert_int_equal(machine->model, 0x2A);
	assert_int_equal(machine->cpu_count, 4);
	assert_int_equal(machine->flags & HAECER_MACHINE_SIMULATED, HAECER_MACHINE_SIMULATED);
	assert_int_equal(machine->cpuid_0a[0], 0x07300403);
	assert_true(machine->rapl_domains & (1u << RAPL_DOMAIN_PKG));
	assert_false(machine->rapl_domains & (1u << RAPL_DOMAIN_DRAM));
	assert_int_equal(machine->rapl_energy_exponent[RAPL_DOMAIN_PKG], 16);
	/* SDM 14.9.1: power 1/8 W, energy 2^-16 J, time 2^-10 s on this part. */
	assert_int_equal(read_msr(MSR_RAPL_POWER_UNIT), 0x000A1003);
	assert_int_equal(machine->rapl_power_unit, 0x000A1003);
	test_free(machine);
}

static void test_update_step_and_truth(void **state)
{
	struct haecer_sim_truth truth;
	uint64_t now = 0;
	uint64_t before;

	(void)state;
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	assert_int_equal(haecer_sim_advance(conn, 5 * NS_PER_MS, &now), 0);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &truth), 0);
	assert_int_equal(truth.now_ns, now);
	assert_int_equal(read_msr(MSR_PKG_ENERGY_STATUS),
			 truth.units_at_update & RAPL_ENERGY_COUNTER_MASK);
	/* Just short of the next 1 ms update: the register stands still. */
	before = read_msr(MSR_PKG_ENERGY_STATUS);
	assert_int_equal(haecer_sim_advance(conn, truth.last_update_ns + NS_PER_MS - now - 1000,
					    &now),
			 0);
	assert_int_equal(read_msr(MSR_PKG_ENERGY_STATUS), before);
	/* Past it: it moves, by the energy of one step at full load (35 W pkg max: ~2294 units). */
	assert_int_equal(haecer_sim_advance(conn, 2000, &now), 0);
	assert_true(read_msr(MSR_PKG_ENERGY_STATUS) > before);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &truth), 0);
	assert_int_equal(read_msr(MSR_PKG_ENERGY_STATUS),
			 truth.units_at_update & RAPL_ENERGY_COUNTER_MASK);
	assert_true(truth.joules > 0.0);
}

static void test_wrap(void **state)
{
	struct haecer_sim_truth truth;

	(void)state;
	/* 2^32 units of 2^-16 J are 65536 J: at most 35 W needs half an hour; go for an hour. */
	assert_int_equal(haecer_sim_advance(conn, 3600 * NS_PER_S, NULL), 0);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &truth), 0);
	assert_true(truth.units_at_update > (1ull << 32));
	assert_int_equal(read_msr(MSR_PKG_ENERGY_STATUS),
			 truth.units_at_update & RAPL_ENERGY_COUNTER_MASK);
}

static uint64_t pmc0_per_ms(void)
{
	uint64_t before = read_msr(MSR_IA32_PMC0);

	assert_int_equal(haecer_sim_advance(conn, NS_PER_MS, NULL), 0);
	return read_msr(MSR_IA32_PMC0) - before;
}

static void test_enable_bits(void **state)
{
	uint64_t cycles = 0x3C | PERFEVTSEL_USR | PERFEVTSEL_OS;

	(void)state;
	assert_int_equal(haecer_sim_set_load(conn, 0, 1.0), 0);
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PERFEVTSEL0, cycles), 0);
	assert_int_equal(pmc0_per_ms(), 0); /* EN clear */
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PERFEVTSEL0, cycles | PERFEVTSEL_EN),
			 0);
	assert_int_equal(pmc0_per_ms(), 2500000); /* 2.5 GHz core, fully busy */
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PERF_GLOBAL_CTRL, 0xE), 0);
	assert_int_equal(pmc0_per_ms(), 0); /* its GLOBAL_CTRL bit clear */
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PERF_GLOBAL_CTRL, 0xF), 0);
	assert_int_equal(pmc0_per_ms(), 2500000);
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PERFEVTSEL0, 0), 0);
}

static int without_sim_control(void *argument)
{
	struct haecer_conn *other;
	struct haecer_sim_truth truth;
	uint64_t value;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &other), 0);
	CHECK_EQ(haecer_server_info(other)->features & HAECER_FEATURE_SIM_CONTROL, 0);
	CHECK_EQ(haecer_sim_advance(other, NS_PER_MS, NULL), -EPERM);
	CHECK_EQ(haecer_sim_set_load(other, -1, 0.5), -EPERM);
	CHECK_EQ(haecer_sim_energy_truth(other, 0, RAPL_DOMAIN_PKG, &truth), -EPERM);
	CHECK_EQ(haecer_msr_read(other, 0, MSR_PKG_ENERGY_STATUS, &value), 0);
	haecer_close(other);
	return 0;
}

static void test_sim_control_needs_the_policy(void **state)
{
	struct haecer_sim_truth truth;

	(void)state;
	assert_int_equal(run_as(4001, 4001, NULL, 0, without_sim_control, NULL), 0);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_COUNT, &truth), -EINVAL);
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.5), -EINVAL);
}

int main(void)
{
	/* Exact 1 ms update boundaries and counts: the ideal CPU. */
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-virtual-time", "--sim-ideal", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_machine_and_units),
		cmocka_unit_test(test_update_step_and_truth),
		cmocka_unit_test(test_wrap),
		cmocka_unit_test(test_enable_bits),
		cmocka_unit_test(test_sim_control_needs_the_policy),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
