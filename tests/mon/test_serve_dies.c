/*
 * haecer-mon serve on a multi-die package: the stand-in Cascade Lake-AP of
 * tests/server/test_energy_dies.c (06_55 stepping 7, one package of four CPUs, CPUs 0-1 on die 0
 * and 2-3 on die 1, RAPL die-scope as the kernel's rapl.c has it), die 0's PKG_ENERGY_STATUS
 * holding 1 J and die 1's 3 J. serve used to read one CPU a package and so published die 0's
 * 1 J as the package; now haecer_energy_joules_total of the package is both dies' 4 J, and
 * haecer_die_energy_joules_total gives each die's own (a separate family, so summing the first
 * by package never counts a die twice; serve writes it only for packages of several dies).
 * haecer_backend_info names the backend behind them (msr).
 */

#include "tests/mon/serve_test.h"

#include "harness/policy_text.h"
#include "harness/standin_tree.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"

#define JOULE STANDIN_SNB_JOULE /* unit register 0xA0E03: 2^-14 J */

static const char policy[] = POLICY_RAPL_PKG_FOR_ROOT;

static struct msrd_server server;
static char tree[PATH_MAX + 16];
static const char *const arguments[] = { "--backend", "msr", "--dev-root", tree, NULL };

#define PACKAGE_SERIES "haecer_energy_joules_total{domain=\"energy-pkg\",package=\"0\"}"
#define DIE_SERIES(die) \
	"haecer_die_energy_joules_total{domain=\"energy-pkg\",package=\"0\",die=\"" die "\"}"

static void test_serve_sums_dies(void **state)
{
	struct proc serve;
	unsigned port;
	double package = NAN;
	struct http_reply reply = { 0 };

	(void)state;
	port = serve_start(&serve, server.socket_path, "100");
	for (int round = 0; round < 300 && isnan(package); round++) {
		free(reply.text);
		http_get(port, "/metrics", NULL, &reply);
		assert_int_equal(reply.code, 200);
		package = sample_value(reply.body, PACKAGE_SERIES);
		if (isnan(package))
			usleep(20000);
	}
	assert_float_equal(package, 4.0, 1e-9); /* 1 J + 3 J, not die 0's 1 J */
	assert_float_equal(sample_value(reply.body, DIE_SERIES("0")), 1.0, 1e-9);
	assert_float_equal(sample_value(reply.body, DIE_SERIES("1")), 3.0, 1e-9);
	/* The backend behind these figures: the msr driver's stand-in devices. */
	assert_float_equal(sample_value(reply.body, "haecer_backend_info{backend=\"msr\"}"), 1.0, 0);
	free(reply.text);
	serve_stop(&serve, NULL);
}

static int prepare(const struct msrd_server *prepared)
{
	snprintf(tree, sizeof(tree), "%s/root", prepared->dir);
	tree_put_two_die_package(tree, (uint32_t)JOULE, (uint32_t)(3 * JOULE));
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_serve_sums_dies, serve_teardown),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, prepare, arguments, NULL, tests);
}
