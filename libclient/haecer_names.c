/*
 * libclient/haecer_names.c — perf's vocabulary: the generic hardware event names (instructions,
 * cycles, ...) with perf's privilege modifiers (":u", ":k"), and the RAPL domains as perf and
 * the kernel's power PMU name them (energy-pkg, energy-cores, energy-gpu, energy-ram,
 * energy-psys; "power/energy-pkg/" too), mapped onto the seed's RAPLCounter values (RAPL_PKG,
 * RAPL_PP0, RAPL_PP1, RAPL_DRAM, RAPL_PSYS; on AMD RAPL_AMD_PKG and RAPL_AMD_CORE), so the
 * library, haecer-stat and haecer-mon speak one language.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *haecer_version(void)
{
	return HAECER_VERSION;
}

/* perf's names, as the kernel's power PMUs list them (events/energy-*). AMD's core energy
 * (MSR C001_029A) is one core's register, not the sum of the cores Intel's PP0 is: the kernel
 * names it energy-core, in its own power_core PMU (arch/x86/events/rapl.c, v6.13). */
static const char *const domain_names[RAPL_DOMAIN_COUNT] = {
	[RAPL_DOMAIN_PKG] = "energy-pkg",    [RAPL_DOMAIN_PP0] = "energy-cores",
	[RAPL_DOMAIN_PP1] = "energy-gpu",    [RAPL_DOMAIN_DRAM] = "energy-ram",
	[RAPL_DOMAIN_PSYS] = "energy-psys",  [RAPL_DOMAIN_AMD_CORE] = "energy-core",
	[RAPL_DOMAIN_AMD_PKG] = "energy-pkg",
};

/* The seed's enum names, accepted as synonyms. */
static const char *const seed_names[RAPL_DOMAIN_COUNT] = {
	[RAPL_DOMAIN_PKG] = "RAPL_PKG",   [RAPL_DOMAIN_PP0] = "RAPL_PP0",
	[RAPL_DOMAIN_PP1] = "RAPL_PP1",   [RAPL_DOMAIN_DRAM] = "RAPL_DRAM",
	[RAPL_DOMAIN_PSYS] = "RAPL_PSYS", [RAPL_DOMAIN_AMD_CORE] = "RAPL_AMD_CORE",
	[RAPL_DOMAIN_AMD_PKG] = "RAPL_AMD_PKG",
};

const char *haecer_energy_domain_name(unsigned domain)
{
	return domain < RAPL_DOMAIN_COUNT ? domain_names[domain] : NULL;
}

int haecer_energy_domain_by_name(const char *name, bool amd)
{
	char bare[32];
	size_t length;

	if (name == NULL)
		return -EINVAL;
	/* perf's PMU form: power/energy-pkg/ */
	length = strlen(name);
	if (strncmp(name, "power/", 6) == 0 && length > 7 && name[length - 1] == '/') {
		if (length - 7 >= sizeof(bare))
			return -ENOENT;
		memcpy(bare, name + 6, length - 7);
		bare[length - 7] = '\0';
		name = bare;
	}
	for (unsigned domain = 0; domain < RAPL_DOMAIN_COUNT; domain++) {
		bool amd_domain = domain == RAPL_DOMAIN_AMD_CORE || domain == RAPL_DOMAIN_AMD_PKG;
		if (strcasecmp(name, seed_names[domain]) == 0)
			return (int)domain;
		if (strcmp(name, domain_names[domain]) == 0 && amd_domain == amd)
			return (int)domain;
	}
	/* Scripts written before the kernel's name: still one core's register. */
	if (amd && strcmp(name, "energy-cores") == 0)
		return RAPL_DOMAIN_AMD_CORE;
	return -ENOENT;
}

/* perf's generic hardware events (perf list: "Hardware event") and the architectural events
 * they are (Intel SDM 19.2 / the AMD equivalents the event database maps them to). */
static const struct {
	const char *name;
	unsigned arch;
} generic_events[] = {
	{ "instructions", INSTRUCTIONS_RETIRED },    { "cycles", UNHALTED_CORE_CYCLES },
	{ "cpu-cycles", UNHALTED_CORE_CYCLES },      { "ref-cycles", UNHALTED_REF_CYCLES },
	{ "cache-references", LL_CACHE_REFERENCES }, { "cache-misses", LL_CACHE_MISSES },
	{ "branches", BRANCH_INS_RETIRED },          { "branch-instructions", BRANCH_INS_RETIRED },
	{ "branch-misses", BRANCH_MIS_RETIRED },
};

size_t haecer_generic_event_count(void)
{
	return sizeof(generic_events) / sizeof(generic_events[0]);
}

const char *haecer_generic_event_name(size_t index)
{
	return index < haecer_generic_event_count() ? generic_events[index].name : NULL;
}

int haecer__parse_generic_event(const char *name, unsigned *arch, uint32_t *flags)
{
	const char *colon = strchr(name, ':');
	size_t length = colon != NULL ? (size_t)(colon - name) : strlen(name);
	uint32_t levels = 0;

	for (size_t i = 0; i < haecer_generic_event_count(); i++) {
		if (strlen(generic_events[i].name) != length ||
		    strncmp(name, generic_events[i].name, length) != 0)
			continue;
		*arch = generic_events[i].arch;
		/* perf's modifiers: u user, k kernel; the others need what msrd cannot give. */
		for (const char *m = colon != NULL ? colon + 1 : ""; *m != '\0'; m++) {
			if (*m == 'u')
				levels |= HAECER_FLAG_USR;
			else if (*m == 'k')
				levels |= HAECER_FLAG_OS;
			else
				return haecer__fail(-EINVAL, "modifier '%c' of \"%s\" is not supported "
						    "(only u and k: user and kernel level)", *m, name);
		}
		if (colon != NULL && levels == 0)
			return haecer__fail(-EINVAL, "no modifier after ':' in \"%s\"", name);
		*flags = (*flags & ~(uint32_t)(HAECER_FLAG_USR | HAECER_FLAG_OS)) |
			 (levels != 0 ? levels : *flags & (HAECER_FLAG_USR | HAECER_FLAG_OS));
		return 1;
	}
	return 0;
}

int haecer_event_list(struct haecer_context *ctx, void (*each)(void *arg, const char *name),
		      void *arg, const char **pmu)
{
	char why[EVENT_DB_WHY_SIZE] = "";
	int count;

	haecer__clear_detail();
	if (ctx == NULL)
		return haecer__fail(-EINVAL, "no context");
	if (pmu != NULL)
		*pmu = event_db_pmu_name(ctx->db);
	count = event_db_pfm_list(ctx->db, each, arg, why, sizeof(why));
	if (count < 0)
		return haecer__fail(count, "%s", why[0] != '\0' ? why : "no libpfm4 event table");
	return count;
}
