/*
 * Two users (and a third through a supplementary group) against one msrd and one policy: each
 * may read and write exactly what its rule grants, every refusal reaches the client as the
 * documented status and the log as one line naming uid, pid, op, cpu and address. The clients
 * run as real other uids in child processes; msrd learns who they are from SO_PEERCRED and
 * SO_PEERGROUPS.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"

#define UID_RAPL 4001
#define UID_TIME 4002
#define UID_GROUP 4003
#define GID_PMU 4100

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: time}\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"
	"  - {name: PERFEVTSEL, address: 0x186, count: 4, read: true, write_mask: 0xFFCFFFFF,\n"
	"     set: pmu}\n"
	"rules:\n"
	"  - {match: {uid: 4001}, allow: [rapl, pmu]}\n"
	"  - {match: {uid: 4002}, allow: [time]}\n"
	"  - {match: {gid: 4100}, allow: [time]}\n";

static struct msrd_server server;

static int rapl_user(void *argument)
{
	struct haecer_conn *conn;
	uint64_t value = 0;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_server_info(conn)->uid, UID_RAPL);
	CHECK_EQ(haecer_msr_read(conn, 0, 0x611, &value), 0);
	CHECK_EQ(haecer_msr_read(conn, 1, 0x606, &value), 0);
	CHECK_EQ(value & 0x1f00, 0x1000); /* Sandy Bridge: 2^-16 J */
	CHECK_EQ(haecer_msr_read(conn, 0, 0x10, &value), -EPERM);
	CHECK(strstr(haecer_conn_error(conn), "denied by policy") != NULL);
	CHECK_EQ(haecer_msr_write(conn, 0, 0x186, 0x43003c), 0);
	CHECK_EQ(haecer_msr_read(conn, 0, 0x186, &value), 0);
	CHECK_EQ(value, 0x43003c);
	CHECK_EQ(haecer_msr_write(conn, 0, 0x611, 0), -EPERM);
	/* The connection stays usable after refusals. */
	CHECK_EQ(haecer_msr_write(conn, 0, 0x186, 0), 0);
	haecer_close(conn);
	return 0;
}

static int time_user(void *argument)
{
	struct haecer_conn *conn;
	uint64_t first = 0;
	uint64_t second = 0;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_server_info(conn)->uid, UID_TIME);
	CHECK_EQ(haecer_msr_read(conn, 0, 0x10, &first), 0);
	CHECK_EQ(haecer_msr_read(conn, 0, 0x10, &second), 0);
	CHECK(second >= first);
	CHECK_EQ(haecer_msr_read(conn, 0, 0x611, &first), -EPERM);
	CHECK_EQ(haecer_msr_write(conn, 0, 0x186, 0x43003c), -EPERM);
	CHECK_EQ(haecer_msr_read(conn, 0, 0x186, &first), -EPERM);
	haecer_close(conn);
	return 0;
}

/* Matched only through a supplementary group, which only SO_PEERGROUPS tells msrd about. */
static int group_user(void *argument)
{
	struct haecer_conn *conn;
	uint64_t value = 0;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_msr_read(conn, 0, 0x10, &value), 0);
	CHECK_EQ(haecer_msr_read(conn, 0, 0x611, &value), -EPERM);
	haecer_close(conn);
	return 0;
}

static int stranger(void *argument)
{
	struct haecer_conn *conn;
	uint64_t value = 0;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_msr_read(conn, 0, 0x10, &value), -EPERM);
	haecer_close(conn);
	return 0;
}

static void test_rapl_user(void **state)
{
	(void)state;
	assert_int_equal(run_as(UID_RAPL, UID_RAPL, NULL, 0, rapl_user, NULL), 0);
}

static void test_time_user(void **state)
{
	(void)state;
	assert_int_equal(run_as(UID_TIME, UID_TIME, NULL, 0, time_user, NULL), 0);
}

static void test_supplementary_group(void **state)
{
	gid_t groups[] = { GID_PMU };

	(void)state;
	assert_int_equal(run_as(UID_GROUP, UID_GROUP, groups, 1, group_user, NULL), 0);
	/* The same user without the group gets nothing. */
	assert_int_equal(run_as(UID_GROUP, UID_GROUP, NULL, 0, stranger, NULL), 0);
}

static void test_refusals_logged(void **state)
{
	(void)state;
	assert_true(msrd_log_contains(&server, "refused: uid 4001 pid "));
	assert_true(msrd_log_contains(&server, "op READ cpu 0 address 0x10: read not granted"));
	assert_true(msrd_log_contains(&server, "op WRITE cpu 0 address 0x611: write not granted"));
	assert_true(msrd_log_contains(&server, "refused: uid 4002 pid "));
	assert_true(msrd_log_contains(&server, "op WRITE cpu 0 address 0x186: write not granted"));
	/* One line per refusal: 2 of uid 4001, 3 of uid 4002, 1 + 1 of uid 4003. */
	assert_int_equal(msrd_log_count(&server, "refused: "), 7);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rapl_user),
		cmocka_unit_test(test_time_user),
		cmocka_unit_test(test_supplementary_group),
		cmocka_unit_test(test_refusals_logged),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
