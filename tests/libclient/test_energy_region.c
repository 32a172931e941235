/*
 * startEnergyRead / endEnergyRead of regions shorter than the 1 ms RAPL update land on the
 * simulator's ground truth within its quantisation. msrd runs the simulated CPU in virtual time
 * with --sim-access-step-ns: every register access moves time by STEP_NS, so the library's
 * polling loops run deterministically and the region's true energy is known exactly (SIM
 * ENERGY_TRUTH when startEnergyRead returns and when endEnergyRead is called; the region itself
 * is a SIM_ADVANCE). The tolerance is what the method cannot see: one energy unit at each end,
 * and the energy of one poll (three register accesses) at each end.
 *
 * Also: the calibration equals the true power per TSC tick; the SMIs counted inside a region
 * match MSR_SMI_COUNT on the model that has it (sandybridge: one every 16 ms), on AMD (a zen3
 * variant with the same SMIs) a counter of PMCx02B counts them as well, and for a client the
 * policy does not let read the count it is unknown (HAECER_SMI_UNKNOWN). A client that may not read the simulated TSC gets NaN and the reason.
 *
 * All of that on the ideal CPU (--sim-ideal), and again on the rough one (seed 12: jittered
 * updates, phases, SMIs that stop the CPU for 120-160 us): there, under constant power and right
 * after power steps of x1.5 and x0.5 (a power trace), every region no SMI hit lands within the
 * uncertainty the result states (plus the poll energy at each end), and every region an SMI hit
 * says so, with the simulator's own count of the SMIs between its two polls.
 */
#include <math.h>

#include "tests/lib/test_check.h"
#include "tests/libclient/libclient_test.h"

#define STEP_NS 1000ull
#define POLL_NS (3 * STEP_NS)  /* TSC, energy, SMI count */
#define TSC_HZ 2500000000.0    /* sandybridge */

struct region_truth {
	struct haecer_sim_truth start, end;
};

/* One region of `ns` nanoseconds of virtual time on `domain`; returns endEnergyRead. */
static double measure(RAPLCounter domain, uint32_t truth_domain, uint64_t ns,
		      struct region_truth *truth)
{
	startEnergyRead(domain);
	assert_int_equal(haecer_sim_energy_truth(sim, 0, truth_domain, &truth->start), 0);
	assert_int_equal(haecer_sim_advance(sim, ns, NULL), 0);
	assert_int_equal(haecer_sim_energy_truth(sim, 0, truth_domain, &truth->end), 0);
	return endEnergyRead(domain);
}

static void check_region(uint64_t ns)
{
	struct haecer_energy_result result;
	struct region_truth truth;
	double joules = measure(RAPL_PKG, RAPL_DOMAIN_PKG, ns, &truth);
	double expected = truth.end.joules - truth.start.joules;
	/* Virtual time between the two truths: the region, plus whatever msrd's own sampling
	 * of the energy registers during SIM_ADVANCE cost in access steps. */
	double seconds = (double)(truth.end.now_ns - truth.start.now_ns) / NS_PER_S;
	double watts = expected / seconds;
	double unit = getEnergyUnit();
	double tolerance = 2 * unit + 2 * watts * (double)POLL_NS / NS_PER_S;

	libclient_explain("endEnergyRead", isnan(joules) ? -1 : 0);
	assert_false(isnan(joules));
	assert_int_equal(haecer_last_energy_result(RAPL_PKG, &result), 0);
	fprintf(stderr, "%6.1f us: %.3f uJ measured (raw %.3f, wait %.3f), %.3f uJ true, "
		"tolerance %.3f uJ; %.3f us by the TSC, %u SMIs\n", (double)ns / 1000.0, joules * 1e6,
		result.raw_joules * 1e6, result.wait_joules * 1e6, expected * 1e6, tolerance * 1e6,
		result.seconds * 1e6, result.smi_count);
	assert_true(fabs(joules - expected) <= tolerance);
	assert_true(result.wait_ticks > 0);
	/* The region's length by the simulated TSC: from the poll that saw the start update to
	 * the first poll of endEnergyRead, so longer by up to one poll. */
	assert_true(result.seconds >= seconds);
	assert_true(result.seconds - seconds <= (double)(POLL_NS + 1) / NS_PER_S);
	assert_true(result.smi_count_exact);
	assert_true(result.simulated); /* every result of the simulated CPU says so */
	assert_int_equal(result.tsc_source, HAECER_TSC_SIMULATED);
}

