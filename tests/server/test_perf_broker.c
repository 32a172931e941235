/*
 * msrd's perf_event broker (issue 24, item 2) on this machine's real kernel: software events
 * and the msr PMU, with kernel.perf_event_paranoid at 3 for the test (Debian's "no perf for
 * the unprivileged"; the original value is written back at exit). msrd runs --backend perf.
 * As uid 65534 (nobody), whose policy grants software events on its own threads, at most 6:
 *   - perf_event_open itself is refused by the kernel (so what follows is the broker's doing);
 *   - it counts its own context switches and page faults through msrd's descriptors (read():
 *     value, time_enabled > 0, time_running <= time_enabled, equal and not scaled), and keeps
 *     counting across a CPU migration (sched_setaffinity between reads: the count follows
 *     the thread);
 *   - an event counts the thread it was opened on: not a second thread, which opens its own
 *     by gettid(); a thread of root's process and a same-uid child process are refused;
 *   - the event's mmap page: the mapped read is read() (no cap_user_rdpmc, index 0) and says
 *     so; the page's seqlocked times trail read()'s and equal them after disable and reset;
 *   - it is refused, with -EPERM, what the policy does not grant (the msr PMU, the core
 *     class, CPU-wide, sampling: a sample period and haecer-prof's profile event, each with
 *     "perf sampling not granted") and an event on another process (its parent, root's; pid 1);
 *   - the kernel's own refusal comes back as a clear error (a software event that does not
 *     exist: -ENOENT, naming perf_event_open);
 *   - the counter API does the same (haecer_counter_open_perf, haecer_counter_read, reset);
 *   - the 7th event is refused with -ENOSPC (the policy's max_open), and after its connection
 *     closed the uid can open events again (nothing stays counted in msrd).
 * As uid 65533, granted the msr PMU: msr/tsc/ (by perf's name, from this kernel's sysfs)
 * through msrd, a growing count. (Hardware events and haecer-stat over the broker:
 * server/test_perf_broker_tools.)
 * As root: msrd holds as many descriptors after handing out 1000 events as before, and with
 * its RLIMIT_NOFILE lowered to what it holds the kernel's EMFILE is a clear -ENOSPC.
 * Then msrd restarts: a descriptor handed out before keeps counting (the kernel holds the
 * event), the old connection says the server is gone, and a new one opens events again.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/haecer.h"
#include "haecer/msrd.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"
#include "tests/lib/test_check.h"

#define NOBODY 65534
#define MSR_USER 65533 /* granted the msr PMU too */
#define MAX_OPEN 6
#define PAGES 256
#define PARANOID "/proc/sys/kernel/perf_event_paranoid"

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    perf: {events: [software, msr], scope: cpu, max_open: 4096}\n"
	"  - match: {uid: 65534}\n"
	"    perf: {events: [software], scope: own, max_open: 6}\n"
	"  - match: {uid: 65533}\n"
	"    perf: {events: [software, msr], scope: own, max_open: 6}\n";

static struct msrd_server server;
static struct haecer_conn *root_conn;
static const char *const arguments[] = { "--backend", "perf", NULL };
static char saved_paranoid[16];

static struct haecer_perf_spec software(uint64_t config)
{
	return (struct haecer_perf_spec){ .type = PERF_TYPE_SOFTWARE, .config = config,
					  .cpu = -1 };
}

/* The event's count into *count: false when read() failed or its times are not what the
 * kernel gives a counting event: enabled > 0, running <= enabled, scaled exactly when running
 * fell behind (never for software events: the kernel does not multiplex them), and unscaled
 * the value is the raw count. */
static bool read_count(int fd, uint64_t *count)
{
	struct haecer_perf_value value = { 0 };

	if (haecer_perf_read(fd, &value) < 0 || value.time_enabled == 0 ||
	    value.time_running > value.time_enabled ||
	    value.scaled != (value.time_running < value.time_enabled) ||
	    (!value.scaled && value.value != value.raw)) {
		fprintf(stderr, "perf event %d: value %llu raw %llu enabled %llu running %llu "
			"scaled %d\n", fd, (unsigned long long)value.value,
			(unsigned long long)value.raw, (unsigned long long)value.time_enabled,
			(unsigned long long)value.time_running, value.scaled);
		return false;
	}
	*count = value.value;
	return true;
}

