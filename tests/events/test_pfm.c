/*
 * tests/events/test_pfm.c — non-architectural events by libpfm4 name for the machine's model,
 * not the host's. Expected raw codes are the SDM's and AMD PPR's event tables (event select,
 * unit mask, counter mask), computed by hand into PERFEVTSEL layout, never this library's
 * output. Also: the family/model -> PMU map against libpfm4's own detection tables, unknown
 * names and prefixes, the reverse (event, umask) check, and that the host's libpfm4 view is
 * left as it was (no forced PMU, no environment change).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cpuid.h>
#include <errno.h>
#include <perfmon/pfmlib.h>
#include <stdlib.h>
#include <string.h>

#include "tests/events/machines.h"

#define USR_OS (EVENT_FLAG_USR | EVENT_FLAG_OS)

static uint64_t encoded(struct event_db *db, const char *name, uint32_t flags, uint8_t cmask)
{
	struct event_encoding encoding;
	char why[EVENT_DB_WHY_SIZE] = "";
	int error = event_db_pfm_encode(db, name, flags, cmask, &encoding, why, sizeof(why));

	if (error != 0)
		fail_msg("%s: %d %s", name, error, why);
	return encoding.evtsel;
}

/* From lib/pfmlib_intel_*.c and pfmlib_amd64.c (amd64_get_revision) of libpfm4. */
static void model_to_pmu_map(void **state)
{
	(void)state;
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_INTEL, 6, 42, 7), "snb");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_INTEL, 6, 45, 7), "snb_ep");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_INTEL, 6, 60, 3), "hsw");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_INTEL, 6, 158, 10), "skl");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_INTEL, 6, 85, 4), "skx");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_INTEL, 6, 85, 7), "clx");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_INTEL, 6, 106, 6), "icx");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_INTEL, 6, 143, 8), "spr");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_AMD, 0x17, 0x01, 1),
			    "amd64_fam17h_zen1");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_AMD, 0x17, 0x71, 0),
			    "amd64_fam17h_zen2");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_AMD, 0x19, 0x21, 0),
			    "amd64_fam19h_zen3");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_AMD, 0x19, 0x11, 1),
			    "amd64_fam19h_zen4");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_AMD, 0x19, 0x61, 2),
			    "amd64_fam19h_zen4");
	assert_string_equal(event_db_pfm_pmu_for(EVENT_VENDOR_AMD, 0x1A, 0x02, 0),
			    "amd64_fam1ah_zen5");
	assert_null(event_db_pfm_pmu_for(EVENT_VENDOR_INTEL, 6, 250, 0));
	assert_null(event_db_pfm_pmu_for(EVENT_VENDOR_AMD, 6, 42, 7));
}

/* SDM vol. 3B, Sandy Bridge events: L1D.REPLACEMENT 51H/01H, MEM_LOAD_UOPS_RETIRED.L1_HIT
 * D1H/01H, UOPS_ISSUED.ANY 0EH/01H. */
static void sandy_bridge_names(void **state)
{
	struct event_db *db = OPEN_DB(machine_sandy_bridge());
	struct event_encoding encoding;

	(void)state;
	assert_string_equal(event_db_pmu_name(db), "snb");
	assert_int_equal(encoded(db, "L1D.REPLACEMENT", USR_OS, 0), 0x00030151);
	assert_int_equal(encoded(db, "L1D:REPLACEMENT", USR_OS, 0), 0x00030151);
	assert_int_equal(encoded(db, "snb::L1D:REPLACEMENT", USR_OS, 0), 0x00030151);
	assert_int_equal(encoded(db, "SNB::l1d.replacement", EVENT_FLAG_USR, 0), 0x00010151);
	assert_int_equal(encoded(db, "MEM_LOAD_UOPS_RETIRED:L1_HIT", USR_OS, 0), 0x000301D1);
	assert_int_equal(encoded(db, "MEM_LOAD_UOPS_RETIRED.L1_HIT", EVENT_FLAG_OS, 0), 0x000201D1);
	/* flags and counter mask become modifiers: 0E | 01<<8 | USR | OS | INV | CMASK 1 */
	assert_int_equal(encoded(db, "UOPS_ISSUED:ANY", USR_OS | EVENT_FLAG_INV, 1), 0x0183010E);
	/* ... or come in the name itself, libpfm4 syntax */
	assert_int_equal(encoded(db, "UOPS_ISSUED:ANY:c=1:i=1", USR_OS, 0), 0x0183010E);

	assert_int_equal(event_db_pfm_encode(db, "L1D.REPLACEMENT", USR_OS, 0, &encoding, NULL, 0),
			 0);
	assert_int_equal(encoding.event, 0x51);
	assert_int_equal(encoding.umask, 0x01);
	assert_non_null(strstr(encoding.name, "snb::L1D:REPLACEMENT"));
	event_db_close(db);
}

/* SDM, Skylake-SP events: MEM_LOAD_RETIRED.L3_MISS D1H/20H; CYCLE_ACTIVITY.STALLS_TOTAL
 * A3H/04H with CMASK 4 built into the event. */
