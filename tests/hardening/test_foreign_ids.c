/*
 * A client that uses identifiers it was never given: another connection's batch handles, slot
 * ids and schedule ids, and guessed ones (0, the next ones, UINT32_MAX). Handles and slot ids
 * are per connection, so another's are simply unknown here (-ENOENT) and the owner's keep
 * working; schedule ids are server-wide, so another client's schedule is -EPERM to stop, for a
 * second connection of the same uid too (unless the schedule is persistent: test_schedule), and
 * for another uid always. test_slot_isolation covers raw writes to another's counter registers.
 * A bystander reads throughout; every refusal is a log line.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "tests/hardening/hardening.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"

static struct msrd_server server;
static struct haecer_conn *owner;
static struct bystander bystander;

struct owned {
	uint32_t handle;
	uint32_t slot;
	uint32_t schedule;
	uint32_t persistent;
};

static struct owned owned;

static int take_resources(void)
{
	struct haecer_msr_op read_tsc = { .kind = HAECER_MSR_READ, .address = 0x10 };
	struct haecer_slot slot;
	struct haecer_schedule_spec spec = { .period_ns = 10000000, .major = 1, .minor = 1,
					     .capacity = 64 };
	uint32_t instance;

	CHECK_EQ(haecer_batch_register(owner, &read_tsc, 1, &owned.handle), 0);
	CHECK_EQ(haecer_slot_alloc(owner, 0, HAECER_SLOT_PROGRAMMABLE, -1, &slot), 0);
	owned.slot = slot.id;
	spec.handle = owned.handle;
	CHECK_EQ(haecer_schedule_start(owner, &spec, &owned.schedule, &instance), 0);
	spec.flags = HAECER_SCHEDULE_PERSISTENT;
	spec.minor = 2;
	CHECK_EQ(haecer_schedule_start(owner, &spec, &owned.persistent, &instance), 0);
	return 0;
}

/* Everything the owner took still works for the owner. */
static void owner_still_holds(void)
{
	struct haecer_msr_op op = { .kind = HAECER_MSR_READ };
	uint64_t value;

	assert_int_equal(haecer_batch_run(owner, owned.handle, &op, 1), 0);
	assert_int_equal(op.status, 0);
	assert_int_equal(haecer_slot_read(owner, &owned.slot, 1, &value, false), 0);
}

static int stranger(void *argument)
{
	const uint32_t guesses[] = { 0, 1, 2, 3, 63, 64, 65, UINT32_MAX };
	bool same_uid = argument != NULL;
	struct haecer_msr_op op = { .kind = HAECER_MSR_READ };
	struct haecer_conn *conn;
	uint64_t value;

	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	for (size_t i = 0; i < sizeof(guesses) / sizeof(guesses[0]); i++) {
		uint32_t id = guesses[i];
		CHECK_EQ(haecer_batch_run(conn, id, &op, 1), -ENOENT);
		CHECK_EQ(haecer_batch_release(conn, id), -ENOENT);
		CHECK_EQ(haecer_slot_read(conn, &id, 1, &value, false), -ENOENT);
		CHECK_EQ(haecer_slot_program(conn, id, 0x4300c0), -ENOENT);
		CHECK_EQ(haecer_slot_control(conn, &id, 1, 1), -ENOENT);
		CHECK_EQ(haecer_slot_free(conn, id), -ENOENT);
	}
	/* The owner's own ids, by number. */
	CHECK_EQ(haecer_batch_run(conn, owned.handle, &op, 1), -ENOENT);
	CHECK_EQ(haecer_batch_release(conn, owned.handle), -ENOENT);
	CHECK_EQ(haecer_slot_free(conn, owned.slot), -ENOENT);
	CHECK_EQ(haecer_schedule_stop(conn, owned.schedule), -EPERM);
	CHECK_EQ(haecer_schedule_stop(conn, owned.persistent), same_uid ? 0 : -EPERM);
	CHECK_EQ(haecer_schedule_stop(conn, UINT32_MAX), -ENOENT);
	haecer_close(conn);
	return 0;
}

static void test_another_uid(void **state)
{
	size_t logged = msrd_log_count(&server, "refused: uid 4001 ");

	(void)state;
	assert_int_equal(take_resources(), 0);
	assert_int_equal(run_as(4001, 4001, NULL, 0, stranger, NULL), 0);
	owner_still_holds();
	/* 8 guesses x 6 ops, 3 by the owner's ids, 3 schedule stops. */
	assert_int_equal(msrd_log_count(&server, "refused: uid 4001 "), logged + 8 * 6 + 3 + 3);
	assert_true(bystander_progress(&bystander, 3));
}

/* Another connection of root: a persistent schedule of its uid is its to stop (by design),
 * nothing else of the owner's is. */
static void test_same_uid_other_connection(void **state)
{
	(void)state;
	assert_int_equal(stranger((void *)1), 0);
	owner_still_holds();
	assert_true(msrd_log_contains(&server, "schedule of another client"));
	assert_true(bystander_progress(&bystander, 3));
}

HARDENING_BYSTANDER_FIXTURES(server, bystander)

int main(void)
{
	const char *arguments[] = { "--backend", "sim", NULL };
	const struct CMUnitTest tests[] = {
		BYSTANDER_TEST(test_another_uid),
		BYSTANDER_TEST(test_same_uid_other_connection),
	};

	return MSRD_RUN_GROUP(&server, HARDENING_POLICY, arguments, &owner, tests);
}
