/*
 * haecer-mon top: the node's power per package and RAPL domain from an msrd schedule, on the
 * simulated Sandy Bridge (one package: energy-pkg, energy-cores, energy-gpu):
 *  - CSV: a header with perf's domain names, then one row per interval with watts the package
 *    can draw (above 0, below twice its maximum; cores below package), "simulated" as source;
 *  - JSON lines carry the same fields; text says SIMULATED;
 *  - a ring major the policy does not grant is refused with msrd's reason and exit 1.
 */
#include "tests/mon/mon_test.h"

#include "tests/lib/msrd_group.h"

#define TOP_POLICY                                                                        \
	MON_TEST_RAPL_MSRS                                                                \
	"  - {match: {uid: 0}, allow: [rapl], create_rings: [1-99], monitor_rings: [1-99]}\n"

static struct msrd_server server;

static double package_max_watts(void)
{
	struct haecer_machine_info *machine = calloc(1, sizeof(*machine));
	struct haecer_conn *conn = NULL;
	double watts;

	assert_non_null(machine);
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_machine_info(conn, machine), 0);
	watts = machine->rapl_max_power_mw[0] / 1000.0;
	haecer_close(conn);
	free(machine);
	return watts;
}

static void test_csv(void **state)
{
	const char *arguments[] = { "top", "--interval", "100", "--count", "3", "--format", "csv",
				    NULL };
	double max_watts = package_max_watts();
	char *out = NULL, *err = NULL, *save = NULL;
	unsigned rows = 0;

	(void)state;
	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 0);
	char *line = strtok_r(out, "\n", &save);
	assert_non_null(line);
	assert_string_equal(line, "seconds,package,energy-pkg_watts,energy-cores_watts,"
				  "energy-gpu_watts,source,backend");
	while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
		double seconds, pkg, cores, gpu;
		unsigned package;
		char source[32], backend[32];
		assert_int_equal(sscanf(line, "%lf,%u,%lf,%lf,%lf,%31[^,],%31s", &seconds, &package,
					&pkg, &cores, &gpu, source, backend),
				 7);
		assert_string_equal(backend, "sim"); /* the backend behind the figure */
		assert_int_equal(package, 0);
		if (!(pkg > 0 && pkg < 2 * max_watts && cores > 0 && cores <= pkg && gpu >= 0))
			fail_msg("implausible watts for a %g W package: %s", max_watts, line);
		assert_string_equal(source, "simulated");
		rows++;
	}
	assert_int_equal(rows, 3);
	free(out);
	free(err);
}

static void test_json_and_text(void **state)
{
	const char *json[] = { "top", "--interval", "100", "--count", "2", "--format", "json",
			       NULL };
	const char *text[] = { "top", "--interval", "100", "--count", "1", NULL };
	char *out = NULL, *err = NULL, field[64];

	(void)state;
	assert_int_equal(mon_run(server.socket_path, json, &out, &err), 0);
	assert_true(json_field(out, "energy-pkg_watts", field, sizeof(field)));
	assert_true(strtod(field, NULL) > 0);
	assert_true(json_field(out, "source", field, sizeof(field)));
	assert_string_equal(field, "simulated");
	assert_true(json_field(out, "backend", field, sizeof(field)));
	assert_string_equal(field, "sim");
	free(out);
	free(err);
	assert_int_equal(mon_run(server.socket_path, text, &out, &err), 0);
	assert_non_null(strstr(out, "# SIMULATED CPU sandybridge"));
	assert_non_null(strstr(out, "energy-cores_watts"));
	free(out);
	free(err);
}

static void test_refused_major(void **state)
{
	const char *arguments[] = { "top", "200", "1", "--count", "1", NULL };
	char *out = NULL, *err = NULL;

	(void)state;
	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 1);
	assert_non_null(strstr(err, "msrd refused the sampling schedule (ring 200.1"));
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_csv),
		cmocka_unit_test(test_json_and_text),
		cmocka_unit_test(test_refused_major),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	return MSRD_RUN_GROUP(&server, TOP_POLICY, arguments, NULL, tests);
}
