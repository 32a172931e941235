/*
 * The rough simulated CPU (the default) behaves as its model file says, in virtual time with a
 * fixed seed, so every figure here is the same on every run:
 * - energy updates come at the model's mean interval (sandybridge: 999.758 us, seed 001 2.3.2),
 *   each within +-jitter_spread_ns of its grid point, spread like the distribution says (normal,
 *   sigma = spread / 3), and the register changes exactly at them;
 * - each domain has its phase (pp0 131 us after pkg);
 * - SMIs come once per smi_period_ms, take 300-400 k TSC cycles during which no busy time
 *   passes (cycle counters stop, the TSC runs on), count in MSR_SMI_COUNT, and a register
 *   access inside one waits for its end;
 * - power follows a CPU's load within the millisecond (a 0.3 ms busy phase of a load script);
 * - power traces impose steps and ramps per domain, exactly integrated; malformed ones fail;
 * - SIM_ENERGY_AT answers past energy as it was;
 * - the same seed replays the same registers, another seed gives others.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/backend/backend_test.h"

#define INTERVAL_NS 999758.0   /* sandybridge.yaml rough.update_interval_ns */
#define SPREAD_NS 20000.0
#define PP0_PHASE_NS 131000.0
#define CORE_HZ 2500000000ull

static struct msr_backend *open_seeded(uint64_t seed, uint64_t step_ns)
{
	struct backend_options options = {
		.kind = BACKEND_SIM, .sim_model = "sandybridge", .models_dir = test_models_dir(),
		.sim_virtual_time = true, .sim_access_step_ns = step_ns, .sim_seed = seed,
	};
	struct msr_backend *backend = NULL;

	assert_int_equal(backend_open(&options, &backend, NULL, 0), 0);
	return backend;
}

static uint64_t last_update(struct msr_backend *backend, enum rapl_domain domain)
{
	struct sim_energy_truth truth;

	assert_int_equal(backend_sim_energy_truth(backend, 0, domain, &truth), 0);
	return truth.last_update_ns;
}

/* The update times of `domain` over `count` updates, stepping 50 us at a time. */
static void collect_updates(struct msr_backend *backend, enum rapl_domain domain, uint64_t *times,
			    size_t count)
{
	uint64_t previous = last_update(backend, domain);
	size_t found = 0;

	while (found < count) {
		uint64_t now;

		assert_int_equal(backend_sim_advance(backend, 50000), 0);
		now = last_update(backend, domain);
		if (now != previous)
			times[found++] = now;
		previous = now;
	}
}

static void test_update_jitter(void **state)
{
	struct msr_backend *backend = open_seeded(TEST_SIM_SEED, 0);
	static uint64_t times[2000];
	double mean_interval, sum = 0.0, sum_squares = 0.0, max = 0.0;

	(void)state;
	collect_updates(backend, RAPL_DOMAIN_PKG, times, 2000);
	mean_interval = (double)(times[1999] - times[0]) / 1999.0;
	for (size_t i = 0; i < 2000; i++) {
		/* Offset from the grid point: phase 0, k = nearest multiple of the interval. */
		double k = nearbyint((double)times[i] / INTERVAL_NS);
		double offset = (double)times[i] - k * INTERVAL_NS;

		sum += offset;
		sum_squares += offset * offset;
		if (fabs(offset) > max)
			max = fabs(offset);
	}
	fprintf(stderr, "mean interval %.3f ns, offsets: mean %.1f ns, sd %.1f ns, max %.1f ns\n",
		mean_interval, sum / 2000, sqrt(sum_squares / 2000), max);
	assert_true(fabs(mean_interval - INTERVAL_NS) < 50.0);
	assert_true(max <= SPREAD_NS);
	/* Normal with sigma = spread / 3 (truncated at 3 sigma): sd near 6.7 us. */
	assert_true(sqrt(sum_squares / 2000) > SPREAD_NS / 4 && sqrt(sum_squares / 2000) <
										   SPREAD_NS / 2.5);
	assert_true(fabs(sum / 2000) < 1000.0);
	backend_close(backend);
}

