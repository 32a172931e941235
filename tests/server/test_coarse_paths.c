/*
 * A coarse energy grant holds on every path by which a client can have an energy-status
 * register read (review finding 2). For a uid granted PKG_ENERGY_STATUS at 1 J resolution and
 * one reading per second (Sandy Bridge: 1 J = 65536 units), in virtual time:
 *   - READ, ENERGY_READ, a BATCH of both (no writes), a registered batch run by handle, and a
 *     schedule's records (energy total and plain read alike) are all rounded to whole joules;
 *   - the minimum interval is the uid's, not the connection's: a second connection inside the
 *     interval gets the first one's reading, not a fresh one;
 *   - a slot read cannot name an energy register (it names slot ids: NOT_FOUND);
 *   - a refused write to the register (the policy gives it a write mask) does not show the
 *     register's current value in its text;
 *   - a ring msrd fills for a uid with a full grant cannot be opened by the coarse uid, whose
 *     own schedule's ring the full-grant uid may open.
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
#include "proto/wire.h"
#include "shm/ring.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"

#define NS_PER_MS 1000000ull
#define JOULE 65536ull /* units of 2^-16 J */
#define COARSE_UID 4211
#define MAJOR 3
#define WAIT_MS 30000

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, write_mask: 0x1, set: rapl}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [rapl]\n"
	"    capabilities: [sim_control]\n"
	"    create_rings: [1-9]\n"
	"    monitor_rings: [1-9]\n"
	"  - match: {uid: 4211}\n"
	"    allow: [rapl]\n"
	"    energy: {min_interval_ms: 1000, resolution_uj: 1000000}\n"
	"    capabilities: [sim_control]\n"
	"    create_rings: [1-9]\n"
	"    monitor_rings: [1-9]\n";

static struct msrd_server server;
static struct haecer_conn *root;

static const struct haecer_msr_op reads[2] = {
	{ .kind = HAECER_MSR_READ, .cpu = 0, .address = MSR_PKG_ENERGY_STATUS },
	{ .kind = HAECER_MSR_ENERGY_READ, .cpu = 1, .address = MSR_PKG_ENERGY_STATUS },
};

/* The simulator's exact count now (units at its last 1 ms update). */
static uint64_t truth(struct haecer_conn *conn)
{
	struct haecer_sim_truth value;

	if (haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &value) < 0)
		return 0;
	return value.units_at_update;
}

/* A coarse reading: whole joules, at most one joule below the truth. */
static int check_coarse_total(struct haecer_conn *conn, uint64_t total)
{
	uint64_t exact = truth(conn);

	CHECK_EQ(total % JOULE, 0);
	CHECK(total <= exact && exact - total < JOULE);
	CHECK(exact % JOULE != 0); /* the rounding shows */
	return 0;
}

/* Past the minimum interval, with energy that moved. */
static int next_interval(struct haecer_conn *conn)
{
	CHECK_EQ(haecer_sim_advance(conn, 1100 * NS_PER_MS + 333333, NULL), 0);
	return 0;
}

static int coarse_reads(struct haecer_conn *conn)
{
	struct haecer_msr_op ops[2];
	uint64_t value, raw, total;
	uint32_t handle;

	CHECK_EQ(next_interval(conn), 0);
	CHECK_EQ(haecer_msr_read(conn, 0, MSR_PKG_ENERGY_STATUS, &value), 0);
	CHECK_EQ(value % JOULE, 0);
	CHECK_EQ(next_interval(conn), 0);
	CHECK_EQ(haecer_energy_read(conn, 0, MSR_PKG_ENERGY_STATUS, &raw, &total), 0);
	CHECK_EQ(check_coarse_total(conn, total), 0);
	CHECK_EQ(raw, total & RAPL_ENERGY_COUNTER_MASK);
	CHECK_EQ(next_interval(conn), 0);
	memcpy(ops, reads, sizeof(ops));
	CHECK_EQ(haecer_msr_batch(conn, ops, 2), 0);
	CHECK_EQ(ops[0].value % JOULE, 0);
	CHECK_EQ(check_coarse_total(conn, ops[1].total), 0);
	CHECK_EQ(haecer_batch_register(conn, reads, 2, &handle), 0);
	CHECK_EQ(next_interval(conn), 0);
	CHECK_EQ(haecer_batch_run(conn, handle, ops, 2), 0);
	CHECK_EQ(ops[0].value % JOULE, 0);
	CHECK_EQ(check_coarse_total(conn, ops[1].total), 0);
	return 0;
}

