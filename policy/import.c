/*
 * policy/import.c — msr-safe allowlists to policy YAML.
 *
 * An allowlist (LLNL msr-safe, /dev/cpu/msr_allowlist) has one register per line,
 * "0xADDRESS 0xWRITEMASK", optionally followed by a '#' comment that usually names it
 * (`0x00000611 0x0000000000000000 # "MSR_PKG_ENERGY_STATUS"`); lines starting with '#' and blank
 * lines are ignored. msr-safe lets anyone who may open its device read every listed register and
 * write the bits of its mask, so the import makes each line a readable entry with that mask, puts
 * them all in one set named after the file, and grants the set to one group or to everyone.
 * The whole input is checked before anything is written, so a malformed line leaves `out` empty.
 */
#include "policy/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IMPORT_MAX_LINE 4096u
#define IMPORT_MAX_ENTRIES 65536u

struct import_entry {
	uint32_t address;
	uint64_t write_mask;
	unsigned line;
	char name[POLICY_MAX_NAME + 1];
};

struct import {
	struct import_entry *entries;
	size_t count;
	size_t capacity;
	struct policy_error *error;
	unsigned line;
};

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

static char *skip_spaces(char *text)
{
	while (is_space(*text))
		text++;
	return text;
}

static int fail_line(struct import *import, const char *line, const char *at, const char *format,
		     ...) __attribute__((format(printf, 4, 5)));

static int fail_line(struct import *import, const char *line, const char *at, const char *format,
		     ...)
{
	char message[sizeof(import->error->message)];
	va_list args;

	va_start(args, format);
	vsnprintf(message, sizeof(message), format, args);
	va_end(args);
	return policy_fail(import->error, import->line, (unsigned)(at - line) + 1, "%s", message);
}

/* Cut the next whitespace-delimited token out of *cursor. */
static char *next_token(char **cursor)
{
	char *start = skip_spaces(*cursor), *end = start;

	while (*end != '\0' && !is_space(*end) && *end != '#')
		end++;
	*cursor = end;
	return start;
}

/* An identifier from a comment such as ` "MSR_PKG_ENERGY_STATUS (Table: 2-20)"` or
 * ` Time Stamp Counter`: the text before any '(' with every run of other characters made '_'. */
static void name_from_comment(const char *comment, char *name, size_t size)
{
	size_t used = 0;
	bool gap = false;

	for (const char *c = comment; *c != '\0' && *c != '(' && used + 1 < size; c++) {
		bool word = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			    (*c >= '0' && *c <= '9') || *c == '_';
		if (!word) {
			gap = used > 0;
			continue;
		}
		if (gap && used + 2 < size)
			name[used++] = '_';
		gap = false;
		name[used++] = *c;
	}
	name[used] = '\0';
	if (used > 0 && name[0] >= '0' && name[0] <= '9')
		name[0] = '\0'; /* an identifier cannot start with a digit; use the address */
}

static bool name_taken(const struct import *import, const char *name)
{
	for (size_t i = 0; i < import->count; i++) {
		if (strcmp(import->entries[i].name, name) == 0)
			return true;
	}
	return false;
}

static void choose_name(const struct import *import, const char *comment,
			struct import_entry *entry)
{
	char base[POLICY_MAX_NAME + 1] = "";

	if (comment != NULL)
		name_from_comment(comment, base, sizeof(base));
	if (base[0] != '\0' && !name_taken(import, base)) {
		snprintf(entry->name, sizeof(entry->name), "%s", base);
		return;
	}
	/* Unnamed, or the same name twice: the address makes it unique. */
	if (base[0] != '\0')
		snprintf(entry->name, sizeof(entry->name), "%.50s_%" PRIX32, base, entry->address);
	else
		snprintf(entry->name, sizeof(entry->name), "MSR_%08" PRIX32, entry->address);
	if (name_taken(import, entry->name))
		snprintf(entry->name, sizeof(entry->name), "MSR_%08" PRIX32 "_line%u",
			 entry->address, entry->line);
}