static void test_sub_millisecond_regions(void **state)
{
	const uint64_t lengths[] = {100000, 300000, 650000, 999000, 2500000};

	(void)state;
	assert_int_equal(haecer_sim_set_load(sim, -1, 1.0), 0);
	for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++)
		check_region(lengths[i]);
}

static void test_calibration_is_the_power(void **state)
{
	PerfCounter pkg = setupEnergyCounter(RAPL_PKG);
	struct haecer_sim_truth before, after;
	double per_tick, watts;

	(void)state;
	assert_int_equal(haecer_sim_set_load(sim, -1, 0.4), 0);
	assert_int_equal(haecer_sim_energy_truth(sim, 0, RAPL_DOMAIN_PKG, &before), 0);
	assert_int_equal(haecer_energy_calibrate(haecer_perf_counter(&pkg), 8, &per_tick), 0);
	assert_int_equal(haecer_sim_energy_truth(sim, 0, RAPL_DOMAIN_PKG, &after), 0);
	watts = (after.joules - before.joules) / ((double)(after.now_ns - before.now_ns) / NS_PER_S);
	fprintf(stderr, "calibration %.4e J/tick = %.4f W, true %.4f W\n", per_tick,
		per_tick * TSC_HZ, watts);
	assert_true(fabs(per_tick * TSC_HZ - watts) <= 0.01 * watts);
	freeCounter(&pkg);
}

static uint64_t smi_count(void)
{
	uint64_t value;

	assert_int_equal(haecer_msr_read(sim, 0, MSR_SMI_COUNT, &value), 0);
	return value;
}

static void test_smi_count(void **state)
{
	struct haecer_energy_result result;
	uint64_t before, after;

	(void)state;
	/* A region of 40 ms holds two or three of the model's SMIs (one per 16 ms). */
	startEnergyRead(RAPL_PKG);
	before = smi_count();
	assert_int_equal(haecer_sim_advance(sim, 40 * NS_PER_MS, NULL), 0);
	after = smi_count();
	assert_false(isnan(endEnergyRead(RAPL_PKG)));
	assert_int_equal(haecer_last_energy_result(RAPL_PKG, &result), 0);
	fprintf(stderr, "SMIs: %u in the measurement, %llu in the region\n", result.smi_count,
		(unsigned long long)(after - before));
	assert_true(result.smi_count_exact);
	/* The measurement spans the region plus up to one update interval at its ends. */
	assert_true(result.smi_count >= after - before && result.smi_count <= after - before + 1);
}

/* The simulator's SMI count at a simulated TSC value (virtual time: ns = ticks / 2.5). */
static uint64_t true_smis_at(uint64_t tsc)
{
	struct haecer_sim_energy_at at;

	assert_int_equal(haecer_sim_energy_at(sim, 0, RAPL_DOMAIN_PKG,
					      (uint64_t)((double)tsc * NS_PER_S / TSC_HZ), &at), 0);
	return at.smi_count;
}

