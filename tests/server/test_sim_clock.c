/*
 * The rough simulated CPU's clock, seen through msrd as a program sees it: APERF (0xE8) over
 * MPERF (0xE7) times the TSC rate is the clock a busy CPU ran at (SDM vol. 3B 14.2), and on the
 * simulated Sandy Bridge (virtual time) it follows the turbo bins the part reports in
 * MSR_TURBO_RATIO_LIMIT (0x1AD) by the number of active cores:
 * - one busy CPU runs at the 1-core bin, also with its sibling thread busy (one core active);
 *   a busy CPU on the other core brings both to the 2-core bin; a half-busy one takes CPU 0
 *   halfway there, and runs itself at the 2-core bin (core 0 is active whenever it runs);
 * - each stretch stays within the model's noise (clock.noise_mhz) of its bin;
 * - an idle CPU advances neither APERF nor MPERF; a busy one MPERF at the TSC rate (less SMIs);
 * - power rises with the clock: one busy CPU at the 1-core bin draws more than its share of
 *   max_watts, every CPU busy draws max_watts; a PL1 below that (MSR_PKG_POWER_LIMIT written
 *   through msrd) holds the package at PL1 and takes the clock down with it;
 * - the same --sim-seed gives the same APERF, another seed another; --sim-ideal runs at core_hz
 *   (APERF == MPERF to the cycle).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "harness/policy_text.h"

#define NS_PER_MS 1000000ull
#define NOISE_MHZ 30.0      /* configs/models/sandybridge.yaml clock.noise_mhz: every draw's bound */
#define IDLE_WATTS 4.0      /* its pkg idle_watts and max_watts */
#define MAX_WATTS 35.0
#define POWER_EXPONENT 2.0  /* its clock.power_exponent */
#define CPUS 4u

static const char policy[] =
	POLICY_HEADER
	POLICY_TSC_MSR
	"  - {name: IA32_MPERF, address: 0xE7, read: true, set: freq}\n"
	"  - {name: IA32_APERF, address: 0xE8, read: true, set: freq}\n"
	"  - {name: TURBO_RATIO_LIMIT, address: 0x1AD, read: true, set: freq}\n"
	"  - {name: PKG_POWER_LIMIT, address: 0x610, read: true, write_mask: 0xFFFFFF, set: limit}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [time, freq, limit], capabilities: [sim_control]}\n";

static struct msrd_server server;
static struct haecer_conn *sim;
static uint64_t tsc_hz;

static uint64_t read_msr(struct haecer_conn *conn, uint32_t cpu, uint32_t address)
{
	uint64_t value = 0;

	assert_int_equal(haecer_msr_read(conn, cpu, address, &value), 0);
	return value;
}

struct stretch {
	double mhz[CPUS];      /* tsc_hz x dAPERF / dMPERF, NAN when MPERF did not move */
	uint64_t aperf[CPUS], mperf[CPUS];
	uint64_t tsc;
};

/* Advance `ms` of virtual time and see what every CPU counted meanwhile. */
static void run_for(struct haecer_conn *conn, uint64_t ms, struct stretch *out)
{
	uint64_t aperf[CPUS], mperf[CPUS], tsc = read_msr(conn, 0, MSR_IA32_TSC);

	for (uint32_t cpu = 0; cpu < CPUS; cpu++) {
		aperf[cpu] = read_msr(conn, cpu, MSR_IA32_APERF);
		mperf[cpu] = read_msr(conn, cpu, MSR_IA32_MPERF);
	}
	assert_int_equal(haecer_sim_advance(conn, ms * NS_PER_MS, NULL), 0);
	out->tsc = read_msr(conn, 0, MSR_IA32_TSC) - tsc;
	for (uint32_t cpu = 0; cpu < CPUS; cpu++) {
		out->aperf[cpu] = read_msr(conn, cpu, MSR_IA32_APERF) - aperf[cpu];
		out->mperf[cpu] = read_msr(conn, cpu, MSR_IA32_MPERF) - mperf[cpu];
		out->mhz[cpu] = out->mperf[cpu] ? (double)tsc_hz * (double)out->aperf[cpu] /
							  (double)out->mperf[cpu] / 1e6 :
						  NAN;
	}
}

static void set_loads(double l0, double l1, double l2, double l3)
{
	const double loads[CPUS] = { l0, l1, l2, l3 };

	for (uint32_t cpu = 0; cpu < CPUS; cpu++)
		assert_int_equal(haecer_sim_set_load(sim, (int)cpu, loads[cpu]), 0);
}

/* The bins the part reports: MSR_TURBO_RATIO_LIMIT bits 7:0 (1 core) and 15:8 (2 cores), in
 * ratios of the 100 MHz bus clock. */
