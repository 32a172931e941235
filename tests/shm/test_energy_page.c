/*
 * The energy page's seqlock and seals (shm/energy_page.h), without msrd:
 *  - a writer thread publishing at full speed, readers in other threads: every reading they
 *    take is one write's values (each write derives every field of every entry from one
 *    counter, so a mix of two writes is seen at once), and readers do see the writes move;
 *  - the descriptor a reader gets cannot be mapped writable or written, and the page cannot be
 *    resized;
 *  - a page that is not one, or whose size does not match, is refused before it is touched;
 *  - a well-formed page in a memfd that is not sealed against shrinking, growing and further
 *    writes is refused (-EPERM) before its size is read, a pipe or socket too (-EINVAL); sealed
 *    so, the same bytes attach;
 *  - the state only goes LIVE -> STALE -> DEAD, and a write section keeps it;
 *  - the lean read (energy_page_read_total, a client's counter read) is as whole as the copy.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "shm/energy_page.h"
#include "harness/msrd_harness.h"

#define ENTRIES 4u
#define READERS 2u

static struct energy_page_writer writer;
static int page_fd = -1;
static atomic_bool writing_done;

static void fill_reading(uint64_t k, uint32_t index, struct energy_page_reading *reading)
{
	*reading = (struct energy_page_reading){
		.total = k * 7 + index,
		.raw = (k * 7 + index) & 0xffffffffu,
		.sample_ns = k * 11 + index,
		.sample_tsc = k * 13 + index,
		.update_ns = k * 17 + index,
		.update_tsc = k * 19 + index,
	};
}

static void make_page(void)
{
	struct energy_page_slot slots[ENTRIES];
	struct energy_page_params params = {
		.address = 0x611, .tsc_hz = 1000000000ull, .entry_count = ENTRIES,
	};

	for (uint32_t i = 0; i < ENTRIES; i++)
		slots[i] = (struct energy_page_slot){ .cpu = i * 2, .package = i, .domain = 0,
						      .exponent = 16 };
	assert_int_equal(energy_page_create(&params, slots, &writer, &page_fd), 0);
}

static void *write_fast(void *argument)
{
	uint64_t writes = *(uint64_t *)argument;

	for (uint64_t k = 0; k <= writes; k++) {
		energy_page_begin(&writer);
		for (uint32_t i = 0; i < ENTRIES; i++) {
			struct energy_page_reading reading;
			fill_reading(k, i, &reading);
			energy_page_put(&writer, i, &reading);
		}
		energy_page_end(&writer);
	}
	atomic_store(&writing_done, true);
	return NULL;
}

struct reader_result {
	uint64_t readings;
	uint64_t torn;
	uint64_t distinct;
	uint64_t retried;
};

static void *read_fast(void *argument)
{
	struct reader_result *result = argument;
	struct energy_page_reader reader;
	uint64_t previous = UINT64_MAX;
	int fd = energy_page_reopen_readonly(page_fd);

	if (fd < 0 || energy_page_attach(&reader, fd) < 0) {
		result->torn = UINT64_MAX;
		return NULL;
	}
	close(fd);
	/* One more pass once the writer is done: a reader that the scheduler (or valgrind) kept
	 * off the CPU for the whole run still reads the final page, and must find it whole. */
	for (bool last = false; !last;) {
		last = atomic_load(&writing_done);
		/* Valgrind runs one thread at a time, and its lock is not fair: a reader spinning
		 * here kept the writer off for 45 s of a 46 s run (3 writes seen). Giving way once
		 * a pass still lets every pass of the readers fall between any two writes. */
		if (harness_valgrind())
			sched_yield();
		for (uint32_t i = 0; i < ENTRIES; i++) {
			struct energy_page_reading got, expected;
			if (energy_page_read(&reader, i, &got) < 0) {
				result->retried++;
				continue;
			}
			uint64_t k = (got.total - i) / 7;
			fill_reading(k, i, &expected);
			result->readings++;
			if (got.total != expected.total || got.raw != expected.raw ||
			    got.sample_ns != expected.sample_ns ||
			    got.sample_tsc != expected.sample_tsc ||
			    got.update_ns != expected.update_ns ||
			    got.update_tsc != expected.update_tsc || (got.sequence & 1) != 0)
				result->torn++;
			if (i == 0 && k != previous) {
				result->distinct++;
				previous = k;
			}
			/* The lean read a client's counter read makes: its total and sample time
			 * are one write's too, and the state is the page's. */
			struct energy_page_total lean;
			if (energy_page_read_total(&reader, i, &lean) < 0) {
				result->retried++;
				continue;
			}
			k = (lean.total - i) / 7;
			fill_reading(k, i, &expected);
			result->readings++;
			if (lean.total != expected.total || lean.sample_ns != expected.sample_ns ||
			    lean.state != ENERGY_PAGE_LIVE)
				result->torn++;
		}
	}
	energy_page_detach(&reader);
	return NULL;
}

