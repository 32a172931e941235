/*
 * The policies shipped in configs/policies/ are valid, print a canonical form that re-parses
 * to itself, and the default one grants what its header promises: root everything, group haecer
 * time, RAPL and the architectural PMU with safe write masks and ring majors 1-99, everyone else
 * nothing. Group haecer need not exist on the test machine, so the default policy's group rule is
 * exercised with its match rewritten to a gid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>

#include "hw/msr.h"
#include "policy_test.h"

#define HAECER_GID 4242

static int is_yaml(const struct dirent *entry)
{
	size_t length = strlen(entry->d_name);
	return length > 5 && strcmp(entry->d_name + length - 5, ".yaml") == 0;
}

static void test_shipped_policies_are_valid(void **state)
{
	char *directory = source_path("configs/policies");
	struct dirent **entries = NULL;

	(void)state;
	int count = scandir(directory, &entries, is_yaml, alphasort);
	assert_true(count >= 4);
	for (int i = 0; i < count; i++) {
		char *path = NULL;
		assert_true(asprintf(&path, "%s/%s", directory, entries[i]->d_name) > 0);
		char *text = read_text(path, NULL);
		struct policy *policy = load_valid(text, entries[i]->d_name);
		char *printed = print_policy(policy);
		struct policy *again = load_valid(printed, "canonical");
		char *reprinted = print_policy(again);
		assert_string_equal(printed, reprinted);
		policy_free(again);
		policy_free(policy);
		free(reprinted);
		free(printed);
		free(text);
		free(path);
		free(entries[i]);
	}
	free(entries);
	free(directory);
}

/* default.yaml with "{group: haecer}" made "{gid: 4242}". */
static int setup_default(void **state)
{
	char *path = source_path("configs/policies/default.yaml");
	char *text = read_text(path, NULL);
	char *group = text ? strstr(text, "{group: haecer}") : NULL;
	char *rewritten = NULL;

	assert_non_null(group);
	assert_true(asprintf(&rewritten, "%.*s{gid: %d}%s", (int)(group - text), text, HAECER_GID,
			     group + strlen("{group: haecer}")) > 0);
	*state = load_valid(rewritten, "default.yaml");
	free(rewritten);
	free(text);
	free(path);
	return 0;
}

static int teardown(void **state)
{
	policy_free(*state);
	return 0;
}

static struct policy_grant *grant_for(const struct policy *policy, uid_t uid, gid_t gid)
{
	const gid_t groups[] = { 100, HAECER_GID };
	const struct policy_subject subject = { uid, gid, groups, uid == 1000 ? 2 : 0 };
	struct policy_grant *grant = NULL;

	assert_int_equal(policy_resolve(policy, &subject, &grant), 0);
	return grant;
}

static const uint32_t rapl_energy[] = {
	MSR_PKG_ENERGY_STATUS, MSR_DRAM_ENERGY_STATUS,	   MSR_PP0_ENERGY_STATUS,
	MSR_PP1_ENERGY_STATUS, MSR_PLATFORM_ENERGY_STATUS, MSR_AMD_CORE_ENERGY_STATUS,
	MSR_AMD_PKG_ENERGY_STATUS, MSR_RAPL_POWER_UNIT,	   MSR_AMD_RAPL_POWER_UNIT,
};

