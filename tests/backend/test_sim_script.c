/*
 * Load scripts: `DURATION_MS LOAD` lines form the default timeline, `cpu LIST:` lines a CPU's
 * own; timelines repeat. The scripted load is observed exactly through the cycle counter
 * (cycles = busy time * 2.5 GHz on the Sandy Bridge model). Malformed scripts are refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

static const char *script_file(const char *text)
{
	static char path[PATH_MAX];

	tree_write_text(test_root, "script", "%s", text);
	snprintf(path, sizeof(path), "%s/script", test_root);
	return path;
}

static void count_cycles(struct msr_backend *backend, uint32_t cpu)
{
	assert_int_equal(backend_write(backend, cpu, MSR_IA32_PERFEVTSEL0, 0x43003C), 0);
}

static void test_timelines_repeat(void **state)
{
	struct msr_backend *backend = open_ideal_sim("sandybridge", 0);

	(void)state;
	assert_int_equal(backend_sim_load_script(backend, script_file(
		"# CPU 1: 2 ms busy, 3 ms idle; the others at 50 %\n"
		"cpu 1: 2 1.0\n"
		"cpu 1: 3 0.0   # idle\n"
		"\n"
		"1 0.5\n")), 0);
	for (uint32_t cpu = 0; cpu < 4; cpu++)
		count_cycles(backend, cpu);
	assert_int_equal(backend_sim_advance(backend, 10 * NS_PER_MS + 500000), 0);
	/* CPU 1: busy in [0,2), [5,7) and [10,10.5) ms; the others half busy throughout. */
	assert_int_equal(read_or_die(backend, 1, MSR_IA32_PMC0), 11250000ull);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PMC0), 10500000ull * 5 / 4);
	assert_int_equal(read_or_die(backend, 3, MSR_IA32_PMC0), 10500000ull * 5 / 4);
	/* set_load takes one CPU off the script. */
	assert_int_equal(backend_sim_set_load(backend, 1, 1.0), 0);
	assert_int_equal(backend_sim_advance(backend, 5 * NS_PER_MS), 0);
	assert_int_equal(read_or_die(backend, 1, MSR_IA32_PMC0), 11250000ull + 12500000ull);
	backend_close(backend);
}

static void test_script_from_options(void **state)
{
	struct backend_options options = {
		.kind = BACKEND_SIM, .sim_model = "sandybridge", .models_dir = test_models_dir(),
		.sim_virtual_time = true, .sim_ideal = true,
		.sim_load_script = script_file("cpu 0-1,3: 1 1.0\n"),
	};
	struct msr_backend *backend;

	(void)state;
	assert_int_equal(backend_open(&options, &backend, NULL, 0), 0);
	for (uint32_t cpu = 0; cpu < 4; cpu++)
		count_cycles(backend, cpu);
	assert_int_equal(backend_sim_advance(backend, NS_PER_MS), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_IA32_PMC0), 2500000);
	assert_int_equal(read_or_die(backend, 2, MSR_IA32_PMC0), 0); /* not in the script: idle */
	assert_int_equal(read_or_die(backend, 3, MSR_IA32_PMC0), 2500000);
	backend_close(backend);
}

static void test_malformed_scripts(void **state)
{
	static const char *const bad[] = {
		"",                         /* no segments */
		"# only a comment\n",
		"abc\n",
		"10\n",                     /* no load */
		"10 1.5\n",                 /* load above 1 */
		"-5 0.5\n",
		"0 0.5\n",
		"10 0.5 extra\n",
		"cpu 9: 10 1\n",            /* beyond the 4 CPUs */
		"cpu 0 10 1\n",             /* no colon */
		"cpu 0: 10 1\ncpu 0-1: 10 1\n", /* CPU 0 in two sets */
		"cpu 3-1: 10 1\n",
	};
	struct msr_backend *backend = open_ideal_sim("sandybridge", 0);
	char missing[PATH_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(backend_sim_load_script(backend, script_file(bad[i])), -EINVAL);
	snprintf(missing, sizeof(missing), "%s/none", test_root);
	assert_int_equal(backend_sim_load_script(backend, missing), -ENOENT);
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timelines_repeat),
		cmocka_unit_test(test_script_from_options),
		cmocka_unit_test(test_malformed_scripts),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, test_root_setup, test_root_teardown);
}
