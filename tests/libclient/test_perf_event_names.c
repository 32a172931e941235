/*
 * perf's event names for msrd's broker (haecer_perf_event_by_name) and a brokered event's
 * mmap page (haecer_perf_map), on stand-ins: this machine's kernel has no core or power PMU
 * and no event with a hardware counter (the real software and msr/tsc/ events are in
 * server/test_perf_broker).
 *  - names against a stand-in sysfs tree ($HAECER_SYSFS_ROOT) shaped as the kernel's: an AMD
 *    core PMU whose event select is split (format/event "config:0-7,32-35"), a flag term
 *    (edge), an alias (events/ALIAS), the power PMU's energy-pkg, and perf's software names;
 *    a value wider than its format, an unknown alias, PMU or path are refused;
 *  - the page: a stand-in page (a memfd laid out as struct perf_event_mmap_page) whose index
 *    is not 0 and which says cap_user_time: its times are extrapolated by the page's own
 *    time_offset / time_mult (mult 0: exactly the offset); without cap_user_rdpmc, or read from
 *    another thread than the event's, or CPU-wide, the read is read() and says why. (RDPMC
 *    itself would fault here: the kernel did not enable it for this process.)
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/haecer.h"
#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/standin_tree.h"

#define DEVICES "sys/bus/event_source/devices"

static char root[] = "/tmp/haecer-perf-names-XXXXXX";

static void put(const char *relative, const char *text)
{
	char path[256];

	snprintf(path, sizeof(path), DEVICES "/%s", relative);
	tree_write_text(root, path, "%s\n", text);
}

static int setup(void **state)
{
	(void)state;
	if (mkdtemp(root) == NULL)
		return -1;
	put("cpu/type", "4");
	put("cpu/format/event", "config:0-7,32-35");
	put("cpu/format/umask", "config:8-15");
	put("cpu/format/edge", "config:18");
	put("cpu/format/cmask", "config:24-31");
	put("cpu/events/cycles-stalled", "event=0x76,cmask=0x1");
	put("power/type", "11");
	put("power/format/event", "config:0-7");
	put("power/events/energy-pkg", "event=0x02");
	setenv(HAECER_SYSFS_ROOT_ENV, root, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unsetenv(HAECER_SYSFS_ROOT_ENV);
	harness_remove_tree(root);
	return 0;
}

static void test_pmu_names(void **state)
{
	struct haecer_perf_spec spec;

	(void)state;
	/* AMD's 12-bit event select: its high nibble goes to bits 32-35. */
	assert_int_equal(haecer_perf_event_by_name("cpu/event=0x1c0,umask=0x1/", &spec), 0);
	assert_int_equal(spec.type, 4);
	assert_int_equal(spec.config, 0x1000001c0ull | 0x100);
	assert_int_equal(spec.cpu, -1);
	assert_int_equal(haecer_perf_event_by_name("cpu/event=0x2e,edge/", &spec), 0);
	assert_int_equal(spec.config, 0x2e | 1ull << 18);
	assert_int_equal(haecer_perf_event_by_name("cpu/cycles-stalled/", &spec), 0);
	assert_int_equal(spec.config, 0x76 | 1ull << 24);
	assert_int_equal(haecer_perf_event_by_name("power/energy-pkg/", &spec), 0);
	assert_int_equal(spec.type, 11);
	assert_int_equal(spec.config, 2);
	assert_int_equal(haecer_perf_event_by_name("power/energy-pkg", &spec), 0);
	assert_int_equal(spec.config, 2);
	/* 13 bits do not fit the 12 of event; 9 not the 8 of umask. */
	assert_int_equal(haecer_perf_event_by_name("cpu/event=0x1000/", &spec), -ERANGE);
	assert_int_equal(haecer_perf_event_by_name("cpu/umask=0x100/", &spec), -ERANGE);
	assert_int_equal(spec.type, 0); /* a refusal leaves nothing half-filled */
	assert_int_equal(haecer_perf_event_by_name("cpu/event=zz/", &spec), -EINVAL);
	assert_int_equal(haecer_perf_event_by_name("cpu/no-such-alias/", &spec), -ENOENT);
	assert_int_equal(haecer_perf_event_by_name("nopmu/event=1/", &spec), -ENOENT);
	assert_int_equal(haecer_perf_event_by_name("../cpu/event=1/", &spec), -ENOENT);
	assert_int_equal(haecer_perf_event_by_name("cpu/../power/type/", &spec), -ENOENT);
	assert_int_equal(haecer_perf_event_by_name("cpu//", &spec), -ENOENT);
}

