/*
 * The shipped models: listed sorted (msrd --list-sim-models), found through options->models_dir
 * or $HAECER_MODELS_DIR, with the CPUID facts of the real parts; the default model is the
 * Sandy Bridge client. Bad names, missing models and malformed model files are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hw/rapl_quirks.h"
#include "tests/backend/backend_test.h"

static void test_list_models(void **state)
{
	char names[10][32];

	(void)state;
	assert_int_equal(backend_sim_list_models(test_models_dir(), names, 10), 8);
	assert_string_equal(names[0], "alderlake");
	assert_string_equal(names[1], "baytrail");
	assert_string_equal(names[2], "cascadelake-ap");
	assert_string_equal(names[3], "sandybridge");
	assert_string_equal(names[4], "skylake-client");
	assert_string_equal(names[5], "skylake-sp");
	assert_string_equal(names[6], "zen3");
	assert_string_equal(names[7], "zen4");
	assert_int_equal(backend_sim_list_models(test_models_dir(), names, 1), 1);
	setenv("HAECER_MODELS_DIR", test_models_dir(), 1);
	assert_int_equal(backend_sim_list_models(NULL, names, 10), 8);
	unsetenv("HAECER_MODELS_DIR");
	assert_int_equal(backend_sim_list_models("/nonexistent/models", names, 8), -ENOENT);
}

static void test_cpuid_facts(void **state)
{
	struct backend_options options = { .kind = BACKEND_SIM, .sim_virtual_time = true };
	struct machine_info info;
	struct msr_backend *backend;

	(void)state;
	setenv("HAECER_MODELS_DIR", test_models_dir(), 1);
	assert_int_equal(backend_open(&options, &backend, NULL, 0), 0); /* default model */
	unsetenv("HAECER_MODELS_DIR");
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_string_equal(info.sim_model, "sandybridge");
	assert_string_equal(info.vendor, "GenuineIntel");
	assert_int_equal(info.family, 6);
	assert_int_equal(info.model, 0x2A);
	assert_int_equal(info.cpuid_0a[0], 0x07300403);
	assert_int_equal(info.cpuid_0a[3], 0x603);
	assert_int_equal(info.cpu_count, 4);
	assert_int_equal(info.package_count, 1);
	assert_true(info.simulated);
	assert_int_equal(backend_kind(backend), BACKEND_SIM);
	backend_close(backend);

	backend = open_virtual_sim("skylake-sp", 0);
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_int_equal(info.model, 0x55);
	assert_int_equal(info.cpuid_0a[0], 0x07300404);
	assert_int_equal(info.package_count, 2);
	assert_int_equal(info.cpu_count, 64);
	assert_int_equal(info.cpu_package[31], 0);
	assert_int_equal(info.cpu_package[32], 1);
	assert_int_equal(info.tsc_hz, 2100000000ull);
	backend_close(backend);

	backend = open_virtual_sim("zen3", 0);
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_string_equal(info.vendor, "AuthenticAMD");
	assert_int_equal(info.family, 0x19);
	assert_int_equal(info.model, 0x21);
	assert_false(info.amd_perfmon_v2);
	backend_close(backend);

	backend = open_virtual_sim("zen4", 0);
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_int_equal(info.model, 0x61);
	assert_true(info.amd_perfmon_v2);
	backend_close(backend);
}

static int open_model(const char *dir, const char *name)
{
	struct backend_options options = { .kind = BACKEND_SIM, .sim_model = name,
					   .models_dir = dir, .sim_virtual_time = true };
	struct msr_backend *backend = NULL;
	char why[256] = "";
	int ret = backend_open(&options, &backend, why, sizeof(why));

	backend_close(backend);
	assert_true(ret == 0 || why[0] != '\0');
	return ret;
}

#define GOOD_HEADER                                                                   \
	"vendor: GenuineIntel\nmodel_name: \"Test part\"\nfamily: 6\nmodel: 0x2A\n"   \
	"stepping: 7\npackages: 1\ncpus_per_package: 2\nthreads_per_core: 1\n"        \
	"core_hz: 1000000000\ntsc_hz: 1000000000\n"

#define ROUGH                                                                         \
	"rough: {update_interval_ns: 1000000, jitter: normal, jitter_spread_ns: 20000, "  \
	"host_sample_us: 1000}\n"
#define CLOCK(bins)                                                                   \
	"clock: {turbo_mhz: " bins ", min_mhz: 800, noise_mhz: 30, noise_interval_us: 500, " \
	"power_exponent: 2.0}\n"

/* Bay Trail (06_37) counts energy in 2^ESU uJ, as the kernel's rapl_check_unit_atom has it: the
 * unit register 0x505 is 32 uJ a count (code 0x85), and the simulated register moves by the
 * ground truth's energy in 32 uJ counts (0.5 W idle for 1 s: 15 625), not in 2^-5 J ones. */
