/*
 * haecer-stat on a machine of two packages (the simulated Skylake-SP, 2 x 32 CPUs), and first
 * contact with a socket the user may not open:
 *  - -a --per-socket -x, gives perf's per-socket CSV: one line per package (S0, S1) with the 32
 *    CPUs counted there, for energy and for events; summed (no --per-socket) it is one line;
 *  - a user the socket's mode (0600) keeps out gets status 125 and a message that names group
 *    haecer, not a bare "Permission denied".
 */
#include "tests/lib/test_check.h"
#include "tests/stat/stat_test.h"

static const char *const two_socket_arguments[] = { "--backend", "sim", "--sim-model",
						     "skylake-sp", "--socket-mode", "0600",
						     NULL };

/* Lines of report that start with prefix. */
static unsigned lines_starting(const char *report, const char *prefix)
{
	unsigned count = 0;
	size_t length = strlen(prefix);

	for (const char *line = report; line != NULL && *line != '\0';) {
		count += strncmp(line, prefix, length) == 0;
		line = strchr(line, '\n');
		line = line != NULL ? line + 1 : NULL;
	}
	return count;
}

static void test_per_socket(void **state)
{
	const char *per_socket[] = { "-a", "--per-socket", "-x", ",", "-e",
				     "power/energy-pkg/,instructions", "--", "/bin/true", NULL };
	const char *summed[] = { "-a", "-x", ",", "-e", "power/energy-pkg/,instructions", "--",
				 "/bin/true", NULL };
	char *err = NULL;

	(void)state;
	assert_int_equal(stat_run(per_socket, NULL, &err), 0);
	assert_int_equal(lines_starting(err, "S0,32,"), 2);
	assert_int_equal(lines_starting(err, "S1,32,"), 2);
	assert_non_null(strstr(err, ",Joules,energy-pkg,"));
	free(err);
	assert_int_equal(stat_run(summed, NULL, &err), 0);
	assert_int_equal(lines_starting(err, "S0,"), 0);
	assert_int_equal(lines_starting(err, "# "), 2);
	free(err);
}

static int refused_socket(void *argument)
{
	const char *arguments[] = { "--", "/bin/true", NULL };
	char *err = NULL;

	(void)argument;
	CHECK_EQ(stat_run(arguments, NULL, &err), 125);
	CHECK(strstr(err, "cannot connect to msrd at") != NULL);
	CHECK(strstr(err, "group haecer") != NULL);
	free(err);
	return 0;
}

static void test_permission_names_group(void **state)
{
	(void)state;
	assert_int_equal(run_as(STAT_TEST_ENERGY_ONLY_UID, STAT_TEST_ENERGY_ONLY_UID, NULL, 0,
				refused_socket, NULL),
			 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_per_socket),
		cmocka_unit_test(test_permission_names_group),
	};

	return msrd_run_group(&server, stat_policy, two_socket_arguments, NULL, "tests", tests,
			      sizeof(tests) / sizeof(tests[0]));
}
