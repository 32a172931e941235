/*
 * CPUID through the real cpuid driver: a stand-in tree whose dev/cpu/0/cpuid is a link to this
 * machine's /dev/cpu/0/cpuid character device (offset = (subleaf << 32) | leaf) gives the vendor
 * and family the kernel reports in /proc/cpuinfo (not the cpuid instruction, which valgrind
 * emulates). Skipped where the cpuid driver is absent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

/* The value of the first "NAME : value" line of /proc/cpuinfo. */
static const char *cpuinfo_field(const char *name)
{
	static char value[128];
	char line[512];
	FILE *file = fopen("/proc/cpuinfo", "r");

	value[0] = '\0';
	while (file && fgets(line, sizeof(line), file)) {
		char *colon = strchr(line, ':');

		if (colon && strncmp(line, name, strlen(name)) == 0 &&
		    (line[strlen(name)] == ' ' || line[strlen(name)] == '\t')) {
			snprintf(value, sizeof(value), "%s", colon + 2);
			value[strcspn(value, "\n")] = '\0';
			break;
		}
	}
	if (file)
		fclose(file);
	return value;
}

static void test_cpuid_device(void **state)
{
	char *root, link_path[PATH_MAX];
	struct backend_options options = { .kind = BACKEND_MSR };
	struct msr_backend *backend;
	struct machine_info info;
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

	assert_string_equal(info.vendor, cpuinfo_field("vendor_id"));
	assert_int_equal(info.family, (unsigned)atoi(cpuinfo_field("cpu family")));
	assert_int_equal(info.model, (unsigned)atoi(cpuinfo_field("model")));
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
