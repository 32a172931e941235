/*
 * Attaching to something that is not a valid ring is a clear error, never a crash, one case per
 * test. Each image is a real ring formatted by ring_format, then damaged at the documented
 * header offsets (shm/ring.c, "Ring layout"), resized, and sealed like a real ring, so exactly
 * one thing is wrong. Every entry point must give the same error: consumer and producer attach
 * by descriptor, ring_info_from_fd, and the *_use functions on memory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <sys/mman.h>

#include "tests/shm/ring_testing.h"

/* Header offsets of layout version 1. */
#define OFFSET_MAGIC 0
#define OFFSET_VERSION 8
#define OFFSET_HEADER_BYTES 12
#define OFFSET_SLOT_BYTES 16
#define OFFSET_CAPACITY 20
#define OFFSET_FLAGS 24
#define OFFSET_CLOCK 28
#define OFFSET_COUNTER_COUNT 44
#define OFFSET_COUNTERS 384
#define HEADER_BYTES 4096u
#define SLOT_BYTES 32u
#define CAPACITY 64u

/* Largest image the memory entry points are tried on (a sparse 4 GiB file is not read). */
#define MEMORY_CHECK_LIMIT (64u << 20)

static void put32(int fd, off_t offset, uint32_t value)
{
	assert_int_equal(pwrite(fd, &value, sizeof(value), offset), sizeof(value));
}