static void test_no_torn_reads_under_a_full_speed_writer(void **state)
{
	uint64_t writes = harness_small_scale() ? 200000 : 5000000;
	struct reader_result results[READERS];
	pthread_t readers[READERS], writer_thread;

	(void)state;
	make_page();
	/* Every field of every entry as write 0 leaves it before any reader starts. */
	write_fast(&(uint64_t){ 0 });
	memset(results, 0, sizeof(results));
	atomic_store(&writing_done, false);
	for (unsigned i = 0; i < READERS; i++)
		assert_int_equal(pthread_create(&readers[i], NULL, read_fast, &results[i]), 0);
	assert_int_equal(pthread_create(&writer_thread, NULL, write_fast, &writes), 0);
	pthread_join(writer_thread, NULL);
	for (unsigned i = 0; i < READERS; i++) {
		pthread_join(readers[i], NULL);
		print_message("reader %u: %llu readings, %llu distinct writes seen, %llu torn, "
			      "%llu gave up\n", i, (unsigned long long)results[i].readings,
			      (unsigned long long)results[i].distinct,
			      (unsigned long long)results[i].torn,
			      (unsigned long long)results[i].retried);
		assert_int_equal(results[i].torn, 0);
		assert_true(results[i].readings > 0);
	}
	energy_page_writer_close(&writer);
	close(page_fd);
}

