/*
 * haecer-mon plot against a real msrd and gnuplot: a ring with two energy counters at known
 * power (10 W and 5 W) becomes a PNG (checked by its signature and IHDR), and the data gnuplot
 * was given (kept with --data) holds one block per energy counter with exactly the power of
 * every step; a ring without energy counters is refused (exit 1, nothing written); a missing
 * gnuplot is reported (exit 1).
 */
#include "tests/mon/mon_test.h"

#include <math.h>

#include "tests/lib/msrd_group.h"

#define STEPS 20u

static struct msrd_server server;

static bool have_gnuplot(void)
{
	const char *argv[] = { "/bin/sh", "-c", "command -v gnuplot", NULL };

	return harness_run(argv, NULL, NULL) == 0;
}

static void make_ring(unsigned minor, bool energy)
{
	struct producer producer;

	producer_start(&producer, server.socket_path, 4, minor, 256);
	if (energy) {
		/* 16384 units of 2^-14 J per 0.1 s: 10 W; 32768 of 2^-16 J per 0.1 s: 5 W. */
		producer_say(&producer, "burst %u 0 1000 16384 1000000000 100000000", STEPS);
		producer_say(&producer, "burst %u 2 8589934592 32768 1000000000 100000000", STEPS);
	}
	producer_say(&producer, "burst %u 1 1 1000 1000000000 100000000", STEPS);
	assert_int_equal(producer_end(&producer, "exit"), 0);
}

/* The data file: a "# counter ID NAME" line per block, then "seconds watts" lines. */
static void check_data(const char *path)
{
	FILE *file = fopen(path, "r");
	char line[256];
	unsigned blocks = 0, points = 0;
	double expected = 0;

	assert_non_null(file);
	while (fgets(line, sizeof(line), file) != NULL) {
		double seconds, watts;
		if (strncmp(line, "# counter 0 RAPL_PKG", 20) == 0) {
			expected = 10.0;
			blocks++;
		} else if (strncmp(line, "# counter 2 DRAM", 16) == 0) {
			expected = 5.0;
			blocks++;
		} else if (sscanf(line, "%lf %lf", &seconds, &watts) == 2) {
			assert_true(fabs(watts - expected) < 1e-6);
			assert_true(seconds > 0 && seconds < 0.1 * STEPS + 1e-6);
			points++;
		}
	}
	fclose(file);
	assert_int_equal(blocks, 2);
	assert_int_equal(points, 2 * (STEPS - 1)); /* power needs two records */
}

static void check_png(const char *path)
{
	static const unsigned char signature[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	unsigned char head[24];
	FILE *file = fopen(path, "rb");

	assert_non_null(file);
	assert_int_equal(fread(head, 1, sizeof(head), file), sizeof(head));
	fclose(file);
	assert_memory_equal(head, signature, sizeof(signature));
	assert_memory_equal(head + 12, "IHDR", 4);
	/* 1000 x 600, as the script asks. */
	assert_int_equal((head[16] << 24) | (head[17] << 16) | (head[18] << 8) | head[19], 1000);
	assert_int_equal((head[20] << 24) | (head[21] << 16) | (head[22] << 8) | head[23], 600);
}

static void test_power_png(void **state)
{
	char png[PATH_MAX + 16], data[PATH_MAX + 16];
	const char *arguments[] = { "plot", "4", "1", "-o", png, "--data", data, NULL };
	char *out, *err;

	(void)state;
	snprintf(png, sizeof(png), "%s/power.png", server.dir);
	snprintf(data, sizeof(data), "%s/power.dat", server.dir);
	make_ring(1, true);
	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 0);
	check_png(png);
	check_data(data);
	free(out);
	free(err);
}

static void test_refusals(void **state)
{
	char png[PATH_MAX + 16];
	const char *arguments[] = { "plot", "4", "2", "-o", png, NULL };
	const char *energy_ring[] = { "plot", "4", "3", "-o", png, NULL };
	char *out, *err;

	(void)state;
	snprintf(png, sizeof(png), "%s/nothing.png", server.dir);
	make_ring(2, false);
	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 1);
	assert_non_null(strstr(err, "gave no power readings"));
	assert_int_equal(access(png, F_OK), -1);
	free(out);
	free(err);
	make_ring(3, true);
	setenv("HAECER_GNUPLOT", "/nonexistent/gnuplot", 1);
	assert_int_equal(mon_run(server.socket_path, energy_ring, &out, &err), 1);
	unsetenv("HAECER_GNUPLOT");
	assert_non_null(strstr(err, "cannot run /nonexistent/gnuplot"));
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_power_png),
		cmocka_unit_test(test_refusals),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	if (!have_gnuplot()) {
		printf("gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox)\n");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
}