/* A formatted ring of CAPACITY, unsealed so a test can damage it. */
static int ring_image(void)
{
	struct ring_params params = ring_test_params(CAPACITY, 0);
	size_t bytes;
	void *mapping;
	int fd = memfd_create("malformed", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_true(fd >= 0);
	assert_int_equal(ring_bytes_for(CAPACITY, &bytes), 0);
	assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
	mapping = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(mapping != MAP_FAILED);
	assert_int_equal(ring_format(mapping, bytes, &params), 0);
	munmap(mapping, bytes);
	return fd;
}

static void resize(int fd, off_t bytes)
{
	assert_int_equal(ftruncate(fd, bytes), 0);
}

static void try_memory_entry_points(int fd, int expected)
{
	struct ring_producer producer;
	struct ring_consumer consumer;
	off_t size = lseek(fd, 0, SEEK_END);
	void *memory = NULL;

	if (size <= 0 || size > (off_t)MEMORY_CHECK_LIMIT)
		return;
	assert_int_equal(posix_memalign(&memory, 4096, (size_t)size), 0);
	assert_int_equal(pread(fd, memory, (size_t)size, 0), size);
	assert_int_equal(ring_consumer_use(&consumer, memory, (size_t)size), expected);
	assert_int_equal(ring_producer_use(&producer, memory, (size_t)size), expected);
	free(memory);
}

/* Seal like ring_memfd_create, then every entry point must refuse with `expected`. */
static void assert_refused(int fd, int expected)
{
	struct ring_producer producer;
	struct ring_consumer consumer;
	struct ring_info info;
	int readonly;

	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	readonly = ring_reopen_readonly(fd);
	assert_true(readonly >= 0);
	assert_int_equal(ring_consumer_attach(&consumer, readonly), expected);
	assert_int_equal(ring_producer_attach(&producer, fd), expected);
	assert_int_equal(ring_info_from_fd(readonly, &info), expected);
	try_memory_entry_points(fd, expected);
	close(readonly);
	close(fd);
}

static void test_intact_image_is_accepted(void **state)
{
	struct ring_consumer consumer;
	int fd = ring_image();

	(void)state;
	assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	assert_int_equal(ring_consumer_attach(&consumer, fd), 0);
	ring_consumer_detach(&consumer);
	close(fd);
}

static void test_wrong_magic(void **state)
{
	int fd = ring_image();

	(void)state;
	put32(fd, OFFSET_MAGIC, 0x464c457f); /* an ELF file, say */
	assert_refused(fd, -EBADMSG);
}

static void test_wrong_version(void **state)
{
	int fd = ring_image();

	(void)state;
	put32(fd, OFFSET_VERSION, RING_LAYOUT_VERSION + 1);
	assert_refused(fd, -EPROTO);
}

static void test_empty_file(void **state)
{
	int fd = ring_image();

	(void)state;
	resize(fd, 0);
	assert_refused(fd, -EBADMSG);
}

static void test_truncated_inside_header(void **state)
{
	int fd = ring_image();

	(void)state;
	resize(fd, 100);
	assert_refused(fd, -EBADMSG);
}

static void test_truncated_inside_slots(void **state)
{
	int fd = ring_image();

	(void)state;
	resize(fd, HEADER_BYTES + CAPACITY * SLOT_BYTES / 2);
	assert_refused(fd, -EMSGSIZE);
}

static void test_header_only(void **state)
{
	int fd = ring_image();

	(void)state;
	resize(fd, HEADER_BYTES);
	assert_refused(fd, -EMSGSIZE);
}

static void test_larger_than_capacity(void **state)
{
	int fd = ring_image();

	(void)state;
	resize(fd, HEADER_BYTES + CAPACITY * SLOT_BYTES + 4096);
	assert_refused(fd, -EMSGSIZE);
}

static void test_larger_than_any_ring(void **state)
{
	int fd = ring_image();

	(void)state;
	resize(fd, (off_t)4 << 30); /* sparse: costs no memory */
	assert_refused(fd, -EMSGSIZE);
}

static void test_record_size_mismatch(void **state)
{
	int fd = ring_image();

	(void)state;
	put32(fd, OFFSET_SLOT_BYTES, 24);
	/* Even with a file size that would fit 24-byte records. */
	resize(fd, HEADER_BYTES + CAPACITY * 24);
	assert_refused(fd, -EBADMSG);
}

static void test_header_size_mismatch(void **state)
{
	int fd = ring_image();

	(void)state;
	put32(fd, OFFSET_HEADER_BYTES, 8192);
	assert_refused(fd, -EBADMSG);
}

/* The file size always matches the bogus capacity, so only the capacity check can refuse. */
static void assert_capacity_refused(uint32_t capacity)
{
	int fd = ring_image();

	put32(fd, OFFSET_CAPACITY, capacity);
	resize(fd, HEADER_BYTES + (off_t)capacity * SLOT_BYTES);
	assert_refused(fd, -EBADMSG);
}

static void test_capacity_zero(void **state)
{
	(void)state;
	assert_capacity_refused(0);
}

static void test_capacity_not_power_of_two(void **state)
{
	(void)state;
	assert_capacity_refused(100);
}

static void test_capacity_too_big(void **state)
{
	(void)state;
	assert_capacity_refused(RING_MAX_CAPACITY * 2);
}

static void test_too_many_counters(void **state)
{
	int fd = ring_image();

	(void)state;
	put32(fd, OFFSET_COUNTER_COUNT, RING_MAX_COUNTERS + 1);
	assert_refused(fd, -EBADMSG);
}

static void test_unterminated_counter_name(void **state)
{
	char name[RING_NAME_MAX];
	int fd = ring_image();

	(void)state;
	memset(name, 'A', sizeof(name));
	assert_int_equal(pwrite(fd, name, sizeof(name), OFFSET_COUNTERS), sizeof(name));
	assert_refused(fd, -EBADMSG);
}

static void test_unknown_clock(void **state)
{
	int fd = ring_image();

	(void)state;
	put32(fd, OFFSET_CLOCK, 9);
	assert_refused(fd, -EBADMSG);
}

static void test_unknown_flags(void **state)
{
	int fd = ring_image();

	(void)state;
	put32(fd, OFFSET_FLAGS, 0x80);
	assert_refused(fd, -EBADMSG);
}

static void test_not_a_file(void **state)
{
	struct ring_consumer consumer;
	struct ring_info info;
	int pipe_fds[2];

	(void)state;
	assert_int_equal(pipe(pipe_fds), 0);
	assert_int_equal(ring_consumer_attach(&consumer, pipe_fds[0]), -EINVAL);
	assert_int_equal(ring_info_from_fd(pipe_fds[0], &info), -EINVAL);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	assert_int_equal(ring_consumer_attach(&consumer, -1), -EBADF);
	assert_int_equal(ring_consumer_use(&consumer, NULL, 8192), -EINVAL);
}

/* Memory handed to the *_use functions must be aligned like the header (mappings are). */
static void test_misaligned_memory(void **state)
{
	struct ring_params params = ring_test_params(CAPACITY, 0);
	struct ring_consumer consumer;
	size_t bytes;
	char *memory = NULL;

	(void)state;
	assert_int_equal(ring_bytes_for(CAPACITY, &bytes), 0);
	assert_int_equal(posix_memalign((void **)&memory, 4096, bytes + 4096), 0);
	assert_int_equal(ring_format(memory, bytes, &params), 0);
	assert_int_equal(ring_consumer_use(&consumer, memory, bytes), 0);
	memmove(memory + 64, memory, bytes);
	assert_int_equal(ring_consumer_use(&consumer, memory + 64, bytes), -EINVAL);
	free(memory);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_intact_image_is_accepted),
		cmocka_unit_test(test_wrong_magic),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_empty_file),
		cmocka_unit_test(test_truncated_inside_header),
		cmocka_unit_test(test_truncated_inside_slots),
		cmocka_unit_test(test_header_only),
		cmocka_unit_test(test_larger_than_capacity),
		cmocka_unit_test(test_larger_than_any_ring),
		cmocka_unit_test(test_record_size_mismatch),
		cmocka_unit_test(test_header_size_mismatch),
		cmocka_unit_test(test_capacity_zero),
		cmocka_unit_test(test_capacity_not_power_of_two),
		cmocka_unit_test(test_capacity_too_big),
		cmocka_unit_test(test_too_many_counters),
		cmocka_unit_test(test_unterminated_counter_name),
		cmocka_unit_test(test_unknown_clock),
		cmocka_unit_test(test_unknown_flags),
		cmocka_unit_test(test_not_a_file),
		cmocka_unit_test(test_misaligned_memory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