static void skylake_sp_names(void **state)
{
	struct event_db *db = OPEN_DB(machine_skylake_sp());

	(void)state;
	assert_string_equal(event_db_pmu_name(db), "skx");
	assert_int_equal(encoded(db, "MEM_LOAD_RETIRED.L3_MISS", USR_OS, 0), 0x000320D1);
	assert_int_equal(encoded(db, "skx::CYCLE_ACTIVITY:STALLS_TOTAL", USR_OS, 0), 0x040304A3);
	assert_int_equal(encoded(db, "INST_RETIRED:ANY_P", EVENT_FLAG_USR | EVENT_FLAG_ANY, 0),
			 0x002100C0);
	event_db_close(db);
}

/* AMD PPR family 19h: PMCx0C0 retired instructions, PMCx1D0 retired fused instructions
 * (EventSelect[11:8] = 1 at PERF_CTL bits 35:32), PMCx076 cycles not in halt. */
static void zen4_names(void **state)
{
	struct event_db *db = OPEN_DB(machine_zen4());
	char why[EVENT_DB_WHY_SIZE];
	struct event_encoding encoding;

	(void)state;
	assert_string_equal(event_db_pmu_name(db), "amd64_fam19h_zen4");
	assert_int_equal(encoded(db, "RETIRED_INSTRUCTIONS", USR_OS, 0), 0x000300C0);
	assert_int_equal(encoded(db, "CYCLES_NOT_IN_HALT", EVENT_FLAG_USR, 0), 0x00010076);
	assert_int_equal(encoded(db, "RETIRED_FUSED_INSTRUCTIONS", USR_OS, 0), 0x1000300D0ull);
	assert_int_equal(event_db_pfm_encode(db, "RETIRED_FUSED_INSTRUCTIONS", USR_OS, 0,
					     &encoding, NULL, 0), 0);
	assert_int_equal(encoding.event, 0x1D0);
	assert_int_equal(event_db_pfm_encode(db, "RETIRED_INSTRUCTIONS", USR_OS | EVENT_FLAG_ANY, 0,
					     &encoding, why, sizeof(why)), -EINVAL);
	assert_int_equal(event_db_pfm_check_raw(db, 0x1D0, 0x00, &encoding, NULL, 0), 0);
	event_db_close(db);
}

static void unknown_and_foreign_names(void **state)
{
	struct event_db *db = OPEN_DB(machine_sandy_bridge());
	struct event_encoding encoding;
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	assert_int_equal(event_db_pfm_encode(db, "NO_SUCH_EVENT", USR_OS, 0, &encoding, why,
					     sizeof(why)), -ENOENT);
	assert_string_equal(why, "no event 'NO_SUCH_EVENT' in libpfm4's table for PMU 'snb'");
	assert_int_equal(event_db_pfm_encode(db, "L1D:NOT_A_UMASK", USR_OS, 0, &encoding, why,
					     sizeof(why)), -ENOENT);
	assert_string_equal(why, "'L1D:NOT_A_UMASK': unknown unit mask or modifier for PMU 'snb'");
	/* Skylake-SP's event on a Sandy Bridge: exists, but not here. */
	assert_int_equal(event_db_pfm_encode(db, "skx::MEM_LOAD_RETIRED:L3_MISS", USR_OS, 0,
					     &encoding, why, sizeof(why)), -EOPNOTSUPP);
	assert_string_equal(why, "'skx::MEM_LOAD_RETIRED:L3_MISS' is an event of PMU 'skx'; this "
			    "CPU's PMU is 'snb'");
	assert_int_equal(event_db_pfm_encode(db, "nosuchpmu::L1D:REPLACEMENT", USR_OS, 0, &encoding,
					     why, sizeof(why)), -ENOENT);
	assert_int_equal(event_db_pfm_encode(db, "MEM_LOAD_RETIRED:L3_MISS", USR_OS, 0, &encoding,
					     NULL, 0), -ENOENT);
	/* L1D has no default unit mask */
	assert_int_equal(event_db_pfm_encode(db, "L1D", USR_OS, 0, &encoding, why, sizeof(why)),
			 -EINVAL);
	/* OFFCORE_RESPONSE needs MSR_OFFCORE_RSP_0 as well */
	assert_int_equal(event_db_pfm_encode(db, "OFFCORE_RESPONSE_0:DMND_DATA_RD:ANY_RESPONSE",
					     USR_OS, 0, &encoding, NULL, 0), -EOPNOTSUPP);
	assert_int_equal(event_db_pfm_encode(db, "L1D:REPLACEMENT", 0, 0, &encoding, NULL, 0),
			 -EINVAL);
	assert_int_equal(event_db_pfm_encode(db, "", USR_OS, 0, &encoding, NULL, 0), -EINVAL);
	assert_int_equal(event_db_pfm_encode(db, NULL, USR_OS, 0, &encoding, NULL, 0), -EINVAL);
	event_db_close(db);
}

