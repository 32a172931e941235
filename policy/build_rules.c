/*
 * policy/build_rules.c — the rules' part of the consistency pass: who a rule matches (users and
 * groups looked up once, by name or id) and what it grants (MSR sets, ring majors, energy,
 * capabilities, perf events), each error placed at its node.
 */
#include "policy/build.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- rules: who ---- */

enum lookup_kind { LOOKUP_USER_NAME, LOOKUP_USER_ID, LOOKUP_GROUP_NAME, LOOKUP_GROUP_ID };

/* One getpw / getgr call into `buffer`: 1 found, 0 not found, or the call's error number. */
static int lookup_once(enum lookup_kind kind, const char *name, uint32_t *id, char *buffer,
		       size_t size, char *found, size_t found_size)
{
	struct passwd user, *user_found = NULL;
	struct group group, *group_found = NULL;
	int status;

	if (kind == LOOKUP_USER_NAME)
		status = getpwnam_r(name, &user, buffer, size, &user_found);
	else if (kind == LOOKUP_USER_ID)
		status = getpwuid_r((uid_t)*id, &user, buffer, size, &user_found);
	else if (kind == LOOKUP_GROUP_NAME)
		status = getgrnam_r(name, &group, buffer, size, &group_found);
	else
		status = getgrgid_r((gid_t)*id, &group, buffer, size, &group_found);
	if (user_found != NULL) {
		*id = (uint32_t)user.pw_uid;
		snprintf(found, found_size, "%s", user.pw_name);
		return 1;
	}
	if (group_found != NULL) {
		*id = (uint32_t)group.gr_gid;
		snprintf(found, found_size, "%s", group.gr_name);
		return 1;
	}
	/* "not found" comes back as 0 or as one of these, depending on the NSS module */
	if (status == ENOENT || status == ESRCH || status == EBADF || status == EPERM)
		return 0;
	return status == 0 ? 0 : -status;
}

/* 1 and *id and `found` (the name) filled when the account exists, 0 when it does not,
 * -errno when the lookup failed. getpw*_r want a buffer of unknown size: grow it. */
static int lookup_account(enum lookup_kind kind, const char *name, uint32_t *id, char *found,
			  size_t found_size)
{
	int result = -ERANGE;

	for (size_t size = 1024; result == -ERANGE && size <= (1u << 20); size *= 2) {
		char *buffer = malloc(size);
		if (buffer == NULL)
			return -ENOMEM;
		result = lookup_once(kind, name, id, buffer, size, found, found_size);
		free(buffer);
	}
	return result;
}

static int match_by_name(struct build *build, yaml_node_t *node, bool group, const char *name,
			 struct policy_rule *rule)
{
	char resolved[64], comment[96];
	const char *kind = group ? "group" : "user";

	if (!policy_account_name_valid(name))
		return build_fail(build, node, "%s name '%s' is not valid", kind, name);
	rule->kind = group ? POLICY_MATCH_GROUP : POLICY_MATCH_USER;
	rule->match_name = policy_strdup(name);
	if (rule->match_name == NULL)
		return -ENOMEM;
	int found = lookup_account(group ? LOOKUP_GROUP_NAME : LOOKUP_USER_NAME, name,
				   &rule->match_id, resolved, sizeof(resolved));
	if (found < 0)
		return build_fail(build, node, "cannot look up %s '%s': %s", kind, name,
				  strerror(-found));
	rule->match_known = found == 1;
	if (found == 1) {
		snprintf(comment, sizeof(comment), "%s %u", group ? "gid" : "uid", rule->match_id);
	} else {
		snprintf(comment, sizeof(comment), "no such %s here: matches nobody", kind);
		int result = policy_warn(build->policy, build_line_of(node),
					 "%s '%s' does not exist on this system: its rule "
					 "matches nobody",
					 kind, name);
		if (result < 0)
			return result;
	}
	rule->match_comment = policy_strdup(comment);
	return rule->match_comment ? 0 : -ENOMEM;
}

