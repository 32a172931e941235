/*
 * Precise edges on energy pages (HAECER_ENERGY_PAGE_PRECISE, server/energy_edges.c) against the
 * real msrd on the rough simulated Sandy Bridge in real time:
 *  - every update the page brackets contains the simulator's true update time (SIM_ENERGY_AT's
 *    last_update_ns): update_lo_ns < truth <= update_ns — for every change, however wide its
 *    bracket (a late window widens it, never moves it off the truth); and the previous update's
 *    total and bracket on the page are the change before;
 *  - msrd runs the windows only while a precise holder holds its page (its log says when they
 *    start and stop), and a plain page's holder gets them only then;
 *  - the windows run on a lease: a precise holder that sends no ENERGY_READ for EDGE_LEASE_NS
 *    (150 ms) and no other request for EDGE_SHORT_LEASE_NS (6 ms) stops them (the log says so,
 *    and its page's brackets widen to the page's own sampling period), and its next request
 *    starts them again (brackets finer than that);
 *  - a coarse grant that asks for precise edges gets its coarse page without them: the reply
 *    says so, msrd does not start the windows, and the page's brackets stay empty (0).
 *  - a change bracketed only to a stall of msrd (SIGSTOP) is placed inside its bracket, on the
 *    update grid msrd learnt, around the true update time (but for at most one and 1 %);
 *  - the windows' wake margin is what msrd's log says of its timer lateness: the 90th
 *    percentile of the last 64 wakes' (mean + 3 sd before there are 16),
 *    between 25 and 250 us;
 *  - a window costs one timer wake, not two: the wakes that found nothing due (a backstop at a
 *    window's end after its spin had seen the update) are no more than the spins that gave way
 *    to waiting work, and a few; they were one per window before (issue 23, item 3);
 * The widths of the brackets depend on the host's load: printed, not asserted.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "shm/energy_page.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"
#include "tests/lib/test_check.h"

#define COARSE_UID 4302
#define MAX_EDGES 2000

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"energy_page: {max_rate_hz: 1000}\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl], capabilities: [sim_control]}\n"
	"  - match: {uid: 4302}\n"
	"    allow: [rapl]\n"
	"    energy: {min_interval_ms: 20, resolution_uj: 1000}\n";

static struct msrd_server server;

static int open_page(struct haecer_conn *conn, uint32_t flags,
		     struct haecer_energy_page_info *info, struct energy_page_reader *reader)
{
	int fd = -1;
	int status = haecer_energy_page_request(conn, 0x611, 100, flags, info, &fd);

	if (status < 0)
		return status;
	status = energy_page_attach(reader, fd);
	close(fd);
	return status;
}

/* A consistent reading of entry 0. energy_page_read gives up with -EAGAIN after a bounded
 * number of attempts while msrd is inside a write section: under valgrind a preempted msrd was
 * seen to stay there that long (a fresh-clone check, 2026-11-28). Try again then. */
static int read_entry(const struct energy_page_reader *reader, struct energy_page_reading *reading)
{
	int status = -EAGAIN;

	for (unsigned attempt = 0; attempt < 1000 && status == -EAGAIN; attempt++) {
		status = energy_page_read(reader, 0, reading);
		if (status == -EAGAIN)
			usleep(1000);
	}
	return status;
}

/* Wait until needle is in the log more than `before` times. */
static bool wait_more(const char *needle, size_t before)
{
	for (unsigned waited = 0; waited < 5000; waited += 10) {
		if (msrd_log_count(&server, needle) > before)
			return true;
		usleep(10000);
	}
	return false;
}

