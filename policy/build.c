/*
 * policy/build.c — the range and consistency pass: from the shape-checked document to a
 * struct policy, every value checked, every error placed at the node it is about.
 */
#include "policy/raw.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct build {
	struct policy *policy;
	yaml_document_t *document;
	yaml_node_t *root;
	yaml_node_t *msrs;  /* the `msrs` list node, NULL when absent */
	yaml_node_t *rules; /* the `rules` list node, NULL when absent */
	struct policy_error *error;
};

static unsigned line_of(const yaml_node_t *node)
{
	return (unsigned)node->start_mark.line + 1;
}

static int fail(struct build *build, const yaml_node_t *node, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct build *build, const yaml_node_t *node, const char *format, ...)
{
	char message[sizeof(build->error->message)];
	va_list args;

	va_start(args, format);
	vsnprintf(message, sizeof(message), format, args);
	va_end(args);
	if (node == NULL)
		node = build->root;
	return policy_fail(build->error, line_of(node), (unsigned)node->start_mark.column + 1,
			   "%s", message);
}

/* The value node of `key` in `mapping`, or the mapping itself so that an error still has a
 * place (libcyaml and libyaml read the same bytes, so the key is there). */
static yaml_node_t *value_node(struct build *build, yaml_node_t *mapping, const char *key)
{
	yaml_node_t *node = policy_yaml_value(build->document, mapping, key);
	return node != NULL ? node : mapping;
}

static yaml_node_t *item_node(struct build *build, yaml_node_t *sequence, size_t index)
{
	yaml_node_t *node = policy_yaml_item(build->document, sequence, index);
	return node != NULL ? node : sequence;
}

/* ---- scalars ---- */

static int parse_number(struct build *build, yaml_node_t *node, const char *what,
			const char *text, unsigned bits, uint64_t *out)
{
	int result = policy_parse_u64(text, out);

	if (result == -ERANGE || (result == 0 && bits < 64 && (*out >> bits) != 0))
		return fail(build, node, "%s %s does not fit in %u bits", what, text, bits);
	if (result < 0 && text[0] == '0' && text[1] >= '0' && text[1] <= '9')
		return fail(build, node,
			    "%s '%s' has a leading zero: write 0x%s for hex, or drop the zero",
			    what, text, text + 1);
	if (result < 0)
		return fail(build, node, "%s '%s' is not a number (write 0x1f or 31)", what, text);
	return 0;
}

static int parse_bool(struct build *build, yaml_node_t *node, const char *what,
		      const char *text, bool *out)
{
	static const char *const truths[] = { "true", "True", "TRUE" };
	static const char *const falsehoods[] = { "false", "False", "FALSE" };

	for (size_t i = 0; i < 3; i++) {
		if (strcmp(text, truths[i]) == 0 || strcmp(text, falsehoods[i]) == 0) {
			*out = strcmp(text, truths[i]) == 0;
			return 0;
		}
	}
	return fail(build, node, "%s must be true or false, not '%s'", what, text);
}

/* ---- MSR entries ---- */

static int build_address(struct build *build, yaml_node_t *node, const struct raw_msr *raw,
			 struct policy_msr *msr)
{
	uint64_t first, count = 1;

	int result = parse_number(build, value_node(build, node, "address"), "address",
				  raw->address, 32, &first);
	if (result == 0 && raw->count != NULL)
		result = parse_number(build, value_node(build, node, "count"), "count", raw->count,
				      64, &count);
	if (result < 0)
		return result;
	if (count == 0)
		return fail(build, value_node(build, node, "count"), "count must be at least 1");
	if (count - 1 > UINT32_MAX - first)
		return fail(build, value_node(build, node, "count"),
			    "address %s with count %s runs past 0xffffffff", raw->address,
			    raw->count);
	msr->first = (uint32_t)first;
	msr->last = (uint32_t)(first + count - 1);
	return 0;
}

static int build_range(struct build *build, yaml_node_t *node, const struct raw_msr *raw,
		       struct policy_msr *msr)
{
	yaml_node_t *range = value_node(build, node, "range");
	uint64_t bounds[2];

