/*
 * Every haecer-prof output is read back by its real consumer: JSON by python3's strict parser
 * (and its numbers agree with the text report and the folded lines), folded lines have the
 * FlameGraph shape `frame;frame WEIGHT` (root first, integer microjoules) and add up to the
 * program's energy, with the always-inlined hot loop as a frame of its own under its caller, the Callgrind file is read by callgrind_annotate, which annotates the hot
 * source line of the sampled program with its energy, and the SVG flame graph is drawn by a
 * headless chromium into a PNG in which the flame's colours cover a real area (that part is
 * skipped, and said so, without chromium). A report of a missing or foreign file fails clearly,
 * and record refuses a command line without a command.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"
#include "tests/lib/test_check.h"
#include "harness/tool_argv.h"

static const char policy[] =
	POLICY_HEADER
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"
	"  - {name: PP0_ENERGY, address: 0x639, read: true, set: rapl}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [rapl]\n"
	"    create_rings: [1-99]\n"
	"    monitor_rings: [1-99]\n"
	"    perf: {events: [software], scope: own, sampling: true, max_open: 64}\n";

static struct msrd_server server;
static char tool[PATH_MAX], helper[PATH_MAX];
static char data_path[PATH_MAX + 32];

static int run_tool(const char *const *arguments, char **out, char **err)
{
	return harness_run_program(tool, arguments, out, err);
}

static int report(const char *format, const char *output, char **out)
{
	const char *arguments[] = { "report", "-i", data_path, "--format", format,
				    output ? "-o" : NULL, output, NULL };
	char *err = NULL;
	int status = run_tool(arguments, out, &err);
	if (status != 0)
		fprintf(stderr, "report --format %s exited %d: %s\n", format, status, err);
	free(err);
	return status;
}

static int run_python(const char *program, const char *argument, char **out)
{
	const char *argv[] = { "/usr/bin/python3", "-c", program, argument, NULL };
	char *err = NULL;
	int status = harness_run(argv, out, &err);
	if (status != 0)
		fprintf(stderr, "python3 check failed (%d): %s\n", status, err ? err : "");
	free(err);
	return status;
}

/* json: strict parse; the program, total and other/idle add up; the paths' joules add up to
 * the program's; burn_heavy is among the functions with a file and a line. Prints the
 * program's PKG microjoules for the other checks. */
static const char check_json[] =
	"import json, sys\n"
	"def no_constants(name): raise ValueError('non-standard constant ' + name)\n"
	"d = json.load(open(sys.argv[1]), parse_constant=no_constants)\n"
	"e = d['energy_joules']\n"
	"assert d['simulated'] is True and d['sim_model'] == 'sandybridge', d['sim_model']\n"
	"assert d['backend'] == 'sim', d['backend']  # the backend behind the energy\n"
	"assert d['perf_opened_by'] == 'msrd', d['perf_opened_by']  # through the broker\n"
	"assert abs(e['program']['PKG'] + e['other_idle']['PKG'] - e['total']['PKG']) < 1e-6\n"
	"paths = sum(p['joules'] for p in d['paths'])\n"
	"assert abs(paths - e['program']['PKG']) <= 1e-6 * max(1, paths), (paths, e)\n"
	"for name in ('burn_heavy', 'mix'):\n"
	"    f = [x for x in d['functions'] if x['name'] == name]\n"
	"    assert f and f[0]['file'].endswith('helper_prof_work.c') and f[0]['line'] > 0, f\n"
	"mix = [x for x in d['functions'] if x['name'] == 'mix'][0]\n"
	"assert mix['self_joules']['PKG'] > 0.5 * e['program']['PKG'], mix\n"
	"assert all(t['joules']['PKG'] >= 0 for t in d['threads'])\n"
	"print(round(e['program']['PKG'] * 1e6))\n";

