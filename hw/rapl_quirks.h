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
 *
 * Silvermont and Airmont (Bay Trail 0x37, Merrifield 0x4A, Cherry Trail 0x4C, Moorefield 0x5A)
 * read the same ESU field the other way round: a count is 2^ESU uJ, not 2^-ESU J
 * (drivers/powercap/intel_rapl_common.c, rapl_check_unit_atom: energy_unit =
 * ENERGY_UNIT_SCALE * (1 << value) nJ-scaled, i.e. 2^ESU uJ; used by rapl_defaults_byt, _tng,
 * _ann and _cht for exactly these four models; LIKWID's Silvermont code agrees). A Bay Trail
 * with ESU 5 counts 32 uJ; read as 2^-5 J it shows about 977 times its power. Such a unit is not
 * a power of two of joules, so it travels as a unit code (below) wherever an exponent does.
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

/* A unit code is what msrd reports and every reader converts with rapl_unit_code_joules():
 * 0..63 = 2^-code J (every other domain, the exponent it always was); RAPL_UNIT_CODE_MICROJOULE
 * | e = 2^e uJ (Silvermont/Airmont). A reader that knows only exponents refuses codes above 31
 * rather than misreading them. */
#define RAPL_UNIT_CODE_MICROJOULE 0x80u
#define RAPL_UNIT_CODE_MICROJOULE_MAX_E 31u

/* Granite Rapids (06_AD, 06_AE) has a platform (PSYS) energy domain only in TPMI: the kernel
 * serves it through drivers/powercap/intel_rapl_tpmi.c (powercap's psys zone), and no MSR-side
 * unit describes MSR_PLATFORM_ENERGY_STATUS there, so msrd does not count it by MSR. */
static inline bool rapl_psys_without_msr(bool intel, uint32_t family, uint32_t model)
{
	return intel && family == 6 && (model == 0xAD || model == 0xAE);
}

/* Is this one of the four Atom models whose energy unit is 2^ESU uJ? */
static inline bool rapl_unit_is_atom_microjoule(bool intel, uint32_t family, uint32_t model)
{
	static const uint32_t models[] = { 0x37, 0x4A, 0x4C, 0x5A };

	if (!intel || family != 6)
		return false;
	for (unsigned i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		if (models[i] == model)
			return true;
	}
	return false;
}

/* The unit code of `domain` given the raw unit register, as the kernel's drivers decide it. */
static inline uint8_t rapl_unit_code_of(bool intel, uint32_t family, uint32_t model, int domain,
					uint64_t unit_raw)
{
	const struct rapl_unit_quirk *quirk = rapl_unit_quirk_of(intel, family, model, domain);
	uint8_t esu = (uint8_t)RAPL_UNIT_ENERGY(unit_raw);

	if (quirk)
		return quirk->exponent;
	if (rapl_unit_is_atom_microjoule(intel, family, model))
		return (uint8_t)(RAPL_UNIT_CODE_MICROJOULE | esu);
	return esu;
}

static inline bool rapl_unit_code_is_microjoule(unsigned code)
{
	return (code & RAPL_UNIT_CODE_MICROJOULE) != 0;
}

/* Joules per count of a unit code (exact: powers of two and 10^-6 are representable enough for
 * a double; the exponent's 2^-code is exact). */
static inline double rapl_unit_code_joules(unsigned code)
{
	if (rapl_unit_code_is_microjoule(code))
		return (double)(1ull << (code & RAPL_UNIT_CODE_MICROJOULE_MAX_E)) * 1e-6;
	return 1.0 / (double)(1ull << (code & 63u));
}

/* Joules of `units` at a ring record's or a tool's signed unit exponent: 128..159 is the
 * microjoule code, anything else 2^-exponent J as it always was (out-of-range exponents from a
 * producer stay what ldexp makes of them). */
static inline double rapl_units_to_joules(uint64_t units, int exponent)
{
	if (exponent >= (int)RAPL_UNIT_CODE_MICROJOULE &&
	    exponent <= (int)(RAPL_UNIT_CODE_MICROJOULE | RAPL_UNIT_CODE_MICROJOULE_MAX_E))
		return (double)units * rapl_unit_code_joules((unsigned)exponent);
	return __builtin_ldexp((double)units, -exponent);
}

/* Register units in `microjoules` (rounded down): how a resolution in uJ becomes counts. */
static inline unsigned __int128 rapl_unit_code_units_of_uj(unsigned code, uint64_t microjoules)
{
	if (rapl_unit_code_is_microjoule(code))
		return microjoules >> (code & RAPL_UNIT_CODE_MICROJOULE_MAX_E);
	return ((unsigned __int128)microjoules << (code & 63u)) / 1000000u;
}

#endif
