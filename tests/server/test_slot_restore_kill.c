/*
 * A client killed with SIGKILL gives back everything it held: its counter slots are free again
 * and the registers it programmed (event selects, counters, the fixed counter control, the global
 * enable) hold what they held before it took them. Another client reads every counter register
 * of the CPU before, while the victim holds and runs them, and after.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "harness/policy_text.h"
#include "tests/lib/test_check.h"

#define CPU 1u
#define PROGRAMMABLE 4u
#define FIXED 3u

static const char policy[] =
	POLICY_HEADER POLICY_PMU_MSRS
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu], capabilities: [sim_control]}\n";

static struct msrd_server server;
static struct haecer_conn *watcher;

static const uint32_t registers[] = {
	MSR_IA32_PMC0, MSR_IA32_PMC0 + 1, MSR_IA32_PMC0 + 2, MSR_IA32_PMC0 + 3,
	MSR_IA32_PERFEVTSEL0, MSR_IA32_PERFEVTSEL0 + 1, MSR_IA32_PERFEVTSEL0 + 2,
	MSR_IA32_PERFEVTSEL0 + 3, MSR_IA32_FIXED_CTR0, MSR_IA32_FIXED_CTR1, MSR_IA32_FIXED_CTR2,
	MSR_IA32_FIXED_CTR_CTRL, MSR_IA32_PERF_GLOBAL_CTRL,
};
#define REGISTER_COUNT (sizeof(registers) / sizeof(registers[0]))

static void read_all(uint64_t *values)
{
	struct haecer_msr_op ops[REGISTER_COUNT];

	for (size_t i = 0; i < REGISTER_COUNT; i++)
		ops[i] = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = CPU,
						 .address = registers[i] };
	assert_int_equal(haecer_msr_batch(watcher, ops, REGISTER_COUNT), 0);
	for (size_t i = 0; i < REGISTER_COUNT; i++)
		values[i] = ops[i].value;
}

/* The victim: takes every counter of the CPU, programs and starts them, says so, waits. */
static int victim(int ready)
{
	uint32_t ids[PROGRAMMABLE + FIXED];
	struct haecer_conn *conn;
	struct haecer_slot slot;

	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	for (uint32_t i = 0; i < PROGRAMMABLE; i++) {
		CHECK_EQ(haecer_slot_alloc(conn, CPU, HAECER_SLOT_PROGRAMMABLE, -1, &slot), 0);
		CHECK_EQ(haecer_slot_program(conn, slot.id, 0xC0 | PERFEVTSEL_USR | PERFEVTSEL_OS), 0);
		ids[i] = slot.id;
	}
	for (uint32_t i = 0; i < FIXED; i++) {
		CHECK_EQ(haecer_slot_alloc(conn, CPU, HAECER_SLOT_FIXED, (int)i, &slot), 0);
		CHECK_EQ(haecer_slot_program(conn, slot.id, FIXED_CTR_CTRL_OS | FIXED_CTR_CTRL_USR), 0);
		ids[PROGRAMMABLE + i] = slot.id;
	}
	CHECK_EQ(haecer_slot_control(conn, ids, PROGRAMMABLE + FIXED, HAECER_SLOT_ENABLE), 0);
	CHECK_EQ(write(ready, "r", 1), 1);
	for (;;)
		pause();
}

static void test_sigkill_restores_the_counters(void **state)
{
	uint64_t before[REGISTER_COUNT], during[REGISTER_COUNT], after[REGISTER_COUNT];
	struct haecer_slot slot;
	int ready[2];
	char byte;
	pid_t pid;

	(void)state;
	/* Something to restore: counters that ran before and were stopped (selection, count,
	 * control bits). One still counting belongs to whoever runs it and msrd does not take it
	 * (test_kernel_counters). */
	assert_int_equal(haecer_sim_set_load(watcher, -1, 1.0), 0);
	assert_int_equal(haecer_msr_write(watcher, CPU, MSR_IA32_PMC0 + 1, 12345), 0);
	assert_int_equal(haecer_msr_write(watcher, CPU, MSR_IA32_PERFEVTSEL0 + 1,
					  0xC4 | PERFEVTSEL_USR),
			 0);
	assert_int_equal(haecer_msr_write(watcher, CPU, MSR_IA32_FIXED_CTR_CTRL, 0x030), 0);
	assert_int_equal(haecer_msr_write(watcher, CPU, MSR_IA32_PERF_GLOBAL_CTRL, 0x2), 0);
	read_all(before);

	assert_int_equal(pipe(ready), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(ready[0]);
		_exit(victim(ready[1]));
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], &byte, 1), 1);
	close(ready[0]);
	assert_int_equal(haecer_sim_advance(watcher, 1000000, NULL), 0);
	read_all(during);
	for (size_t i = 0; i < REGISTER_COUNT; i++)
		assert_int_not_equal(during[i], before[i]);
	assert_int_equal(haecer_slot_alloc(watcher, CPU, HAECER_SLOT_PROGRAMMABLE, -1, &slot),
			 -ENOSPC);

	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	for (int i = 0; i < 3000 && msrd_log_count(&server, "released cpu 1") < 7; i++)
		usleep(10000);
	assert_int_equal(msrd_log_count(&server, "released cpu 1"), 7);
	read_all(after);
	for (size_t i = 0; i < REGISTER_COUNT; i++) {
		if (after[i] != before[i])
			fprintf(stderr, "MSR 0x%x: 0x%llx before, 0x%llx after\n", registers[i],
				(unsigned long long)before[i], (unsigned long long)after[i]);
		assert_int_equal(after[i], before[i]);
	}
	/* The restored counter was stopped, and stays so. */
	assert_int_equal(haecer_sim_advance(watcher, 1000000, NULL), 0);
	read_all(after);
	assert_int_equal(after[1], before[1]);
	/* And the counters are free. */
	assert_int_equal(haecer_slot_alloc(watcher, CPU, HAECER_SLOT_PROGRAMMABLE, 3, &slot), 0);
	assert_int_equal(haecer_slot_free(watcher, slot.id), 0);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-virtual-time", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sigkill_restores_the_counters),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &watcher, tests);
}
