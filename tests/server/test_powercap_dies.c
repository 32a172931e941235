/*
 * The powercap backend on a multi-die machine: the stand-in Cascade Lake-AP of test_energy_dies
 * (one package of two dies, CPUs 0-1 on die 0 and 2-3 on die 1, tree_put_two_die_package) with
 * the zones the kernel registers for die-scope RAPL: intel-rapl:0 "package-0-die-0" and
 * intel-rapl:1 "package-0-die-1", each with a dram subzone. msrd --backend powercap keys them
 * as the MSR path keys the dies' registers (by package and die):
 *   - a read of PKG_ENERGY_STATUS (0x611) or DRAM_ENERGY_STATUS (0x619) through a CPU gives
 *     its own die's zone, in exact joules after the test advances the files (never the two
 *     dies folded together);
 *   - die 1's zone wraps at its max_energy_range_uj (3 J) and its total grows by exactly what
 *     was consumed across the wrap;
 *   - haecer-stat -e energy-pkg sums the dies into the package (3 J when die 0 draws 1 J and
 *     die 1 2 J, across another wrap of die 1, during the command, which rewrites the zone
 *     files) and shows each die with --per-die;
 *   - haecer-mon serve publishes the package as the dies' sum, each die in its own family, and
 *     names the backend behind them (haecer_backend_info{backend="powercap"}).
 */
#include <inttypes.h>
#include <limits.h>

#include "haecer/msrd.h"
#include "harness/standin_tree.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "tests/mon/serve_test.h"

#define UNITS_PER_JOULE 65536ull /* the powercap backend's 2^-16 J */
#define JOULE_UJ 1000000ull
#define DIE1_RANGE_UJ (3 * JOULE_UJ)
#define DRAM_RANGE_UJ 262143328850ull

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"  - {name: DRAM_ENERGY_STATUS, address: 0x619, read: true, set: rapl}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [rapl]\n";

static struct msrd_server server;
static struct haecer_conn *conn;
static char tree[PATH_MAX + 16];
static const char *const arguments[] = { "--backend", "powercap", "--sysfs-root", tree, NULL };

/* What the test last wrote into each die's package zone. */
static uint64_t die_uj[2] = { 5 * JOULE_UJ, 1 * JOULE_UJ };
static const char *const die_zone[2] = { "intel-rapl:0", "intel-rapl:1" };
static const uint64_t die_range_uj[2] = { DRAM_RANGE_UJ, DIE1_RANGE_UJ };

static uint64_t total_of(unsigned cpu, uint32_t address)
{
	uint64_t total = 0;

	assert_int_equal(haecer_energy_read(conn, cpu, address, NULL, &total), 0);
	return total;
}

/* Die `die` draws `microjoules` more: its package zone advanced, wrapping at its range. */
static uint64_t advanced(unsigned die, uint64_t microjoules)
{
	return (die_uj[die] + microjoules) % die_range_uj[die];
}

static void test_each_die_its_own_zone(void **state)
{
	uint64_t pkg[STANDIN_TWO_DIE_CPUS], dram[STANDIN_TWO_DIE_CPUS];

	(void)state;
	for (unsigned cpu = 0; cpu < STANDIN_TWO_DIE_CPUS; cpu++) {
		pkg[cpu] = total_of(cpu, MSR_PKG_ENERGY_STATUS);
		dram[cpu] = total_of(cpu, MSR_DRAM_ENERGY_STATUS);
	}
	die_uj[0] = advanced(0, JOULE_UJ);
	die_uj[1] = advanced(1, JOULE_UJ / 2);
	tree_set_powercap_energy(tree, die_zone[0], die_uj[0]);
	tree_set_powercap_energy(tree, die_zone[1], die_uj[1]);
	tree_set_powercap_energy(tree, "intel-rapl:1:0", 2 * JOULE_UJ + JOULE_UJ / 4);
	/* CPUs 0, 2, 1, 3: each die's own figure whichever CPU of it reads first. */
	for (unsigned i = 0; i < STANDIN_TWO_DIE_CPUS; i++) {
		unsigned cpu = (i * 2) % STANDIN_TWO_DIE_CPUS + i / 2;
		bool die1 = standin_two_die_of(cpu) == 1;

		assert_int_equal(total_of(cpu, MSR_PKG_ENERGY_STATUS) - pkg[cpu],
				 die1 ? UNITS_PER_JOULE / 2 : UNITS_PER_JOULE);
		assert_int_equal(total_of(cpu, MSR_DRAM_ENERGY_STATUS) - dram[cpu],
				 die1 ? UNITS_PER_JOULE / 4 : 0);
	}
	assert_true(msrd_log_contains(&server, "powercap: zone intel-rapl:1:0 (\"dram\") is domain 3 "
					       "of package 0 (its own die)"));
}

static void test_die_wraps_at_its_range(void **state)
{
	uint64_t before, after, die0 = total_of(0, MSR_PKG_ENERGY_STATUS);

	(void)state;
	before = total_of(2, MSR_PKG_ENERGY_STATUS);
	/* 1.5 J: from 1.5 J to the range (3 J), then 0 J on; then 1.25 J past the wrap. */
	die_uj[1] = advanced(1, 3 * JOULE_UJ / 2);
	assert_int_equal(die_uj[1], 0);
	tree_set_powercap_energy(tree, die_zone[1], die_uj[1]);
	after = total_of(3, MSR_PKG_ENERGY_STATUS);
	assert_int_equal(after - before, 3 * UNITS_PER_JOULE / 2);
	die_uj[1] = advanced(1, 5 * JOULE_UJ / 4);
	tree_set_powercap_energy(tree, die_zone[1], die_uj[1]);
	assert_int_equal(total_of(2, MSR_PKG_ENERGY_STATUS) - after, 5 * UNITS_PER_JOULE / 4);
	/* Die 0 did not move meanwhile. */
	assert_int_equal(total_of(1, MSR_PKG_ENERGY_STATUS), die0);
}

