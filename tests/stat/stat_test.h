/*
 * tests/stat/stat_test.h — what haecer-stat's tests share: msrd on the simulated Sandy Bridge
 * with a policy that grants root everything and uid 4301 energy and time but not the PMU, and
 * running the real haecer-stat (under memcheck too in the valgrind pass) with its output
 * captured.
 */
#ifndef HAECER_TESTS_STAT_TEST_H
#define HAECER_TESTS_STAT_TEST_H

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"
#include "harness/tool_argv.h"

#define STAT_TEST_ENERGY_ONLY_UID 4301
#define STAT_TEST_MAX_ARGS 48u

static const char stat_policy[] =
	POLICY_HEADER
	POLICY_TSC_MSR
	POLICY_PMU_MSRS
	POLICY_RAPL_MSRS
	"rules:\n"
	"  - {match: {uid: 0}, allow: [all]}\n"
	"  - {match: {uid: 4301}, allow: [time, rapl]}\n";

static struct msrd_server server;

static const char *const stat_msrd_arguments[] = { "--backend", "sim", "--sim-model",
						    "sandybridge", NULL };

/* One msrd on the simulated Sandy Bridge around one cmocka group: main()'s exit status. */
#define STAT_RUN_GROUP(tests)                                                               \
	msrd_run_group(&server, stat_policy, stat_msrd_arguments, NULL, #tests, (tests),     \
		       sizeof(tests) / sizeof((tests)[0]))

/* haecer-stat --socket (msrd's) arguments...: exit status, stdout and stderr (malloc'ed, either
 * may be NULL). In the valgrind pass under memcheck, whose findings make it exit 99. */
static inline int stat_run_on(const char *socket_path, const char *const *arguments, char **out,
			      char **err)
{
	static char tool[PATH_MAX];
	const char *argv[STAT_TEST_MAX_ARGS];
	int status;

	snprintf(tool, sizeof(tool), "%s/haecer-stat", harness_build_dir());
	harness_tool_argv(argv, STAT_TEST_MAX_ARGS, tool, socket_path, arguments);
	status = harness_run(argv, out, err);
	if (err != NULL && *err != NULL)
		fprintf(stderr, "haecer-stat exit %d, stderr:\n%s", status, *err);
	return status;
}

static inline int stat_run(const char *const *arguments, char **out, char **err)
{
	return stat_run_on(server.socket_path, arguments, out, err);
}

/* The number in front of `name` on its line of the text report (perf layout: value first). */
static inline double stat_value_of(const char *report, const char *name)
{
	const char *line = report;

	while (line != NULL && *line != '\0') {
		const char *end = strchr(line, '\n');
		size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
		char copy[512], *found;
		snprintf(copy, sizeof(copy), "%.*s", (int)length, line);
		found = strstr(copy, name);
		if (found != NULL && found[strlen(name)] == ' ' && found > copy &&
		    found[-1] == ' ') {
			char digits[64];
			size_t used = 0;
			for (const char *c = copy; c < found && used + 1 < sizeof(digits); c++)
				if ((*c >= '0' && *c <= '9') || *c == '.')
					digits[used++] = *c;
				else if (*c == '+')
					break;
			digits[used] = '\0';
			return used > 0 ? strtod(digits, NULL) : -1.0;
		}
		line = end != NULL ? end + 1 : NULL;
	}
	return -1.0;
}

#endif
