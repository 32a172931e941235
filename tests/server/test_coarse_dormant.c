/*
 * A coarse energy grant holds for an energy domain that starts counting after msrd started
 * (issue 14, item 1: PLATYPUS failing open). On a stand-in Intel machine (--backend msr
 * --dev-root) whose PKG energy counts and whose PP1 (0x641) reads 0 when msrd starts, as on a
 * machine whose graphics has not run yet, PP1 then starts counting (the test writes the
 * stand-in register). msrd used to keep totals only for domains that read non-zero at start and
 * to coarsen only what it kept a total for, so a coarse-only uid read PP1 exactly. Now, for
 * uid 4211 (PP1 at 1 J resolution, units of 2^-14 J):
 *   - READ, a BATCH of READ and ENERGY_READ, and every record of a 1 ms schedule show PP1 in
 *     whole joules, never the exact count the register holds;
 *   - root (a full grant) reads the exact value, so the register really held a finer one.
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
#include "hw/msr.h"
#include "shm/ring.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"
#include "harness/standin_tree.h"
#include "tests/lib/test_check.h"

#define PP1 0x641u
#define JOULE STANDIN_SNB_JOULE
#define PKG_START 0x1234567ull
#define PP1_LATER (5 * JOULE + 777) /* not whole joules */
#define COARSE_UID 4211
#define MAJOR 3
#define WAIT_MS 30000

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"  - {name: PP1_ENERGY_STATUS, address: 0x641, read: true, set: rapl}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [rapl]\n"
	"  - match: {uid: 4211}\n"
	"    allow: [rapl]\n"
	"    energy: {min_interval_ms: 1, resolution_uj: 1000000}\n"
	"    create_rings: [1-9]\n"
	"    monitor_rings: [1-9]\n";

static struct msrd_server server;
static char tree[PATH_MAX + 16];
static const char *const arguments[] = { "--backend", "msr", "--dev-root", tree, NULL };

static int coarse_schedule(struct haecer_conn *conn)
{
	static const struct haecer_msr_op reads[2] = {
		{ .kind = HAECER_MSR_READ, .cpu = 0, .address = PP1 },
		{ .kind = HAECER_MSR_ENERGY_READ, .cpu = 0, .address = PP1 },
	};
	static struct ring_record records[64];
	struct haecer_schedule_spec spec = { .period_ns = 1000000, .major = MAJOR, .minor = 1,
					     .capacity = 64 };
	struct ring_consumer consumer;
	uint64_t lost = 0;
	uint32_t id, instance;
	ssize_t got = 0;
	int fd;

	CHECK_EQ(haecer_batch_register(conn, reads, 2, &spec.handle), 0);
	CHECK_EQ(haecer_schedule_start(conn, &spec, &id, &instance), 0);
	CHECK_EQ(haecer_ring_open(conn, MAJOR, 1, instance, NULL, &fd), 0);
	CHECK_EQ(ring_consumer_attach(&consumer, fd), 0);
	for (int i = 0; i < WAIT_MS / 5 && got < 8; i++) {
		usleep(5000);
		got += ring_consume(&consumer, records + got, 64 - (size_t)got, &lost);
	}
	CHECK(got >= 8);
	for (ssize_t i = 0; i < got; i++)
		CHECK_EQ(records[i].value % JOULE, 0);
	ring_consumer_detach(&consumer);
	close(fd);
	CHECK_EQ(haecer_schedule_stop(conn, id), 0);
	return 0;
}

static int coarse_client(void *argument)
{
	struct haecer_msr_op ops[2] = {
		{ .kind = HAECER_MSR_READ, .cpu = 0, .address = PP1 },
		{ .kind = HAECER_MSR_ENERGY_READ, .cpu = 0, .address = PP1 },
	};
	struct haecer_conn *conn;
	uint64_t value = 1;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_msr_read(conn, 0, PP1, &value), 0);
	CHECK_EQ(value, PP1_LATER - PP1_LATER % JOULE);
	usleep(2000);
	CHECK_EQ(haecer_msr_batch(conn, ops, 2), 0);
	CHECK_EQ(ops[0].value % JOULE, 0);
	CHECK_EQ(ops[1].total % JOULE, 0);
	CHECK_EQ(coarse_schedule(conn), 0);
	haecer_close(conn);
	return 0;
}

static void test_dormant_domain_is_coarse(void **state)
{
	struct haecer_conn *root;
	uint64_t value = 0;

	(void)state;
	/* PP1 starts counting now, after msrd probed it. */
	assert_int_equal(harness_standin_write(tree, 0, PP1, PP1_LATER), 0);
	assert_int_equal(haecer_connect(server.socket_path, &root), 0);
	assert_int_equal(haecer_msr_read(root, 0, PP1, &value), 0);
	assert_int_equal(value, PP1_LATER);
	haecer_close(root);
	assert_int_equal(run_as(COARSE_UID, COARSE_UID, NULL, 0, coarse_client, NULL), 0);
}

/* A Sandy Bridge client part: it has PP1, the graphics domain, which reads 0. */
static int prepare(const struct msrd_server *prepared)
{
	tree_prepare_sandybridge_rapl(prepared->dir, tree, sizeof(tree), PKG_START);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dormant_domain_is_coarse),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, prepare, arguments, NULL, tests);
}
