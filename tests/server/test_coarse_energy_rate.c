/*
 * A coarse energy grant is a property of the grant, not of a connection, a page or a process
 * (issue 28, item 1): no uid ever sees more than one fresh coarse value per interval, whatever
 * it does. Against the real msrd on the simulated CPU, in real time, for a uid granted the
 * package energy at one value per INTERVAL_MS and a resolution of one register unit (so every
 * fresh value differs from the one before at full simulated load), over a span of SPAN_MS:
 *   - the reconnect loop of the attack (connect, get the energy page, read it, close, again)
 *     gets at most span/interval + 1 fresh values (before the fix: one per page, ~1000 in 0.3 s);
 *   - four processes of the uid doing that loop together get no more between them;
 *   - a mix of a held page, fresh pages and round trips in one loop gets no more either;
 * and each of them does see fresh values (the limit is a rate, not a freeze).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "shm/energy_page.h"
#include "harness/msrd_harness.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"

#define COARSE_UID 4281
#define INTERVAL_MS 100u
#define SPAN_MS 800u
#define NS_PER_MS 1000000ull
#define PROCESSES 4
#define MAX_VALUES 4096

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"energy_page: {max_rate_hz: 2000}\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl], capabilities: [sim_control]}\n"
	"  - match: {uid: 4281}\n"
	"    allow: [rapl]\n"
	"    energy: {min_interval_ms: 100, resolution_uj: 1}\n";

/* The values every process of the uid saw, in memory shared across fork. */
struct seen {
	uint64_t values[PROCESSES][MAX_VALUES];
	unsigned count[PROCESSES];
};

enum loop_kind { RECONNECT, MIX };

struct loop {
	enum loop_kind kind;
	struct seen *seen;
	unsigned slot;
};

static struct msrd_server server;

static void note(struct seen *seen, unsigned slot, uint64_t value)
{
	unsigned count = seen->count[slot];

	if (count > 0 && seen->values[slot][count - 1] == value)
		return;
	if (count < MAX_VALUES)
		seen->values[slot][seen->count[slot]++] = value;
}

/* Connect, get the page, read its package-0 total, close: the attack's loop body. */
static int read_fresh_page(uint64_t *total)
{
	struct haecer_energy_page_info info;
	struct energy_page_reader reader;
	struct energy_page_reading reading;
	struct haecer_conn *conn;
	int fd = -1, status, index;

	status = haecer_connect(server.socket_path, &conn);
	if (status < 0)
		return status;
	status = haecer_energy_page_open(conn, 0x611, 2000, &info, &fd);
	if (status < 0)
		goto out;
	status = energy_page_attach(&reader, fd);
	close(fd);
	if (status < 0)
		goto out;
	index = energy_page_find(&reader, 0, 0);
	status = index < 0 ? index : energy_page_read(&reader, (uint32_t)index, &reading);
	if (status == 0)
		*total = reading.total;
	energy_page_detach(&reader);
out:
	haecer_close(conn);
	return status;
}

static int reconnect_loop(struct seen *seen, unsigned slot)
{
	uint64_t deadline = clock_monotonic_raw_ns() + SPAN_MS * NS_PER_MS;
	uint64_t total = 0;

	while (clock_monotonic_raw_ns() < deadline) {
		CHECK_EQ(read_fresh_page(&total), 0);
		note(seen, slot, total);
	}
	return 0;
}

