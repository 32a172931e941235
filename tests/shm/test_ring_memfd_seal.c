/*
 * What the kernel enforces on a ring from ring_memfd_create: the read-only descriptor consumers
 * get cannot write the ring by any route (writable mapping, mprotect, write, ftruncate, reopening
 * /proc/self/fd/N read-write as another user), the producer's descriptor cannot resize or reseal
 * it, and both sides refuse to map a ring whose size is not sealed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tests/shm/ring_testing.h"

#define CAPACITY 64u

struct sealed_ring {
	int fd;
	int readonly;
	size_t bytes;
};

static int setup(void **state)
{
	static struct sealed_ring ring;
	struct ring_params params = ring_test_params(CAPACITY, 0);

	if (ring_memfd_create(&params, &ring.fd) || ring_bytes_for(CAPACITY, &ring.bytes))
		return -1;
	ring.readonly = ring_reopen_readonly(ring.fd);
	if (ring.readonly < 0)
		return -1;
	*state = &ring;
	return 0;
}

static int teardown(void **state)
{
	struct sealed_ring *ring = *state;

	close(ring->fd);
	close(ring->readonly);
	return 0;
}

static void test_readonly_fd_cannot_map_writable(void **state)
{
	struct sealed_ring *ring = *state;

	errno = 0;
	assert_true(mmap(NULL, ring->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring->readonly, 0) ==
		    MAP_FAILED);
	assert_int_equal(errno, EACCES);
}

static void test_readonly_mapping_cannot_become_writable(void **state)
{
	struct sealed_ring *ring = *state;
	void *mapping = mmap(NULL, ring->bytes, PROT_READ, MAP_SHARED, ring->readonly, 0);

	assert_true(mapping != MAP_FAILED);
	assert_int_equal(mprotect(mapping, ring->bytes, PROT_READ | PROT_WRITE), -1);
	assert_int_equal(errno, EACCES);
	munmap(mapping, ring->bytes);
}

/* MAP_PRIVATE is allowed, but its writes are copy-on-write and never reach the shared ring. */
static void test_private_mapping_writes_stay_private(void **state)
{
	struct sealed_ring *ring = *state;
	struct ring_consumer consumer;
	uint64_t *mapping = mmap(NULL, ring->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE,
				 ring->readonly, 0);

	assert_true(mapping != MAP_FAILED);
	mapping[0] = 0;
	assert_int_equal(ring_consumer_attach(&consumer, ring->readonly), 0);
	ring_consumer_detach(&consumer);
	munmap(mapping, ring->bytes);
}

static void test_readonly_fd_cannot_write_or_truncate(void **state)
{
	struct sealed_ring *ring = *state;
	char zero[8] = {0};

	assert_int_equal(pwrite(ring->readonly, zero, sizeof(zero), 0), -1);
	assert_int_equal(errno, EBADF);
	assert_int_equal(ftruncate(ring->readonly, 0), -1);
	assert_true(errno == EINVAL || errno == EBADF);
	assert_int_equal(fcntl(ring->readonly, F_ADD_SEALS, F_SEAL_WRITE), -1);
	assert_int_equal(errno, EPERM);
}

static void test_producer_fd_cannot_resize_or_reseal(void **state)
{
	struct sealed_ring *ring = *state;
	struct stat status;

	assert_int_equal(fcntl(ring->fd, F_GET_SEALS),
			 F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	assert_int_equal(ftruncate(ring->fd, (off_t)ring->bytes / 2), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(ftruncate(ring->fd, (off_t)ring->bytes * 2), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fallocate(ring->fd, 0, 0, (off_t)ring->bytes * 2), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fcntl(ring->fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
	assert_int_equal(errno, EPERM);
	assert_int_equal(fstat(ring->fd, &status), 0);
	assert_int_equal(status.st_size, ring->bytes);
}

/* A memfd's inode is mode 0777 unless changed: without ring_memfd_create's fchmod, anyone
 * holding the read-only descriptor could open /proc/self/fd/N read-write. */
static void test_other_user_cannot_reopen_writable(void **state)
{
	struct sealed_ring *ring = *state;
	char path[64];
	int status;
	pid_t child;

	if (geteuid() != 0)
		skip();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", ring->readonly);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		int readonly;

		if (setgid(65534) || setuid(65534))
			_exit(2);
		if (open(path, O_RDWR) >= 0 || errno != EACCES)
			_exit(3);
		if (fchmod(ring->readonly, 0666) == 0 || errno != EPERM)
			_exit(4);
		readonly = ring_reopen_readonly(ring->readonly);
		_exit(readonly >= 0 ? 0 : 5);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* A file whose owner could still shrink it could SIGBUS us once mapped. */
static void test_unsealed_ring_is_refused(void **state)
{
	struct ring_params params = ring_test_params(CAPACITY, 0);
	struct ring_producer producer;
	struct ring_consumer consumer;
	struct ring_info info;
	size_t bytes;
	void *mapping;
	int fd;

	(void)state;
	assert_int_equal(ring_bytes_for(CAPACITY, &bytes), 0);
	fd = memfd_create("unsealed", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
	mapping = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(mapping != MAP_FAILED);
	assert_int_equal(ring_format(mapping, bytes, &params), 0);
	munmap(mapping, bytes);

	assert_int_equal(ring_consumer_attach(&consumer, fd), -EPERM);
	assert_int_equal(ring_producer_attach(&producer, fd), -EPERM);
	/* Reading the header with pread maps nothing, so it needs no seal. */
	assert_int_equal(ring_info_from_fd(fd, &info), 0);
	assert_int_equal(info.capacity, CAPACITY);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_readonly_fd_cannot_map_writable),
		cmocka_unit_test(test_readonly_mapping_cannot_become_writable),
		cmocka_unit_test(test_private_mapping_writes_stay_private),
		cmocka_unit_test(test_readonly_fd_cannot_write_or_truncate),
		cmocka_unit_test(test_producer_fd_cannot_resize_or_reseal),
		cmocka_unit_test(test_other_user_cannot_reopen_writable),
		cmocka_unit_test(test_unsealed_ring_is_refused),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
