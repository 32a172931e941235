/*
 * libhaecer.so exports exactly the functions its installed headers declare, checked both ways:
 * every dynamic symbol the library defines is declared in some header of
 * libclient/include/haecer/, and every function those headers declare is exported. The declarations are taken from the headers
 * themselves (the C preprocessor's output, keeping only the lines that come from them), not from
 * a list kept here, so a function added to a header without an export (or code that leaks out of
 * libclient/haecer.map) fails this test. It runs the compiler and nm, not our code under
 * memcheck: the valgrind pass skips it.
 */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness/msrd_harness.h"

#define MAX_NAMES 512
#define NAME_SIZE 128

struct name_set {
	char names[MAX_NAMES][NAME_SIZE];
	size_t count;
};

static struct name_set declared, exported;
static char include_dir[PATH_MAX];

static bool set_has(const struct name_set *set, const char *name)
{
	for (size_t i = 0; i < set->count; i++)
		if (strcmp(set->names[i], name) == 0)
			return true;
	return false;
}

static void set_add(struct name_set *set, const char *name, size_t length)
{
	char copy[NAME_SIZE];

	assert_true(length > 0 && length < NAME_SIZE);
	memcpy(copy, name, length);
	copy[length] = '\0';
	if (set_has(set, copy))
		return;
	assert_true(set->count < MAX_NAMES);
	memcpy(set->names[set->count++], copy, length + 1);
}

/* sh -c COMMAND; its stdout (malloc'ed) or a failed test. */
static char *shell_output(const char *command)
{
	const char *argv[] = { "/bin/sh", "-c", command, NULL };
	char *out = NULL, *err = NULL;
	int status = harness_run(argv, &out, &err);

	if (status != 0)
		fail_msg("$ %s\nexit %d: %s", command, status, err ? err : "");
	free(err);
	assert_non_null(out);
	return out;
}

/* The preprocessed text of every installed header, with only the lines that come from them. */
static char *installed_declarations(void)
{
	char command[4 * PATH_MAX], *out, *text;
	struct dirent **entries;
	size_t used = 0, size;
	bool ours = false;
	int count, offset;

	count = scandir(include_dir, &entries, NULL, alphasort);
	assert_true(count > 0);
	offset = snprintf(command, sizeof(command), "{ ");
	for (int i = 0; i < count; i++) {
		const char *name = entries[i]->d_name;
		size_t length = strlen(name);

		if (length > 2 && strcmp(name + length - 2, ".h") == 0)
			offset += snprintf(command + offset, sizeof(command) - (size_t)offset,
					   "echo '#include <haecer/%s>'; ", name);
		free(entries[i]);
	}
	free(entries);
	snprintf(command + offset, sizeof(command) - (size_t)offset,
		 "} | cc -E -std=gnu11 -I'%s/..' -x c -", include_dir);
	out = shell_output(command);
	size = strlen(out) + 1;
	text = malloc(size);
	assert_non_null(text);
	/* Line markers: # LINE "FILE" FLAGS; keep what lies in our include directory. */
	for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		if (line[0] == '#') {
			char *file = strchr(line, '"');

			ours = file != NULL && strncmp(file + 1, include_dir, strlen(include_dir)) == 0;
			continue;
		}
		if (!ours)
			continue;
		used += (size_t)snprintf(text + used, size - used, "%s\n", line);
	}
	free(out);
	return text;
}

static bool is_identifier_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

/* Function declarations at file scope: the identifier before the first '(' of a declaration
 * that is neither a typedef nor static (an inline function is not exported). */
