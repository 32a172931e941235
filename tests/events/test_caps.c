/*
 * tests/events/test_caps.c — perfmon capabilities decoded from CPUID leaf 0xA by the SDM's
 * rules (vol. 3B 18.2), for the fixture machines and for crafted leaves: events masked out in
 * EBX, a short EBX length in EAX[31:24], version 1 (no fixed counters), version 5 fixed-counter
 * bitmask with holes, AnyThread deprecation, out-of-range counts, AMD.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "tests/events/machines.h"

static void sandy_bridge_has_v3_with_everything(void **state)
{
	struct event_db *db = OPEN_DB(machine_sandy_bridge());
	const struct event_caps *caps = event_db_caps(db);
	char text[EVENT_DB_WHY_SIZE];

	(void)state;
	assert_int_equal(caps->vendor, EVENT_VENDOR_INTEL);
	assert_int_equal(caps->version, 3);
	assert_int_equal(caps->gp_counters, 4);
	assert_int_equal(caps->gp_width, 48);
	assert_int_equal(caps->fixed_counters, 3);
	assert_int_equal(caps->fixed_mask, 0x7);
	assert_int_equal(caps->fixed_width, 48);
	assert_int_equal(caps->arch_events_length, 7);
	assert_int_equal(caps->arch_events, 0x7F);
	assert_true(caps->any_thread);
	assert_int_equal(caps->amd_core_counters, 0);
	for (unsigned i = 0; i < ARCH_EVENT_COUNT; i++)
		assert_int_equal(event_db_arch_available(db, i, NULL, 0), 0);
	assert_string_equal(event_db_describe(db, text, sizeof(text)),
			    "GenuineIntel family 0x6 model 0x2a stepping 7 (simulated model "
			    "sandybridge)");
	event_db_close(db);
}

static void skylake_sp_has_v4(void **state)
{
	struct event_db *db = OPEN_DB(machine_skylake_sp());
	const struct event_caps *caps = event_db_caps(db);

	(void)state;
	assert_int_equal(caps->version, 4);
	assert_int_equal(caps->gp_counters, 4);
	assert_int_equal(caps->gp_width, 48);
	assert_int_equal(caps->fixed_counters, 3);
	assert_int_equal(caps->arch_events, 0x7F);
	assert_true(caps->any_thread);
	event_db_close(db);
}

static void zen4_has_no_intel_arch_perfmon(void **state)
{
	struct event_db *db = OPEN_DB(machine_zen4());
	const struct event_caps *caps = event_db_caps(db);
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	assert_int_equal(caps->vendor, EVENT_VENDOR_AMD);
	assert_int_equal(caps->version, 0);
	assert_int_equal(caps->gp_counters, 0);
	assert_int_equal(caps->fixed_counters, 0);
	assert_int_equal(caps->fixed_mask, 0);
	assert_int_equal(caps->arch_events, 0);
	assert_false(caps->any_thread);
	assert_int_equal(caps->amd_core_counters, 6);
	assert_int_equal(caps->amd_core_width, 48);
	assert_int_equal(event_db_arch_available(db, ARCH_EVENT_INSTRUCTIONS, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_string_equal(why, "INSTRUCTIONS_RETIRED is not available on this CPU (no "
			    "architectural performance monitoring: CPUID.0AH:EAX[7:0] = 0)");
	assert_int_equal(event_db_fixed_available(db, 0, NULL, 0), -EOPNOTSUPP);
	event_db_close(db);
}

/* A leaf 0xA on an AMD part (hypervisors have shown such things) is still not Intel's PMU. */
static void amd_ignores_a_leaf_0a(void **state)
{
	struct event_machine machine = machine_zen4();
	struct event_db *db;

	(void)state;
	machine.cpuid_0a[0] = 0x07300403;
	machine.cpuid_0a[3] = 0x603;
	db = OPEN_DB(machine);
	assert_int_equal(event_db_caps(db)->version, 0);
	assert_int_equal(event_db_caps(db)->fixed_mask, 0);
	event_db_close(db);

	strcpy(machine.vendor, "HygonGenuine");
	machine.family = 0x18;
	db = OPEN_DB(machine);
	assert_int_equal(event_db_caps(db)->vendor, EVENT_VENDOR_AMD);
	assert_int_equal(event_db_caps(db)->amd_core_counters, 6);
	event_db_close(db);
}

