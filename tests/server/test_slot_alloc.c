/*
 * Counter arbitration: two clients asking for counters on the same CPU get different ones; once
 * the CPU's four programmable counters are taken a third client gets -ENOSPC for "any" and
 * -EBUSY for a specific one; a fixed counter is held by one client at a time. What the machine
 * lacks is -EOPNOTSUPP, a CPU it lacks -ENXIO, a client without grants for the registers -EPERM,
 * and every refusal is a log line. A freed counter can be taken again.
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
#include "harness/policy_text.h"
#include "tests/lib/test_check.h"

static const char policy[] =
	POLICY_HEADER POLICY_PMU_MSRS
	"  - {name: TSC, address: 0x10, read: true, set: time}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu, time]}\n"
	"  - {match: {uid: 4101}, allow: [time]}\n";

static struct msrd_server server;
static struct haecer_conn *first;

static struct haecer_conn *connect_client(void)
{
	struct haecer_conn *conn = NULL;

	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	return conn;
}

static void test_two_clients_get_different_counters(void **state)
{
	struct haecer_conn *second = connect_client();
	struct haecer_conn *third = connect_client();
	struct haecer_slot a[2], b[2], c;
	bool used[4] = { false };

	(void)state;
	assert_true(haecer_server_info(first)->features & HAECER_FEATURE_SLOTS);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(haecer_slot_alloc(first, 0, HAECER_SLOT_PROGRAMMABLE, -1, &a[i]), 0);
		assert_int_equal(haecer_slot_alloc(second, 0, HAECER_SLOT_PROGRAMMABLE, -1, &b[i]), 0);
	}
	for (int i = 0; i < 2; i++) {
		const struct haecer_slot *both[2] = { &a[i], &b[i] };
		for (int j = 0; j < 2; j++) {
			assert_int_equal(both[j]->cpu, 0);
			assert_int_equal(both[j]->kind, HAECER_SLOT_PROGRAMMABLE);
			assert_true(both[j]->index < 4);
			assert_false(used[both[j]->index]);
			used[both[j]->index] = true;
			assert_int_equal(both[j]->width, 48);
			assert_int_equal(both[j]->counter_address, MSR_IA32_PMC0 + both[j]->index);
			assert_int_equal(both[j]->control_address,
					 MSR_IA32_PERFEVTSEL0 + both[j]->index);
		}
	}
	/* The CPU has four: a third client finds none free, and a specific one is busy. */
	assert_int_equal(haecer_slot_alloc(third, 0, HAECER_SLOT_PROGRAMMABLE, -1, &c), -ENOSPC);
	assert_int_equal(haecer_slot_alloc(third, 0, HAECER_SLOT_PROGRAMMABLE, a[0].index, &c),
			 -EBUSY);
	assert_int_equal(haecer_slot_alloc(first, 0, HAECER_SLOT_PROGRAMMABLE, b[1].index, &c),
			 -EBUSY);
	/* Another CPU has its own. */
	assert_int_equal(haecer_slot_alloc(third, 1, HAECER_SLOT_PROGRAMMABLE, a[0].index, &c), 0);
	assert_int_equal(c.cpu, 1);
	/* A freed counter can be taken by someone else. */
	assert_int_equal(haecer_slot_free(second, b[0].id), 0);
	assert_int_equal(haecer_slot_free(second, b[0].id), -ENOENT);
	assert_int_equal(haecer_slot_alloc(third, 0, HAECER_SLOT_PROGRAMMABLE, -1, &c), 0);
	assert_int_equal(c.index, b[0].index);
	/* Disconnecting frees the rest. */
	haecer_close(second);
	haecer_close(third);
	assert_true(msrd_wait_log(&server, "released cpu 0 counter", 30000));
	for (int i = 0; i < 2; i++)
		assert_int_equal(haecer_slot_free(first, a[i].id), 0);
}

static void test_fixed_counters(void **state)
{
	struct haecer_conn *second = connect_client();
	struct haecer_slot mine, theirs;

	(void)state;
	assert_int_equal(haecer_slot_alloc(first, 2, HAECER_SLOT_FIXED, 1, &mine), 0);
	assert_int_equal(mine.kind, HAECER_SLOT_FIXED);
	assert_int_equal(mine.index, 1);
	assert_int_equal(mine.counter_address, MSR_IA32_FIXED_CTR1);
	assert_int_equal(mine.control_address, MSR_IA32_FIXED_CTR_CTRL);
	assert_int_equal(haecer_slot_alloc(second, 2, HAECER_SLOT_FIXED, 1, &theirs), -EBUSY);
	assert_int_equal(haecer_slot_alloc(second, 2, HAECER_SLOT_FIXED, 0, &theirs), 0);
	/* Sandy Bridge has three fixed counters, and "any" is for programmable ones. */
	assert_int_equal(haecer_slot_alloc(second, 2, HAECER_SLOT_FIXED, 3, &theirs), -EOPNOTSUPP);
	assert_int_equal(haecer_slot_alloc(second, 2, HAECER_SLOT_FIXED, -1, &theirs), -EINVAL);
	assert_int_equal(haecer_slot_alloc(second, 2, HAECER_SLOT_PROGRAMMABLE, 4, &theirs),
			 -EOPNOTSUPP);
	assert_int_equal(haecer_slot_alloc(second, 99, HAECER_SLOT_PROGRAMMABLE, -1, &theirs),
			 -ENXIO);
	assert_int_equal(haecer_slot_alloc(second, 0, 7, 0, &theirs), -EINVAL);
	haecer_close(second);
	assert_int_equal(haecer_slot_free(first, mine.id), 0);
}

static int without_grants(void *argument)
{
	struct haecer_conn *conn;
	struct haecer_slot slot;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, 0, &slot), -EPERM);
	CHECK_EQ(haecer_slot_alloc(conn, 0, HAECER_SLOT_FIXED, 0, &slot), -EPERM);
	/* "Any" when none is granted at all is the policy's refusal too, with the reason: a
	 * client need not ask for counter 0 by number to tell it from a full CPU. */
	CHECK_EQ(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, -1, &slot), -EPERM);
	CHECK(strstr(haecer_conn_error(conn), "grants the registers of none of the 4") != NULL);
	haecer_close(conn);
	return 0;
}

static void test_policy_grants_the_registers(void **state)
{
	(void)state;
	assert_int_equal(run_as(4101, 4101, NULL, 0, without_grants, NULL), 0);
	assert_true(msrd_log_contains(&server, "op SLOT_ALLOC cpu 0 address 0x0: the policy does "
					       "not grant the registers"));
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_clients_get_different_counters),
		cmocka_unit_test(test_fixed_counters),
		cmocka_unit_test(test_policy_grants_the_registers),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &first, tests);
}