/* The register shows the energy of the latest update: it changes exactly at one. */
static void test_register_changes_at_updates(void **state)
{
	struct msr_backend *backend = open_seeded(TEST_SIM_SEED, 0);
	struct sim_energy_truth truth;
	uint64_t update, value;

	(void)state;
	assert_int_equal(backend_sim_set_load(backend, -1, 1.0), 0);
	assert_int_equal(backend_sim_advance(backend, 5 * NS_PER_MS), 0);
	for (int i = 0; i < 20; i++) {
		update = last_update(backend, RAPL_DOMAIN_PKG);
		value = read_or_die(backend, 0, MSR_PKG_ENERGY_STATUS);
		/* Walk in 1 us steps to the next update: the value holds until then. */
		while (last_update(backend, RAPL_DOMAIN_PKG) == update) {
			assert_int_equal(read_or_die(backend, 0, MSR_PKG_ENERGY_STATUS), value);
			assert_int_equal(backend_sim_advance(backend, 1000), 0);
		}
		assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &truth), 0);
		assert_int_equal(read_or_die(backend, 0, MSR_PKG_ENERGY_STATUS),
				 truth.units_at_update & 0xFFFFFFFFull);
		assert_true(truth.units_at_update > value);
	}
	backend_close(backend);
}

static void test_domain_phase(void **state)
{
	struct msr_backend *backend = open_seeded(TEST_SIM_SEED, 0);
	static uint64_t pkg[200], pp0[200];
	struct msr_backend *second = open_seeded(TEST_SIM_SEED, 0);
	double sum = 0.0;

	(void)state;
	collect_updates(backend, RAPL_DOMAIN_PKG, pkg, 200);
	collect_updates(second, RAPL_DOMAIN_PP0, pp0, 200);
	for (size_t i = 0; i < 200; i++) {
		double k = nearbyint(((double)pp0[i] - PP0_PHASE_NS) / INTERVAL_NS);

		sum += (double)pp0[i] - k * INTERVAL_NS;
	}
	fprintf(stderr, "pp0 mean offset from the grid %.1f ns (phase %.0f ns)\n", sum / 200,
		PP0_PHASE_NS);
	assert_true(fabs(sum / 200 - PP0_PHASE_NS) < 2000.0);
	/* And pkg is not in phase with it. */
	assert_true(pkg[10] % 1000000 != pp0[10] % 1000000);
	backend_close(backend);
	backend_close(second);
}

static void test_smi_time_stolen_and_counted(void **state)
{
	struct msr_backend *backend = open_seeded(TEST_SIM_SEED, 0);
	uint64_t smi0, smi1, cycles0, cycles1, tsc0, tsc1, stolen_ns;
	double per_smi_cycles;

	(void)state;
	assert_int_equal(backend_sim_set_load(backend, 0, 1.0), 0);
	/* MPERF counts TSC cycles while the CPU runs (the core clock is at a turbo bin). */
	smi0 = read_or_die(backend, 0, MSR_SMI_COUNT);
	cycles0 = read_or_die(backend, 0, MSR_IA32_MPERF);
	tsc0 = read_or_die(backend, 0, MSR_IA32_TSC);
	assert_int_equal(backend_sim_advance(backend, NS_PER_S), 0);
	smi1 = read_or_die(backend, 0, MSR_SMI_COUNT);
	cycles1 = read_or_die(backend, 0, MSR_IA32_MPERF);
	tsc1 = read_or_die(backend, 0, MSR_IA32_TSC);
	/* Busy all the time except the SMIs: the missing cycles are their time. */
	stolen_ns = (uint64_t)(((double)(tsc1 - tsc0) - (double)(cycles1 - cycles0)) / 2.5);
	per_smi_cycles = (double)stolen_ns * 2.5 / (double)(smi1 - smi0);
	fprintf(stderr, "1 s: %llu SMIs, %llu ns stolen, %.0f TSC cycles each\n",
		(unsigned long long)(smi1 - smi0), (unsigned long long)stolen_ns, per_smi_cycles);
	assert_true(smi1 - smi0 >= 61 && smi1 - smi0 <= 64);      /* one per 16 ms */
	assert_true(per_smi_cycles >= 300000 * 0.97 && per_smi_cycles <= 400000 * 1.03);
	backend_close(backend);
}

/* An access that lands in an SMI waits for its end: TSC reads 1 us apart jump by the SMI. */
static void test_access_waits_for_smi(void **state)
{
	struct msr_backend *backend = open_seeded(TEST_SIM_SEED, 1000);
	uint64_t previous = read_or_die(backend, 0, MSR_IA32_TSC), largest = 0;

	(void)state;
	for (int i = 0; i < 40000; i++) {  /* 40 ms of 1 us accesses */
		uint64_t tsc = read_or_die(backend, 0, MSR_IA32_TSC);

		if (tsc - previous > largest)
			largest = tsc - previous;
		previous = tsc;
	}
	fprintf(stderr, "largest gap between two TSC reads: %llu cycles\n",
		(unsigned long long)largest);
	assert_true(largest >= 300000 && largest <= 400000 + 2 * 2500);
	backend_close(backend);
}

