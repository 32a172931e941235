/*
 * `auto` takes the msr driver when dev/cpu/0/msr opens, else msr-safe, else fails (-ENODEV), or
 * takes the simulated CPU only when allow_sim_fallback asks for it; its `why` says what was tried,
 * why it was refused and what the operator can do. Backend kind names parse and print both ways.
 * Under kernel lockdown (sys/kernel/security/lockdown "none [integrity] confidentiality": MSR
 * writes forbidden, reads allowed) with perf_event and a core PMU, auto keeps RAPL through the
 * msr driver, read-only, leaves the core PMCs to perf (msrd's broker) and says why, and
 * `msrd --probe`'s report names the backend of each event class.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

static enum backend_kind open_auto(const char *root, const char *models_dir, char *why,
				   size_t why_size, int *ret)
{
	struct backend_options options = { .kind = BACKEND_AUTO, .dev_root = root,
					   .models_dir = models_dir, .allow_sim_fallback = true };
	struct msr_backend *backend = NULL;
	enum backend_kind kind;

	*ret = backend_open(&options, &backend, why, why_size);
	if (*ret < 0)
		return BACKEND_AUTO;
	kind = backend_kind(backend);
	backend_close(backend);
	return kind;
}

static void test_auto_choices(void **state)
{
	char *root = make_temp_dir(), why[1024];
	int ret;

	(void)state;
	tree_mkdir(root, "dev/cpu/0");
	assert_int_equal(open_auto(root, test_models_dir(), why, sizeof(why), &ret), BACKEND_SIM);
	assert_int_equal(ret, 0);
	assert_non_null(strstr(why, "dev/cpu/0/msr: No such file or directory"));
	assert_non_null(strstr(why, "modprobe msr"));
	assert_non_null(strstr(why, "msr-safe: "));
	assert_non_null(strstr(why, "using the simulated CPU (model sandybridge)"));

	tree_put_msr(root, 0, "msr_safe", MSR_IA32_TSC, 5);
	assert_int_equal(open_auto(root, test_models_dir(), why, sizeof(why), &ret),
			 BACKEND_MSR_SAFE);
	assert_non_null(strstr(why, "use --backend msr-safe"));
	assert_non_null(strstr(why, "using msr-safe"));

	tree_put_msr(root, 0, "msr", MSR_IA32_TSC, 5);
	assert_int_equal(open_auto(root, test_models_dir(), why, sizeof(why), &ret), BACKEND_MSR);
	assert_string_equal(why, "using the msr driver");
	remove_tree(root);
	free(root);
}

/* Without the opt-in, no usable device is a failure that says why, never the simulated CPU. */
static void test_auto_never_simulates_unasked(void **state)
{
	struct backend_options options = { .kind = BACKEND_AUTO, .models_dir = test_models_dir() };
	struct msr_backend *backend = NULL;
	char *root = make_temp_dir(), why[1024];

	(void)state;
	tree_mkdir(root, "dev/cpu/0");
	options.dev_root = root;
	assert_int_equal(backend_open(&options, &backend, why, sizeof(why)), -ENODEV);
	assert_null(backend);
	assert_non_null(strstr(why, "dev/cpu/0/msr: No such file or directory"));
	assert_non_null(strstr(why, "modprobe msr"));
	assert_non_null(strstr(why, "msr-safe: "));
	assert_non_null(strstr(why, "--allow-sim-fallback"));
	assert_null(strstr(why, "using the simulated CPU"));
	remove_tree(root);
	free(root);
}

static void test_auto_fails_when_nothing_works(void **state)
{
	char *root = make_temp_dir(), why[1024];
	int ret;

	(void)state;
	assert_int_equal(open_auto(root, "/nonexistent/models", why, sizeof(why), &ret),
			 BACKEND_AUTO);
	assert_true(ret < 0);
	assert_non_null(strstr(why, "msr: "));
	assert_non_null(strstr(why, "msr-safe: "));
	assert_non_null(strstr(why, "sim: model sandybridge: not found"));
	remove_tree(root);
	free(root);
}

