/*
 * Precise edges run only for the entries of a precise page its holder measures (issue 28: a
 * holder of a zen4 core-energy page, 16 entries, kept msrd spinning on all of them while it read
 * none). Against the real msrd on the simulated Ryzen 9 7950X in real time: a precise holder of
 * the core-energy page gets windows for every entry until it reads one; its first
 * ENERGY_READ of a core narrows them to that core's entry, a second core's adds that one, and
 * its leaving stops them. msrd's debug log names how many registers the windows cover.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"energy_page: {max_rate_hz: 1000}\n"
	"msrs:\n"
	"  - {name: RAPL_PWR_UNIT, address: 0xC0010299, read: true, set: rapl}\n"
	"  - {name: CORE_ENERGY_STAT, address: 0xC001029A, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STAT, address: 0xC001029B, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl]}\n";

static struct msrd_server server;

/* "precise edges for COUNT of" is in msrd's log (within 5 s). */
static bool windows_cover(uint32_t count)
{
	char needle[64];

	snprintf(needle, sizeof(needle), "precise edges for %u of ", count);
	return msrd_wait_log(&server, needle, 5000);
}

static void test_windows_narrow_to_the_entries_read(void **state)
{
	struct haecer_energy_page_info info;
	struct haecer_conn *conn;
	int fd = -1;

	(void)state;
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_energy_page_request(conn, MSR_AMD_CORE_ENERGY_STATUS, 100,
						    HAECER_ENERGY_PAGE_PRECISE, &info, &fd), 0);
	close(fd);
	assert_true(info.precise_edges);
	assert_true(info.entry_count > 2);
	/* Nothing read yet: every entry of the page. */
	assert_true(windows_cover(info.entry_count));
	/* CPU 0's core, then CPU 2's (another core whatever the sibling numbering). */
	assert_int_equal(haecer_energy_read(conn, 0, MSR_AMD_CORE_ENERGY_STATUS, NULL, NULL), 0);
	assert_true(windows_cover(1));
	assert_int_equal(haecer_energy_read(conn, 2, MSR_AMD_CORE_ENERGY_STATUS, NULL, NULL), 0);
	assert_true(windows_cover(2));
	haecer_close(conn);
	assert_true(msrd_wait_log(&server, "precise edges off", 5000));
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", "zen4", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_windows_narrow_to_the_entries_read),
	};

	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