static void test_software_names(void **state)
{
	static const struct {
		const char *name;
		uint64_t config;
	} names[] = {
		{ "cs", PERF_COUNT_SW_CONTEXT_SWITCHES },
		{ "context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES },
		{ "page-faults", PERF_COUNT_SW_PAGE_FAULTS },
		{ "faults", PERF_COUNT_SW_PAGE_FAULTS },
		{ "task-clock", PERF_COUNT_SW_TASK_CLOCK },
		{ "cpu-migrations", PERF_COUNT_SW_CPU_MIGRATIONS },
		{ "major-faults", PERF_COUNT_SW_PAGE_FAULTS_MAJ },
	};
	struct haecer_perf_spec spec;

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_int_equal(haecer_perf_event_by_name(names[i].name, &spec), 0);
		assert_int_equal(spec.type, PERF_TYPE_SOFTWARE);
		assert_int_equal(spec.config, names[i].config);
	}
	/* Hardware names are the library's named events, not the broker's. */
	assert_int_equal(haecer_perf_event_by_name("cycles", &spec), -ENOENT);
	assert_int_equal(haecer_perf_event_by_name(NULL, &spec), -EINVAL);
}

/* A memfd laid out as an event's mmap page. */
static int standin_page(const struct perf_event_mmap_page *page)
{
	long size = sysconf(_SC_PAGESIZE);
	int fd = memfd_create("perf-page", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	assert_int_equal(pwrite(fd, page, sizeof(*page), 0), (ssize_t)sizeof(*page));
	return fd;
}

struct other_thread {
	struct haecer_perf_map *map;
	unsigned path;
	char why[200];
	int error;
};

static void *read_from_other_thread(void *argument)
{
	struct other_thread *other = argument;
	struct haecer_perf_value value;

	other->error = haecer_perf_read_mapped(other->map, &value, &other->path, other->why,
					       sizeof(other->why));
	return NULL;
}

static void test_mapped_page(void **state)
{
	struct perf_event_mmap_page page = {
		.index = 3, .time_enabled = 5000, .time_running = 4000,
		.cap_user_time = 1, .time_offset = 1000, .time_mult = 0, .time_shift = 10,
	};
	struct other_thread other = { .error = -1 };
	struct haecer_perf_value value;
	struct haecer_perf_map *map;
	uint64_t enabled, running;
	pthread_t thread;
	unsigned path = 0;
	char why[200];
	int fd = standin_page(&page);

	(void)state;
	assert_int_equal(haecer_perf_map(fd, 0, &map), 0);
	/* On a counter (index 3) with cap_user_time: extrapolated by the page's own delta. */
	assert_int_equal(haecer_perf_map_times(map, &enabled, &running), 0);
	assert_int_equal(enabled, 6000);
	assert_int_equal(running, 5000);
	/* No cap_user_rdpmc: read() (of the memfd: 24 bytes, no event, but a read). */
	assert_int_equal(haecer_perf_read_mapped(map, &value, &path, why, sizeof(why)), 0);
	assert_int_equal(path, HAECER_PERF_PATH_READ);
	assert_non_null(strstr(why, "no cap_user_rdpmc"));
	/* Another thread than the event's (tid 0: the process's main thread, this one). */
	other.map = map;
	assert_int_equal(pthread_create(&thread, NULL, read_from_other_thread, &other), 0);
	assert_int_equal(pthread_join(thread, NULL), 0);
	assert_int_equal(other.error, 0);
	assert_int_equal(other.path, HAECER_PERF_PATH_READ);
	assert_non_null(strstr(other.why, "counts another thread"));
	haecer_perf_unmap(map);
	/* CPU-wide: never RDPMC. */
	assert_int_equal(haecer_perf_map(fd, -1, &map), 0);
	assert_int_equal(haecer_perf_read_mapped(map, &value, &path, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "CPU-wide"));
	haecer_perf_unmap(map);
	/* Not on a counter (index 0): the page's times as written. */
	page.index = 0;
	assert_int_equal(pwrite(fd, &page, sizeof(page), 0), (ssize_t)sizeof(page));
	assert_int_equal(haecer_perf_map(fd, 0, &map), 0);
	assert_int_equal(haecer_perf_map_times(map, &enabled, &running), 0);
	assert_int_equal(enabled, 5000);
	assert_int_equal(running, 4000);
	haecer_perf_unmap(map);
	assert_int_equal(haecer_perf_map(-1, 0, &map), -EINVAL);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pmu_names),
		cmocka_unit_test(test_software_names),
		cmocka_unit_test(test_mapped_page),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
