/*
 * Energy regions under load-following power (issue 23): the real msrd on the simulated Sandy
 * Bridge in real time (seed 3), the package's power following what runs, truth from
 * SIM_ENERGY_AT at the region's ends.
 *
 *  - A region whose wait runs across a power step (imposed at 10 W, stepped to 40 W just before
 *    the end call) is marked (power_changed, not reliable) and its +- holds (within 1x): the
 *    power after the closing update alone is not the wait's, and the +- is an interval over
 *    the powers observed around the region, not their spread; a result must never state a
 *    tight +- that does not hold.
 *  - Sleeping regions (the client blocked in the kernel, the power following it down, the
 *    library's polling around the region busy): at least 80 % within their stated +-, at most
 *    one in 20 beyond 3x it, and every result beyond 3x marked (reliable false, with its
 *    reasons). bench/fidelity measured 95.5-100 % within 1x per length and condition and
 *    none beyond 1.8x (2026-11-29, host load 130-500), the gcc build of this test 40 of 40
 *    within 1x, an ASan build 40 of 40 (an earlier version that counted the tail at the
 *    polling powers had two at 4.2x and 6.4x under ASan); the test's bounds leave room for
 *    ASan and a loaded host, where single results stray (the simulator samples clients' load every
 *    1 ms, the rest of the host in 50 ms windows of /proc/stat). SMI-disturbed regions are
 *    skipped, as callers are told to.
 *  - Region markers: every call's pkg-wide energy lies within its stated +- of the truth between
 *    its two reads, spinning or sleeping, and says what measuring cost (msrd's CPU, at least
 *    the reads' round trips).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "haecer/perfmon.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"
#include "harness/text_file.h"

#define SLEEPING_REGIONS 40

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: time}\n"
	"  - {name: SMI_COUNT, address: 0x34, read: true, set: smi}\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [time, smi, rapl], capabilities: [sim_control]}\n";

static struct msrd_server server;

static double truth_at(struct haecer_conn *conn, uint64_t ns)
{
	struct haecer_sim_energy_at at;

	assert_int_equal(haecer_sim_energy_at(conn, 0, RAPL_DOMAIN_PKG, ns, &at), 0);
	return at.joules;
}

static void spin_for(uint64_t ns)
{
	uint64_t until = clock_monotonic_raw_ns() + ns;

	while (clock_monotonic_raw_ns() < until)
		;
}

static void open_pkg(struct haecer_conn **conn, struct haecer_context **ctx,
		     struct haecer_counter **pkg)
{
	assert_int_equal(haecer_connect(server.socket_path, conn), 0);
	assert_int_equal(haecer_context_open(server.socket_path, ctx), 0);
	assert_int_equal(haecer_counter_open_energy(*ctx, 0, RAPL_PKG, pkg), 0);
}

static void close_pkg(struct haecer_conn *conn, struct haecer_context *ctx,
		      struct haecer_counter *pkg)
{
	haecer_counter_free(pkg);
	haecer_context_close(ctx);
	haecer_close(conn);
}

static void test_energy_step_in_the_wait_is_marked(void **state)
{
	struct haecer_conn *conn;
	struct haecer_context *ctx;
	struct haecer_counter *pkg;
	unsigned checked = 0;

	(void)state;
	open_pkg(&conn, &ctx, &pkg);
	for (int i = 0; i < 20 && checked < 5; i++) {
		struct haecer_energy_region region;
		struct haecer_energy_result result;
		uint64_t start, end;
		double truth, error;

		assert_int_equal(haecer_sim_power_trace(conn, "pkg: 3600000 10\n"), 0);
		assert_int_equal(haecer_energy_start(pkg, &region), 0);
		start = clock_monotonic_raw_ns();
		spin_for(300000);
		/* The step: at the region's last round trip, so the wait and the interval after
		 * the closing update run at 40 W, the interval before the start at 10 W. */
		assert_int_equal(haecer_sim_power_trace(conn, "pkg: 3600000 40\n"), 0);
		end = clock_monotonic_raw_ns();
		assert_int_equal(haecer_energy_end(pkg, &region, &result), 0);
		if (result.smi_count_exact && result.smi_count > 0)
			continue;
		truth = truth_at(conn, end) - truth_at(conn, start);
		error = result.joules - truth;
		fprintf(stderr, "step 10->40 W in the wait: %.6f J, true %.6f J, +-%.6f J "
			"(before %.1f W, after %.1f W, span %.1f W), reasons %#x\n", result.joules,
			truth, result.uncertainty_joules, result.before_joules_per_tick * 2.5e9,
			result.after_joules_per_tick * 2.5e9, result.span_joules_per_tick * 2.5e9,
			result.doubt_reasons);
		assert_true(result.power_changed);
		assert_false(result.reliable);
		assert_true(result.doubt_reasons & HAECER_ENERGY_DOUBT_POWER_CHANGED);
		assert_true(fabs(error) <= result.uncertainty_joules);
		checked++;
	}
	assert_true(checked >= 3);
	assert_int_equal(haecer_sim_power_trace(conn, ""), 0);
	close_pkg(conn, ctx, pkg);
}