static void test_power_follows_load_within_a_millisecond(void **state)
{
	struct msr_backend *backend = open_seeded(TEST_SIM_SEED, 0);
	struct sim_energy_truth busy, idle;
	char dir[] = "/tmp/haecer-rough-XXXXXX";
	char path[PATH_MAX];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/load", dir);
	/* CPU 0 busy for 0.3 ms, idle for 0.7 ms, repeating; the others idle. */
	assert_int_equal(harness_write_file(path, "cpu 0: 0.3 1.0\ncpu 0: 0.7 0.0\n", 0644), 0);
	assert_int_equal(backend_sim_load_script(backend, path), 0);
	assert_int_equal(backend_sim_advance(backend, 100000), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &busy), 0);
	assert_int_equal(backend_sim_advance(backend, 400000), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &idle), 0);
	fprintf(stderr, "power at 0.1 ms %.3f W, at 0.5 ms %.3f W\n",
		(double)busy.power_microwatts / 1e6, (double)idle.power_microwatts / 1e6);
	/* sandybridge pkg: 4 W idle, 35 W with all four CPUs busy at the all-core 3.0 GHz; one
	 * busy CPU alone runs at the 1-core 3.2 GHz and adds 31 / 4 W x (3.2 / 3.0)^2 (the model's
	 * power_exponent 2). */
	assert_true(fabs((double)busy.power_microwatts -
			 (4e6 + 31e6 / 4 * (3.2 / 3.0) * (3.2 / 3.0))) < 2000.0);
	assert_int_equal(idle.power_microwatts, 4000000);
	harness_remove_tree(dir);
	backend_close(backend);
}

static void test_power_trace_steps_and_ramps(void **state)
{
	struct msr_backend *backend = open_seeded(TEST_SIM_SEED, 0);
	struct sim_energy_truth start, ramp_end, later, pp0_before, pp0_after;

	(void)state;
	assert_int_equal(backend_sim_power_trace(backend, "pkg: 1 10\npkg: 2 10 30\n", "test"), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &start), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PP0, &pp0_before), 0);
	assert_int_equal(backend_sim_advance(backend, 3 * NS_PER_MS), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &ramp_end), 0);
	/* 1 ms at 10 W, then 2 ms from 10 to 30 W: 10 mJ + 40 mJ, exactly. */
	assert_true(ramp_end.femtojoules - start.femtojoules ==
		    (unsigned __int128)50000000000000ull);
	assert_int_equal(backend_sim_advance(backend, 10 * NS_PER_MS), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &later), 0);
	assert_int_equal(later.power_microwatts, 30000000); /* holds the last power */
	assert_true(later.femtojoules - ramp_end.femtojoules ==
		    (unsigned __int128)300000000000000ull);
	/* PP0 still follows the load (idle: 1 W). */
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PP0, &pp0_after), 0);
	assert_int_equal(pp0_after.power_microwatts, 1000000);
	/* Malformed traces are refused and change nothing. */
	assert_int_equal(backend_sim_power_trace(backend, "dram: 1 10\n", "test"), -EINVAL);
	assert_int_equal(backend_sim_power_trace(backend, "pkg: 0 10\n", "test"), -EINVAL);
	assert_int_equal(backend_sim_power_trace(backend, "pkg: 1 -3\n", "test"), -EINVAL);
	assert_int_equal(backend_sim_power_trace(backend, "pkg 1 3\n", "test"), -EINVAL);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &later), 0);
	assert_int_equal(later.power_microwatts, 30000000);
	/* An empty trace gives the domain back to its load. */
	assert_int_equal(backend_sim_power_trace(backend, "", "test"), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &later), 0);
	assert_int_equal(later.power_microwatts, 4000000);
	backend_close(backend);
}

/* --sim-power-script: the trace plays from the start; a malformed one stops the backend. */
static void test_power_script_option(void **state)
{
	char dir[] = "/tmp/haecer-rough-XXXXXX";
	char path[PATH_MAX], why[256] = "";
	struct backend_options options = {
		.kind = BACKEND_SIM, .sim_model = "sandybridge", .models_dir = test_models_dir(),
		.sim_virtual_time = true, .sim_seed = TEST_SIM_SEED, .sim_power_script = path,
	};
	struct msr_backend *backend = NULL;
	struct sim_energy_truth truth;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/power", dir);
	assert_int_equal(harness_write_file(path, "# steps\npkg: 2 20\npkg: 1 40 # then up\n",
					    0644), 0);
	assert_int_equal(backend_open(&options, &backend, why, sizeof(why)), 0);
	assert_int_equal(backend_sim_advance(backend, 2500000), 0);
	assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &truth), 0);
	assert_true(truth.femtojoules == (unsigned __int128)60000000000000ull); /* 40 + 20 mJ */
	backend_close(backend);
	assert_int_equal(harness_write_file(path, "pkg: 2\n", 0644), 0);
	assert_int_equal(backend_open(&options, &backend, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "power script"));
	harness_remove_tree(dir);
}

