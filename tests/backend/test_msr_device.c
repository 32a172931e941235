/*
 * The msr backend against a stand-in tree (regular files in a temporary directory, as --dev-test_root
 * points msrd at them): reads and writes of 8 bytes at offset = address, EIO for a short read,
 * ENXIO for a CPU without a device, the same accesses through the io_uring verbs
 * (backend_prep_read / backend_prep_write on a ring of the test's own), and the machine description
 * from the stand-in cpuid records, topology and RAPL registers. A device that only opens
 * read-only (a non-test_root process here) is kept and its writes fail with EPERM.
 *
 * A regular file cannot hold overlapping registers independently (the driver's offsets are keys,
 * a file's are bytes): MSR_PKG_POWER_INFO (0x614) shares bytes with PKG_ENERGY_STATUS (0x611)
 * and DRAM_ENERGY_STATUS (0x619), so the values below are chosen to compose.
 */
#include <liburing.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

/* PKG energy 0xE8ABCDEF with reserved upper bytes 03: POWER_INFO's low bytes read E8 03 00 00 00
 * = thermal spec 125 W in 1/8 W; DRAM energy 0x1100 keeps POWER_INFO's max-power field 0. */
#define PKG_ENERGY 0x00000003E8ABCDEFull
#define DRAM_ENERGY 0x0000000000001100ull

static void make_readable(const char *relative)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", test_root, relative);
	chmod(path, 0644);
}

static int setup(void **state)
{
	test_root_setup(state);
	chmod(test_root, 0755);
	tree_put_cpuid(test_root, 0, 0, 0xD, 0x756e6547, 0x6c65746e, 0x49656e69); /* GenuineIntel */
	tree_put_cpuid(test_root, 0, 1, 0x00050654, 0, 0, 0);                      /* 6/0x55/4 */
	tree_put_cpuid(test_root, 0, 0xA, 0x07300404, 0, 0, 0x603);
	for (unsigned cpu = 0; cpu < 2; cpu++) {
		tree_put_msr(test_root, cpu, "msr", MSR_RAPL_POWER_UNIT, 0xA0E03);
		tree_put_msr(test_root, cpu, "msr", MSR_PKG_ENERGY_STATUS, PKG_ENERGY);
		tree_put_msr(test_root, cpu, "msr", MSR_DRAM_ENERGY_STATUS, DRAM_ENERGY);
		tree_put_msr(test_root, cpu, "msr", MSR_IA32_PERF_CAPABILITIES, 0x33C5);
		tree_put_msr(test_root, cpu, "msr", MSR_IA32_TSC, 1000 + cpu);
	}
	tree_mkdir(test_root, "dev/cpu/2"); /* an offline CPU: directory, no device */
	tree_write_text(test_root, "sys/devices/system/cpu/cpu0/topology/physical_package_id", "0\n");
	tree_write_text(test_root, "sys/devices/system/cpu/cpu1/topology/physical_package_id", "3\n");
	/* Readable by the unprivileged child of test_read_only_device. */
	make_readable("dev/cpu/0/msr");
	make_readable("dev/cpu/1/msr");
	make_readable("dev/cpu/0/cpuid");
	return 0;
}

static struct msr_backend *open_msr(void)
{
	struct backend_options options = { .kind = BACKEND_MSR, .dev_root = test_root };
	struct msr_backend *backend = NULL;
	char why[256];

	assert_int_equal(backend_open(&options, &backend, why, sizeof(why)), 0);
	assert_int_equal(backend_kind(backend), BACKEND_MSR);
	return backend;
}

/* One access prepared by the backend's verbs, on a ring of its own: the completion's result. */
static int run_prepared(const struct msr_backend *backend, uint32_t cpu, uint32_t address,
			bool write, uint64_t *buffer)
{
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int result;

	assert_int_equal(io_uring_queue_init(2, &ring, 0), 0);
	sqe = io_uring_get_sqe(&ring);
	if (write)
		backend_prep_write(backend, sqe, cpu, address, buffer);
	else
		backend_prep_read(backend, sqe, cpu, address, buffer);
	assert_int_equal(io_uring_submit(&ring), 1);
	assert_int_equal(io_uring_wait_cqe(&ring, &cqe), 0);
	result = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	io_uring_queue_exit(&ring);
	return result;
}