/* EBX bits 2 and 4 set: UNHALTED_REF_CYCLES and LL_CACHE_MISSES are not available. */
static void ebx_bits_mask_events_out(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(42, 7, 0x07300403, 0x14, 0, 0x603));
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	assert_int_equal(event_db_caps(db)->arch_events, 0x6B);
	assert_int_equal(event_db_arch_available(db, ARCH_EVENT_LLC_MISSES, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_string_equal(why, "LL_CACHE_MISSES is not available on this CPU "
			    "(CPUID.0AH:EBX bit 4 set)");
	assert_int_equal(event_db_arch_available(db, ARCH_EVENT_REFERENCE_CYCLES, why,
						 sizeof(why)), -EOPNOTSUPP);
	assert_string_equal(why, "UNHALTED_REF_CYCLES is not available on this CPU "
			    "(CPUID.0AH:EBX bit 2 set)");
	assert_int_equal(event_db_arch_available(db, ARCH_EVENT_LLC_REFERENCES, NULL, 0), 0);
	assert_int_equal(event_db_arch_available(db, ARCH_EVENT_BRANCH_MISSES, NULL, 0), 0);
	event_db_close(db);
}

/* EAX[31:24] = 5: only EBX bits 0-4 mean anything. Events 5 and 6 are absent even though
 * their EBX bits are clear, and a set bit 6 beyond the length changes nothing. */
static void short_ebx_length_hides_later_events(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(42, 7, 0x05300403, 0x40, 0, 0x603));
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	assert_int_equal(event_db_caps(db)->arch_events_length, 5);
	assert_int_equal(event_db_caps(db)->arch_events, 0x1F);
	assert_int_equal(event_db_arch_available(db, ARCH_EVENT_LLC_MISSES, NULL, 0), 0);
	assert_int_equal(event_db_arch_available(db, ARCH_EVENT_BRANCHES, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_string_equal(why, "BRANCH_INS_RETIRED is not available on this CPU "
			    "(CPUID.0AH:EAX[31:24] = 5: EBX enumerates only the first 5 events, "
			    "this is event 5)");
	assert_int_equal(event_db_arch_available(db, ARCH_EVENT_BRANCH_MISSES, NULL, 0),
			 -EOPNOTSUPP);
	event_db_close(db);
}

/* Version 1: programmable counters only; EDX is not defined and must be ignored. */
static void version_1_has_no_fixed_counters(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(15, 6, 0x07280201, 0, 0, 0x603));
	const struct event_caps *caps = event_db_caps(db);
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	assert_int_equal(caps->version, 1);
	assert_int_equal(caps->gp_counters, 2);
	assert_int_equal(caps->gp_width, 40);
	assert_int_equal(caps->fixed_counters, 0);
	assert_int_equal(caps->fixed_mask, 0);
	assert_int_equal(caps->fixed_width, 0);
	assert_false(caps->any_thread);
	assert_int_equal(event_db_fixed_available(db, FIXED_INST_RETIRED_ANY, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_string_equal(why, "INST_RETIRED_ANY is not available on this CPU (fixed counters "
			    "need architectural perfmon version 2, this CPU has version 1)");
	event_db_close(db);
}

/* Version 5: fixed counter i exists when ECX bit i is set or EDX[4:0] > i. */
static void version_5_fixed_bitmask_may_have_holes(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(151, 2, 0x08300805, 0, 0x5, 0x00008600));
	const struct event_caps *caps = event_db_caps(db);
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	assert_int_equal(caps->version, 5);
	assert_int_equal(caps->fixed_counters, 0);
	assert_int_equal(caps->fixed_mask, 0x5);
	assert_int_equal(caps->fixed_width, 48);
	assert_int_equal(event_db_fixed_available(db, 0, NULL, 0), 0);
	assert_int_equal(event_db_fixed_available(db, 1, why, sizeof(why)), -EOPNOTSUPP);
	assert_string_equal(why, "CPU_CLK_UNHALTED_CORE is not available on this CPU "
			    "(CPUID.0AH:EDX[4:0] = 0 fixed counters and its ECX bit is clear)");
	assert_int_equal(event_db_fixed_available(db, 2, NULL, 0), 0);
	assert_int_equal(event_db_fixed_available(db, 3, why, sizeof(why)), -EOPNOTSUPP);
	assert_string_equal(why, "fixed counter 3 is not available on this CPU "
			    "(CPUID.0AH:EDX[4:0] = 0 fixed counters and its ECX bit is clear)");
	event_db_close(db);

	/* Contiguous counters plus an extra one named only by ECX. */
	db = OPEN_DB(machine_intel(151, 2, 0x08300805, 0, 0x10, 0x00008603));
	assert_int_equal(event_db_caps(db)->fixed_counters, 3);
	assert_int_equal(event_db_caps(db)->fixed_mask, 0x17);
	event_db_close(db);
}

/* The ECX bitmask means nothing before version 5. */
static void ecx_ignored_before_version_5(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(85, 4, 0x07300404, 0, 0xF0, 0x603));

	(void)state;
	assert_int_equal(event_db_caps(db)->fixed_mask, 0x7);
	event_db_close(db);
}

static void anythread_deprecation_bit(void **state)
{
	struct event_db *db = OPEN_DB(machine_sapphire_rapids());

	(void)state;
	assert_int_equal(event_db_caps(db)->version, 5);
	assert_int_equal(event_db_caps(db)->fixed_counters, 4);
	assert_false(event_db_caps(db)->any_thread);
	event_db_close(db);
}

/* Counts beyond the architectural MSR ranges are clamped, never trusted. */
static void out_of_range_counts_are_clamped(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(42, 7, 0xFFFFFF03, 0, 0, 0x1FFF));
	const struct event_caps *caps = event_db_caps(db);

	(void)state;
	assert_int_equal(caps->gp_counters, EVENT_DB_MAX_GP_COUNTERS);
	assert_int_equal(caps->gp_width, EVENT_DB_MAX_COUNTER_WIDTH);
	assert_int_equal(caps->fixed_counters, EVENT_DB_MAX_FIXED_COUNTERS);
	assert_int_equal(caps->fixed_mask, 0xFFFF);
	assert_int_equal(caps->fixed_width, EVENT_DB_MAX_COUNTER_WIDTH);
	assert_int_equal(caps->arch_events, 0x7F);
	event_db_close(db);
}

