/*
 * Scheduled batches: msrd runs a registered batch every period and pushes each result set into a
 * ring it produces. Checked without timing assumptions: every set has one record per op with one
 * timestamp; its flags carry the period number, which is exactly floor((timestamp - first
 * timestamp) / period), so sets never come early, never twice in a period, and a gap in the
 * numbers is a period msrd skipped (counted, not bunched); the TSC and the energy total grow from
 * set to set; the ring's counters are named after the policy's MSRs, energy with its unit.
 * A schedule stops when its owner disconnects (no record after the log says so), unless it is
 * persistent, which needs the policy's persistent_schedules; a persistent one is stopped by a
 * client of the same uid, not by another. A policy reload that no longer allows a schedule
 * stops it. Bad requests are refused with their errors.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "shm/ring.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"

#define PERIOD_NS 5000000ull /* 5 ms */
#define MAJOR 10
#define OTHER_UID 4301
#define WAIT_MS 30000

#define POLICY_HEAD                                                                                 \
	"version: 1\n"                                                                              \
	"default: deny\n"                                                                           \
	"msrs:\n"                                                                                   \
	"  - {name: IA32_TIME_STAMP_COUNTER, address: 0x10, read: true, set: base}\n"              \
	"  - {name: MSR_PKG_ENERGY_STATUS, address: 0x611, read: true, set: base}\n"               \
	"  - {name: IA32_PERFEVTSEL, range: [0x186, 0x18D], read: true, write_mask: 0xffc7ffff, set: base}\n" \
	"rules:\n"                                                                                  \
	"  - {match: {uid: 4301}, allow: [base], create_rings: [10-20], monitor_rings: [10-20]}\n" \
	"  - match: {uid: 0}\n"                                                                     \
	"    allow: [base]\n"                                                                       \
	"    create_rings: [10-20]\n"                                                               \
	"    monitor_rings: [10-20]\n"

static const char policy[] = POLICY_HEAD "    capabilities: [persistent_schedules]\n";
static const char policy_without_persistence[] = POLICY_HEAD;

static struct msrd_server server;
static struct haecer_conn *conn;

static const struct haecer_msr_op batch[2] = {
	{ .kind = HAECER_MSR_READ, .cpu = 1, .address = MSR_IA32_TSC },
	{ .kind = HAECER_MSR_ENERGY_READ, .cpu = 0, .address = MSR_PKG_ENERGY_STATUS },
};

static int start(struct haecer_conn *owner, uint16_t minor, uint32_t flags, uint32_t *id,
		 uint32_t *instance)
{
	struct haecer_schedule_spec spec = { .period_ns = PERIOD_NS, .major = MAJOR, .minor = minor,
					     .capacity = 4096, .flags = flags };
	int status = haecer_batch_register(owner, batch, 2, &spec.handle);

	if (status < 0)
		return status;
	return haecer_schedule_start(owner, &spec, id, instance);
}

static void attach(uint16_t minor, uint32_t instance, struct ring_consumer *consumer)
{
	int fd;

	assert_int_equal(haecer_ring_open(conn, MAJOR, minor, instance, NULL, &fd), 0);
	assert_int_equal(ring_consumer_attach(consumer, fd), 0);
	close(fd);
}

static uint64_t pushed(const struct ring_consumer *consumer)
{
	struct ring_info info;

	ring_consumer_info(consumer, &info);
	return info.pushed;
}

/* Wait (without a deadline that a slow machine could miss) until at least `records` exist. */
static void wait_for_records(const struct ring_consumer *consumer, uint64_t records)
{
	for (int i = 0; i < WAIT_MS / 5 && pushed(consumer) < records; i++)
		usleep(5000);
	assert_true(pushed(consumer) >= records);
}

/* The period number of a set, from its 16-bit flags and the previous number. */
static uint64_t unwrap(uint64_t previous, uint16_t flags)
{
	uint64_t number = (previous & ~0xffffull) | flags;

	return number < previous ? number + 0x10000 : number;
}

