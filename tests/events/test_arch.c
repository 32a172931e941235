/*
 * tests/events/test_arch.c — the architectural event and fixed-counter tables against the SDM
 * (event select / unit mask of the seven pre-defined events, fixed counters 0-2), lookups by
 * the seed's names, and the preference for a fixed counter whenever one counts the same thing
 * on this machine with these flags.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "tests/events/machines.h"

/* SDM vol. 3B table "UMask and Event Select Encodings for Pre-Defined Architectural
 * Performance Events", in CPUID.0AH:EBX bit order, with the seed's table 3 names. */
static const struct {
	const char *name;
	uint8_t event, umask;
} sdm_events[ARCH_EVENT_COUNT] = {
	{"UNHALTED_CORE_CYCLES", 0x3C, 0x00}, {"INSTRUCTIONS_RETIRED", 0xC0, 0x00},
	{"UNHALTED_REF_CYCLES", 0x3C, 0x01},  {"LL_CACHE_REFERENCES", 0x2E, 0x4F},
	{"LL_CACHE_MISSES", 0x2E, 0x41},      {"BRANCH_INS_RETIRED", 0xC4, 0x00},
	{"BRANCH_MIS_RETIRED", 0xC5, 0x00},
};

static void arch_table_matches_sdm(void **state)
{
	(void)state;
	for (unsigned i = 0; i < ARCH_EVENT_COUNT; i++) {
		const struct event_arch_event *event = event_db_arch_event(i);

		assert_non_null(event);
		assert_string_equal(event->name, sdm_events[i].name);
		assert_int_equal(event->event, sdm_events[i].event);
		assert_int_equal(event->umask, sdm_events[i].umask);
		assert_int_equal(event_db_arch_event_by_name(sdm_events[i].name), (int)i);
	}
	assert_null(event_db_arch_event(ARCH_EVENT_COUNT));
	assert_int_equal(event_db_arch_event_by_name("ll_cache_misses"), ARCH_EVENT_LLC_MISSES);
	assert_int_equal(event_db_arch_event_by_name("LL_CACHE_MISS"), -ENOENT);
	assert_int_equal(event_db_arch_event_by_name(NULL), -EINVAL);
}

static void fixed_table_matches_seed(void **state)
{
	(void)state;
	assert_string_equal(event_db_fixed_name(0), "INST_RETIRED_ANY");
	assert_string_equal(event_db_fixed_name(1), "CPU_CLK_UNHALTED_CORE");
	assert_string_equal(event_db_fixed_name(2), "CPU_CLK_UNHALTED_REF");
	assert_null(event_db_fixed_name(3));
	assert_int_equal(event_db_fixed_by_name("cpu_clk_unhalted_ref"), 2);
	assert_int_equal(event_db_fixed_by_name("INST_RETIRED"), -ENOENT);
}

static void fixed_equivalents(void **state)
{
	(void)state;
	assert_int_equal(event_db_arch_fixed_equivalent(ARCH_EVENT_INSTRUCTIONS), 0);
	assert_int_equal(event_db_arch_fixed_equivalent(ARCH_EVENT_CORE_CYCLES), 1);
	assert_int_equal(event_db_arch_fixed_equivalent(ARCH_EVENT_REFERENCE_CYCLES), 2);
	assert_int_equal(event_db_arch_fixed_equivalent(ARCH_EVENT_LLC_REFERENCES), -ENOENT);
	assert_int_equal(event_db_arch_fixed_equivalent(ARCH_EVENT_LLC_MISSES), -ENOENT);
	assert_int_equal(event_db_arch_fixed_equivalent(ARCH_EVENT_BRANCHES), -ENOENT);
	assert_int_equal(event_db_arch_fixed_equivalent(ARCH_EVENT_BRANCH_MISSES), -ENOENT);
	assert_int_equal(event_db_arch_fixed_equivalent(ARCH_EVENT_COUNT), -EINVAL);
}

static void fixed_preferred_when_it_exists(void **state)
{
	struct event_db *db = OPEN_DB(machine_sandy_bridge());
	const uint32_t both = EVENT_FLAG_USR | EVENT_FLAG_OS;

	(void)state;
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_INSTRUCTIONS, both, 0), 0);
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_CORE_CYCLES, EVENT_FLAG_USR, 0),
			 1);
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_REFERENCE_CYCLES,
						    EVENT_FLAG_OS | EVENT_FLAG_ANY, 0), 2);
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_BRANCHES, both, 0), -ENOENT);
	/* Fixed counters cannot filter: a counter mask, EDGE or INV needs a programmable one. */
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_INSTRUCTIONS, both, 1),
			 -ENOENT);
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_INSTRUCTIONS,
						    both | EVENT_FLAG_EDGE, 0), -ENOENT);
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_INSTRUCTIONS, 0, 0), -ENOENT);
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_COUNT, both, 0), -EINVAL);
	event_db_close(db);
}

/* The fixed counter is enumerated separately from the EBX bits: with reference cycles masked
 * out as a programmable event, fixed counter 2 still counts them. */
static void fixed_counter_independent_of_ebx(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(42, 7, 0x07300403, 0x4, 0, 0x603));

	(void)state;
	assert_int_equal(event_db_arch_available(db, ARCH_EVENT_REFERENCE_CYCLES, NULL, 0),
			 -EOPNOTSUPP);
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_REFERENCE_CYCLES,
						    EVENT_FLAG_USR, 0), 2);
	event_db_close(db);
}

/* Two fixed counters (EDX[4:0] = 2): reference cycles go to a programmable counter. */
static void programmable_when_fixed_missing(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(42, 7, 0x07300403, 0, 0, 0x602));

	(void)state;
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_INSTRUCTIONS, EVENT_FLAG_USR, 0),
			 0);
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_REFERENCE_CYCLES,
						    EVENT_FLAG_USR, 0), -ENOENT);
	event_db_close(db);

	db = OPEN_DB(machine_intel(15, 6, 0x07280201, 0, 0, 0x603)); /* v1: no fixed at all */
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_INSTRUCTIONS, EVENT_FLAG_USR, 0),
			 -ENOENT);
	event_db_close(db);

	db = OPEN_DB(machine_intel(23, 6, 0x07280202, 0, 0, 0x503)); /* v2: no AnyThread */
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_INSTRUCTIONS,
						    EVENT_FLAG_USR | EVENT_FLAG_ANY, 0), -ENOENT);
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_INSTRUCTIONS, EVENT_FLAG_USR, 0),
			 0);
	event_db_close(db);
}

static void zen4_prefers_nothing(void **state)
{
	struct event_db *db = OPEN_DB(machine_zen4());

	(void)state;
	assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_INSTRUCTIONS, EVENT_FLAG_USR, 0),
			 -ENOENT);
	event_db_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(arch_table_matches_sdm),
		cmocka_unit_test(fixed_table_matches_seed),
		cmocka_unit_test(fixed_equivalents),
		cmocka_unit_test(fixed_preferred_when_it_exists),
		cmocka_unit_test(fixed_counter_independent_of_ebx),
		cmocka_unit_test(programmable_when_fixed_missing),
		cmocka_unit_test(zen4_prefers_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
