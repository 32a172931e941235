/*
 * policy/parse.c — from bytes to a shape-checked document, with a place for every error.
 *
 * Two parsers read the same bytes. libyaml builds a node tree first: its syntax errors carry
 * exact marks, and its nodes are the positions every later error points at. libcyaml then loads
 * the schema below; it reports a shape error only as log lines (a message and a backtrace of
 * mapping fields and sequence entries), so we capture those lines, follow the backtrace through
 * the libyaml tree, and point at the node it names.
 */
#include "policy/raw.h"

#include <cyaml/cyaml.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

/* ---- schema: every scalar is a string, see raw.h ---- */

#define TEXT_FIELD(key, flags, type, member) \
	CYAML_FIELD_STRING_PTR(key, flags, type, member, 0, CYAML_UNLIMITED)
#define TEXT_LIST_FIELD(key, type, member)                                                     \
	CYAML_FIELD_SEQUENCE(key, CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL, type, member,     \
			     &text_schema, 0, CYAML_UNLIMITED)

static const cyaml_schema_value_t text_schema = {
	CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};

static const cyaml_schema_field_t msr_fields[] = {
	TEXT_FIELD("name", CYAML_FLAG_DEFAULT, struct raw_msr, name),
	TEXT_FIELD("address", CYAML_FLAG_OPTIONAL, struct raw_msr, address),
	TEXT_FIELD("count", CYAML_FLAG_OPTIONAL, struct raw_msr, count),
	TEXT_LIST_FIELD("range", struct raw_msr, range),
	TEXT_FIELD("read", CYAML_FLAG_OPTIONAL, struct raw_msr, read),
	TEXT_FIELD("write_mask", CYAML_FLAG_OPTIONAL, struct raw_msr, write_mask),
	TEXT_FIELD("set", CYAML_FLAG_OPTIONAL, struct raw_msr, set),
	TEXT_LIST_FIELD("sets", struct raw_msr, sets),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t match_fields[] = {
	TEXT_FIELD("uid", CYAML_FLAG_OPTIONAL, struct raw_match, uid),
	TEXT_FIELD("user", CYAML_FLAG_OPTIONAL, struct raw_match, user),
	TEXT_FIELD("gid", CYAML_FLAG_OPTIONAL, struct raw_match, gid),
	TEXT_FIELD("group", CYAML_FLAG_OPTIONAL, struct raw_match, group),
	TEXT_FIELD("any", CYAML_FLAG_OPTIONAL, struct raw_match, any),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t energy_fields[] = {
	TEXT_FIELD("min_interval_ms", CYAML_FLAG_OPTIONAL, struct raw_energy, min_interval_ms),
	TEXT_FIELD("resolution_uj", CYAML_FLAG_OPTIONAL, struct raw_energy, resolution_uj),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t perf_fields[] = {
	TEXT_LIST_FIELD("events", struct raw_perf, events),
	TEXT_FIELD("scope", CYAML_FLAG_OPTIONAL, struct raw_perf, scope),
	TEXT_FIELD("sampling", CYAML_FLAG_OPTIONAL, struct raw_perf, sampling),
	TEXT_FIELD("max_open", CYAML_FLAG_OPTIONAL, struct raw_perf, max_open),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t rule_fields[] = {
	CYAML_FIELD_MAPPING_PTR("match", CYAML_FLAG_DEFAULT, struct raw_rule, match, match_fields),
	TEXT_LIST_FIELD("allow", struct raw_rule, allow),
	TEXT_FIELD("read_only", CYAML_FLAG_OPTIONAL, struct raw_rule, read_only),
	TEXT_LIST_FIELD("create_rings", struct raw_rule, create_rings),
	TEXT_LIST_FIELD("monitor_rings", struct raw_rule, monitor_rings),
	CYAML_FIELD_MAPPING_PTR("energy", CYAML_FLAG_OPTIONAL, struct raw_rule, energy,
				energy_fields),
	CYAML_FIELD_MAPPING_PTR("perf", CYAML_FLAG_OPTIONAL, struct raw_rule, perf, perf_fields),
	TEXT_LIST_FIELD("capabilities", struct raw_rule, capabilities),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t msr_schema = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_msr, msr_fields),
};
static const cyaml_schema_value_t rule_schema = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_rule, rule_fields),
};

static const cyaml_schema_field_t energy_page_fields[] = {
	TEXT_FIELD("max_rate_hz", CYAML_FLAG_OPTIONAL, struct raw_energy_page, max_rate_hz),
	TEXT_FIELD("edge_cpu_percent", CYAML_FLAG_OPTIONAL, struct raw_energy_page,
		   edge_cpu_percent),
	TEXT_FIELD("edge_cpu_percent_per_uid", CYAML_FLAG_OPTIONAL, struct raw_energy_page,
		   edge_cpu_percent_per_uid),
	CYAML_FIELD_END,
};

static const cyaml_schema_field_t top_fields[] = {
	TEXT_FIELD("version", CYAML_FLAG_DEFAULT, struct raw_policy, version),
	TEXT_FIELD("default", CYAML_FLAG_DEFAULT, struct raw_policy, default_action),
	CYAML_FIELD_MAPPING_PTR("energy_page", CYAML_FLAG_OPTIONAL, struct raw_policy, energy_page,
				energy_page_fields),
	CYAML_FIELD_SEQUENCE("msrs", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL, struct raw_policy,
			     msrs, &msr_schema, 0, CYAML_UNLIMITED),
	CYAML_FIELD_SEQUENCE("rules", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL, struct raw_policy,
			     rules, &rule_schema, 0, CYAML_UNLIMITED),
	CYAML_FIELD_END,
};

static const cyaml_schema_value_t top_schema = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw_policy, top_fields),
};