static void test_one_set_per_period(void **state)
{
	static struct ring_record records[4096];
	struct ring_consumer consumer;
	struct ring_info info;
	uint32_t id, instance;
	uint64_t origin = 0, number = 0, missed = 0, lost = 0;
	ssize_t got;

	(void)state;
	assert_int_equal(start(conn, 1, 0, &id, &instance), 0);
	attach(1, instance, &consumer);
	ring_consumer_info(&consumer, &info);
	assert_int_equal(info.counter_count, 2);
	assert_string_equal(info.counters[0].name, "IA32_TIME_STAMP_COUNTER@1");
	assert_int_equal(info.counters[0].kind, RING_COUNTER_MSR);
	assert_string_equal(info.counters[1].name, "MSR_PKG_ENERGY_STATUS@0");
	assert_int_equal(info.counters[1].kind, RING_COUNTER_ENERGY);
	assert_int_equal(info.counters[1].unit_exponent, 16);
	assert_int_equal(info.clock, RING_CLOCK_MONOTONIC_RAW);
	wait_for_records(&consumer, 2 * 20);
	got = ring_consume(&consumer, records, 4096, &lost);
	assert_int_equal(lost, 0);
	assert_true(got >= 40);
	/* The last set may be caught half pushed: only whole sets count. */
	got -= got % 2;
	for (ssize_t i = 0; i < got; i += 2) {
		const struct ring_record *tsc = &records[i], *energy = &records[i + 1];
		assert_int_equal(tsc->counter_id, 0);
		assert_int_equal(energy->counter_id, 1);
		assert_int_equal(energy->unit_exponent, 16);
		assert_int_equal(tsc->timestamp, energy->timestamp);
		assert_int_equal(tsc->flags, energy->flags);
		if (i == 0) {
			assert_int_equal(tsc->flags, 0);
			origin = tsc->timestamp;
			continue;
		}
		uint64_t next = unwrap(number, tsc->flags);
		assert_true(next > number);
		missed += next - number - 1;
		number = next;
		assert_int_equal((tsc->timestamp - origin) / PERIOD_NS, number);
		assert_true(tsc->value > records[i - 2].value);
		assert_true(energy->value >= records[i - 1].value);
	}
	assert_int_equal((uint64_t)got / 2 + missed, number + 1);
	fprintf(stderr, "%zd sets over %llu periods, %llu skipped\n", got / 2,
		(unsigned long long)number + 1, (unsigned long long)missed);
	assert_int_equal(haecer_schedule_stop(conn, id), 0);
	assert_int_equal(haecer_schedule_stop(conn, id), -ENOENT);
	ring_consumer_detach(&consumer);
}

static void test_stops_with_its_owner(void **state)
{
	struct haecer_conn *owner;
	struct ring_consumer consumer;
	uint32_t id, instance;
	uint64_t count;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &owner), 0);
	assert_int_equal(start(owner, 2, 0, &id, &instance), 0);
	attach(2, instance, &consumer);
	wait_for_records(&consumer, 4);
	haecer_close(owner);
	assert_true(msrd_wait_log(&server, "stopped: its owner disconnected", WAIT_MS));
	count = pushed(&consumer);
	usleep(20 * PERIOD_NS / 1000);
	assert_int_equal(pushed(&consumer), count);
	/* Its ring stays for monitors, as a ring whose producer left. */
	struct haecer_ring_entry entry;
	int fd;
	assert_int_equal(haecer_ring_open(conn, MAJOR, 2, instance, &entry, &fd), 0);
	assert_int_equal(entry.flags & HAECER_RING_PRODUCER_CONNECTED, 0);
	close(fd);
	ring_consumer_detach(&consumer);
}

static int other_uid(void *argument)
{
	uint32_t persistent_id = *(uint32_t *)argument;
	struct haecer_conn *other;
	uint32_t id, instance;

	CHECK_EQ(haecer_connect(server.socket_path, &other), 0);
	CHECK_EQ(start(other, 4, HAECER_SCHEDULE_PERSISTENT, &id, &instance), -EPERM);
	CHECK_EQ(haecer_schedule_stop(other, persistent_id), -EPERM);
	CHECK_EQ(start(other, 4, 0, &id, &instance), 0);
	haecer_close(other);
	return 0;
}

