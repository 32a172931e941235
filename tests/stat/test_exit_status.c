/*
 * haecer-stat exits with the command's status: 0, 3, 128 + signal for a command killed by a
 * signal (as shells report it), 127 for no such command and 126 for one that cannot be
 * executed (both without a report: nothing ran). With -r, a failing run ends the repetition.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "tests/stat/stat_test.h"

static int run_shell(const char *script, char **err)
{
	const char *arguments[] = { "--", "/bin/sh", "-c", script, NULL };

	return stat_run(arguments, NULL, err);
}

static void test_success_and_exit_code(void **state)
{
	char *err = NULL;

	(void)state;
	assert_int_equal(run_shell("exit 0", &err), 0);
	assert_non_null(strstr(err, "seconds time elapsed"));
	free(err);
	assert_int_equal(run_shell("exit 3", &err), 3);
	assert_non_null(strstr(err, "seconds time elapsed"));
	free(err);
}

static void test_killed_by_signal(void **state)
{
	char *err = NULL;

	(void)state;
	assert_int_equal(run_shell("kill -TERM $$", &err), 128 + 15);
	assert_non_null(strstr(err, "energy-pkg"));
	free(err);
	assert_int_equal(run_shell("kill -KILL $$", &err), 128 + 9);
	free(err);
}

static void test_command_cannot_run(void **state)
{
	const char *missing[] = { "--", "/nonexistent/command", NULL };
	char path[PATH_MAX + 32];
	const char *not_executable[] = { "--", path, NULL };
	char *err = NULL;
	int fd;

	(void)state;
	assert_int_equal(stat_run(missing, NULL, &err), 127);
	assert_non_null(strstr(err, "cannot run '/nonexistent/command'"));
	assert_null(strstr(err, "seconds time elapsed"));
	free(err);
	snprintf(path, sizeof(path), "%s/not-executable", server.dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(stat_run(not_executable, NULL, &err), 126);
	assert_non_null(strstr(err, "cannot run"));
	free(err);
}

static void test_repeat_stops_at_failure(void **state)
{
	const char *arguments[] = { "-r", "5", "--json", "--", "/bin/sh", "-c", "exit 4", NULL };
	char *err = NULL;

	(void)state;
	assert_int_equal(stat_run(arguments, NULL, &err), 4);
	assert_non_null(strstr(err, "\"runs\": 1,"));
	assert_non_null(strstr(err, "\"exit_status\": 4,"));
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_success_and_exit_code),
		cmocka_unit_test(test_killed_by_signal),
		cmocka_unit_test(test_command_cannot_run),
		cmocka_unit_test(test_repeat_stops_at_failure),
	};

	return STAT_RUN_GROUP(tests);
}