/* What an error calls each kind of mapping, keyed by the field that holds it. */
static const struct {
	const char *owner; /* NULL: the top-level mapping */
	const char *title;
	const cyaml_schema_field_t *fields;
} mapping_kinds[] = {
	{ NULL, "the policy", top_fields },  { "msrs", "MSR entry", msr_fields },
	{ "rules", "rule", rule_fields },    { "match", "match", match_fields },
	{ "energy", "energy", energy_fields },
	{ "perf", "perf", perf_fields },
	{ "energy_page", "energy_page", energy_page_fields },
};

/* ---- libyaml node lookups ---- */

static bool scalar_is(const yaml_node_t *node, const char *text)
{
	return node != NULL && node->type == YAML_SCALAR_NODE &&
	       strcmp((const char *)node->data.scalar.value, text) == 0;
}

yaml_node_t *policy_yaml_key(yaml_document_t *document, yaml_node_t *mapping, const char *key,
			     unsigned occurrence)
{
	if (mapping == NULL || mapping->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *pair = mapping->data.mapping.pairs.start;
	     pair < mapping->data.mapping.pairs.top; pair++) {
		yaml_node_t *node = yaml_document_get_node(document, pair->key);

		if (scalar_is(node, key) && occurrence-- == 0)
			return node;
	}
	return NULL;
}

yaml_node_t *policy_yaml_value(yaml_document_t *document, yaml_node_t *mapping, const char *key)
{
	if (mapping == NULL || mapping->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *pair = mapping->data.mapping.pairs.start;
	     pair < mapping->data.mapping.pairs.top; pair++) {
		if (scalar_is(yaml_document_get_node(document, pair->key), key))
			return yaml_document_get_node(document, pair->value);
	}
	return NULL;
}

/* The first key of a mapping node that is not a scalar, or NULL. */
static yaml_node_t *yaml_structured_key(yaml_document_t *document, yaml_node_t *mapping)
{
	if (mapping == NULL || mapping->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *pair = mapping->data.mapping.pairs.start;
	     pair < mapping->data.mapping.pairs.top; pair++) {
		yaml_node_t *key = yaml_document_get_node(document, pair->key);

		if (key != NULL && key->type != YAML_SCALAR_NODE)
			return key;
	}
	return NULL;
}

yaml_node_t *policy_yaml_item(yaml_document_t *document, yaml_node_t *sequence, size_t index)
{
	if (sequence == NULL || sequence->type != YAML_SEQUENCE_NODE)
		return NULL;
	yaml_node_item_t *items = sequence->data.sequence.items.start;
	if (index >= (size_t)(sequence->data.sequence.items.top - items))
		return NULL;
	return yaml_document_get_node(document, items[index]);
}

/* ---- syntax errors (libyaml) ---- */

/* Reader errors (bad UTF-8, control characters) give a byte offset, not a mark. */
static void place_of_offset(const char *yaml, size_t length, size_t offset, unsigned *line,
			    unsigned *column)
{
	*line = 1;
	*column = 1;
	for (size_t i = 0; i < offset && i < length; i++) {
		if (yaml[i] == '\n') {
			(*line)++;
			*column = 1;
		} else {
			(*column)++;
		}
	}
}

static int syntax_error(const yaml_parser_t *parser, const char *yaml, size_t length,
			struct policy_error *error)
{
	unsigned line = (unsigned)parser->problem_mark.line + 1;
	unsigned column = (unsigned)parser->problem_mark.column + 1;
	const char *problem = parser->problem ? parser->problem : "unreadable YAML";

