/*
 * `make install`'s script into a temporary DESTDIR (PREFIX /usr/local): programs, library with
 * soname symlinks, headers, haecer.pc, man pages, models, the default policy and the systemd
 * units land where they should; a tiny program built against the installed header and library
 * with pkg-config (and the staging directory as its sysroot) talks to a real msrd; installing
 * again changes nothing and keeps a locally edited policy; systemd-analyze finds nothing wrong
 * in the units (when it is there).
 */
#include "tests/mon/mon_test.h"

#include <sys/stat.h>

#include "tests/lib/install_stage.h"
#include "tests/lib/msrd_group.h"
#include "harness/text_file.h"

#define PREFIX "/usr/local"

static struct msrd_server server;
static char stage[PATH_MAX];

static const char program[] =
	"#include <errno.h>\n"
	"#include <stdio.h>\n"
	"#include <haecer/msrd.h>\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"\tstruct haecer_conn *conn = NULL;\n"
	"\tstruct haecer_ring_entry entries[4];\n"
	"\tint status = haecer_connect(argc > 1 ? argv[1] : NULL, &conn);\n"
	"\tif (status < 0)\n"
	"\t\treturn 1;\n"
	"\tprintf(\"rings %d\\n\", haecer_ring_list(conn, entries, 4));\n"
	"\tprintf(\"%s\\n\", haecer_msrd_strerror(-EPERM));\n"
	"\thaecer_close(conn);\n"
	"\treturn 0;\n"
	"}\n";

/* sh -c COMMAND with the staging directory in $STAGE; exit status, stdout in *out. */
static int shell(const char *command, char **out)
{
	return stage_shell(stage, command, out);
}

static void install_into_stage(void)
{
	assert_int_equal(stage_install(stage, PREFIX), 0);
}

/* Every installed path with its type, mode, size, link target and checksum. */
static char *snapshot(void)
{
	char *out = NULL;

	assert_int_equal(shell("cd \"$STAGE\" && find . -printf '%y %m %s %p %l\\n' | sort && "
			       "find . -type f -exec md5sum {} + | sort", &out), 0);
	return out;
}

static void expect_file(const char *path, mode_t mode)
{
	char full[PATH_MAX + 64];
	struct stat status;

	snprintf(full, sizeof(full), "%s" PREFIX "/%s", stage, path);
	if (stat(full, &status) != 0)
		fail_msg("%s was not installed", full);
	assert_true(S_ISREG(status.st_mode));
	assert_int_equal(status.st_mode & 07777, mode);
}

static bool file_contains(const char *path, const char *needle)
{
	char full[PATH_MAX + 64];
	char *text;
	bool found;

	snprintf(full, sizeof(full), "%s" PREFIX "/%s", stage, path);
	text = harness_read_text(full, 8192);
	assert_non_null(text);
	found = strstr(text, needle) != NULL;
	free(text);
	return found;
}

static void test_layout(void **state)
{
	char *out = NULL;

	(void)state;
	install_into_stage();
	expect_file("sbin/msrd", 0755);
	expect_file("bin/haecer-mon", 0755);
	expect_file("bin/haecer-msr", 0755);
	expect_file("lib/libhaecer.a", 0644);
	expect_file("lib/libhaecer.so", 0755); /* through libhaecer.so.1 */
	expect_file("include/haecer/msrd.h", 0644);
	expect_file("lib/pkgconfig/haecer.pc", 0644);
	expect_file("share/man/man1/haecer-mon.1", 0644);
	expect_file("share/man/man8/msrd.8", 0644);
	expect_file("share/haecer/models/sandybridge.yaml", 0644);
	expect_file("etc/haecer/policy.yaml", 0644);
	expect_file("lib/systemd/system/msrd.service", 0644);
	expect_file("lib/sysusers.d/haecer.conf", 0644);
	assert_int_equal(shell("cd \"$STAGE" PREFIX "/lib\" && test \"$(readlink libhaecer.so)\" = "
			       "libhaecer.so.1 && test -f \"$(readlink libhaecer.so.1)\" && "
			       "cmp -s \"$SOURCE/configs/policies/default.yaml\" "
			       "\"$STAGE" PREFIX "/etc/haecer/policy.yaml\"", &out), 0);
	free(out);
	assert_true(file_contains("lib/systemd/system/msrd.service",
				  "ExecStart=" PREFIX "/sbin/msrd --foreground --backend auto --policy " PREFIX
				  "/etc/haecer/policy.yaml --socket /run/haecer/msrd.sock"));
	assert_true(file_contains("lib/systemd/system/msrd.service", "RuntimeDirectory=haecer\n"));
	assert_true(file_contains("lib/systemd/system/msrd.service", "Group=haecer\n"));
	assert_true(file_contains("lib/systemd/system/msrd.service",
				  "CapabilityBoundingSet=CAP_SYS_RAWIO"));
	assert_true(file_contains("lib/pkgconfig/haecer.pc", "prefix=" PREFIX "\n"));
}

