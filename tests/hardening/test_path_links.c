/*
 * Symbolic links on the paths msrd trusts (issue 14, items 9 and 10), in a sticky directory
 * (mode 01777, like /tmp) where another user (uid 65534) owns a link:
 *   - the socket's directory reached through a link is refused (msrd does not start, the log
 *     names the link), whoever owns the link: msrd checked the directory with stat(), which
 *     followed it, so the link's owner could later point clients at a directory of theirs and
 *     receive their HELLOs. The real path is accepted, and the socket gets its mode at birth;
 *   - a policy path through a link owned by another user is refused, even though the link sits
 *     in a sticky directory and points to a policy root owns (its owner may re-point it, and a
 *     SIGHUP would load whatever it then names); the same link owned by root loads.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "tests/hardening/hardening.h"
#include "harness/msrd_harness.h"

#define NOBODY 65534

struct place {
	struct msrd_server server;
	char sticky[PATH_MAX + 16];
	char link[PATH_MAX + 32];
};

static void prepare(struct place *place)
{
	assert_int_equal(msrd_prepare(&place->server, HARDENING_POLICY), 0);
	snprintf(place->sticky, sizeof(place->sticky), "%s/tmp", place->server.dir);
	assert_int_equal(mkdir(place->sticky, 0755), 0);
	assert_int_equal(chmod(place->sticky, 01777), 0);
	snprintf(place->link, sizeof(place->link), "%s/link", place->sticky);
}

static void test_socket_directory_through_link_refused(void **state)
{
	struct place place;
	char real[PATH_MAX + 16], socket_path[PATH_MAX + 48];
	const char *arguments[] = { "--backend", "sim", "--socket", socket_path, "--socket-mode",
				    "0660", NULL };
	const uid_t owners[] = { NOBODY, 0 };
	struct stat status;

	(void)state;
	prepare(&place);
	snprintf(real, sizeof(real), "%s/run", place.server.dir);
	assert_int_equal(mkdir(real, 0755), 0);
	assert_int_equal(symlink(real, place.link), 0);
	snprintf(socket_path, sizeof(socket_path), "%s/msrd.sock", place.link);
	for (size_t i = 0; i < sizeof(owners) / sizeof(owners[0]); i++) {
		assert_int_equal(lchown(place.link, owners[i], owners[i]), 0);
		assert_int_equal(msrd_launch(&place.server, arguments), -1);
		assert_true(msrd_log_contains(&place.server, "link on its path is a symbolic link"));
	}
	snprintf(socket_path, sizeof(socket_path), "%s/msrd.sock", real);
	assert_int_equal(msrd_launch(&place.server, arguments), 0);
	assert_int_equal(lstat(socket_path, &status), 0);
	assert_true(S_ISSOCK(status.st_mode));
	assert_int_equal(status.st_mode & 07777, 0660);
	memcpy(place.server.socket_path, socket_path, sizeof(place.server.socket_path) - 1);
	assert_int_equal(msrd_stop(&place.server), 0);
}

static void test_policy_link_of_another_user_refused(void **state)
{
	struct place place;
	const char *arguments[] = { "--backend", "sim", "--policy", place.link, NULL };

	(void)state;
	prepare(&place);
	assert_int_equal(symlink(place.server.policy_path, place.link), 0);
	assert_int_equal(lchown(place.link, NOBODY, NOBODY), 0);
	assert_int_equal(msrd_launch(&place.server, arguments), -1);
	assert_true(msrd_log_contains(&place.server, "/tmp/link is owned by uid 65534, not by "
						     "root"));
	assert_int_equal(lchown(place.link, 0, 0), 0);
	assert_int_equal(msrd_launch(&place.server, arguments), 0);
	assert_int_equal(msrd_stop(&place.server), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_socket_directory_through_link_refused),
		cmocka_unit_test(test_policy_link_of_another_user_refused),
	};

	if (geteuid() != 0) {
		printf("needs root: links owned by another user\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
