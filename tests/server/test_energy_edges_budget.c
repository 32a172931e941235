/*
 * The precise edges' CPU is bounded by the policy (issue 28, item 2), against the real msrd on
 * the simulated Sandy Bridge in real time. The attack: a uid holds precise pages of every
 * energy register it may read and renews their lease as fast as it can (a read every 2 ms),
 * while another uid reads the package energy by round trip every 5 ms. With
 * energy_page: {edge_cpu_percent: 10, edge_cpu_percent_per_uid: 4}:
 *   - msrd's CPU (utime + stime of /proc/PID/stat) over the attack stays within the bound plus
 *     what serving the two clients' requests and the page sampler cost (WORK_ALLOWANCE), where
 *     the issue measured 65 % without a bound;
 *   - msrd's log names the uid whose windows spent its share;
 *   - every read of the other client is served, and a window's spin gives way to waiting work
 *     (the ring's TASKRUN flag: the check works under DEFER_TASKRUN).
 * Figures are printed; latency belongs to bench/msrd, not here.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "shm/energy_page.h"
#include "harness/msrd_harness.h"
#include "tests/lib/msrd_group.h"
#include "harness/process_figures.h"
#include "tests/lib/test_check.h"

#define HOLDER_UID 4291
#define READER_UID 4292
#define SPAN_NS 2000000000ull
#define BOUND_PERCENT 10.0
#define WORK_ALLOWANCE_PERCENT 15.0 /* requests and the page sampler, not windows */
#define READER_READS 300

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"energy_page: {max_rate_hz: 200, edge_cpu_percent: 10, edge_cpu_percent_per_uid: 4}\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"  - {name: DRAM_ENERGY_STATUS, address: 0x619, read: true, set: rapl}\n"
	"  - {name: PP0_ENERGY_STATUS, address: 0x639, read: true, set: rapl}\n"
	"  - {name: PP1_ENERGY_STATUS, address: 0x641, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl], capabilities: [sim_control]}\n"
	"  - {match: {uid: 4291}, allow: [rapl]}\n"
	"  - {match: {uid: 4292}, allow: [rapl]}\n";

static const uint32_t registers[] = { 0x611, 0x619, 0x639, 0x641 };

static struct msrd_server server;

/* Runs as HOLDER_UID: precise pages of every register msrd keeps a total for, renewed by a
 * read every 2 ms for the span. */
static int holder(void *argument)
{
	struct haecer_energy_page_info info;
	struct haecer_conn *conn;
	uint64_t deadline = clock_monotonic_raw_ns() + SPAN_NS, raw, total;
	unsigned pages = 0;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	for (size_t i = 0; i < sizeof(registers) / sizeof(registers[0]); i++) {
		int fd = -1;

		if (haecer_energy_page_request(conn, registers[i], 200, HAECER_ENERGY_PAGE_PRECISE,
					       &info, &fd) == 0) {
			CHECK(info.precise_edges);
			close(fd);
			pages++;
		}
	}
	CHECK(pages >= 1);
	while (clock_monotonic_raw_ns() < deadline) {
		CHECK_EQ(haecer_energy_read(conn, 0, 0x611, &raw, &total), 0);
		usleep(2000);
	}
	haecer_close(conn);
	return 0;
}

/* Runs as READER_UID: every read is served. */
static int reader(void *argument)
{
	struct haecer_conn *conn;
	uint64_t raw, total;

	(void)argument;
	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	for (unsigned i = 0; i < READER_READS; i++) {
		CHECK_EQ(haecer_energy_read(conn, 0, 0x611, &raw, &total), 0);
		usleep(5000);
	}
	haecer_close(conn);
	return 0;
}

static void test_windows_stay_within_their_cpu_bound(void **state)
{
	long tick_hz = sysconf(_SC_CLK_TCK);
	long long before, after;
	uint64_t from, to;
	double percent;
	pid_t reader_pid;
	int status;

	(void)state;
	reader_pid = fork();
	assert_true(reader_pid >= 0);
	if (reader_pid == 0)
		_exit(run_as(READER_UID, READER_UID, NULL, 0, reader, NULL));
	before = harness_process_cpu_ticks(server.pid);
	from = clock_monotonic_raw_ns();
	assert_int_equal(run_as(HOLDER_UID, HOLDER_UID, NULL, 0, holder, NULL), 0);
	after = harness_process_cpu_ticks(server.pid);
	to = clock_monotonic_raw_ns();
	assert_int_equal(waitpid(reader_pid, &status, 0), reader_pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_true(before >= 0 && after >= before);
	percent = 100.0 * (double)(after - before) / (double)tick_hz / ((double)(to - from) / 1e9);
	print_message("msrd took %.1f %% of a CPU under a precise holder renewing every 2 ms "
		      "(bound %.0f %% for the windows)\n", percent, BOUND_PERCENT);
	assert_true(percent <= BOUND_PERCENT + WORK_ALLOWANCE_PERCENT);
	assert_true(msrd_log_contains(&server, "uid 4291's precise edges took"));
	/* The spin stops for a waiting request: under IORING_SETUP_DEFER_TASKRUN the CQ stays
	 * empty until msrd enters the kernel, so only the ring's TASKRUN flag can say so (issue
	 * 28 read io_uring_cq_ready alone from the code: it never fired). */
	assert_true(msrd_log_contains(&server, "a window gave way to waiting work"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_windows_stay_within_their_cpu_bound),
	};

	return MSRD_RUN_SIM_GROUP(&server, policy, "sandybridge", FULL_LOAD_SCRIPT, NULL, NULL,
				  tests);
}