static int match_by_id(struct build *build, yaml_node_t *node, bool group, const char *text,
		       struct policy_rule *rule)
{
	const char *kind = group ? "gid" : "uid";
	char resolved[64], comment[96];
	uint64_t id;

	if (policy_parse_u64(text, &id) < 0)
		return build_fail(build, node, "%s '%s' is not a number; use '%s: %s' for a name", kind,
				  text, group ? "group" : "user", text);
	if (id >= UINT32_MAX)
		return build_fail(build, node, "%s %s is not a valid id (0 to 4294967294)", kind, text);
	rule->kind = group ? POLICY_MATCH_GID : POLICY_MATCH_UID;
	rule->match_id = (uint32_t)id;
	rule->match_known = true;
	uint32_t lookup_id = rule->match_id;
	int found = lookup_account(group ? LOOKUP_GROUP_ID : LOOKUP_USER_ID, NULL, &lookup_id,
				   resolved, sizeof(resolved));
	if (found <= 0)
		return 0; /* an id without a name still matches processes running as it */
	snprintf(comment, sizeof(comment), "%s %s", group ? "group" : "user", resolved);
	rule->match_comment = policy_strdup(comment);
	return rule->match_comment ? 0 : -ENOMEM;
}

static int build_match(struct build *build, yaml_node_t *rule_node, const struct raw_match *raw,
		       struct policy_rule *rule)
{
	static const char *const keys[] = { "uid", "user", "gid", "group", "any" };
	const char *const values[] = { raw->uid, raw->user, raw->gid, raw->group, raw->any };
	yaml_node_t *match = build_value_node(build, rule_node, "match");
	size_t chosen = SIZE_MAX;

	for (size_t i = 0; i < 5; i++) {
		if (values[i] == NULL)
			continue;
		if (chosen != SIZE_MAX)
			return build_fail(build, policy_yaml_key(build->document, match, keys[i], 0),
					  "match takes exactly one of uid, user, gid, group, any "
					  "(found %s and %s)",
					  keys[chosen], keys[i]);
		chosen = i;
	}
	if (chosen == SIZE_MAX)
		return build_fail(build, match,
				  "match is empty: give one of uid, user, gid, group or any: true");
	yaml_node_t *node = build_value_node(build, match, keys[chosen]);
	if (chosen == 0 || chosen == 2)
		return match_by_id(build, node, chosen == 2, values[chosen], rule);
	if (chosen == 1 || chosen == 3)
		return match_by_name(build, node, chosen == 3, values[chosen], rule);
	bool any = false;
	int result = build_parse_bool(build, node, "any", raw->any, &any);
	if (result < 0)
		return result;
	if (!any)
		return build_fail(build, node, "any must be true (to match nobody, delete the rule)");
	rule->kind = POLICY_MATCH_ANY;
	rule->match_known = true;
	return 0;
}

/* ---- rules: what ---- */

static bool msr_in_set(const struct policy_msr *msr, const char *set)
{
	for (size_t i = 0; i < msr->set_count; i++) {
		if (strcmp(msr->sets[i], set) == 0)
			return true;
	}
	return false;
}

static bool set_exists(const struct policy *policy, const char *set)
{
	for (size_t i = 0; i < policy->msr_count; i++) {
		if (msr_in_set(&policy->msrs[i], set))
			return true;
	}
	return false;
}

static bool rule_allows_msr(const struct policy_rule *rule, const struct policy_msr *msr)
{
	for (size_t i = 0; i < rule->allow_count; i++) {
		if (strcmp(rule->allow[i], "all") == 0 || msr_in_set(msr, rule->allow[i]))
			return true;
	}
	return false;
}

/* Precompute which entries the rule grants so that resolving a client walks only those. */
static int collect_entries(const struct policy *policy, struct policy_rule *rule)
{
	if (rule->allow_count == 0 || policy->msr_count == 0)
		return 0;
	rule->entries = calloc(policy->msr_count, sizeof(*rule->entries));
	if (rule->entries == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < policy->msr_count; i++) {
		if (rule_allows_msr(rule, &policy->msrs[i]))
			rule->entries[rule->entry_count++] = i;
	}
	return 0;
}

