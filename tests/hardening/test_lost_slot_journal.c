/*
 * A counter slot the kernel reprogrammed behind msrd's back is the kernel's, also across a crash:
 * on the msr backend over a stand-in tree (the files are the registers and outlive msrd), a
 * client takes programmable counter 0 and starts it, the "kernel" rewrites its event select in
 * the file, the client's read reports the slot lost, and msrd is killed with SIGKILL. The next
 * msrd writes back what its journal still owns (the shared IA32_PERF_GLOBAL_CTRL) but not the
 * lost counter's event select or count: the journal took them back ("forget" lines).
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "harness/msrd_harness.h"
#include "harness/standin_tree.h"

#define KERNEL_SELECT (0xC0ull | PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_INT | PERFEVTSEL_EN)

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: PMC0, address: 0xC1, read: true, write_mask: 0xffffffffffff, set: pmu}\n"
	"  - {name: PERFEVTSEL0, address: 0x186, read: true, write_mask: 0xffc7ffff, set: pmu}\n"
	"  - {name: GLOBAL_CTRL, address: 0x38F, read: true, write_mask: 0x7000000ff, set: pmu}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu]}\n";

static void test_lost_slot_is_not_written_back_after_a_crash(void **state)
{
	struct msrd_server server;
	char tree[PATH_MAX + 16], state_dir[PATH_MAX + 16];
	const char *arguments[] = { "--backend", "msr", "--dev-root", tree, "--state-dir",
				    state_dir, NULL };
	struct haecer_conn *conn;
	struct haecer_slot slot;
	uint64_t value;
	int status;

	(void)state;
	assert_int_equal(msrd_prepare(&server, policy), 0);
	snprintf(tree, sizeof(tree), "%s/root", server.dir);
	snprintf(state_dir, sizeof(state_dir), "%s/state", server.dir);
	assert_int_equal(mkdir(state_dir, 0755), 0);
	assert_int_equal(harness_standin_msr_tree(tree, 1, 0x1000), 0);
	/* Intel perfmon v3: 4 programmable counters of 48 bits, 3 fixed. */
	tree_put_cpuid(tree, 0, 0, 0xD, 0x756e6547, 0x6c65746e, 0x49656e69);
	tree_put_cpuid(tree, 0, 1, 0x000206A7, 0, 0, 0);
	tree_put_cpuid(tree, 0, 0xA, 0x07300403, 0, 0, 0x603);
	assert_int_equal(harness_standin_write(tree, 0, MSR_IA32_PMC0, 777), 0);
	assert_int_equal(harness_standin_write(tree, 0, MSR_IA32_PERF_GLOBAL_CTRL, 0x0), 0);
	assert_int_equal(msrd_launch(&server, arguments), 0);

	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, 0, &slot), 0);
	assert_int_equal(haecer_slot_program(conn, slot.id, 0x3C | PERFEVTSEL_USR | PERFEVTSEL_OS),
			 0);
	assert_int_equal(haecer_slot_control(conn, &slot.id, 1, HAECER_SLOT_ENABLE), 0);
	assert_int_equal(harness_standin_write(tree, 0, MSR_IA32_PERFEVTSEL0, KERNEL_SELECT), 0);
	assert_int_equal(harness_standin_write(tree, 0, MSR_IA32_PMC0, 4242), 0);
	assert_int_equal(haecer_slot_read(conn, &slot.id, 1, &value, false), -EIDRM);

	assert_int_equal(kill(server.pid, SIGKILL), 0);
	assert_int_equal(waitpid(server.pid, &status, 0), server.pid);
	server.pid = -1;
	haecer_close(conn);
	assert_int_equal(msrd_launch(&server, arguments), 0);
	assert_true(msrd_log_contains(&server, "journal: 1 registers restored"));
	assert_int_equal(harness_standin_read(tree, 0, MSR_IA32_PERFEVTSEL0, &value), 0);
	assert_int_equal(value, KERNEL_SELECT);
	assert_int_equal(harness_standin_read(tree, 0, MSR_IA32_PMC0, &value), 0);
	assert_int_equal(value, 4242);
	assert_int_equal(harness_standin_read(tree, 0, MSR_IA32_PERF_GLOBAL_CTRL, &value), 0);
	assert_int_equal(value, 0);
	assert_int_equal(msrd_stop(&server), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lost_slot_is_not_written_back_after_a_crash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