	if (parser->error == YAML_MEMORY_ERROR)
		return -ENOMEM;
	if (parser->error == YAML_READER_ERROR) {
		place_of_offset(yaml, length, parser->problem_offset, &line, &column);
		return policy_fail(error, line, column, "not valid text: %s", problem);
	}
	if (parser->problem_mark.index < length && yaml[parser->problem_mark.index] == '\t')
		return policy_fail(error, line, column,
				   "tab character: YAML indentation must use spaces");
	if (parser->context != NULL)
		return policy_fail(error, line, column, "syntax error: %s (%s at line %u)", problem,
				   parser->context, (unsigned)parser->context_mark.line + 1);
	return policy_fail(error, line, column, "syntax error: %s", problem);
}

/* Load the one document of the file into `document`; more than one is an error, since a second
 * document would be ignored by the loader and its rules silently lost. */
static int load_document(const char *yaml, size_t length, yaml_document_t *document,
			 struct policy_error *error)
{
	yaml_parser_t parser;
	yaml_document_t extra;
	int result = 0;

	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, length);
	if (!yaml_parser_load(&parser, document)) {
		result = syntax_error(&parser, yaml, length, error);
		goto out;
	}
	if (yaml_document_get_root_node(document) == NULL) {
		result = policy_fail(error, 1, 1,
				     "empty policy: it needs at least 'version: 1' and "
				     "'default: deny'");
		goto fail;
	}
	if (!yaml_parser_load(&parser, &extra)) {
		result = syntax_error(&parser, yaml, length, error);
		goto fail;
	}
	if (yaml_document_get_root_node(&extra) != NULL) {
		result = policy_fail(error, (unsigned)extra.start_mark.line + 1,
				     (unsigned)extra.start_mark.column + 1,
				     "a second YAML document: a policy file holds exactly one");
		yaml_document_delete(&extra);
		goto fail;
	}
	yaml_document_delete(&extra);
	goto out;
fail:
	yaml_document_delete(document);
out:
	yaml_parser_delete(&parser);
	return result;
}

/* ---- shape errors (libcyaml) ---- */

enum frame_kind { FRAME_FIELD, FRAME_MAPPING, FRAME_ITEM };

struct shape_frame {
	enum frame_kind kind;
	char field[64];
	unsigned item; /* 1-based sequence entry, as the backtrace counts */
	unsigned line;
	unsigned column;
};

#define SHAPE_MAX_FRAMES 32

/* libcyaml's log lines for one failed load: the first error message and the backtrace,
 * innermost frame first. */
struct shape_log {
	char message[512];
	struct shape_frame frames[SHAPE_MAX_FRAMES];
	size_t frame_count;
};

static void parse_frame(struct shape_log *log, const char *line)
{
	struct shape_frame frame = { 0 };

	if (log->frame_count == SHAPE_MAX_FRAMES)
		return;
	if (sscanf(line, "  in mapping field '%63[^']' (line: %u, column: %u)", frame.field,
		   &frame.line, &frame.column) == 3)
		frame.kind = FRAME_FIELD;
	else if (sscanf(line, "  in mapping (line: %u, column: %u)", &frame.line,
			&frame.column) == 2)
		frame.kind = FRAME_MAPPING;
	else if (sscanf(line, "  in sequence entry '%u' (line: %u, column: %u)", &frame.item,
			&frame.line, &frame.column) == 3)
		frame.kind = FRAME_ITEM;
	else
		return;
	log->frames[log->frame_count++] = frame;
}

static void shape_log_line(cyaml_log_t level, void *context, const char *format, va_list args)
{
	struct shape_log *log = context;
	char line[512];

	if (level < CYAML_LOG_ERROR)
		return;
	/* One call is one line ending in a newline; only that one is cut, since a quoted key
	 * may hold newlines of its own and must still match its node in the tree. */
	int length = vsnprintf(line, sizeof(line), format, args);
	if (length > 0 && (size_t)length < sizeof(line) && line[length - 1] == '\n')
		line[length - 1] = '\0';
	if (strncmp(line, "  in ", 5) == 0) {
		parse_frame(log, line);
		return;
	}
	if (log->message[0] != '\0' || strcmp(line, "Load: Backtrace:") == 0)
		return;
	const char *text = strncmp(line, "Load: ", 6) == 0 ? line + 6 : line;
	snprintf(log->message, sizeof(log->message), "%s", text);
}

