/*
 * A program written against the seed API (Intel-only in 2012) measures on AMD too: on the
 * simulated Zen 3 with the shipped default policy (configs/policies/default.yaml),
 * setupEnergyCounter(RAPL_PKG) is AMD's package energy (MSRC001_029B) and RAPL_PP0 the core
 * energy of the calling thread's core (MSRC001_029A), both counting; startEnergyRead/endEnergyRead
 * of RAPL_PKG measure; setupArchCounter counts instructions on a core counter; and a member of
 * the policy's measuring group (here gid 4242 standing for group haecer, which the test host
 * lacks) gets counters and energy, not "the policy grants the registers of none of the 6
 * programmable counters".
 */
#include <math.h>

#include "tests/libclient/libclient_test.h"
#include "tests/lib/test_check.h"
#include "harness/text_file.h"

#define MEMBER_UID 4243
#define HAECER_GID 4242

static char *policy_text;

static void test_energy_domains_map_to_amd(void **state)
{
	struct haecer_counter_info info;
	PerfCounter package = setupEnergyCounter(RAPL_PKG);
	PerfCounter cores = setupEnergyCounter(RAPL_PP0);
	unsigned long long first;

	(void)state;
	libclient_explain("setupEnergyCounter(RAPL_PKG)", package.error);
	assert_true(package.valid);
	assert_true(cores.valid);
	assert_int_equal(haecer_counter_info(haecer_perf_counter(&package), &info), 0);
	assert_string_equal(info.name, "energy-pkg"); /* perf's name, on AMD's register: */
	assert_int_equal(info.config, MSR_AMD_PKG_ENERGY_STATUS);
	assert_int_equal(haecer_counter_info(haecer_perf_counter(&cores), &info), 0);
	assert_string_equal(info.name, "energy-core"); /* one core's, as the kernel names it */
	assert_int_equal(info.config, MSR_AMD_CORE_ENERGY_STATUS);
	first = readCounter(&package);
	assert_int_equal(haecer_sim_advance(sim, 50 * NS_PER_MS, NULL), 0);
	assert_true(readCounter(&package) > first);
	assert_true(getEnergyUnit() > 0.0);
	freeCounter(&package);
	freeCounter(&cores);
}

static void test_energy_region_on_amd(void **state)
{
	double joules;

	(void)state;
	startEnergyRead(RAPL_PKG);
	joules = endEnergyRead(RAPL_PKG);
	libclient_explain("endEnergyRead(RAPL_PKG)", isnan(joules) ? -1 : 0);
	assert_false(isnan(joules));
}

static void test_arch_counter_on_amd(void **state)
{
	PerfCounter instructions = setupArchCounter(INSTRUCTIONS_RETIRED, 0, 0);
	unsigned long long before;

	(void)state;
	libclient_explain("setupArchCounter(INSTRUCTIONS_RETIRED)", instructions.error);
	assert_true(instructions.valid);
	assert_int_equal(haecer_sim_set_load(sim, -1, 1.0), 0); /* virtual time starts idle */
	before = readCounter(&instructions);
	assert_int_equal(haecer_sim_advance(sim, 10 * NS_PER_MS, NULL), 0);
	assert_true(readCounter(&instructions) > before);
	freeCounter(&instructions);
	/* SMIs: AMD has no MSR_SMI_COUNT; PMCx02B (LsSmiRx) counts them, as perf's msr/smi/. */
	PerfCounter smi = setupNamedCounter("smi", 0, 0);
	struct haecer_counter_info info;
	libclient_explain("setupNamedCounter(smi)", smi.error);
	assert_true(smi.valid);
	assert_int_equal(haecer_counter_info(haecer_perf_counter(&smi), &info), 0);
	assert_int_equal(info.config & 0xF000000FFull, 0x2B);
	freeCounter(&smi);
}

static int haecer_group_member(void *argument)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;

	(void)argument;
	CHECK_EQ(haecer_context_open(server.socket_path, &ctx), 0);
	CHECK_EQ(haecer_counter_open_arch(ctx, 0, INSTRUCTIONS_RETIRED, 0, 0, &counter), 0);
	haecer_counter_free(counter);
	CHECK_EQ(haecer_counter_open_energy(ctx, 0, RAPL_AMD_PKG, &counter), 0);
	haecer_counter_free(counter);
	haecer_context_close(ctx);
	return 0;
}

static void test_haecer_group_member_counts(void **state)
{
	gid_t groups[] = { HAECER_GID };

	(void)state;
	assert_int_equal(run_as(MEMBER_UID, MEMBER_UID, groups, 1, haecer_group_member, NULL), 0);
}

/* The shipped policy, its measuring group given by number. */
static const char *shipped_policy(void)
{
	char path[PATH_MAX];
	char *at;

	snprintf(path, sizeof(path), "%s/configs/policies/default.yaml", harness_source_dir());
	policy_text = harness_read_text(path, 1 << 20);
	if (policy_text == NULL)
		return NULL;
	at = strstr(policy_text, "{group: haecer}");
	if (at == NULL)
		return NULL;
	memcpy(at, "{gid: 4242}    ", strlen("{group: haecer}"));
	return policy_text;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_energy_domains_map_to_amd),
		cmocka_unit_test(test_energy_region_on_amd),
		cmocka_unit_test(test_arch_counter_on_amd),
		cmocka_unit_test(test_haecer_group_member_counts),
	};
	const char *extra[] = { "--sim-virtual-time", "--sim-access-step-ns", "20000", NULL };
	const char *policy = shipped_policy();
	int status;

	if (policy == NULL) {
		fprintf(stderr, "configs/policies/default.yaml: unreadable or without group haecer\n");
		return 1;
	}
	status = msrd_run_sim_group(&server, policy, "zen3", NULL, extra, &sim, "test_seed_amd",
				    tests, sizeof(tests) / sizeof(tests[0]));
	free(policy_text);
	return status;
}
