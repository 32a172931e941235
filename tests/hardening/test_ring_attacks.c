/*
 * A consumer (another uid, allowed to monitor the major) gets a ring's descriptor from msrd
 * (RING_OPEN) and tries every way to write it, grow it or shrink it: a shared writable mapping,
 * mprotect of a read-only one, write and pwrite, ftruncate larger and smaller, fallocate (also
 * punching a hole), adding seals, and reopening /proc/self/fd/N read-write or for truncation.
 * Every one fails. A private writable mapping is allowed (copy on write), and what it writes
 * stays private: the producer and another consumer see the ring unchanged. The producer's own
 * read-write descriptor from RING_CREATE cannot resize the ring or add seals either.
 * test_ring_memfd_seal shows the same of ring_memfd_create alone; this is the descriptors msrd
 * actually hands out. A bystander reads through msrd throughout.
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

#include "shm/ring.h"
#include "tests/hardening/hardening.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"

#define RECORDS 100u

static struct msrd_server server;
static struct haecer_conn *conn;
static struct bystander bystander;
static off_t ring_size;

/* The consumer's attempts; CHECKs report in the child. */
static int consumer_attacks(void *argument)
{
	struct haecer_conn *mine;
	struct stat status;
	char path[64];
	void *mapping;
	int fd;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &mine), 0);
	CHECK_EQ(haecer_ring_open(mine, 3, 1, 0, NULL, &fd), 0);
	CHECK(mmap(NULL, (size_t)ring_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) ==
	      MAP_FAILED);
	CHECK_EQ(errno, EACCES);
	mapping = mmap(NULL, (size_t)ring_size, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(mapping != MAP_FAILED);
	CHECK_EQ(mprotect(mapping, 4096, PROT_READ | PROT_WRITE), -1);
	CHECK_EQ(errno, EACCES);
	munmap(mapping, (size_t)ring_size);
	CHECK_EQ(write(fd, "x", 1), -1);
	CHECK_EQ(errno, EBADF);
	CHECK_EQ(pwrite(fd, "x", 1, 0), -1);
	CHECK_EQ(errno, EBADF);
	CHECK_EQ(ftruncate(fd, ring_size * 2), -1);
	CHECK(errno == EINVAL || errno == EBADF);
	CHECK_EQ(ftruncate(fd, 0), -1);
	CHECK_EQ(fallocate(fd, 0, 0, ring_size * 2), -1);
	CHECK_EQ(errno, EBADF);
	CHECK_EQ(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096), -1);
	CHECK_EQ(errno, EBADF);
	CHECK_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	CHECK_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), -1);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	CHECK_EQ(open(path, O_RDWR | O_CLOEXEC), -1);
	CHECK_EQ(errno, EACCES);
	CHECK_EQ(open(path, O_WRONLY | O_TRUNC | O_CLOEXEC), -1);
	CHECK_EQ(errno, EACCES);
	/* Copy on write: allowed, and private to this process. */
	mapping = mmap(NULL, (size_t)ring_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	CHECK(mapping != MAP_FAILED);
	memset(mapping, 0xFF, (size_t)ring_size);
	munmap(mapping, (size_t)ring_size);
	CHECK_EQ(fstat(fd, &status), 0);
	CHECK_EQ(status.st_size, ring_size);
	close(fd);
	haecer_close(mine);
	return 0;
}

/* Every record the producer pushed, intact, through a fresh read-only descriptor. */
static void ring_intact(void)
{
	struct ring_record records[RECORDS + 1];
	struct ring_consumer consumer;
	uint64_t lost = 0;
	int fd;

	assert_int_equal(haecer_ring_open(conn, 3, 1, 0, NULL, &fd), 0);
	assert_int_equal(ring_consumer_attach(&consumer, fd), 0);
	close(fd);
	assert_int_equal(ring_consume(&consumer, records, RECORDS + 1, &lost), RECORDS);
	assert_int_equal(lost, 0);
	for (uint32_t i = 0; i < RECORDS; i++) {
		assert_int_equal(records[i].value, 1000 + i);
		assert_int_equal(records[i].counter_id, 0);
	}
	ring_consumer_detach(&consumer);
}

static void test_consumer_cannot_change_the_ring(void **state)
{
	struct haecer_ring_spec spec = { .major = 3, .minor = 1, .capacity = 256,
					 .clock = RING_CLOCK_MONOTONIC_RAW, .counter_count = 1,
					 .counters = { { .name = "TEST", .kind = RING_COUNTER_SOFTWARE,
							 .package = -1, .cpu = -1 } } };
	struct ring_producer producer;
	struct stat status;
	int fd;

	(void)state;
	assert_int_equal(haecer_ring_create(conn, &spec, NULL, &fd), 0);
	assert_int_equal(fstat(fd, &status), 0);
	ring_size = status.st_size;
	assert_int_equal(ring_producer_attach(&producer, fd), 0);
	for (uint32_t i = 0; i < RECORDS; i++)
		assert_int_equal(ring_push(&producer, &(struct ring_record){ .value = 1000 + i }), 0);

	assert_int_equal(run_as(4001, 4001, NULL, 0, consumer_attacks, NULL), 0);
	ring_intact();

	/* The producer's descriptor is read-write, but the size is sealed, and so are the seals. */
	assert_int_equal(ftruncate(fd, ring_size * 2), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(fd, 4096), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fallocate(fd, 0, ring_size, 4096), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fstat(fd, &status), 0);
	assert_int_equal(status.st_size, ring_size);
	ring_producer_detach(&producer);
	close(fd);
	ring_intact();
	assert_true(bystander_progress(&bystander, 3));
}

HARDENING_BYSTANDER_FIXTURES(server, bystander)

int main(void)
{
	const char *arguments[] = { "--backend", "sim", NULL };
	const struct CMUnitTest tests[] = {
		BYSTANDER_TEST(test_consumer_cannot_change_the_ring),
	};

	return MSRD_RUN_GROUP(&server, HARDENING_POLICY, arguments, &conn, tests);
}