/* The text after `prefix` in the message: a key, up to the end of the line, spaces and all. */
static const char *message_rest(const struct shape_log *log, const char *prefix)
{
	size_t length = strlen(prefix);

	return strncmp(log->message, prefix, length) == 0 ? log->message + length : NULL;
}

/* Where the backtrace leads in the libyaml tree, and how to describe that node. */
struct shape_place {
	yaml_node_t *node;
	const char *field; /* last field descended into, NULL if none: names the mapping kind */
	unsigned item;     /* 1-based entry if the last step was into a sequence, else 0 */
	unsigned line;     /* the innermost frame's own place, when the walk gets lost */
	unsigned column;
};

/* Follow the backtrace from the root. `keep` frames at the inner end are not descended into:
 * for a duplicate or missing key, libcyaml's innermost frame names a field of the mapping that
 * is itself the place of the error. */
static void follow_backtrace(yaml_document_t *document, const struct shape_log *log, size_t keep,
			     struct shape_place *place)
{
	*place = (struct shape_place){ .node = yaml_document_get_root_node(document) };
	if (log->frame_count > 0) {
		place->line = log->frames[0].line;
		place->column = log->frames[0].column;
	}
	for (size_t i = log->frame_count; i > keep && place->node != NULL; i--) {
		const struct shape_frame *frame = &log->frames[i - 1];

		if (frame->kind == FRAME_FIELD) {
			place->node = policy_yaml_value(document, place->node, frame->field);
			place->field = frame->field;
			place->item = 0;
		} else if (frame->kind == FRAME_ITEM && frame->item > 0) {
			place->node = policy_yaml_item(document, place->node, frame->item - 1);
			place->item = frame->item;
		}
	}
}

/* A mapping is named after the field that holds it, directly or as entries of a list. */
static size_t mapping_kind_of(const struct shape_place *place)
{
	for (size_t i = 1; place->field != NULL &&
			   i < sizeof(mapping_kinds) / sizeof(mapping_kinds[0]);
	     i++) {
		if (strcmp(mapping_kinds[i].owner, place->field) == 0)
			return i;
	}
	return 0;
}

static void list_keys(const cyaml_schema_field_t *fields, char *buffer, size_t size)
{
	size_t used = 0;

	buffer[0] = '\0';
	for (; fields->key != NULL && used < size; fields++)
		used += (size_t)snprintf(buffer + used, size - used, "%s%s", used ? ", " : "",
					 fields->key);
}

static const char *yaml_kind_name(const char *cyaml_name)
{
	if (strcmp(cyaml_name, "MAPPING") == 0 || strcmp(cyaml_name, "MAPPING_START") == 0)
		return "a mapping (key: value)";
	if (strncmp(cyaml_name, "SEQUENCE", 8) == 0)
		return "a list";
	if (strcmp(cyaml_name, "ALIAS") == 0)
		return "an alias";
	return "a single value";
}

/* The place of `node`, or of the innermost backtrace frame when the walk lost its way. */
struct where {
	unsigned line;
	unsigned column;
};

static struct where where_of(const struct shape_place *place, const yaml_node_t *node)
{
	struct where where = { place->line, place->column };

	if (node != NULL)
		where = (struct where){ (unsigned)node->start_mark.line + 1,
					(unsigned)node->start_mark.column + 1 };
	if (where.line == 0)
		where = (struct where){ 1, 1 };
	return where;
}

static int key_error(yaml_document_t *document, const struct shape_log *log, const char *key,
		     bool duplicate, struct policy_error *error)
{
	struct shape_place place;
	char keys[160], shown[96];

	/* An unknown key leaves libcyaml's innermost frame on the mapping itself; a duplicate
	 * leaves it on the repeated field. */
	follow_backtrace(document, log, duplicate ? 1 : 0, &place);
	const char *title = mapping_kinds[mapping_kind_of(&place)].title;
	struct where at = where_of(&place, policy_yaml_key(document, place.node, key,
							   duplicate ? 1 : 0));
	/* a quoted key may hold any character; the message stays one line */
	log_escape(shown, sizeof(shown), key, strlen(key));
	if (duplicate)
		return policy_fail(error, at.line, at.column, "duplicate key '%s' in %s", shown,
				   title);
	list_keys(mapping_kinds[mapping_kind_of(&place)].fields, keys, sizeof(keys));
	if (key[0] == '\0')
		return policy_fail(error, at.line, at.column, "empty key in %s (known keys: %s)",
				   title, keys);
	return policy_fail(error, at.line, at.column, "unknown key '%s' in %s (known keys: %s)",
			   shown, title, keys);
}

