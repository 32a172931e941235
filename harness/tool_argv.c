#include "harness/tool_argv.h"

#include <limits.h>
#include <stdio.h>

#include "harness/msrd_harness.h"

size_t harness_valgrind_prefix(const char **argv)
{
	static char suppressions[PATH_MAX + 32];
	size_t count = 0;

	if (!harness_valgrind())
		return 0;
	snprintf(suppressions, sizeof(suppressions), "--suppressions=%s/tests/valgrind.supp",
		 harness_source_dir());
	argv[count++] = "/usr/bin/valgrind";
	argv[count++] = "--quiet";
	argv[count++] = "--error-exitcode=99";
	argv[count++] = "--leak-check=full";
	argv[count++] = "--errors-for-leak-kinds=definite";
	argv[count++] = "--show-leak-kinds=definite";
	/* A server that switches to another user (--user) could not remove valgrind's gdb pipes,
	 * and would say so in its log. */
	argv[count++] = "--vgdb=no";
	argv[count++] = suppressions;
	return count;
}

size_t harness_tool_argv(const char **argv, size_t max, const char *program,
			 const char *socket_path, const char *const *arguments)
{
	size_t count = harness_valgrind_prefix(argv);

	argv[count++] = program;
	argv[count++] = "--socket";
	argv[count++] = socket_path;
	for (size_t i = 0; arguments[i] != NULL && count + 1 < max; i++)
		argv[count++] = arguments[i];
	argv[count] = NULL;
	return count;
}

int harness_run_program(const char *program, const char *const *arguments, char **out,
			char **err)
{
	const char *argv[32];
	size_t count = harness_valgrind_prefix(argv);

	argv[count++] = program;
	for (size_t i = 0; arguments[i] != NULL && count < 31; i++)
		argv[count++] = arguments[i];
	argv[count] = NULL;
	return harness_run(argv, out, err);
}
