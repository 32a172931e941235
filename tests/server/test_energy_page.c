/*
 * Energy pages (ENERGY_PAGE) against the real msrd on the simulated CPU, in real time:
 *  - a fine page carries msrd's exact totals, raw = total mod 2^32, and moves while held;
 *    msrd samples for pages only while one is held (its log says when sampling starts and
 *    stops), at the rate asked for, cut to the policy's energy_page.max_rate_hz;
 *  - a coarse grant gets a page whose every total is a multiple of its resolution (in register
 *    units) and whose publications are at least its interval apart, and its round trips give the
 *    page's publication meanwhile (one value per interval either way) — while the fine page of the
 *    same register, read in the same run, shows values that are not multiples (so a leak of
 *    fine values would be seen);
 *  - a page of a register the policy does not grant is refused, as is one of a register msrd
 *    keeps no total for;
 *  - a policy reload marks a held page STALE (it stops moving); asking again gets a page of the
 *    new grant (coarse now) or a refusal (no grant);
 *  - msrd stopping marks the page DEAD.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "shm/energy_page.h"
#include "harness/msrd_harness.h"
#include "tests/lib/test_check.h"
#include "harness/text_file.h"

#define COARSE_UID 4301
#define UNITS_PER_JOULE 65536ull /* sandybridge: 2^-16 J */
#define INTERVAL_MS 50u

#define HEADER                                                                                      \
	"version: 1\n"                                                                              \
	"default: deny\n"                                                                           \
	"energy_page: {max_rate_hz: 2000}\n"                                                        \
	"msrs:\n"                                                                                   \
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"                     \
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"                   \
	"  - {name: TSC, address: 0x10, read: true, set: time}\n"                                   \
	"rules:\n"

static const char policy_fine[] = HEADER
	"  - {match: {uid: 0}, allow: [rapl, time], capabilities: [sim_control]}\n"
	"  - match: {uid: 4301}\n"
	"    allow: [rapl]\n"
	"    energy: {min_interval_ms: 50, resolution_uj: 1000000}\n";
static const char policy_root_coarse[] = HEADER
	"  - match: {uid: 0}\n"
	"    allow: [rapl]\n"
	"    energy: {min_interval_ms: 50, resolution_uj: 1000000}\n";
static const char policy_root_none[] = HEADER "  - {match: {uid: 0}, allow: [time]}\n";

static struct msrd_server server;

static int open_page(struct haecer_conn *conn, uint32_t rate, struct haecer_energy_page_info *info,
		     struct energy_page_reader *reader)
{
	int fd = -1;
	int status = haecer_energy_page_open(conn, 0x611, rate, info, &fd);

	if (status < 0)
		return status;
	status = energy_page_attach(reader, fd);
	close(fd);
	return status;
}

static void test_fine_page_moves_while_held(void **state)
{
	struct haecer_energy_page_info info;
	struct energy_page_reader reader;
	struct energy_page_reading first, later;
	struct haecer_conn *conn;
	uint64_t raw, total;
	int index;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	assert_int_equal(open_page(conn, 10000, &info, &reader), 0);
	assert_false(info.coarse);
	assert_int_equal(info.rate_hz, 2000); /* cut to the policy's bound */
	assert_true(msrd_wait_log(&server, "energy pages: sampling at 2000 Hz", 5000));
	assert_int_equal(reader.info.address, 0x611);
	assert_true((reader.info.flags & ENERGY_PAGE_SIMULATED) != 0);
	index = energy_page_find(&reader, 0, 0);
	assert_true(index >= 0);
	assert_int_equal(energy_page_read(&reader, (uint32_t)index, &first), 0);
	assert_int_equal(first.state, ENERGY_PAGE_LIVE);
	assert_int_equal(first.raw, first.total & RAPL_ENERGY_COUNTER_MASK);
	assert_int_equal(first.exponent, 16);
	assert_true(first.sample_ns <= clock_monotonic_raw_ns() &&
		    first.update_ns <= first.sample_ns);
	usleep(50000);
	assert_int_equal(energy_page_read(&reader, (uint32_t)index, &later), 0);
	assert_true(later.sequence > first.sequence);
	assert_true(later.sample_ns > first.sample_ns);
	assert_true(later.total > first.total);
	assert_true(later.update_tsc > first.update_tsc);
	/* msrd's exact total is never behind the page. */
	assert_int_equal(haecer_energy_read(conn, 0, 0x611, &raw, &total), 0);
	assert_true(total >= later.total);
	energy_page_detach(&reader);
	haecer_close(conn);
	assert_true(msrd_wait_log(&server, "energy pages: sampling at 0 Hz (none held)", 5000));
}

static void test_refusals(void **state)
{
	struct haecer_energy_page_info info;
	struct haecer_conn *conn;
	int fd = -1;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	/* The TSC is granted but keeps no total; 0x639 has no total on this model's policy. */
	assert_int_equal(haecer_energy_page_open(conn, 0x10, 0, &info, &fd), -EINVAL);
	assert_int_equal(haecer_energy_page_open(conn, 0x639, 0, &info, &fd), -EPERM);
	assert_int_equal(fd, -1);
	haecer_close(conn);
}

/* Runs as COARSE_UID. Every value the page ever shows is a multiple of the resolution and every
 * publication at least the interval after the one before. */