/* A version without programmable counters has no programmable architectural events. */
static void no_programmable_counters(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(42, 7, 0x07300002, 0, 0, 0x603));
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	assert_int_equal(event_db_caps(db)->arch_events, 0);
	assert_int_equal(event_db_arch_available(db, 0, why, sizeof(why)), -EOPNOTSUPP);
	assert_string_equal(why, "UNHALTED_CORE_CYCLES is not available on this CPU (no "
			    "programmable counters: CPUID.0AH:EAX[15:8] = 0)");
	assert_int_equal(event_db_fixed_available(db, 0, NULL, 0), 0);
	event_db_close(db);
}

/* An unknown vendor with a leaf 0xA (Zhaoxin, Centaur implement arch perfmon) is decoded. */
static void unknown_vendor_uses_leaf_0a(void **state)
{
	struct event_machine machine = machine_intel(0x1b, 0, 0x07300403, 0, 0, 0x603);
	struct event_db *db;

	(void)state;
	memcpy(machine.vendor, "CentaurHaulsXXXX", 16); /* no terminator from outside */
	db = OPEN_DB(machine);
	assert_int_equal(event_db_caps(db)->vendor, EVENT_VENDOR_UNKNOWN);
	assert_int_equal(event_db_caps(db)->version, 3);
	assert_null(event_db_pmu_name(db));
	event_db_close(db);
}

static void open_rejects_null(void **state)
{
	struct event_machine machine = machine_sandy_bridge();
	struct event_db *db;

	(void)state;
	assert_int_equal(event_db_open(NULL, &db), -EINVAL);
	assert_int_equal(event_db_open(&machine, NULL), -EINVAL);
	event_db_close(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sandy_bridge_has_v3_with_everything),
		cmocka_unit_test(skylake_sp_has_v4),
		cmocka_unit_test(zen4_has_no_intel_arch_perfmon),
		cmocka_unit_test(amd_ignores_a_leaf_0a),
		cmocka_unit_test(ebx_bits_mask_events_out),
		cmocka_unit_test(short_ebx_length_hides_later_events),
		cmocka_unit_test(version_1_has_no_fixed_counters),
		cmocka_unit_test(version_5_fixed_bitmask_may_have_holes),
		cmocka_unit_test(ecx_ignored_before_version_5),
		cmocka_unit_test(anythread_deprecation_bit),
		cmocka_unit_test(out_of_range_counts_are_clamped),
		cmocka_unit_test(no_programmable_counters),
		cmocka_unit_test(unknown_vendor_uses_leaf_0a),
		cmocka_unit_test(open_rejects_null),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
