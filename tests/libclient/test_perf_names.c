/*
 * One vocabulary (issue 15): the library names RAPL domains as perf does (energy-pkg,
 * energy-cores, energy-gpu, energy-ram, energy-psys) and maps the seed's enum names onto them;
 * it takes perf's "power/energy-pkg/" form, and perf's generic events with the :u and :k
 * modifiers and its energy names through the named-event call; an energy counter is called by
 * perf's name.
 */
#include "tests/libclient/libclient_test.h"

static void test_domain_names(void **state)
{
	static const struct {
		RAPLCounter domain;
		const char *perf;
		const char *seed;
	} table[] = {
		{ RAPL_PKG, "energy-pkg", "RAPL_PKG" },      { RAPL_PP0, "energy-cores", "RAPL_PP0" },
		{ RAPL_PP1, "energy-gpu", "RAPL_PP1" },      { RAPL_DRAM, "energy-ram", "RAPL_DRAM" },
		{ RAPL_PSYS, "energy-psys", "RAPL_PSYS" },
	};
	char pmu_form[48];

	(void)state;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		assert_string_equal(haecer_energy_domain_name(table[i].domain), table[i].perf);
		assert_int_equal(haecer_energy_domain_by_name(table[i].perf, false), table[i].domain);
		assert_int_equal(haecer_energy_domain_by_name(table[i].seed, false), table[i].domain);
		snprintf(pmu_form, sizeof(pmu_form), "power/%s/", table[i].perf);
		assert_int_equal(haecer_energy_domain_by_name(pmu_form, false), table[i].domain);
	}
	assert_int_equal(haecer_energy_domain_by_name("energy-pkg", true), RAPL_AMD_PKG);
	assert_int_equal(haecer_energy_domain_by_name("energy-cores", true), RAPL_AMD_CORE);
	assert_int_equal(haecer_energy_domain_by_name("uncore", false), -ENOENT);
	assert_int_equal(haecer_energy_domain_by_name("power/energy-pkg", false), -ENOENT);
	assert_null(haecer_energy_domain_name(99));
}

static void test_modifiers(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	struct haecer_counter_info info;

	(void)state;
	assert_int_equal(haecer_default_context(&ctx), 0);
	assert_int_equal(haecer_counter_open_named(ctx, 0, "instructions:u", 0, 0, &counter), 0);
	assert_int_equal(haecer_counter_info(counter, &info), 0);
	/* Fixed counter 0 (INST_RETIRED.ANY): USR only is its field 0b10. */
	assert_int_equal(info.kind, HAECER_COUNTER_FIXED);
	assert_int_equal(info.config & 0x3, 0x2);
	haecer_counter_free(counter);
	assert_int_equal(haecer_counter_open_named(ctx, 0, "branch-misses:k", 0, 0, &counter), 0);
	assert_int_equal(haecer_counter_info(counter, &info), 0);
	/* PERFEVTSEL: OS (bit 17) without USR (bit 16). */
	assert_int_equal(info.config & (3ull << 16), 1ull << 17);
	haecer_counter_free(counter);
	assert_int_equal(haecer_counter_open_named(ctx, 0, "cycles:p", 0, 0, &counter), -EINVAL);
	assert_non_null(strstr(haecer_error_detail(), "modifier 'p'"));
	assert_int_equal(haecer_counter_open_energy(ctx, 0, RAPL_PP0, &counter), 0);
	assert_int_equal(haecer_counter_info(counter, &info), 0);
	assert_string_equal(info.name, "energy-cores");
	haecer_counter_free(counter);
	/* The named-event call takes perf's energy names too, as haecer-stat -e does. */
	PerfCounter pkg = setupNamedCounter("power/energy-pkg/", 0, 0);
	assert_true(pkg.valid);
	assert_int_equal(haecer_counter_info(haecer_perf_counter(&pkg), &info), 0);
	assert_int_equal(info.kind, HAECER_COUNTER_ENERGY);
	assert_string_equal(info.name, "energy-pkg");
	freeCounter(&pkg);
	PerfCounter ram = setupNamedCounter("energy-ram", 0, 0);
	assert_false(ram.valid);
	assert_int_equal(ram.error, -EOPNOTSUPP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_domain_names),
		cmocka_unit_test(test_modifiers),
	};

	return LIBCLIENT_RUN_GROUP("sandybridge", NULL, NULL, tests);
}