#define EDGES_ON "precise edges on"
#define EDGES_OFF "precise edges off"

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void test_brackets_hold_the_truth(void **state)
{
	static uint64_t widths[MAX_EDGES];
	struct haecer_energy_page_info info;
	struct energy_page_reader reader;
	struct energy_page_reading reading, previous = { 0 };
	struct haecer_conn *conn;
	uint64_t deadline;
	size_t edges = 0, consecutive = 0;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_sim_power_trace(conn, "pkg: 3600000 30\n"), 0);
	assert_int_equal(open_page(conn, HAECER_ENERGY_PAGE_PRECISE, &info, &reader), 0);
	assert_true(info.precise_edges);
	assert_false(info.coarse);
	assert_true(wait_more(EDGES_ON, 0));
	deadline = clock_monotonic_raw_ns() +
		   (harness_small_scale() ? 300000000ull : 1000000000ull);
	while (clock_monotonic_raw_ns() < deadline && edges < MAX_EDGES) {
		struct haecer_sim_energy_at truth;

		assert_int_equal(read_entry(&reader, &reading), 0);
		if (reading.update_ns == previous.update_ns || reading.update_lo_ns == 0) {
			if (previous.update_ns == 0)
				previous = reading;
			continue;
		}
		assert_true(reading.update_lo_ns < reading.update_ns);
		assert_true(reading.update_lo_tsc < reading.update_tsc);
		assert_int_equal(haecer_sim_energy_at(conn, 0, RAPL_DOMAIN_PKG, reading.update_ns,
						      &truth), 0);
		if (truth.last_update_ns <= reading.update_lo_ns ||
		    truth.last_update_ns > reading.update_ns)
			fail_msg("update at %llu ns outside its bracket %llu..%llu",
				 (unsigned long long)truth.last_update_ns,
				 (unsigned long long)reading.update_lo_ns,
				 (unsigned long long)reading.update_ns);
		/* The previous change on the page is the one seen before (when it was seen). */
		if (previous.update_ns != 0 && reading.previous_update_ns == previous.update_ns) {
			assert_int_equal(reading.previous_total, previous.total);
			assert_int_equal(reading.previous_update_lo_ns, previous.update_lo_ns);
			consecutive++;
		}
		widths[edges++] = reading.update_ns - reading.update_lo_ns;
		previous = reading;
	}
	assert_true(edges >= 10);
	assert_true(consecutive >= 1);
	qsort(widths, edges, sizeof(widths[0]), compare_u64);
	print_message("%zu updates bracketed: width median %llu ns, p90 %llu ns, max %llu ns\n",
		      edges, (unsigned long long)widths[edges / 2],
		      (unsigned long long)widths[edges * 9 / 10],
		      (unsigned long long)widths[edges - 1]);
	energy_page_detach(&reader);
	haecer_close(conn);
	assert_true(wait_more(EDGES_OFF, 0));
}

/* msrd stopped for `ns` (SIGSTOP, then SIGCONT): the updates in between are seen only after,
 * their brackets as wide as the stall, as when the host preempts msrd. */
static void stall_msrd(uint64_t ns)
{
	assert_int_equal(kill(server.pid, SIGSTOP), 0);
	harness_spin_ns(ns);
	assert_int_equal(kill(server.pid, SIGCONT), 0);
}

/* Blurred updates placed on msrd's learnt grid: msrd is stalled for 250-650 us every 20 ms, so
 * the updates in the stalls are bracketed only to the stall. Every placed bracket lies inside
 * the bracket; it holds the simulator's true update time but for at most one and 1 % of them
 * (the grid's spread is 4 standard deviations of what it learnt, not a bound: each miss is
 * printed); and natively some blurred brackets were narrowed (under valgrind msrd's windows
 * may see too few sharp updates to trust a grid: the counts are printed). */
