/*
 * tests/events/test_encode.c — IA32_PERFEVTSELx, AMD PERF_CTLx and IA32_FIXED_CTR_CTRL values
 * against values computed by hand from the SDM's bit layout (vol. 3B figures "Layout of
 * IA32_PERFEVTSELx MSRs" and "Layout of IA32_FIXED_CTR_CTRL MSR") and the AMD PPR (PERF_CTL
 * EventSelect[11:8] at bits 35:32), and the reserved combinations that must be refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "tests/events/machines.h"

#define USR_OS (EVENT_FLAG_USR | EVENT_FLAG_OS)

static uint64_t arch_value(struct event_db *db, unsigned index, uint32_t flags, uint8_t cmask)
{
	uint64_t value = ~0ull;

	assert_int_equal(event_db_encode_arch(db, index, flags, cmask, &value, NULL, 0), 0);
	return value;
}

static void sdm_hand_computed_values(void **state)
{
	struct event_db *db = OPEN_DB(machine_sandy_bridge());
	uint64_t value;

	(void)state;
	/* 3C | 00<<8 | USR(16) | OS(17) */
	assert_int_equal(arch_value(db, ARCH_EVENT_CORE_CYCLES, USR_OS, 0), 0x0003003C);
	/* C0 | USR */
	assert_int_equal(arch_value(db, ARCH_EVENT_INSTRUCTIONS, EVENT_FLAG_USR, 0), 0x000100C0);
	/* 3C | 01<<8 | OS */
	assert_int_equal(arch_value(db, ARCH_EVENT_REFERENCE_CYCLES, EVENT_FLAG_OS, 0),
			 0x0002013C);
	/* 2E | 41<<8 | OS | EDGE(18) | CMASK 1<<24 */
	assert_int_equal(arch_value(db, ARCH_EVENT_LLC_MISSES, EVENT_FLAG_OS | EVENT_FLAG_EDGE, 1),
			 0x0106412E);
	/* C5 | USR | OS | INV(23) | CMASK 2<<24 */
	assert_int_equal(arch_value(db, ARCH_EVENT_BRANCH_MISSES, USR_OS | EVENT_FLAG_INV, 2),
			 0x028300C5);
	/* C0 | USR | OS | ANY(21), perfmon v3 */
	assert_int_equal(arch_value(db, ARCH_EVENT_INSTRUCTIONS, USR_OS | EVENT_FLAG_ANY, 0),
			 0x002300C0);
	/* 2E | 4F<<8 | USR | OS | CMASK 0xFF<<24 */
	assert_int_equal(arch_value(db, ARCH_EVENT_LLC_REFERENCES, USR_OS, 0xFF), 0xFF034F2E);
	/* a raw non-architectural event: MEM_LOAD_UOPS_RETIRED.L1_HIT D1/01, USR */
	assert_int_equal(event_db_encode_evtsel(db, 0xD1, 0x01, EVENT_FLAG_USR, 0, &value, NULL, 0),
			 0);
	assert_int_equal(value, 0x000101D1);
	event_db_close(db);
}