static void raw_pairs_checked_against_model(void **state)
{
	struct event_db *db = OPEN_DB(machine_sandy_bridge());
	struct event_encoding encoding;
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	assert_int_equal(event_db_pfm_check_raw(db, 0x51, 0x01, &encoding, NULL, 0), 0);
	assert_string_equal(encoding.name, "snb::L1D:REPLACEMENT");
	assert_int_equal(encoding.evtsel, 0x00030151);
	assert_int_equal(event_db_pfm_check_raw(db, 0xD1, 0x01, NULL, NULL, 0), 0);
	/* UOPS_ISSUED 0E/01 exists plain (ANY) and with CMASK/INV (STALL_CYCLES): plain wins. */
	assert_int_equal(event_db_pfm_check_raw(db, 0x0E, 0x01, &encoding, NULL, 0), 0);
	assert_int_equal(encoding.evtsel, 0x0003010E);
	assert_int_equal(event_db_pfm_check_raw(db, 0x51, 0x77, &encoding, why, sizeof(why)),
			 -ENOENT);
	assert_string_equal(why, "libpfm4's table for PMU 'snb' has no event with event select "
			    "0x51 and unit mask 0x77");
	event_db_close(db);
}

static void model_without_table(void **state)
{
	struct event_db *db = OPEN_DB(machine_intel(250, 0, 0x07300403, 0, 0, 0x603));
	struct event_encoding encoding;
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	assert_null(event_db_pmu_name(db));
	assert_int_equal(event_db_pfm_encode(db, "L1D:REPLACEMENT", USR_OS, 0, &encoding, why,
					     sizeof(why)), -EOPNOTSUPP);
	assert_string_equal(why, "no libpfm4 event table is known for GenuineIntel family 0x6 "
			    "model 0xfa stepping 0");
	assert_int_equal(event_db_pfm_check_raw(db, 0x51, 0x01, NULL, NULL, 0), -EOPNOTSUPP);
	/* Architectural events need no table. */
	assert_int_equal(event_db_arch_available(db, ARCH_EVENT_INSTRUCTIONS, NULL, 0), 0);
	event_db_close(db);
}

/* The PMU libpfm4 itself would detect on this host, by our own map. */
static const char *host_pmu(void)
{
	unsigned eax, ebx, ecx, edx, family, model;
	char vendor[13];

	if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx))
		return NULL;
	memcpy(vendor, &ebx, 4);
	memcpy(vendor + 4, &edx, 4);
	memcpy(vendor + 8, &ecx, 4);
	vendor[12] = '\0';
	__get_cpuid(1, &eax, &ebx, &ecx, &edx);
	family = (eax >> 8) & 0xF;
	model = (eax >> 4) & 0xF;
	if (family == 0xF)
		family += (eax >> 20) & 0xFF;
	if (family >= 6)
		model |= ((eax >> 16) & 0xF) << 4;
	return event_db_pfm_pmu_for(strcmp(vendor, "GenuineIntel") == 0 ? EVENT_VENDOR_INTEL
									 : EVENT_VENDOR_AMD,
				    family, model, eax & 0xF);
}

/* After haecer's lookups the host's libpfm4 still sees only the host's PMU as present, and
 * the environment carries no libpfm4 variable of ours. */
static void host_view_left_alone(void **state)
{
	const char *models[] = {"snb", "skx", "amd64_fam19h_zen4"};
	const char *host = host_pmu();
	struct event_db *db = OPEN_DB(machine_sandy_bridge());

	(void)state;
	assert_int_equal(event_db_pfm_check_raw(db, 0x51, 0x01, NULL, NULL, 0), 0);
	assert_null(getenv("LIBPFM_ENCODE_INACTIVE"));
	assert_null(getenv("LIBPFM_FORCE_PMU"));
	for (int id = PFM_PMU_NONE + 1; id < PFM_PMU_MAX; id++) {
		pfm_pmu_info_t info;

		memset(&info, 0, sizeof(info));
		info.size = sizeof(info);
		if (pfm_get_pmu_info((pfm_pmu_t)id, &info) != PFM_SUCCESS || !info.name)
			continue;
		for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++)
			if (strcmp(info.name, models[m]) == 0 && !(host && !strcmp(host, models[m])))
				assert_false(info.is_present);
	}
	event_db_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(model_to_pmu_map),
		cmocka_unit_test(sandy_bridge_names),
		cmocka_unit_test(skylake_sp_names),
		cmocka_unit_test(zen4_names),
		cmocka_unit_test(unknown_and_foreign_names),
		cmocka_unit_test(raw_pairs_checked_against_model),
		cmocka_unit_test(model_without_table),
		cmocka_unit_test(host_view_left_alone),
	};

	/* The test's own environment must not pre-enable what haecer is meant to arrange. */
	unsetenv("LIBPFM_ENCODE_INACTIVE");
	unsetenv("LIBPFM_FORCE_PMU");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
