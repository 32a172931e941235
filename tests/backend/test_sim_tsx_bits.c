/*
 * IN_TX and IN_TXCP (IA32_PERFEVTSELx bits 32 and 33, SDM vol. 3B 18.3.6.5) exist only on parts
 * with Intel TSX (CPUID.07H:EBX HLE or RTM), IN_TXCP only in IA32_PERFEVTSEL2; elsewhere they are
 * reserved and the write raises #GP (EIO). Skylake-SP shipped with TSX, Sandy Bridge without;
 * a model file's `tsx: false` (TSX fused off) takes it away. The simulated load runs no
 * transactions, so a counter selecting IN_TX counts nothing while the same event without it
 * counts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

#define IN_TX (1ull << 32)
#define IN_TXCP (1ull << 33)
#define CYCLES (0x3Cull | PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN)

static void expect_refused(struct msr_backend *backend, uint32_t address, uint64_t value)
{
	uint64_t before = read_or_die(backend, 0, address);

	assert_int_equal(backend_write(backend, 0, address, value), -EIO);
	assert_int_equal(read_or_die(backend, 0, address), before);
}

static void expect_no_tsx(struct msr_backend *backend)
{
	for (uint32_t i = 0; i < 4; i++) {
		expect_refused(backend, MSR_IA32_PERFEVTSEL0 + i, CYCLES | IN_TX);
		expect_refused(backend, MSR_IA32_PERFEVTSEL0 + i, CYCLES | IN_TXCP);
	}
}

static void test_skylake_sp_has_tsx_bits(void **state)
{
	struct msr_backend *backend = open_virtual_sim("skylake-sp", 0);
	uint64_t in_tx, plain;

	(void)state;
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0 + i, CYCLES | IN_TX),
				 0);
		assert_int_equal(read_or_die(backend, 0, MSR_IA32_PERFEVTSEL0 + i), CYCLES | IN_TX);
		if (i != 2)
			expect_refused(backend, MSR_IA32_PERFEVTSEL0 + i, CYCLES | IN_TXCP);
		expect_refused(backend, MSR_IA32_PERFEVTSEL0 + i, CYCLES | (1ull << 34));
	}
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0 + 2,
				       CYCLES | IN_TX | IN_TXCP), 0);
	/* No transactions run: IN_TX counts nothing, the same event without it does. */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_PERFEVTSEL0 + 1, CYCLES), 0);
	assert_int_equal(backend_sim_set_load(backend, -1, 1.0), 0);
	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), 0);
	in_tx = read_or_die(backend, 0, MSR_IA32_PMC0);
	plain = read_or_die(backend, 0, MSR_IA32_PMC0 + 1);
	assert_int_equal(in_tx, 0);
	assert_true(plain > 0);
	backend_close(backend);
}

static void test_sandy_bridge_has_none(void **state)
{
	struct msr_backend *backend = open_virtual_sim("sandybridge", 0);

	(void)state;
	expect_no_tsx(backend);
	backend_close(backend);
}

static void test_fused_off_tsx(void **state)
{
	const char *replace[] = { "model_name: \"Intel Xeon Gold 6130 (Skylake-SP)\"",
				  "model_name: \"Intel Xeon Gold 6130 (Skylake-SP, TSX off)\"" };
	struct msr_backend *backend;

	(void)state;
	write_variant_model(test_root, "skx-notsx", "skylake-sp", replace, 1, "tsx: false\n");
	backend = open_virtual_sim_in(test_root, "skx-notsx");
	expect_no_tsx(backend);
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_skylake_sp_has_tsx_bits),
		cmocka_unit_test(test_sandy_bridge_has_none),
		cmocka_unit_test(test_fused_off_tsx),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, test_root_setup, test_root_teardown);
}
