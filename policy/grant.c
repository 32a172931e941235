/*
 * policy/grant.c — one client's rights: the union of every rule that matches it, resolved once
 * into sorted arrays so that each question on the hot path is a binary search.
 */
#include "policy/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* An entry's interval as granted: the union over matching rules. */
struct grant_range {
	uint32_t first;
	uint32_t last;
	uint64_t write_mask;
	bool read;
};

/* An energy-status register readable only coarsely: no matching rule grants it in full. */
struct grant_energy {
	uint32_t address;
	struct policy_energy_limit limit;
};

struct policy_grant {
	bool matched;
	bool persistent_schedules;
	bool sim_control;
	struct policy_perf perf;
	struct grant_range *ranges; /* ascending, disjoint */
	size_t range_count;
	struct grant_energy *energy; /* ascending */
	size_t energy_count;
	struct policy_majors create_rings; /* ascending, merged */
	struct policy_majors monitor_rings;
};

/* What the matching rules give one entry, before it becomes a grant_range. */
struct entry_union {
	bool read;             /* some rule grants read */
	bool full_energy;      /* some rule grants read without an energy limit */
	bool coarse;           /* some rule grants read with an energy limit */
	struct policy_energy_limit limit; /* the least restrictive of those limits */
	uint64_t write_mask;
};

static bool subject_in_group(const struct policy_subject *subject, uint32_t gid)
{
	if ((uint32_t)subject->gid == gid)
		return true;
	for (size_t i = 0; subject->groups != NULL && i < subject->group_count; i++) {
		if ((uint32_t)subject->groups[i] == gid)
			return true;
	}
	return false;
}

/* subject NULL: everyone at once (policy_resolve_everyone), so every rule that names anyone. */
static bool rule_matches(const struct policy_rule *rule, const struct policy_subject *subject)
{
	if (!rule->match_known)
		return false;
	if (subject == NULL)
		return true;
	switch (rule->kind) {
	case POLICY_MATCH_ANY:
		return true;
	case POLICY_MATCH_UID:
	case POLICY_MATCH_USER:
		return (uint32_t)subject->uid == rule->match_id;
	case POLICY_MATCH_GID:
	case POLICY_MATCH_GROUP:
		return subject_in_group(subject, rule->match_id);
	}
	return false;
}

static void min_limit(struct policy_energy_limit *into, const struct policy_energy_limit *other)
{
	if (other->min_interval_ms < into->min_interval_ms)
		into->min_interval_ms = other->min_interval_ms;
	if (other->resolution_uj < into->resolution_uj)
		into->resolution_uj = other->resolution_uj;
}

/* Most permissive wins: full read beats coarse read, two coarse limits give the smaller
 * interval and the finer resolution, masks OR together. */
static void unite_rule(const struct policy *policy, const struct policy_rule *rule,
		       struct entry_union *unions)
{
	for (size_t i = 0; i < rule->entry_count; i++) {
		const struct policy_msr *msr = &policy->msrs[rule->entries[i]];
		struct entry_union *entry = &unions[rule->entries[i]];

		if (!rule->read_only)
			entry->write_mask |= msr->write_mask;
		if (!msr->read)
			continue;
		entry->read = true;
		if (!rule->coarse_energy) {
			entry->full_energy = true;
		} else if (!entry->coarse) {
			entry->coarse = true;
			entry->limit = rule->energy;
		} else {
			min_limit(&entry->limit, &rule->energy);
		}
	}
}

static int append_majors(struct policy_majors *into, const struct policy_majors *from)
{
	if (from->count == 0)
		return 0;
	struct policy_major_range *grown =
		realloc(into->ranges, (into->count + from->count) * sizeof(*grown));
	if (grown == NULL)
		return -ENOMEM;
	memcpy(grown + into->count, from->ranges, from->count * sizeof(*grown));
	into->ranges = grown;
	into->count += from->count;
	return 0;
}

static int compare_major(const void *a, const void *b)
{
	const struct policy_major_range *left = a, *right = b;

	return (left->first > right->first) - (left->first < right->first);
}

static void merge_majors(struct policy_majors *majors)
{
	size_t kept = 0;

	if (majors->count == 0)
		return;
	qsort(majors->ranges, majors->count, sizeof(*majors->ranges), compare_major);
	for (size_t i = 1; i < majors->count; i++) {
		struct policy_major_range *last = &majors->ranges[kept];
		const struct policy_major_range *next = &majors->ranges[i];
		if ((uint32_t)next->first <= (uint32_t)last->last + 1) {
			if (next->last > last->last)
				last->last = next->last;
		} else {
			majors->ranges[++kept] = *next;
		}
	}
	majors->count = kept + 1;
}

