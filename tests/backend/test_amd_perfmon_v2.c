/*
 * PerfMonV2 detection on a real AMD machine, through the msr backend on stand-in trees: CPUID
 * Fn8000_0022 EAX bit 0 (with Fn8000_0000 EAX reaching that leaf) says the core counters are
 * gated by PerfCntrGlobalCtl (0xC0000301); a Zen 3 (highest extended leaf below it, or the bit
 * clear) has no global control; an Intel CPU never takes the AMD leaf's word. And
 * kernel.nmi_watchdog, read under the device root, says whether the kernel's hard-lockup
 * detector holds a cycles counter (msrd names it when it refuses that counter).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"


static bool probe(const char *vendor, uint32_t max_extended, uint32_t leaf_22_eax)
{
	char *root = make_temp_dir();

	if (strcmp(vendor, "AuthenticAMD") == 0) {
		tree_put_cpuid(root, 0, 0, 0x10, 0x68747541, 0x444D4163, 0x69746E65);
		tree_put_cpuid(root, 0, 1, 0x00A60F12, 0, 0, 0); /* family 19h model 61h */
	} else {
		tree_put_cpuid(root, 0, 0, 0xD, 0x756e6547, 0x6c65746e, 0x49656e69);
		tree_put_cpuid(root, 0, 1, 0x00050654, 0, 0, 0);
	}
	tree_put_cpuid(root, 0, 0x80000000u, max_extended, 0, 0, 0);
	tree_put_cpuid(root, 0, 0x80000022u, leaf_22_eax, 0x6, 0, 0);
	tree_put_msr(root, 0, "msr", MSR_IA32_TSC, 1);
	return standin_machine_info(root).amd_perfmon_v2;
}

static void test_detection(void **state)
{
	(void)state;
	assert_true(probe("AuthenticAMD", 0x80000028u, 0x1));  /* Zen 4 */
	assert_false(probe("AuthenticAMD", 0x80000028u, 0x0)); /* the bit clear */
	assert_false(probe("AuthenticAMD", 0x80000020u, 0x1)); /* Zen 3: no such leaf */
	assert_false(probe("GenuineIntel", 0x80000028u, 0x1));
}

static bool nmi_watchdog(const char *text)
{
	char *root = make_temp_dir();

	tree_put_msr(root, 0, "msr", MSR_IA32_TSC, 1);
	if (text != NULL)
		tree_write_text(root, "proc/sys/kernel/nmi_watchdog", "%s", text);
	return standin_machine_info(root).nmi_watchdog;
}

static void test_nmi_watchdog(void **state)
{
	(void)state;
	assert_true(nmi_watchdog("1\n"));
	assert_false(nmi_watchdog("0\n"));
	assert_false(nmi_watchdog(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_detection),
		cmocka_unit_test(test_nmi_watchdog),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
