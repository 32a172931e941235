/*
 * tests/region/region_test.h — what the region-profiling tests share: msrd on the simulated
 * Sandy Bridge with the HAECER default context pointed at it (and a second connection for
 * simulator control), and a reader of the Callgrind files the reports write.
 *
 * Identities of the policy: root may do everything (sim control too); uid 4401 may read the
 * energy registers and the TSC but not use the PMU.
 */
#ifndef HAECER_TESTS_REGION_TEST_H
#define HAECER_TESTS_REGION_TEST_H

#include <errno.h>
#include <inttypes.h>
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

#include "haecer/msrd.h"
#include "haecer/perfmon.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"
#include "harness/text_file.h"

#define REGION_TEST_ENERGY_ONLY_UID 4401

static const char region_policy[] =
	POLICY_HEADER
	POLICY_TSC_MSR
	POLICY_PMU_MSRS
	POLICY_RAPL_MSRS
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [all]\n"
	"    capabilities: [sim_control]\n"
	"  - {match: {uid: 4401}, allow: [time, rapl]}\n";

static struct msrd_server server;
static __attribute__((unused)) struct haecer_conn *sim;

/* msrd on the simulated sandybridge with extra arguments (NULL-terminated, may be NULL) and
 * $HAECER_SOCKET pointing at it; one cmocka group against it with `sim` connected; afterwards
 * the default context is closed and msrd must stop cleanly. main()'s exit status. */
#define REGION_RUN_GROUP(extra, tests)                                                    \
	msrd_run_sim_group(&server, region_policy, "sandybridge", NULL, (extra), &sim, #tests, \
			   (tests), sizeof(tests) / sizeof((tests)[0]))

/* A report path in msrd's test directory (removed with it), with a suffix (".callgrind" or
 * ""). Four paths may be in use at once. */
static inline const char *region_report_path(const char *name, const char *suffix)
{
	static char paths[4][PATH_MAX + 128];
	static unsigned next;
	char *path = paths[next++ % 4];

	snprintf(path, sizeof(paths[0]), "%.*s/%.48s%.16s", PATH_MAX - 1, server.dir, name,
		 suffix);
	return path;
}

static inline void region_expect(int error, const char *what)
{
	if (error < 0)
		fprintf(stderr, "%s: %s (%s)\n", what, haecer_strerror(error), haecer_error_detail());
	assert_int_equal(error, 0);
}

/* A text file's content (malloc'ed, at most 64 KiB), NULL when it cannot be read. Usable in a
 * child process (no cmocka asserts). */
static inline char *region_read_text(const char *path)
{
	return harness_read_text(path, 65536);
}

/* ---- Callgrind files ---- */

#define CG_EVENTS 12u
#define CG_FUNCTIONS 32u
#define CG_ARCS 16u

struct cg_arc {
	size_t callee;
	uint64_t calls;
	uint64_t inclusive[CG_EVENTS];
};

struct cg_function {
	char name[HAECER_REGION_NAME_MAX + 1];
	uint64_t self[CG_EVENTS];
	struct cg_arc arcs[CG_ARCS];
	size_t arc_count;
};

struct cg_file {
	char events[CG_EVENTS][64];
	size_t event_count;
	uint64_t summary[CG_EVENTS];
	struct cg_function functions[CG_FUNCTIONS];
	size_t count;
};

/* "(id) name" or "(id)": the function of that id, named the first time. */
static inline size_t cg_function_of(struct cg_file *file, const char *text)
{
	unsigned id = 0;
	int used = 0;

	assert_int_equal(sscanf(text, "(%u)%n", &id, &used), 1);
	assert_true(id >= 1 && id <= CG_FUNCTIONS);
	if (text[used] == ' ') {
		struct cg_function *function = &file->functions[id - 1];
		snprintf(function->name, sizeof(function->name), "%s", text + used + 1);
		function->name[strcspn(function->name, "\n")] = '\0';
		if (id > file->count)
			file->count = id;
	}
	assert_true(id <= file->count);
	return id - 1;
}

static inline void cg_costs(const char *line, size_t count, uint64_t *costs)
{
	const char *at = line;
	char *end;

	strtoull(at, &end, 10); /* the position: the line of the region's begin */
	assert_true(end != at);
	for (size_t i = 0; i < count; i++) {
		at = end;
		costs[i] = strtoull(at, &end, 10);
		assert_true(end != at);
	}
	while (*end == ' ')
		end++;
	assert_true(*end == '\n' || *end == '\0');
}

