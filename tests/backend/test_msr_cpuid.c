/*
 * CPUID through the real cpuid driver: a stand-in tree whose dev/cpu/0/cpuid is a link to this
 * machine's /dev/cpu/0/cpuid character device (offset = (subleaf << 32) | leaf) gives the same
 * vendor and family as the cpuid instruction. Skipped where the cpuid driver is absent.
 */
#include <cpuid.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

static void test_cpuid_device(void **state)
{
	char *root, link_path[PATH_MAX], vendor[13];
	struct backend_options options = { .kind = BACKEND_MSR };
	struct msr_backend *backend;
	struct machine_info info;
	unsigned eax, ebx, ecx, edx, family;
	int fd = open("/dev/cpu/0/cpuid", O_RDONLY);

	(void)state;
	if (fd < 0)
		skip();
	close(fd);
	root = make_temp_dir();
	tree_put_msr(root, 0, "msr", MSR_IA32_TSC, 1);
	snprintf(link_path, sizeof(link_path), "%s/dev/cpu/0/cpuid", root);
	assert_int_equal(symlink("/dev/cpu/0/cpuid", link_path), 0);
	options.dev_root = root;
	assert_int_equal(backend_open(&options, &backend, NULL, 0), 0);
	assert_int_equal(backend_machine_info(backend, &info), 0);

	__cpuid(0, eax, ebx, ecx, edx);
	memcpy(vendor, &ebx, 4);
	memcpy(vendor + 4, &edx, 4);
	memcpy(vendor + 8, &ecx, 4);
	vendor[12] = '\0';
	assert_string_equal(info.vendor, vendor);
	__cpuid(1, eax, ebx, ecx, edx);
	family = (eax >> 8) & 0xF;
	if (family == 0xF)
		family += (eax >> 20) & 0xFF;
	assert_int_equal(info.family, family);
	assert_int_equal(info.stepping, eax & 0xF);
	backend_close(backend);
	remove_tree(root);
	free(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpuid_device),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