static void test_build_against_installed(void **state)
{
	char source_path[PATH_MAX + 32], command[3 * PATH_MAX];
	char *out = NULL;

	(void)state;
	snprintf(source_path, sizeof(source_path), "%s/prog.c", stage);
	assert_int_equal(harness_write_file(source_path, program, 0644), 0);
	/* A sanitized build installs a sanitized library: the program must be built the same. */
	snprintf(command, sizeof(command),
		 "set -e; export PKG_CONFIG_PATH=\"$STAGE" PREFIX "/lib/pkgconfig\" "
		 "PKG_CONFIG_SYSROOT_DIR=\"$STAGE\"; cc=cc; flags=; "
		 "if nm -D \"$STAGE" PREFIX "/lib/libhaecer.so\" | grep -q __asan_; then "
		 "cc=clang; flags='-fsanitize=address,undefined'; fi; "
		 "$cc -std=c11 -Wall -Wextra -Werror $flags -o \"$STAGE/prog\" \"$STAGE/prog.c\" "
		 "$(pkg-config --cflags --libs haecer); "
		 "readelf -d \"$STAGE/prog\" | grep -q 'NEEDED.*libhaecer.so.1'; "
		 "LD_LIBRARY_PATH=\"$STAGE" PREFIX "/lib\" ASAN_OPTIONS=detect_leaks=0 "
		 "\"$STAGE/prog\" '%s'", server.socket_path);
	assert_int_equal(shell(command, &out), 0);
	assert_string_equal(out, "rings 0\ndenied by policy\n");
	free(out);
}

static void test_idempotent_keeps_policy(void **state)
{
	char *before, *after, *out = NULL;

	(void)state;
	before = snapshot();
	install_into_stage();
	after = snapshot();
	assert_string_equal(before, after);
	free(before);
	free(after);
	assert_int_equal(shell("echo '# edited here' >> \"$STAGE" PREFIX "/etc/haecer/policy.yaml\"",
			       &out), 0);
	free(out);
	install_into_stage();
	assert_true(file_contains("etc/haecer/policy.yaml", "# edited here"));
}

static void test_units_verify(void **state)
{
	char *out = NULL;

	(void)state;
	if (shell("command -v systemd-analyze >/dev/null", &out) != 0) {
		free(out);
		skip();
	}
	free(out);
	/* Missing programs and man pages outside the stage are expected; a diagnostic with a
	 * file and line (unknown key, bad value) is not. */
	assert_int_equal(shell("for unit in msrd haecer-mon; do systemd-analyze verify "
			       "\"$STAGE" PREFIX "/lib/systemd/system/$unit.service\" 2>&1; done | "
			       "grep '\\.service:[0-9]' ; test $? -eq 1", &out), 0);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_build_against_installed),
		cmocka_unit_test(test_idempotent_keeps_policy),
		cmocka_unit_test(test_units_verify),
	};
	const char *arguments[] = { "--backend", "sim", NULL };
	int status;

	snprintf(stage, sizeof(stage), "%s", "/tmp/haecer-install-XXXXXX");
	if (mkdtemp(stage) == NULL)
		return 1;
	status = MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
	harness_remove_tree(stage);
	return status;
}
