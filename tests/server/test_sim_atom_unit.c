/*
 * The simulated Bay Trail (configs/models/baytrail.yaml, Atom Z3770, 06_37) through the real
 * msrd: MACHINE_INFO carries the kernel's Atom unit (powercap's rapl_check_unit_atom: unit
 * register 0x505 is 2^5 uJ = 32 uJ a count, code 0x85, not 2^-5 J), the TSC rate of the model,
 * and at full load (2 W) one second moves the energy register by 62 500 counts (2 J / 32 uJ),
 * the ground truth's own count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness/policy_text.h"
#include "harness/sim_control.h"
#include "hw/msr.h"
#include "hw/rapl_quirks.h"
#include "tests/lib/msrd_group.h"

#define NS_PER_S 1000000000ull

static const char policy[] = POLICY_RAPL_PKG_FOR_SIM_ROOT;

static struct msrd_server server;
static struct haecer_conn *conn;

static void test_atom_unit(void **state)
{
	struct haecer_machine_info *machine = test_malloc(sizeof(*machine));
	struct haecer_sim_truth truth;
	uint64_t before = 0, after = 0;

	(void)state;
	assert_int_equal(haecer_machine_info(conn, machine), 0);
	assert_string_equal(machine->sim_model, "baytrail");
	assert_int_equal(machine->model, 0x37);
	assert_int_equal(machine->tsc_hz, 1460000000u);
	assert_int_equal(machine->rapl_power_unit, 0x505);
	assert_int_equal(machine->rapl_energy_exponent[RAPL_DOMAIN_PKG], 0x85);
	assert_true(rapl_unit_code_joules(machine->rapl_energy_exponent[RAPL_DOMAIN_PKG]) == 32e-6);
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_PKG_ENERGY_STATUS, &before), 0);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_S, NULL), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_PKG_ENERGY_STATUS, &after), 0);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &truth), 0);
	assert_int_equal(after, truth.units_at_update & RAPL_ENERGY_COUNTER_MASK);
	assert_int_equal(after - before, 62500); /* 2 W for 1 s on the ideal CPU's 1 ms grid */
	test_free(machine);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "baytrail",
				    "--sim-virtual-time", "--sim-ideal", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_atom_unit),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