static void turbo_bins(double *one_core, double *two_cores)
{
	uint64_t limit = read_msr(sim, 0, MSR_TURBO_RATIO_LIMIT);

	*one_core = (double)(limit & 0xFF) * 100.0;
	*two_cores = (double)((limit >> 8) & 0xFF) * 100.0;
	assert_true(*one_core > *two_cores && *two_cores * 1e6 > (double)tsc_hz);
}

static void check_near(double mhz, double expected)
{
	if (!(fabs(mhz - expected) <= NOISE_MHZ)) {
		fprintf(stderr, "%.1f MHz, expected %.1f +- %.0f\n", mhz, expected, NOISE_MHZ);
		fail();
	}
}

static void test_clock_follows_active_cores(void **state)
{
	struct stretch one, siblings, two, half;
	double one_core, two_cores;

	(void)state;
	turbo_bins(&one_core, &two_cores);
	/* Linux numbers the threads of core 0 as CPUs 0 and 2, core 1 as 1 and 3. */
	set_loads(1.0, 0.0, 0.0, 0.0);
	run_for(sim, 50, &one);
	set_loads(1.0, 0.0, 1.0, 0.0);
	run_for(sim, 50, &siblings);
	set_loads(1.0, 1.0, 0.0, 0.0);
	run_for(sim, 50, &two);
	set_loads(1.0, 0.5, 0.0, 0.0);
	run_for(sim, 50, &half);
	fprintf(stderr, "bins %.0f / %.0f MHz; CPU 0 alone %.1f, with its sibling %.1f and %.1f, "
		"with the other core %.1f and %.1f, with it half busy %.1f and %.1f MHz\n",
		one_core, two_cores, one.mhz[0], siblings.mhz[0], siblings.mhz[2], two.mhz[0],
		two.mhz[1], half.mhz[0], half.mhz[1]);
	check_near(one.mhz[0], one_core);
	check_near(siblings.mhz[0], one_core);
	check_near(siblings.mhz[2], one_core);
	check_near(two.mhz[0], two_cores);
	check_near(two.mhz[1], two_cores);
	/* CPU 0 sees the other core active half the time; CPU 1, whenever it runs, sees core 0
	 * active. */
	check_near(half.mhz[0], (one_core + two_cores) / 2);
	check_near(half.mhz[1], two_cores);
	/* Not degenerate: the noise moves the clock off its bin. */
	assert_true(one.mhz[0] != one_core || two.mhz[0] != two_cores);
	/* MPERF: TSC cycles while busy (SMIs stop the CPU: sandybridge's take about 1 %). */
	assert_true(one.mperf[0] <= one.tsc && (double)one.mperf[0] >= 0.97 * (double)one.tsc);
	assert_true(fabs((double)half.mperf[1] / (double)half.mperf[0] - 0.5) < 0.001);
}

static void test_idle_cpu_counts_nothing(void **state)
{
	struct stretch idle;

	(void)state;
	set_loads(1.0, 0.0, 0.0, 0.0);
	run_for(sim, 50, &idle);
	for (uint32_t cpu = 1; cpu < CPUS; cpu++) {
		assert_int_equal(idle.aperf[cpu], 0);
		assert_int_equal(idle.mperf[cpu], 0);
	}
	assert_true(idle.aperf[0] > 0 && idle.mperf[0] > 0);
}

static double watts_now(void)
{
	struct haecer_sim_energy_at at;
	uint64_t now;

	assert_int_equal(haecer_sim_advance(sim, 0, &now), 0);
	assert_int_equal(haecer_sim_energy_at(sim, 0, RAPL_DOMAIN_PKG, now, &at), 0);
	return at.watts;
}

