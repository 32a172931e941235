/*
 * An MSR the model lacks gives EIO on read and write (the msr driver's answer to #GP), a CPU
 * beyond the model gives ENXIO (the driver's answer for a CPU that does not exist), in single
 * accesses and per op in batches; the other sim calls refuse such CPUs too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

static const uint32_t never_there[] = { 0x0, 0x1234, 0x3A, 0x1A0, 0xC00100FFu, 0xFFFFFFFFu };

static void check_model(const char *model)
{
	struct msr_backend *backend = open_virtual_sim(model, 0);
	uint32_t cpus = backend_cpu_count(backend);
	struct sim_energy_truth truth;
	struct msr_op ops[4] = {
		{ .cpu = 0, .address = MSR_IA32_TSC },
		{ .cpu = cpus, .address = MSR_IA32_TSC },
		{ .cpu = 0, .address = 0x1234 },
		{ .cpu = cpus - 1, .address = 0x1234, .value = 1, .write = true },
	};
	uint64_t value;

	for (size_t i = 0; i < sizeof(never_there) / sizeof(never_there[0]); i++) {
		assert_int_equal(backend_read(backend, 0, never_there[i], &value), -EIO);
		assert_int_equal(backend_write(backend, cpus - 1, never_there[i], 0), -EIO);
	}
	assert_int_equal(backend_read(backend, cpus, MSR_IA32_TSC, &value), -ENXIO);
	assert_int_equal(backend_write(backend, cpus, MSR_IA32_TSC, 0), -ENXIO);
	assert_int_equal(backend_read(backend, UINT32_MAX, MSR_IA32_TSC, &value), -ENXIO);
	assert_int_equal(backend_run_batch(backend, ops, 4), 0);
	assert_int_equal(ops[0].status, 0);
	assert_int_equal(ops[1].status, -ENXIO);
	assert_int_equal(ops[2].status, -EIO);
	assert_int_equal(ops[3].status, -EIO);
	assert_int_equal(backend_sim_set_load(backend, (int)cpus, 1.0), -ENXIO);
	assert_int_equal(backend_sim_set_load(backend, 0, 1.5), -EINVAL);
	assert_int_equal(backend_sim_energy_truth_cpu(backend, cpus, RAPL_DOMAIN_PKG, &truth),
			 -ENXIO);
	assert_int_equal(backend_prep_supported(backend, 0, false), -EOPNOTSUPP);
	backend_close(backend);
}

static void test_missing_and_out_of_range(void **state)
{
	(void)state;
	for (size_t i = 0; i < SHIPPED_MODEL_COUNT; i++)
		check_model(shipped_models[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missing_and_out_of_range),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
