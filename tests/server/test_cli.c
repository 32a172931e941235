/*
 * msrd's command line: --check-policy (exit 0 and the effective rules for a valid file, exit 1
 * and FILE:LINE:COLUMN for an invalid or insecure one), --import-allowlist (YAML that
 * --check-policy accepts, per group with --for-group, line numbers for malformed lines),
 * --list-sim-models, --help and --version, bad options (exit 2 with a message), and refusing to
 * start on an invalid or insecure policy.
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
#include <cmocka.h>

#include "harness/msrd_harness.h"

static const char good_policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [rapl], monitor_rings: [1-9]}\n";

static const char bad_policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: maybe, set: rapl}\n";

static const char allowlist[] =
	"# a small msr-safe allowlist\n"
	"0x00000611 0x0000000000000000 # PKG_ENERGY_STATUS\n"
	"0x00000186 0x00000000FFC7FFFF\n";

static const char bad_allowlist[] =
	"0x00000611 0x0000000000000000\n"
	"\n"
	"0x0000zz86 0x00000000FFC7FFFF\n";

/* Loads, with three warnings: a register name at another's address, a PERFEVTSEL mask that
 * opens PC/INT/AnyThread, a group that does not exist. */
static const char suspicious_policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: MSR_PKG_ENERGY_STATUS, address: 0x619, read: true, set: rapl}\n"
	"  - {name: IA32_PERFEVTSEL, range: [0x186, 0x18D], read: true, write_mask: 0xffffffff, "
	"set: pmu}\n"
	"rules:\n"
	"  - {match: {group: no-such-group-h15}, allow: [rapl, pmu]}\n";

static char dir[PATH_MAX];
static char msrd_path[PATH_MAX];

static char *path_in_dir(const char *name)
{
	static char path[4][PATH_MAX + 64];
	static int next;
	char *slot = path[next++ % 4];

	snprintf(slot, sizeof(path[0]), "%s/%s", dir, name);
	return slot;
}

/* msrd with arguments; returns the exit status and the output in *out / *err. */
static int run_msrd(const char *const *arguments, char **out, char **err)
{
	const char *argv[16] = { msrd_path };
	size_t count = 1;

	for (size_t i = 0; arguments[i] != NULL && count < 15; i++)
		argv[count++] = arguments[i];
	argv[count] = NULL;
	return harness_run(argv, out, err);
}

static void expect(const char *const *arguments, int status, const char *in_out,
		   const char *in_err)
{
	char *out = NULL;
	char *err = NULL;
	int got = run_msrd(arguments, &out, &err);

	if (got != status || (in_out != NULL && strstr(out, in_out) == NULL) ||
	    (in_err != NULL && strstr(err, in_err) == NULL))
		fprintf(stderr, "msrd %s ...: exit %d\nstdout:\n%s\nstderr:\n%s\n", arguments[0], got,
			out, err);
	assert_int_equal(got, status);
	if (in_out != NULL)
		assert_non_null(strstr(out, in_out));
	if (in_err != NULL)
		assert_non_null(strstr(err, in_err));
	free(out);
	free(err);
}

static void test_check_policy(void **state)
{
	char *good = path_in_dir("good.yaml");
	char *bad = path_in_dir("bad.yaml");
	char *open_to_all = path_in_dir("open.yaml");

	(void)state;
	assert_int_equal(harness_write_file(good, good_policy, 0644), 0);
	assert_int_equal(harness_write_file(bad, bad_policy, 0644), 0);
	assert_int_equal(harness_write_file(open_to_all, good_policy, 0666), 0);
	expect((const char *[]){ "--check-policy", good, NULL }, 0, "PKG_ENERGY", NULL);
	expect((const char *[]){ "--check-policy", good, NULL }, 0, "monitor_rings: [1-9]", NULL);
	expect((const char *[]){ "--check-policy", bad, NULL }, 1, NULL, "bad.yaml:4:");
	expect((const char *[]){ "--check-policy", open_to_all, NULL }, 1, NULL,
	       "writable by others");
	expect((const char *[]){ "--check-policy", open_to_all, "--insecure-policy-permissions",
				 NULL },
	       0, "PKG_ENERGY", NULL);
	expect((const char *[]){ "--check-policy", path_in_dir("missing.yaml"), NULL }, 1, NULL,
	       "missing.yaml");
}