static void test_blurred_updates_placed_on_the_grid(void **state)
{
	struct haecer_energy_page_info info;
	struct energy_page_reader reader;
	struct energy_page_reading reading;
	struct haecer_conn *conn;
	uint64_t deadline, last_stall, last_update = 0, sum_narrowed = 0, sum_blurred = 0;
	size_t edges = 0, blurred = 0, narrowed = 0, missed = 0;
	size_t offs = msrd_log_count(&server, EDGES_OFF);
	unsigned stalls = 0;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_sim_power_trace(conn, "pkg: 3600000 30\n"), 0);
	assert_int_equal(open_page(conn, HAECER_ENERGY_PAGE_PRECISE, &info, &reader), 0);
	assert_true(info.precise_edges);
	usleep(100000); /* the grid locks (16 sharp edges before any placement) */
	last_stall = clock_monotonic_raw_ns();
	deadline = last_stall + (harness_small_scale() ? 500000000ull : 2000000000ull);
	while (clock_monotonic_raw_ns() < deadline) {
		struct haecer_sim_energy_at truth;
		uint64_t width, placed;

		if (clock_monotonic_raw_ns() - last_stall > 20000000ull) {
			stall_msrd(250000 + (stalls++ * 137000) % 400000);
			/* A request: the lease, and the stall's updates published by now. */
			assert_int_equal(haecer_energy_read(conn, 0, 0x611, NULL, NULL), 0);
			last_stall = clock_monotonic_raw_ns();
		}
		assert_int_equal(read_entry(&reader, &reading), 0);
		if (reading.update_ns == last_update || reading.update_lo_ns == 0) {
			usleep(100); /* a spin here would take msrd's CPU on a small host */
			continue;
		}
		last_update = reading.update_ns;
		edges++;
		assert_true(reading.update_placed_lo_ns >= reading.update_lo_ns);
		assert_true(reading.update_placed_hi_ns <= reading.update_ns);
		assert_true(reading.update_placed_lo_ns <= reading.update_placed_hi_ns);
		width = reading.update_ns - reading.update_lo_ns;
		placed = reading.update_placed_hi_ns - reading.update_placed_lo_ns;
		if (width <= 30000)
			continue; /* sharp: msrd publishes the bracket as it is */
		blurred++;
		sum_blurred += width;
		if (placed == width)
			continue;
		narrowed++;
		sum_narrowed += placed;
		assert_int_equal(haecer_sim_energy_at(conn, 0, RAPL_DOMAIN_PKG, reading.update_ns,
						      &truth), 0);
		if (truth.last_update_ns >= reading.update_placed_lo_ns &&
		    truth.last_update_ns <= reading.update_placed_hi_ns)
			continue;
		missed++;
		print_message("update at %+.1f us of its bracket %.1f us wide, placed at "
			      "%+.1f..%+.1f us\n",
			      ((double)truth.last_update_ns - (double)reading.update_lo_ns) / 1e3,
			      (double)width / 1e3,
			      ((double)reading.update_placed_lo_ns - (double)reading.update_lo_ns) /
				      1e3,
			      ((double)reading.update_placed_hi_ns - (double)reading.update_lo_ns) /
				      1e3);
	}
	print_message("%zu updates, %zu blurred (mean %.1f us), %zu of them placed on the grid "
		      "(mean %.1f us), %zu placements missed the truth; %u stalls\n",
		      edges, blurred, blurred ? (double)sum_blurred / (double)blurred / 1e3 : 0.0,
		      narrowed, narrowed ? (double)sum_narrowed / (double)narrowed / 1e3 : 0.0,
		      missed, stalls);
	assert_true(missed <= 1 + narrowed / 100);
	if (!harness_valgrind())
		assert_true(narrowed >= 5);
	energy_page_detach(&reader);
	haecer_close(conn);
	assert_true(wait_more(EDGES_OFF, offs));
}

/* The windows open early by a margin that follows msrd's own timer lateness: the 90th
 * percentile of the last 64 wakes' lateness plus 10 us (before 16 wakes: the moving mean plus 3
 * standard deviations), between 25 and 250 us (issue 23: mean + 3 sigma of a loaded host's
 * heavy-tailed lateness kept the margin at 250 us, 28 % of a CPU spinning). msrd says them when
 * the windows stop; the last such line must hold that relation (to its rounding to whole
 * microseconds). */
static void test_wake_margin_follows_lateness(void **state)
{
	char *log = msrd_log(&server), *line, *found = NULL;
	double late = -1.0, spread = -1.0, percentile = -1.0, margin = -1.0, expected;
	unsigned share = 0, count = 0;
	unsigned long long windows = 0, sharp = 0, cpu_us = 0, wakes = 0, idle = 0, yields = 0;

	(void)state;
	assert_non_null(log);
	for (line = strstr(log, EDGES_OFF); line != NULL; line = strstr(line + 1, EDGES_OFF))
		found = line;
	assert_non_null(found);
	found = strstr(found, "so far ");
	assert_non_null(found);
	assert_int_equal(sscanf(found, "so far %llu windows, %llu sharp edges, %llu us of CPU in "
				"them, %llu timer wakes, %llu of them idle, %llu gave way",
				&windows, &sharp, &cpu_us, &wakes, &idle, &yields), 6);
	print_message("%llu windows, %llu sharp, %llu us of CPU, %llu timer wakes, %llu idle, "
		      "%llu gave way\n", windows, sharp, cpu_us, wakes, idle, yields);
	assert_true(windows >= 10);
	assert_true(idle <= yields + windows / 4 + 10);
	found = strstr(found, "timer wakes ");
	assert_non_null(found);
	assert_int_equal(sscanf(found, "timer wakes %lf +- %lf us late, %u%% of the last %u within "
				"%lf us, margin %lf us", &late, &spread, &share, &count,
				&percentile, &margin), 6);
	free(log);
	print_message("timer wakes %.0f +- %.0f us late, %u %% of %u within %.0f us, margin "
		      "%.0f us\n", late, spread, share, count, percentile, margin);
	assert_true(late >= 0.0 && spread >= 0.0);
	assert_int_equal(share, 90);
	expected = count >= 16 ? percentile : late + 3.0 * spread;
	expected = fmin(fmax(expected, 25.0), 250.0);
	assert_true(fabs(margin - expected) <= 2.5);
}