static void test_reader_descriptor_is_read_only_and_sealed(void **state)
{
	struct energy_page_reader reader;
	int fd;

	(void)state;
	make_page();
	fd = energy_page_reopen_readonly(page_fd);
	assert_true(fd >= 0);
	assert_int_equal(energy_page_attach(&reader, fd), 0);
	assert_int_equal(reader.info.entry_count, ENTRIES);
	assert_int_equal(reader.info.address, 0x611);
	assert_ptr_equal(mmap(NULL, reader.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
			 MAP_FAILED);
	assert_int_equal(write(fd, "x", 1), -1);
	/* Even the read-write descriptor can no longer be mapped writable, grown or shrunk. */
	assert_ptr_equal(mmap(NULL, reader.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, page_fd, 0),
			 MAP_FAILED);
	assert_int_equal(ftruncate(page_fd, 0), -1);
	assert_int_equal(ftruncate(page_fd, (off_t)reader.bytes * 2), -1);
	/* The one existing writable mapping still works. */
	energy_page_begin(&writer);
	energy_page_put(&writer, 1, &(struct energy_page_reading){ .total = 42 });
	energy_page_end(&writer);
	struct energy_page_reading reading;
	assert_int_equal(energy_page_read(&reader, 1, &reading), 0);
	assert_int_equal(reading.total, 42);
	assert_int_equal(energy_page_find(&reader, 6, 3), 3);
	assert_int_equal(energy_page_find(&reader, 0, 9), -ENOENT);
	/* States only go forward, and the lean read sees them (they share the sequence word) with
	 * the values unchanged; a write after a state change keeps the state. */
	struct energy_page_total lean;
	assert_int_equal(energy_page_state(&reader), ENERGY_PAGE_LIVE);
	energy_page_set_state(&writer, ENERGY_PAGE_STALE);
	assert_int_equal(energy_page_read_total(&reader, 1, &lean), 0);
	assert_int_equal(lean.state, ENERGY_PAGE_STALE);
	assert_int_equal(lean.total, 42);
	energy_page_begin(&writer);
	energy_page_put(&writer, 1, &(struct energy_page_reading){ .total = 43 });
	energy_page_end(&writer);
	assert_int_equal(energy_page_read_total(&reader, 1, &lean), 0);
	assert_int_equal(lean.state, ENERGY_PAGE_STALE);
	assert_int_equal(lean.total, 43);
	energy_page_set_state(&writer, ENERGY_PAGE_DEAD);
	energy_page_set_state(&writer, ENERGY_PAGE_STALE);
	assert_int_equal(energy_page_state(&reader), ENERGY_PAGE_DEAD);
	assert_int_equal(energy_page_read_total(&reader, 1, &lean), 0);
	assert_int_equal(lean.state, ENERGY_PAGE_DEAD);
	assert_int_equal(energy_page_read_total(&reader, reader.info.entry_count, &lean), -ERANGE);
	energy_page_detach(&reader);
	close(fd);
	energy_page_writer_close(&writer);
	close(page_fd);
}

static void test_foreign_memory_is_refused(void **state)
{
	struct energy_page_reader reader;
	void *memory = aligned_alloc(4096, 8192);
	size_t bytes;

	(void)state;
	assert_non_null(memory);
	memset(memory, 0, 8192);
	assert_int_equal(energy_page_use(&reader, memory, 4096), -EBADMSG);
	make_page();
	assert_int_equal(energy_page_bytes_for(ENTRIES, &bytes), 0);
	memcpy(memory, writer.mapping, bytes);
	assert_int_equal(energy_page_use(&reader, memory, bytes), 0);
	assert_int_equal(energy_page_use(&reader, memory, 8192), -EMSGSIZE);
	((uint32_t *)memory)[2] = 99; /* layout version */
	assert_int_equal(energy_page_use(&reader, memory, bytes), -EPROTO);
	assert_int_equal(energy_page_bytes_for(0, &bytes), -EINVAL);
	assert_int_equal(energy_page_bytes_for(ENERGY_PAGE_MAX_ENTRIES + 1, &bytes), -EINVAL);
	free(memory);
	energy_page_writer_close(&writer);
	close(page_fd);
}

/* A memfd holding a copy of a well-formed page (`extra` bytes longer), with `seals` added. */
static int page_copy_memfd(size_t extra, int seals)
{
	size_t bytes;
	int fd = memfd_create("hostile-page", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_true(fd >= 0);
	assert_int_equal(energy_page_bytes_for(ENTRIES, &bytes), 0);
	assert_int_equal(ftruncate(fd, (off_t)(bytes + extra)), 0);
	assert_int_equal(pwrite(fd, writer.mapping, bytes, 0), (ssize_t)bytes);
	if (seals)
		assert_int_equal(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

static void assert_attach_refused(int fd, int expected)
{
	struct energy_page_reader reader;

	assert_int_equal(energy_page_attach(&reader, fd), expected);
	close(fd);
}

static void test_unsealed_page_is_refused(void **state)
{
	struct energy_page_reader reader;
	struct energy_page_reading reading;
	int pipe_fds[2];
	int fd;

	(void)state;
	make_page();
	energy_page_begin(&writer);
	energy_page_put(&writer, 2, &(struct energy_page_reading){ .total = 77 });
	energy_page_end(&writer);
	/* Right bytes, right size, but whoever handed it over could still resize or write it:
	 * each seal missing is a refusal, whatever the others. */
	assert_attach_refused(page_copy_memfd(0, 0), -EPERM);
	assert_attach_refused(page_copy_memfd(0, F_SEAL_SHRINK), -EPERM);
	assert_attach_refused(page_copy_memfd(0, F_SEAL_GROW | F_SEAL_FUTURE_WRITE), -EPERM);
	assert_attach_refused(page_copy_memfd(0, F_SEAL_SHRINK | F_SEAL_GROW), -EPERM);
	assert_attach_refused(page_copy_memfd(0, F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE), -EPERM);
	/* A memfd made without MFD_ALLOW_SEALING can never be sealed; a pipe is no file at all. */
	fd = memfd_create("unsealable-page", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_attach_refused(fd, -EPERM);
	assert_int_equal(pipe(pipe_fds), 0);
	close(pipe_fds[1]);
	assert_attach_refused(pipe_fds[0], -EINVAL);
	/* Sealed but of the wrong size: the size is still checked, after the seals. */
	assert_attach_refused(page_copy_memfd(4096, F_SEAL_SHRINK | F_SEAL_GROW |
						  F_SEAL_FUTURE_WRITE), -EMSGSIZE);
	/* Sealed as msrd seals a page (F_SEAL_SEAL is not needed): it attaches and reads. */
	fd = page_copy_memfd(0, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE);
	assert_int_equal(energy_page_attach(&reader, fd), 0);
	close(fd);
	assert_int_equal(reader.info.entry_count, ENTRIES);
	assert_int_equal(energy_page_read(&reader, 2, &reading), 0);
	assert_int_equal(reading.total, 77);
	energy_page_detach(&reader);
	energy_page_writer_close(&writer);
	close(page_fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_torn_reads_under_a_full_speed_writer),
		cmocka_unit_test(test_reader_descriptor_is_read_only_and_sealed),
		cmocka_unit_test(test_foreign_memory_is_refused),
		cmocka_unit_test(test_unsealed_page_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
