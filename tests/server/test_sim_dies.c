/*
 * The simulated Cascade Lake-AP (configs/models/cascadelake-ap.yaml: two packages of two dies,
 * 06_55 stepping 7) through the real msrd: MACHINE_INFO says energy is per die and which die
 * each CPU is on (Linux's numbering: threads n and n + 56 of a package share a core, cores 0-27
 * are die 0), the units are the kernel's (PKG 2^-14 J from the register, DRAM the fixed 2^-16 J
 * of rapl.c's model_hsx), and each die has its own PKG register: with only die 1 of package 0
 * busy for 1 s, its register moves by 200 J while die 0's moves by its idle 40 J (in 2^-14 J
 * counts, exactly, on the ideal CPU's 1 ms grid).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness/policy_text.h"
#include "harness/sim_control.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"

#define NS_PER_S 1000000000ull
#define JOULE 16384u /* 2^14 counts */

static const char policy[] = POLICY_RAPL_PKG_FOR_SIM_ROOT;

static struct msrd_server server;
static struct haecer_conn *conn;

static uint64_t pkg_register(uint32_t cpu)
{
	uint64_t value = 0;

	assert_int_equal(haecer_msr_read(conn, cpu, MSR_PKG_ENERGY_STATUS, &value), 0);
	return value;
}

static void test_dies(void **state)
{
	struct haecer_machine_info *machine = test_malloc(sizeof(*machine));
	uint64_t die0, die1;

	(void)state;
	assert_int_equal(haecer_machine_info(conn, machine), 0);
	assert_string_equal(machine->sim_model, "cascadelake-ap");
	assert_int_equal(machine->cpu_count, 224);
	assert_true(machine->flags & HAECER_MACHINE_DIES);
	assert_int_equal(machine->cpu_die[0], 0);
	assert_int_equal(machine->cpu_die[27], 0);
	assert_int_equal(machine->cpu_die[28], 1);
	assert_int_equal(machine->cpu_die[56], 0);  /* core 0's second thread */
	assert_int_equal(machine->cpu_die[84], 1);  /* core 28's */
	assert_int_equal(machine->cpu_die[112], 2); /* package 1, die 0 */
	assert_int_equal(machine->rapl_energy_exponent[RAPL_DOMAIN_PKG], 14);
	assert_int_equal(machine->rapl_energy_exponent[RAPL_DOMAIN_DRAM], 16);
	for (int cpu = 28; cpu < 112; cpu++)
		if (cpu < 56 || cpu >= 84)
			assert_int_equal(haecer_sim_set_load(conn, cpu, 1.0), 0);
	die0 = pkg_register(56);
	die1 = pkg_register(84);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_S, NULL), 0);
	assert_int_equal(pkg_register(0) - die0, 40 * JOULE);
	assert_int_equal(pkg_register(28) - die1, 200 * JOULE);
	test_free(machine);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "cascadelake-ap",
				    "--sim-virtual-time", "--sim-ideal", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dies),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
