/*
 * The kernel's counters: on the simulated Sandy Bridge with --sim-kernel-counters
 * nmi,pmc3,pmc0@50 the simulated kernel holds fixed counter 1 for the NMI watchdog and
 * programmable counter 3 for a perf session from the start, and reprograms counter 0 at 50 ms.
 * msrd never takes a counter in use: asked for by number it refuses with the holder and the way
 * out (and libhaecer then counts cycles on a programmable counter), asked for any it takes a
 * free one; a counter reprogrammed after msrd lent it is reported lost (SLOT_READ, batch slot
 * reads, program, control) and is not written back when freed; a holder's own plain writes to
 * its slot are not such a loss.
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
#include "haecer/perfmon.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"

#define NS_PER_MS 1000000ull
#define CYCLES (0x3Cull | PERFEVTSEL_USR | PERFEVTSEL_OS)

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: pmu}\n"
	"  - {name: PMC, range: [0xC1, 0xC8], read: true, write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: A_PMC, range: [0x4C1, 0x4C8], read: true, write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: FIXED_CTR, range: [0x309, 0x30B], read: true, write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: PERFEVTSEL, range: [0x186, 0x18D], read: true, write_mask: 0xffc7ffff, set: pmu}\n"
	"  - {name: FIXED_CTR_CTRL, address: 0x38D, read: true, write_mask: 0x333, set: pmu}\n"
	"  - {name: GLOBAL_STATUS, address: 0x38E, read: true, set: pmu}\n"
	"  - {name: GLOBAL_CTRL, address: 0x38F, read: true, write_mask: 0x7000000ff, set: pmu}\n"
	"  - {name: PERF_CAPABILITIES, address: 0x345, read: true, set: pmu}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu], capabilities: [sim_control]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

static void test_refused_with_holder_and_way_out(void **state)
{
	struct haecer_slot slot;

	(void)state;
	assert_int_equal(haecer_slot_alloc(conn, 1, HAECER_SLOT_FIXED, 1, &slot), -EBUSY);
	assert_non_null(strstr(haecer_conn_error(conn),
			       "fixed counter 1 is in use by the kernel (NMI watchdog): count cycles "
			       "on a programmable counter, or set kernel.nmi_watchdog=0"));
	assert_int_equal(haecer_slot_alloc(conn, 1, HAECER_SLOT_PROGRAMMABLE, 3, &slot), -EBUSY);
	assert_non_null(strstr(haecer_conn_error(conn), "counter 3 is in use by the kernel's perf"));
	assert_non_null(strstr(haecer_conn_error(conn), "ask for any free counter"));
	/* The free ones are still lent out. */
	assert_int_equal(haecer_slot_alloc(conn, 1, HAECER_SLOT_FIXED, 0, &slot), 0);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	assert_true(msrd_log_contains(&server, "in use by the kernel (NMI watchdog)"));
}

static void test_any_skips_the_kernels(void **state)
{
	struct haecer_slot slots[4];
	int taken = 0;

	(void)state;
	while (taken < 4 && haecer_slot_alloc(conn, 2, HAECER_SLOT_PROGRAMMABLE, -1,
					      &slots[taken]) == 0) {
		assert_int_not_equal(slots[taken].index, 3);
		taken++;
	}
	assert_int_equal(taken, 3);
	assert_non_null(strstr(haecer_conn_error(conn), "1 in use by the kernel's perf"));
	for (int i = 0; i < taken; i++)
		assert_int_equal(haecer_slot_free(conn, slots[i].id), 0);
}

/* libhaecer asks for fixed counter 1 for cycles, is refused, and counts on a programmable one. */
static void test_library_falls_back(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *cycles;
	struct haecer_counter_info info;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_counter_open_arch(ctx, 1, UNHALTED_CORE_CYCLES, 0, 0, &cycles), 0);
	assert_int_equal(haecer_counter_info(cycles, &info), 0);
	assert_int_equal(info.kind, HAECER_COUNTER_PROGRAMMABLE);
	assert_int_not_equal(info.hardware_index, 3);
	haecer_counter_free(cycles);
	haecer_context_close(ctx);
}

/* A holder that programs its own slot with plain writes is not someone outside msrd. */
static void test_holders_own_writes_are_not_a_loss(void **state)
{
	struct haecer_slot slot;
	uint64_t value;

	(void)state;
	assert_int_equal(haecer_slot_alloc(conn, 1, HAECER_SLOT_PROGRAMMABLE, 1, &slot), 0);
	assert_int_equal(haecer_msr_write(conn, 1, MSR_IA32_PERFEVTSEL0 + 1, CYCLES | PERFEVTSEL_EN),
			 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &value, false), 0);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
}

/* Counter 0 is lent out, then the kernel reprograms it at 50 ms: lost, never its value. */
static void test_reprogrammed_counter_is_lost(void **state)
{
	struct haecer_msr_op op = { .kind = HAECER_MSR_SLOT_READ };
	struct haecer_slot slot;
	uint64_t value, selection;

	(void)state;
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, 0, &slot), 0);
	assert_int_equal(haecer_slot_program(conn, slot.id, CYCLES), 0);
	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_ENABLE), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &value, false), 0);
	assert_int_equal(haecer_sim_advance(conn, 60 * NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &value, false), -EIDRM);
	assert_non_null(strstr(haecer_conn_error(conn), "was reprogrammed outside msrd"));
	op.address = slot.id;
	assert_int_equal(haecer_msr_batch(conn, &op, 1), -EIDRM);
	assert_int_equal(haecer_slot_program(conn, slot.id, CYCLES), -EIDRM);
	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_DISABLE), -EIDRM);
	assert_true(msrd_log_contains(&server, "its count is lost"));
	/* Freed, the kernel's programming stays. */
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PERFEVTSEL0, &selection), 0);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PERFEVTSEL0, &value), 0);
	assert_int_equal(value, selection);
	assert_true(value & PERFEVTSEL_EN);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-virtual-time", "--sim-access-step-ns", "1000",
				    "--sim-kernel-counters", "nmi,pmc3,pmc0@50", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused_with_holder_and_way_out),
		cmocka_unit_test(test_any_skips_the_kernels),
		cmocka_unit_test(test_library_falls_back),
		cmocka_unit_test(test_holders_own_writes_are_not_a_loss),
		cmocka_unit_test(test_reprogrammed_counter_is_lost),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