static void test_check_policy_strict(void **state)
{
	char *good = path_in_dir("good.yaml");
	char *suspicious = path_in_dir("suspicious.yaml");
	char shipped[PATH_MAX + 64];

	(void)state;
	snprintf(shipped, sizeof(shipped), "%s/configs/policies/default.yaml",
		 harness_source_dir());
	assert_int_equal(harness_write_file(good, good_policy, 0644), 0);
	assert_int_equal(harness_write_file(suspicious, suspicious_policy, 0644), 0);
	expect((const char *[]){ "--check-policy", good, "--strict", NULL }, 0, "PKG_ENERGY",
	       NULL);
	/* Warnings only: loads, but --strict refuses it. */
	expect((const char *[]){ "--check-policy", suspicious, NULL }, 0, NULL,
	       "'MSR_PKG_ENERGY_STATUS' starts at 0x619, but MSR_PKG_ENERGY_STATUS is 0x611");
	expect((const char *[]){ "--check-policy", suspicious, NULL }, 0, NULL,
	       "opens PERFEVTSEL bits PC INT AnyThread");
	expect((const char *[]){ "--check-policy", suspicious, "--strict", NULL }, 1, NULL,
	       "3 warnings and --strict");
	/* The shipped policy is clean by its own comments' standard (unless group haecer is
	 * missing here, which is a warning by design). */
	char *out = NULL, *err = NULL;
	int status = run_msrd((const char *[]){ "--check-policy", shipped, "--strict", NULL }, &out,
			      &err);
	if (status != 0)
		assert_non_null(strstr(err, "group 'haecer' does not exist"));
	assert_null(strstr(err, "write_mask"));
	assert_null(strstr(err, "a typo grants"));
	free(out);
	free(err);
	expect((const char *[]){ "--strict", NULL }, 2, NULL, "--strict goes with --check-policy");
}

static void test_import_allowlist(void **state)
{
	char *list = path_in_dir("allowlist");
	char *bad = path_in_dir("bad-allowlist");
	char *imported = path_in_dir("imported.yaml");
	char *out = NULL;

	(void)state;
	assert_int_equal(harness_write_file(list, allowlist, 0644), 0);
	assert_int_equal(harness_write_file(bad, bad_allowlist, 0644), 0);
	expect((const char *[]){ "--import-allowlist", list, NULL }, 0, "0x611", NULL);
	expect((const char *[]){ "--import-allowlist", list, NULL }, 0, "any: true", NULL);
	expect((const char *[]){ "--import-allowlist", list, "--for-group", "root", NULL }, 0,
	       "group: root", NULL);
	expect((const char *[]){ "--import-allowlist", bad, NULL }, 1, NULL, "bad-allowlist:3");
	/* What it prints is a policy --check-policy accepts. */
	assert_int_equal(run_msrd((const char *[]){ "--import-allowlist", list, NULL }, &out, NULL),
			 0);
	assert_int_equal(harness_write_file(imported, out, 0644), 0);
	free(out);
	expect((const char *[]){ "--check-policy", imported, NULL }, 0, "0x186", NULL);
	/* Ring majors an allowlist cannot carry, for setupFerretMonitor. */
	assert_int_equal(run_msrd((const char *[]){ "--import-allowlist", list, "--ring-majors",
						    "1-99", NULL },
				  &out, NULL),
			 0);
	assert_non_null(strstr(out, "create_rings: [1-99]"));
	assert_int_equal(harness_write_file(imported, out, 0644), 0);
	free(out);
	expect((const char *[]){ "--check-policy", imported, NULL }, 0, "monitor_rings: [1-99]",
	       NULL);
	expect((const char *[]){ "--check-policy", imported, NULL }, 0, "create_rings: [1-99]",
	       NULL);
	expect((const char *[]){ "--import-allowlist", list, "--ring-majors", "99-1", NULL }, 1,
	       NULL, "ring majors '99-1'");
	expect((const char *[]){ "--ring-majors", "1-9", NULL }, 2, NULL, "--import-allowlist");
}

static void test_informational(void **state)
{
	char models[PATH_MAX + 32];

	(void)state;
	snprintf(models, sizeof(models), "%s/configs/models", harness_source_dir());
	expect((const char *[]){ "--help", NULL }, 0, "--socket PATH", NULL);
	expect((const char *[]){ "--help", NULL }, 0, "--sim-access-step-ns N", NULL);
	expect((const char *[]){ "--version", NULL }, 0, "msrd " HAECER_VERSION " ", NULL);
	expect((const char *[]){ "--list-sim-models", "--models-dir", models, NULL }, 0,
	       "sandybridge", NULL);
	expect((const char *[]){ "--list-sim-models", "--models-dir", models, NULL }, 0,
	       "skylake-sp", NULL);
	expect((const char *[]){ "--list-sim-models", "--models-dir", models, NULL }, 0, "zen3",
	       NULL);
}

