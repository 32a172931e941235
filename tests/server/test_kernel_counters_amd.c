/*
 * The kernel's counters on AMD: on the simulated Zen 4 with --sim-kernel-counters nmi the
 * simulated kernel's NMI watchdog counts cycles with a PMI on core counter 0 (PERF_CTL0.EN and
 * its PerfCntrGlobalCtl bit set, as Linux does on parts without fixed counters). msrd refuses
 * counter 0 naming the watchdog and the way out, lends the next free one when asked for any,
 * and sets and clears only its own slot's global bit, leaving the kernel's.
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

#define AMD_CYCLES (0x76ull | PERFEVTSEL_USR | PERFEVTSEL_OS)

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: PERF_CTL_CTR, range: [0xC0010200, 0xC001020B], read: true, write_mask: 0xfffffffffff, set: pmu}\n"
	"  - {name: GLOBAL_STATUS, address: 0xC0000300, read: true, set: pmu}\n"
	"  - {name: GLOBAL_CTL, address: 0xC0000301, read: true, write_mask: 0x3f, set: pmu}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu], capabilities: [sim_control]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

static void test_watchdog_counter_is_not_lent(void **state)
{
	struct haecer_slot slot;
	uint64_t global;

	(void)state;
	assert_int_equal(haecer_slot_alloc(conn, 3, HAECER_SLOT_PROGRAMMABLE, 0, &slot), -EBUSY);
	assert_non_null(strstr(haecer_conn_error(conn),
			       "counter 0 is in use by the kernel (NMI watchdog): ask for any free "
			       "counter (index -1), or set kernel.nmi_watchdog=0"));
	assert_int_equal(haecer_slot_alloc(conn, 3, HAECER_SLOT_PROGRAMMABLE, -1, &slot), 0);
	assert_int_equal(slot.index, 1);
	assert_int_equal(haecer_slot_program(conn, slot.id, AMD_CYCLES), 0);
	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_ENABLE), 0);
	assert_int_equal(haecer_msr_read(conn, 3, MSR_AMD_PERF_CNTR_GLOBAL_CTL, &global), 0);
	assert_int_equal(global, 0x3); /* the watchdog's and the slot's */
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	assert_int_equal(haecer_msr_read(conn, 3, MSR_AMD_PERF_CNTR_GLOBAL_CTL, &global), 0);
	assert_int_equal(global, 0x1);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "zen4", "--sim-virtual-time",
				    "--sim-kernel-counters", "nmi", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_watchdog_counter_is_not_lent),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