static void test_baytrail_atom_unit(void **state)
{
	struct msr_backend *backend = open_virtual_sim("baytrail", 0);
	struct sim_energy_truth truth;
	struct machine_info info;
	uint64_t before, after;

	(void)state;
	assert_int_equal(backend_machine_info(backend, &info), 0);
	assert_int_equal(info.model, 0x37);
	assert_int_equal(info.cpu_count, 4);
	assert_int_equal(info.tsc_hz, 1460000000u);
	assert_int_equal(info.rapl_power_unit, 0x505);
	assert_int_equal(info.rapl_energy_exponent[RAPL_DOMAIN_PKG], 0x85);
	assert_int_equal(info.rapl_energy_exponent[RAPL_DOMAIN_PP0], 0x85);
	assert_true(rapl_unit_code_joules(0x85) == 32e-6);
	before = read_or_die(backend, 0, MSR_PKG_ENERGY_STATUS);
	assert_int_equal(backend_sim_advance(backend, NS_PER_S), 0);
	after = read_or_die(backend, 0, MSR_PKG_ENERGY_STATUS);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &truth), 0);
	assert_int_equal(truth.energy_exponent, 0x85);
	assert_int_equal(after, truth.units_at_update);
	assert_true(after - before >= 15625 - 20 && after - before <= 15625 + 20);
	backend_close(backend);
}

static void test_bad_models(void **state)
{
	static const char *const bad[] = {
		"vendor: [not a string\n",                          /* YAML syntax */
		GOOD_HEADER "colour: blue\n",                       /* unknown key */
		"vendor: GenuineIntel\n",                           /* fields missing */
		GOOD_HEADER "cpuid_0a: [1, 2, 3]\n",                /* wrong count */
		GOOD_HEADER "cpuid_0a: [0x07300403, 0, 0, 0x603]\n", /* no pmu rates */
		GOOD_HEADER "rapl:\n  unit: 0xA1003\n  domains:\n"
			    "    - {domain: amd_pkg, idle_watts: 1, max_watts: 2}\n",
		GOOD_HEADER "rapl:\n  unit: 0xA1003\n  domains:\n"
			    "    - {domain: pkg, idle_watts: 3, max_watts: 2}\n",
		GOOD_HEADER "registers:\n  - {address: 0x10, value: 0}\n", /* TSC is simulated */
		GOOD_HEADER "dies_per_package: 3\n",            /* 2 cores cannot be 3 dies */
		"vendor: CyrixInstead\nmodel_name: x\nfamily: 6\nmodel: 1\nstepping: 0\n"
		"packages: 1\ncpus_per_package: 1\nthreads_per_core: 1\n"
		"core_hz: 1000000000\ntsc_hz: 1000000000\n",
		/* the clock: part of the rough CPU; bins fall with more cores, none below core_hz,
		 * no more than cores; as MSR_TURBO_RATIO_LIMIT says when the model lists it */
		GOOD_HEADER CLOCK("[1200, 1100]"),
		GOOD_HEADER ROUGH CLOCK("[1100, 1200]"),
		GOOD_HEADER ROUGH CLOCK("[1200, 900]"),
		GOOD_HEADER ROUGH CLOCK("[1200, 1100, 1000]"),
		GOOD_HEADER ROUGH CLOCK("[1200, 1100]")
			"registers:\n  - {address: 0x1AD, value: 0x0B0B}\n",
	};
	char *dir = make_temp_dir();

	(void)state;
	tree_write_text(dir, "good.yaml", GOOD_HEADER);
	assert_int_equal(open_model(dir, "good"), 0);
	tree_write_text(dir, "clocked.yaml", "%s",
			GOOD_HEADER ROUGH CLOCK("[1200, 1100]")
			"registers:\n  - {address: 0x1AD, value: 0x0B0C}\n");
	assert_int_equal(open_model(dir, "clocked"), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tree_write_text(dir, "bad.yaml", "%s", bad[i]);
		assert_int_equal(open_model(dir, "bad"), -EINVAL);
	}
	tree_write_text(dir, "tiny.yaml", "%s",
			"vendor: GenuineIntel\nmodel_name: x\nfamily: 6\nmodel: 1\nstepping: 0\n"
			"packages: 0\ncpus_per_package: 1\nthreads_per_core: 1\n"
			"core_hz: 1000000000\ntsc_hz: 1000000000\n");
	assert_int_equal(open_model(dir, "tiny"), -EINVAL);
	assert_int_equal(open_model(dir, "absent"), -ENOENT);
	assert_int_equal(open_model(dir, "../good"), -EINVAL);
	assert_int_equal(open_model(dir, "Upper"), -EINVAL);
	remove_tree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list_models),
		cmocka_unit_test(test_cpuid_facts),
		cmocka_unit_test(test_bad_models),
		cmocka_unit_test(test_baytrail_atom_unit),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