static int coarse_client(void *argument)
{
	struct haecer_energy_page_info info;
	struct energy_page_reader reader;
	struct energy_page_reading reading, previous = { 0 };
	struct haecer_conn *conn;
	uint64_t deadline = clock_monotonic_raw_ns() + 600000000ull;
	unsigned publications = 0, changes = 0;
	int index;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(open_page(conn, 2000, &info, &reader), 0);
	CHECK(info.coarse);
	CHECK_EQ(info.min_interval_ms, INTERVAL_MS);
	CHECK_EQ(info.resolution_uj, 1000000);
	CHECK((reader.info.flags & ENERGY_PAGE_COARSE) != 0);
	index = energy_page_find(&reader, 0, 0);
	CHECK(index >= 0);
	while (clock_monotonic_raw_ns() < deadline) {
		if (energy_page_read(&reader, (uint32_t)index, &reading) < 0)
			continue;
		CHECK_EQ(reading.total % UNITS_PER_JOULE, 0);
		CHECK_EQ(reading.raw, reading.total & RAPL_ENERGY_COUNTER_MASK);
		if (reading.sequence == previous.sequence)
			continue;
		/* A new publication: its times are publication times, never finer. */
		if (previous.sequence != 0) {
			CHECK(reading.sample_ns - previous.sample_ns >=
			      (INTERVAL_MS - 1) * 1000000ull);
			CHECK(reading.update_ns == previous.update_ns ||
			      reading.update_ns == reading.sample_ns);
			if (reading.total != previous.total)
				changes++;
		}
		publications++;
		previous = reading;
	}
	CHECK(publications >= 2);
	CHECK(changes >= 1); /* at full simulated load a joule passes in well under 600 ms */
	/* A round trip while the coarse page is published gives its publication, not a reading
	 * of its own: page and round trips together still show one value per interval. */
	for (int i = 0; i < 20; i++) {
		struct energy_page_reading before, after;
		uint64_t raw, total;
		CHECK_EQ(energy_page_read(&reader, (uint32_t)index, &before), 0);
		CHECK_EQ(haecer_energy_read(conn, 0, 0x611, &raw, &total), 0);
		CHECK_EQ(energy_page_read(&reader, (uint32_t)index, &after), 0);
		CHECK(total == before.total || total == after.total);
		CHECK_EQ(raw, total & RAPL_ENERGY_COUNTER_MASK);
		usleep(5000);
	}
	energy_page_detach(&reader);
	haecer_close(conn);
	return 0;
}

static void test_coarse_grant_gets_coarse_page(void **state)
{
	struct haecer_energy_page_info info;
	struct energy_page_reader reader;
	struct energy_page_reading reading;
	struct haecer_conn *conn;
	bool fine_seen = false;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	assert_int_equal(run_as(COARSE_UID, COARSE_UID, NULL, 0, coarse_client, NULL), 0);
	/* The same register through the fine page: values the coarse page must never show. */
	assert_int_equal(open_page(conn, 1000, &info, &reader), 0);
	for (int i = 0; i < 200 && !fine_seen; i++) {
		assert_int_equal(energy_page_read(&reader, 0, &reading), 0);
		fine_seen = reading.total % UNITS_PER_JOULE != 0;
		usleep(1000);
	}
	assert_true(fine_seen);
	energy_page_detach(&reader);
	haecer_close(conn);
}

static void test_reload_marks_page_stale_then_restart_dead(void **state)
{
	struct haecer_energy_page_info info;
	struct energy_page_reader fine, coarse;
	struct energy_page_reading stale, after;
	struct haecer_conn *conn;
	int fd = -1;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(open_page(conn, 1000, &info, &fine), 0);
	assert_false(info.coarse);
	assert_int_equal(msrd_install_policy(&server, policy_root_coarse, 30000), 0);
	assert_int_equal(energy_page_state(&fine), ENERGY_PAGE_STALE);
	assert_int_equal(energy_page_read(&fine, 0, &stale), 0);
	usleep(20000);
	assert_int_equal(energy_page_read(&fine, 0, &after), 0);
	assert_int_equal(after.sequence, stale.sequence); /* no longer written */
	/* Asking again: the new grant's page. */
	assert_int_equal(open_page(conn, 1000, &info, &coarse), 0);
	assert_true(info.coarse);
	assert_int_equal(energy_page_read(&coarse, 0, &after), 0);
	assert_int_equal(after.total % UNITS_PER_JOULE, 0);
	assert_int_equal(msrd_install_policy(&server, policy_root_none, 30000), 0);
	assert_int_equal(energy_page_state(&coarse), ENERGY_PAGE_STALE);
	assert_int_equal(haecer_energy_page_open(conn, 0x611, 0, &info, &fd), -EPERM);
	energy_page_detach(&coarse);
	/* A held page when msrd stops: DEAD. */
	assert_int_equal(msrd_install_policy(&server, policy_fine, 30000), 0);
	assert_int_equal(open_page(conn, 1000, &info, &fine), 0);
	assert_int_equal(msrd_stop(&server), 0);
	haecer_close(conn);
	assert_int_equal(energy_page_state(&fine), ENERGY_PAGE_DEAD);
	energy_page_detach(&fine);
	server.pid = 0;
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fine_page_moves_while_held),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_coarse_grant_gets_coarse_page),
		cmocka_unit_test(test_reload_marks_page_stale_then_restart_dead),
	};
	int failed;

	if (msrd_start(&server, policy_fine, arguments) < 0)
		return 1;
	failed = cmocka_run_group_tests(tests, NULL, NULL);
	if (server.pid > 0 && msrd_stop(&server) < 0)
		failed = 1;
	return failed ? 1 : 0;
}