/* What one read() gives, checked as read_count does; with equal times (a software event's)
 * not scaled. */
static bool unscaled(int fd)
{
	struct haecer_perf_value value = { 0 };
	uint64_t count;

	return read_count(fd, &count) && haecer_perf_read(fd, &value) == 0 &&
	       value.time_running == value.time_enabled && !value.scaled;
}

static void fault_pages(void)
{
	long page = sysconf(_SC_PAGESIZE);
	char *memory = mmap(NULL, (size_t)page * PAGES, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	for (int i = 0; memory != MAP_FAILED && i < PAGES; i++)
		memory[(size_t)i * (size_t)page] = 1;
	if (memory != MAP_FAILED)
		munmap(memory, (size_t)page * PAGES);
}

static int pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

static int msr_pmu_type(void)
{
	FILE *file = fopen("/sys/bus/event_source/devices/msr/type", "re");
	int type = -1;

	if (file) {
		if (fscanf(file, "%d", &type) != 1)
			type = -1;
		fclose(file);
	}
	return type;
}

/* ---- as nobody ---- */

static int counts_own_events(struct haecer_conn *conn)
{
	struct haecer_perf_spec switches = software(PERF_COUNT_SW_CONTEXT_SWITCHES);
	struct haecer_perf_spec faults = software(PERF_COUNT_SW_PAGE_FAULTS);
	struct perf_event_attr attr = { .size = sizeof(attr), .type = PERF_TYPE_SOFTWARE,
					.config = PERF_COUNT_SW_PAGE_FAULTS };
	int switch_fd, fault_fd;
	uint64_t before, after;
	uint32_t open = 0;

	/* The kernel alone refuses nobody at paranoid 3. */
	CHECK(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0) < 0);
	CHECK_EQ(haecer_perf_open(conn, &switches, &switch_fd, &open), 0);
	CHECK_EQ(open, 1);
	for (int i = 0; i < 20; i++)
		usleep(100);
	CHECK(read_count(switch_fd, &after) && after >= 20);
	CHECK(unscaled(switch_fd));
	CHECK_EQ(haecer_perf_open(conn, &faults, &fault_fd, &open), 0);
	CHECK_EQ(open, 2);
	CHECK(read_count(fault_fd, &before));
	fault_pages();
	CHECK(read_count(fault_fd, &after) && after - before >= PAGES);
	CHECK(unscaled(fault_fd));
	/* Across a migration: the event follows the thread. */
	CHECK_EQ(pin_to(0), 0);
	CHECK(read_count(fault_fd, &before));
	fault_pages();
	CHECK_EQ(pin_to(1), 0);
	CHECK_EQ(sched_getcpu(), 1);
	fault_pages();
	CHECK(read_count(fault_fd, &after) && after - before >= 2 * PAGES);
	close(switch_fd);
	close(fault_fd);
	return 0;
}

static int refused_what_is_not_granted(struct haecer_conn *conn)
{
	struct haecer_perf_spec spec = software(PERF_COUNT_SW_TASK_CLOCK);
	int fd = -1;

	spec.type = (uint32_t)msr_pmu_type();
	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), -EPERM);
	spec = software(PERF_COUNT_SW_TASK_CLOCK);
	spec.flags = HAECER_PERF_CPU_WIDE;
	spec.cpu = 0;
	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), -EPERM);
	spec = software(PERF_COUNT_SW_TASK_CLOCK);
	spec.sample_period = 100000;
	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), -EPERM);
	CHECK(strstr(haecer_conn_error(conn), "perf sampling not granted") != NULL);
	spec.flags = HAECER_PERF_PROFILE; /* haecer-prof's sampling event: the same refusal */
	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), -EPERM);
	CHECK(strstr(haecer_conn_error(conn), "perf sampling not granted") != NULL);
	spec = software(PERF_COUNT_SW_TASK_CLOCK);
	spec.type = PERF_TYPE_HARDWARE; /* the core class is not nobody's */
	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), -EPERM);
	spec = software(PERF_COUNT_SW_TASK_CLOCK);
	spec.tid = (int)getppid(); /* root's test process */
	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), -EPERM);
	spec.tid = 1;
	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), -EPERM);
	CHECK(strstr(haecer_conn_error(conn), "own threads") != NULL);
	/* The kernel's refusal: no such software event. */
	spec = software(9999);
	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), -ENOENT);
	CHECK(strstr(haecer_conn_error(conn), "perf_event_open") != NULL);
	CHECK_EQ(fd, -1);
	return 0;
}

