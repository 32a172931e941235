/*
 * The ring directory through msrd: a producer gets a read-write descriptor of a size-sealed
 * memfd, a consumer a read-only one (no writable mapping, no write, no resize); records pushed
 * by the producer are what the consumer reads; RING_LIST shows what a client may monitor; a ring
 * outlives its producer for the grace period, then it is gone (consumers keep their mapping, not
 * the ring or its memory). Policy refusals (create, monitor), per-client ring limits, the
 * ring-memory limit and bad parameters each get their status.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "shm/ring.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"

#define GRACE_MS "1000" /* a monitor arrives well within it (ms after), even on a busy machine */
#define OTHER_UID 4001

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs: []\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [], create_rings: [1-9], monitor_rings: [1-9]}\n"
	"  - {match: {uid: 4001}, allow: [], monitor_rings: [1-5]}\n";

static struct msrd_server server;

static struct haecer_ring_spec spec_for(uint16_t major, uint16_t minor, uint32_t capacity)
{
	struct haecer_ring_spec spec = {
		.major = major,
		.minor = minor,
		.capacity = capacity,
		.clock = RING_CLOCK_MONOTONIC_RAW,
		.counter_count = 1,
	};

	snprintf(spec.counters[0].name, sizeof(spec.counters[0].name), "RAPL_PKG");
	spec.counters[0].id = 7;
	spec.counters[0].kind = RING_COUNTER_ENERGY;
	spec.counters[0].unit_exponent = 16;
	spec.counters[0].package = 0;
	spec.counters[0].cpu = -1;
	return spec;
}

static struct haecer_conn *connect_or_fail(void)
{
	struct haecer_conn *conn = NULL;

	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	return conn;
}

static void push_records(int fd, uint64_t first, unsigned count)
{
	struct ring_producer producer;

	assert_int_equal(ring_producer_attach(&producer, fd), 0);
	for (unsigned i = 0; i < count; i++) {
		struct ring_record record = { .value = first + i, .timestamp = 1000 + i,
					      .counter_id = 7, .unit_exponent = 16 };
		assert_int_equal(ring_push(&producer, &record), 0);
	}
	ring_producer_detach(&producer);
}

static void expect_records(int fd, uint64_t first, unsigned count, bool producer_gone)
{
	struct ring_consumer consumer;
	struct ring_record records[64];
	uint64_t lost = 0;
	ssize_t got;

	assert_int_equal(ring_consumer_attach(&consumer, fd), 0);
	got = producer_gone ? ring_consume_final(&consumer, records, 64, &lost)
			    : ring_consume(&consumer, records, 64, &lost);
	assert_int_equal(got, count);
	assert_int_equal(lost, 0);
	for (unsigned i = 0; i < count; i++) {
		assert_int_equal(records[i].value, first + i);
		assert_int_equal(records[i].counter_id, 7);
	}
	ring_consumer_detach(&consumer);
}

