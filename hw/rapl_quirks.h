/*
 * hw/rapl_quirks.h — the one table of RAPL energy units that do not come from the unit register,
 * shared by msrd (backend/probe.c, which reports a per-domain exponent) and libhaecer
 * (libclient/event_db_rapl.c, which derives one when msrd reports none). Header only.
 *
 * Every other domain counts in 2^-ESU J, ESU = RAPL_POWER_UNIT[12:8] (Intel SDM vol. 3B 15.10.1;
 * AMD PPR 17h/19h MSRC001_0299 has the same layout).
 *
 * Checked entry by entry (2026-11) against both of the kernel's lists, which agree:
 *   arch/x86/events/rapl.c, rapl_model_match: model_hsx and model_knl carry
 *     RAPL_UNIT_QUIRK_INTEL_HSW (DRAM unit 16); model_spr carries RAPL_UNIT_QUIRK_INTEL_SPR, which
 *     since commit "perf/x86/rapl: Use standard Energy Unit for SPR Dram RAPL domain" (Zhang Rui,
 *     2023, v6.5) sets only the PSYS unit to 0 (whole joules) and no longer the DRAM unit;
 *   drivers/powercap/intel_rapl_common.c, rapl_ids: rapl_defaults_hsw_server
 *     (dram_domain_energy_unit = 15.3 uJ = 2^-16 J) for the same eight models;
 *     rapl_defaults_spr_server (psys_domain_energy_unit = 1 J, no DRAM unit) for SPR and EMR.
 * Source of the DRAM unit itself: Intel Xeon E5-1600/2600 v3 datasheet vol. 2 (330784-001),
 * cited by both drivers.
 */
#ifndef HAECER_HW_RAPL_QUIRKS_H
#define HAECER_HW_RAPL_QUIRKS_H

#include <stdbool.h>
#include <stdint.h>

#include "hw/msr.h"

struct rapl_unit_quirk {
	uint32_t model;      /* Intel family 6 display model */
	uint8_t domain;      /* enum rapl_domain */
	uint8_t exponent;    /* J = count * 2^-exponent, whatever RAPL_POWER_UNIT says */
	const char *source;  /* the kernel's name for the model and its table entry */
};

static const struct rapl_unit_quirk rapl_unit_quirks[] = {
	{ 0x3F, RAPL_DOMAIN_DRAM, 16, "HASWELL_X: rapl.c model_hsx, powercap hsw_server" },
	{ 0x4F, RAPL_DOMAIN_DRAM, 16, "BROADWELL_X: rapl.c model_hsx, powercap hsw_server" },
	{ 0x56, RAPL_DOMAIN_DRAM, 16, "BROADWELL_D: rapl.c model_hsx, powercap hsw_server" },
	{ 0x57, RAPL_DOMAIN_DRAM, 16, "XEON_PHI_KNL: rapl.c model_knl, powercap hsw_server" },
	{ 0x85, RAPL_DOMAIN_DRAM, 16, "XEON_PHI_KNM: rapl.c model_knl, powercap hsw_server" },
	{ 0x55, RAPL_DOMAIN_DRAM, 16, "SKYLAKE_X (and Cascade/Cooper Lake): rapl.c model_hsx, "
				      "powercap hsw_server" },
	{ 0x6A, RAPL_DOMAIN_DRAM, 16, "ICELAKE_X: rapl.c model_hsx, powercap hsw_server" },
	{ 0x6C, RAPL_DOMAIN_DRAM, 16, "ICELAKE_D: rapl.c model_hsx, powercap hsw_server" },
	/* Sapphire/Emerald Rapids: PSYS only; their DRAM follows the register (not in this table). */
	{ 0x8F, RAPL_DOMAIN_PSYS, 0, "SAPPHIRERAPIDS_X: rapl.c model_spr, powercap spr_server" },
	{ 0xCF, RAPL_DOMAIN_PSYS, 0, "EMERALDRAPIDS_X: rapl.c model_spr, powercap spr_server" },
};

/* The fixed unit of `domain` on an Intel family/model, or NULL when the domain follows the
 * unit register. Quirks are Intel family 6 only: AMD and Hygon use the register everywhere. */
static inline const struct rapl_unit_quirk *rapl_unit_quirk_of(bool intel, uint32_t family,
							       uint32_t model, int domain)
{
	if (!intel || family != 6)
		return NULL;
	for (unsigned i = 0; i < sizeof(rapl_unit_quirks) / sizeof(rapl_unit_quirks[0]); i++) {
		if (rapl_unit_quirks[i].model == model && rapl_unit_quirks[i].domain == domain)
			return &rapl_unit_quirks[i];
	}
	return NULL;
}

#endif