static size_t count_energy_registers(const struct policy_msr *msr)
{
	size_t count = 0;

	for (size_t k = 0; k < policy_energy_register_count; k++)
		count += msr->first <= policy_energy_registers[k] &&
			 policy_energy_registers[k] <= msr->last;
	return count;
}

/* Turn the per-entry unions into the sorted arrays the questions search. */
static int fill_arrays(const struct policy *policy, const struct entry_union *unions,
		       struct policy_grant *grant)
{
	size_t ranges = 0, energy = 0;

	for (size_t i = 0; i < policy->msr_count; i++) {
		const struct entry_union *entry = &unions[i];
		ranges += entry->read || entry->write_mask != 0;
		if (entry->coarse && !entry->full_energy)
			energy += count_energy_registers(&policy->msrs[i]);
	}
	grant->ranges = calloc(ranges ? ranges : 1, sizeof(*grant->ranges));
	grant->energy = calloc(energy ? energy : 1, sizeof(*grant->energy));
	if (grant->ranges == NULL || grant->energy == NULL)
		return -ENOMEM;
	for (size_t k = 0; k < policy->msr_count; k++) {
		size_t i = policy->by_address[k];
		const struct policy_msr *msr = &policy->msrs[i];
		const struct entry_union *entry = &unions[i];

		if (!entry->read && entry->write_mask == 0)
			continue;
		grant->ranges[grant->range_count++] = (struct grant_range){
			msr->first, msr->last, entry->write_mask, entry->read
		};
		if (!entry->coarse || entry->full_energy)
			continue;
		for (size_t e = 0; e < policy_energy_register_count; e++) {
			uint32_t address = policy_energy_registers[e];
			if (msr->first <= address && address <= msr->last)
				grant->energy[grant->energy_count++] =
					(struct grant_energy){ address, entry->limit };
		}
	}
	return 0;
}

static int compare_energy(const void *a, const void *b)
{
	const struct grant_energy *left = a, *right = b;

	return (left->address > right->address) - (left->address < right->address);
}

static int resolve_rules(const struct policy *policy, const struct policy_subject *subject,
			 struct entry_union *unions, struct policy_grant *grant)
{
	for (size_t i = 0; i < policy->rule_count; i++) {
		const struct policy_rule *rule = &policy->rules[i];

		if (!rule_matches(rule, subject))
			continue;
		grant->matched = true;
		grant->persistent_schedules |= rule->persistent_schedules;
		grant->sim_control |= rule->sim_control;
		grant->perf.classes |= rule->perf.classes;
		grant->perf.cpu_wide |= rule->perf.cpu_wide;
		grant->perf.sampling |= rule->perf.sampling;
		if (rule->perf.max_open > grant->perf.max_open)
			grant->perf.max_open = rule->perf.max_open;
		unite_rule(policy, rule, unions);
		int result = append_majors(&grant->create_rings, &rule->create_rings);
		if (result == 0)
			result = append_majors(&grant->monitor_rings, &rule->monitor_rings);
		if (result < 0)
			return result;
	}
	merge_majors(&grant->create_rings);
	merge_majors(&grant->monitor_rings);
	int result = fill_arrays(policy, unions, grant);
	if (result == 0)
		qsort(grant->energy, grant->energy_count, sizeof(*grant->energy), compare_energy);
	return result;
}

/* subject NULL: every rule's grant together. */
static int resolve_for(const struct policy *policy, const struct policy_subject *subject,
		       struct policy_grant **out)
{
	struct entry_union *unions = NULL;
	struct policy_grant *grant = NULL;
	int result = -ENOMEM;

	grant = calloc(1, sizeof(*grant));
	unions = calloc(policy->msr_count ? policy->msr_count : 1, sizeof(*unions));
	if (grant == NULL || unions == NULL)
		goto out;
	result = resolve_rules(policy, subject, unions, grant);
out:
	free(unions);
	if (result < 0) {
		policy_grant_free(grant);
		grant = NULL;
	}
	*out = grant;
	return result;
}

int policy_resolve(const struct policy *policy, const struct policy_subject *subject,
		   struct policy_grant **out)
{
	if (out == NULL)
		return -EINVAL;
	*out = NULL;
	if (policy == NULL || subject == NULL || (subject->group_count > 0 && !subject->groups))
		return -EINVAL;
	return resolve_for(policy, subject, out);
}

