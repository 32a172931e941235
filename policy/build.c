/*
 * policy/build.c — the range and consistency pass: from the shape-checked document to a
 * struct policy, every value checked, every error placed at the node it is about.
 */
#include "policy/build.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int build_fail(struct build *build, const yaml_node_t *node, const char *format, ...)
{
	char message[sizeof(build->error->message)];
	va_list args;

	va_start(args, format);
	vsnprintf(message, sizeof(message), format, args);
	va_end(args);
	if (node == NULL)
		node = build->root;
	return policy_fail(build->error, build_line_of(node), (unsigned)node->start_mark.column + 1,
			   "%s", message);
}

/* The value node of `key` in `mapping`, or the mapping itself so that an error still has a
 * place (libcyaml and libyaml read the same bytes, so the key is there). */
yaml_node_t *build_value_node(struct build *build, yaml_node_t *mapping, const char *key)
{
	yaml_node_t *node = policy_yaml_value(build->document, mapping, key);
	return node != NULL ? node : mapping;
}

yaml_node_t *build_item_node(struct build *build, yaml_node_t *sequence, size_t index)
{
	yaml_node_t *node = policy_yaml_item(build->document, sequence, index);
	return node != NULL ? node : sequence;
}

/* ---- scalars ---- */

int build_parse_number(struct build *build, yaml_node_t *node, const char *what, const char *text,
		       unsigned bits, uint64_t *out)
{
	int result = policy_parse_u64(text, out);

	if (result == -ERANGE || (result == 0 && bits < 64 && (*out >> bits) != 0))
		return build_fail(build, node, "%s %s does not fit in %u bits", what, text, bits);
	if (result < 0 && text[0] == '0' && text[1] >= '0' && text[1] <= '9')
		return build_fail(build, node,
				  "%s '%s' has a leading zero: write 0x%s for hex, or drop the zero",
				  what, text, text + 1);
	if (result < 0)
		return build_fail(build, node, "%s '%s' is not a number (write 0x1f or 31)", what, text);
	return 0;
}

int build_parse_bool(struct build *build, yaml_node_t *node, const char *what, const char *text,
		     bool *out)
{
	static const char *const truths[] = { "true", "True", "TRUE" };
	static const char *const falsehoods[] = { "false", "False", "FALSE" };

	for (size_t i = 0; i < 3; i++) {
		if (strcmp(text, truths[i]) == 0 || strcmp(text, falsehoods[i]) == 0) {
			*out = strcmp(text, truths[i]) == 0;
			return 0;
		}
	}
	return build_fail(build, node, "%s must be true or false, not '%s'", what, text);
}

/* ---- MSR entries ---- */

static int build_address(struct build *build, yaml_node_t *node, const struct raw_msr *raw,
			 struct policy_msr *msr)
{
	uint64_t first, count = 1;

	int result = build_parse_number(build, build_value_node(build, node, "address"), "address",
					raw->address, 32, &first);
	if (result == 0 && raw->count != NULL)
		result = build_parse_number(build, build_value_node(build, node, "count"), "count", raw->count,
					    64, &count);
	if (result < 0)
		return result;
	if (count == 0)
		return build_fail(build, build_value_node(build, node, "count"), "count must be at least 1");
	if (count - 1 > UINT32_MAX - first)
		return build_fail(build, build_value_node(build, node, "count"),
				  "address %s with count %s runs past 0xffffffff", raw->address,
				  raw->count);
	msr->first = (uint32_t)first;
	msr->last = (uint32_t)(first + count - 1);
	return 0;
}

static int build_range(struct build *build, yaml_node_t *node, const struct raw_msr *raw,
		       struct policy_msr *msr)
{
	yaml_node_t *range = build_value_node(build, node, "range");
	uint64_t bounds[2];

	if (raw->range_count != 2)
		return build_fail(build, range, "range needs two addresses [first, last], not %u",
				  raw->range_count);
	for (size_t i = 0; i < 2; i++) {
		int result = build_parse_number(build, build_item_node(build, range, i), "address",
						raw->range[i], 32, &bounds[i]);
		if (result < 0)
			return result;
	}
	if (bounds[0] > bounds[1])
		return build_fail(build, range, "range [%s, %s] is backwards (first above last)",
				  raw->range[0], raw->range[1]);
	msr->first = (uint32_t)bounds[0];
	msr->last = (uint32_t)bounds[1];
	return 0;
}

static int build_place(struct build *build, yaml_node_t *node, const struct raw_msr *raw,
		       struct policy_msr *msr)
{
	if (raw->address != NULL && raw->range != NULL)
		return build_fail(build, build_value_node(build, node, "range"),
				  "give either address (and count) or range, not both");
	if (raw->count != NULL && raw->address == NULL)
		return build_fail(build, build_value_node(build, node, "count"),
				  "count goes with address, not with range");
	if (raw->address != NULL)
		return build_address(build, node, raw, msr);
	if (raw->range != NULL)
		return build_range(build, node, raw, msr);
	return build_fail(build, node, "MSR entry '%s' needs an address or a range", raw->name);
}

