/*
 * What msrd writes back at SIGTERM (server/msrstate.c), against the simulated CPU's registers:
 *   - a PMC first written through its legacy address IA32_PMCx (0xC1 + x) held a count above
 *     2^32; on Skylake-SP (full-width writes, PERF_CAPABILITIES bit 13) it is restored whole,
 *     through IA32_A_PMCx, where a legacy write would have lost bits 47:32 to sign extension;
 *   - the two addresses of one counter are one register: a later first write through the other
 *     alias does not replace the original;
 *   - on a part without full-width writes (a Sandy Bridge variant with bit 13 clear) what a
 *     legacy write can hold is restored, and the log says which value it could not restore;
 *   - a register that cannot be written back is handed to the caller, the others still are;
 *   - on Zen 4 (PerfMonV2) PerfCntrGlobalCtl stops counting first and comes back last, like
 *     IA32_PERF_GLOBAL_CTRL: a counter written back under an enabled PERF_CTL does not count
 *     msrd's time on while the rest is restored;
 *   - the shared registers (IA32_PERF_GLOBAL_CTRL, IA32_FIXED_CTR_CTRL) go back bit by bit: an
 *     NMI watchdog enabled after msrd's first write (fixed counter 1: its field OS|USR|PMI and
 *     its global bit 33) stays enabled; only the bits msrd changed get their original back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "server/server.h"
#include "tests/backend/backend_test.h"

#define CYCLES (0x3Cull | PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN)

/* Let PMC0 count cycles for 3 s of full load (past 2^32 at 2+ GHz), then stop it. */
static uint64_t count_past_32_bits(struct msr_backend *backend)
{
	uint64_t value;

	assert_int_equal(backend_sim_set_load(backend, -1, 1.0), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, CYCLES), 0);
	assert_int_equal(backend_sim_advance(backend, 3 * NS_PER_S), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0, 0), 0);
	value = read_or_die(backend, 0, MSR_IA32_PMC0);
	assert_true(value >> 32 != 0);
	return value;
}

/* What msrd does: remember the register's value before its first write, then write. */
static void write_remembered(struct msrstate *state, struct msr_backend *backend,
			     uint32_t address, uint64_t value)
{
	uint64_t original = read_or_die(backend, 0, address);

	assert_int_equal(msrstate_remember(state, 0, address, original), 0);
	assert_int_equal(backend_write(backend, 0, address, value), 0);
}

/* msrstate_restore with its log lines captured in `log`. */
static size_t restore_capturing(struct msrstate *state, struct msr_backend *backend, char *log,
				size_t size)
{
	char path[PATH_MAX];
	int saved = dup(STDERR_FILENO);
	size_t failed, length;
	FILE *file;
	int fd;

	snprintf(path, sizeof(path), "%s/restore.log", test_root);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0 && saved >= 0);
	fflush(stderr);
	dup2(fd, STDERR_FILENO);
	close(fd);
	log_set_level(LOG_LEVEL_INFO);
	failed = msrstate_restore(state, backend, NULL);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	test_quiet_logs();
	file = fopen(path, "r");
	assert_non_null(file);
	length = fread(log, 1, size - 1, file);
	log[length] = '\0';
	fclose(file);
	return failed;
}

static void test_full_width_restore(void **state)
{
	struct msr_backend *backend = open_virtual_sim("skylake-sp", 0);
	struct msrstate saved;
	struct machine_info info;
	char log[4096];
	uint64_t original;

	(void)state;
	assert_int_equal(backend_machine_info(backend, &info), 0);
	msrstate_init(&saved, &info);
	original = count_past_32_bits(backend);
	write_remembered(&saved, backend, MSR_IA32_PMC0, 5);
	write_remembered(&saved, backend, MSR_IA32_A_PMC0, 0x777700000000ull);
	assert_int_equal(saved.count, 1);
	assert_int_equal(restore_capturing(&saved, backend, log, sizeof(log)), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PMC0), original);
	assert_non_null(strstr(log, "through its full-width alias 0x4c1"));
	msrstate_free(&saved);
	backend_close(backend);
}

static void test_legacy_only_restore(void **state)
{
	const char *replace[] = { "perf_capabilities: 0x31C3", "perf_capabilities: 0x11C3" };
	struct msr_backend *backend;
	struct msrstate saved;
	struct machine_info info;
	char log[4096], expected[160];
	uint64_t original, legacy;

	(void)state;
	write_variant_model(test_root, "snb-nofw", "sandybridge", replace, 1, NULL);
	backend = open_virtual_sim_in(test_root, "snb-nofw");
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_false(info.pmc_full_width_writes);
	msrstate_init(&saved, &info);
	original = count_past_32_bits(backend);
	legacy = (uint64_t)(int64_t)(int32_t)(uint32_t)original & 0xFFFFFFFFFFFFull;
	write_remembered(&saved, backend, MSR_IA32_PMC0, 5);
	assert_int_equal(restore_capturing(&saved, backend, log, sizeof(log)), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PMC0), legacy);
	snprintf(expected, sizeof(expected), "restored cpu 0 MSR 0xc1 to 0x%llx, not 0x%llx",
		 (unsigned long long)legacy, (unsigned long long)original);
	if (strstr(log, expected) == NULL)
		fail_msg("log lacks '%s':\n%s", expected, log);
	msrstate_free(&saved);
	backend_close(backend);
}

