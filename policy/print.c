/*
 * policy/print.c — the canonical form: one spelling for every policy that means the same, so
 * golden files and `msrd --check-policy` output can be compared with diff. Every key is printed
 * with its value or its default, addresses in hex, masks as 16 hex digits, sets as lists, ring
 * majors sorted; what user and group names resolve to on this system follows as a comment.
 */
#include "policy/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

static void print_names(FILE *out, char *const *names, size_t count)
{
	fputc('[', out);
	for (size_t i = 0; i < count; i++)
		fprintf(out, "%s%s", i ? ", " : "", names[i]);
	fputc(']', out);
}

static void print_msr(FILE *out, const struct policy_msr *msr)
{
	fprintf(out, "  - {name: %s, ", msr->name);
	if (msr->first == msr->last)
		fprintf(out, "address: 0x%" PRIx32, msr->first);
	else
		fprintf(out, "range: [0x%" PRIx32 ", 0x%" PRIx32 "]", msr->first, msr->last);
	fprintf(out, ", read: %s, write_mask: 0x%016" PRIx64 ", sets: ",
		msr->read ? "true" : "false", msr->write_mask);
	print_names(out, msr->sets, msr->set_count);
	fputs("}\n", out);
}

static void print_majors(FILE *out, const char *key, const struct policy_majors *majors)
{
	fprintf(out, "    %s: [", key);
	for (size_t i = 0; i < majors->count; i++) {
		const struct policy_major_range *range = &majors->ranges[i];
		fprintf(out, "%s%u", i ? ", " : "", range->first);
		if (range->last != range->first)
			fprintf(out, "-%u", range->last);
	}
	fputs("]\n", out);
}

static void print_match(FILE *out, const struct policy_rule *rule)
{
	switch (rule->kind) {
	case POLICY_MATCH_UID:
		fprintf(out, "  - match: {uid: %" PRIu32 "}", rule->match_id);
		break;
	case POLICY_MATCH_GID:
		fprintf(out, "  - match: {gid: %" PRIu32 "}", rule->match_id);
		break;
	case POLICY_MATCH_USER:
		fprintf(out, "  - match: {user: %s}", rule->match_name);
		break;
	case POLICY_MATCH_GROUP:
		fprintf(out, "  - match: {group: %s}", rule->match_name);
		break;
	case POLICY_MATCH_ANY:
		fputs("  - match: {any: true}", out);
		break;
	}
	if (rule->match_comment != NULL)
		fprintf(out, "  # %s", rule->match_comment);
	fputc('\n', out);
}

static void print_perf(FILE *out, const struct policy_perf *perf)
{
	static const char *const names[] = { "software", "msr", "power", "core" };
	const char *separator = "";

	fputs("    perf: {events: [", out);
	for (unsigned i = 0; i < 4; i++) {
		if (perf->classes & (1u << i)) {
			fprintf(out, "%s%s", separator, names[i]);
			separator = ", ";
		}
	}
	fprintf(out, "], scope: %s, sampling: %s, max_open: %" PRIu32 "}\n",
		perf->cpu_wide ? "cpu" : "own", perf->sampling ? "true" : "false", perf->max_open);
}

static void print_rule(FILE *out, const struct policy_rule *rule)
{
	print_match(out, rule);
	fputs("    allow: ", out);
	print_names(out, rule->allow, rule->allow_count);
	fprintf(out, "\n    read_only: %s\n", rule->read_only ? "true" : "false");
	print_majors(out, "create_rings", &rule->create_rings);
	print_majors(out, "monitor_rings", &rule->monitor_rings);
	if (rule->coarse_energy)
		fprintf(out,
			"    energy: {min_interval_ms: %" PRIu32 ", resolution_uj: %" PRIu64 "}\n",
			rule->energy.min_interval_ms, rule->energy.resolution_uj);
	if (rule->perf.classes != 0)
		print_perf(out, &rule->perf);
	fprintf(out, "    capabilities: [%s%s%s]\n",
		rule->persistent_schedules ? "persistent_schedules" : "",
		rule->persistent_schedules && rule->sim_control ? ", " : "",
		rule->sim_control ? "sim_control" : "");
}

int policy_print(const struct policy *policy, FILE *out)
{
	if (policy == NULL || out == NULL)
		return -EINVAL;
	fputs("version: 1\ndefault: deny\n", out);
	fprintf(out,
		"energy_page: {max_rate_hz: %" PRIu32 ", edge_cpu_percent: %" PRIu32
		", edge_cpu_percent_per_uid: %" PRIu32 "}\n",
		policy->energy_page_max_hz, policy->edge_cpu_percent,
		policy->edge_cpu_percent_per_uid);
	fputs(policy->msr_count ? "msrs:\n" : "msrs: []\n", out);
	for (size_t i = 0; i < policy->msr_count; i++)
		print_msr(out, &policy->msrs[i]);
	fputs(policy->rule_count ? "rules:\n" : "rules: []\n", out);
	for (size_t i = 0; i < policy->rule_count; i++)
		print_rule(out, &policy->rules[i]);
	if (fflush(out) != 0 || ferror(out))
		return -EIO;
	return 0;
}