/* A plain holder's page is bracketed finely only while a precise holder is there. */
static void test_windows_only_while_asked(void **state)
{
	struct haecer_energy_page_info info;
	struct energy_page_reader plain, precise;
	struct energy_page_reading reading;
	struct haecer_conn *conn, *asking;
	size_t ons = msrd_log_count(&server, EDGES_ON), offs = msrd_log_count(&server, EDGES_OFF);

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(open_page(conn, 0, &info, &plain), 0);
	assert_false(info.precise_edges);
	assert_true(msrd_wait_log(&server, "energy pages: sampling at 100 Hz", 5000));
	usleep(50000);
	/* 100 Hz alone: the bracket is the page's period, 10 ms apart (less only if msrd was
	 * woken for something else in between, which nothing here does). */
	assert_int_equal(read_entry(&plain, &reading), 0);
	assert_true(reading.update_lo_ns != 0);
	assert_true(reading.update_ns - reading.update_lo_ns > 1000000ull);
	assert_int_equal(haecer_connect(server.socket_path, &asking), 0);
	assert_int_equal(open_page(asking, HAECER_ENERGY_PAGE_PRECISE, &info, &precise), 0);
	assert_true(info.precise_edges);
	assert_true(wait_more(EDGES_ON, ons));
	haecer_close(asking);
	energy_page_detach(&precise);
	assert_true(wait_more(EDGES_OFF, offs));
	energy_page_detach(&plain);
	haecer_close(conn);
}

/* The next change on the page (polled, with a request every renew_ns when that is not 0):
 * its bracket's width; 0 when none came within timeout_ns. */
static uint64_t next_bracket(struct haecer_conn *conn, struct energy_page_reader *reader,
			     uint64_t renew_ns, uint64_t timeout_ns)
{
	struct energy_page_reading reading, first;
	uint64_t start = clock_monotonic_raw_ns(), renewed = start;

	assert_int_equal(read_entry(reader, &first), 0);
	while (clock_monotonic_raw_ns() - start < timeout_ns) {
		assert_int_equal(read_entry(reader, &reading), 0);
		if (reading.update_ns != first.update_ns && reading.update_lo_ns != 0)
			return reading.update_ns - reading.update_lo_ns;
		if (renew_ns != 0 && clock_monotonic_raw_ns() - renewed > renew_ns) {
			assert_int_equal(haecer_energy_read(conn, 0, 0x611, NULL, NULL), 0);
			renewed = clock_monotonic_raw_ns();
		}
		usleep(100);
	}
	return 0;
}

/* A fine bracket (the windows run): narrower than the 100 Hz page's own 10 ms sampling. */
#define FINE_NS 1000000ull

/* The windows run while the holder sends requests, stop within about the lease after its last,
 * and start again with its next. */