	if (raw->range_count != 2)
		return fail(build, range, "range needs two addresses [first, last], not %u",
			    raw->range_count);
	for (size_t i = 0; i < 2; i++) {
		int result = parse_number(build, item_node(build, range, i), "address",
					  raw->range[i], 32, &bounds[i]);
		if (result < 0)
			return result;
	}
	if (bounds[0] > bounds[1])
		return fail(build, range, "range [%s, %s] is backwards (first above last)",
			    raw->range[0], raw->range[1]);
	msr->first = (uint32_t)bounds[0];
	msr->last = (uint32_t)bounds[1];
	return 0;
}

static int build_place(struct build *build, yaml_node_t *node, const struct raw_msr *raw,
		       struct policy_msr *msr)
{
	if (raw->address != NULL && raw->range != NULL)
		return fail(build, value_node(build, node, "range"),
			    "give either address (and count) or range, not both");
	if (raw->count != NULL && raw->address == NULL)
		return fail(build, value_node(build, node, "count"),
			    "count goes with address, not with range");
	if (raw->address != NULL)
		return build_address(build, node, raw, msr);
	if (raw->range != NULL)
		return build_range(build, node, raw, msr);
	return fail(build, node, "MSR entry '%s' needs an address or a range", raw->name);
}

static int check_set_name(struct build *build, yaml_node_t *node, const char *name)
{
	if (strcmp(name, "all") == 0)
		return fail(build, node, "'all' means every entry and cannot name a set");
	if (!policy_name_valid(name))
		return fail(build, node,
			    "set name '%s' is not valid: letters, digits and '_', at most %u",
			    name, POLICY_MAX_NAME);
	return 0;
}

static int add_set(struct build *build, yaml_node_t *node, const char *name,
		   struct policy_msr *msr)
{
	int result = check_set_name(build, node, name);
	if (result < 0)
		return result;
	for (size_t i = 0; i < msr->set_count; i++) {
		if (strcmp(msr->sets[i], name) == 0)
			return fail(build, node, "set '%s' listed twice", name);
	}
	msr->sets[msr->set_count] = policy_strdup(name);
	if (msr->sets[msr->set_count] == NULL)
		return -ENOMEM;
	msr->set_count++;
	return 0;
}

static int build_sets(struct build *build, yaml_node_t *node, const struct raw_msr *raw,
		      struct policy_msr *msr)
{
	if (raw->set != NULL && raw->sets != NULL)
		return fail(build, value_node(build, node, "sets"),
			    "give either set (one name) or sets (a list), not both");
	size_t count = raw->set != NULL ? 1 : raw->sets_count;
	if (count == 0)
		return 0;
	msr->sets = calloc(count, sizeof(*msr->sets));
	if (msr->sets == NULL)
		return -ENOMEM;
	if (raw->set != NULL)
		return add_set(build, value_node(build, node, "set"), raw->set, msr);
	yaml_node_t *list = value_node(build, node, "sets");
	for (size_t i = 0; i < count; i++) {
		int result = add_set(build, item_node(build, list, i), raw->sets[i], msr);
		if (result < 0)
			return result;
	}
	return 0;
}

static int build_access(struct build *build, yaml_node_t *node, const struct raw_msr *raw,
			struct policy_msr *msr)
{
	int result = 0;

	if (raw->read != NULL)
		result = parse_bool(build, value_node(build, node, "read"), "read", raw->read,
				    &msr->read);
	if (result == 0 && raw->write_mask != NULL)
		result = parse_number(build, value_node(build, node, "write_mask"), "write_mask",
				      raw->write_mask, 64, &msr->write_mask);
	if (result < 0)
		return result;
	if (msr->write_mask != 0 && !msr->read)
		return fail(build, value_node(build, node, "write_mask"),
			    "write_mask without read: true (a masked write must read the "
			    "register to keep the other bits)");
	return 0;
}