static void test_energy_sleeping_regions_covered(void **state)
{
	const uint64_t lengths[] = { 300000, 1000000, 2500000 };
	struct haecer_conn *conn;
	struct haecer_context *ctx;
	struct haecer_counter *pkg;
	unsigned checked = 0, within = 0, beyond3 = 0;

	(void)state;
	/* As a user's program: followed by its task clock (harness_drop_capabilities). As root
	 * with every capability the simulated power swung a CPU's worth in 4 ms steps: once in
	 * ~2400 regions (ASan) the wait drew 1 W more than the body while the intervals around
	 * averaged it out, 4.8 x the stated +- with nothing marked. */
	assert_int_equal(harness_drop_capabilities(), 0);
	open_pkg(&conn, &ctx, &pkg);
	assert_int_equal(haecer_sim_power_trace(conn, ""), 0); /* the power follows the load */
	/* Until SLEEPING_REGIONS regions no SMI hit (under valgrind most are), at most 3x the
	 * tries. */
	for (int i = 0; i < 3 * SLEEPING_REGIONS && checked < SLEEPING_REGIONS; i++) {
		struct haecer_energy_region region;
		struct haecer_energy_result result;
		uint64_t ns = lengths[i % 3], start, end;
		struct timespec pause = { 0, (long)ns };
		double truth, ratio;

		assert_int_equal(haecer_energy_start(pkg, &region), 0);
		start = clock_monotonic_raw_ns();
		nanosleep(&pause, NULL);
		end = clock_monotonic_raw_ns();
		assert_int_equal(haecer_energy_end(pkg, &region, &result), 0);
		if (result.smi_count_exact && result.smi_count > 0)
			continue;
		truth = truth_at(conn, end) - truth_at(conn, start);
		ratio = fabs(result.joules - truth) / result.uncertainty_joules;
		fprintf(stderr, "sleeping %4.0f us: %.6f J, true %.6f J, +-%.6f J (%.2fx), "
			"reasons %#x; lead %.0f us, wait %.0f us, tail %.0f us, W before %.2f "
			"after %.2f span %.2f\n", (double)(end - start) / 1000.0, result.joules,
			truth, result.uncertainty_joules, ratio, result.doubt_reasons,
			(double)result.lead_ticks / result.region_ticks * result.seconds * 1e6,
			(double)result.wait_ticks / result.region_ticks * result.seconds * 1e6,
			(double)result.tail_ticks / result.region_ticks * result.seconds * 1e6,
			result.before_joules_per_tick * result.region_ticks / result.seconds,
			result.after_joules_per_tick * result.region_ticks / result.seconds,
			result.span_joules_per_tick * result.region_ticks / result.seconds);
		/* The contract of issue 23: a result whose truth lies beyond its ± is marked (not
		 * reliable, with its reasons), never silently tight. */
		if (ratio > 3.0) {
			assert_false(result.reliable);
			assert_true(result.doubt_reasons != 0);
		}
		beyond3 += ratio > 3.0;
		within += ratio <= 1.0;
		checked++;
	}
	fprintf(stderr, "%u of %u sleeping regions within their stated +-\n", within, checked);
	assert_true(checked >= 10);
	fprintf(stderr, "%u beyond 3x their stated +-, every one marked not reliable\n", beyond3);
	assert_true(beyond3 * 20 <= checked);
	assert_true(within * 100 >= checked * 80);
	close_pkg(conn, ctx, pkg);
}

