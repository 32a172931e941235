/*
 * haecer-mon plot against a real msrd and gnuplot: a ring with two energy counters at known
 * power (10 W and 5 W) and an event counter at a known rate (10000/s) becomes a PNG (checked by
 * its signature and IHDR), and the data gnuplot was given (kept with --data) holds one block per
 * counter with exactly the power or rate of every step; --duration is the plot's length (the
 * last that many seconds, from 0); a ring of event counters only becomes an SVG for an .svg
 * output; an output that cannot be written fails before anything is read, an output that is
 * neither .png nor .svg is bad usage; a ring with one record per counter has nothing to plot
 * (exit 1, nothing written); a missing gnuplot is reported (exit 1).
 */
#include "tests/mon/mon_test.h"

#include <math.h>

#include "tests/lib/msrd_group.h"
#include "harness/text_file.h"

#define STEPS 20u

static struct msrd_server server;

static bool have_gnuplot(void)
{
	const char *argv[] = { "/bin/sh", "-c", "command -v gnuplot", NULL };

	return harness_run(argv, NULL, NULL) == 0;
}

static void make_ring_of(unsigned minor, bool energy, unsigned steps)
{
	struct producer producer;

	producer_start(&producer, server.socket_path, 4, minor, 256);
	if (energy) {
		/* 16384 units of 2^-14 J per 0.1 s: 10 W; 32768 of 2^-16 J per 0.1 s: 5 W. */
		producer_say(&producer, "burst %u 0 1000 16384 1000000000 100000000", steps);
		producer_say(&producer, "burst %u 2 8589934592 32768 1000000000 100000000", steps);
	}
	/* 1000 events per 0.1 s: 10000/s. */
	producer_say(&producer, "burst %u 1 1 1000 1000000000 100000000", steps);
	assert_int_equal(producer_end(&producer, "exit"), 0);
}

static void make_ring(unsigned minor, bool energy)
{
	make_ring_of(minor, energy, STEPS);
}

/* The data file: a "# counter ID NAME" line per block, then "seconds watts|rate" lines, all
 * within [0, length]; the latest point at length when length > 0. */
static void check_data_within(const char *path, double length)
{
	FILE *file = fopen(path, "r");
	char line[256];
	unsigned blocks = 0, points = 0;
	double expected = 0, latest = 0;

	assert_non_null(file);
	while (fgets(line, sizeof(line), file) != NULL) {
		double seconds, watts;
		if (strncmp(line, "# counter 0 RAPL_PKG", 20) == 0) {
			expected = 10.0;
			blocks++;
		} else if (strncmp(line, "# counter 2 DRAM", 16) == 0) {
			expected = 5.0;
			blocks++;
		} else if (strncmp(line, "# counter 1 INSTRUCTIONS", 24) == 0) {
			assert_non_null(strstr(line, "per_second"));
			expected = 10000.0;
			blocks++;
		} else if (sscanf(line, "%lf %lf", &seconds, &watts) == 2) {
			assert_true(fabs(watts - expected) < 1e-6 * expected);
			assert_true(seconds >= 0 && seconds < 0.1 * STEPS + 1e-6);
			if (length > 0)
				assert_true(seconds <= length + 1e-9);
			latest = seconds > latest ? seconds : latest;
			points++;
		}
	}
	fclose(file);
	assert_int_equal(blocks, 3);
	if (length == 0)
		assert_int_equal(points, 3 * (STEPS - 1)); /* a power or rate needs two records */
	else
		assert_true(fabs(latest - length) < 1e-6);
}

static void check_data(const char *path)
{
	check_data_within(path, 0.0);
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

static void test_duration_is_length(void **state)
{
	char png[PATH_MAX + 16], data[PATH_MAX + 16];
	const char *arguments[] = { "plot", "4", "5", "--duration", "1", "-o", png, "--data", data,
				    NULL };
	char *out, *err;

	(void)state;
	snprintf(png, sizeof(png), "%s/last-second.png", server.dir);
	snprintf(data, sizeof(data), "%s/last-second.dat", server.dir);
	make_ring(5, true);
	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 0);
	check_png(png);
	check_data_within(data, 1.0);
	free(out);
	free(err);
}

static void test_rates_svg(void **state)
{
	char svg[PATH_MAX + 16];
	const char *arguments[] = { "plot", "4", "2", "-o", svg, NULL };
	char *out, *err, *text;

	(void)state;
	snprintf(svg, sizeof(svg), "%s/rates.svg", server.dir);
	make_ring(2, false);
	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 0);
	text = harness_read_text(svg, 1 << 20);
	assert_non_null(text);
	assert_non_null(strstr(text, "<svg"));
	assert_non_null(strstr(text, "INSTRUCTIONS (/s)"));
	free(text);
	free(out);
	free(err);
}

static void test_refusals(void **state)
{
	char png[PATH_MAX + 16];
	const char *arguments[] = { "plot", "4", "4", "-o", png, NULL };
	const char *energy_ring[] = { "plot", "4", "3", "-o", png, NULL };
	const char *unwritable[] = { "plot", "4", "3", "--duration", "600", "-o",
				     "/nonexistent/dir/x.png", NULL };
	const char *jpeg[] = { "plot", "4", "3", "-o", "x.jpg", NULL };
	char *out, *err;

	(void)state;
	snprintf(png, sizeof(png), "%s/nothing.png", server.dir);
	make_ring_of(4, false, 1);
	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 1);
	assert_non_null(strstr(err, "gave nothing to plot"));
	assert_int_equal(access(png, F_OK), -1);
	free(out);
	free(err);
	/* Checked before the 600 s of --duration: this returns at once with the reason. */
	assert_int_equal(mon_run(server.socket_path, unwritable, &out, &err), 1);
	assert_non_null(strstr(err, "cannot write /nonexistent/dir/x.png"));
	free(out);
	free(err);
	assert_int_equal(mon_run(server.socket_path, jpeg, &out, &err), 2);
	assert_non_null(strstr(err, "FILE.png or FILE.svg"));
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
		cmocka_unit_test(test_duration_is_length),
		cmocka_unit_test(test_rates_svg),
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