/* A Sandy Bridge msr device (RAPL), locked down, with perf_event and a core PMU. */
static void locked_down_tree(const char *root)
{
	tree_put_sandybridge_rapl(root, 5 * STANDIN_SNB_JOULE);
	tree_write_text(root, "sys/module/msr/parameters/allow_writes", "on\n");
	tree_write_text(root, "sys/kernel/security/lockdown", "none [integrity] confidentiality\n");
	tree_write_text(root, "proc/sys/kernel/perf_event_paranoid", "2\n");
	tree_write_text(root, "sys/bus/event_source/devices/cpu/type", "4\n");
	tree_write_text(root, "sys/bus/event_source/devices/software/type", "1\n");
}

static void test_lockdown_rapl_from_msr_pmcs_from_perf(void **state)
{
	struct backend_options options = { .kind = BACKEND_AUTO };
	struct msr_backend *backend = NULL;
	char *root = make_temp_dir(), why[1024], *report = NULL;
	uint64_t value = 0;
	size_t report_size = 0;
	FILE *out;

	(void)state;
	locked_down_tree(root);
	options.dev_root = root;
	assert_int_equal(backend_open(&options, &backend, why, sizeof(why)), 0);
	assert_int_equal(backend_kind(backend), BACKEND_MSR);
	/* Reads (RAPL) through the msr driver; writes refused as the kernel would. */
	assert_int_equal(backend_read(backend, 0, MSR_PKG_ENERGY_STATUS, &value), 0);
	assert_int_equal(value & 0xFFFFFFFFu, 5 * STANDIN_SNB_JOULE); /* a 32-bit register */
	assert_int_equal(backend_write(backend, 0, MSR_IA32_TSC, 1), -EPERM);
	assert_false(backend_programs_pmcs(backend));
	assert_non_null(strstr(why, "using the msr driver read-only (writes fail with EPERM: the "
				    "kernel is locked down"));
	assert_non_null(strstr(why, "energy (RAPL) from the msr driver; core PMCs: perf events "
				    "through msrd's perf broker"));
	backend_close(backend);

	out = open_memstream(&report, &report_size);
	assert_non_null(out);
	backend_probe_report(&options, out);
	fclose(out);
	assert_non_null(strstr(report, "energy (RAPL): msr (domain mask "));
	assert_non_null(strstr(report, "core PMCs: perf (broker, class core; the MSR path: "
					"read-only: the kernel is locked down"));
	assert_non_null(strstr(report, "software events: perf (broker, class software)\n"));
	free(report);

	/* Without lockdown the same tree's msr driver programs the counters itself. */
	tree_write_text(root, "sys/kernel/security/lockdown", "[none] integrity confidentiality\n");
	assert_int_equal(backend_open(&options, &backend, why, sizeof(why)), 0);
	assert_true(backend_programs_pmcs(backend));
	assert_string_equal(why, "using the msr driver");
	backend_close(backend);
	remove_tree(root);
	free(root);
}

static void test_kind_names(void **state)
{
	enum backend_kind kind;

	(void)state;
	for (int i = BACKEND_AUTO; i <= BACKEND_SIM; i++) {
		assert_int_equal(backend_kind_parse(backend_kind_name((enum backend_kind)i), &kind),
				 0);
		assert_int_equal(kind, i);
	}
	assert_string_equal(backend_kind_name(BACKEND_MSR_SAFE), "msr-safe");
	assert_int_equal(backend_kind_parse("msr_safe", &kind), -EINVAL);
	assert_int_equal(backend_kind_parse("", &kind), -EINVAL);
	assert_int_equal(backend_kind_parse(NULL, &kind), -EINVAL);
	assert_string_equal(backend_kind_name((enum backend_kind)42), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_choices),
		cmocka_unit_test(test_auto_never_simulates_unasked),
		cmocka_unit_test(test_auto_fails_when_nothing_works),
		cmocka_unit_test(test_lockdown_rapl_from_msr_pmcs_from_perf),
		cmocka_unit_test(test_kind_names),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