static int bounded_by_policy(struct haecer_conn *conn)
{
	struct haecer_perf_spec spec = software(PERF_COUNT_SW_TASK_CLOCK);
	int fds[MAX_OPEN + 1], fd = -1;

	for (int i = 0; i < MAX_OPEN; i++)
		CHECK_EQ(haecer_perf_open(conn, &spec, &fds[i], NULL), 0);
	for (int i = 0; i < 1000; i++)
		CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), -ENOSPC);
	for (int i = 0; i < MAX_OPEN; i++)
		close(fds[i]);
	return 0;
}

/* The same through the counter API: haecer_counter_open_perf, haecer_counter_read. */
static int counter_api(void)
{
	struct haecer_perf_spec faults = software(PERF_COUNT_SW_PAGE_FAULTS);
	struct haecer_counter_info info;
	struct haecer_counter *counter;
	struct haecer_context *ctx;
	uint64_t before = 0, after = 0;

	CHECK_EQ(haecer_context_open(server.socket_path, &ctx), 0);
	CHECK_EQ(haecer_counter_open_perf(ctx, &faults, &counter), 0);
	CHECK_EQ(haecer_counter_read(counter, &before), 0);
	fault_pages();
	CHECK_EQ(haecer_counter_read(counter, &after), 0);
	CHECK(after - before >= PAGES);
	CHECK_EQ(haecer_counter_info(counter, &info), 0);
	CHECK_EQ(info.kind, HAECER_COUNTER_PERF);
	CHECK(!info.scaled); /* a software event is never multiplexed */
	CHECK_EQ(haecer_counter_reset(counter), 0);
	CHECK_EQ(haecer_counter_read(counter, &after), 0);
	CHECK(after < PAGES);
	haecer_counter_free(counter);
	faults.type = PERF_TYPE_TRACEPOINT; /* no class msrd brokers */
	CHECK_EQ(haecer_counter_open_perf(ctx, &faults, &counter), -EOPNOTSUPP);
	haecer_context_close(ctx);
	return 0;
}

/* ---- scope: the client's own threads, one event each ---- */

struct second_thread {
	struct haecer_conn *conn;
	int fd;
	int error;
	uint64_t counted;
};

/* Faults pages before and after opening an event on itself: only the later ones are its. */
static void *second_thread_run(void *argument)
{
	struct second_thread *job = argument;
	struct haecer_perf_spec spec = software(PERF_COUNT_SW_PAGE_FAULTS);
	uint64_t before = 0, after = 0;

	fault_pages();
	spec.tid = (int)gettid();
	job->error = haecer_perf_open(job->conn, &spec, &job->fd, NULL);
	if (job->error == 0 && read_count(job->fd, &before)) {
		fault_pages();
		if (read_count(job->fd, &after))
			job->counted = after - before;
	}
	return NULL;
}

/* A pid-scoped event counts the one thread it was opened on (perf_event_open's pid is a
 * thread id; msrd sets no inherit): the process's event (tid 0) does not count a second
 * thread, which opens its own (tid = its gettid()); that one, after its thread exited, does not
 * count the first. */
static int counts_per_thread(struct haecer_conn *conn)
{
	struct haecer_perf_spec spec = software(PERF_COUNT_SW_PAGE_FAULTS);
	struct second_thread job = { .conn = conn, .fd = -1 };
	uint64_t before, after, frozen;
	pthread_t thread;
	int fd;

	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), 0);
	CHECK(read_count(fd, &before));
	CHECK_EQ(pthread_create(&thread, NULL, second_thread_run, &job), 0);
	CHECK_EQ(pthread_join(thread, NULL), 0);
	CHECK(read_count(fd, &after));
	CHECK(after - before < PAGES); /* its 2 * PAGES faults are not the main thread's */
	CHECK_EQ(job.error, 0);
	CHECK(job.counted >= PAGES);
	CHECK(read_count(job.fd, &frozen));
	fault_pages();
	CHECK(read_count(job.fd, &after) && after == frozen);
	close(job.fd);
	close(fd);
	return 0;
}

