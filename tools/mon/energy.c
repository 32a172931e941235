/*
 * tools/mon/energy.c — energy between readings: RAPL's 32-bit registers wrap (after minutes at
 * high power), msrd's 64-bit totals do not; both may appear in a ring.
 */
#include "tools/mon/mon.h"

#include <errno.h>
#include <math.h>

#include "haecer/perfmon.h"
#include "hw/msr.h"
#include "hw/rapl_quirks.h"

#define WRAP_32 (UINT64_C(1) << 32)

int mon_energy_delta(uint64_t previous, uint64_t value, uint64_t *delta)
{
	if (value >= previous) {
		*delta = value - previous;
		return 0;
	}
	if (previous < WRAP_32) {
		*delta = value + WRAP_32 - previous;
		return 0;
	}
	return -ERANGE;
}

double mon_joules(uint64_t units, int exponent)
{
	return rapl_units_to_joules(units, exponent);
}

/* Named with perf's names (haecer_energy_domain_name), the one vocabulary of every tool. */
static const struct {
	enum rapl_domain domain;
	bool per_package;
} rapl_registers[] = {
	{ RAPL_DOMAIN_PKG, true },  { RAPL_DOMAIN_PP0, true },   { RAPL_DOMAIN_PP1, true },
	{ RAPL_DOMAIN_DRAM, true }, { RAPL_DOMAIN_PSYS, false }, { RAPL_DOMAIN_AMD_PKG, true },
};

/* The first CPU of `package` on die `die` (any die when the machine has one a package). */
static bool first_cpu_of(const struct haecer_machine_info *machine, uint32_t package, int die,
			 uint32_t *cpu)
{
	uint32_t cpus = machine->cpu_count < HAECER_MAX_CPUS ? machine->cpu_count
							       : HAECER_MAX_CPUS;

	for (*cpu = 0; *cpu < cpus; (*cpu)++)
		if (machine->cpu_package[*cpu] == package &&
		    (die < 0 || machine->cpu_die[*cpu] == (uint32_t)die))
			return true;
	return false;
}

/* Entries of one domain of one package: one per die of the package when energy is per die
 * (Intel multi-die packages: HAECER_MACHINE_DIES), else one. */
static size_t package_entries(const struct haecer_machine_info *machine, enum rapl_domain domain,
			      uint32_t package, struct mon_energy_domain *out, size_t max)
{
	bool dies = (machine->flags & HAECER_MACHINE_DIES) != 0;
	uint32_t cpus = machine->cpu_count < HAECER_MAX_CPUS ? machine->cpu_count
							       : HAECER_MAX_CPUS;
	size_t count = 0;

	for (uint32_t die = 0; die < (dies ? cpus : 1) && count < max; die++) {
		uint32_t cpu;
		if (!first_cpu_of(machine, package, dies ? (int)die : -1, &cpu))
			continue;
		out[count++] = (struct mon_energy_domain){
			.domain = domain,
			.name = haecer_energy_domain_name(domain),
			.package = package,
			.die = dies ? die : package,
			.cpu = cpu,
			.address = rapl_energy_status_address(domain),
			.exponent = machine->rapl_energy_exponent[domain],
		};
	}
	return count;
}

size_t mon_energy_dies(const struct haecer_machine_info *machine, struct mon_energy_domain *out,
		       size_t max)
{
	size_t count = 0;

	for (size_t reg = 0; reg < sizeof(rapl_registers) / sizeof(rapl_registers[0]); reg++) {
		enum rapl_domain domain = rapl_registers[reg].domain;
		if (!(machine->rapl_domains & (1u << domain)))
			continue;
		for (uint32_t package = 0; package < machine->package_count; package++) {
			count += package_entries(machine, domain, package, out + count,
						 max - count);
			/* PSYS is the platform's: one, read through the first package. */
			if (!rapl_registers[reg].per_package)
				break;
		}
	}
	return count;
}