static void test_bad_options(void **state)
{
	(void)state;
	expect((const char *[]){ "--backend", "quantum", NULL }, 2, NULL, "unknown backend");
	expect((const char *[]){ "--no-such-option", NULL }, 2, NULL, "--help");
	expect((const char *[]){ "--socket-mode", "999", NULL }, 2, NULL, "--socket-mode");
	expect((const char *[]){ "--log-level", "loud", NULL }, 2, NULL, "unknown level");
	expect((const char *[]){ "--max-clients", "0", NULL }, 2, NULL, "--max-clients");
	expect((const char *[]){ "stray", NULL }, 2, NULL, "unexpected argument");
	expect((const char *[]){ "--for-group", "root", NULL }, 2, NULL, "--import-allowlist");
	expect((const char *[]){ "--socket", NULL }, 2, NULL, NULL);
	expect((const char *[]){ "--help", "--version", NULL }, 2, NULL, "only one of");
	expect((const char *[]){ "--backend", "msr", "--sim-late-energy-reads", "4", NULL }, 2, NULL,
	       "--sim-late-energy-reads needs --backend sim");
	expect((const char *[]){ "--backend", "sim", "--allow-sim-fallback", NULL }, 2, NULL,
	       "--allow-sim-fallback goes with --backend auto");
	expect((const char *[]){ "--backend", "sim", "--sim-access-step-ns", "1000", NULL }, 2,
	       NULL, "--sim-access-step-ns needs --sim-virtual-time");
	expect((const char *[]){ "--backend", "sim", "--sim-virtual-time", "--sim-access-step-ns",
				 "-5", NULL },
	       2, NULL, "--sim-access-step-ns");
}

static void test_refuses_to_start(void **state)
{
	char *bad = path_in_dir("bad.yaml");
	char *open_to_all = path_in_dir("open.yaml");
	char *socket = path_in_dir("never.sock");

	(void)state;
	expect((const char *[]){ "--foreground", "--backend", "sim", "--policy", bad, "--socket",
				 socket, NULL },
	       1, NULL, "bad.yaml:4:");
	expect((const char *[]){ "--foreground", "--backend", "sim", "--policy", open_to_all,
				 "--socket", socket, NULL },
	       1, NULL, "writable by others");
	/* The whole path that cannot be opened, not its last directory's name alone. */
	expect((const char *[]){ "--foreground", "--backend", "sim", "--policy",
				 "/nonexistent-h15/policy.yaml", "--socket", socket, NULL },
	       1, NULL, "cannot open /nonexistent-h15: No such file or directory");
	expect((const char *[]){ "--foreground", "--backend", "msr", "--dev-root",
				 path_in_dir("no-such-root"), "--policy", path_in_dir("good.yaml"),
				 "--socket", socket, NULL },
	       1, NULL, "not starting");
}

static void test_insecure_policy_allowed_explicitly(void **state)
{
	struct msrd_server server;
	const char *arguments[] = { "--backend", "sim", "--insecure-policy-permissions", NULL };

	(void)state;
	assert_int_equal(msrd_prepare(&server, good_policy), 0);
	assert_int_equal(chmod(server.policy_path, 0666), 0);
	assert_int_equal(msrd_launch(&server, arguments), 0);
	assert_int_equal(msrd_stop(&server), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check_policy),
		cmocka_unit_test(test_check_policy_strict),
		cmocka_unit_test(test_import_allowlist),
		cmocka_unit_test(test_informational),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_refuses_to_start),
		cmocka_unit_test(test_insecure_policy_allowed_explicitly),
	};
	char template[] = "/tmp/haecer-cli-XXXXXX";
	int failures;

	if (mkdtemp(template) == NULL)
		return 1;
	snprintf(dir, sizeof(dir), "%s", template);
	snprintf(msrd_path, sizeof(msrd_path), "%s/msrd", harness_build_dir());
	failures = cmocka_run_group_tests(tests, NULL, NULL);
	harness_remove_tree(dir);
	return failures == 0 ? 0 : 1;
}
