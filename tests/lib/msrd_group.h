/*
 * tests/lib/msrd_group.h — main() of a test that runs one cmocka group against one msrd.
 */
#ifndef HAECER_TESTS_LIB_MSRD_GROUP_H
#define HAECER_TESTS_LIB_MSRD_GROUP_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"

/* Start msrd with the policy and arguments, connect *conn to it when conn is not NULL, run the
 * group, close the connection, stop msrd. Returns main()'s exit status: 0 when every test passed
 * and msrd stopped cleanly (exit 0, no sanitizer or valgrind report), 1 otherwise. */
int msrd_run_group(struct msrd_server *server, const char *policy, const char *const *arguments,
		   struct haecer_conn **conn, const char *group_name,
		   const struct CMUnitTest *tests, size_t count);

#define MSRD_RUN_GROUP(server, policy, arguments, conn, tests)                               \
	msrd_run_group((server), (policy), (arguments), (conn), #tests, (tests),             \
		       sizeof(tests) / sizeof((tests)[0]))

/* msrd_run_group with a step between writing the policy and starting msrd: prepare(server)
 * makes what the arguments name inside server->dir (a stand-in device tree, a load script); a
 * negative return fails the test before msrd starts. */
int msrd_run_group_prepared(struct msrd_server *server, const char *policy,
			    int (*prepare)(const struct msrd_server *server),
			    const char *const *arguments, struct haecer_conn **conn,
			    const char *group_name, const struct CMUnitTest *tests, size_t count);

#define MSRD_RUN_GROUP_PREPARED(server, policy, prepare, arguments, conn, tests)             \
	msrd_run_group_prepared((server), (policy), (prepare), (arguments), (conn), #tests,  \
				(tests), sizeof(tests) / sizeof((tests)[0]))

/* msrd on the simulated `model` with the policy, a load script (backend/sim/sim_load.h format,
 * written next to the policy and passed as --sim-load-script; NULL for none) and extra arguments
 * (NULL-terminated, may be NULL, at most 10 taken), with $HAECER_SOCKET pointing at it so the
 * HAECER default context finds it. 0 or -1. */
int msrd_start_sim(struct msrd_server *server, const char *policy, const char *model,
		   const char *script, const char *const *extra);
/* A load script that keeps every simulated CPU fully busy (for an hour). */
#define FULL_LOAD_SCRIPT "# full load\n3600000 1.0\n"

/* One msrd_start_sim around one cmocka group with *sim connected to it (simulator control)
 * unless sim is NULL; after the group *sim and the HAECER default context are closed and msrd
 * must stop cleanly. main()'s exit status. */
int msrd_run_sim_group(struct msrd_server *server, const char *policy, const char *model,
		       const char *script, const char *const *extra, struct haecer_conn **sim,
		       const char *group_name, const struct CMUnitTest *tests, size_t count);

#define MSRD_RUN_SIM_GROUP(server, policy, model, script, extra, sim, tests)                 \
	msrd_run_sim_group((server), (policy), (model), (script), (extra), (sim), #tests,    \
			   (tests), sizeof(tests) / sizeof((tests)[0]))

#endif