static int build_allow(struct build *build, yaml_node_t *rule_node, const struct raw_rule *raw,
		       struct policy_rule *rule)
{
	yaml_node_t *list = build_value_node(build, rule_node, "allow");

	if (raw->allow_count == 0)
		return 0;
	rule->allow = calloc(raw->allow_count, sizeof(*rule->allow));
	if (rule->allow == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < raw->allow_count; i++) {
		const char *name = raw->allow[i];
		yaml_node_t *node = build_item_node(build, list, i);

		for (size_t k = 0; k < i; k++) {
			if (strcmp(rule->allow[k], name) == 0)
				return build_fail(build, node, "set '%s' listed twice in allow", name);
		}
		if (strcmp(name, "all") != 0 && !set_exists(build->policy, name))
			return build_fail(build, node,
					  "allow names the unknown set '%s' (no MSR entry has it)", name);
		rule->allow[i] = policy_strdup(name);
		if (rule->allow[i] == NULL)
			return -ENOMEM;
		rule->allow_count++;
	}
	return collect_entries(build->policy, rule);
}

static int parse_major(struct build *build, yaml_node_t *node, const char *text, uint16_t *out)
{
	uint64_t value;

	if (policy_parse_u64(text, &value) < 0)
		return build_fail(build, node, "ring major '%s' is not a number or a range like 1-99",
				  text);
	if (value > UINT16_MAX)
		return build_fail(build, node, "ring major %s is out of range (0-65535)", text);
	*out = (uint16_t)value;
	return 0;
}

static int parse_major_range(struct build *build, yaml_node_t *node, const char *text,
			     struct policy_major_range *range)
{
	char first[32], last[32];
	const char *dash = strchr(text, '-');

	if (dash == NULL) {
		int result = parse_major(build, node, text, &range->first);
		range->last = range->first;
		return result;
	}
	if ((size_t)(dash - text) >= sizeof(first) || strlen(dash + 1) >= sizeof(last))
		return build_fail(build, node, "ring major '%s' is not a number or a range like 1-99",
				  text);
	snprintf(first, sizeof(first), "%.*s", (int)(dash - text), text);
	snprintf(last, sizeof(last), "%s", dash + 1);
	int result = parse_major(build, node, first, &range->first);
	if (result == 0)
		result = parse_major(build, node, last, &range->last);
	if (result == 0 && range->first > range->last)
		return build_fail(build, node, "ring major range %s is backwards (first above last)",
				  text);
	return result;
}

static int compare_major_range(const void *a, const void *b)
{
	const struct policy_major_range *left = a, *right = b;

	if (left->first != right->first)
		return left->first < right->first ? -1 : 1;
	return (left->last > right->last) - (left->last < right->last);
}

static int build_majors(struct build *build, yaml_node_t *rule_node, const char *key,
			char **texts, unsigned count, struct policy_majors *majors)
{
	yaml_node_t *list = build_value_node(build, rule_node, key);

	if (count == 0)
		return 0;
	majors->ranges = calloc(count, sizeof(*majors->ranges));
	if (majors->ranges == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		struct policy_major_range *range = &majors->ranges[i];
		yaml_node_t *node = build_item_node(build, list, i);
		int result = parse_major_range(build, node, texts[i], range);
		if (result < 0)
			return result;
		for (size_t k = 0; k < i; k++) {
			const struct policy_major_range *other = &majors->ranges[k];
			if (range->first <= other->last && other->first <= range->last)
				return build_fail(build, node, "ring majors %s and %s overlap", texts[k],
						  texts[i]);
		}
		majors->count++;
	}
	qsort(majors->ranges, majors->count, sizeof(*majors->ranges), compare_major_range);
	return 0;
}