static int build_msr(struct build *build, size_t index, const struct raw_msr *raw)
{
	struct policy_msr *msr = &build->policy->msrs[index];
	yaml_node_t *node = item_node(build, build->msrs, index);
	yaml_node_t *name = value_node(build, node, "name");

	if (!policy_name_valid(raw->name))
		return fail(build, name,
			    "MSR name '%s' is not valid: letters, digits and '_', at most %u",
			    raw->name, POLICY_MAX_NAME);
	for (size_t i = 0; i < index; i++) {
		if (strcmp(build->policy->msrs[i].name, raw->name) == 0)
			return fail(build, name, "duplicate MSR name '%s' (first at line %u)",
				    raw->name, line_of(item_node(build, build->msrs, i)));
	}
	msr->name = policy_strdup(raw->name);
	if (msr->name == NULL)
		return -ENOMEM;
	int result = build_place(build, node, raw, msr);
	if (result == 0)
		result = build_access(build, node, raw, msr);
	if (result == 0)
		result = build_sets(build, node, raw, msr);
	if (result == 0)
		result = policy_lint_msr(build->policy, msr, line_of(node));
	return result;
}

static int compare_msr_index(const void *a, const void *b, void *msrs)
{
	const struct policy_msr *left = (const struct policy_msr *)msrs + *(const size_t *)a;
	const struct policy_msr *right = (const struct policy_msr *)msrs + *(const size_t *)b;

	if (left->first != right->first)
		return left->first < right->first ? -1 : 1;
	size_t left_index = *(const size_t *)a, right_index = *(const size_t *)b;
	return (left_index > right_index) - (left_index < right_index);
}

static void describe_span(const struct policy_msr *msr, char *buffer, size_t size)
{
	if (msr->first == msr->last)
		snprintf(buffer, size, "0x%x", msr->first);
	else
		snprintf(buffer, size, "0x%x-0x%x", msr->first, msr->last);
}

/* Sort entries by address and refuse any two that share an address: a register has exactly
 * one entry, so what a rule grants never depends on the order of entries. Every entry that
 * overlaps an earlier address is found (against the widest interval before it); of those pairs
 * the one whose later entry comes first in the file is reported, following reading order. */
static int check_overlaps(struct build *build)
{
	struct policy *policy = build->policy;
	size_t later = SIZE_MAX, earlier = 0, widest = 0;

	policy->by_address = calloc(policy->msr_count ? policy->msr_count : 1, sizeof(size_t));
	if (policy->by_address == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < policy->msr_count; i++)
		policy->by_address[i] = i;
	qsort_r(policy->by_address, policy->msr_count, sizeof(size_t), compare_msr_index,
		policy->msrs);
	for (size_t k = 1; k < policy->msr_count; k++) {
		size_t current = policy->by_address[k];
		if (policy->msrs[policy->by_address[k - 1]].last >
		    policy->msrs[policy->by_address[widest]].last)
			widest = k - 1;
		size_t other = policy->by_address[widest];
		if (policy->msrs[current].first > policy->msrs[other].last)
			continue;
		size_t high = current > other ? current : other;
		if (high < later) {
			later = high;
			earlier = current > other ? other : current;
		}
	}
	if (later == SIZE_MAX)
		return 0;
	char first_span[32], second_span[32];
	describe_span(&policy->msrs[later], second_span, sizeof(second_span));
	describe_span(&policy->msrs[earlier], first_span, sizeof(first_span));
	yaml_node_t *node = item_node(build, build->msrs, later);
	yaml_node_t *place = policy_yaml_value(build->document, node, "address");
	if (place == NULL)
		place = value_node(build, node, "range");
	return fail(build, place, "MSR entry '%s' (%s) overlaps '%s' (%s) from line %u",
		    policy->msrs[later].name, second_span, policy->msrs[earlier].name, first_span,
		    line_of(item_node(build, build->msrs, earlier)));
}

