/*
 * Call chains of a program built without frame pointers (gcc; the sanitizer build keeps them
 * anyway): frame-pointer chains stop at the sampled function and the text report counts such
 * samples as truncated (saying why; printed, not asserted, as it depends on the build), while
 * `record --call-graph dwarf` copies the top of each user stack and the report unwinds it with
 * the modules' CFI: every hot path then runs from _start through main to the inlined loop, the
 * callers of both functions appear, and the report says the chains came from unwinding.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"
#include "tests/lib/test_check.h"
#include "harness/tool_argv.h"

static const char policy[] =
	POLICY_HEADER
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [rapl]\n"
	"    create_rings: [1-99]\n"
	"    monitor_rings: [1-99]\n";

static char tool[PATH_MAX], helper[PATH_MAX], data_path[PATH_MAX + 32];

static int run_tool(const char *const *arguments, char **out)
{
	char *err = NULL;
	int status = harness_run_program(tool, arguments, out, &err);
	if (status != 0)
		fprintf(stderr, "haecer-prof %s exited %d: %s\n", arguments[0], status, err);
	free(err);
	return status;
}

static int profile(const char *call_graph, char **text, char **folded)
{
	char *truth = NULL;
	const char *record[] = { "record", "-q", "--call-graph", call_graph, "-o", data_path, "--",
				 helper, "functions", "0.4", NULL };
	const char *as_text[] = { "report", "-i", data_path, NULL };
	const char *as_folded[] = { "report", "-i", data_path, "--format", "folded", NULL };
	int status = run_tool(record, &truth);

	free(truth);
	if (status != 0 || run_tool(as_text, text) != 0 || run_tool(as_folded, folded) != 0)
		return 1;
	return 0;
}

static int check(char *fp_text, char *dwarf_text, const char *dwarf_folded)
{
	unsigned long samples, truncated;
	const char *line = strstr(fp_text, " samples at ");
	while (line && line > fp_text && line[-1] != '\n')
		line--;
	CHECK(line && sscanf(line, "%lu samples", &samples) == 1);
	const char *comma = strstr(line, "frame-pointer call chains, ");
	CHECK(comma && sscanf(comma, "frame-pointer call chains, %lu truncated", &truncated) == 1);
	fprintf(stderr, "frame pointers: %lu of %lu samples truncated\n", truncated, samples);
	CHECK(truncated <= samples);
	CHECK(strstr(dwarf_text, "CFI unwinding") != NULL);

	/* The paths that reach the program's hot loop (mix) must come from _start through main:
	 * a chain the unwinder lost would start at mix or [unknown]. Other paths are not all the
	 * program's: under ASan its runtime's start-up and the leak check's own thread at exit
	 * (no _start on that thread) took up to 12 % of the samples on a busy host. */
	long long all = 0, hot = 0, hot_through_main = 0;
	for (const char *at = dwarf_folded; *at;) {
		const char *end = strchr(at, '\n');
		CHECK(end);
		const char *space = memrchr(at, ' ', (size_t)(end - at));
		CHECK(space);
		long long weight = atoll(space + 1);
		size_t length = (size_t)(space - at);
		all += weight;
		if (length >= 3 && memcmp(space - 3, "mix", 3) == 0 &&
		    (length == 3 || space[-4] == ';')) {
			hot += weight;
			if (memmem(at, length, "_start;", 7) && memmem(at, length, ";main;", 6))
				hot_through_main += weight;
		}
		at = end + 1;
	}
	fprintf(stderr, "unwound: %lld of %lld uJ in the hot loop on paths from _start through "
		"main (%lld uJ in all)\n", hot_through_main, hot, all);
	CHECK(all > 0 && hot >= all / 2 && hot_through_main >= hot * 95 / 100);
	CHECK(strstr(dwarf_folded, ";main;burn_heavy;spin;mix ") &&
	      strstr(dwarf_folded, ";main;burn_light;spin;mix "));
	return 0;
}

int main(void)
{
	struct msrd_server server;
	char *fp_text = NULL, *fp_folded = NULL, *dwarf_text = NULL, *dwarf_folded = NULL;
	int failed = 1;

#ifndef __x86_64__
	fprintf(stderr, "SKIP: --call-graph dwarf is x86-64 only\n");
	return 77;
#endif
	snprintf(tool, sizeof(tool), "%s/haecer-prof", harness_build_dir());
	snprintf(helper, sizeof(helper), "%s/tests/prof/helper_prof_nofp", harness_build_dir());
	const char *const arguments[] = { "--backend", "sim", "--sim-model", "sandybridge", NULL };
	if (msrd_start(&server, policy, arguments) < 0)
		return 1;
	snprintf(data_path, sizeof(data_path), "%s/prof.data", server.dir);
	setenv(HAECER_SOCKET_ENV, server.socket_path, 1);
	if (profile("fp", &fp_text, &fp_folded) == 0 &&
	    profile("dwarf", &dwarf_text, &dwarf_folded) == 0)
		failed = check(fp_text, dwarf_text, dwarf_folded);
	if (failed)
		fprintf(stderr, "%s\n%s\n%s\n", fp_text ? fp_text : "", dwarf_text ? dwarf_text : "",
			dwarf_folded ? dwarf_folded : "");
	free(fp_text);
	free(fp_folded);
	free(dwarf_text);
	free(dwarf_folded);
	if (failed) {
		msrd_kill(&server);
		return 1;
	}
	return msrd_stop(&server) == 0 ? 0 : 1;
}