/* A held page, a fresh page and a round trip, turn about. */
static int mix_loop(struct seen *seen, unsigned slot)
{
	uint64_t deadline = clock_monotonic_raw_ns() + SPAN_MS * NS_PER_MS;
	struct haecer_energy_page_info info;
	struct energy_page_reader held;
	struct energy_page_reading reading;
	struct haecer_conn *conn;
	uint64_t raw, total = 0;
	int fd = -1, index;

	CHECK_EQ(haecer_connect(server.socket_path, &conn), 0);
	CHECK_EQ(haecer_energy_page_open(conn, 0x611, 2000, &info, &fd), 0);
	CHECK(info.coarse);
	CHECK_EQ(energy_page_attach(&held, fd), 0);
	close(fd);
	index = energy_page_find(&held, 0, 0);
	CHECK(index >= 0);
	for (unsigned turn = 0; clock_monotonic_raw_ns() < deadline; turn++) {
		if (turn % 3 == 0) {
			CHECK_EQ(energy_page_read(&held, (uint32_t)index, &reading), 0);
			total = reading.total;
		} else if (turn % 3 == 1) {
			CHECK_EQ(read_fresh_page(&total), 0);
		} else {
			CHECK_EQ(haecer_energy_read(conn, 0, 0x611, &raw, &total), 0);
		}
		note(seen, slot, total);
	}
	energy_page_detach(&held);
	haecer_close(conn);
	return 0;
}

static int run_loop(void *argument)
{
	const struct loop *loop = argument;

	return loop->kind == RECONNECT ? reconnect_loop(loop->seen, loop->slot)
				       : mix_loop(loop->seen, loop->slot);
}

/* Runs as COARSE_UID: `processes` processes of the uid run the loop at once. */
static int run_processes(void *argument)
{
	const struct loop *loop = argument;
	pid_t pids[PROCESSES];
	int failed = 0, status;

	for (unsigned i = 0; i < loop[0].slot; i++) {
		struct loop mine = { .kind = loop->kind, .seen = loop->seen, .slot = i };

		pids[i] = fork();
		if (pids[i] == 0)
			_exit(run_loop(&mine));
		CHECK(pids[i] > 0);
	}
	for (unsigned i = 0; i < loop[0].slot; i++) {
		CHECK(waitpid(pids[i], &status, 0) == pids[i]);
		failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
	}
	return failed;
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* How many distinct values all processes saw together. */
static unsigned distinct_values(const struct seen *seen, unsigned processes)
{
	static uint64_t all[PROCESSES * MAX_VALUES];
	unsigned n = 0, distinct = 0;

	for (unsigned p = 0; p < processes; p++)
		for (unsigned i = 0; i < seen->count[p]; i++)
			all[n++] = seen->values[p][i];
	qsort(all, n, sizeof(all[0]), compare_u64);
	for (unsigned i = 0; i < n; i++)
		distinct += i == 0 || all[i] != all[i - 1];
	return distinct;
}

static void attack(enum loop_kind kind, unsigned processes)
{
	struct seen *seen = mmap(NULL, sizeof(*seen), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct loop loop = { .kind = kind, .slot = processes };
	unsigned distinct;

	assert_true(seen != MAP_FAILED);
	loop.seen = seen;
	assert_int_equal(run_as(COARSE_UID, COARSE_UID, NULL, 0, run_processes, &loop), 0);
	distinct = distinct_values(seen, processes);
	print_message("%u process(es), %s: %u distinct values in %u ms (interval %u ms)\n",
		      processes, kind == RECONNECT ? "reconnect loop" : "pages and round trips",
		      distinct, SPAN_MS, INTERVAL_MS);
	/* The first value is the one current at the start; every other is a fresh one. */
	assert_true(distinct - 1 <= SPAN_MS / INTERVAL_MS + 1);
	assert_true(distinct >= 2);
	munmap(seen, sizeof(*seen));
}

static void test_reconnect_loop(void **state)
{
	(void)state;
	attack(RECONNECT, 1);
}

static void test_many_processes_of_one_uid(void **state)
{
	(void)state;
	attack(RECONNECT, PROCESSES);
}

static void test_pages_and_round_trips(void **state)
{
	(void)state;
	attack(MIX, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reconnect_loop),
		cmocka_unit_test(test_many_processes_of_one_uid),
		cmocka_unit_test(test_pages_and_round_trips),
	};

	/* Full load: a register unit passes in microseconds, so every fresh value is new. */
	return MSRD_RUN_SIM_GROUP(&server, policy, "sandybridge", FULL_LOAD_SCRIPT, NULL, NULL,
				  tests);
}
