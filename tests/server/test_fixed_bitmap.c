/*
 * Perfmon v5 (CPUID 0AH EAX[7:0] = 5) lists fixed counters as a bitmap in ECX, beside EDX[4:0]'s
 * contiguous count: "fixed counter i is supported if ECX[i] || EDX[4:0] > i" (Intel SDM vol. 2A,
 * leaf 0AH). The library honoured it; msrd took only EDX's count. On a stand-in v5 part with
 * EDX[4:0] = 1 and ECX = 0b100, msrd lends fixed counters 0 and 2 and refuses 1.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "harness/policy_text.h"
#include "harness/standin_tree.h"
#include "tests/lib/msrd_group.h"

static const char policy[] = POLICY_PMU_FOR_ROOT;

static struct msrd_server server;
static struct haecer_conn *conn;
static char tree[PATH_MAX + 16];
static const char *const arguments[] = { "--backend", "msr", "--dev-root", tree, NULL };

static void test_fixed_counters_by_bitmap(void **state)
{
	struct haecer_slot slot;

	(void)state;
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_FIXED, 0, &slot), 0);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_FIXED, 1, &slot), -EOPNOTSUPP);
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_FIXED, 2, &slot), 0);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
}

static int prepare(const struct msrd_server *prepared)
{
	snprintf(tree, sizeof(tree), "%s/root", prepared->dir);
	mkdir(tree, 0755);
	tree_put_msr(tree, 0, "msr", 0x4C8, 0); /* every PMU register, zero */
	tree_put_cpuid(tree, 0, 0, 0xA, 0x756e6547, 0x6c65746e, 0x49656e69);
	tree_put_cpuid(tree, 0, 1, 0x000806C1, 0, 0, 0); /* 06_8C */
	/* v5, 4 x 48-bit counters; fixed: EDX[4:0] = 1 of 48 bits, ECX bitmap 0b100 */
	tree_put_cpuid(tree, 0, 0xA, 0x07300405, 0, 0x4, (48u << 5) | 1u);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixed_counters_by_bitmap),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, prepare, arguments, &conn, tests);
}
