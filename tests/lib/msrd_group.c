/*
 * tests/lib/msrd_group.c — one msrd around one cmocka group.
 */
#include "tests/lib/msrd_group.h"

#include <stdio.h>

int msrd_run_group(struct msrd_server *server, const char *policy, const char *const *arguments,
		   struct haecer_conn **conn, const char *group_name,
		   const struct CMUnitTest *tests, size_t count)
{
	int failures;

	if (msrd_start(server, policy, arguments) < 0)
		return 1;
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