/* Never an event on another process: a thread of root's process (the test's own), a process
 * of the same uid (a child of this one). */
static int refused_other_processes(struct haecer_conn *conn, pid_t root_thread)
{
	struct haecer_perf_spec spec = software(PERF_COUNT_SW_TASK_CLOCK);
	pid_t child;
	int fd = -1, status;

	spec.tid = (int)root_thread;
	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), -EPERM);
	CHECK(strstr(haecer_conn_error(conn), "only on the client's own threads") != NULL);
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	CHECK(child > 0);
	spec.tid = (int)child;
	status = haecer_perf_open(conn, &spec, &fd, NULL);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	CHECK_EQ(status, -EPERM);
	CHECK(strstr(haecer_conn_error(conn), "own threads") != NULL);
	CHECK_EQ(fd, -1);
	return 0;
}

/* ---- the mmap page ---- */

/* A software event has no hardware counter (index 0, no cap_user_rdpmc): the mapped read is
 * read(), and says so. The page's times, read under its seqlock, trail read()'s while the
 * event counts (the kernel writes them at schedule-in), and are read()'s exactly once it is
 * disabled and reset (the kernel writes the page on reset). */
static int reads_mapped_page(struct haecer_conn *conn)
{
	struct haecer_perf_spec spec = software(PERF_COUNT_SW_PAGE_FAULTS);
	struct haecer_perf_value value = { 0 };
	struct haecer_perf_map *map;
	uint64_t enabled, running;
	unsigned path = 0;
	char why[200] = "";
	int fd;

	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), 0);
	CHECK_EQ(haecer_perf_map(fd, 0, &map), 0);
	fault_pages();
	CHECK_EQ(haecer_perf_read_mapped(map, &value, &path, why, sizeof(why)), 0);
	CHECK_EQ(path, HAECER_PERF_PATH_READ);
	CHECK(strstr(why, "read(): the event's mmap page") != NULL);
	CHECK(value.value >= PAGES && value.time_enabled > 0 && !value.scaled);
	CHECK_EQ(haecer_perf_map_times(map, &enabled, &running), 0);
	CHECK_EQ(haecer_perf_read(fd, &value), 0);
	CHECK(running <= enabled && enabled <= value.time_enabled);
	CHECK_EQ(ioctl(fd, PERF_EVENT_IOC_DISABLE, 0), 0);
	CHECK_EQ(ioctl(fd, PERF_EVENT_IOC_RESET, 0), 0);
	CHECK_EQ(haecer_perf_map_times(map, &enabled, &running), 0);
	CHECK_EQ(haecer_perf_read(fd, &value), 0);
	CHECK(enabled > 0);
	CHECK_EQ(enabled, value.time_enabled);
	CHECK_EQ(running, value.time_running);
	haecer_perf_unmap(map);
	close(fd);
	return 0;
}

static int as_nobody(void *argument)
{
	struct haecer_perf_spec spec = software(PERF_COUNT_SW_TASK_CLOCK);
	struct haecer_conn *conn;
	int fd = -1;

	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(counts_own_events(conn), 0);
	CHECK_EQ(refused_what_is_not_granted(conn), 0);
	haecer_close(conn);
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(counts_per_thread(conn), 0);
	CHECK_EQ(refused_other_processes(conn, *(const pid_t *)argument), 0);
	CHECK_EQ(reads_mapped_page(conn), 0);
	haecer_close(conn);
	CHECK_EQ(counter_api(), 0);
	/* The first connection's events counted back when it closed. */
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(bounded_by_policy(conn), 0);
	haecer_close(conn);
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), 0);
	close(fd);
	haecer_close(conn);
	return 0;
}

/* A thread of root's process (this one) that waits until its pipe closes. */
struct root_thread {
	int tids[2], wait[2];
	pthread_t thread;
};