static int add_entry(struct import *import, struct import_entry *entry)
{
	if (import->count == import->capacity) {
		size_t capacity = import->capacity ? import->capacity * 2 : 64;
		struct import_entry *grown =
			realloc(import->entries, capacity * sizeof(*import->entries));
		if (grown == NULL)
			return -ENOMEM;
		import->entries = grown;
		import->capacity = capacity;
	}
	import->entries[import->count++] = *entry;
	return 0;
}

static int parse_field(struct import *import, char *line, char *token, const char *what,
		       unsigned bits, uint64_t *out)
{
	char *end = token + strcspn(token, " \t\r\n\v\f#");
	char saved = *end;

	*end = '\0'; /* parse the token alone; restored below for the caller's later messages */
	int result = policy_parse_u64(token, out);
	if (result == 0 && bits < 64 && (*out >> bits) != 0)
		result = -ERANGE;
	if (result == -ERANGE)
		result = fail_line(import, line, token, "%s %s does not fit in %u bits", what,
				   token, bits);
	else if (result < 0)
		result = fail_line(import, line, token, "%s '%s' is not a number (0x1f or 31)",
				   what, token);
	*end = saved;
	return result;
}

static int parse_line(struct import *import, char *line)
{
	struct import_entry entry = { .line = import->line };
	uint64_t address, mask;
	char *cursor = line;

	char *first = next_token(&cursor);
	if (*first == '\0' || *first == '#')
		return 0;
	char *second = next_token(&cursor);
	if (*second == '\0' || *second == '#')
		return fail_line(import, line, second,
				 "expected 'ADDRESS WRITEMASK', found only an address");
	int result = parse_field(import, line, first, "address", 32, &address);
	if (result == 0)
		result = parse_field(import, line, second, "write mask", 64, &mask);
	if (result < 0)
		return result;
	cursor = skip_spaces(cursor);
	if (*cursor != '\0' && *cursor != '#')
		return fail_line(import, line, cursor,
				 "unexpected text after the write mask (comments start with '#')");
	entry.address = (uint32_t)address;
	entry.write_mask = mask;
	for (size_t i = 0; i < import->count; i++) {
		if (import->entries[i].address == entry.address)
			return fail_line(import, line, first,
					 "address 0x%" PRIx32 " listed twice (first at line %u)",
					 entry.address, import->entries[i].line);
	}
	if (import->count == IMPORT_MAX_ENTRIES)
		return fail_line(import, line, first, "more than %u entries", IMPORT_MAX_ENTRIES);
	choose_name(import, *cursor == '#' ? cursor + 1 : NULL, &entry);
	return add_entry(import, &entry);
}

/* One line into `line` (without its newline): 1 read, 0 end of input, -errno. Lines are
 * bounded and may not hide text behind a NUL byte. */
static int read_line(FILE *in, struct import *import, char *line, size_t size)
{
	size_t used = 0;
	int c;

	while ((c = fgetc(in)) != EOF && c != '\n') {
		if (c == '\0')
			return policy_fail(import->error, import->line + 1, (unsigned)used + 1,
					   "NUL byte in the line");
		if (used + 1 == size)
			return policy_fail(import->error, import->line + 1, 1,
					   "line longer than %zu characters", size - 1);
		line[used++] = (char)c;
	}
	if (ferror(in)) {
		policy_fail(import->error, 0, 0, "cannot read the allowlist");
		return -EIO;
	}
	line[used] = '\0';
	if (c == EOF && used == 0)
		return 0;
	import->line++;
	return 1;
}

static int read_lines(FILE *in, struct import *import)
{
	char line[IMPORT_MAX_LINE + 1];
	int result;

	while ((result = read_line(in, import, line, sizeof(line))) > 0) {
		result = parse_line(import, line);
		if (result < 0)
			return result;
	}
	if (result < 0)
		return result;
	if (import->count == 0)
		return policy_fail(import->error, 0, 0,
				   "no entries: every line is blank or a comment");
	return 0;
}

/* The set is named after the file without its extension: "al_06_3F" for
 * allowlists/al_06_3F, "site_list" for site-list.txt. */
static void set_name_of(const char *input_name, char *set, size_t size)
{
	const char *base = input_name ? strrchr(input_name, '/') : NULL;
	char stem[POLICY_MAX_NAME + 1];

	base = base ? base + 1 : input_name ? input_name : "";
	snprintf(stem, sizeof(stem), "%.*s", (int)strcspn(base, "."), base);
	name_from_comment(stem, set, size);
	if (set[0] == '\0' || strcmp(set, "all") == 0)
		snprintf(set, size, "allowlist");
}

