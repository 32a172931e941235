/*
 * backend_diagnose on stand-in trees that simulate each limitation of the real device: no msr
 * module, module without device node, kernel lockdown, msr.allow_writes=off (and default/on), no
 * CAP_SYS_RAWIO, msr-safe present; a tree with nothing wrong gives no advice. Under lockdown
 * (integrity or confidentiality) and with allow_writes=off the msr backend reads but never
 * writes (EPERM, as the kernel) and leaves the counters to perf.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

/* A healthy machine: device, module, writes on, no lockdown, full capabilities. */
static void healthy_tree(void)
{
	remove_tree(test_root);
	mkdir(test_root, 0700);
	tree_put_msr(test_root, 0, "msr", MSR_IA32_TSC, 1);
	tree_write_text(test_root, "sys/module/msr/parameters/allow_writes", "on\n");
	tree_write_text(test_root, "sys/kernel/security/lockdown", "[none] integrity confidentiality\n");
	tree_write_text(test_root, "proc/self/status", "Name:\tmsrd\nCapEff:\t000001ffffffffff\n");
}

static struct backend_diagnosis diagnose(void)
{
	struct backend_options options = { .dev_root = test_root };
	struct backend_diagnosis diagnosis;

	assert_int_equal(backend_diagnose(&options, &diagnosis), 0);
	return diagnosis;
}

static void test_healthy(void **state)
{
	struct backend_diagnosis d;

	(void)state;
	healthy_tree();
	d = diagnose();
	assert_true(d.msr_device_present && d.msr_module_loaded && d.can_open);
	assert_true(d.has_cap_sys_rawio && d.writes_allowed);
	assert_false(d.lockdown || d.msr_safe_present || d.msr_safe_batch_present);
	assert_string_equal(d.advice, "");
}

static void test_missing_module(void **state)
{
	struct backend_diagnosis d;

	(void)state;
	healthy_tree();
	remove_tree(test_root);
	mkdir(test_root, 0700);
	tree_mkdir(test_root, "dev/cpu/0");
	d = diagnose();
	assert_false(d.msr_device_present || d.msr_module_loaded || d.can_open);
	assert_non_null(strstr(d.advice, "modprobe msr"));
	assert_true(d.writes_allowed); /* no parameter: nothing says writes are off */
}

static void test_module_without_device(void **state)
{
	struct backend_diagnosis d;
	char path[PATH_MAX];

	(void)state;
	healthy_tree();
	snprintf(path, sizeof(path), "%s/dev/cpu/0/msr", test_root);
	unlink(path);
	d = diagnose();
	assert_true(d.msr_module_loaded);
	assert_false(d.msr_device_present);
	assert_non_null(strstr(d.advice, "devtmpfs"));
	assert_null(strstr(d.advice, "modprobe"));
}

/* What the limit means for --backend msr on the tree: the device opens (read-write, as the
 * kernel's does), reads work, every write is refused with EPERM as the kernel refuses it, and
 * the backend does not claim to program counters (msrd's perf broker does). */
static void assert_msr_reads_only(void)
{
	struct backend_options options = { .kind = BACKEND_MSR, .dev_root = test_root };
	struct msr_backend *backend = NULL;
	uint64_t value = 0;
	char why[256];

	assert_int_equal(backend_open(&options, &backend, why, sizeof(why)), 0);
	assert_int_equal(backend_read(backend, 0, MSR_IA32_TSC, &value), 0);
	assert_int_equal(value, 1);
	assert_int_equal(backend_write(backend, 0, MSR_IA32_TSC, 2), -EPERM);
	assert_false(backend_programs_pmcs(backend));
	backend_close(backend);
}

static void test_lockdown(void **state)
{
	struct backend_diagnosis d;

	(void)state;
	healthy_tree();
	tree_write_text(test_root, "sys/kernel/security/lockdown", "none [integrity] confidentiality\n");
	d = diagnose();
	assert_true(d.lockdown);
	assert_non_null(strstr(d.advice, "lockdown"));
	assert_msr_reads_only();
	tree_write_text(test_root, "sys/kernel/security/lockdown", "none integrity [confidentiality]\n");
	assert_true(diagnose().lockdown);
	assert_msr_reads_only();
}

static void test_writes_disabled(void **state)
{
	struct backend_diagnosis d;

	(void)state;
	healthy_tree();
	tree_write_text(test_root, "sys/module/msr/parameters/allow_writes", "off\n");
	d = diagnose();
	assert_false(d.writes_allowed);
	assert_non_null(strstr(d.advice, "msr.allow_writes=on"));
	assert_msr_reads_only();
	tree_write_text(test_root, "sys/module/msr/parameters/allow_writes", "on\n");
	d = diagnose();
	assert_true(d.writes_allowed);
	assert_false(d.writes_taint);
	assert_string_equal(d.advice, "");
	/* "default" (the kernel's own default): writes work but taint the kernel, said. */
	tree_write_text(test_root, "sys/module/msr/parameters/allow_writes", "default\n");
	d = diagnose();
	assert_true(d.writes_allowed);
	assert_true(d.writes_taint);
	assert_non_null(strstr(d.advice, "taints the kernel"));
	assert_non_null(strstr(d.advice, "perf"));
}

static void test_no_cap_sys_rawio(void **state)
{
	struct backend_diagnosis d;

	(void)state;
	healthy_tree();
	tree_write_text(test_root, "proc/self/status", "Name:\tmsrd\nCapEff:\t0000000000000000\n");
	d = diagnose();
	assert_false(d.has_cap_sys_rawio);
	assert_non_null(strstr(d.advice, "CAP_SYS_RAWIO"));
	tree_write_text(test_root, "proc/self/status", "CapEff:\t0000000000020000\n"); /* bit 17 only */
	assert_true(diagnose().has_cap_sys_rawio);
}

static void test_msr_safe_instead(void **state)
{
	struct backend_diagnosis d;

	(void)state;
	remove_tree(test_root);
	mkdir(test_root, 0700);
	tree_put_msr(test_root, 0, "msr_safe", MSR_IA32_TSC, 1);
	tree_write_text(test_root, "dev/cpu/msr_batch", "%s", "");
	d = diagnose();
	assert_true(d.msr_safe_present && d.msr_safe_batch_present);
	assert_non_null(strstr(d.advice, "--backend msr-safe"));
}

/* On the real machine (no dev_root) the call works whatever it finds. */
static void test_real_machine(void **state)
{
	struct backend_diagnosis d;

	(void)state;
	assert_int_equal(backend_diagnose(NULL, &d), 0);
	assert_int_equal(d.can_open, d.can_open && d.msr_device_present);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_healthy),
		cmocka_unit_test(test_missing_module),
		cmocka_unit_test(test_module_without_device),
		cmocka_unit_test(test_lockdown),
		cmocka_unit_test(test_writes_disabled),
		cmocka_unit_test(test_no_cap_sys_rawio),
		cmocka_unit_test(test_msr_safe_instead),
		cmocka_unit_test(test_real_machine),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, test_root_setup, test_root_teardown);
}