/* Another connection of the same uid, inside the interval: the same reading again. */
static int interval_is_per_uid(struct haecer_conn *conn)
{
	struct haecer_conn *second;
	uint64_t raw, total, again_raw, again_total;

	CHECK_EQ(next_interval(conn), 0);
	CHECK_EQ(haecer_energy_read(conn, 0, MSR_PKG_ENERGY_STATUS, &raw, &total), 0);
	CHECK_EQ(haecer_sim_advance(conn, 300 * NS_PER_MS, NULL), 0);
	CHECK(truth(conn) - total > 2 * JOULE); /* a fresh reading would differ */
	CHECK_EQ(haecer_connect(server.socket_path, &second), 0);
	CHECK_EQ(haecer_energy_read(second, 0, MSR_PKG_ENERGY_STATUS, &again_raw, &again_total),
		 0);
	CHECK_EQ(again_total, total);
	CHECK_EQ(again_raw, raw);
	haecer_close(second);
	return 0;
}

static int no_other_way_in(struct haecer_conn *conn)
{
	struct haecer_msr_op op = { .kind = HAECER_MSR_SLOT_READ, .address = MSR_PKG_ENERGY_STATUS };
	char text[256];

	CHECK(haecer_msr_batch(conn, &op, 1) < 0);
	CHECK_EQ(op.status, -ENOENT);
	/* Bit 31 is outside the write mask: refused, and the text does not say what is there. */
	CHECK_EQ(haecer_msr_write(conn, 0, MSR_PKG_ENERGY_STATUS, 0x80000000ull), -EACCES);
	snprintf(text, sizeof(text), "%s", haecer_conn_error(conn));
	CHECK(strstr(text, "outside the mask") != NULL);
	CHECK(strstr(text, " over ") == NULL);
	return 0;
}

/* Every record of a scheduled ring: energy totals and plain reads in whole joules. */
static int check_ring_records(int fd, struct haecer_conn *conn)
{
	static struct ring_record records[256];
	struct ring_consumer consumer;
	uint64_t lost = 0;
	ssize_t got = 0;

	CHECK_EQ(ring_consumer_attach(&consumer, fd), 0);
	for (int i = 0; i < WAIT_MS / 5 && got < 8; i++) {
		CHECK_EQ(haecer_sim_advance(conn, 300 * NS_PER_MS, NULL), 0);
		usleep(5000);
		got += ring_consume(&consumer, records + got, 256 - (size_t)got, &lost);
	}
	CHECK(got >= 8);
	for (ssize_t i = 0; i < got; i++)
		CHECK_EQ(records[i].value % JOULE, 0);
	ring_consumer_detach(&consumer);
	return 0;
}

static int coarse_schedule(struct haecer_conn *conn)
{
	struct haecer_schedule_spec spec = { .period_ns = NS_PER_MS, .major = MAJOR, .minor = 1,
					     .capacity = 256 };
	uint32_t id, instance;
	int fd;

	CHECK_EQ(haecer_batch_register(conn, reads, 2, &spec.handle), 0);
	CHECK_EQ(haecer_schedule_start(conn, &spec, &id, &instance), 0);
	CHECK_EQ(haecer_ring_open(conn, MAJOR, 1, instance, NULL, &fd), 0);
	CHECK_EQ(check_ring_records(fd, conn), 0);
	close(fd);
	/* The full grant's ring is not for this uid. */
	CHECK_EQ(haecer_ring_open(conn, MAJOR, 2, 0, NULL, &fd), -EPERM);
	CHECK(strstr(haecer_conn_error(conn), "more finely") != NULL);
	return 0;
}

static int coarse_client(void *argument)
{
	struct haecer_conn *conn;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(coarse_reads(conn), 0);
	CHECK_EQ(interval_is_per_uid(conn), 0);
	CHECK_EQ(no_other_way_in(conn), 0);
	CHECK_EQ(coarse_schedule(conn), 0);
	haecer_close(conn);
	return 0;
}

static void test_every_path_is_coarse(void **state)
{
	struct haecer_schedule_spec spec = { .period_ns = NS_PER_MS, .major = MAJOR, .minor = 2,
					     .capacity = 256 };
	uint32_t id, instance;
	int fd;

	(void)state;
	assert_int_equal(haecer_sim_set_load(root, -1, 0.5), 0);
	assert_int_equal(haecer_batch_register(root, reads, 2, &spec.handle), 0);
	assert_int_equal(haecer_schedule_start(root, &spec, &id, &instance), 0);
	assert_int_equal(run_as(COARSE_UID, COARSE_UID, NULL, 0, coarse_client, NULL), 0);
	/* The full grant may open the coarse uid's ring (it is coarser than it needs). */
	assert_int_equal(haecer_ring_open(root, MAJOR, 1, 0, NULL, &fd), 0);
	close(fd);
	assert_int_equal(haecer_schedule_stop(root, id), 0);
	assert_true(msrd_log_contains(&server, "more finely than uid 4211's coarse grant allows"));
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-virtual-time", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_path_is_coarse),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &root, tests);
}
