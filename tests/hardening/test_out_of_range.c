/*
 * CPUs and MSR addresses out of range, through every op that names one, against the real msrd
 * (simulated Sandy Bridge, 4 CPUs) while a bystander reads throughout. CPUs: the first past the
 * machine, 1023, 1024 (the protocol's limit), 65535, UINT32_MAX; for READ, WRITE, ENERGY_READ,
 * BATCH (one bad op among good ones refuses the batch whole: its write does not happen),
 * BATCH_REGISTER, SLOT_ALLOC: -ENXIO. Addresses no rule grants (0, 0xffffffff, EFER, MISC_ENABLE,
 * a neighbour of a granted range) for READ and WRITE: -EPERM; an energy read of a register
 * without a total: -EINVAL. Simulator control: a CPU past the machine -ENXIO, below -1 -EINVAL,
 * a package past the machine -ENXIO, an unknown RAPL domain -EINVAL. A uid granted only the TSC
 * gets -EPERM for every other register and for every counter slot. Nothing is granted beyond
 * the policy: every register root could write holds what it held before, and every refusal is
 * one line in msrd's log.
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

#include "tests/hardening/hardening.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"

static struct msrd_server server;
static struct haecer_conn *conn;
static struct bystander bystander;
static uint32_t cpu_count;

static const uint32_t bad_addresses[] = { 0x0, 0xFFFFFFFFu, 0xC0000080u, 0x1A0, 0x18E, 0x30C };
#define WRITABLE_COUNT 3
static const uint32_t writable[WRITABLE_COUNT] = { 0x186, 0xC1, 0x38F };

static size_t refusals(void)
{
	return msrd_log_count(&server, "refused: uid ");
}

/* Every register root may write, on every CPU, as it is now. */
static void snapshot(uint64_t values[][WRITABLE_COUNT])
{
	for (uint32_t cpu = 0; cpu < cpu_count; cpu++)
		for (int i = 0; i < WRITABLE_COUNT; i++)
			assert_int_equal(haecer_msr_read(conn, cpu, writable[i], &values[cpu][i]), 0);
}

static void test_cpus_out_of_range(void **state)
{
	const uint32_t cpus[] = { cpu_count, 1023, 1024, 65535, UINT32_MAX };
	uint64_t before[64][WRITABLE_COUNT], after[64][WRITABLE_COUNT];
	size_t logged = refusals();
	struct haecer_slot slot;
	uint32_t handle;
	uint64_t value, raw, total;

	(void)state;
	snapshot(before);
	for (size_t i = 0; i < sizeof(cpus) / sizeof(cpus[0]); i++) {
		uint32_t cpu = cpus[i];
		struct haecer_msr_op ops[3] = {
			{ .kind = HAECER_MSR_WRITE, .cpu = 0, .address = 0x186, .value = 0x4300c0 },
			{ .kind = HAECER_MSR_READ, .cpu = cpu, .address = 0x10 },
			{ .kind = HAECER_MSR_READ, .cpu = 0, .address = 0x10 },
		};
		assert_int_equal(haecer_msr_read(conn, cpu, 0x10, &value), -ENXIO);
		assert_int_equal(haecer_msr_write(conn, cpu, 0x186, 0x4300c0), -ENXIO);
		assert_int_equal(haecer_energy_read(conn, cpu, 0x611, &raw, &total), -ENXIO);
		assert_int_equal(haecer_msr_batch(conn, ops, 3), -ENXIO);
		assert_int_equal(ops[0].status, -ECANCELED);
		assert_int_equal(ops[1].status, -ENXIO);
		assert_int_equal(ops[2].status, -ECANCELED);
		assert_int_equal(haecer_batch_register(conn, ops, 3, &handle), -ENXIO);
		assert_int_equal(haecer_slot_alloc(conn, cpu, HAECER_SLOT_PROGRAMMABLE, -1, &slot),
				 -ENXIO);
		assert_int_equal(haecer_slot_alloc(conn, cpu, HAECER_SLOT_FIXED, 0, &slot), -ENXIO);
	}
	snapshot(after);
	assert_memory_equal(before, after, sizeof(before[0]) * cpu_count);
	/* Seven refused requests per CPU number. */
	assert_int_equal(refusals(), logged + 7 * sizeof(cpus) / sizeof(cpus[0]));
	assert_true(bystander_progress(&bystander, 3));
}

