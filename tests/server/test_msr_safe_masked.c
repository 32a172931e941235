/*
 * msr-safe applies its own allowlist (/dev/cpu/msr_allowlist) to every write and drops the bits
 * it lacks without an error. On a stand-in msr-safe tree whose allowlist gives IA32_PERFEVTSEL0
 * (0x186) the write mask 0x41FFFF (event, umask, USR, EN; not OS, bit 17), a policy that grants
 * OS would let msrd program an event that then counts user mode only, and the slot would later
 * look reprogrammed. msrd reads the event select back when it programs a slot: the write is
 * refused (EACCES) naming the dropped bits, 0x20000, and the register keeps what it held; an
 * event inside the allowlist programs as before.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "harness/policy_text.h"
#include "harness/standin_tree.h"
#include "hw/msr.h"
#include "tests/lib/msrd_group.h"

static const char policy[] = POLICY_PMU_FOR_ROOT;

static struct msrd_server server;
static struct haecer_conn *conn;
static char tree[PATH_MAX + 16];
static const char *const arguments[] = { "--backend", "msr-safe", "--dev-root", tree, NULL };

static void test_masked_bits_refused_by_name(void **state)
{
	struct haecer_slot slot;
	uint64_t value = 0;

	(void)state;
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, 0, &slot), 0);
	/* INST_RETIRED.ANY_P, user and kernel: OS is not in the allowlist */
	assert_int_equal(haecer_slot_program(conn, slot.id, 0x0300C0), -EACCES);
	assert_non_null(strstr(haecer_conn_error(conn), "0x20000"));
	assert_non_null(strstr(haecer_conn_error(conn), "msr_allowlist"));
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PERFEVTSEL0, &value), 0);
	assert_int_equal(value, 0);
	/* user mode only: inside the allowlist */
	assert_int_equal(haecer_slot_program(conn, slot.id, 0x0100C0), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PERFEVTSEL0, &value), 0);
	assert_int_equal(value, 0x0100C0);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
}

static int prepare(const struct msrd_server *prepared)
{
	snprintf(tree, sizeof(tree), "%s/root", prepared->dir);
	mkdir(tree, 0755);
	tree_put_msr(tree, 0, "msr_safe", 0x4C8, 0); /* every PMU register, zero */
	tree_put_cpuid(tree, 0, 0, 0xA, 0x756e6547, 0x6c65746e, 0x49656e69);
	tree_put_cpuid(tree, 0, 1, 0x000206A7, 0, 0, 0);                  /* Sandy Bridge */
	tree_put_cpuid(tree, 0, 0xA, 0x07300403, 0, 0, (48u << 5) | 3u); /* v3, 4 x 48 bit */
	tree_write_text(tree, "dev/cpu/msr_allowlist",
			"# MSR      Write mask\n0x00000186 0x000000000041FFFF\n");
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_masked_bits_refused_by_name),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, prepare, arguments, &conn, tests);
}
