/*
 * prof/package_energy.c — the whole machine's package energy at this moment, as calm measures a
 * run: msrd's 64-bit totals of the primary domain (PKG, or AMD's package register) of every
 * package, in one round trip. calm reads it around a plain run; record reads it at the two ends
 * of the program's run, so a profiled run is measured the same way, not interpolated between
 * the energy schedule's readings.
 */
#include "prof/prof.h"

#include <errno.h>
#include <math.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "hw/rapl_quirks.h"

int prof_package_joules(struct haecer_conn *conn, const struct haecer_machine_info *machine,
			double *joules)
{
	struct haecer_msr_op ops[PROF_MAX_PACKAGES];
	uint32_t address = machine->rapl_domains & (1u << RAPL_DOMAIN_AMD_PKG)
				   ? MSR_AMD_PKG_ENERGY_STATUS
				   : MSR_PKG_ENERGY_STATUS;
	size_t count = 0;

	for (uint32_t package = 0; package < machine->package_count &&
				   package < PROF_MAX_PACKAGES; package++) {
		uint32_t cpu = 0;
		while (cpu < machine->cpu_count && machine->cpu_package[cpu] != package)
			cpu++;
		if (cpu < machine->cpu_count)
			ops[count++] = (struct haecer_msr_op){ .kind = HAECER_MSR_ENERGY_READ,
							       .cpu = cpu, .address = address };
	}
	if (count == 0)
		return -ENODEV;
	int status = haecer_msr_batch(conn, ops, count);
	if (status < 0)
		return status;
	unsigned exponent = RAPL_UNIT_ENERGY(machine->rapl_power_unit);
	int domain = rapl_domain_of_address(address);
	if (domain >= 0 && machine->rapl_energy_exponent[domain])
		exponent = machine->rapl_energy_exponent[domain];
	double total = 0;
	for (size_t i = 0; i < count; i++) {
		if (ops[i].status < 0)
			return ops[i].status;
		total += (double)ops[i].total * rapl_unit_code_joules(exponent);
	}
	*joules = total;
	return 0;
}