static void *root_thread_run(void *argument)
{
	struct root_thread *root = argument;
	pid_t tid = gettid();
	char byte;

	if (write(root->tids[1], &tid, sizeof(tid)) != (ssize_t)sizeof(tid))
		return NULL;
	while (read(root->wait[0], &byte, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static void test_unprivileged_client(void **state)
{
	struct root_thread root;
	pid_t root_tid = 0;

	(void)state;
	assert_int_equal(pipe(root.tids), 0);
	assert_int_equal(pipe(root.wait), 0);
	assert_int_equal(pthread_create(&root.thread, NULL, root_thread_run, &root), 0);
	assert_int_equal(read(root.tids[0], &root_tid, sizeof(root_tid)), sizeof(root_tid));
	assert_int_not_equal(root_tid, getpid());
	assert_int_equal(run_as(NOBODY, NOBODY, NULL, 0, as_nobody, &root_tid), 0);
	close(root.wait[1]);
	assert_int_equal(pthread_join(root.thread, NULL), 0);
	close(root.wait[0]);
	close(root.tids[0]);
	close(root.tids[1]);
	assert_true(msrd_log_contains(&server, "cap_perfmon"));
}

/* ---- the msr PMU: tsc ---- */

/* Uid 65533, granted the msr PMU on its own threads: the kernel refuses it msr/tsc/ itself;
 * through msrd the event, found by perf's name in sysfs, counts the thread's TSC ticks (1 ms
 * of running: at least 100000 of them at any TSC rate above 100 MHz), unscaled. It has no
 * hardware counter either (index 0): the mapped read is read(). */
static int as_msr_user(void *argument)
{
	struct haecer_perf_spec spec;
	struct haecer_perf_value value = { 0 };
	struct perf_event_attr attr = { .size = sizeof(attr) };
	struct haecer_perf_map *map;
	struct haecer_conn *conn;
	uint64_t before, after;
	unsigned path = 0;
	int fd;

	(void)argument;
	CHECK_EQ(haecer_perf_event_by_name("msr/tsc/", &spec), 0);
	CHECK_EQ(spec.type, msr_pmu_type());
	CHECK_EQ(spec.config, 0); /* events/tsc: event=0x00, format/event: config:0-63 */
	CHECK_EQ(haecer_perf_event_by_name("msr/no-such-event/", &spec), -ENOENT);
	CHECK_EQ(haecer_perf_event_by_name("msr/tsc/", &spec), 0);
	attr.type = spec.type;
	CHECK(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0) < 0);
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_perf_open(conn, &spec, &fd, NULL), 0);
	CHECK(read_count(fd, &before));
	after = before;
	/* The event counts while the thread runs: on a loaded host 1 ms of spinning may have
	 * been mostly someone else's, so spin on until the count grew (or 1 s went by). */
	for (int ms = 0; ms < 1000 && after - before < 100000; ms++) {
		harness_spin_ns(1000000);
		CHECK(read_count(fd, &after));
	}
	CHECK(after - before >= 100000);
	CHECK(unscaled(fd));
	CHECK_EQ(haecer_perf_map(fd, 0, &map), 0);
	CHECK_EQ(haecer_perf_read_mapped(map, &value, &path, NULL, 0), 0);
	CHECK_EQ(path, HAECER_PERF_PATH_READ);
	CHECK(value.value > after);
	haecer_perf_unmap(map);
	close(fd);
	haecer_close(conn);
	return 0;
}

static void test_msr_tsc(void **state)
{
	(void)state;
	assert_int_equal(run_as(MSR_USER, MSR_USER, NULL, 0, as_msr_user, NULL), 0);
}

/* ---- msrd's own descriptors ---- */

/* How many descriptors pid holds; *first_free (may be NULL) the lowest number it does not. */
static unsigned open_descriptors(pid_t pid, unsigned *first_free)
{
	char path[64], link[32];
	unsigned count = 0;
	bool free_seen = false;

	for (unsigned fd = 0; fd < 4096; fd++) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%u", (int)pid, fd);
		if (readlink(path, link, sizeof(link)) > 0) {
			count++;
		} else if (!free_seen) {
			free_seen = true;
			if (first_free)
				*first_free = fd;
		}
	}
	return count;
}