/* png: the share of pixels in the flame graph's warm colours. */
static const char check_png[] =
	"import struct, sys, zlib\n"
	"b = open(sys.argv[1], 'rb').read()\n"
	"assert b[:8] == b'\\x89PNG\\r\\n\\x1a\\n'\n"
	"i, idat = 8, b''\n"
	"while i < len(b):\n"
	"    n, t = struct.unpack('>I4s', b[i:i + 8]); c = b[i + 8:i + 8 + n]; i += 12 + n\n"
	"    if t == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', c[:10])\n"
	"    if t == b'IDAT': idat += c\n"
	"assert depth == 8 and ctype in (2, 6), (depth, ctype)\n"
	"px = 4 if ctype == 6 else 3; raw = zlib.decompress(idat); stride = w * px\n"
	"rows, prev = [], bytearray(stride)\n"
	"for y in range(h):\n"
	"    f = raw[y * (stride + 1)]; line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])\n"
	"    for x in range(stride):\n"
	"        a = line[x - px] if x >= px else 0; up = prev[x]; ul = prev[x - px] if x >= px else 0\n"
	"        if f == 1: line[x] = (line[x] + a) & 255\n"
	"        elif f == 2: line[x] = (line[x] + up) & 255\n"
	"        elif f == 3: line[x] = (line[x] + (a + up) // 2) & 255\n"
	"        elif f == 4:\n"
	"            p = a + up - ul; pa, pb, pc = abs(p - a), abs(p - up), abs(p - ul)\n"
	"            line[x] = (line[x] + (a if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255\n"
	"    rows.append(line); prev = line\n"
	"warm = sum(1 for line in rows for x in range(0, stride, px)\n"
	"           if line[x] >= 200 and 70 <= line[x + 1] <= 215 and line[x + 2] <= 95)\n"
	"print('%.4f' % (warm / (w * h)))\n";

static int check_folded(const char *folded, long long program_uj)
{
	long long sum = 0, through_main = 0;
	size_t lines = 0;

	for (const char *line = folded; *line;) {
		const char *end = strchr(line, '\n');
		CHECK(end);
		const char *space = memrchr(line, ' ', (size_t)(end - line));
		CHECK(space && space > line);
		char *after;
		long long weight = strtoll(space + 1, &after, 10);
		CHECK(after == end && weight > 0);
		/* root first: paths start at the thread's entry and (but for the dynamic loader's
		 * start-up) run through main */
		if (memmem(line, (size_t)(space - line), "main;", 5) != NULL)
			through_main += weight;
		sum += weight;
		lines++;
		line = end + 1;
	}
	CHECK(lines >= 2);
	CHECK(through_main >= sum * 9 / 10);
	/* each line is rounded to a microjoule */
	CHECK(llabs(sum - program_uj) <= (long long)lines);
	/* the hot loop is inlined into spin: its own frame, called from spin */
	CHECK(strstr(folded, ";burn_heavy;spin;mix ") && strstr(folded, ";burn_light;spin;mix "));
	return 0;
}

static int check_callgrind(void)
{
	char path[PATH_MAX + 48], *out = NULL, *annotated = NULL;
	int failed = 1;

	snprintf(path, sizeof(path), "%s/profile.callgrind", server.dir);
	if (report("callgrind", path, &out) != 0)
		goto out;
	const char *argv[] = { "/usr/bin/callgrind_annotate", "--auto=yes", "--inclusive=yes", path,
			       NULL };
	char *err = NULL;
	int status = harness_run(argv, &annotated, &err);
	if (status != 0 || !annotated) {
		fprintf(stderr, "callgrind_annotate failed (%d): %s\n", status, err ? err : "");
		free(err);
		goto out;
	}
	free(err);
	/* Functions with their source files, inclusive energy of the callers, the event named,
	 * and the hot line of spin() annotated with a cost in front of its source text. */
	const char *hot = strstr(annotated, "6364136223846793005ull");
	const char *line_start = hot;
	while (line_start && line_start > annotated && line_start[-1] != '\n')
		line_start--;
	if (!strstr(annotated, "helper_prof_work.c:burn_heavy") ||
	    !strstr(annotated, "helper_prof_work.c:spin") || !strstr(annotated, "uJ") ||
	    !strstr(annotated, "Simulated CPU") || !hot || line_start[0] == ' ' ||
	    line_start[0] == '.') {
		/* an unannotated line starts with spaces and a '.' */
		fprintf(stderr, "callgrind_annotate did not show what it should:\n%s\n", annotated);
		goto out;
	}
	failed = 0;
out:
	free(out);
	free(annotated);
	return failed;
}

