/*
 * The msr-safe backend on stand-in dev/cpu/N/msr_safe files: the same read/write interface as
 * msr, with and without dev/cpu/msr_batch. A stand-in batch file has no batch ioctl (ENOTTY), so
 * batches fall back to one op at a time and give the same per-op results as without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

static void run_batch(struct msr_backend *backend)
{
	struct msr_op ops[] = {
		{ .cpu = 1, .address = MSR_IA32_PERFEVTSEL0, .value = 0x43003C, .write = true },
		{ .cpu = 1, .address = MSR_IA32_PERFEVTSEL0 },
		{ .cpu = 0, .address = MSR_PKG_ENERGY_STATUS },
		{ .cpu = 0, .address = 0x2000 },
		{ .cpu = 9, .address = MSR_PKG_ENERGY_STATUS },
	};

	assert_int_equal(backend_run_batch(backend, ops, 5), 0);
	assert_int_equal(ops[0].status, 0);
	assert_int_equal(ops[1].status, 0);
	assert_int_equal(ops[1].value, 0x43003C);
	assert_int_equal(ops[2].status, 0);
	assert_int_equal(ops[2].value, 0x12345678);
	assert_int_equal(ops[3].status, -EIO);
	assert_int_equal(ops[4].status, -ENXIO);
}

static void check_tree(bool with_batch_device)
{
	char *root = make_temp_dir();
	struct backend_options options = { .kind = BACKEND_MSR_SAFE, .dev_root = root };
	struct msr_backend *backend;
	struct backend_diagnosis diagnosis;
	char why[256];

	for (unsigned cpu = 0; cpu < 2; cpu++) {
		tree_put_msr(root, cpu, "msr_safe", MSR_PKG_ENERGY_STATUS, 0x12345678);
		tree_put_msr(root, cpu, "msr_safe", MSR_IA32_PERFEVTSEL0, 0);
	}
	if (with_batch_device)
		tree_write_text(root, "dev/cpu/msr_batch", "%s", "");
	assert_int_equal(backend_diagnose(&options, &diagnosis), 0);
	assert_true(diagnosis.msr_safe_present);
	assert_int_equal(diagnosis.msr_safe_batch_present, with_batch_device);
	assert_int_equal(backend_open(&options, &backend, why, sizeof(why)), 0);
	assert_int_equal(backend_kind(backend), BACKEND_MSR_SAFE);
	assert_int_equal(read_or_die(backend, 1, MSR_PKG_ENERGY_STATUS), 0x12345678);
	assert_int_equal(backend_prep_supported(backend, 0, false), 0);
	run_batch(backend);
	run_batch(backend); /* again, after the ioctl was found missing */
	backend_close(backend);

	options.kind = BACKEND_MSR; /* only msr-safe here */
	why[0] = '\0';
	assert_int_equal(backend_open(&options, &backend, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "dev/cpu/0/msr: No such file or directory"));
	assert_non_null(strstr(why, "modprobe msr"));
	remove_tree(root);
	free(root);
}

static void test_without_batch_device(void **state)
{
	(void)state;
	check_tree(false);
}

static void test_with_stand_in_batch_device(void **state)
{
	(void)state;
	check_tree(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_without_batch_device),
		cmocka_unit_test(test_with_stand_in_batch_device),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