/* A register that cannot be written back (its CPU is not there) does not stop the others, and
 * is handed back in `unrestored` with its original value: msrd's journal keeps it for later. */
static void test_unrestored_handed_back(void **state)
{
	struct msr_backend *backend = open_virtual_sim("skylake-sp", 0);
	struct msrstate saved, unrestored;
	struct machine_info info;
	uint32_t absent_cpu;

	(void)state;
	assert_int_equal(backend_machine_info(backend, &info), 0);
	absent_cpu = info.cpu_count + 3;
	msrstate_init(&saved, &info);
	msrstate_init(&unrestored, &info);
	write_remembered(&saved, backend, MSR_IA32_PERFEVTSEL0, CYCLES);
	assert_int_equal(msrstate_remember(&saved, absent_cpu, MSR_IA32_PERFEVTSEL0, 0x42), 0);
	assert_int_equal(msrstate_restore(&saved, backend, &unrestored), 1);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERFEVTSEL0), 0);
	assert_int_equal(unrestored.count, 1);
	assert_int_equal(unrestored.entries[0].cpu, absent_cpu);
	assert_int_equal(unrestored.entries[0].address, MSR_IA32_PERFEVTSEL0);
	assert_int_equal(unrestored.entries[0].original, 0x42);
	msrstate_free(&unrestored);
	msrstate_free(&saved);
	backend_close(backend);
}

#define AMD_CYCLES (0x76ull | PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN)

static void test_amd_global_control_restored_last(void **state)
{
	/* Every register access moves time by 10 us: a counting counter moves between two. */
	struct msr_backend *backend = open_virtual_sim("zen4", 10000);
	struct msrstate saved;
	struct machine_info info;
	uint64_t original;

	(void)state;
	assert_int_equal(backend_machine_info(backend, &info), 0);
	msrstate_init(&saved, &info);
	assert_int_equal(backend_sim_set_load(backend, -1, 1.0), 0);
	/* Someone else's (the kernel's) enabled event select, which msrd leaves alone. */
	assert_int_equal(backend_write(backend, 0, MSR_AMD_PERF_CTL0, AMD_CYCLES), 0);
	assert_int_equal(backend_write(backend, 0, MSR_AMD_PERF_CTR0, 12345), 0);
	original = read_or_die(backend, 0, MSR_AMD_PERF_CTR0);
	assert_int_equal(original, 12345); /* PerfCntrGlobalCtl is clear: it does not count */
	write_remembered(&saved, backend, MSR_AMD_PERF_CTR0, 5);
	write_remembered(&saved, backend, MSR_AMD_PERF_CNTR_GLOBAL_CTL, 0x3f);
	assert_true(read_or_die(backend, 0, MSR_AMD_PERF_CTR0) > 5); /* counting now */
	assert_int_equal(msrstate_restore(&saved, backend, NULL), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_AMD_PERF_CNTR_GLOBAL_CTL), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_AMD_PERF_CTR0), original);
	msrstate_free(&saved);
	backend_close(backend);
}

static void write_touched(struct msrstate *state, struct msr_backend *backend, uint32_t address,
			  uint64_t value)
{
	uint64_t before = read_or_die(backend, 0, address);

	write_remembered(state, backend, address, value);
	msrstate_touch(state, 0, address, before, value);
}

static void test_shared_registers_bit_by_bit(void **state)
{
	struct msr_backend *backend = open_virtual_sim("skylake-sp", 0);
	struct msrstate saved;
	struct machine_info info;
	uint64_t global, fixed;

	(void)state;
	assert_int_equal(backend_machine_info(backend, &info), 0);
	msrstate_init(&saved, &info);
	global = read_or_die(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL);
	fixed = read_or_die(backend, 0, MSR_IA32_FIXED_CTR_CTRL);
	/* msrd: PMC0 and fixed counter 0 on. */
	write_touched(&saved, backend, MSR_IA32_PERF_GLOBAL_CTRL, global | 1ull | 1ull << 32);
	write_touched(&saved, backend, MSR_IA32_FIXED_CTR_CTRL, fixed | 0x3);
	/* The kernel, afterwards: the NMI watchdog on fixed counter 1. */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_FIXED_CTR_CTRL,
				       read_or_die(backend, 0, MSR_IA32_FIXED_CTR_CTRL) | 0xB0), 0);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL,
				       read_or_die(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL) |
					       1ull << 33), 0);
	assert_int_equal(msrstate_restore(&saved, backend, NULL), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERF_GLOBAL_CTRL), global | 1ull << 33);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_FIXED_CTR_CTRL), fixed | 0xB0);
	msrstate_free(&saved);
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_amd_global_control_restored_last),
		cmocka_unit_test(test_shared_registers_bit_by_bit),
		cmocka_unit_test(test_full_width_restore),
		cmocka_unit_test(test_legacy_only_restore),
		cmocka_unit_test(test_unrestored_handed_back),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, test_root_setup, test_root_teardown);
}
