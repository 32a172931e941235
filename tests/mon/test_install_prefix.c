/*
 * Installed into any PREFIX (issue 15), the tools run from there end to end, with nothing from
 * the source tree: scripts/install.sh BUILD $tmp (what `make install PREFIX=$tmp` runs), then
 *  - $tmp/sbin/msrd --list-sim-models finds $tmp/share/haecer/models (next to its sbin), and
 *    with --models-dir pointing nowhere says which folders it searched;
 *  - $tmp/sbin/msrd --backend sim serves $tmp/etc/haecer/policy.yaml (the shipped default);
 *  - a program built with the installed haecer.pc (PKG_CONFIG_PATH=$tmp/lib/pkgconfig) sets up
 *    a counter by perf's name, reads it, and reports the library's version;
 *  - $tmp/bin/haecer-stat -x, measures a command (CSV, the simulated marker), and
 *    $tmp/bin/haecer-mon list answers;
 *  - every installed binary and the library print one version.
 */
#include "tests/mon/mon_test.h"

#include "harness/text_file.h"

static char prefix[PATH_MAX];

static const char program[] =
	"#include <stdio.h>\n"
	"#include <haecer/perfmon.h>\n"
	"int main(void)\n"
	"{\n"
	"\tPerfCounter cycles = setupNamedCounter(\"cycles:u\", 0, 0);\n"
	"\tif (!cycles.valid) {\n"
	"\t\tfprintf(stderr, \"%s\\n\", haecer_error_detail());\n"
	"\t\treturn 1;\n"
	"\t}\n"
	"\tprintf(\"version %s read %d\\n\", haecer_version(), readCounter(&cycles) != ~0ull);\n"
	"\tfreeCounter(&cycles);\n"
	"\thaecer_shutdown();\n"
	"\treturn 0;\n"
	"}\n";

/* The whole run, as a user would type it; msrd is started and stopped by the script. */
static const char script[] =
	"set -eu\n"
	"P=$PREFIX\n"
	"\"$SOURCE/scripts/install.sh\" \"$BUILD\" \"$P\" >/dev/null\n"
	"\"$P/sbin/msrd\" --list-sim-models | grep -qx sandybridge\n"
	"if \"$P/sbin/msrd\" --models-dir \"$P/nowhere\" --list-sim-models 2>\"$P/err\"; then "
	"exit 11; fi\n"
	"grep -q \"searched $P/nowhere\" \"$P/err\"\n"
	"mkdir -p \"$P/state\"\n"
	"\"$P/sbin/msrd\" --backend sim --sim-model sandybridge --policy "
	"\"$P/etc/haecer/policy.yaml\" --socket \"$P/msrd.sock\" --state-dir \"$P/state\" "
	"--foreground --seccomp off 2>\"$P/msrd.log\" &\n"
	"msrd=$!\n"
	"trap 'kill $msrd 2>/dev/null; wait $msrd 2>/dev/null || true' EXIT\n"
	"i=0; while [ ! -S \"$P/msrd.sock\" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done\n"
	"export HAECER_SOCKET=\"$P/msrd.sock\"\n"
	"cc=cc; flags=\n"
	"if nm -D \"$P/lib/libhaecer.so\" | grep -q __asan_; then "
	"cc=clang; flags='-fsanitize=address,undefined'; fi\n"
	"PKG_CONFIG_PATH=\"$P/lib/pkgconfig\" $cc -std=c11 -Wall -Werror $flags -o \"$P/prog\" "
	"\"$P/prog.c\" $(PKG_CONFIG_PATH=\"$P/lib/pkgconfig\" pkg-config --cflags --libs haecer)\n"
	"version=$(\"$P/sbin/msrd\" --version | cut -d' ' -f2)\n"
	"LD_LIBRARY_PATH=\"$P/lib\" ASAN_OPTIONS=detect_leaks=0 \"$P/prog\" > \"$P/prog.out\"\n"
	"grep -qx \"version $version read 1\" \"$P/prog.out\"\n"
	"\"$P/bin/haecer-stat\" -x, -- true 2>\"$P/stat.csv\"\n"
	"grep -q '^# SIMULATED CPU' \"$P/stat.csv\"\n"
	"grep -q ',Joules,energy-pkg,' \"$P/stat.csv\"\n"
	"\"$P/bin/haecer-mon\" list >/dev/null\n"
	"for tool in haecer-stat haecer-mon haecer-msr; do\n"
	"\ttest \"$(\"$P/bin/$tool\" --version)\" = \"$tool $version\"\n"
	"done\n"
	"grep -q \"^Version: $version\\$\" \"$P/lib/pkgconfig/haecer.pc\"\n"
	"echo installed-prefix-ok\n";

static void test_installed_prefix(void **state)
{
	const char *argv[] = { "/bin/sh", "-c", script, NULL };
	char path[PATH_MAX + 32];
	char *out = NULL, *err = NULL;
	int status;

	(void)state;
	snprintf(path, sizeof(path), "%s/prog.c", prefix);
	assert_int_equal(harness_write_file(path, program, 0644), 0);
	setenv("PREFIX", prefix, 1);
	setenv("BUILD", harness_build_dir(), 1);
	setenv("SOURCE", harness_source_dir(), 1);
	status = harness_run(argv, &out, &err);
	if (status != 0) {
		snprintf(path, sizeof(path), "%s/msrd.log", prefix);
		char *log = harness_read_text(path, 8192);
		fprintf(stderr, "exit %d\nstdout: %s\nstderr: %s\nmsrd: %s\n", status, out, err,
			log != NULL ? log : "");
		free(log);
	}
	assert_int_equal(status, 0);
	assert_non_null(strstr(out, "installed-prefix-ok"));
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_installed_prefix),
	};
	int status;

	/* A fresh directory: nothing of the source tree is on any path the binaries search. */
	snprintf(prefix, sizeof(prefix), "%s", "/tmp/haecer-prefix-XXXXXX");
	if (mkdtemp(prefix) == NULL)
		return 1;
	status = cmocka_run_group_tests(tests, NULL, NULL);
	harness_remove_tree(prefix);
	return status;
}