static void reserved_combinations_refused(void **state)
{
	struct event_db *db = OPEN_DB(machine_sandy_bridge());
	char why[EVENT_DB_WHY_SIZE];
	uint64_t value = 0x1234;

	(void)state;
	assert_int_equal(event_db_encode_evtsel(db, 0xC0, 0, 0, 0, &value, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "neither USR nor OS is set: the counter would count nothing");
	assert_int_equal(event_db_encode_evtsel(db, 0xC0, 0, USR_OS | 0x20, 0, &value, why,
						sizeof(why)), -EINVAL);
	assert_string_equal(why, "unknown flag bits 0x20");
	assert_int_equal(event_db_encode_evtsel(db, 0xC0, 0, USR_OS | EVENT_FLAG_INV, 0, &value,
						why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "INV inverts the counter-mask comparison and needs a non-zero "
			    "counter mask");
	assert_int_equal(event_db_encode_evtsel(db, 0x1C0, 0, USR_OS, 0, &value, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "event select 0x1c0 does not fit in 8 bits");
	assert_int_equal(value, 0x1234); /* untouched on failure */
	event_db_close(db);
}

/* AnyThread is reserved before perfmon v3 and after its deprecation (CPUID.0AH:EDX[15]). */
static void any_thread_reserved(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(23, 6, 0x07280202, 0, 0, 0x503));
	char why[EVENT_DB_WHY_SIZE];
	uint64_t value;

	(void)state;
	assert_int_equal(event_db_encode_evtsel(db, 0xC0, 0, USR_OS | EVENT_FLAG_ANY, 0, &value,
						why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "ANY (AnyThread) is reserved before architectural perfmon "
			    "version 3; this CPU has version 2");
	assert_int_equal(event_db_encode_evtsel(db, 0xC0, 0, USR_OS, 0, &value, NULL, 0), 0);
	assert_int_equal(value, 0x000300C0);
	event_db_close(db);

	db = OPEN_DB(machine_sapphire_rapids());
	assert_int_equal(event_db_encode_evtsel(db, 0xC0, 0, USR_OS | EVENT_FLAG_ANY, 0, &value,
						why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "ANY (AnyThread) is deprecated on this CPU (CPUID.0AH:EDX[15] "
			    "set), the bit is reserved");
	event_db_close(db);
}

static void unavailable_arch_event_not_encoded(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(42, 7, 0x07300403, 0x10, 0, 0x603));
	char why[EVENT_DB_WHY_SIZE];
	uint64_t value;

	(void)state;
	assert_int_equal(event_db_encode_arch(db, ARCH_EVENT_LLC_MISSES, USR_OS, 0, &value, why,
					      sizeof(why)), -EOPNOTSUPP);
	assert_string_equal(why, "LL_CACHE_MISSES is not available on this CPU "
			    "(CPUID.0AH:EBX bit 4 set)");
	event_db_close(db);

	db = OPEN_DB(machine_intel(42, 7, 0, 0, 0, 0)); /* no arch perfmon at all */
	assert_int_equal(event_db_encode_evtsel(db, 0xC0, 0, USR_OS, 0, &value, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_string_equal(why, "this CPU has no programmable counters");
	event_db_close(db);
}

/* AMD PERF_CTL: EventSelect[7:0] at 7:0, [11:8] at 35:32; no AnyThread bit. */
static void amd_perf_ctl(void **state)
{
	struct event_db *db = OPEN_DB(machine_zen4());
	char why[EVENT_DB_WHY_SIZE];
	uint64_t value;

	(void)state;
	/* PMCx1D0 retired fused instructions: D0 | 1<<32 | USR | OS */
	assert_int_equal(event_db_encode_evtsel(db, 0x1D0, 0, USR_OS, 0, &value, NULL, 0), 0);
	assert_int_equal(value, 0x1000300D0ull);
	/* PMCx0C0 retired instructions, USR only */
	assert_int_equal(event_db_encode_evtsel(db, 0xC0, 0, EVENT_FLAG_USR, 0, &value, NULL, 0),
			 0);
	assert_int_equal(value, 0x000100C0);
	assert_int_equal(event_db_encode_evtsel(db, 0x1000, 0, USR_OS, 0, &value, why, sizeof(why)),
			 -EINVAL);
	assert_string_equal(why, "event select 0x1000 does not fit in 12 bits");
	assert_int_equal(event_db_encode_evtsel(db, 0xC0, 0, USR_OS | EVENT_FLAG_ANY, 0, &value,
						why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "ANY (AnyThread) is an Intel bit; AMD counters have no such bit");
	event_db_close(db);
}

static void fixed_ctr_ctrl_nibbles(void **state)
{
	struct event_db *db = OPEN_DB(machine_sandy_bridge());
	char why[EVENT_DB_WHY_SIZE];
	uint64_t bits, mask;

	(void)state;
	/* counter 0: OS bit 0, USR bit 1 */
	assert_int_equal(event_db_encode_fixed(db, 0, USR_OS, &bits, &mask, NULL, 0), 0);
	assert_int_equal(bits, 0x3);
	assert_int_equal(mask, 0xF);
	/* counter 1, OS only: bit 4 */
	assert_int_equal(event_db_encode_fixed(db, 1, EVENT_FLAG_OS, &bits, &mask, NULL, 0), 0);
	assert_int_equal(bits, 0x10);
	assert_int_equal(mask, 0xF0);
	/* counter 2, USR and AnyThread: bits 9 and 10 */
	assert_int_equal(event_db_encode_fixed(db, 2, EVENT_FLAG_USR | EVENT_FLAG_ANY, &bits, &mask,
					       NULL, 0), 0);
	assert_int_equal(bits, 0x600);
	assert_int_equal(mask, 0xF00);
	assert_int_equal(event_db_encode_fixed(db, 0, USR_OS | EVENT_FLAG_EDGE, &bits, &mask, why,
					       sizeof(why)), -EINVAL);
	assert_string_equal(why, "fixed counters have no EDGE or INV control");
	assert_int_equal(event_db_encode_fixed(db, 0, 0, &bits, &mask, NULL, 0), -EINVAL);
	assert_int_equal(event_db_encode_fixed(db, 3, USR_OS, &bits, &mask, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_string_equal(why, "fixed counter 3 is not available on this CPU "
			    "(CPUID.0AH:EDX[4:0] = 3 fixed counters)");
	assert_int_equal(event_db_encode_fixed(db, 16, USR_OS, &bits, &mask, NULL, 0), -EINVAL);
	event_db_close(db);

	db = OPEN_DB(machine_intel(23, 6, 0x07280202, 0, 0, 0x503)); /* v2 */
	assert_int_equal(event_db_encode_fixed(db, 1, EVENT_FLAG_USR | EVENT_FLAG_ANY, &bits, &mask,
					       NULL, 0), -EINVAL);
	event_db_close(db);
}

static void error_texts(void **state)
{
	(void)state;
	assert_string_equal(event_db_strerror(-ENOENT), "unknown event name");
	assert_string_equal(event_db_strerror(-EOPNOTSUPP),
			    "event or counter kind not available on this CPU");
	assert_string_equal(event_db_strerror(-EINVAL), "invalid flags, counter mask or argument");
	assert_string_equal(event_db_strerror(0), "success");
	assert_non_null(event_db_strerror(-EIO));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sdm_hand_computed_values),
		cmocka_unit_test(reserved_combinations_refused),
		cmocka_unit_test(any_thread_reserved),
		cmocka_unit_test(unavailable_arch_event_not_encoded),
		cmocka_unit_test(amd_perf_ctl),
		cmocka_unit_test(fixed_ctr_ctrl_nibbles),
		cmocka_unit_test(error_texts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
