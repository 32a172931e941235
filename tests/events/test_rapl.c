/*
 * tests/events/test_rapl.c — RAPL domains: MSR addresses and unit registers as the Intel SDM
 * (14.10) and AMD PPR (family 17h/19h MSRC001_0299..029B) give them, scope, presence per
 * machine, and the unit of each domain: from the unit register, the fixed 2^-16 J DRAM unit of
 * server parts even when msrd reports no per-domain exponent, SPR's joule PSYS, msrd's value
 * winning when it disagrees, and a missing unit refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>

#include "tests/events/machines.h"

static const struct {
	const char *name;
	uint32_t energy_msr, unit_msr;
	enum event_rapl_scope scope;
	enum event_vendor vendor;
} manual[RAPL_DOMAIN_COUNT] = {
	[RAPL_DOMAIN_PKG] = {"RAPL_PKG", 0x611, 0x606, EVENT_RAPL_PACKAGE, EVENT_VENDOR_INTEL},
	[RAPL_DOMAIN_PP0] = {"RAPL_PP0", 0x639, 0x606, EVENT_RAPL_PACKAGE, EVENT_VENDOR_INTEL},
	[RAPL_DOMAIN_PP1] = {"RAPL_PP1", 0x641, 0x606, EVENT_RAPL_PACKAGE, EVENT_VENDOR_INTEL},
	[RAPL_DOMAIN_DRAM] = {"RAPL_DRAM", 0x619, 0x606, EVENT_RAPL_PACKAGE, EVENT_VENDOR_INTEL},
	[RAPL_DOMAIN_PSYS] = {"RAPL_PSYS", 0x64D, 0x606, EVENT_RAPL_PACKAGE, EVENT_VENDOR_INTEL},
	[RAPL_DOMAIN_AMD_CORE] = {"RAPL_AMD_CORE", 0xC001029A, 0xC0010299, EVENT_RAPL_CORE,
				  EVENT_VENDOR_AMD},
	[RAPL_DOMAIN_AMD_PKG] = {"RAPL_AMD_PKG", 0xC001029B, 0xC0010299, EVENT_RAPL_PACKAGE,
				 EVENT_VENDOR_AMD},
};

static struct event_rapl looked_up(struct event_db *db, unsigned domain)
{
	struct event_rapl rapl;
	char why[EVENT_DB_WHY_SIZE] = "";
	int error = event_db_rapl_lookup(db, domain, &rapl, why, sizeof(why));

	if (error != 0)
		fail_msg("domain %u: %d %s", domain, error, why);
	return rapl;
}

static void static_table_matches_manuals(void **state)
{
	(void)state;
	for (unsigned d = 0; d < RAPL_DOMAIN_COUNT; d++) {
		const struct event_rapl_domain *domain = event_db_rapl_domain(d);

		assert_non_null(domain);
		assert_string_equal(domain->name, manual[d].name);
		assert_int_equal(domain->domain, d);
		assert_int_equal(domain->energy_msr, manual[d].energy_msr);
		assert_int_equal(domain->unit_msr, manual[d].unit_msr);
		assert_int_equal(domain->scope, manual[d].scope);
		assert_int_equal(domain->vendor, manual[d].vendor);
		assert_int_equal(event_db_rapl_by_name(manual[d].name), (int)d);
	}
	assert_null(event_db_rapl_domain(RAPL_DOMAIN_COUNT));
	assert_int_equal(event_db_rapl_by_name("rapl_pkg"), RAPL_DOMAIN_PKG);
	assert_int_equal(event_db_rapl_by_name("RAPL_GPU"), -ENOENT);
}

/* Unit register 0x000A1003: energy status units 0x10 -> 2^-16 J = 15.3 uJ. */
static void sandy_bridge_client(void **state)
{
	struct event_db *db = OPEN_DB(machine_sandy_bridge());
	struct event_rapl rapl;
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	rapl = looked_up(db, RAPL_DOMAIN_PKG);
	assert_int_equal(rapl.exponent, 16);
	assert_true(rapl.joules_per_count == 1.0 / 65536.0);
	assert_false(rapl.exponent_from_msrd);
	assert_int_equal(rapl.domain->energy_msr, 0x611);
	assert_int_equal(looked_up(db, RAPL_DOMAIN_PP0).exponent, 16);
	assert_int_equal(looked_up(db, RAPL_DOMAIN_PP1).exponent, 16);
	assert_int_equal(event_db_rapl_lookup(db, RAPL_DOMAIN_DRAM, &rapl, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_string_equal(why, "RAPL_DRAM is not available on this CPU (MSR 0x619 does not "
			    "exist)");
	assert_int_equal(event_db_rapl_lookup(db, RAPL_DOMAIN_AMD_PKG, &rapl, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_string_equal(why, "RAPL_AMD_PKG is an AMD domain; this CPU is Intel (use "
			    "RAPL_PKG, RAPL_PP0, RAPL_PP1, RAPL_DRAM or RAPL_PSYS)");
	assert_int_equal(event_db_rapl_lookup(db, RAPL_DOMAIN_COUNT, &rapl, NULL, 0), -EINVAL);
	event_db_close(db);
}

/* Unit register 0x000A0E03: 2^-14 J for the package; DRAM fixed at 2^-16 J on Skylake-SP,
 * whether or not msrd reported per-domain exponents. */
static void skylake_sp_dram_unit(void **state)
{
	struct event_machine machine = machine_skylake_sp();
	struct event_db *db = OPEN_DB(machine);

	(void)state;
	assert_int_equal(looked_up(db, RAPL_DOMAIN_PKG).exponent, 14);
	assert_int_equal(looked_up(db, RAPL_DOMAIN_DRAM).exponent, 16);
	assert_false(looked_up(db, RAPL_DOMAIN_DRAM).exponent_from_msrd);
	event_db_close(db);

	machine.rapl_energy_exponent[RAPL_DOMAIN_PKG] = 14;
	machine.rapl_energy_exponent[RAPL_DOMAIN_DRAM] = 16;
	db = OPEN_DB(machine);
	assert_int_equal(looked_up(db, RAPL_DOMAIN_DRAM).exponent, 16);
	assert_false(looked_up(db, RAPL_DOMAIN_DRAM).exponent_from_msrd);
	event_db_close(db);
}

/* A client part's DRAM domain (Haswell desktop, model 60) uses the unit register. */
static void client_dram_uses_unit_register(void **state)
{
	struct event_machine machine = machine_intel(60, 3, 0x07300403, 0, 0, 0x603);
	struct event_db *db;

	(void)state;
	machine.rapl_domains = RAPL_BIT(RAPL_DOMAIN_PKG) | RAPL_BIT(RAPL_DOMAIN_DRAM);
	machine.rapl_power_unit = 0x000A0E03;
	db = OPEN_DB(machine);
	assert_int_equal(looked_up(db, RAPL_DOMAIN_DRAM).exponent, 14);
	event_db_close(db);
}

static void sapphire_rapids_psys_in_joules(void **state)
{
	struct event_db *db = OPEN_DB(machine_sapphire_rapids());
	struct event_rapl rapl;

	(void)state;
	rapl = looked_up(db, RAPL_DOMAIN_PSYS);
	assert_int_equal(rapl.exponent, 0);
	assert_true(rapl.joules_per_count == 1.0);
	/* SPR is not in the fixed-DRAM-unit list: its DRAM follows the register (2^-14 J). */
	assert_int_equal(looked_up(db, RAPL_DOMAIN_DRAM).exponent, 14);
	event_db_close(db);
}

static void zen4_core_and_package(void **state)
{
	struct event_db *db = OPEN_DB(machine_zen4());
	struct event_rapl rapl;
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	rapl = looked_up(db, RAPL_DOMAIN_AMD_CORE);
	assert_int_equal(rapl.exponent, 16);
	assert_int_equal(rapl.domain->scope, EVENT_RAPL_CORE);
	assert_int_equal(rapl.domain->energy_msr, 0xC001029A);
	rapl = looked_up(db, RAPL_DOMAIN_AMD_PKG);
	assert_int_equal(rapl.exponent, 16);
	assert_int_equal(rapl.domain->scope, EVENT_RAPL_PACKAGE);
	assert_int_equal(event_db_rapl_lookup(db, RAPL_DOMAIN_PKG, &rapl, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_string_equal(why, "RAPL_PKG is an Intel domain; this CPU is AMD (use RAPL_AMD_PKG "
			    "or RAPL_AMD_CORE)");
	event_db_close(db);
}

/* msrd read the real registers: a per-domain exponent it reports wins over our derivation. */
static void msrd_exponent_wins(void **state)
{
	struct event_machine machine = machine_sandy_bridge();
	struct event_db *db;
	struct event_rapl rapl;

	(void)state;
	machine.rapl_energy_exponent[RAPL_DOMAIN_PKG] = 15;
	machine.rapl_energy_exponent[RAPL_DOMAIN_PP0] = 16;
	db = OPEN_DB(machine);
	rapl = looked_up(db, RAPL_DOMAIN_PKG);
	assert_int_equal(rapl.exponent, 15);
	assert_true(rapl.exponent_from_msrd);
	rapl = looked_up(db, RAPL_DOMAIN_PP0);
	assert_int_equal(rapl.exponent, 16);
	assert_false(rapl.exponent_from_msrd);
	event_db_close(db);
}

/* A VM without RAPL: the refusal names the hypervisor msrd saw, not a missing MSR. */
static void virtual_machine_named(void **state)
{
	struct event_machine machine = machine_sandy_bridge();
	struct event_db *db;
	struct event_rapl rapl;
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	machine.rapl_domains = 0;
	machine.virtual_machine = true;
	strcpy(machine.model_name, "GenuineIntel family 0x6 model 0x55, VM under "
				   "KVMKVMKVM");
	db = OPEN_DB(machine);
	assert_int_equal(event_db_rapl_lookup(db, RAPL_DOMAIN_PKG, &rapl, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_non_null(strstr(why, "virtual machine"));
	assert_non_null(strstr(why, "KVMKVMKVM"));
	assert_null(strstr(why, "does not exist"));
	event_db_close(db);
}

static void unknown_unit_refused(void **state)
{
	struct event_machine machine = machine_zen4();
	struct event_db *db;
	struct event_rapl rapl;
	char why[EVENT_DB_WHY_SIZE];

	(void)state;
	machine.rapl_power_unit = 0;
	db = OPEN_DB(machine);
	assert_int_equal(event_db_rapl_lookup(db, RAPL_DOMAIN_AMD_PKG, &rapl, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_string_equal(why, "the energy unit of RAPL_AMD_PKG is unknown (no unit register "
			    "value reported)");
	event_db_close(db);

	machine.rapl_energy_exponent[RAPL_DOMAIN_AMD_PKG] = 16; /* msrd alone suffices */
	db = OPEN_DB(machine);
	assert_int_equal(looked_up(db, RAPL_DOMAIN_AMD_PKG).exponent, 16);
	machine.rapl_energy_exponent[RAPL_DOMAIN_AMD_PKG] = 40; /* nonsense from outside */
	event_db_close(db);
	db = OPEN_DB(machine);
	assert_int_equal(event_db_rapl_lookup(db, RAPL_DOMAIN_AMD_PKG, &rapl, why, sizeof(why)),
			 -EOPNOTSUPP);
	assert_string_equal(why, "msrd reported energy exponent 40 for RAPL_AMD_PKG, outside 0-31");
	event_db_close(db);
}

/* Bay Trail (06_37), unit register 0x505: every domain 2^5 uJ = 32 uJ a count, by our own
 * derivation and by msrd's code alike (powercap's rapl_check_unit_atom). */
static void bay_trail_microjoules(void **state)
{
	struct event_machine machine = machine_intel(0x37, 8, 0x07280203, 0, 0, 0x603);
	struct event_db *db;
	struct event_rapl rapl;

	(void)state;
	machine.rapl_domains = RAPL_BIT(RAPL_DOMAIN_PKG) | RAPL_BIT(RAPL_DOMAIN_PP0);
	machine.rapl_power_unit = 0x505;
	db = OPEN_DB(machine);
	rapl = looked_up(db, RAPL_DOMAIN_PKG);
	assert_true(rapl.joules_per_count == 32e-6);
	assert_false(rapl.exponent_from_msrd);
	event_db_close(db);
	machine.rapl_energy_exponent[RAPL_DOMAIN_PKG] = 0x85;
	db = OPEN_DB(machine);
	rapl = looked_up(db, RAPL_DOMAIN_PKG);
	assert_true(rapl.joules_per_count == 32e-6);
	assert_true(looked_up(db, RAPL_DOMAIN_PP0).joules_per_count == 32e-6);
	event_db_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(static_table_matches_manuals),
		cmocka_unit_test(sandy_bridge_client),
		cmocka_unit_test(skylake_sp_dram_unit),
		cmocka_unit_test(client_dram_uses_unit_register),
		cmocka_unit_test(sapphire_rapids_psys_in_joules),
		cmocka_unit_test(zen4_core_and_package),
		cmocka_unit_test(msrd_exponent_wins),
		cmocka_unit_test(unknown_unit_refused),
		cmocka_unit_test(bay_trail_microjoules),
		cmocka_unit_test(virtual_machine_named),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
