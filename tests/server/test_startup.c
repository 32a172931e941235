/*
 * What msrd does once started: with --backend auto --allow-sim-fallback and no MSR device it
 * picks the simulated CPU and logs why; started as root it keeps only CAP_SYS_RAWIO (permitted, effective and bounding
 * sets, from /proc/PID/status); the socket gets the configured mode; a second msrd on the same
 * socket refuses to start instead of stealing it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "tests/lib/msrd_group.h"
#include "harness/policy_text.h"

#define CAP_SYS_RAWIO_MASK (1ull << 17)

static const char policy[] = POLICY_TSC_FOR_ROOT;

static struct msrd_server server;
static char empty_root[PATH_MAX + 16];

static unsigned long long capability_set(const char *name)
{
	char path[64], line[256], key[32];
	unsigned long long value = ~0ull;
	FILE *status;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)server.pid);
	snprintf(key, sizeof(key), "%s:\t%%llx", name);
	status = fopen(path, "r");
	assert_non_null(status);
	while (fgets(line, sizeof(line), status) != NULL)
		if (sscanf(line, key, &value) == 1)
			break;
	fclose(status);
	return value;
}

static void test_auto_backend_says_why(void **state)
{
	struct haecer_conn *conn;

	(void)state;
	assert_true(msrd_log_contains(&server, "backend sim"));
	assert_true(msrd_log_contains(&server, "dev/cpu"));
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_server_info(conn)->backend, HAECER_BACKEND_SIM);
	haecer_close(conn);
}

static void test_only_rawio_is_kept(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		skip();
		return;
	}
	assert_int_equal(capability_set("CapEff"), CAP_SYS_RAWIO_MASK);
	assert_int_equal(capability_set("CapPrm"), CAP_SYS_RAWIO_MASK);
	assert_int_equal(capability_set("CapBnd"), CAP_SYS_RAWIO_MASK);
	assert_int_equal(capability_set("CapInh"), 0);
	assert_int_equal(capability_set("CapAmb"), 0);
}

static void test_socket_mode(void **state)
{
	struct stat status;

	(void)state;
	assert_int_equal(stat(server.socket_path, &status), 0);
	assert_true(S_ISSOCK(status.st_mode));
	assert_int_equal(status.st_mode & 07777, 0660);
}

static void test_second_server_refused(void **state)
{
	char models[PATH_MAX + 32];
	const char *argv[] = { "", "--foreground", "--backend", "sim", "--models-dir", models,
			       "--policy", server.policy_path, "--socket", server.socket_path,
			       NULL };
	char path[PATH_MAX + 16];
	char *err = NULL;
	struct haecer_conn *conn;

	(void)state;
	snprintf(models, sizeof(models), "%s/configs/models", harness_source_dir());
	snprintf(path, sizeof(path), "%s/msrd", harness_build_dir());
	argv[0] = path;
	assert_int_equal(harness_run(argv, NULL, &err), 1);
	assert_non_null(strstr(err, "another msrd is listening"));
	free(err);
	/* The first one still owns its socket. */
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	haecer_close(conn);
}

/* A device root with no devices at all: the auto backend must say why it falls back. */
static int make_empty_root(const struct msrd_server *msrd)
{
	snprintf(empty_root, sizeof(empty_root), "%s/empty", msrd->dir);
	return mkdir(empty_root, 0755);
}

int main(void)
{
	const char *arguments[] = { "--backend", "auto", "--allow-sim-fallback", "--dev-root",
				    empty_root, "--socket-mode", "0660", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_auto_backend_says_why),
		cmocka_unit_test(test_only_rawio_is_kept),
		cmocka_unit_test(test_socket_mode),
		cmocka_unit_test(test_second_server_refused),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, make_empty_root, arguments, NULL, tests);
}
