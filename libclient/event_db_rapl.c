/*
 * libclient/event_db_rapl.c — RAPL energy domains: MSR, unit register, unit, scope, presence.
 *
 * Units: every domain counts in 2^-ESU J, ESU = MSR_RAPL_POWER_UNIT[12:8] (Intel SDM 14.10.1;
 * AMD the same layout at 0xC0010299), except where a model fixes a unit of its own: the table
 * in hw/rapl_quirks.h, which msrd uses too (each entry cites the kernel's lists), and on
 * Silvermont/Airmont, whose counts are 2^ESU uJ (a unit code with RAPL_UNIT_CODE_MICROJOULE).
 * msrd reports a per-domain exponent too; when it reports one (non-zero) that differs from the
 * derivation here, msrd's wins, since it read the actual registers of the actual model.
 */
#include "libclient/event_db.h"

#include <errno.h>
#include <string.h>

#include "hw/rapl_quirks.h"

/* The energy-status-units field is 5 bits wide. */
#define RAPL_MAX_EXPONENT 31u

static const struct event_rapl_domain rapl_domains[RAPL_DOMAIN_COUNT] = {
	[RAPL_DOMAIN_PKG] = {"RAPL_PKG", RAPL_DOMAIN_PKG, EVENT_VENDOR_INTEL,
			     MSR_PKG_ENERGY_STATUS, MSR_RAPL_POWER_UNIT, EVENT_RAPL_PACKAGE},
	[RAPL_DOMAIN_PP0] = {"RAPL_PP0", RAPL_DOMAIN_PP0, EVENT_VENDOR_INTEL,
			     MSR_PP0_ENERGY_STATUS, MSR_RAPL_POWER_UNIT, EVENT_RAPL_PACKAGE},
	[RAPL_DOMAIN_PP1] = {"RAPL_PP1", RAPL_DOMAIN_PP1, EVENT_VENDOR_INTEL,
			     MSR_PP1_ENERGY_STATUS, MSR_RAPL_POWER_UNIT, EVENT_RAPL_PACKAGE},
	[RAPL_DOMAIN_DRAM] = {"RAPL_DRAM", RAPL_DOMAIN_DRAM, EVENT_VENDOR_INTEL,
			      MSR_DRAM_ENERGY_STATUS, MSR_RAPL_POWER_UNIT, EVENT_RAPL_PACKAGE},
	[RAPL_DOMAIN_PSYS] = {"RAPL_PSYS", RAPL_DOMAIN_PSYS, EVENT_VENDOR_INTEL,
			      MSR_PLATFORM_ENERGY_STATUS, MSR_RAPL_POWER_UNIT, EVENT_RAPL_PACKAGE},
	[RAPL_DOMAIN_AMD_CORE] = {"RAPL_AMD_CORE", RAPL_DOMAIN_AMD_CORE, EVENT_VENDOR_AMD,
				  MSR_AMD_CORE_ENERGY_STATUS, MSR_AMD_RAPL_POWER_UNIT,
				  EVENT_RAPL_CORE},
	[RAPL_DOMAIN_AMD_PKG] = {"RAPL_AMD_PKG", RAPL_DOMAIN_AMD_PKG, EVENT_VENDOR_AMD,
				 MSR_AMD_PKG_ENERGY_STATUS, MSR_AMD_RAPL_POWER_UNIT,
				 EVENT_RAPL_PACKAGE},
};

const struct event_rapl_domain *event_db_rapl_domain(unsigned domain)
{
	return domain < RAPL_DOMAIN_COUNT ? &rapl_domains[domain] : NULL;
}

int event_db_rapl_by_name(const char *name)
{
	return event_db_find_name(name, rapl_domains, RAPL_DOMAIN_COUNT, sizeof(rapl_domains[0]));
}

/* Our own derivation of a domain's exponent, -1 when the unit register was not reported. */
static int derived_exponent(const struct event_db *db, unsigned domain)
{
	const struct event_machine *machine = &db->machine;
	bool intel = db->caps.vendor == EVENT_VENDOR_INTEL;

	if (machine->rapl_power_unit == 0 && !rapl_unit_quirk_of(intel, machine->family,
								 machine->model, (int)domain))
		return -1;
	return rapl_unit_code_of(intel, machine->family, machine->model, (int)domain,
				 machine->rapl_power_unit);
}

static int check_present(const struct event_db *db, unsigned domain, char *why,
			 size_t why_size)
{
	const struct event_rapl_domain *facts = &rapl_domains[domain];
	enum event_vendor vendor = db->caps.vendor;

	if (vendor != EVENT_VENDOR_UNKNOWN && vendor != facts->vendor) {
		event_db_why(why, why_size, "%s is an %s domain; this CPU is %s (use %s)",
			     facts->name, facts->vendor == EVENT_VENDOR_AMD ? "AMD" : "Intel",
			     vendor == EVENT_VENDOR_AMD ? "AMD" : "Intel",
			     vendor == EVENT_VENDOR_AMD ? "RAPL_AMD_PKG or RAPL_AMD_CORE"
							 : "RAPL_PKG, RAPL_PP0, RAPL_PP1, "
							   "RAPL_DRAM or RAPL_PSYS");
		return -EOPNOTSUPP;
	}
	if (!(db->machine.rapl_domains & (1u << domain)) && db->machine.virtual_machine) {
		event_db_why(why, why_size, "%s is not available: msrd runs in a virtual machine "
			     "(%s) whose hypervisor does not pass the RAPL registers through; "
			     "measure energy on the host", facts->name, db->machine.model_name);
		return -EOPNOTSUPP;
	}
	if (!(db->machine.rapl_domains & (1u << domain))) {
		event_db_why(why, why_size, "%s is not available on this CPU (MSR %#x does not "
			     "exist)", facts->name, facts->energy_msr);
		return -EOPNOTSUPP;
	}
	return 0;
}

int event_db_rapl_lookup(const struct event_db *db, unsigned domain, struct event_rapl *out,
			 char *why, size_t why_size)
{
	int exponent;
	uint8_t reported;
	int error;

	if (!out || domain >= RAPL_DOMAIN_COUNT) {
		event_db_why(why, why_size, "RAPL domain %u does not exist (0-%u)", domain,
			     RAPL_DOMAIN_COUNT - 1);
		return -EINVAL;
	}
	error = check_present(db, domain, why, why_size);
	if (error < 0)
		return error;
	exponent = derived_exponent(db, domain);
	reported = db->machine.rapl_energy_exponent[domain];
	memset(out, 0, sizeof(*out));
	if (reported > RAPL_MAX_EXPONENT &&
	    (reported & ~(RAPL_UNIT_CODE_MICROJOULE | RAPL_UNIT_CODE_MICROJOULE_MAX_E)) != 0) {
		event_db_why(why, why_size, "msrd reported energy exponent %u for %s, outside "
			     "0-%u", reported, rapl_domains[domain].name, RAPL_MAX_EXPONENT);
		return -EOPNOTSUPP;
	}
	if (reported != 0 && reported != exponent) {
		out->exponent_from_msrd = true;
		exponent = reported;
	}
	if (exponent < 0) {
		event_db_why(why, why_size, "the energy unit of %s is unknown (no unit register "
			     "value reported)", rapl_domains[domain].name);
		return -EOPNOTSUPP;
	}
	out->domain = &rapl_domains[domain];
	out->exponent = (uint8_t)exponent;
	out->joules_per_count = rapl_unit_code_joules((unsigned)exponent);
	return 0;
}
