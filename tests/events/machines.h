/*
 * tests/events/machines.h — machine descriptions for the event database tests, as msrd's
 * MACHINE_INFO would report them. CPUID values from public dumps and the SDM:
 *  - Sandy Bridge client (Core i5-2520M, signature 0x206A7): leaf 0xA eax=0x07300403 ebx=0
 *    ecx=0 edx=0x00000603, as dumped on Sandy Bridge cores (e.g. `cpuid -r` of a Xeon E5-2660,
 *    same core): v3, 4 counters of 48 bits (HT on), 7 events, 3 fixed counters of 48 bits.
 *    RAPL: PKG, PP0, PP1, unit register 0x000A1003 (energy 2^-16 J, SDM 14.9.1 example).
 *  - Skylake-SP (Xeon Gold 6148, signature 0x50654): eax=0x07300404 edx=0x00000603 (v4).
 *    RAPL: PKG, DRAM, unit register 0x000A0E03 (energy 2^-14 J), DRAM fixed at 2^-16 J.
 *  - Zen 4 (Ryzen 9 7950X, family 19h model 61h): no leaf 0xA. RAPL core and package, unit
 *    register 0x000A1003 (energy 2^-16 J, AMD PPR 19h MSRC001_0299).
 *  - Sapphire Rapids (family 6 model 143): leaf 0xA written in the SDM's version 5 layout, not
 *    taken from a dump: eax=0x08300805 (v5, 8 counters, 8 events), edx=0x00008604 (4 fixed
 *    counters, AnyThread deprecated). Used for its RAPL quirk: PSYS counted in joules.
 */
#ifndef HAECER_TESTS_EVENTS_MACHINES_H
#define HAECER_TESTS_EVENTS_MACHINES_H

#include <string.h>

#include "libclient/event_db.h"

#define RAPL_BIT(domain) (1u << (domain))

static inline struct event_machine machine_intel(uint32_t model, uint32_t stepping, uint32_t eax,
						 uint32_t ebx, uint32_t ecx, uint32_t edx)
{
	struct event_machine machine;

	memset(&machine, 0, sizeof(machine));
	strcpy(machine.vendor, "GenuineIntel");
	machine.family = 6;
	machine.model = model;
	machine.stepping = stepping;
	machine.cpuid_0a[0] = eax;
	machine.cpuid_0a[1] = ebx;
	machine.cpuid_0a[2] = ecx;
	machine.cpuid_0a[3] = edx;
	return machine;
}

static inline struct event_machine machine_sandy_bridge(void)
{
	struct event_machine machine = machine_intel(42, 7, 0x07300403, 0, 0, 0x00000603);

	machine.rapl_domains = RAPL_BIT(RAPL_DOMAIN_PKG) | RAPL_BIT(RAPL_DOMAIN_PP0) |
			       RAPL_BIT(RAPL_DOMAIN_PP1);
	machine.rapl_power_unit = 0x000A1003;
	strcpy(machine.sim_model, "sandybridge");
	return machine;
}

static inline struct event_machine machine_skylake_sp(void)
{
	struct event_machine machine = machine_intel(85, 4, 0x07300404, 0, 0, 0x00000603);

	machine.rapl_domains = RAPL_BIT(RAPL_DOMAIN_PKG) | RAPL_BIT(RAPL_DOMAIN_DRAM);
	machine.rapl_power_unit = 0x000A0E03;
	strcpy(machine.sim_model, "skylake-sp");
	return machine;
}

static inline struct event_machine machine_sapphire_rapids(void)
{
	struct event_machine machine = machine_intel(143, 8, 0x08300805, 0, 0, 0x00008604);

	machine.rapl_domains = RAPL_BIT(RAPL_DOMAIN_PKG) | RAPL_BIT(RAPL_DOMAIN_DRAM) |
			       RAPL_BIT(RAPL_DOMAIN_PSYS);
	machine.rapl_power_unit = 0x000A0E03;
	return machine;
}

static inline struct event_machine machine_zen4(void)
{
	struct event_machine machine;

	memset(&machine, 0, sizeof(machine));
	strcpy(machine.vendor, "AuthenticAMD");
	machine.family = 0x19;
	machine.model = 0x61;
	machine.stepping = 2;
	machine.rapl_domains = RAPL_BIT(RAPL_DOMAIN_AMD_CORE) | RAPL_BIT(RAPL_DOMAIN_AMD_PKG);
	machine.rapl_power_unit = 0x000A1003;
	strcpy(machine.sim_model, "zen4");
	return machine;
}

/* Open a database of `machine` or fail the test. */
#define OPEN_DB(machine_expression)                                                    \
	({                                                                              \
		struct event_machine opened_machine_ = (machine_expression);            \
		struct event_db *opened_db_ = NULL;                                     \
		assert_int_equal(event_db_open(&opened_machine_, &opened_db_), 0);      \
		opened_db_;                                                             \
	})

#endif