/* msrd keeps no copy of what it hands out: 1000 events later it holds as many descriptors as
 * before. Out of descriptors itself (its RLIMIT_NOFILE lowered to what it holds), the kernel's
 * EMFILE comes back as a clear limit error, and msrd serves again once it has room. */
static void test_descriptors(void **state)
{
	struct haecer_perf_spec spec = software(PERF_COUNT_SW_TASK_CLOCK);
	struct rlimit saved, tight;
	unsigned before, held, first_free = 0;
	int fd = -1;

	(void)state;
	/* A first event, so what msrd sets up once is not counted as a leak. */
	assert_int_equal(haecer_perf_open(root_conn, &spec, &fd, NULL), 0);
	close(fd);
	/* msrd closes its copy once the send completed, maybe after the reply arrived here. */
	usleep(200000);
	before = open_descriptors(server.pid, NULL);
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(haecer_perf_open(root_conn, &spec, &fd, NULL), 0);
		close(fd);
	}
	usleep(200000);
	held = open_descriptors(server.pid, &first_free);
	assert_int_equal(held, before);
	assert_int_equal(prlimit(server.pid, RLIMIT_NOFILE, NULL, &saved), 0);
	tight = saved;
	tight.rlim_cur = first_free; /* the kernel gives the lowest free number: none is left */
	assert_int_equal(prlimit(server.pid, RLIMIT_NOFILE, &tight, NULL), 0);
	assert_int_equal(haecer_perf_open(root_conn, &spec, &fd, NULL), -ENOSPC);
	assert_non_null(strstr(haecer_conn_error(root_conn), "Too many open files"));
	assert_non_null(strstr(haecer_conn_error(root_conn), "out of descriptors"));
	assert_int_equal(prlimit(server.pid, RLIMIT_NOFILE, &saved, NULL), 0);
	assert_int_equal(haecer_perf_open(root_conn, &spec, &fd, NULL), 0);
	close(fd);
}

/* ---- msrd restarts ---- */

static void test_restart(void **state)
{
	struct haecer_perf_spec spec = software(PERF_COUNT_SW_PAGE_FAULTS);
	struct haecer_conn *old = root_conn;
	uint64_t before, after;
	int fd = -1;

	(void)state;
	spec.tid = 0;
	assert_int_equal(haecer_perf_open(root_conn, &spec, &fd, NULL), 0);
	assert_int_equal(msrd_stop(&server), 0);
	assert_true(read_count(fd, &before));
	fault_pages();
	assert_true(read_count(fd, &after) && after - before >= PAGES);
	close(fd);
	assert_true(haecer_perf_open(old, &spec, &fd, NULL) < 0);
	haecer_close(old);
	root_conn = NULL;
	assert_int_equal(msrd_start(&server, policy, arguments), 0);
	assert_int_equal(haecer_connect(server.socket_path, &root_conn), 0);
	assert_int_equal(haecer_perf_open(root_conn, &spec, &fd, NULL), 0);
	close(fd);
}

static void restore_paranoid(void)
{
	int fd = open(PARANOID, O_WRONLY);

	if (fd >= 0) {
		if (write(fd, saved_paranoid, strlen(saved_paranoid)) < 0)
			perror(PARANOID);
		close(fd);
	}
}

/* 0 once the kernel is at paranoid 3 (restored at exit), -1 when it cannot be. */
static int set_paranoid(void)
{
	int fd = open(PARANOID, O_RDWR);
	ssize_t got;

	if (fd < 0)
		return -1;
	got = read(fd, saved_paranoid, sizeof(saved_paranoid) - 1);
	if (got <= 0 || write(fd, "3", 1) != 1) {
		close(fd);
		return -1;
	}
	saved_paranoid[got] = '\0';
	close(fd);
	atexit(restore_paranoid);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unprivileged_client),
		cmocka_unit_test(test_msr_tsc),
		cmocka_unit_test(test_descriptors),
		cmocka_unit_test(test_restart),
	};
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (cpus < 2 || msr_pmu_type() < 0) {
		printf("skip: needs 2 CPUs and the kernel's msr PMU\n");
		return 77;
	}
	if (set_paranoid() < 0) {
		printf("skip: cannot set %s\n", PARANOID);
		return 77;
	}
	return MSRD_RUN_GROUP(&server, policy, arguments, &root_conn, tests);
}