static void rough_region(uint64_t ns, double watts_before, double watts_after, unsigned *hit)
{
	struct haecer_energy_result result;
	struct region_truth truth;
	char trace[96];
	double joules, expected, seconds, watts, tolerance;

	/* The package draws watts_before for a while, then steps right before the region. */
	snprintf(trace, sizeof(trace), "pkg: 3 %.1f\n", watts_before);
	assert_int_equal(haecer_sim_power_trace(sim, trace), 0);
	assert_int_equal(haecer_sim_advance(sim, 3 * NS_PER_MS, NULL), 0);
	snprintf(trace, sizeof(trace), "pkg: 1000 %.1f\n", watts_after);
	assert_int_equal(haecer_sim_power_trace(sim, trace), 0);
	joules = measure(RAPL_PKG, RAPL_DOMAIN_PKG, ns, &truth);
	libclient_explain("endEnergyRead", isnan(joules) ? -1 : 0);
	assert_false(isnan(joules));
	assert_int_equal(haecer_last_energy_result(RAPL_PKG, &result), 0);
	assert_true(result.smi_count_exact);
	assert_int_equal(result.smi_count, true_smis_at(result.last_poll_tsc) -
						   true_smis_at(result.first_poll_tsc));
	expected = truth.end.joules - truth.start.joules;
	seconds = (double)(truth.end.now_ns - truth.start.now_ns) / NS_PER_S;
	watts = expected / seconds;
	tolerance = result.uncertainty_joules + 2 * watts * (double)POLL_NS / NS_PER_S;
	fprintf(stderr, "%6.1f us, %4.1f -> %4.1f W: %9.3f uJ measured, %9.3f uJ true, "
		"+-%.3f uJ, %u SMIs\n", (double)ns / 1000.0, watts_before, watts_after,
		joules * 1e6, expected * 1e6, tolerance * 1e6, result.smi_count);
	if (result.smi_count > 0) {
		(*hit)++;
		return; /* disturbed, and it says so: callers filter it */
	}
	assert_true(fabs(joules - expected) <= tolerance);
}

static void test_rough_regions(void **state)
{
	const uint64_t lengths[] = {100000, 300000, 650000, 999000, 2500000};
	const double steps[][2] = {{30.0, 30.0}, {30.0, 45.0}, {30.0, 15.0}};
	unsigned hit = 0, total = 0;

	(void)state;
	for (unsigned round = 0; round < 4; round++) {
		for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
			for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
				rough_region(lengths[i], steps[s][0], steps[s][1], &hit);
				total++;
			}
		}
	}
	fprintf(stderr, "%u of %u regions hit by an SMI\n", hit, total);
	/* One SMI per 16 ms and about 6 ms of virtual time per region: some, not all. */
	assert_true(hit > 0 && hit < total);
	assert_int_equal(haecer_sim_power_trace(sim, ""), 0);
}

/* In a process of a uid the policy refuses MSR_SMI_COUNT (or the TSC as well). */
static int region_under_policy(void *argument)
{
	bool tsc_granted = *(const bool *)argument;
	struct haecer_energy_result result;
	double joules;

	startEnergyRead(RAPL_PKG);
	joules = endEnergyRead(RAPL_PKG);
	if (!tsc_granted) {
		CHECK(isnan(joules));
		CHECK(strstr(haecer_error_detail(), "TSC (MSR 0x10)") != NULL);
		fprintf(stderr, "as expected: %s\n", haecer_error_detail());
		return 0;
	}
	libclient_explain("endEnergyRead", isnan(joules) ? -1 : 0);
	CHECK(!isnan(joules));
	CHECK_EQ(haecer_last_energy_result(RAPL_PKG, &result), 0);
	CHECK(!result.smi_count_exact);
	CHECK_EQ(result.smi_count, HAECER_SMI_UNKNOWN);
	return 0;
}

static void test_policy_without_smi_count_or_tsc(void **state)
{
	bool granted = true, refused = false;

	(void)state;
	assert_int_equal(run_as(ENERGY_ONLY_UID, ENERGY_ONLY_UID, NULL, 0, region_under_policy,
				&granted), 0);
	assert_int_equal(run_as(ENERGY_WITHOUT_TSC_UID, ENERGY_WITHOUT_TSC_UID, NULL, 0,
				region_under_policy, &refused), 0);
}

