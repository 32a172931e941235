/*
 * Regions measure every RAPL domain the machine has, by the machine's domains: on the simulated
 * Skylake-SP (package and DRAM, no core or GPU domain) the report's columns are energy-pkg and
 * energy-ram, and a busy region is charged each domain's power (the simulator's ground truth
 * under a constant power trace) x its thread's CPU time / the host CPUs, within 5 %.
 */
#include <math.h>
#include <time.h>

#include "hw/msr.h"
#include "tests/region/region_test.h"

static const char policy[] =
	POLICY_HEADER
	POLICY_TSC_MSR
	POLICY_PMU_MSRS
	POLICY_RAPL_MSRS
	"  - {name: DRAM_ENERGY, address: 0x619, read: true, set: rapl}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [all]\n"
	"    capabilities: [sim_control]\n";

static uint64_t clock_of(clockid_t clock)
{
	struct timespec now;

	clock_gettime(clock, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static volatile double sink;

static void test_every_domain_of_the_machine(void **state)
{
	static const unsigned domains[2] = { RAPL_DOMAIN_PKG, RAPL_DOMAIN_DRAM };
	static const char *const events[2] = { "Energy_pkg_nJ", "Energy_ram_nJ" };
	const char *report = region_report_path("domains.txt", "");
	struct haecer_sim_truth before[2], after[2];
	double host_cpus = (double)sysconf(_SC_NPROCESSORS_CONF), x = 1.0;
	uint64_t cpu, marked, end;
	struct cg_file file;
	char *text;

	(void)state;
	assert_int_equal(haecer_sim_power_trace(sim, "pkg: 3600000 90\ndram: 3600000 12\n"), 0);
	haecer_region_begin("warm-up");
	haecer_region_end("warm-up");
	for (int d = 0; d < 2; d++)
		assert_int_equal(haecer_sim_energy_truth(sim, 0, domains[d], &before[d]), 0);
	marked = clock_of(CLOCK_THREAD_CPUTIME_ID);
	region_expect(haecer_region_begin("busy"), "begin");
	cpu = clock_of(CLOCK_THREAD_CPUTIME_ID);
	end = clock_of(CLOCK_MONOTONIC) + (harness_small_scale() ? 150000000ull : 300000000ull);
	while (clock_of(CLOCK_MONOTONIC) < end)
		for (int i = 0; i < 1000; i++)
			x = x * 1.0000001 + 0.5;
	sink = x;
	cpu = clock_of(CLOCK_THREAD_CPUTIME_ID) - cpu;
	region_expect(haecer_region_end("busy"), "end");
	marked = clock_of(CLOCK_THREAD_CPUTIME_ID) - marked;
	for (int d = 0; d < 2; d++)
		assert_int_equal(haecer_sim_energy_truth(sim, 0, domains[d], &after[d]), 0);
	region_expect(haecer_region_report(report), "report");

	text = region_read_text(report);
	assert_non_null(text);
	fprintf(stderr, "%s", text);
	assert_non_null(strstr(text, " energy-pkg J "));
	assert_non_null(strstr(text, " energy-ram J "));
	assert_null(strstr(text, "energy-cores J"));
	assert_null(strstr(text, "energy-gpu J"));
	free(text);
	text = region_read_text(region_report_path("domains.txt", ".csv"));
	assert_non_null(text);
	assert_non_null(strstr(text, ",energy-pkg_nJ,energy-pkg_nJ_self,energy-ram_nJ,"));
	free(text);

	cg_read(region_report_path("domains.txt", ".callgrind"), &file);
	for (int d = 0; d < 2; d++) {
		double watts = (after[d].joules - before[d].joules) /
			       ((double)(after[d].now_ns - before[d].now_ns) / 1e9);
		double charged = (double)cg_find(&file, "busy")->self[cg_event(&file, events[d])] / 1e9;
		double due = watts * (double)cpu / 1e9 / host_cpus;
		double due_marked = watts * (double)marked / 1e9 / host_cpus;
		fprintf(stderr, "%s: charged %.4f J, due %.4f..%.4f J (%.2f W, %.3f s CPU)\n",
			events[d], charged, due, due_marked, watts, (double)cpu / 1e9);
		assert_true(charged >= 0.95 * due && charged <= 1.05 * due_marked);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_domain_of_the_machine),
	};
	const char *extra[] = { "--sim-ideal", NULL };

	return msrd_run_sim_group(&server, policy, "skylake-sp", NULL, extra, &sim, "tests", tests,
				  sizeof(tests) / sizeof(tests[0]));
}