static int build_msrs(struct build *build, const struct raw_policy *raw)
{
	struct policy *policy = build->policy;

	if (raw->msrs_count > 0) {
		policy->msrs = calloc(raw->msrs_count, sizeof(*policy->msrs));
		if (policy->msrs == NULL)
			return -ENOMEM;
	}
	policy->msr_count = raw->msrs_count;
	for (size_t i = 0; i < raw->msrs_count; i++) {
		int result = build_msr(build, i, &raw->msrs[i]);
		if (result < 0)
			return result;
	}
	return check_overlaps(build);
}

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
		return fail(build, node, "%s name '%s' is not valid", kind, name);
	rule->kind = group ? POLICY_MATCH_GROUP : POLICY_MATCH_USER;
	rule->match_name = policy_strdup(name);
	if (rule->match_name == NULL)
		return -ENOMEM;
	int found = lookup_account(group ? LOOKUP_GROUP_NAME : LOOKUP_USER_NAME, name,
				   &rule->match_id, resolved, sizeof(resolved));
	if (found < 0)
		return fail(build, node, "cannot look up %s '%s': %s", kind, name,
			    strerror(-found));
	rule->match_known = found == 1;
	if (found == 1) {
		snprintf(comment, sizeof(comment), "%s %u", group ? "gid" : "uid", rule->match_id);
	} else {
		snprintf(comment, sizeof(comment), "no such %s here: matches nobody", kind);
		int result = policy_warn(build->policy, line_of(node),
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
		return fail(build, node, "%s '%s' is not a number; use '%s: %s' for a name", kind,
			    text, group ? "group" : "user", text);
	if (id >= UINT32_MAX)
		return fail(build, node, "%s %s is not a valid id (0 to 4294967294)", kind, text);
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
	yaml_node_t *match = value_node(build, rule_node, "match");
	size_t chosen = SIZE_MAX;

	for (size_t i = 0; i < 5; i++) {
		if (values[i] == NULL)
			continue;
		if (chosen != SIZE_MAX)
			return fail(build, policy_yaml_key(build->document, match, keys[i], 0),
				    "match takes exactly one of uid, user, gid, group, any "
				    "(found %s and %s)",
				    keys[chosen], keys[i]);
		chosen = i;
	}
	if (chosen == SIZE_MAX)
		return fail(build, match,
			    "match is empty: give one of uid, user, gid, group or any: true");
	yaml_node_t *node = value_node(build, match, keys[chosen]);
	if (chosen == 0 || chosen == 2)
		return match_by_id(build, node, chosen == 2, values[chosen], rule);
	if (chosen == 1 || chosen == 3)
		return match_by_name(build, node, chosen == 3, values[chosen], rule);
	bool any = false;
	int result = parse_bool(build, node, "any", raw->any, &any);
	if (result < 0)
		return result;
	if (!any)
		return fail(build, node, "any must be true (to match nobody, delete the rule)");
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
	yaml_node_t *list = value_node(build, rule_node, "allow");

	if (raw->allow_count == 0)
		return 0;
	rule->allow = calloc(raw->allow_count, sizeof(*rule->allow));
	if (rule->allow == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < raw->allow_count; i++) {
		const char *name = raw->allow[i];
		yaml_node_t *node = item_node(build, list, i);

		for (size_t k = 0; k < i; k++) {
			if (strcmp(rule->allow[k], name) == 0)
				return fail(build, node, "set '%s' listed twice in allow", name);
		}
		if (strcmp(name, "all") != 0 && !set_exists(build->policy, name))
			return fail(build, node,
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
		return fail(build, node, "ring major '%s' is not a number or a range like 1-99",
			    text);
	if (value > UINT16_MAX)
		return fail(build, node, "ring major %s is out of range (0-65535)", text);
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
		return fail(build, node, "ring major '%s' is not a number or a range like 1-99",
			    text);
	snprintf(first, sizeof(first), "%.*s", (int)(dash - text), text);
	snprintf(last, sizeof(last), "%s", dash + 1);
	int result = parse_major(build, node, first, &range->first);
	if (result == 0)
		result = parse_major(build, node, last, &range->last);
	if (result == 0 && range->first > range->last)
		return fail(build, node, "ring major range %s is backwards (first above last)",
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
	yaml_node_t *list = value_node(build, rule_node, key);

	if (count == 0)
		return 0;
	majors->ranges = calloc(count, sizeof(*majors->ranges));
	if (majors->ranges == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		struct policy_major_range *range = &majors->ranges[i];
		yaml_node_t *node = item_node(build, list, i);
		int result = parse_major_range(build, node, texts[i], range);
		if (result < 0)
			return result;
		for (size_t k = 0; k < i; k++) {
			const struct policy_major_range *other = &majors->ranges[k];
			if (range->first <= other->last && other->first <= range->last)
				return fail(build, node, "ring majors %s and %s overlap", texts[k],
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
	yaml_node_t *energy = value_node(build, rule_node, "energy");
	uint64_t interval = 0, resolution = 0;
	int result = 0;

	if (raw == NULL)
		return 0;
	if (raw->min_interval_ms != NULL)
		result = parse_number(build, value_node(build, energy, "min_interval_ms"),
				      "min_interval_ms", raw->min_interval_ms, 64, &interval);
	if (result == 0 && raw->resolution_uj != NULL)
		result = parse_number(build, value_node(build, energy, "resolution_uj"),
				      "resolution_uj", raw->resolution_uj, 64, &resolution);
	if (result < 0)
		return result;
	if (interval > max_interval_ms)
		return fail(build, value_node(build, energy, "min_interval_ms"),
			    "min_interval_ms %s is above the limit of 86400000 (one day)",
			    raw->min_interval_ms);
	if (resolution > max_resolution_uj)
		return fail(build, value_node(build, energy, "resolution_uj"),
			    "resolution_uj %s is above the limit of 1000000000000 (1 MJ)",
			    raw->resolution_uj);
	if (interval == 0 && resolution == 0)
		return fail(build, energy,
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
	yaml_node_t *list = value_node(build, rule_node, "capabilities");

	for (size_t i = 0; i < raw->capabilities_count; i++) {
		const char *name = raw->capabilities[i];
		yaml_node_t *node = item_node(build, list, i);
		bool *flag = NULL;

		if (strcmp(name, "persistent_schedules") == 0)
			flag = &rule->persistent_schedules;
		else if (strcmp(name, "sim_control") == 0)
			flag = &rule->sim_control;
		else
			return fail(build, node,
				    "unknown capability '%s' (known: persistent_schedules, "
				    "sim_control)",
				    name);
		if (*flag)
			return fail(build, node, "capability '%s' listed twice", name);
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
	yaml_node_t *list = value_node(build, perf, "events");

	for (size_t i = 0; i < raw->events_count; i++) {
		size_t k = 0;

		while (k < sizeof(perf_classes) / sizeof(perf_classes[0]) &&
		       strcmp(raw->events[i], perf_classes[k].name) != 0)
			k++;
		if (k == sizeof(perf_classes) / sizeof(perf_classes[0]))
			return fail(build, item_node(build, list, i),
				    "unknown perf event class '%s' (known: software, msr, power, "
				    "core)", raw->events[i]);
		out->classes |= perf_classes[k].bit;
	}
	if (out->classes == 0)
		return fail(build, perf, "perf grants no events: list events (software, msr, "
			    "power, core)");
	return 0;
}

static int build_perf(struct build *build, yaml_node_t *rule_node, const struct raw_perf *raw,
		      struct policy_rule *rule)
{
	yaml_node_t *perf = value_node(build, rule_node, "perf");
	uint64_t max_open = POLICY_PERF_DEFAULT_MAX_OPEN;
	int result;

	if (raw == NULL)
		return 0;
	result = build_perf_events(build, perf, raw, &rule->perf);
	if (result == 0 && raw->scope != NULL && strcmp(raw->scope, "own") != 0 &&
	    strcmp(raw->scope, "cpu") != 0)
		result = fail(build, value_node(build, perf, "scope"),
			      "perf scope must be own (the client's threads) or cpu, not '%s'",
			      raw->scope);
	rule->perf.cpu_wide = raw->scope != NULL && strcmp(raw->scope, "cpu") == 0;
	if (result == 0 && raw->sampling != NULL)
		result = parse_bool(build, value_node(build, perf, "sampling"), "sampling",
				    raw->sampling, &rule->perf.sampling);
	if (result == 0 && raw->max_open != NULL)
		result = parse_number(build, value_node(build, perf, "max_open"), "max_open",
				      raw->max_open, 32, &max_open);
	if (result == 0 && (max_open == 0 || max_open > POLICY_PERF_MAX_OPEN_LIMIT))
		result = fail(build, value_node(build, perf, "max_open"),
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
	yaml_node_t *node = item_node(build, build->rules, index);

	int result = build_match(build, node, raw->match, rule);
	if (result == 0)
		result = build_allow(build, node, raw, rule);
	if (result == 0 && raw->read_only != NULL)
		result = parse_bool(build, value_node(build, node, "read_only"), "read_only",
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
		return fail(build, node,
			    "rule grants nothing: give it allow, create_rings, monitor_rings, perf or "
			    "capabilities");
	if (rule->coarse_energy && !grants_energy_register(build->policy, rule))
		return policy_warn(build->policy, line_of(value_node(build, node, "energy")),
				   "energy limit has no effect: the rule grants no "
				   "energy-status register");
	return 0;
}

static int build_rules(struct build *build, const struct raw_policy *raw)
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

/* A percentage of one CPU, 0..100, from energy_page's key `key` (default when absent). */
static int build_cpu_percent(struct build *build, yaml_node_t *mapping, const char *key,
			     const char *text, uint32_t fallback, uint32_t *percent)
{
	uint64_t value = fallback;
	int result;

	*percent = fallback;
	if (text == NULL)
		return 0;
	result = parse_number(build, value_node(build, mapping, key), key, text, 64, &value);
	if (result < 0)
		return result;
	if (value > 100)
		return fail(build, value_node(build, mapping, key), "%s %s is outside 0..100", key,
			    text);
	*percent = (uint32_t)value;
	return 0;
}

/* How often msrd may sample the energy registers for energy pages, and how much CPU the
 * precise edges' windows may take. */
static int build_energy_page(struct build *build, const struct raw_energy_page *raw)
{
	/* 10 kHz is ten samples per RAPL update (about 1 ms): finer shows nothing more. */
	static const uint64_t max_rate_hz = 10000;
	yaml_node_t *mapping = value_node(build, build->root, "energy_page");
	uint64_t rate = POLICY_ENERGY_PAGE_DEFAULT_HZ;
	int result;

	build->policy->energy_page_max_hz = POLICY_ENERGY_PAGE_DEFAULT_HZ;
	build->policy->edge_cpu_percent = POLICY_EDGE_CPU_PERCENT_DEFAULT;
	build->policy->edge_cpu_percent_per_uid = POLICY_EDGE_CPU_PERCENT_PER_UID_DEFAULT;
	if (raw == NULL)
		return 0;
	result = build_cpu_percent(build, mapping, "edge_cpu_percent", raw->edge_cpu_percent,
				   POLICY_EDGE_CPU_PERCENT_DEFAULT,
				   &build->policy->edge_cpu_percent);
	if (result == 0)
		result = build_cpu_percent(build, mapping, "edge_cpu_percent_per_uid",
					   raw->edge_cpu_percent_per_uid,
					   POLICY_EDGE_CPU_PERCENT_PER_UID_DEFAULT,
					   &build->policy->edge_cpu_percent_per_uid);
	if (result < 0 || raw->max_rate_hz == NULL)
		return result;
	result = parse_number(build, value_node(build, mapping, "max_rate_hz"), "max_rate_hz",
			      raw->max_rate_hz, 64, &rate);
	if (result < 0)
		return result;
	if (rate == 0 || rate > max_rate_hz)
		return fail(build, value_node(build, mapping, "max_rate_hz"),
			    "max_rate_hz %s is outside 1..10000", raw->max_rate_hz);
	build->policy->energy_page_max_hz = (uint32_t)rate;
	return 0;
}

int policy_build(const struct raw_policy *raw, yaml_document_t *document, struct policy *policy,
		 struct policy_error *error)
{
	struct build build = {
		.policy = policy,
		.document = document,
		.root = yaml_document_get_root_node(document),
		.error = error,
	};
	build.msrs = policy_yaml_value(document, build.root, "msrs");
	build.rules = policy_yaml_value(document, build.root, "rules");

	if (strcmp(raw->version, "1") != 0)
		return fail(&build, value_node(&build, build.root, "version"),
			    "unsupported version '%s' (this policy format is version 1)",
			    raw->version);
	if (strcmp(raw->default_action, "deny") != 0)
		return fail(&build, value_node(&build, build.root, "default"),
			    "default must be deny, not '%s' (anything not granted is refused)",
			    raw->default_action);
	int result = build_energy_page(&build, raw->energy_page);
	if (result == 0)
		result = build_msrs(&build, raw);
	if (result == 0)
		result = build_rules(&build, raw);
	return result;
}