static int build_energy(struct build *build, yaml_node_t *rule_node, const struct raw_energy *raw,
			struct policy_rule *rule)
{
	/* A day between reads and a megajoule of rounding are far beyond any useful mitigation;
	 * larger values are typing mistakes. */
	static const uint64_t max_interval_ms = 86400000, max_resolution_uj = 1000000000000ull;
	yaml_node_t *energy = build_value_node(build, rule_node, "energy");
	uint64_t interval = 0, resolution = 0;
	int result = 0;

	if (raw == NULL)
		return 0;
	if (raw->min_interval_ms != NULL)
		result = build_parse_number(build, build_value_node(build, energy, "min_interval_ms"),
					    "min_interval_ms", raw->min_interval_ms, 64, &interval);
	if (result == 0 && raw->resolution_uj != NULL)
		result = build_parse_number(build, build_value_node(build, energy, "resolution_uj"),
					    "resolution_uj", raw->resolution_uj, 64, &resolution);
	if (result < 0)
		return result;
	if (interval > max_interval_ms)
		return build_fail(build, build_value_node(build, energy, "min_interval_ms"),
				  "min_interval_ms %s is above the limit of 86400000 (one day)",
				  raw->min_interval_ms);
	if (resolution > max_resolution_uj)
		return build_fail(build, build_value_node(build, energy, "resolution_uj"),
				  "resolution_uj %s is above the limit of 1000000000000 (1 MJ)",
				  raw->resolution_uj);
	if (interval == 0 && resolution == 0)
		return build_fail(build, energy,
				  "energy limit limits nothing: set min_interval_ms or resolution_uj "
				  "above 0");
	rule->coarse_energy = true;
	rule->energy.min_interval_ms = (uint32_t)interval;
	rule->energy.resolution_uj = resolution;
	return 0;
}

static int build_capabilities(struct build *build, yaml_node_t *rule_node,
			      const struct raw_rule *raw, struct policy_rule *rule)
{
	yaml_node_t *list = build_value_node(build, rule_node, "capabilities");

	for (size_t i = 0; i < raw->capabilities_count; i++) {
		const char *name = raw->capabilities[i];
		yaml_node_t *node = build_item_node(build, list, i);
		bool *flag = NULL;

		if (strcmp(name, "persistent_schedules") == 0)
			flag = &rule->persistent_schedules;
		else if (strcmp(name, "sim_control") == 0)
			flag = &rule->sim_control;
		else
			return build_fail(build, node,
					  "unknown capability '%s' (known: persistent_schedules, "
					  "sim_control)",
					  name);
		if (*flag)
			return build_fail(build, node, "capability '%s' listed twice", name);
		*flag = true;
	}
	return 0;
}

static const struct {
	const char *name;
	uint32_t bit;
} perf_classes[] = {
	{ "software", POLICY_PERF_SOFTWARE },
	{ "msr", POLICY_PERF_MSR },
	{ "power", POLICY_PERF_POWER },
	{ "core", POLICY_PERF_CORE },
};

static int build_perf_events(struct build *build, yaml_node_t *perf, const struct raw_perf *raw,
			     struct policy_perf *out)
{
	yaml_node_t *list = build_value_node(build, perf, "events");

	for (size_t i = 0; i < raw->events_count; i++) {
		size_t k = 0;

		while (k < sizeof(perf_classes) / sizeof(perf_classes[0]) &&
		       strcmp(raw->events[i], perf_classes[k].name) != 0)
			k++;
		if (k == sizeof(perf_classes) / sizeof(perf_classes[0]))
			return build_fail(build, build_item_node(build, list, i),
					  "unknown perf event class '%s' (known: software, msr, power, "
					  "core)", raw->events[i]);
		out->classes |= perf_classes[k].bit;
	}
	if (out->classes == 0)
		return build_fail(build, perf, "perf grants no events: list events (software, msr, "
				  "power, core)");
	return 0;
}

static int build_perf(struct build *build, yaml_node_t *rule_node, const struct raw_perf *raw,
		      struct policy_rule *rule)
{
	yaml_node_t *perf = build_value_node(build, rule_node, "perf");
	uint64_t max_open = POLICY_PERF_DEFAULT_MAX_OPEN;
	int result;