static int check_set_name(struct build *build, yaml_node_t *node, const char *name)
{
	if (strcmp(name, "all") == 0)
		return build_fail(build, node, "'all' means every entry and cannot name a set");
	if (!policy_name_valid(name))
		return build_fail(build, node,
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
			return build_fail(build, node, "set '%s' listed twice", name);
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
		return build_fail(build, build_value_node(build, node, "sets"),
				  "give either set (one name) or sets (a list), not both");
	size_t count = raw->set != NULL ? 1 : raw->sets_count;
	if (count == 0)
		return 0;
	msr->sets = calloc(count, sizeof(*msr->sets));
	if (msr->sets == NULL)
		return -ENOMEM;
	if (raw->set != NULL)
		return add_set(build, build_value_node(build, node, "set"), raw->set, msr);
	yaml_node_t *list = build_value_node(build, node, "sets");
	for (size_t i = 0; i < count; i++) {
		int result = add_set(build, build_item_node(build, list, i), raw->sets[i], msr);
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
		result = build_parse_bool(build, build_value_node(build, node, "read"), "read", raw->read,
					  &msr->read);
	if (result == 0 && raw->write_mask != NULL)
		result = build_parse_number(build, build_value_node(build, node, "write_mask"), "write_mask",
					    raw->write_mask, 64, &msr->write_mask);
	if (result < 0)
		return result;
	if (msr->write_mask != 0 && !msr->read)
		return build_fail(build, build_value_node(build, node, "write_mask"),
				  "write_mask without read: true (a masked write must read the "
				  "register to keep the other bits)");
	return 0;
}

static int build_msr(struct build *build, size_t index, const struct raw_msr *raw)
{
	struct policy_msr *msr = &build->policy->msrs[index];
	yaml_node_t *node = build_item_node(build, build->msrs, index);
	yaml_node_t *name = build_value_node(build, node, "name");

	if (!policy_name_valid(raw->name))
		return build_fail(build, name,
				  "MSR name '%s' is not valid: letters, digits and '_', at most %u",
				  raw->name, POLICY_MAX_NAME);
	for (size_t i = 0; i < index; i++) {
		if (strcmp(build->policy->msrs[i].name, raw->name) == 0)
			return build_fail(build, name, "duplicate MSR name '%s' (first at line %u)",
					  raw->name, build_line_of(build_item_node(build, build->msrs, i)));
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
		result = policy_lint_msr(build->policy, msr, build_line_of(node));
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
	yaml_node_t *node = build_item_node(build, build->msrs, later);
	yaml_node_t *place = policy_yaml_value(build->document, node, "address");
	if (place == NULL)
		place = build_value_node(build, node, "range");
	return build_fail(build, place, "MSR entry '%s' (%s) overlaps '%s' (%s) from line %u",
			  policy->msrs[later].name, second_span, policy->msrs[earlier].name, first_span,
			  build_line_of(build_item_node(build, build->msrs, earlier)));
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

/* A percentage of one CPU, 0..100, from energy_page's key `key` (default when absent). */
static int build_cpu_percent(struct build *build, yaml_node_t *mapping, const char *key,
			     const char *text, uint32_t fallback, uint32_t *percent)
{
	uint64_t value = fallback;
	int result;

	*percent = fallback;
	if (text == NULL)
		return 0;
	result = build_parse_number(build, build_value_node(build, mapping, key), key, text, 64, &value);
	if (result < 0)
		return result;
	if (value > 100)
		return build_fail(build, build_value_node(build, mapping, key), "%s %s is outside 0..100", key,
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
	yaml_node_t *mapping = build_value_node(build, build->root, "energy_page");
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
	result = build_parse_number(build, build_value_node(build, mapping, "max_rate_hz"), "max_rate_hz",
				    raw->max_rate_hz, 64, &rate);
	if (result < 0)
		return result;
	if (rate == 0 || rate > max_rate_hz)
		return build_fail(build, build_value_node(build, mapping, "max_rate_hz"),
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
		return build_fail(&build, build_value_node(&build, build.root, "version"),
				  "unsupported version '%s' (this policy format is version 1)",
				  raw->version);
	if (strcmp(raw->default_action, "deny") != 0)
		return build_fail(&build, build_value_node(&build, build.root, "default"),
				  "default must be deny, not '%s' (anything not granted is refused)",
				  raw->default_action);
	int result = build_energy_page(&build, raw->energy_page);
	if (result == 0)
		result = build_msrs(&build, raw);
	if (result == 0)
		result = build_rules(&build, raw);
	return result;
}
