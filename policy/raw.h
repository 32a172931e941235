/*
 * policy/raw.h — the policy document as libcyaml loads it (every scalar still text), and the
 * libyaml node tree of the same bytes, which is where line and column numbers come from.
 * Private to policy/.
 *
 * libcyaml checks the shape (keys, mappings, lists, required keys, duplicate keys). Scalars are
 * loaded as strings on purpose: libcyaml 1.3.1 accepts any text as `true` for a bool and reports
 * integer overflow without a position, so numbers and booleans are checked by policy_build, which
 * can name the exact node.
 */
#ifndef HAECER_POLICY_RAW_H
#define HAECER_POLICY_RAW_H

#include <yaml.h>

#include "policy/internal.h"

struct raw_msr {
	char *name;
	char *address;
	char *count;
	char **range;
	unsigned range_count;
	char *read;
	char *write_mask;
	char *set;
	char **sets;
	unsigned sets_count;
};

struct raw_match {
	char *uid;
	char *user;
	char *gid;
	char *group;
	char *any;
};

struct raw_energy {
	char *min_interval_ms;
	char *resolution_uj;
};

struct raw_perf {
	char **events;
	unsigned events_count;
	char *scope;
	char *sampling;
	char *max_open;
};

struct raw_rule {
	struct raw_match *match;
	char **allow;
	unsigned allow_count;
	char *read_only;
	char **create_rings;
	unsigned create_rings_count;
	char **monitor_rings;
	unsigned monitor_rings_count;
	struct raw_energy *energy;
	struct raw_perf *perf;
	char **capabilities;
	unsigned capabilities_count;
};

struct raw_energy_page {
	char *max_rate_hz;
	char *edge_cpu_percent;
	char *edge_cpu_percent_per_uid;
};

struct raw_policy {
	char *version;
	char *default_action;
	struct raw_energy_page *energy_page;
	struct raw_msr *msrs;
	unsigned msrs_count;
	struct raw_rule *rules;
	unsigned rules_count;
};

/* Turn the shape-checked document into `policy`, checking every value; errors carry the place
 * of the offending node in `document`. */
int policy_build(const struct raw_policy *raw, yaml_document_t *document, struct policy *policy,
		 struct policy_error *error);

/* The value node of `key` in a mapping node (its first occurrence: the one libcyaml descended
 * into before it refused a repeated key), or NULL. */
yaml_node_t *policy_yaml_value(yaml_document_t *document, yaml_node_t *mapping, const char *key);
/* The key node of the `occurrence`-th (0-based) `key` in a mapping node, or NULL. */
yaml_node_t *policy_yaml_key(yaml_document_t *document, yaml_node_t *mapping, const char *key,
			     unsigned occurrence);
/* Entry `index` (0-based) of a sequence node, or NULL. */
yaml_node_t *policy_yaml_item(yaml_document_t *document, yaml_node_t *sequence, size_t index);

#endif
