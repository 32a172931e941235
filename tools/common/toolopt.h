/*
 * tools/common/toolopt.h — what every haecer tool shares on its command line: messages in the
 * err(3) style ("haecer-stat: message"), the usage error with its --help hint and exit status 2,
 * getopt_long's errors told with the option that caused them (optopt, not argv[optind - 1],
 * which is the program name or a neighbour when options are bundled or attached), --version
 * with the one version string of the project (HAECER_VERSION, from the top Makefile); numbers
 * by common/number.h's one rule, which rejects what strtoul would silently accept.
 *
 * Usage: tool_init("haecer-x") first; in the getopt_long loop pass ':' and '?' to
 * tool_getopt_error (with opterr = 0 and a leading ':' in the option string).
 */
#ifndef HAECER_TOOLS_COMMON_TOOLOPT_H
#define HAECER_TOOLS_COMMON_TOOLOPT_H

#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/number.h"

#define TOOL_EXIT_USAGE 2

/* The name messages start with. */
void tool_init(const char *name);
const char *tool_name(void);

/* "NAME: message\n" on stderr (warnx(3)); tool_vwarn takes the arguments as a va_list, for a
 * tool's own variadic message functions. */
void tool_warn(const char *format, ...) __attribute__((format(printf, 1, 2)));
void tool_vwarn(const char *format, va_list arguments) __attribute__((format(printf, 1, 0)));
/* tool_warn, then "Try 'NAME --help' for more information."; returns TOOL_EXIT_USAGE. */
int tool_usage_error(const char *format, ...) __attribute__((format(printf, 1, 2)));
int tool_vusage_error(const char *format, va_list arguments)
	__attribute__((format(printf, 1, 0)));

/* The message for getopt_long's ':' (missing value) or '?' (unknown option) result, naming
 * the option: "-x needs a value", "unknown option '--frob'"; returns TOOL_EXIT_USAGE. `argv`
 * and `long_options` as given to getopt_long, `option` its result. */
int tool_getopt_error(int option, char *const *argv, const struct option *long_options);

/* "NAME VERSION" on stdout; the version every binary and libhaecer share. */
void tool_print_version(void);

/* Numbers follow common/number.h's one rule (number_parse, number_parse_u32, ...). */

#endif