static void test_read_write_at_offset(void **state)
{
	struct msr_backend *backend = open_msr();
	uint64_t value;

	(void)state;
	assert_int_equal(backend_cpu_count(backend), 3);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_TSC), 1000);
	assert_int_equal(read_or_die(backend, 1, MSR_IA32_TSC), 1001);
	assert_int_equal(backend_write(backend, 1, MSR_IA32_PERF_GLOBAL_CTRL, 0x70000000Full), 0);
	assert_int_equal(read_or_die(backend, 1, MSR_IA32_PERF_GLOBAL_CTRL), 0x70000000Full);
	assert_int_equal(backend_read(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL, &value), 0);
	assert_int_equal(value, 0); /* a hole of the sparse file of CPU 0 */
	/* Past the end, or straddling it: a short read is EIO. */
	assert_int_equal(backend_read(backend, 0, 0x700, &value), -EIO);
	assert_int_equal(backend_read(backend, 0, MSR_DRAM_ENERGY_STATUS + 5, &value), -EIO);
	assert_int_equal(backend_read(backend, 2, MSR_IA32_TSC, &value), -ENXIO);
	assert_int_equal(backend_write(backend, 2, MSR_IA32_TSC, 0), -ENXIO);
	assert_int_equal(backend_read(backend, 3, MSR_IA32_TSC, &value), -ENXIO);

	assert_int_equal(backend_prep_supported(backend, 1, false), 0);
	assert_int_equal(backend_prep_supported(backend, 1, true), 0);
	value = 0;
	assert_int_equal(run_prepared(backend, 1, MSR_IA32_TSC, false, &value), 8);
	assert_int_equal(value, 1001);
	value = 0x300000001ull;
	assert_int_equal(run_prepared(backend, 1, MSR_IA32_PERF_GLOBAL_CTRL, true, &value), 8);
	assert_int_equal(read_or_die(backend, 1, MSR_IA32_PERF_GLOBAL_CTRL), 0x300000001ull);
	assert_int_equal(run_prepared(backend, 0, 0x700, false, &value), 0); /* past the end */
	assert_int_equal(backend_prep_supported(backend, 2, false), -ENXIO);
	assert_int_equal(backend_prep_supported(backend, 3, false), -ENXIO);
	assert_int_equal(run_prepared(backend, 2, MSR_IA32_TSC, false, &value), -EBADF);
	assert_int_equal(backend_sim_advance(backend, 1), -EOPNOTSUPP);
	backend_close(backend);
}

static void test_batch_runs_each_op(void **state)
{
	struct msr_backend *backend = open_msr();
	struct msr_op ops[] = {
		{ .cpu = 0, .address = MSR_IA32_PMC0, .value = 77, .write = true },
		{ .cpu = 0, .address = MSR_IA32_PMC0 },
		{ .cpu = 0, .address = 0x800 },
		{ .cpu = 2, .address = MSR_IA32_TSC },
		{ .cpu = 1, .address = MSR_IA32_TSC },
	};

	(void)state;
	assert_int_equal(backend_run_batch(backend, ops, 5), 0);
	assert_int_equal(ops[0].status, 0);
	assert_int_equal(ops[1].status, 0);
	assert_int_equal(ops[1].value, 77);
	assert_int_equal(ops[2].status, -EIO);
	assert_int_equal(ops[3].status, -ENXIO);
	assert_int_equal(ops[4].value, 1001);
	backend_close(backend);
}

static void test_machine_info(void **state)
{
	struct msr_backend *backend = open_msr();
	struct machine_info info;

	(void)state;
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_string_equal(info.vendor, "GenuineIntel");
	assert_int_equal(info.family, 6);
	assert_int_equal(info.model, 0x55);
	assert_int_equal(info.stepping, 4);
	assert_int_equal(info.cpuid_0a[0], 0x07300404);
	assert_int_equal(info.cpuid_0a[3], 0x603);
	assert_int_equal(info.cpu_count, 3);
	assert_int_equal(info.package_count, 2);
	assert_int_equal(info.cpu_package[0], 0);
	assert_int_equal(info.cpu_package[1], 1); /* physical id 3, the second package */
	assert_int_equal(info.rapl_power_unit, 0xA0E03);
	assert_int_equal(info.rapl_domains, (1u << RAPL_DOMAIN_PKG) | (1u << RAPL_DOMAIN_DRAM));
	assert_int_equal(info.rapl_energy_exponent[RAPL_DOMAIN_PKG], 14);
	assert_int_equal(info.rapl_energy_exponent[RAPL_DOMAIN_DRAM], 16); /* server quirk */
	assert_int_equal(info.rapl_max_power_mw[RAPL_DOMAIN_PKG], 3 * 125000);
	assert_true(info.pmc_full_width_writes);
	assert_false(info.simulated);
	backend_close(backend);
}

/* As an unprivileged user the devices open read-only: reads work, writes are EPERM. */
static void test_read_only_device(void **state)
{
	pid_t child;
	int status;

	(void)state;
	if (geteuid() != 0)
		skip();
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		struct backend_options options = { .kind = BACKEND_MSR, .dev_root = test_root };
		struct msr_backend *backend;
		uint64_t value;
		int ok;

		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(3);
		ok = backend_open(&options, &backend, NULL, 0) == 0 &&
		     backend_read(backend, 0, MSR_IA32_TSC, &value) == 0 && value == 1000 &&
		     backend_write(backend, 0, MSR_IA32_TSC, 5) == -EPERM &&
		     backend_prep_supported(backend, 0, false) == 0 &&
		     backend_prep_supported(backend, 0, true) == -EPERM;
		_exit(ok ? 0 : 1);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_write_at_offset),
		cmocka_unit_test(test_batch_runs_each_op),
		cmocka_unit_test(test_machine_info),
		cmocka_unit_test(test_read_only_device),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, setup, test_root_teardown);
}