/* The index of `name` among the CSV header's fields, -1 when absent. */
static int csv_column(const char *header, const char *name)
{
	int index = 0;

	for (const char *at = header; *at != '\0' && *at != '\r' && *at != '\n'; index++) {
		size_t length = strcspn(at, ",\r\n");

		if (length == strlen(name) && strncmp(at, name, length) == 0)
			return index;
		at += length;
		if (*at == ',')
			at++;
	}
	return -1;
}

/* Field `index` of the CSV row of region `name` as a number (path and name are its first
 * fields, quoted; quoted fields may hold commas). */
static double csv_value(const char *text, const char *name, int index)
{
	char key[64];
	const char *row;

	snprintf(key, sizeof(key), "\n\"%s\",\"%s\",", name, name);
	row = strstr(text, key);
	assert_non_null(row);
	row++;
	for (int i = 0; i < index; i++) {
		bool quoted = false;

		for (; *row != '\0' && (quoted || *row != ','); row++)
			if (*row == '"')
				quoted = !quoted;
		assert_true(*row == ',');
		row++;
	}
	return strtod(row, NULL);
}

/* Region markers (issue 23, item 1): each call's pkg-wide energy, a difference of two register
 * readings, with the +- its own reads state (haecer_energy_span), covers the truth between the
 * two reads (somewhere in the begin and end calls: the truth from the inside of those calls to
 * their outside bounds it), spinning or sleeping; and every call says what measuring cost. */
static void test_energy_markers_covered(void **state)
{
	enum { MARKERS = 8 };
	char path[PATH_MAX + 16], csv[PATH_MAX + 24], name[16];
	double inner[MARKERS], outer[MARKERS];
	struct haecer_conn *conn;
	struct haecer_context *ctx;
	struct haecer_counter *pkg;
	int value, uncertainty, cpu;
	char *text;

	(void)state;
	open_pkg(&conn, &ctx, &pkg);
	assert_int_equal(haecer_sim_power_trace(conn, ""), 0);
	for (int i = 0; i < MARKERS; i++) {
		struct timespec pause = { 0, 1000000 };
		uint64_t t0, t1, t2, t3;

		snprintf(name, sizeof(name), "m%d", i);
		t0 = clock_monotonic_raw_ns();
		assert_int_equal(haecer_region_begin_ctx(ctx, name), 0);
		t1 = clock_monotonic_raw_ns();
		if (i % 2)
			nanosleep(&pause, NULL);
		else
			spin_for(1000000);
		t2 = clock_monotonic_raw_ns();
		assert_int_equal(haecer_region_end_ctx(ctx, name), 0);
		t3 = clock_monotonic_raw_ns();
		inner[i] = truth_at(conn, t2) - truth_at(conn, t1);
		outer[i] = truth_at(conn, t3) - truth_at(conn, t0);
	}
	snprintf(path, sizeof(path), "%s/markers.txt", server.dir);
	assert_int_equal(haecer_region_report(path), 0);
	snprintf(csv, sizeof(csv), "%s.csv", path);
	text = harness_read_text(csv, 1u << 20);
	assert_non_null(text);
	value = csv_column(text, "pkg-wide_nJ");
	uncertainty = csv_column(text, "pkg-wide_uncertainty_nJ");
	cpu = csv_column(text, "measurement_cpu_ns");
	assert_true(value > 0 && uncertainty > 0 && cpu > 0);
	for (int i = 0; i < MARKERS; i++) {
		double joules, stated;

		snprintf(name, sizeof(name), "m%d", i);
		joules = csv_value(text, name, value) / 1e9;
		stated = csv_value(text, name, uncertainty) / 1e9;
		fprintf(stderr, "marker %s (%s): %.6f J +-%.6f J, true %.6f-%.6f J, msrd CPU %.0f ns\n",
			name, i % 2 ? "sleeping" : "spinning", joules, stated, inner[i], outer[i],
			csv_value(text, name, cpu));
		assert_true(joules >= inner[i] - stated && joules <= outer[i] + stated);
		/* The reads' round trips at least. */
		assert_true(csv_value(text, name, cpu) > 0.0);
	}
	free(text);
	close_pkg(conn, ctx, pkg);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", "--sim-seed",
				    "3", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_energy_step_in_the_wait_is_marked),
		cmocka_unit_test(test_energy_sleeping_regions_covered),
		cmocka_unit_test(test_energy_markers_covered),
	};

	/* The markers' report is written by the test, not at exit. */
	setenv("HAECER_REGION_REPORT", "none", 1);
	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
