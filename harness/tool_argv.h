/*
 * harness/tool_argv.h — the command line that runs one of our programs from a test: under
 * valgrind memcheck in the valgrind pass (HAECER_VALGRIND=1), so the programs tests start are
 * checked like the tests themselves, and directly otherwise.
 */
#ifndef HAECER_HARNESS_TOOL_ARGV_H
#define HAECER_HARNESS_TOOL_ARGV_H

#include <stddef.h>

/* How many entries harness_valgrind_prefix may write. */
#define HARNESS_VALGRIND_PREFIX_MAX 8u

/* In the valgrind pass, write /usr/bin/valgrind and its memcheck options (quiet, exit 99 on a
 * finding, definite leaks are findings, tests/valgrind.supp) to argv; otherwise nothing.
 * Returns how many entries it wrote. */
size_t harness_valgrind_prefix(const char **argv);

/* argv = [valgrind prefix] program --socket socket_path arguments... NULL, in at most `max`
 * entries (arguments that do not fit are dropped; max > HARNESS_VALGRIND_PREFIX_MAX + 3).
 * Returns the count before the NULL. The strings must outlive argv's use. */
size_t harness_tool_argv(const char **argv, size_t max, const char *program,
			 const char *socket_path, const char *const *arguments);

/* Run [valgrind prefix] program arguments... (at most 31 entries in all; the rest are dropped)
 * through harness_run: its exit status or -1, stdout and stderr as harness_run captures them. */
int harness_run_program(const char *program, const char *const *arguments, char **out,
			char **err);

#endif