static void test_persistent_schedule(void **state)
{
	struct haecer_conn *owner, *again;
	struct ring_consumer consumer;
	uint32_t id, instance;
	uint64_t count;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &owner), 0);
	assert_int_equal(start(owner, 3, HAECER_SCHEDULE_PERSISTENT, &id, &instance), 0);
	attach(3, instance, &consumer);
	haecer_close(owner);
	assert_true(msrd_wait_log(&server, "is persistent: it runs on without its owner", WAIT_MS));
	count = pushed(&consumer);
	wait_for_records(&consumer, count + 4);
	assert_int_equal(run_as(OTHER_UID, OTHER_UID, NULL, 0, other_uid, &id), 0);
	assert_int_equal(haecer_connect(server.socket_path, &again), 0);
	assert_int_equal(haecer_schedule_stop(again, id), 0);
	haecer_close(again);
	count = pushed(&consumer);
	usleep(20 * PERIOD_NS / 1000);
	assert_int_equal(pushed(&consumer), count);
	ring_consumer_detach(&consumer);
}

static void test_reload_stops_what_is_no_longer_allowed(void **state)
{
	uint32_t persistent, plain, instance;

	(void)state;
	assert_int_equal(start(conn, 5, HAECER_SCHEDULE_PERSISTENT, &persistent, &instance), 0);
	assert_int_equal(start(conn, 6, 0, &plain, &instance), 0);
	assert_int_equal(msrd_install_policy(&server, policy_without_persistence, WAIT_MS), 0);
	assert_int_equal(haecer_schedule_stop(conn, persistent), -ENOENT);
	assert_int_equal(haecer_schedule_stop(conn, plain), 0);
	/* Counted only now: msrd logs the stop just after "policy reloaded", and a request it has
	 * answered since means the whole reload is done (and logged). */
	assert_int_equal(msrd_log_count(&server, "the reloaded policy does not allow it"), 1);
	assert_int_equal(msrd_install_policy(&server, policy, WAIT_MS), 0);
}

static void test_refusals(void **state)
{
	struct haecer_msr_op write = { .kind = HAECER_MSR_WRITE, .cpu = 0,
				       .address = MSR_IA32_PERFEVTSEL0, .value = 0 };
	struct haecer_schedule_spec spec = { .period_ns = PERIOD_NS, .major = MAJOR, .minor = 9,
					     .capacity = 64 };
	uint32_t id;

	(void)state;
	assert_int_equal(haecer_batch_register(conn, batch, 2, &spec.handle), 0);
	spec.period_ns = 999999;
	assert_int_equal(haecer_schedule_start(conn, &spec, &id, NULL), -EINVAL);
	spec.period_ns = PERIOD_NS;
	spec.capacity = 100;
	assert_int_equal(haecer_schedule_start(conn, &spec, &id, NULL), -EINVAL);
	spec.capacity = 64;
	spec.major = 30;
	assert_int_equal(haecer_schedule_start(conn, &spec, &id, NULL), -EPERM);
	spec.major = MAJOR;
	spec.flags = 0x8;
	assert_int_equal(haecer_schedule_start(conn, &spec, &id, NULL), -EINVAL);
	spec.flags = 0;
	spec.handle = 999;
	assert_int_equal(haecer_schedule_start(conn, &spec, &id, NULL), -ENOENT);
	assert_int_equal(haecer_batch_register(conn, &write, 1, &spec.handle), 0);
	assert_int_equal(haecer_schedule_start(conn, &spec, &id, NULL), -EINVAL);
	assert_int_equal(haecer_schedule_stop(conn, 12345), -ENOENT);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_set_per_period),
		cmocka_unit_test(test_stops_with_its_owner),
		cmocka_unit_test(test_persistent_schedule),
		cmocka_unit_test(test_reload_stops_what_is_no_longer_allowed),
		cmocka_unit_test(test_refusals),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, &conn, tests);
}