static void test_haecer_group_measures(void **state)
{
	struct policy_grant *grant = grant_for(*state, 1000, 1000); /* haecer: supplementary */
	uint64_t programmed = 0x3c | PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN;

	assert_true(policy_allows_read(grant, MSR_IA32_TSC));
	for (size_t i = 0; i < sizeof(rapl_energy) / sizeof(rapl_energy[0]); i++) {
		assert_true(policy_allows_read(grant, rapl_energy[i]));
		assert_int_equal(policy_write_mask(grant, rapl_energy[i]), 0);
		assert_int_equal(policy_energy_limit(grant, rapl_energy[i], NULL), 0);
	}
	assert_false(policy_allows_read(grant, MSR_PKG_POWER_LIMIT)); /* root's only */
	for (uint32_t n = 0; n < 8; n++) {
		assert_int_equal(policy_allows_write(grant, MSR_IA32_PERFEVTSEL0 + n, 0, programmed),
				 0);
		assert_int_equal(policy_allows_write(grant, MSR_IA32_PERFEVTSEL0 + n, 0,
						     programmed | PERFEVTSEL_INT),
				 -EACCES);
		assert_int_equal(policy_allows_write(grant, MSR_IA32_PERFEVTSEL0 + n, 0,
						     programmed | PERFEVTSEL_ANY),
				 -EACCES);
		assert_int_equal(policy_allows_write(grant, MSR_IA32_PMC0 + n, 123, 0), 0);
	}
	assert_int_equal(policy_allows_write(grant, MSR_IA32_FIXED_CTR_CTRL, 0, 0x333), 0);
	assert_int_equal(policy_allows_write(grant, MSR_IA32_FIXED_CTR_CTRL, 0, 0x8), -EACCES);
	assert_int_equal(policy_allows_write(grant, MSR_IA32_PERF_GLOBAL_CTRL, 0, 0x7000000ffull),
			 0);
	assert_int_equal(policy_allows_write(grant, MSR_IA32_PERF_GLOBAL_STATUS, 0, 1), -EPERM);
	assert_true(policy_allows_create_ring(grant, 1));
	assert_true(policy_allows_monitor(grant, 99));
	assert_false(policy_allows_monitor(grant, 100));
	assert_false(policy_allows_monitor(grant, 0));
	assert_false(policy_allows_sim_control(grant));
	assert_false(policy_allows_persistent_schedule(grant));
	policy_grant_free(grant);
}

static void test_root_gets_everything(void **state)
{
	struct policy_grant *grant = grant_for(*state, 0, 0);

	assert_true(policy_allows_read(grant, MSR_PKG_POWER_LIMIT));
	assert_true(policy_allows_read(grant, MSR_IA32_TSC));
	assert_true(policy_allows_sim_control(grant));
	assert_true(policy_allows_persistent_schedule(grant));
	assert_true(policy_allows_create_ring(grant, 0));
	assert_true(policy_allows_monitor(grant, 65535));
	policy_grant_free(grant);
}

static void test_everyone_else_gets_nothing(void **state)
{
	struct policy_grant *grant = grant_for(*state, 1001, 1001);

	assert_false(policy_grant_matched(grant));
	assert_false(policy_allows_read(grant, MSR_IA32_TSC));
	assert_false(policy_allows_read(grant, MSR_PKG_ENERGY_STATUS));
	assert_false(policy_allows_monitor(grant, 1));
	policy_grant_free(grant);
}

/* coarse-energy.yaml: any user reads energy at 1 s and 1 J, root in full. */
static void test_coarse_energy_example(void **state)
{
	char *path = source_path("configs/policies/coarse-energy.yaml");
	char *text = read_text(path, NULL);
	struct policy *policy = load_valid(text, "coarse-energy.yaml");
	struct policy_grant *anyone = grant_for(policy, 1001, 1001);
	struct policy_grant *root = grant_for(policy, 0, 0);
	struct policy_energy_limit limit = { 0, 0 };

	(void)state;
	for (size_t i = 0; i < 7; i++) { /* the energy-status registers of rapl_energy */
		assert_true(policy_allows_read(anyone, rapl_energy[i]));
		assert_int_equal(policy_energy_limit(anyone, rapl_energy[i], &limit), 1);
		assert_int_equal(limit.min_interval_ms, 1000);
		assert_int_equal(limit.resolution_uj, 1000000);
		assert_int_equal(policy_energy_limit(root, rapl_energy[i], &limit), 0);
	}
	assert_int_equal(policy_energy_limit(anyone, MSR_RAPL_POWER_UNIT, &limit), 0);
	assert_true(policy_allows_read(anyone, MSR_RAPL_POWER_UNIT));
	assert_false(policy_allows_read(anyone, MSR_IA32_TSC));
	policy_grant_free(anyone);
	policy_grant_free(root);
	policy_free(policy);
	free(text);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shipped_policies_are_valid),
		cmocka_unit_test_setup_teardown(test_haecer_group_measures, setup_default, teardown),
		cmocka_unit_test_setup_teardown(test_root_gets_everything, setup_default, teardown),
		cmocka_unit_test_setup_teardown(test_everyone_else_gets_nothing, setup_default,
						teardown),
		cmocka_unit_test(test_coarse_energy_example),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