static void test_energy_at_past_times(void **state)
{
	struct msr_backend *backend = open_seeded(TEST_SIM_SEED, 0);
	struct sim_energy_truth then[10], at;

	(void)state;
	for (int i = 0; i < 10; i++) {
		assert_int_equal(backend_sim_set_load(backend, -1, (double)i / 10.0), 0);
		assert_int_equal(backend_sim_advance(backend, 700000 + (uint64_t)i * 13000), 0);
		assert_int_equal(backend_sim_energy_truth(backend, 0, RAPL_DOMAIN_PKG, &then[i]), 0);
	}
	for (int i = 0; i < 10; i++) {
		assert_int_equal(backend_sim_energy_at(backend, 0, RAPL_DOMAIN_PKG, then[i].now_ns,
						       &at), 0);
		assert_true(at.femtojoules == then[i].femtojoules);
		assert_int_equal(at.last_update_ns, then[i].last_update_ns);
	}
	assert_int_equal(backend_sim_energy_at(backend, 0, RAPL_DOMAIN_PKG,
					       then[9].now_ns + 1, &at), -ERANGE);
	backend_close(backend);
}

/* The same seed, the same requests: the same registers. Another seed: other update times. */
static void test_seed_replays(void **state)
{
	struct msr_backend *a = open_seeded(77, 0), *b = open_seeded(77, 0), *c = open_seeded(78, 0);
	bool differs = false;

	(void)state;
	for (int i = 0; i < 200; i++) {
		uint64_t step = 37000 + (uint64_t)i * 1111;

		assert_int_equal(backend_sim_advance(a, step), 0);
		assert_int_equal(backend_sim_advance(b, step), 0);
		assert_int_equal(backend_sim_advance(c, step), 0);
		assert_int_equal(read_or_die(a, 0, MSR_PKG_ENERGY_STATUS),
				 read_or_die(b, 0, MSR_PKG_ENERGY_STATUS));
		assert_int_equal(read_or_die(a, 0, MSR_SMI_COUNT), read_or_die(b, 0, MSR_SMI_COUNT));
		assert_int_equal(last_update(a, RAPL_DOMAIN_PKG), last_update(b, RAPL_DOMAIN_PKG));
		differs |= last_update(a, RAPL_DOMAIN_PKG) != last_update(c, RAPL_DOMAIN_PKG);
	}
	assert_true(differs);
	backend_close(a);
	backend_close(b);
	backend_close(c);
}

/* --sim-ideal: 1 ms boundaries in phase, SMIs count but take no time. */
static void test_ideal_is_exact(void **state)
{
	struct msr_backend *backend = open_ideal_sim("sandybridge", 0);

	(void)state;
	assert_int_equal(backend_sim_advance(backend, 3 * NS_PER_MS + 500000), 0);
	assert_int_equal(last_update(backend, RAPL_DOMAIN_PKG), 3 * NS_PER_MS);
	assert_int_equal(last_update(backend, RAPL_DOMAIN_PP0), 3 * NS_PER_MS);
	assert_int_equal(backend_sim_advance(backend, NS_PER_S), 0);
	assert_int_equal(read_or_die(backend, 0, MSR_SMI_COUNT), (NS_PER_S + 3500000) / 16000000);
	backend_close(backend);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_update_jitter),
		cmocka_unit_test(test_register_changes_at_updates),
		cmocka_unit_test(test_domain_phase),
		cmocka_unit_test(test_smi_time_stolen_and_counted),
		cmocka_unit_test(test_access_waits_for_smi),
		cmocka_unit_test(test_power_follows_load_within_a_millisecond),
		cmocka_unit_test(test_power_trace_steps_and_ramps),
		cmocka_unit_test(test_power_script_option),
		cmocka_unit_test(test_energy_at_past_times),
		cmocka_unit_test(test_seed_replays),
		cmocka_unit_test(test_ideal_is_exact),
	};

	test_quiet_logs();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
