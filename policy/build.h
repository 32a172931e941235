/*
 * policy/build.h — the range and consistency pass's shared state and helpers, for the files of
 * policy/ that build a struct policy (build.c: scalars, MSR entries, energy page; build_rules.c:
 * the rules). Nothing outside policy/ includes this header.
 */
#ifndef HAECER_POLICY_BUILD_H
#define HAECER_POLICY_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/raw.h"

struct build {
	struct policy *policy;
	yaml_document_t *document;
	yaml_node_t *root;
	yaml_node_t *msrs;  /* the `msrs` list node, NULL when absent */
	yaml_node_t *rules; /* the `rules` list node, NULL when absent */
	struct policy_error *error;
};

static inline unsigned build_line_of(const yaml_node_t *node)
{
	return (unsigned)node->start_mark.line + 1;
}

/* Records the error at `node` (the document's root when NULL); returns -EINVAL. */
int build_fail(struct build *build, const yaml_node_t *node, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

/* The value node of `key` in `mapping`, or the mapping itself so that an error still has a
 * place. */
yaml_node_t *build_value_node(struct build *build, yaml_node_t *mapping, const char *key);
yaml_node_t *build_item_node(struct build *build, yaml_node_t *sequence, size_t index);

/* A number that fits in `bits` bits, or a placed error saying why not. */
int build_parse_number(struct build *build, yaml_node_t *node, const char *what, const char *text,
		       unsigned bits, uint64_t *out);
int build_parse_bool(struct build *build, yaml_node_t *node, const char *what, const char *text,
		     bool *out);

/* The `rules` list (build_rules.c), after the MSR entries it refers to. */
int build_rules(struct build *build, const struct raw_policy *raw);

#endif
