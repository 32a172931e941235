/*
 * A policy reload takes back the counter slots whose registers the new policy no longer grants
 * their holder (msrd(8), "Counter slots"): at SIGHUP each such slot is released, its registers get
 * back what they held before it was taken, and the log says so; the client's next operation on
 * it fails with -ESTALE and a text that says why (SLOT_READ, SLOT_CONTROL, SLOT_PROGRAM, a batch
 * slot read; SLOT_FREE says it once, after which the id is unknown). A slot the new policy
 * still grants (here a fixed counter) keeps working, and the released counter can be taken by
 * a client the new policy grants it to.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "harness/policy_text.h"

#define SELECT_BEFORE 0x0001003Cull /* a selection left in PERFEVTSEL0 before the slot */
#define COUNT_BEFORE 0x1234ull

/* POLICY_PMU_FOR_ROOT's registers (less IA32_A_PMC), but the event selects without write
 * access: no programmable slot. */
static const char policy_fixed_only[] = POLICY_HEADER
	"  - {name: IA32_PMC, range: [0xC1, 0xC8], read: true, write_mask: 0xffffffffffff, "
	"set: pmu}\n"
	"  - {name: IA32_PERFEVTSEL, range: [0x186, 0x18D], read: true, set: pmu}\n"
	"  - {name: IA32_FIXED_CTR, range: [0x309, 0x30B], read: true, "
	"write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: IA32_FIXED_CTR_CTRL, address: 0x38D, read: true, write_mask: 0x333, set: pmu}\n"
	"  - {name: IA32_PERF_GLOBAL_CTRL, address: 0x38F, read: true, write_mask: 0x7000000ff, "
	"set: pmu}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

/* Write the policy file and SIGHUP; wait for the reload to be logged (the `reloads`th). */
static void reload(const char *text, size_t reloads)
{
	assert_int_equal(harness_write_file(server.policy_path, text, 0644), 0);
	assert_int_equal(msrd_signal(&server, SIGHUP), 0);
	for (int i = 0; i < 6000 && msrd_log_count(&server, "SIGHUP: policy reloaded") < reloads;
	     i++)
		usleep(10000);
	assert_true(msrd_log_count(&server, "SIGHUP: policy reloaded") >= reloads);
}

static void assert_stale(int status)
{
	assert_int_equal(status, -ESTALE);
	assert_non_null(strstr(haecer_conn_error(conn), "policy was reloaded"));
}

static void test_reload_takes_back_ungranted_slots(void **state)
{
	struct haecer_slot programmable, fixed, again;
	struct haecer_msr_op op = { .kind = HAECER_MSR_SLOT_READ };
	uint64_t values[1], value;

	(void)state;
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PERFEVTSEL0, SELECT_BEFORE), 0);
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PMC0, COUNT_BEFORE), 0);
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, 0, &programmable), 0);
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_FIXED, 1, &fixed), 0);
	assert_int_equal(haecer_slot_program(conn, programmable.id, 0x3003C), 0);
	assert_int_equal(haecer_slot_control(conn, &programmable.id, 1, HAECER_SLOT_ENABLE), 0);

	reload(policy_fixed_only, 1);
	assert_true(msrd_log_contains(&server, "slot 1 (cpu 0 counter 0) released: the reloaded "
					       "policy does not grant its registers"));
	/* Put back the way it was found, at once. */
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PERFEVTSEL0, &value), 0);
	assert_int_equal(value, SELECT_BEFORE);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PMC0, &value), 0);
	assert_int_equal(value, COUNT_BEFORE);
	/* Every operation on it says why it is gone. */
	assert_stale(haecer_slot_read(conn, &programmable.id, 1, values, false));
	assert_stale(haecer_slot_control(conn, &programmable.id, 1, HAECER_SLOT_DISABLE));
	assert_stale(haecer_slot_program(conn, programmable.id, 0x3003C));
	op.address = programmable.id;
	assert_int_equal(haecer_msr_batch(conn, &op, 1), -ESTALE);
	assert_int_equal(op.status, -ESTALE);
	assert_stale(haecer_slot_free(conn, programmable.id));
	assert_int_equal(haecer_slot_free(conn, programmable.id), -ENOENT);
	/* The fixed counter is still granted and still this client's. */
	assert_int_equal(haecer_slot_read(conn, &fixed.id, 1, values, false), 0);
	assert_int_equal(haecer_slot_free(conn, fixed.id), 0);

	/* Granted again after the next reload, the counter is free to take. */
	reload(POLICY_PMU_FOR_ROOT, 2);
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, 0, &again), 0);
	assert_int_equal(haecer_slot_free(conn, again.id), 0);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reload_takes_back_ungranted_slots),
	};

	return MSRD_RUN_GROUP(&server, POLICY_PMU_FOR_ROOT, arguments, &conn, tests);
}