static void test_windows_stop_when_the_lease_lapses(void **state)
{
	struct haecer_energy_page_info info;
	struct energy_page_reader reader;
	struct haecer_conn *conn;
	size_t ons = msrd_log_count(&server, EDGES_ON), offs = msrd_log_count(&server, EDGES_OFF);
	uint64_t width, quiet_from;
	bool fine = false;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(open_page(conn, HAECER_ENERGY_PAGE_PRECISE, &info, &reader), 0);
	assert_true(info.precise_edges);
	assert_true(wait_more(EDGES_ON, ons));
	/* Renewed every 20 ms: fine brackets. */
	for (int i = 0; i < 200 && !fine; i++)
		fine = (width = next_bracket(conn, &reader, 20000000ull, 100000000ull)) != 0 &&
		       width < FINE_NS;
	assert_true(fine);
	/* The page request's own short lease lapsed before the first ENERGY_READ 20 ms later:
	 * the windows may have stopped and started once already. Counted from here. */
	ons = msrd_log_count(&server, EDGES_ON);
	offs = msrd_log_count(&server, EDGES_OFF);
	/* No request any more: the windows stop by themselves, the page's brackets are its
	 * 100 Hz sampler's. */
	quiet_from = clock_monotonic_raw_ns();
	assert_true(wait_more(EDGES_OFF, offs));
	print_message("windows stopped %llu ms after the last request\n",
		      (unsigned long long)((clock_monotonic_raw_ns() - quiet_from) / 1000000ull));
	for (int i = 0; i < 3; i++) {
		width = next_bracket(conn, &reader, 0, 1000000000ull);
		assert_true(width >= FINE_NS);
	}
	assert_int_equal(msrd_log_count(&server, EDGES_ON), ons); /* not restarted */
	/* A request renews the lease: the windows run again. */
	assert_int_equal(haecer_energy_read(conn, 0, 0x611, NULL, NULL), 0);
	assert_true(wait_more(EDGES_ON, ons));
	fine = false;
	for (int i = 0; i < 200 && !fine; i++)
		fine = (width = next_bracket(conn, &reader, 50000000ull, 100000000ull)) != 0 &&
		       width < FINE_NS;
	assert_true(fine);
	offs = msrd_log_count(&server, EDGES_OFF);
	energy_page_detach(&reader);
	haecer_close(conn);
	assert_true(wait_more(EDGES_OFF, offs));
}

/* Issue 28: a holder that never reads its page's register by ENERGY_READ (a TSC read every 140
 * ms held msrd at 45 % of a CPU) gets the short lease only: the windows stop between its
 * requests instead of running through them, and each request starts them again. */
static void test_other_requests_lease_only_a_few_updates(void **state)
{
	struct haecer_energy_page_info info;
	struct energy_page_reader reader;
	struct haecer_conn *conn;
	size_t offs;
	uint64_t value;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(open_page(conn, HAECER_ENERGY_PAGE_PRECISE, &info, &reader), 0);
	assert_true(info.precise_edges);
	offs = msrd_log_count(&server, EDGES_OFF);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(haecer_msr_read(conn, 0, 0x611, &value), 0);
		usleep(140000);
	}
	/* Under a 150 ms lease they would never have stopped while the requests came. */
	print_message("windows stopped %zu times in 6 requests 140 ms apart\n",
		      msrd_log_count(&server, EDGES_OFF) - offs);
	assert_true(msrd_log_count(&server, EDGES_OFF) >= offs + 3);
	energy_page_detach(&reader);
	haecer_close(conn);
}

static int coarse_client(void *argument)
{
	struct haecer_energy_page_info info;
	struct energy_page_reader reader;
	struct energy_page_reading reading;
	struct haecer_conn *conn;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(open_page(conn, HAECER_ENERGY_PAGE_PRECISE, &info, &reader), 0);
	CHECK(info.coarse);
	CHECK(!info.precise_edges);
	for (int i = 0; i < 30; i++) {
		CHECK_EQ(read_entry(&reader, &reading), 0);
		CHECK_EQ(reading.update_lo_ns, 0);
		CHECK_EQ(reading.update_lo_tsc, 0);
		CHECK_EQ(reading.previous_total, 0);
		CHECK_EQ(reading.previous_update_ns, 0);
		CHECK_EQ(reading.previous_update_lo_ns, 0);
		usleep(5000);
	}
	energy_page_detach(&reader);
	haecer_close(conn);
	return 0;
}

static void test_coarse_grant_gets_no_edges(void **state)
{
	size_t ons = msrd_log_count(&server, EDGES_ON);

	(void)state;
	assert_int_equal(msrd_log_count(&server, EDGES_OFF), ons); /* every window stopped */
	assert_int_equal(run_as(COARSE_UID, COARSE_UID, NULL, 0, coarse_client, NULL), 0);
	/* The windows never started for it. */
	assert_int_equal(msrd_log_count(&server, EDGES_ON), ons);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", "--sim-seed",
				    "7", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_brackets_hold_the_truth),
		cmocka_unit_test(test_blurred_updates_placed_on_the_grid),
		cmocka_unit_test(test_wake_margin_follows_lateness),
		cmocka_unit_test(test_windows_only_while_asked),
		cmocka_unit_test(test_windows_stop_when_the_lease_lapses),
		cmocka_unit_test(test_other_requests_lease_only_a_few_updates),
		cmocka_unit_test(test_coarse_grant_gets_no_edges),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
