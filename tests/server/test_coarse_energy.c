/*
 * A coarse energy grant (policy `energy: {min_interval_ms: 1000, resolution_uj: 1000000}`, the
 * PLATYPUS mitigation) as seen by a client of the uid it matches: every reading — ENERGY_READ,
 * a plain READ of the register, a batch — is rounded down to whole joules (65536 units of
 * 2^-16 J), with raw = total mod 2^32; within a second of simulated time the previous reading
 * comes back however the energy moved; after it, a new rounded one. A client with a full grant
 * sees the exact value. Virtual time makes the interval exact.
 *
 * haecer_energy_grant says so: the coarse uid learns its grant (1 s, 1 J), the full one that
 * it has a full grant, both the policy's coarse setting (the coarsest of its rules' limits: a
 * second coarse rule of 2 s and 5 J), and a uid no rule grants the register gets -EPERM naming
 * why.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"

#define NS_PER_MS 1000000ull
#define UNITS_PER_JOULE 65536ull
#define COARSE_UID 4201
#define STRANGER_UID 65534

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl], capabilities: [sim_control]}\n"
	"  - match: {uid: 4201}\n"
	"    allow: [rapl]\n"
	"    energy: {min_interval_ms: 1000, resolution_uj: 1000000}\n"
	"    capabilities: [sim_control]\n"
	"  - {match: {uid: 4202}, allow: [rapl], energy: {min_interval_ms: 2000, resolution_uj: 5000000}}\n";

static struct msrd_server server;
static struct haecer_conn *root;

static uint64_t truth_units(struct haecer_conn *conn)
{
	struct haecer_sim_truth truth;

	if (haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &truth) < 0)
		return 0;
	return truth.units_at_update;
}

/* The policy's coarse setting, as every granted uid is told it. */
static bool policy_setting_told(const struct haecer_energy_grant *grant)
{
	return (grant->flags & HAECER_ENERGY_GRANT_POLICY_COARSE) != 0 &&
	       grant->policy_min_interval_ms == 2000 && grant->policy_resolution_uj == 5000000;
}

static int coarse_client_grant(struct haecer_conn *conn)
{
	struct haecer_energy_grant grant;

	CHECK_EQ(haecer_energy_grant(conn, 0x611, &grant), 0);
	CHECK_EQ(grant.address, 0x611);
	CHECK(grant.flags & HAECER_ENERGY_GRANT_COARSE);
	CHECK_EQ(grant.min_interval_ms, 1000);
	CHECK_EQ(grant.resolution_uj, 1000000);
	CHECK(policy_setting_told(&grant));
	/* Not an energy register msrd keeps a total for: no grant to tell. */
	CHECK_EQ(haecer_energy_grant(conn, 0x606, &grant), -EINVAL);
	return 0;
}

static int stranger_client(void *argument)
{
	struct haecer_energy_grant grant;
	struct haecer_conn *conn;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_energy_grant(conn, 0x611, &grant), -EPERM);
	CHECK(strstr(haecer_conn_error(conn), "has no grant for energy register 0x611") != NULL);
	haecer_close(conn);
	return 0;
}

static int coarse_client(void *argument)
{
	struct haecer_msr_op op = { .kind = HAECER_MSR_ENERGY_READ, .address = 0x611 };
	struct haecer_conn *conn;
	uint64_t raw, total, again_raw, again_total, plain, truth;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(coarse_client_grant(conn), 0);
	CHECK_EQ(haecer_sim_advance(conn, 1500 * NS_PER_MS, NULL), 0);
	CHECK_EQ(haecer_energy_read(conn, 0, 0x611, &raw, &total), 0);
	truth = truth_units(conn);
	CHECK_EQ(total % UNITS_PER_JOULE, 0);
	CHECK_EQ(raw, total & RAPL_ENERGY_COUNTER_MASK);
	CHECK(total <= truth && truth - total < UNITS_PER_JOULE);
	CHECK(truth % UNITS_PER_JOULE != 0); /* so the rounding is visible */

	/* 100 ms and 900 ms later: still inside the second, the same reading whatever the way. */
	CHECK_EQ(haecer_sim_advance(conn, 100 * NS_PER_MS, NULL), 0);
	CHECK(truth_units(conn) - truth >= UNITS_PER_JOULE); /* over 10 W: it did move */
	CHECK_EQ(haecer_energy_read(conn, 0, 0x611, &again_raw, &again_total), 0);
	CHECK_EQ(again_total, total);
	CHECK_EQ(again_raw, raw);
	CHECK_EQ(haecer_msr_read(conn, 2, 0x611, &plain), 0);
	CHECK_EQ(plain, raw);
	CHECK_EQ(haecer_sim_advance(conn, 800 * NS_PER_MS, NULL), 0);
	CHECK_EQ(haecer_msr_batch(conn, &op, 1), 0);
	CHECK_EQ(op.total, total);

	/* A second after the first reading: a new one, rounded again. */
	CHECK_EQ(haecer_sim_advance(conn, 100 * NS_PER_MS, NULL), 0);
	CHECK_EQ(haecer_energy_read(conn, 0, 0x611, &again_raw, &again_total), 0);
	truth = truth_units(conn);
	CHECK(again_total > total);
	CHECK_EQ(again_total % UNITS_PER_JOULE, 0);
	CHECK(again_total <= truth && truth - again_total < UNITS_PER_JOULE);
	CHECK_EQ(again_raw, again_total & RAPL_ENERGY_COUNTER_MASK);
	/* Registers outside the coarse set are read in full. */
	CHECK_EQ(haecer_msr_read(conn, 0, 0x606, &plain), 0);
	CHECK_EQ(plain, 0x000A1003);
	haecer_close(conn);
	return 0;
}

static void test_coarse_grant_rounds_and_rate_limits(void **state)
{
	uint64_t raw, total;

	(void)state;
	assert_int_equal(haecer_sim_set_load(root, -1, 0.5), 0);
	assert_int_equal(run_as(COARSE_UID, COARSE_UID, NULL, 0, coarse_client, NULL), 0);
	/* The full grant sees the exact value, at once. */
	assert_int_equal(haecer_energy_read(root, 0, 0x611, &raw, &total), 0);
	assert_int_equal(total, truth_units(root));
	assert_int_not_equal(total % UNITS_PER_JOULE, 0);
}

static void test_energy_grant_told(void **state)
{
	struct haecer_energy_grant grant;

	(void)state;
	assert_int_equal(haecer_energy_grant(root, 0x611, &grant), 0);
	assert_int_equal(grant.flags & HAECER_ENERGY_GRANT_COARSE, 0);
	assert_int_equal(grant.min_interval_ms, 0);
	assert_true(grant.resolution_uj == 0);
	assert_true(policy_setting_told(&grant));
	assert_int_equal(run_as(STRANGER_UID, STRANGER_UID, NULL, 0, stranger_client, NULL), 0);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
				    "--sim-virtual-time", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coarse_grant_rounds_and_rate_limits),
		cmocka_unit_test(test_energy_grant_told),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &root, tests);
}