	if (raw == NULL)
		return 0;
	result = build_perf_events(build, perf, raw, &rule->perf);
	if (result == 0 && raw->scope != NULL && strcmp(raw->scope, "own") != 0 &&
	    strcmp(raw->scope, "cpu") != 0)
		result = build_fail(build, build_value_node(build, perf, "scope"),
				    "perf scope must be own (the client's threads) or cpu, not '%s'",
				    raw->scope);
	rule->perf.cpu_wide = raw->scope != NULL && strcmp(raw->scope, "cpu") == 0;
	if (result == 0 && raw->sampling != NULL)
		result = build_parse_bool(build, build_value_node(build, perf, "sampling"), "sampling",
					  raw->sampling, &rule->perf.sampling);
	if (result == 0 && raw->max_open != NULL)
		result = build_parse_number(build, build_value_node(build, perf, "max_open"), "max_open",
					    raw->max_open, 32, &max_open);
	if (result == 0 && (max_open == 0 || max_open > POLICY_PERF_MAX_OPEN_LIMIT))
		result = build_fail(build, build_value_node(build, perf, "max_open"),
				    "max_open must be 1 to %u", POLICY_PERF_MAX_OPEN_LIMIT);
	rule->perf.max_open = (uint32_t)max_open;
	return result;
}

static bool grants_energy_register(const struct policy *policy, const struct policy_rule *rule)
{
	for (size_t i = 0; i < rule->entry_count; i++) {
		const struct policy_msr *msr = &policy->msrs[rule->entries[i]];
		for (size_t k = 0; k < policy_energy_register_count; k++) {
			uint32_t address = policy_energy_registers[k];
			if (msr->read && msr->first <= address && address <= msr->last)
				return true;
		}
	}
	return false;
}

static int build_rule(struct build *build, size_t index, const struct raw_rule *raw)
{
	struct policy_rule *rule = &build->policy->rules[index];
	yaml_node_t *node = build_item_node(build, build->rules, index);

	int result = build_match(build, node, raw->match, rule);
	if (result == 0)
		result = build_allow(build, node, raw, rule);
	if (result == 0 && raw->read_only != NULL)
		result = build_parse_bool(build, build_value_node(build, node, "read_only"), "read_only",
					  raw->read_only, &rule->read_only);
	if (result == 0)
		result = build_majors(build, node, "create_rings", raw->create_rings,
				      raw->create_rings_count, &rule->create_rings);
	if (result == 0)
		result = build_majors(build, node, "monitor_rings", raw->monitor_rings,
				      raw->monitor_rings_count, &rule->monitor_rings);
	if (result == 0)
		result = build_energy(build, node, raw->energy, rule);
	if (result == 0)
		result = build_capabilities(build, node, raw, rule);
	if (result == 0)
		result = build_perf(build, node, raw->perf, rule);
	if (result < 0)
		return result;
	if (rule->allow_count == 0 && rule->create_rings.count == 0 &&
	    rule->monitor_rings.count == 0 && !rule->persistent_schedules && !rule->sim_control &&
	    rule->perf.classes == 0)
		return build_fail(build, node,
				  "rule grants nothing: give it allow, create_rings, monitor_rings, perf or "
				  "capabilities");
	if (rule->coarse_energy && !grants_energy_register(build->policy, rule))
		return policy_warn(build->policy, build_line_of(build_value_node(build, node, "energy")),
				   "energy limit has no effect: the rule grants no "
				   "energy-status register");
	return 0;
}

int build_rules(struct build *build, const struct raw_policy *raw)
{
	struct policy *policy = build->policy;

	if (raw->rules_count > 0) {
		policy->rules = calloc(raw->rules_count, sizeof(*policy->rules));
		if (policy->rules == NULL)
			return -ENOMEM;
	}
	policy->rule_count = raw->rules_count;
	for (size_t i = 0; i < raw->rules_count; i++) {
		int result = build_rule(build, i, &raw->rules[i]);
		if (result < 0)
			return result;
	}
	return 0;
}