static inline void cg_events(struct cg_file *file, char *list)
{
	char *save = NULL;

	for (char *name = strtok_r(list, " \n", &save); name != NULL;
	     name = strtok_r(NULL, " \n", &save)) {
		assert_true(file->event_count < CG_EVENTS);
		snprintf(file->events[file->event_count++], sizeof(file->events[0]), "%s", name);
	}
}

/* Read a Callgrind file as the reports write it (fn, cfn, calls, cost lines). */
static inline void cg_read(const char *path, struct cg_file *file)
{
	FILE *in = fopen(path, "r");
	char line[1024];
	struct cg_function *current = NULL;
	struct cg_arc *arc = NULL;

	memset(file, 0, sizeof(*file));
	assert_non_null(in);
	while (fgets(line, sizeof(line), in) != NULL) {
		if (strncmp(line, "events: ", 8) == 0) {
			cg_events(file, line + 8);
		} else if (strncmp(line, "summary: ", 9) == 0) {
			char summary[1024];
			snprintf(summary, sizeof(summary), "0 %s", line + 9);
			cg_costs(summary, file->event_count, file->summary);
		} else if (strncmp(line, "fn=", 3) == 0) {
			current = &file->functions[cg_function_of(file, line + 3)];
			arc = NULL;
		} else if (strncmp(line, "cfn=", 4) == 0) {
			assert_non_null(current);
			assert_true(current->arc_count < CG_ARCS);
			arc = &current->arcs[current->arc_count++];
			arc->callee = cg_function_of(file, line + 4);
		} else if (strncmp(line, "calls=", 6) == 0) {
			assert_non_null(arc);
			arc->calls = strtoull(line + 6, NULL, 10);
		} else if (line[0] >= '0' && line[0] <= '9' && current != NULL) {
			cg_costs(line, file->event_count, arc != NULL && arc->calls > 0
								 ? arc->inclusive
								 : current->self);
			arc = NULL;
		}
	}
	fclose(in);
}

static inline size_t cg_event(const struct cg_file *file, const char *name)
{
	for (size_t i = 0; i < file->event_count; i++)
		if (strcmp(file->events[i], name) == 0)
			return i;
	fail_msg("no event %s in the Callgrind file", name);
	return 0;
}

static inline bool cg_has_event(const struct cg_file *file, const char *name)
{
	for (size_t i = 0; i < file->event_count; i++)
		if (strcmp(file->events[i], name) == 0)
			return true;
	return false;
}

static inline const struct cg_function *cg_find(const struct cg_file *file, const char *name)
{
	for (size_t i = 0; i < file->count; i++)
		if (strcmp(file->functions[i].name, name) == 0)
			return &file->functions[i];
	fail_msg("no function %s in the Callgrind file", name);
	return NULL;
}

static inline size_t cg_index(const struct cg_file *file, const struct cg_function *function)
{
	return (size_t)(function - file->functions);
}

/* Self cost plus the inclusive cost of every call it makes. */
static inline uint64_t cg_inclusive(const struct cg_function *function, size_t event)
{
	uint64_t total = function->self[event];

	for (size_t i = 0; i < function->arc_count; i++)
		total += function->arcs[i].inclusive[event];
	return total;
}

/* The call arc caller -> callee (fails when there is none). */
static inline const struct cg_arc *cg_arc(const struct cg_file *file, const char *caller,
					  const char *callee)
{
	const struct cg_function *from = cg_find(file, caller);
	size_t to = cg_index(file, cg_find(file, callee));

	for (size_t i = 0; i < from->arc_count; i++)
		if (from->arcs[i].callee == to)
			return &from->arcs[i];
	fail_msg("no call %s -> %s", caller, callee);
	return NULL;
}

/* callgrind_annotate reads the file without a warning, and its totals are the file's. */
static inline void cg_annotate_accepts(const char *path, const char *expected_function)
{
	const char *argv[] = { "/usr/bin/callgrind_annotate", "--inclusive=yes", "--auto=no",
			       "--threshold=100", path, NULL };
	char *out = NULL, *err = NULL;
	int status;

	if (access(argv[0], X_OK) != 0) {
		fprintf(stderr, "callgrind_annotate (valgrind) is not installed\n");
		fail();
	}
	status = harness_run(argv, &out, &err);
	fprintf(stderr, "callgrind_annotate: exit %d\n%s%s", status, out, err);
	assert_int_equal(status, 0);
	assert_null(strstr(err, "WARNING"));
	assert_null(strstr(err, "malformed"));
	assert_non_null(strstr(out, "PROGRAM TOTALS"));
	assert_non_null(strstr(out, expected_function));
	free(out);
	free(err);
}

#endif