/* The simulator's SMI count at a simulated time. */
static uint64_t true_smis_at_ns(uint32_t domain, uint64_t ns)
{
	struct haecer_sim_energy_at at;

	assert_int_equal(haecer_sim_energy_at(sim, 0, domain, ns, &at), 0);
	return at.smi_count;
}

/* AMD has no MSR_SMI_COUNT: a region counts SMIs with a counter of PMCx02B (SMIs received) on
 * its CPU instead. On a Zen 3 variant with an SMI every 16 ms, a 40 ms region holds two or
 * three, as many as the simulator took (plus at most one in the update interval at its ends). */
static void test_amd_smis_counted(void **state)
{
	struct haecer_energy_result result;
	struct region_truth truth;
	uint64_t taken;
	double joules;

	(void)state;
	assert_int_equal(haecer_sim_set_load(sim, -1, 1.0), 0);
	joules = measure(RAPL_AMD_PKG, RAPL_DOMAIN_AMD_PKG, 40 * NS_PER_MS, &truth);
	libclient_explain("endEnergyRead", isnan(joules) ? -1 : 0);
	assert_false(isnan(joules));
	assert_int_equal(haecer_last_energy_result(RAPL_AMD_PKG, &result), 0);
	taken = true_smis_at_ns(RAPL_DOMAIN_AMD_PKG, truth.end.now_ns) -
		true_smis_at_ns(RAPL_DOMAIN_AMD_PKG, truth.start.now_ns);
	fprintf(stderr, "AMD SMIs: %u in the measurement, %llu in the region\n", result.smi_count,
		(unsigned long long)taken);
	assert_true(result.smi_count_exact);
	assert_true(taken >= 2);
	assert_true(result.smi_count >= taken && result.smi_count <= taken + 1);
}

int main(void)
{
	char step[32];
	const char *ideal[] = {"--sim-virtual-time", "--sim-access-step-ns", step, "--sim-ideal",
			       NULL};
	const char *rough[] = {"--sim-virtual-time", "--sim-access-step-ns", step, "--sim-seed",
			       "12", NULL};
	const struct CMUnitTest intel[] = {
		cmocka_unit_test(test_sub_millisecond_regions),
		cmocka_unit_test(test_calibration_is_the_power),
		cmocka_unit_test(test_smi_count),
		cmocka_unit_test(test_policy_without_smi_count_or_tsc),
	};
	const struct CMUnitTest intel_rough[] = {
		cmocka_unit_test(test_rough_regions),
		cmocka_unit_test(test_smi_count),
	};
	char models[] = "/tmp/haecer-amd-smi-XXXXXX";
	const char *amd_rough[] = {"--sim-virtual-time", "--sim-access-step-ns", step,
				   "--sim-seed", "12", "--models-dir", models, NULL};
	const struct CMUnitTest amd[] = {
		cmocka_unit_test(test_amd_smis_counted),
	};
	int status;

	if (!libclient_msrd_has_option("--sim-ideal")) {
		printf("msrd has no --sim-ideal\n");
		return 77;
	}
	snprintf(step, sizeof(step), "%llu", STEP_NS);
	status = LIBCLIENT_RUN_GROUP("sandybridge", NULL, ideal, intel);
	status |= LIBCLIENT_RUN_GROUP("sandybridge", NULL, rough, intel_rough);
	/* Zen 3 with an SMI every 16 ms, as the sandybridge model takes them. */
	if (mkdtemp(models) == NULL ||
	    harness_model_variant(models, "zen3-smi", "zen3", NULL, 0, "smi_period_ms: 16\n") < 0)
		return 1;
	status |= LIBCLIENT_RUN_GROUP("zen3-smi", NULL, amd_rough, amd);
	harness_remove_tree(models);
	return status;
}