static void test_producer_and_consumer_descriptors(void **state)
{
	struct haecer_ring_spec spec = spec_for(1, 2, 64);
	struct haecer_conn *producer = connect_or_fail();
	struct haecer_conn *consumer = connect_or_fail();
	struct haecer_ring_entry created, opened;
	struct ring_info info;
	struct stat status;
	int producer_fd, consumer_fd;
	void *mapping;

	(void)state;
	assert_int_equal(haecer_ring_create(producer, &spec, &created, &producer_fd), 0);
	assert_true(created.instance >= 1);
	assert_int_equal(created.capacity, 64);
	assert_int_equal(created.producer_pid, getpid());
	assert_int_equal(created.flags & HAECER_RING_PRODUCER_CONNECTED,
			 HAECER_RING_PRODUCER_CONNECTED);
	/* Read-write and sealed: the producer cannot resize it under its consumers. */
	assert_int_equal(fcntl(producer_fd, F_GETFL) & O_ACCMODE, O_RDWR);
	assert_int_equal(fstat(producer_fd, &status), 0);
	assert_int_equal((uint64_t)status.st_size, created.bytes);
	assert_true((fcntl(producer_fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW)) ==
		    (F_SEAL_SHRINK | F_SEAL_GROW));
	assert_int_not_equal(ftruncate(producer_fd, 0), 0);
	assert_int_not_equal(ftruncate(producer_fd, (off_t)created.bytes * 2), 0);
	push_records(producer_fd, 100, 10);

	assert_int_equal(haecer_ring_open(consumer, 1, 2, 0, &opened, &consumer_fd), 0);
	assert_int_equal(opened.instance, created.instance);
	assert_int_equal(opened.consumers, 1);
	/* Read-only: no writable mapping, no write, no resize. */
	assert_int_equal(fcntl(consumer_fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	mapping = mmap(NULL, created.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, consumer_fd, 0);
	assert_true(mapping == MAP_FAILED);
	assert_true(write(consumer_fd, "x", 1) < 0);
	assert_int_not_equal(ftruncate(consumer_fd, 0), 0);
	assert_int_equal(ring_info_from_fd(consumer_fd, &info), 0);
	assert_int_equal(info.major, 1);
	assert_int_equal(info.minor, 2);
	assert_int_equal(info.instance, created.instance);
	assert_int_equal(info.producer_pid, getpid());
	assert_string_equal(info.counters[0].name, "RAPL_PKG");
	expect_records(consumer_fd, 100, 10, false);
	close(producer_fd);
	close(consumer_fd);
	haecer_close(producer);
	haecer_close(consumer);
}

/* A short-lived producer: create, push, disconnect. */
static uint32_t produce_and_leave(uint16_t major, uint16_t minor, uint64_t first)
{
	struct haecer_ring_spec spec = spec_for(major, minor, 32);
	struct haecer_conn *producer = connect_or_fail();
	struct haecer_ring_entry created;
	int fd;

	assert_int_equal(haecer_ring_create(producer, &spec, &created, &fd), 0);
	push_records(fd, first, 5);
	close(fd);
	haecer_close(producer);
	return created.instance;
}

static bool listed(struct haecer_conn *conn, uint16_t major, uint16_t minor, uint32_t instance)
{
	struct haecer_ring_entry entries[64];
	int count = haecer_ring_list(conn, entries, 64);

	assert_true(count >= 0);
	for (int i = 0; i < count && i < 64; i++) {
		if (entries[i].major == major && entries[i].minor == minor &&
		    entries[i].instance == instance)
			return true;
	}
	return false;
}

/* A consumer keeps its mapping, not the ring (issue 14, item 3: a monitor of another uid that
 * opened every ring and stayed connected held its creator's quota for ever). Within the grace
 * period a late monitor still gets the records; past it the ring is gone even though the early
 * consumer is still connected, its descriptor still maps a ring of the same size (no SIGBUS),
 * and the memory of the records is given back (item 4): only the header page is left. */
static void test_ring_outlives_producer(void **state)
{
	struct haecer_conn *consumer = connect_or_fail();
	struct haecer_conn *late = connect_or_fail();
	struct haecer_ring_spec spec = spec_for(3, 1, 4096);
	struct haecer_ring_entry entry;
	struct haecer_conn *producer = connect_or_fail();
	struct ring_consumer reader;
	struct ring_record records[8];
	struct stat before, after;
	uint64_t lost = 0;
	int producer_fd, fd, late_fd;

	(void)state;
	assert_int_equal(haecer_ring_create(producer, &spec, &entry, &producer_fd), 0);
	push_records(producer_fd, 500, 8);
	assert_int_equal(haecer_ring_open(consumer, 3, 1, entry.instance, NULL, &fd), 0);
	close(producer_fd);
	haecer_close(producer);
	assert_int_equal(haecer_ring_open(late, 3, 1, 0, NULL, &late_fd), 0);
	expect_records(late_fd, 500, 8, true);
	close(late_fd);
	assert_int_equal(fstat(fd, &before), 0);
	/* Its records' memory is there while the ring is listed... */
	assert_true(before.st_blocks * 512 > 4096);
	/* Wait for the grace period to run out (RING_LIST takes no reference), not a fixed time. */
	for (int i = 0; i < 600 && listed(late, 3, 1, entry.instance); i++)
		usleep(20000);
	assert_int_equal(haecer_ring_open(late, 3, 1, entry.instance, NULL, &late_fd), -ENOENT);
	/* ...and given back once it is not, under the consumer's still open descriptor. */
	assert_int_equal(fstat(fd, &after), 0);
	assert_int_equal(after.st_size, before.st_size);
	assert_true(after.st_blocks * 512 <= 4096);
	assert_int_equal(ring_consumer_attach(&reader, fd), 0);
	assert_int_equal(ring_consume_final(&reader, records, 8, &lost), 0);
	assert_int_equal(lost, 8);
	ring_consumer_detach(&reader);
	close(fd);
	haecer_close(consumer);
	haecer_close(late);
}

static void test_grace_period(void **state)
{
	struct haecer_conn *monitor = connect_or_fail();
	uint32_t instance;
	int fd = -1;

	(void)state;
	/* Nobody holds it, but a monitor arriving just after the producer left still drains it. */
	instance = produce_and_leave(4, 9, 900);
	assert_int_equal(haecer_ring_open(monitor, 4, 9, instance, NULL, &fd), 0);
	expect_records(fd, 900, 5, true);
	close(fd);
	haecer_close(monitor);
	/* Once its last consumer went too, the grace period runs out and the ring is gone
	 * (RING_LIST takes no reference, so watching does not keep it alive). */
	monitor = connect_or_fail();
	for (int i = 0; i < 3000 && listed(monitor, 4, 9, instance); i++)
		usleep(20000);
	assert_false(listed(monitor, 4, 9, instance));
	assert_int_equal(haecer_ring_open(monitor, 4, 9, instance, NULL, &fd), -ENOENT);
	haecer_close(monitor);
}

static void test_instances_and_list(void **state)
{
	struct haecer_ring_spec spec = spec_for(5, 5, 16);
	struct haecer_conn *producer = connect_or_fail();
	struct haecer_conn *monitor;
	struct haecer_ring_entry first, second, opened, list[64];
	int fd1, fd2, fd3;
	int count;
	bool seen_first = false, seen_second = false;

	(void)state;
	assert_int_equal(haecer_ring_create(producer, &spec, &first, &fd1), 0);
	assert_int_equal(haecer_ring_create(producer, &spec, &second, &fd2), 0);
	assert_true(second.instance > first.instance);
	/* Opens hold references: from a second connection, so the first stays under its limit. */
	monitor = connect_or_fail();
	assert_int_equal(haecer_ring_open(monitor, 5, 5, 0, &opened, &fd3), 0);
	assert_int_equal(opened.instance, second.instance);
	close(fd3);
	assert_int_equal(haecer_ring_open(monitor, 5, 5, first.instance, &opened, &fd3), 0);
	assert_int_equal(opened.instance, first.instance);
	close(fd3);
	assert_int_equal(haecer_ring_open(monitor, 5, 6, 0, &opened, &fd3), -ENOENT);
	haecer_close(monitor);
	count = haecer_ring_list(producer, list, 64);
	assert_true(count >= 2 && count <= 64);
	for (int i = 0; i < count; i++) {
		if (i > 0)
			assert_true(list[i - 1].major < list[i].major ||
				    (list[i - 1].major == list[i].major &&
				     (list[i - 1].minor < list[i].minor ||
				      (list[i - 1].minor == list[i].minor &&
				       list[i - 1].instance < list[i].instance))));
		seen_first |= list[i].instance == first.instance;
		seen_second |= list[i].instance == second.instance;
	}
	assert_true(seen_first && seen_second);
	close(fd1);
	close(fd2);
	haecer_close(producer);
}

static int other_user(void *argument)
{
	struct haecer_ring_spec spec = spec_for(2, 1, 16);
	struct haecer_ring_entry list[64];
	struct haecer_conn *conn;
	int fd;
	int count;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_ring_create(conn, &spec, NULL, &fd), -EPERM);
	CHECK_EQ(fd, -1);
	/* May monitor majors 1-5 only, and lists only those. */
	CHECK_EQ(haecer_ring_open(conn, 7, 1, 0, NULL, &fd), -EPERM);
	count = haecer_ring_list(conn, list, 64);
	CHECK(count >= 1);
	for (int i = 0; i < count && i < 64; i++)
		CHECK(list[i].major >= 1 && list[i].major <= 5);
	haecer_close(conn);
	return 0;
}

static void test_policy_refusals(void **state)
{
	struct haecer_ring_spec spec = spec_for(7, 1, 16);
	struct haecer_conn *root = connect_or_fail();
	int fd;

	(void)state;
	assert_int_equal(haecer_ring_create(root, &spec, NULL, &fd), 0);
	close(fd);
	spec.major = 10;
	assert_int_equal(haecer_ring_create(root, &spec, NULL, &fd), -EPERM);
	assert_int_equal(run_as(OTHER_UID, OTHER_UID, NULL, 0, other_user, NULL), 0);
	haecer_close(root);
	assert_true(msrd_log_contains(&server, "op RING_CREATE ring 10.1: major not granted"));
	assert_true(msrd_log_contains(&server, "refused: uid 4001 pid "));
}

static void test_limits_and_parameters(void **state)
{
	struct haecer_ring_spec spec = spec_for(6, 1, 16);
	struct haecer_conn *conn = connect_or_fail();
	int fds[4];
	int fd;

	(void)state;
	spec.capacity = 100; /* not a power of two */
	assert_int_equal(haecer_ring_create(conn, &spec, NULL, &fd), -EINVAL);
	spec.capacity = 1u << 20; /* 32 MiB of slots: over --ring-memory-mib 8 */
	assert_int_equal(haecer_ring_create(conn, &spec, NULL, &fd), -ENOSPC);
	spec.capacity = 16;
	for (int i = 0; i < 4; i++)
		assert_int_equal(haecer_ring_create(conn, &spec, NULL, &fds[i]), 0);
	/* --max-rings-per-client 4 */
	assert_int_equal(haecer_ring_create(conn, &spec, NULL, &fd), -ENOSPC);
	assert_int_equal(haecer_ring_open(conn, 6, 1, 0, NULL, &fd), -ENOSPC);
	for (int i = 0; i < 4; i++)
		close(fds[i]);
	haecer_close(conn);
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--ring-grace-ms", GRACE_MS,
				    "--max-rings-per-client", "4", "--ring-memory-mib", "8", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_producer_and_consumer_descriptors),
		cmocka_unit_test(test_ring_outlives_producer),
		cmocka_unit_test(test_grace_period),
		cmocka_unit_test(test_instances_and_list),
		cmocka_unit_test(test_policy_refusals),
		cmocka_unit_test(test_limits_and_parameters),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