static void test_power_follows_the_clock(void **state)
{
	double one_core, two_cores, alone, all, limited, share = (MAX_WATTS - IDLE_WATTS) / CPUS;
	uint64_t limit = read_msr(sim, 0, MSR_PKG_POWER_LIMIT);
	struct stretch capped, freed;

	(void)state;
	turbo_bins(&one_core, &two_cores);
	set_loads(1.0, 0.0, 0.0, 0.0);
	alone = watts_now();
	set_loads(1.0, 1.0, 1.0, 1.0);
	all = watts_now();
	fprintf(stderr, "CPU 0 alone %.3f W, every CPU %.3f W\n", alone, all);
	assert_true(alone - IDLE_WATTS > share);
	assert_true(fabs(alone - IDLE_WATTS - share * pow(one_core / two_cores, POWER_EXPONENT)) <
		    0.01);
	assert_true(fabs(all - MAX_WATTS) < 0.001);

	/* PL1 20 W (160 eighths of a watt, enabled): the package is held at it, and with every
	 * CPU busy the clock falls to where (clock / all-core)^2 x 31 W + 4 W = 20 W. */
	assert_int_equal(haecer_msr_write(sim, 2, MSR_PKG_POWER_LIMIT,
					  (limit & ~PKG_POWER_LIMIT_PL1_POWER) | PKG_POWER_LIMIT_PL1_ENABLE | 160), 0);
	assert_int_equal(read_msr(sim, 0, MSR_PKG_POWER_LIMIT), read_msr(sim, 2, MSR_PKG_POWER_LIMIT));
	limited = watts_now();
	run_for(sim, 50, &capped);
	assert_int_equal(haecer_msr_write(sim, 0, MSR_PKG_POWER_LIMIT, limit), 0);
	run_for(sim, 50, &freed);
	fprintf(stderr, "PL1 20 W: %.3f W, %.1f MHz; PL1 back: %.1f MHz\n", limited,
		capped.mhz[0], freed.mhz[0]);
	assert_true(limited <= 20.0 + 0.001 && limited > 19.9);
	check_near(capped.mhz[0],
		   two_cores * pow((20.0 - IDLE_WATTS) / (MAX_WATTS - IDLE_WATTS), 1 / POWER_EXPONENT));
	check_near(freed.mhz[0], two_cores);
}

/* What CPU 0 counts in APERF in 20 ms alone, then 20 ms with CPU 1, on a fresh msrd. */
static int aperf_sequence(const char *const *extra, uint64_t *aperf, uint64_t *mperf)
{
	struct msrd_server other;
	struct haecer_conn *conn = NULL;
	int status = -1;

	if (msrd_start_sim(&other, policy, "sandybridge", NULL, extra) < 0)
		return -1;
	if (haecer_connect(other.socket_path, &conn) < 0)
		goto out;
	if (haecer_sim_set_load(conn, 0, 1.0) < 0 || haecer_sim_advance(conn, 20 * NS_PER_MS, NULL) ||
	    haecer_sim_set_load(conn, 1, 1.0) < 0 || haecer_sim_advance(conn, 20 * NS_PER_MS, NULL) ||
	    haecer_msr_read(conn, 0, MSR_IA32_APERF, aperf) < 0 ||
	    haecer_msr_read(conn, 0, MSR_IA32_MPERF, mperf) < 0)
		goto out;
	status = 0;
out:
	haecer_close(conn);
	if (msrd_stop(&other) < 0)
		status = -1;
	return status;
}

static void test_seed_replays_and_ideal_is_exact(void **state)
{
	const char *const seven[] = { "--sim-virtual-time", "--sim-seed", "7", NULL };
	const char *const eight[] = { "--sim-virtual-time", "--sim-seed", "8", NULL };
	const char *const ideal[] = { "--sim-virtual-time", "--sim-ideal", NULL };
	uint64_t a1, m1, a2, m2, a3, m3, a4, m4;

	(void)state;
	assert_int_equal(aperf_sequence(seven, &a1, &m1), 0);
	assert_int_equal(aperf_sequence(seven, &a2, &m2), 0);
	assert_int_equal(aperf_sequence(eight, &a3, &m3), 0);
	assert_int_equal(aperf_sequence(ideal, &a4, &m4), 0);
	fprintf(stderr, "APERF seed 7: %llu, %llu; seed 8: %llu; ideal %llu = MPERF %llu\n",
		(unsigned long long)a1, (unsigned long long)a2, (unsigned long long)a3,
		(unsigned long long)a4, (unsigned long long)m4);
	assert_int_equal(a1, a2);
	assert_int_equal(m1, m2);
	assert_true(a1 != a3);
	/* sandybridge: core_hz = tsc_hz, so at a constant clock APERF and MPERF agree. */
	assert_int_equal(a4, m4);
}

static int read_tsc_hz(void **state)
{
	struct haecer_machine_info info;

	(void)state;
	if (haecer_machine_info(sim, &info) < 0)
		return -1;
	tsc_hz = info.tsc_hz;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_clock_follows_active_cores, read_tsc_hz),
		cmocka_unit_test_setup(test_idle_cpu_counts_nothing, read_tsc_hz),
		cmocka_unit_test_setup(test_power_follows_the_clock, read_tsc_hz),
		cmocka_unit_test(test_seed_replays_and_ideal_is_exact),
	};
	const char *const extra[] = { "--sim-virtual-time", "--sim-seed", "12", NULL };

	return msrd_run_sim_group(&server, policy, "sandybridge", NULL, extra, &sim, "test_sim_clock",
				  tests, sizeof(tests) / sizeof(tests[0]));
}
