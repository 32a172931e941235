/*
 * Hygon Dhyana (HygonGenuine, family 18h) is AMD's family 17h under another name: the same RAPL
 * registers (unit C001_0299, package energy C001_029B), which the kernel's rapl.c serves for both
 * (model_amd_hygon). haecer-stat took only "AuthenticAMD" for AMD, so -e energy-pkg looked for
 * Intel's domain and failed on Hygon. On a stand-in Hygon (msr backend, one CPU) the command
 * moves the package register by 1 J and haecer-stat -e energy-pkg reports exactly that.
 */
#include "tests/stat/stat_test.h"

#include <sys/stat.h>

#include "harness/standin_tree.h"
#include "hw/msr.h"

#define AMD_UNIT 0x000A1003u  /* energy unit 2^-16 J (ESU 16), as on Zen */
#define AMD_JOULE 65536u

static const char hygon_policy[] =
	POLICY_HEADER
	"  - {name: AMD_RAPL_UNIT, address: 0xC0010299, read: true, set: rapl}\n"
	"  - {name: AMD_CORE_ENERGY, address: 0xC001029A, read: true, set: rapl}\n"
	"  - {name: AMD_PKG_ENERGY, address: 0xC001029B, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl]}\n";

static char tree[PATH_MAX + 16];
static const char *const hygon_arguments[] = { "--backend", "msr", "--dev-root", tree, NULL };

static void test_energy_pkg_on_hygon(void **state)
{
	static char command[PATH_MAX + 256];
	const char *arguments[] = { "-j", "-e", "energy-pkg", "--", "sh", "-c", command, NULL };
	uint32_t after = 2 * AMD_JOULE;
	char *out = NULL, *err = NULL;

	(void)state;
	snprintf(command, sizeof(command),
		 "printf '\\%03o\\%03o\\%03o\\%03o' | dd of=%s/dev/cpu/0/msr bs=1 seek=%u "
		 "conv=notrunc status=none", after & 0xFF, (after >> 8) & 0xFF, (after >> 16) & 0xFF,
		 after >> 24, tree, MSR_AMD_PKG_ENERGY_STATUS);
	assert_int_equal(stat_run_on(server.socket_path, arguments, &out, &err), 0);
	assert_non_null(strstr(err, "\"name\": \"energy-pkg\", \"kind\": \"energy\", \"unit\": \"J\", "
				    "\"state\": \"counted\""));
	assert_non_null(strstr(err, "\"mean\": 1,"));
	free(out);
	free(err);
}

static int prepare(const struct msrd_server *prepared)
{
	snprintf(tree, sizeof(tree), "%s/root", prepared->dir);
	mkdir(tree, 0755);
	uint32_t energy = AMD_JOULE;

	/* A stand-in register is 8 bytes at offset = address, so neighbours overlap: the unit
	 * (its energy unit in byte 1) first, then the package's 4 bytes from byte 2 on. */
	tree_put_msr(tree, 0, "msr", MSR_AMD_RAPL_POWER_UNIT, AMD_UNIT);
	tree_put_msr(tree, 0, "msr", MSR_AMD_PKG_ENERGY_STATUS + 4, 0); /* the file's end */
	tree_write_at(tree, "dev/cpu/0/msr", &energy, sizeof(energy), MSR_AMD_PKG_ENERGY_STATUS);
	/* HygonGenuine: EBX "Hygo", EDX "nGen", ECX "uine"; family 0Fh + 09h = 18h */
	tree_put_cpuid(tree, 0, 0, 0xD, 0x6f677948, 0x656e6975, 0x6e65476e);
	tree_put_cpuid(tree, 0, 1, 0x00900F01, 0, 0, 0);
	tree_write_text(tree, "sys/devices/system/cpu/cpu0/topology/physical_package_id", "0\n");
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_energy_pkg_on_hygon),
	};

	return msrd_run_group_prepared(&server, hygon_policy, prepare, hygon_arguments, NULL,
				       "hygon", tests, 1);
}
