/*
 * tools/common/toolopt.c — the tools' shared command-line helpers (toolopt.h).
 */
#include "tools/common/toolopt.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <haecer/perfmon.h>

static const char *program = "haecer";

void tool_init(const char *name)
{
	program = name;
}

const char *tool_name(void)
{
	return program;
}

void tool_vwarn(const char *format, va_list arguments)
{
	fprintf(stderr, "%s: ", program);
	vfprintf(stderr, format, arguments);
	fputc('\n', stderr);
}

void tool_warn(const char *format, ...)
{
	va_list arguments;

	va_start(arguments, format);
	tool_vwarn(format, arguments);
	va_end(arguments);
}

int tool_vusage_error(const char *format, va_list arguments)
{
	tool_vwarn(format, arguments);
	fprintf(stderr, "Try '%s --help' for more information.\n", program);
	return TOOL_EXIT_USAGE;
}

int tool_usage_error(const char *format, ...)
{
	va_list arguments;
	int status;

	va_start(arguments, format);
	status = tool_vusage_error(format, arguments);
	va_end(arguments);
	return status;
}

/* The option getopt_long just stopped at. A long one is the word it read, argv[optind - 1]
 * (without "=value"); a short one is optopt, since argv[optind - 1] may then be the program's
 * name, the previous option's value or a bundle ("-jQ"). */
static void offending(char *const *argv, char *out, size_t size)
{
	const char *word = optind > 0 ? argv[optind - 1] : "";

	if (strncmp(word, "--", 2) == 0 && word[2] != '\0') {
		size_t length = strcspn(word, "=");
		snprintf(out, size, "%.*s", (int)length, word);
		return;
	}
	snprintf(out, size, "-%c", optopt != 0 ? optopt : '?');
}

int tool_getopt_error(int option, char *const *argv, const struct option *long_options)
{
	char name[64];

	(void)long_options;
	offending(argv, name, sizeof(name));
	if (option == ':')
		return tool_usage_error("%s needs a value", name);
	return tool_usage_error("unknown option '%s'", name);
}

void tool_print_version(void)
{
	printf("%s %s\n", program, haecer_version());
}