static void test_addresses_out_of_policy(void **state)
{
	size_t logged = refusals();
	uint64_t value, raw, total;

	(void)state;
	for (size_t i = 0; i < sizeof(bad_addresses) / sizeof(bad_addresses[0]); i++) {
		uint32_t address = bad_addresses[i];
		assert_int_equal(haecer_msr_read(conn, 0, address, &value), -EPERM);
		assert_int_equal(haecer_msr_write(conn, 0, address, 0), -EPERM);
		assert_int_equal(haecer_energy_read(conn, 0, address, &raw, &total), -EINVAL);
	}
	/* Granted, but no energy register: no total to give. */
	assert_int_equal(haecer_energy_read(conn, 0, 0x10, &raw, &total), -EINVAL);
	assert_int_equal(refusals(), logged + 3 * sizeof(bad_addresses) / sizeof(bad_addresses[0]) + 1);
	assert_true(bystander_progress(&bystander, 3));
}

static void test_simulator_ranges(void **state)
{
	struct haecer_sim_truth truth;
	size_t logged = refusals();

	(void)state;
	assert_int_equal(haecer_sim_set_load(conn, (int)cpu_count, 0.5), -ENXIO);
	assert_int_equal(haecer_sim_set_load(conn, -2, 0.5), -EINVAL);
	assert_int_equal(haecer_sim_energy_truth(conn, 1, 0, &truth), -ENXIO);
	assert_int_equal(haecer_sim_energy_truth(conn, UINT32_MAX, 0, &truth), -ENXIO);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, 8, &truth), -EINVAL);
	assert_int_equal(haecer_sim_energy_truth(conn, 0, UINT32_MAX, &truth), -EINVAL);
	/* libhaecer refuses a CPU below -1 itself; msrd logged the other five. */
	assert_int_equal(refusals(), logged + 5);
	assert_true(bystander_progress(&bystander, 3));
}

/* uid 4001 may read the TSC and nothing else. */
static int only_the_tsc(void *argument)
{
	const uint32_t registers[] = { 0x186, 0xC1, 0x38F, 0x38D, 0x309, 0x606, 0x611 };
	struct haecer_conn *mine;
	struct haecer_slot slot;
	uint64_t value;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &mine), 0);
	CHECK_EQ(haecer_msr_read(mine, 0, 0x10, &value), 0);
	for (size_t i = 0; i < sizeof(registers) / sizeof(registers[0]); i++) {
		CHECK_EQ(haecer_msr_read(mine, 0, registers[i], &value), -EPERM);
		CHECK_EQ(haecer_msr_write(mine, 0, registers[i], 0), -EPERM);
	}
	CHECK_EQ(haecer_slot_alloc(mine, 0, HAECER_SLOT_PROGRAMMABLE, -1, &slot), -EPERM);
	CHECK_EQ(haecer_slot_alloc(mine, 0, HAECER_SLOT_PROGRAMMABLE, 0, &slot), -EPERM);
	CHECK_EQ(haecer_slot_alloc(mine, 0, HAECER_SLOT_FIXED, 0, &slot), -EPERM);
	haecer_close(mine);
	return 0;
}

static void test_unprivileged_uid(void **state)
{
	uint64_t before[64][WRITABLE_COUNT], after[64][WRITABLE_COUNT];
	size_t logged = refusals();

	(void)state;
	snapshot(before);
	assert_int_equal(run_as(4001, 4001, NULL, 0, only_the_tsc, NULL), 0);
	snapshot(after);
	assert_memory_equal(before, after, sizeof(before[0]) * cpu_count);
	assert_int_equal(refusals(), logged + 2 * 7 + 3);
	assert_true(msrd_log_contains(&server, "refused: uid 4001 pid "));
	assert_true(bystander_progress(&bystander, 3));
}

HARDENING_BYSTANDER_FIXTURES(server, bystander)

static int setup(void **state)
{
	struct haecer_machine_info *machine = calloc(1, sizeof(*machine));

	(void)state;
	if (machine == NULL || haecer_machine_info(conn, machine) < 0 || machine->cpu_count > 64) {
		free(machine);
		return -1;
	}
	cpu_count = machine->cpu_count;
	free(machine);
	return bystander_setup(state);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cpus_out_of_range, setup, bystander_teardown),
		cmocka_unit_test_setup_teardown(test_addresses_out_of_policy, setup, bystander_teardown),
		cmocka_unit_test_setup_teardown(test_simulator_ranges, setup, bystander_teardown),
		cmocka_unit_test_setup_teardown(test_unprivileged_uid, setup, bystander_teardown),
	};

	return MSRD_RUN_GROUP(&server, HARDENING_POLICY, arguments, &conn, tests);
}