static void collect_functions(const char *text, struct name_set *set)
{
	const char *last_identifier = NULL;
	size_t last_length = 0;
	int braces = 0, parens = 0;
	bool skip_declaration = false, named = false;

	for (const char *p = text; *p != '\0'; p++) {
		if (is_identifier_char(*p) && (p == text || !is_identifier_char(p[-1]))) {
			const char *start = p;

			while (is_identifier_char(p[1]))
				p++;
			last_identifier = start;
			last_length = (size_t)(p - start) + 1;
			if (braces == 0 && parens == 0 &&
			    ((last_length == 7 && strncmp(start, "typedef", 7) == 0) ||
			     (last_length == 6 && strncmp(start, "static", 6) == 0)))
				skip_declaration = true;
			continue;
		}
		switch (*p) {
		case '{':
			braces++;
			break;
		case '}':
			braces--;
			break;
		case '(':
			if (braces == 0 && parens == 0 && !skip_declaration && !named &&
			    last_identifier != NULL &&
			    !(last_length == 13 && strncmp(last_identifier, "__attribute__", 13) == 0)) {
				set_add(set, last_identifier, last_length);
				named = true;
			}
			parens++;
			break;
		case ')':
			parens--;
			break;
		case ';':
			if (braces == 0 && parens == 0) {
				skip_declaration = false;
				named = false;
			}
			break;
		}
		if (!isspace((unsigned char)*p))
			last_identifier = NULL;
	}
}

/* Defined dynamic symbols of libhaecer.so, without their version (NAME@@HAECER_1); the version
 * node itself (type A) and names of the toolchain's own namespace (_init, __odr_asan_...) left
 * out. */
static void collect_exports(struct name_set *set)
{
	char command[2 * PATH_MAX], *out;

	snprintf(command, sizeof(command), "nm -D --defined-only '%s/libhaecer.so'",
		 harness_build_dir());
	out = shell_output(command);
	for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n")) {
		char type, name[NAME_SIZE];

		if (sscanf(line, "%*s %c %127s", &type, name) != 2 &&
		    sscanf(line, "%c %127s", &type, name) != 2)
			continue;
		name[strcspn(name, "@")] = '\0';
		if (type == 'A' || name[0] == '_')
			continue;
		set_add(set, name, strlen(name));
	}
	free(out);
}

static int setup(void **state)
{
	char *text;

	(void)state;
	snprintf(include_dir, sizeof(include_dir), "%s/libclient/include/haecer",
		 harness_source_dir());
	if (include_dir[0] != '/') {
		char cwd[PATH_MAX / 2];

		assert_non_null(getcwd(cwd, sizeof(cwd)));
		snprintf(include_dir, sizeof(include_dir), "%s/%s/libclient/include/haecer", cwd,
			 harness_source_dir());
	}
	text = installed_declarations();
	collect_functions(text, &declared);
	free(text);
	collect_exports(&exported);
	return 0;
}

/* The parse found the API at all: names of each header and of both layers. */
static void test_headers_parsed(void **state)
{
	static const char *const expected[] = {
		"haecer_connect",        /* msrd.h */
		"haecer_counter_read",   /* haecer.h */
		"haecer_region_begin",   /* region.h */
		"readCounter",           /* perfmon.h */
		"setupFerretMonitor",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
		if (!set_has(&declared, expected[i]))
			fail_msg("%s not found among the %zu declarations of %s", expected[i],
				 declared.count, include_dir);
	assert_false(set_has(&declared, "__attribute__"));
}

/* How many names of `names` are not in `in`, each printed with `what`. */
static size_t count_missing(const struct name_set *names, const struct name_set *in,
			    const char *what)
{
	size_t missing = 0;

	for (size_t i = 0; i < names->count; i++)
		if (!set_has(in, names->names[i])) {
			printf("%s: %s\n", what, names->names[i]);
			missing++;
		}
	return missing;
}

static void test_every_export_is_declared(void **state)
{
	(void)state;
	assert_int_equal(count_missing(&exported, &declared, "exported but in no installed header"),
			 0);
}

static void test_every_declaration_is_exported(void **state)
{
	(void)state;
	assert_int_equal(count_missing(&declared, &exported, "declared but not exported by "
				       "libhaecer.so"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_headers_parsed),
		cmocka_unit_test(test_every_export_is_declared),
		cmocka_unit_test(test_every_declaration_is_exported),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
