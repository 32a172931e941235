/*
 * libhaecer-instrument.so, preloaded into a program built with -finstrument-functions, turns
 * every function entry and exit into a measured region named from the symbol table (static
 * functions too): each function's calls are counted exactly, the exclude filter keeps functions
 * out (no row), the include filter keeps only the matching ones, the calibrated probe overhead
 * is reported as a percentage of the run, the simulated CPU is named, and the Callgrind file is
 * read by callgrind_annotate (with the functions' source files where the line table is indexed:
 * clang writes no .debug_aranges, and the runtime then names the object file). Times and energies are not
 * asserted beyond being there (tests never assert on speed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"
#include "tests/lib/test_check.h"
#include "harness/text_file.h"

static const char policy[] =
	POLICY_HEADER
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [rapl]\n";

static struct msrd_server server;

/* Run the helper with the runtime preloaded; the text report's contents. */
static char *run(const char *include, const char *exclude, const char *report)
{
	char preload[PATH_MAX], helper[PATH_MAX];
	char *out = NULL, *err = NULL;

	snprintf(preload, sizeof(preload), "%s/libhaecer-instrument.so", harness_build_dir());
	snprintf(helper, sizeof(helper), "%s/tests/prof/helper_instrumented", harness_build_dir());
	setenv("LD_PRELOAD", preload, 1);
	if (include)
		setenv("HAECER_INSTRUMENT_INCLUDE", include, 1);
	else
		unsetenv("HAECER_INSTRUMENT_INCLUDE");
	setenv("HAECER_INSTRUMENT_EXCLUDE", exclude, 1);
	setenv("HAECER_INSTRUMENT_REPORT", report, 1);
	const char *argv[] = { helper, "20", NULL };
	int status = harness_run(argv, &out, &err);
	unsetenv("LD_PRELOAD");
	if (status != 0 || !out || !strstr(out, "rounds 20")) {
		fprintf(stderr, "helper exited %d: %s %s\n", status, out ? out : "", err ? err : "");
		free(out);
		free(err);
		return NULL;
	}
	free(out);
	free(err);
	return harness_read_text(report, 1 << 20);
}

/* The call count of `function` in the text report, -1 when it has no row. */
static long calls_of(const char *text, const char *function)
{
	char needle[96];
	snprintf(needle, sizeof(needle), "  %s (", function);
	const char *at = strstr(text, needle);
	if (!at)
		return -1;
	while (at > text && at[-1] != '\n')
		at--;
	return strtol(at, NULL, 10);
}

int main(void)
{
	char report[PATH_MAX + 32], callgrind[PATH_MAX + 48];
	char *text = NULL, *annotated = NULL;
	int failed = 1;

	const char *const arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
	if (msrd_start(&server, policy, arguments) < 0)
		return 1;
	setenv(HAECER_SOCKET_ENV, server.socket_path, 1);
	snprintf(report, sizeof(report), "%s/instrument.txt", server.dir);
	snprintf(callgrind, sizeof(callgrind), "%s.callgrind", report);

	text = run(NULL, "noise,cpu_ns", report);
	if (!text)
		goto out;
	if (calls_of(text, "main") != 1 || calls_of(text, "work_twice") != 20 ||
	    calls_of(text, "work_once") != 20 || calls_of(text, "burn") != 40 ||
	    calls_of(text, "noise") != -1 || calls_of(text, "cpu_ns") != -1 ||
	    !strstr(text, "SIMULATED CPU") || !strstr(text, "% of the run") ||
	    !strstr(text, "probe overhead")) {
		fprintf(stderr, "unexpected report:\n%s\n", text);
		goto out;
	}
	if (access("/usr/bin/callgrind_annotate", X_OK) == 0) {
		const char *argv[] = { "/usr/bin/callgrind_annotate", "--threshold=100", callgrind,
				       NULL };
		if (harness_run(argv, &annotated, NULL) != 0 || !annotated ||
		    !strstr(annotated, ":work_twice")) {
			fprintf(stderr, "callgrind_annotate:\n%s\n", annotated ? annotated : "");
			goto out;
		}
	}
	free(text);
	text = run("work_*", "", report);
	if (!text || calls_of(text, "work_twice") != 20 || calls_of(text, "work_once") != 20 ||
	    calls_of(text, "burn") != -1 || calls_of(text, "main") != -1) {
		fprintf(stderr, "include filter ignored:\n%s\n", text ? text : "");
		goto out;
	}
	failed = 0;
out:
	free(text);
	free(annotated);
	if (failed) {
		msrd_kill(&server);
		return 1;
	}
	return msrd_stop(&server) == 0 ? 0 : 1;
}