int policy_resolve_everyone(const struct policy *policy, struct policy_grant **out)
{
	if (out == NULL)
		return -EINVAL;
	*out = NULL;
	if (policy == NULL)
		return -EINVAL;
	return resolve_for(policy, NULL, out);
}

void policy_grant_free(struct policy_grant *grant)
{
	if (grant == NULL)
		return;
	free(grant->ranges);
	free(grant->energy);
	free(grant->create_rings.ranges);
	free(grant->monitor_rings.ranges);
	free(grant);
}

bool policy_grant_matched(const struct policy_grant *grant)
{
	return grant != NULL && grant->matched;
}

/* bsearch comparators: a uint32_t key against an element's inclusive interval. */
static int key_in_range(const void *key, const void *element)
{
	uint32_t address = *(const uint32_t *)key;
	const struct grant_range *range = element;

	return address < range->first ? -1 : address > range->last ? 1 : 0;
}

static int key_in_majors(const void *key, const void *element)
{
	uint32_t major = *(const uint32_t *)key;
	const struct policy_major_range *range = element;

	return major < range->first ? -1 : major > range->last ? 1 : 0;
}

static int key_is_energy(const void *key, const void *element)
{
	uint32_t address = *(const uint32_t *)key;
	const struct grant_energy *energy = element;

	return (address > energy->address) - (address < energy->address);
}

static const struct grant_range *find_range(const struct policy_grant *grant, uint32_t address)
{
	if (grant == NULL || grant->range_count == 0)
		return NULL;
	return bsearch(&address, grant->ranges, grant->range_count, sizeof(*grant->ranges),
		       key_in_range);
}

bool policy_allows_read(const struct policy_grant *grant, uint32_t address)
{
	const struct grant_range *range = find_range(grant, address);
	return range != NULL && range->read;
}

uint64_t policy_write_mask(const struct policy_grant *grant, uint32_t address)
{
	const struct grant_range *range = find_range(grant, address);
	return range != NULL ? range->write_mask : 0;
}

int policy_allows_write(const struct policy_grant *grant, uint32_t address, uint64_t current,
			uint64_t proposed)
{
	uint64_t mask = policy_write_mask(grant, address);

	if (mask == 0)
		return -EPERM;
	if (((current ^ proposed) & ~mask) != 0)
		return -EACCES;
	return 0;
}

static bool majors_contain(const struct policy_majors *majors, uint16_t major)
{
	uint32_t key = major;

	return majors->count > 0 && bsearch(&key, majors->ranges, majors->count,
					    sizeof(*majors->ranges), key_in_majors) != NULL;
}

bool policy_allows_create_ring(const struct policy_grant *grant, uint16_t major)
{
	return grant != NULL && majors_contain(&grant->create_rings, major);
}

bool policy_allows_monitor(const struct policy_grant *grant, uint16_t major)
{
	return grant != NULL && majors_contain(&grant->monitor_rings, major);
}

bool policy_allows_persistent_schedule(const struct policy_grant *grant)
{
	return grant != NULL && grant->persistent_schedules;
}

bool policy_allows_sim_control(const struct policy_grant *grant)
{
	return grant != NULL && grant->sim_control;
}

int policy_energy_limit(const struct policy_grant *grant, uint32_t address,
			struct policy_energy_limit *limit)
{
	if (grant == NULL || grant->energy_count == 0)
		return 0;
	const struct grant_energy *energy = bsearch(&address, grant->energy, grant->energy_count,
						    sizeof(*grant->energy), key_is_energy);
	if (energy == NULL)
		return 0;
	if (limit != NULL)
		*limit = energy->limit;
	return 1;
}

int policy_coarse_energy(const struct policy *policy, struct policy_energy_limit *limit)
{
	struct policy_energy_limit coarsest = { 0 };
	bool found = false;

	for (size_t i = 0; policy != NULL && i < policy->rule_count; i++) {
		const struct policy_rule *rule = &policy->rules[i];
		if (!rule->coarse_energy)
			continue;
		found = true;
		if (rule->energy.min_interval_ms > coarsest.min_interval_ms)
			coarsest.min_interval_ms = rule->energy.min_interval_ms;
		if (rule->energy.resolution_uj > coarsest.resolution_uj)
			coarsest.resolution_uj = rule->energy.resolution_uj;
	}
	if (found && limit != NULL)
		*limit = coarsest;
	return found ? 1 : 0;
}

void policy_perf_grant(const struct policy_grant *grant, struct policy_perf *out)
{
	static const struct policy_perf none;

	*out = grant != NULL ? grant->perf : none;
}
