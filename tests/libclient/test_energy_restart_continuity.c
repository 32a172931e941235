/*
 * An energy counter held across an msrd restart, on the msr backend and a stand-in device
 * tree (--dev-root), where the register keeps counting through the restart as hardware does:
 * msrd's new totals start again from the register, and the client's 64-bit value goes on from
 * where it was by exactly the register's movement since its last reading (the energy page
 * marked DEAD makes the client reconnect). The simulated CPU's register starting again from 0
 * is the other case, tested in test_energy_page_reads (EIDRM).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/perfmon.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"
#include "harness/standin_tree.h"

#define PKG 0x611u
#define PKG_START 0x01234567u
#define MOVED 1000u        /* units the register moves while msrd is away: 61 mJ */

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: rapl}\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl]}\n";

static struct msrd_server server;
static char tree[PATH_MAX + 16];
static const char *const arguments[] = { "--backend", "msr", "--dev-root", tree, NULL };

/* The 32-bit register alone: its neighbours' bytes overlap it in the stand-in file. */
static uint32_t register_value(void)
{
	uint64_t value = 0;

	assert_int_equal(harness_standin_read(tree, 0, PKG, &value), 0);
	return (uint32_t)value;
}

static void set_register(uint32_t value)
{
	tree_write_at(tree, "dev/cpu/0/msr", &value, sizeof(value), PKG);
}

static void test_value_goes_on_across_a_restart(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	uint64_t before, after;
	int status;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_counter_open_energy(ctx, 0, RAPL_PKG, &counter), 0);
	assert_int_equal(haecer_counter_read(counter, &before), 0);
	assert_true(msrd_wait_log(&server, "energy pages: sampling at", 5000));
	assert_int_equal(haecer_counter_read(counter, &before), 0);

	assert_int_equal(msrd_signal(&server, SIGTERM), 0);
	assert_int_equal(waitpid(server.pid, &status, 0), server.pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	set_register(register_value() + MOVED);
	assert_int_equal(msrd_launch(&server, arguments), 0);

	assert_int_equal(haecer_counter_read(counter, &after), 0);
	assert_int_equal(after - before, MOVED);
	/* and on from there, by the register */
	set_register(register_value() + 5);
	for (int i = 0; i < 200 && after == before + MOVED; i++) {
		usleep(10000);
		assert_int_equal(haecer_counter_read(counter, &after), 0);
	}
	assert_int_equal(after - before, MOVED + 5);
	haecer_context_close(ctx);
}

static int prepare(const struct msrd_server *prepared)
{
	tree_prepare_sandybridge_rapl(prepared->dir, tree, sizeof(tree), PKG_START);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_value_goes_on_across_a_restart),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, prepare, arguments, NULL, tests);
}
