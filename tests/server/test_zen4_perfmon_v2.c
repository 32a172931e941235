/*
 * AMD PerfMonV2 (Zen 4) on the simulated Ryzen 9 7950X, with the shipped amd-zen.yaml policy:
 * a core counter enabled only by PERF_CTL.EN counts nothing while its PerfCntrGlobalCtl
 * (0xC0000301) bit is clear, which is how the model starts (Linux's idle perf leaves it so);
 * a slot msrd lends out counts, because msrd sets the slot's global bit as it does Intel's
 * IA32_PERF_GLOBAL_CTRL, and clears it again when the slot is freed; another user may not clear
 * (or set) a slot holder's global bit (-EBUSY, issue 14.7), but may change the bits of free
 * counters. (The order of its write-back at SIGTERM: tests/backend/test_msrstate_restore.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"
#include "harness/text_file.h"

#define NS_PER_MS 1000000ull
#define AMD_CYCLES (0x76ull | PERFEVTSEL_USR | PERFEVTSEL_OS)
#define OTHER_UID 4243
#define MEASURING_GID 4242

static struct msrd_server server;
static struct haecer_conn *conn;
static char *policy_text;

static void test_enable_bit_alone_does_not_count(void **state)
{
	uint64_t global, count;

	(void)state;
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	assert_int_equal(haecer_msr_read(conn, 1, MSR_AMD_PERF_CNTR_GLOBAL_CTL, &global), 0);
	assert_int_equal(global, 0);
	assert_int_equal(haecer_msr_write(conn, 1, MSR_AMD_PERF_CTR0 + 2 * 5, 0), 0);
	assert_int_equal(haecer_msr_write(conn, 1, MSR_AMD_PERF_CTL0 + 2 * 5,
					  AMD_CYCLES | PERFEVTSEL_EN), 0);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_msr_read(conn, 1, MSR_AMD_PERF_CTR0 + 2 * 5, &count), 0);
	assert_int_equal(count, 0);
	/* With its global bit it counts: 4.5 GHz for a millisecond. */
	assert_int_equal(haecer_msr_write(conn, 1, MSR_AMD_PERF_CNTR_GLOBAL_CTL, 1ull << 5), 0);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_msr_read(conn, 1, MSR_AMD_PERF_CTR0 + 2 * 5, &count), 0);
	assert_true(count >= 4400000);
	assert_int_equal(haecer_msr_write(conn, 1, MSR_AMD_PERF_CTL0 + 2 * 5, 0), 0);
	assert_int_equal(haecer_msr_write(conn, 1, MSR_AMD_PERF_CNTR_GLOBAL_CTL, 0), 0);
}

static int other_user(void *argument)
{
	const uint32_t *index = argument;
	struct haecer_conn *other;
	uint64_t global;

	CHECK_EQ(haecer_connect(server.socket_path, &other), 0);
	CHECK_EQ(haecer_msr_read(other, 0, MSR_AMD_PERF_CNTR_GLOBAL_CTL, &global), 0);
	CHECK_EQ(global, 1ull << *index);
	/* The holder's bit is not anyone else's to clear... */
	CHECK_EQ(haecer_msr_write(other, 0, MSR_AMD_PERF_CNTR_GLOBAL_CTL, 0), -EBUSY);
	/* ...while a free counter's bit is. */
	CHECK_EQ(haecer_msr_write(other, 0, MSR_AMD_PERF_CNTR_GLOBAL_CTL,
				  global | (1ull << (*index + 1))), 0);
	CHECK_EQ(haecer_msr_write(other, 0, MSR_AMD_PERF_CNTR_GLOBAL_CTL, global), 0);
	haecer_close(other);
	return 0;
}

static void test_slot_sets_and_guards_its_global_bit(void **state)
{
	gid_t groups[] = { MEASURING_GID };
	struct haecer_slot slot;
	uint64_t global, value;
	uint32_t index;

	(void)state;
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, 2, &slot), 0);
	assert_int_equal(haecer_slot_program(conn, slot.id, AMD_CYCLES), 0);
	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_ENABLE), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_AMD_PERF_CNTR_GLOBAL_CTL, &global), 0);
	assert_int_equal(global, 1ull << 2);
	assert_int_equal(haecer_sim_advance(conn, NS_PER_MS, NULL), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &value, true), 0);
	assert_true(value >= 4400000);

	index = slot.index;
	assert_int_equal(run_as(OTHER_UID, OTHER_UID, groups, 1, other_user, &index), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_AMD_PERF_CNTR_GLOBAL_CTL, &global), 0);
	assert_int_equal(global, 1ull << 2);

	/* Disabled by its global bit as well as EN; freed, the register is as msrd found it. */
	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_DISABLE), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_AMD_PERF_CNTR_GLOBAL_CTL, &global), 0);
	assert_int_equal(global, 0);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_AMD_PERF_CNTR_GLOBAL_CTL, &global), 0);
	assert_int_equal(global, 0);
}

/* The shipped amd-zen.yaml, its measuring group given by number (the host lacks haecer). */
static const char *shipped_policy(void)
{
	char path[PATH_MAX];
	char *at;

	snprintf(path, sizeof(path), "%s/configs/policies/amd-zen.yaml", harness_source_dir());
	policy_text = harness_read_text(path, 1 << 20);
	at = policy_text != NULL ? strstr(policy_text, "{group: haecer}") : NULL;
	if (at == NULL)
		return NULL;
	memcpy(at, "{gid: 4242}    ", strlen("{group: haecer}"));
	return policy_text;
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "zen4", "--sim-virtual-time",
				    "--sim-access-step-ns", "1000", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_enable_bit_alone_does_not_count),
		cmocka_unit_test(test_slot_sets_and_guards_its_global_bit),
	};
	const char *policy = shipped_policy();
	int status;

	if (policy == NULL) {
		fprintf(stderr, "configs/policies/amd-zen.yaml: unreadable or without group haecer\n");
		return 1;
	}
	status = MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
	free(policy_text);
	return status;
}
