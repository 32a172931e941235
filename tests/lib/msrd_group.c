/*
 * tests/lib/msrd_group.c — one msrd around one cmocka group.
 */
#include "tests/lib/msrd_group.h"

#include <stdio.h>
#include <stdlib.h>

#include "haecer/perfmon.h"

/* Connect when asked, run the group, close, stop msrd: main()'s exit status. */
static int run_against_started(struct msrd_server *server, struct haecer_conn **conn,
			       const char *group_name, const struct CMUnitTest *tests,
			       size_t count)
{
	int failures;

	if (conn != NULL && haecer_connect(server->socket_path, conn) < 0) {
		fprintf(stderr, "cannot connect to msrd at %s\n", server->socket_path);
		msrd_kill(server);
		return 1;
	}
	failures = _cmocka_run_group_tests(group_name, tests, count, NULL, NULL);
	if (conn != NULL)
		haecer_close(*conn);
	if (msrd_stop(server) < 0)
		failures++;
	return failures == 0 ? 0 : 1;
}

int msrd_run_group(struct msrd_server *server, const char *policy, const char *const *arguments,
		   struct haecer_conn **conn, const char *group_name,
		   const struct CMUnitTest *tests, size_t count)
{
	if (msrd_start(server, policy, arguments) < 0)
		return 1;
	return run_against_started(server, conn, group_name, tests, count);
}

int msrd_run_group_prepared(struct msrd_server *server, const char *policy,
			    int (*prepare)(const struct msrd_server *server),
			    const char *const *arguments, struct haecer_conn **conn,
			    const char *group_name, const struct CMUnitTest *tests, size_t count)
{
	if (msrd_prepare(server, policy) < 0) {
		fprintf(stderr, "harness: cannot prepare a directory for msrd\n");
		harness_remove_tree(server->dir);
		return 1;
	}
	if (prepare(server) < 0) {
		fprintf(stderr, "cannot prepare msrd's files in %s\n", server->dir);
		msrd_kill(server);
		return 1;
	}
	if (msrd_launch(server, arguments) < 0) {
		msrd_kill(server);
		return 1;
	}
	return run_against_started(server, conn, group_name, tests, count);
}

int msrd_start_sim(struct msrd_server *server, const char *policy, const char *model,
		   const char *script, const char *const *extra)
{
	char path[PATH_MAX + 16];
	const char *arguments[16] = { "--backend", "sim", "--sim-model", model };
	size_t count = 4;

	if (msrd_prepare(server, policy) < 0)
		goto failed;
	if (script != NULL) {
		snprintf(path, sizeof(path), "%s/load.script", server->dir);
		if (harness_write_file(path, script, 0644) < 0)
			goto failed;
		arguments[count++] = "--sim-load-script";
		arguments[count++] = path;
	}
	for (size_t i = 0; extra != NULL && extra[i] != NULL && count < 15; i++)
		arguments[count++] = extra[i];
	arguments[count] = NULL;
	if (msrd_launch(server, arguments) < 0)
		goto failed;
	setenv(HAECER_SOCKET_ENV, server->socket_path, 1);
	return 0;
failed:
	harness_remove_tree(server->dir);
	return -1;
}

int msrd_run_sim_group(struct msrd_server *server, const char *policy, const char *model,
		       const char *script, const char *const *extra, struct haecer_conn **sim,
		       const char *group_name, const struct CMUnitTest *tests, size_t count)
{
	int failures;

	if (msrd_start_sim(server, policy, model, script, extra) < 0)
		return 1;
	if (sim != NULL && haecer_connect(server->socket_path, sim) < 0) {
		fprintf(stderr, "cannot connect to msrd at %s\n", server->socket_path);
		msrd_kill(server);
		return 1;
	}
	failures = _cmocka_run_group_tests(group_name, tests, count, NULL, NULL);
	if (sim != NULL) {
		haecer_close(*sim);
		*sim = NULL;
	}
	haecer_shutdown();
	if (msrd_stop(server) < 0)
		failures++;
	return failures == 0 ? 0 : 1;
}