static int missing_key_error(yaml_document_t *document, const struct shape_log *log,
			     const char *key, struct policy_error *error)
{
	struct shape_place place;

	follow_backtrace(document, log, 1, &place);
	struct where at = where_of(&place, place.node);
	return policy_fail(error, at.line, at.column, "%s lacks the required key '%s'",
			   mapping_kinds[mapping_kind_of(&place)].title, key);
}

static int type_error(yaml_document_t *document, const struct shape_log *log,
		      const char *expected, const char *found, struct policy_error *error)
{
	struct shape_place place;
	char subject[96];

	follow_backtrace(document, log, 0, &place);
	if (place.item)
		snprintf(subject, sizeof(subject), "entry %u of '%s'", place.item,
			 place.field ? place.field : "?");
	else if (place.field)
		snprintf(subject, sizeof(subject), "'%s'", place.field);
	else
		snprintf(subject, sizeof(subject), "the policy");
	struct where at = where_of(&place, place.node);
	return policy_fail(error, at.line, at.column, "%s must be %s, not %s", subject,
			   yaml_kind_name(expected), yaml_kind_name(found));
}

/* libcyaml has no handler for a mapping key that is a list or a mapping: it fails without a
 * message, its backtrace ending in the mapping (on the last field it read). It reads keys in
 * order, so the key it stopped at is the first such key there. */
static int structured_key_error(yaml_document_t *document, const struct shape_log *log,
				struct policy_error *error)
{
	struct shape_place place;

	follow_backtrace(document, log, 1, &place);
	yaml_node_t *key = yaml_structured_key(document, place.node);
	if (key == NULL)
		return 1; /* not that case after all: the caller says what libcyaml said */
	struct where at = where_of(&place, key);
	return policy_fail(error, at.line, at.column, "a key in %s must be a single value, not %s",
			   mapping_kinds[mapping_kind_of(&place)].title,
			   yaml_kind_name(key->type == YAML_MAPPING_NODE ? "MAPPING" : "SEQUENCE"));
}

static int shape_error(yaml_document_t *document, const struct shape_log *log,
		       struct policy_error *error)
{
	char first[64], second[64];
	struct shape_place place;
	const char *key;

	if ((key = message_rest(log, "Unexpected key: ")) != NULL)
		return key_error(document, log, key, false, error);
	if ((key = message_rest(log, "Mapping field already seen: ")) != NULL)
		return key_error(document, log, key, true, error);
	if ((key = message_rest(log, "Missing required mapping field: ")) != NULL)
		return missing_key_error(document, log, key, error);
	if (log->message[0] == '\0' && log->frame_count > 0) {
		int result = structured_key_error(document, log, error);
		if (result <= 0)
			return result;
	}
	if (sscanf(log->message, "Expecting %63s got event: %63s", first, second) == 2) {
		first[strcspn(first, ",")] = '\0';
		return type_error(document, log, first, second, error);
	}
	follow_backtrace(document, log, 0, &place);
	struct where at = where_of(&place, place.node);
	return policy_fail(error, at.line, at.column, "invalid document: %s",
			   log->message[0] ? log->message : "rejected by the schema");
}

static int load_shape(const char *yaml, size_t length, yaml_document_t *document,
		      struct raw_policy **raw, struct policy_error *error)
{
	struct shape_log log = { .message = "" };
	const cyaml_config_t config = {
		.log_fn = shape_log_line,
		.log_ctx = &log,
		.mem_fn = cyaml_mem,
		.log_level = CYAML_LOG_ERROR,
		.flags = CYAML_CFG_DEFAULT,
	};

	cyaml_err_t status = cyaml_load_data((const uint8_t *)yaml, length, &config, &top_schema,
					     (cyaml_data_t **)raw, NULL);
	if (status == CYAML_OK)
		return 0;
	*raw = NULL;
	if (status == CYAML_ERR_OOM)
		return -ENOMEM;
	return shape_error(document, &log, error);
}

int policy_parse(const char *yaml, size_t length, struct policy *policy,
		 struct policy_error *error)
{
	yaml_document_t document;
	struct raw_policy *raw = NULL;
	const cyaml_config_t config = { .mem_fn = cyaml_mem, .log_level = CYAML_LOG_ERROR };

	int result = load_document(yaml, length, &document, error);
	if (result < 0)
		return result;
	result = load_shape(yaml, length, &document, &raw, error);
	if (result == 0)
		result = policy_build(raw, &document, policy, error);
	if (raw != NULL)
		cyaml_free(&config, &top_schema, raw, 0);
	yaml_document_delete(&document);
	return result;
}
