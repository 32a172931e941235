/*
 * A policy reload never changes what a running schedule's ring says about the coarseness of its
 * records (issue 14, item 6). Root schedules PKG_ENERGY_STATUS under a full grant; its ring
 * holds exact readings, so uid 4211 (coarse: 1 J, one reading a second) may not open it. A
 * reload that makes root's grant coarse too used to relabel the running ring as coarse, and
 * uid 4211 could then open it and read the exact records written before. Now:
 *   - such a reload stops the schedule (its id is unknown afterwards) and says why;
 *   - uid 4211 still may not open the ring (its label still says exact), before and after;
 *   - a reload that leaves the coarseness as it was keeps a schedule running.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"

#define COARSE_UID 4211
#define MAJOR 3
#define WAIT_MS 30000

#define POLICY_HEAD                                                                        \
	"version: 1\ndefault: deny\nmsrs:\n"                                               \
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"             \
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"           \
	"rules:\n"                                                                         \
	"  - match: {uid: 4211}\n    allow: [rapl]\n"                                      \
	"    energy: {min_interval_ms: 1000, resolution_uj: 1000000}\n"                    \
	"    monitor_rings: [1-9]\n"                                                       \
	"  - match: {uid: 0}\n    allow: [rapl]\n    create_rings: [1-9]\n"                \
	"    monitor_rings: [1-9]\n"

static const char fine_policy[] = POLICY_HEAD;
static const char coarse_policy[] =
	POLICY_HEAD "    energy: {min_interval_ms: 1000, resolution_uj: 1000000}\n";
static const char fine_again[] = POLICY_HEAD "    capabilities: [sim_control]\n";

static struct msrd_server server;
static struct haecer_conn *root;
static uint32_t instance;

static int may_not_open(void *argument)
{
	struct haecer_conn *conn;
	int fd = -1;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_ring_open(conn, MAJOR, 1, instance, NULL, &fd), -EPERM);
	haecer_close(conn);
	return 0;
}

static uint32_t start_schedule(uint16_t minor)
{
	static const struct haecer_msr_op read_pkg = { .kind = HAECER_MSR_ENERGY_READ,
						       .address = MSR_PKG_ENERGY_STATUS };
	struct haecer_schedule_spec spec = { .period_ns = 1000000, .major = MAJOR,
					     .minor = minor, .capacity = 64 };
	uint32_t id;

	assert_int_equal(haecer_batch_register(root, &read_pkg, 1, &spec.handle), 0);
	assert_int_equal(haecer_schedule_start(root, &spec, &id, &instance), 0);
	return id;
}

static void test_same_coarseness_keeps_running(void **state)
{
	uint32_t id;

	(void)state;
	id = start_schedule(2);
	assert_int_equal(msrd_install_policy(&server, fine_again, WAIT_MS), 0);
	assert_int_equal(haecer_schedule_stop(root, id), 0);
}

static void test_coarser_reload_stops_the_schedule(void **state)
{
	uint32_t id;

	(void)state;
	id = start_schedule(1);
	usleep(20000); /* exact records in the ring */
	assert_int_equal(run_as(COARSE_UID, COARSE_UID, NULL, 0, may_not_open, NULL), 0);
	assert_int_equal(msrd_install_policy(&server, coarse_policy, WAIT_MS), 0);
	assert_int_equal(run_as(COARSE_UID, COARSE_UID, NULL, 0, may_not_open, NULL), 0);
	assert_int_equal(haecer_schedule_stop(root, id), -ENOENT);
	assert_true(msrd_log_contains(&server, "the reloaded policy changes its energy coarseness"));
	assert_int_equal(msrd_install_policy(&server, fine_policy, WAIT_MS), 0);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_coarseness_keeps_running),
		cmocka_unit_test(test_coarser_reload_stops_the_schedule),
	};

	return MSRD_RUN_GROUP(&server, fine_policy, arguments, &root, tests);
}