static int check_svg(void)
{
	char svg[PATH_MAX + 48], png[PATH_MAX + 48], shot[PATH_MAX + 64], *out = NULL;
	const char *chromium = access("/usr/bin/chromium", X_OK) == 0 ? "/usr/bin/chromium" : NULL;
	int failed = 1;

	snprintf(svg, sizeof(svg), "%s/flame.svg", server.dir);
	snprintf(png, sizeof(png), "%s/flame.png", server.dir);
	if (report("svg", svg, &out) != 0)
		goto out;
	if (!chromium) {
		fprintf(stderr, "SKIP (part): no chromium to look at the flame graph\n");
		failed = 0;
		goto out;
	}
	snprintf(shot, sizeof(shot), "--screenshot=%s", png);
	const char *argv[] = { chromium, "--headless", "--no-sandbox", "--disable-gpu",
			       "--hide-scrollbars", shot, "--window-size=1200,300", svg, NULL };
	char *err = NULL;
	int status = harness_run(argv, NULL, &err);
	free(err);
	if (status != 0) {
		fprintf(stderr, "chromium could not draw the flame graph (%d)\n", status);
		goto out;
	}
	free(out);
	out = NULL;
	if (run_python(check_png, png, &out) != 0)
		goto out;
	double warm = atof(out);
	fprintf(stderr, "flame colours cover %.1f %% of the screenshot\n", 100 * warm);
	/* four full-width frames of 18 px in 300 px: over a fifth of the picture */
	CHECK(warm > 0.10);
	failed = 0;
out:
	free(out);
	return failed;
}

static int check_refusals(void)
{
	char *out = NULL, *err = NULL;
	const char *missing[] = { "report", "-i", "/nonexistent/haecer-prof.data", NULL };
	int status = run_tool(missing, &out, &err);
	CHECK(status == 1 && strstr(err, "cannot read"));
	free(out);
	free(err);
	const char *foreign[] = { "report", "-i", "/etc/hostname", NULL };
	status = run_tool(foreign, &out, &err);
	CHECK(status == 1 && strstr(err, "not a haecer-prof data file"));
	free(out);
	free(err);
	const char *no_command[] = { "record", "-o", data_path, "--", NULL };
	status = run_tool(no_command, &out, &err);
	CHECK(status == 2 && strstr(err, "no command"));
	free(out);
	free(err);
	return 0;
}

int main(void)
{
	char *truth = NULL, *err = NULL, *json = NULL, *folded = NULL, *text = NULL;
	int failed = 1;

	if (access("/usr/bin/python3", X_OK) != 0 || access("/usr/bin/callgrind_annotate", X_OK) != 0) {
		fprintf(stderr, "SKIP: python3 and callgrind_annotate (valgrind) are needed\n");
		return 77;
	}
	snprintf(tool, sizeof(tool), "%s/haecer-prof", harness_build_dir());
	snprintf(helper, sizeof(helper), "%s/tests/prof/helper_prof_work", harness_build_dir());
	/* msrd's perf broker opens the sampling events (haecer-prof's child asks for itself) */
	const char *const arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
					  "--perf-broker", NULL };
	if (msrd_start(&server, policy, arguments) < 0)
		return 1;
	snprintf(data_path, sizeof(data_path), "%s/prof.data", server.dir);
	setenv(HAECER_SOCKET_ENV, server.socket_path, 1);
	const char *record[] = { "record", "-F", "997", "-o", data_path, "--", helper, "functions",
				 harness_small_scale() ? "0.3" : "0.6", NULL };
	int status = run_tool(record, &truth, &err);
	if (status != 0 || !strstr(err, "samples")) {
		fprintf(stderr, "record exited %d: %s\n", status, err);
		goto out;
	}
	char json_path[PATH_MAX + 48];
	snprintf(json_path, sizeof(json_path), "%s/profile.json", server.dir);
	if (report("json", json_path, &json) != 0)
		goto out;
	free(json);
	json = NULL;
	if (run_python(check_json, json_path, &json) != 0)
		goto out;
	long long program_uj = atoll(json);
	if (report("folded", NULL, &folded) != 0 || check_folded(folded, program_uj) != 0) {
		fprintf(stderr, "folded:\n%s\n", folded ? folded : "");
		goto out;
	}
	if (report("text", NULL, &text) != 0 || !strstr(text, "SIMULATED CPU") ||
	    !strstr(text, "other/idle") || !strstr(text, "Per thread") ||
	    !strstr(text, "total (program)") || !strstr(text, "burn_heavy")) {
		fprintf(stderr, "text:\n%s\n", text ? text : "");
		goto out;
	}
	if (check_callgrind() || check_svg() || check_refusals())
		goto out;
	failed = 0;
out:
	free(truth);
	free(err);
	free(json);
	free(folded);
	free(text);
	if (failed) {
		msrd_kill(&server);
		return 1;
	}
	return msrd_stop(&server) == 0 ? 0 : 1;
}