/* The file name as the output's comment shows it: a name is any bytes but '/' and NUL, and a
 * newline in it would end the comment (and start YAML of the name's choosing), other control
 * characters or invalid UTF-8 would make the output no YAML at all; those bytes become '?'. */
static void printable_name(const char *name, char *text, size_t size)
{
	size_t used = 0;

	for (; name != NULL && *name != '\0' && used + 1 < size; name++)
		text[used++] = (*name >= 0x20 && *name < 0x7f) ? *name : '?';
	text[used] = '\0';
}

static int write_policy(const struct import *import, const char *input_name, const char *group,
			const char *ring_majors, FILE *out)
{
	char set[POLICY_MAX_NAME + 1];
	char shown[256];

	set_name_of(input_name, set, sizeof(set));
	printable_name(input_name ? input_name : "(stdin)", shown, sizeof(shown));
	fprintf(out, "# Imported from the msr-safe allowlist %s: every listed register may be\n"
		     "# read, and the bits of its write_mask written, by %s%s.\n",
		shown, group ? "members of group " : "every user", group ? group : "");
	fputs("version: 1\ndefault: deny\nmsrs:\n", out);
	for (size_t i = 0; i < import->count; i++) {
		const struct import_entry *entry = &import->entries[i];
		fprintf(out,
			"  - {name: %s, address: 0x%" PRIx32
			", read: true, write_mask: 0x%016" PRIx64 ", set: %s}\n",
			entry->name, entry->address, entry->write_mask, set);
	}
	fputs("rules:\n", out);
	if (group != NULL)
		fprintf(out, "  - match: {group: %s}\n", group);
	else
		fputs("  - match: {any: true}\n", out);
	fprintf(out, "    allow: [%s]\n", set);
	/* An allowlist knows no rings; a seed-API program's setupFerretMonitor needs its major. */
	if (ring_majors != NULL)
		fprintf(out, "    create_rings: [%s]\n    monitor_rings: [%s]\n", ring_majors,
			ring_majors);
	return fflush(out) == 0 && !ferror(out) ? 0 : -EIO;
}

/* "N" or "N-M", 0 <= N <= M <= 65535, digits only. */
static bool majors_valid(const char *text)
{
	unsigned long first, last;
	char *end;

	if (text[0] < '0' || text[0] > '9')
		return false;
	first = strtoul(text, &end, 10);
	last = first;
	if (*end == '-') {
		if (end[1] < '0' || end[1] > '9')
			return false;
		last = strtoul(end + 1, &end, 10);
	}
	return *end == '\0' && first <= last && last <= 65535;
}

int policy_import_allowlist(FILE *in, const char *input_name, const char *group, FILE *out,
			    struct policy_error *error)
{
	return policy_import_allowlist_rings(in, input_name, group, NULL, out, error);
}

int policy_import_allowlist_rings(FILE *in, const char *input_name, const char *group,
				  const char *ring_majors, FILE *out, struct policy_error *error)
{
	struct policy_error ignored;
	struct import import = { .error = error ? error : &ignored };
	int result;

	memset(import.error, 0, sizeof(*import.error));
	snprintf(import.error->file, sizeof(import.error->file), "%s",
		 input_name ? input_name : "(stdin)");
	if (in == NULL || out == NULL)
		return -EINVAL;
	if (group != NULL && !policy_account_name_valid(group)) {
		result = policy_fail(import.error, 0, 0, "group name '%s' is not valid", group);
		goto out;
	}
	if (ring_majors != NULL && !majors_valid(ring_majors)) {
		result = policy_fail(import.error, 0, 0, "ring majors '%s' are not N or N-M "
				     "(0-65535)", ring_majors);
		goto out;
	}
	result = read_lines(in, &import);
	if (result == 0) {
		result = write_policy(&import, input_name, group, ring_majors, out);
		if (result < 0)
			policy_fail(import.error, 0, 0, "cannot write the policy");
	}
out:
	free(import.entries);
	return result;
}
