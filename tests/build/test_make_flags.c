/*
 * `make CFLAGS=-O0 CPPFLAGS=... LDFLAGS=...` keeps what the build needs: the flags a user gives
 * replace only the optimisation and debug defaults, never -std=gnu11, the warnings and -Werror,
 * -fPIC, -pthread, the dependency files (-MMD -MP), -D_GNU_SOURCE and the include paths
 * (Makefile: HAECER_CPPFLAGS, HAECER_CFLAGS, HAECER_LDFLAGS). Two objects are really compiled
 * into a separate BUILD directory with the user's flags (their dependency files must appear);
 * the link line of a program is read from `make -n`, so nothing else is built. It drives make,
 * not our code under memcheck: the valgrind pass skips it.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness/msrd_harness.h"

static char build[64]; /* /tmp/haecer-make-flags-XXXXXX */

static const char *const required_compile[] = {
	"-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fPIC", "-pthread", "-MMD", "-MP",
	"-D_GNU_SOURCE", "-I.", "-Ilibclient/include",
};

/* sh -c COMMAND in the source tree; exit status, stdout+stderr in *out. */
static int make_in_source(const char *command, char **out)
{
	char line[4 * PATH_MAX];
	const char *argv[] = { "/bin/sh", "-c", line, NULL };

	snprintf(line, sizeof(line), "cd '%s' && unset MAKEFLAGS MFLAGS MAKELEVEL && %s 2>&1",
		 harness_source_dir(), command);
	return harness_run(argv, out, NULL);
}

/* The line of `text` that contains `needle` (a copy), or a failed test. */
static char *line_with(const char *text, const char *needle)
{
	const char *found = strstr(text, needle), *start, *end;
	char *line;

	if (found == NULL)
		fail_msg("no line with '%s' in:\n%s", needle, text);
	for (start = found; start > text && start[-1] != '\n'; start--)
		;
	end = strchr(found, '\n');
	if (end == NULL)
		end = found + strlen(found);
	line = strndup(start, (size_t)(end - start));
	assert_non_null(line);
	return line;
}

/* Whether the command line has `flag` as a word of its own. */
static bool has_word(const char *line, const char *flag)
{
	size_t length = strlen(flag);

	for (const char *p = strstr(line, flag); p != NULL; p = strstr(p + 1, flag))
		if ((p == line || p[-1] == ' ') && (p[length] == ' ' || p[length] == '\0'))
			return true;
	return false;
}

static void test_compile_keeps_required_flags(void **state)
{
	char command[2 * PATH_MAX], path[PATH_MAX + 32], *out = NULL, *line;
	const char *objects[] = { "shm/ring", "libclient/msrd_resources" };

	(void)state;
	snprintf(command, sizeof(command),
		 "make BUILD='%s' CFLAGS=-O0 CPPFLAGS=-DHAECER_USER_CPPFLAG '%s/shm/ring.o' "
		 "'%s/libclient/msrd_resources.o'", build, build, build);
	assert_int_equal(make_in_source(command, &out), 0);
	for (size_t i = 0; i < sizeof(objects) / sizeof(objects[0]); i++) {
		char needle[PATH_MAX];

		snprintf(needle, sizeof(needle), "-o %s/%s.o", build, objects[i]);
		line = line_with(out, needle);
		for (size_t f = 0; f < sizeof(required_compile) / sizeof(required_compile[0]); f++)
			if (!has_word(line, required_compile[f]))
				fail_msg("%s is missing from: %s", required_compile[f], line);
		assert_true(has_word(line, "-O0"));
		assert_true(has_word(line, "-DHAECER_USER_CPPFLAG"));
		assert_false(has_word(line, "-O2")); /* the user's CFLAGS replaced the default */
		free(line);
		snprintf(path, sizeof(path), "%s/%s.d", build, objects[i]);
		assert_int_equal(access(path, R_OK), 0);
	}
	free(out);
}

static void test_link_keeps_pthread(void **state)
{
	char command[2 * PATH_MAX], needle[PATH_MAX], *out = NULL, *line;

	(void)state;
	snprintf(command, sizeof(command), "make -n BUILD='%s' LDFLAGS=-Wl,-O1 '%s/msrd'", build,
		 build);
	assert_int_equal(make_in_source(command, &out), 0);
	snprintf(needle, sizeof(needle), "-o %s/msrd ", build);
	line = line_with(out, needle);
	assert_true(has_word(line, "-pthread"));
	assert_true(has_word(line, "-Wl,-O1"));
	free(line);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compile_keeps_required_flags),
		cmocka_unit_test(test_link_keeps_pthread),
	};
	int status;

	snprintf(build, sizeof(build), "%s", "/tmp/haecer-make-flags-XXXXXX");
	if (mkdtemp(build) == NULL)
		return 1;
	status = cmocka_run_group_tests(tests, NULL, NULL);
	harness_remove_tree(build);
	return status;
}