/* A shell command that writes each die's next energy_uj in place, as the kernel's file reads. */
static void rewrite_command(char *command, size_t size, const uint64_t next_uj[2])
{
	size_t used = 0;

	for (unsigned die = 0; die < 2; die++)
		used += (size_t)snprintf(command + used, size - used,
					 "printf '%%0%dd\\n' %" PRIu64 " | dd of=%s/sys/class/powercap/"
					 "%s/energy_uj conv=notrunc status=none; ",
					 STANDIN_POWERCAP_ENERGY_WIDTH - 1, next_uj[die], tree,
					 die_zone[die]);
}

static void test_stat_sums_dies(void **state)
{
	static char command[2048];
	char *out = NULL, *err = NULL;
	const char *stat_arguments[] = { "-a", "-j", "--per-die", "-e", "energy-pkg", "--", "sh", "-c",
				    command, NULL };
	const char *tool_argv[32];
	char tool[PATH_MAX];
	uint64_t next_uj[2] = { advanced(0, JOULE_UJ), advanced(1, 2 * JOULE_UJ) };

	(void)state;
	assert_true(next_uj[1] < die_uj[1]); /* die 1 wraps during the command */
	rewrite_command(command, sizeof(command), next_uj);
	snprintf(tool, sizeof(tool), "%s/haecer-stat", harness_build_dir());
	harness_tool_argv(tool_argv, 32, tool, server.socket_path, stat_arguments);
	assert_int_equal(harness_run(tool_argv, &out, &err), 0);
	die_uj[0] = next_uj[0];
	die_uj[1] = next_uj[1];
	/* the report goes to stderr, as perf stat's */
	assert_non_null(strstr(err, "\"counters\": 2")); /* one a die */
	assert_non_null(strstr(err, "\"mean\": 3,"));    /* both dies, summed into the package */
	assert_non_null(strstr(err, "{\"id\": \"S0-D0\", \"cpus\": 2, \"mean\": 1}"));
	assert_non_null(strstr(err, "{\"id\": \"S0-D1\", \"cpus\": 2, \"mean\": 2}"));
	free(out);
	free(err);
}

/* msrd's totals since it opened the zones: every joule the tests above advanced each die by. */
#define DIE0_SINCE_START 2.0  /* 1 J, then 1 J during haecer-stat's command */
#define DIE1_SINCE_START 5.25 /* 0.5 + 1.5 + 1.25 + 2 J */

static void test_serve_sums_dies(void **state)
{
	static const char package_series[] =
		"haecer_energy_joules_total{domain=\"energy-pkg\",package=\"0\"}";
	struct http_reply reply = { 0 };
	double package = NAN;
	struct proc serve;
	unsigned port;

	(void)state;
	/* Every 2^-16 J published: the default 1 J resolution would round die 1's quarter off. */
	port = serve_start_arguments(&serve, server.socket_path,
				     (const char *[]){ "serve", "--listen", "127.0.0.1:0",
						       "--interval", "100", "--resolution-uj", "1",
						       NULL });
	for (int round = 0; round < 300 && isnan(package); round++) {
		free(reply.text);
		http_get(port, "/metrics", NULL, &reply);
		assert_int_equal(reply.code, 200);
		package = sample_value(reply.body, package_series);
		if (isnan(package))
			usleep(20000);
	}
	assert_float_equal(package, DIE0_SINCE_START + DIE1_SINCE_START, 1e-9);
	assert_float_equal(sample_value(reply.body, "haecer_die_energy_joules_total{domain=\"energy-"
						    "pkg\",package=\"0\",die=\"1\"}"),
			   DIE1_SINCE_START, 1e-9);
	assert_float_equal(sample_value(reply.body, "haecer_backend_info{backend=\"powercap\"}"),
			   1.0, 0);
	free(reply.text);
	serve_stop(&serve, NULL);
}

static int prepare(const struct msrd_server *prepared)
{
	snprintf(tree, sizeof(tree), "%s/root", prepared->dir);
	tree_put_two_die_package(tree, 0, 0);
	tree_put_powercap_zone(tree, die_zone[0], "package-0-die-0", die_uj[0], die_range_uj[0]);
	tree_put_powercap_zone(tree, "intel-rapl:0:0", "dram", 2 * JOULE_UJ, DRAM_RANGE_UJ);
	tree_put_powercap_zone(tree, die_zone[1], "package-0-die-1", die_uj[1], die_range_uj[1]);
	tree_put_powercap_zone(tree, "intel-rapl:1:0", "dram", 2 * JOULE_UJ, DRAM_RANGE_UJ);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_each_die_its_own_zone),
		cmocka_unit_test(test_die_wraps_at_its_range),
		cmocka_unit_test(test_stat_sums_dies),
		cmocka_unit_test_teardown(test_serve_sums_dies, serve_teardown),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, prepare, arguments, &conn, tests);
}
