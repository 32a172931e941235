/*
 * msrd's perf broker behind the unchanged counter API and haecer-stat (issue 24, items 2 and 3)
 * on this machine's real kernel, msrd --backend perf: its HELLO offers the broker and no
 * counter slots, so hardware events go through the broker, CPU-wide on the counter's CPU.
 * This machine's kernel has no core PMU (a VM without a virtual PMU), so the kernel itself
 * refuses them, and msrd says why:
 *   - as root (policy: software, msr and core events, scope cpu): perf's generic cycles
 *     (haecer_counter_open_named) asks the kernel for PERF_TYPE_HARDWARE config 0, the
 *     architectural instructions (haecer_counter_open_arch, and the seed's setupArchCounter)
 *     for PERF_TYPE_RAW config 0xC0 (its encoding on Intel and AMD alike); each is -ENOENT
 *     with "the kernel has no core PMU here", and a software event on the same context counts;
 *   - haecer-stat --skip-unavailable -e context-switches,msr/tsc/,cycles: the first two counted
 *     through the broker ("# perf broker" beside each), cycles <not supported> with the
 *     kernel's reason, in the same run; as nobody (scope own) it is refused CPU-wide events
 *     with the policy's reason (exit 129);
 *   - its figures carry the kernel's run time and percentage of running time (CSV, JSON), and
 *     `haecer-stat list` lists the software and msr PMU events as counted via the broker.
 * Where the kernel has a core PMU the hardware events count instead (checked as counting
 * through the broker). The encodings against the kernel's format files:
 * libclient/test_perf_core_encoding.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/haecer.h"
#include "haecer/msrd.h"
#include "haecer/perfmon.h"
#include "harness/msrd_harness.h"
#include "harness/tool_argv.h"
#include "tests/lib/msrd_group.h"
#include "tests/lib/test_check.h"

#define NOBODY 65534

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    perf: {events: [software, msr, core], scope: cpu, max_open: 4096}\n"
	"  - match: {uid: 65534}\n"
	"    perf: {events: [software], scope: own, max_open: 6}\n";

static struct msrd_server server;
static struct haecer_conn *root_conn;
static const char *const arguments[] = { "--backend", "perf", NULL };

static struct haecer_perf_spec software(uint64_t config)
{
	return (struct haecer_perf_spec){ .type = PERF_TYPE_SOFTWARE, .config = config,
					  .cpu = -1 };
}

/* ---- hardware events: the counter API unchanged over the broker ---- */

#define NO_CORE_PMU "the kernel has no core PMU here"

/* Whether this kernel has a core PMU (this test's machine has none). */
static bool core_pmu(void)
{
	return access("/sys/bus/event_source/devices/cpu/type", F_OK) == 0 ||
	       access("/sys/bus/event_source/devices/cpu_core/type", F_OK) == 0;
}

/* An open of a hardware event: counting with a core PMU; else the kernel's ENOENT, with msrd's
 * text naming what msrd asked the kernel for and why it cannot be. */
static void check_hardware_open(int error, struct haecer_counter *counter, const char *asked)
{
	struct haecer_counter_info info;

	if (core_pmu()) {
		assert_int_equal(error, 0);
		assert_int_equal(haecer_counter_info(counter, &info), 0);
		assert_int_equal(info.kind, HAECER_COUNTER_PERF);
		haecer_counter_free(counter);
		return;
	}
	assert_int_equal(error, -ENOENT);
	assert_null(counter);
	fprintf(stderr, "refused: %s\n", haecer_error_detail());
	assert_non_null(strstr(haecer_error_detail(), asked));
	assert_non_null(strstr(haecer_error_detail(), NO_CORE_PMU));
}

/* msrd --backend perf offers its broker and no counter slots: the counter API opens hardware
 * events through the broker, CPU-wide on the counter's CPU (root's policy: core, scope cpu):
 * perf's generic cycles as PERF_TYPE_HARDWARE, the architectural instructions by its encoding
 * (0xC0 on Intel and AMD) as PERF_TYPE_RAW, and the seed's setupArchCounter the same. Here the
 * kernel refuses them; a software event on the same context counts. */
static void test_hardware_events(void **state)
{
	const struct haecer_server_info *info = haecer_server_info(root_conn);
	struct haecer_perf_spec switches = software(PERF_COUNT_SW_CONTEXT_SWITCHES);
	struct haecer_counter *counter = NULL;
	struct haecer_context *ctx;
	uint64_t value = 0;
	PerfCounter seed;
	int error;

	(void)state;
	assert_true(info->features & HAECER_FEATURE_PERF);
	assert_false(info->features & HAECER_FEATURE_SLOTS);
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	error = haecer_counter_open_named(ctx, 0, "cycles", 0, 0, &counter);
	check_hardware_open(error, counter, "perf_event_open(type 0 config 0)");
	error = haecer_counter_open_arch(ctx, 1, HAECER_ARCH_INSTRUCTIONS_RETIRED, 0, 0, &counter);
	check_hardware_open(error, counter, "perf_event_open(type 4 config 0xc0)");
	setenv(HAECER_SOCKET_ENV, server.socket_path, 1);
	seed = setupArchCounter(INSTRUCTIONS_RETIRED, 0, 0);
	check_hardware_open(seed.error, haecer_perf_counter(&seed), "config 0xc0");
	haecer_shutdown();
	switches.flags = HAECER_PERF_CPU_WIDE;
	switches.cpu = 0;
	assert_int_equal(haecer_counter_open_perf(ctx, &switches, &counter), 0);
	assert_int_equal(haecer_counter_read(counter, &value), 0);
	haecer_counter_free(counter);
	haecer_context_close(ctx);
}

/* ---- haecer-stat -e through the broker ---- */

#define STAT_ARGS 40u

/* haecer-stat --socket msrd's tool_arguments...: its exit status, *out and *err (malloc'ed;
 * out may be NULL). */
static int run_tool(const char *const *tool_arguments, char **out, char **err)
{
	static char tool[PATH_MAX];
	const char *argv[STAT_ARGS];
	char *ignored = NULL;
	int status;

	snprintf(tool, sizeof(tool), "%s/haecer-stat", harness_build_dir());
	harness_tool_argv(argv, STAT_ARGS, tool, server.socket_path, tool_arguments);
	status = harness_run(argv, out != NULL ? out : &ignored, err);
	free(ignored);
	return status;
}

/* haecer-stat --socket msrd's [--skip-unavailable] -e events -- /bin/sleep 0.02: its exit
 * status; *err its report. */
static int run_stat(const char *events, bool skip, char **err)
{
	const char *const stat_arguments[] = { "-e", events, "--", "/bin/sleep", "0.02", NULL };
	const char *const skipping[] = { "--skip-unavailable", "-e",	    events, "--",
					 "/bin/sleep",	       "0.02", NULL };

	return run_tool(skip ? skipping : stat_arguments, NULL, err);
}

/* The line of the report that names `event`, or NULL. */
static const char *report_line(const char *report, const char *event, char *line, size_t size)
{
	const char *at = strstr(report, event);
	const char *start = at, *end;

	if (at == NULL)
		return NULL;
	while (start > report && start[-1] != '\n')
		start--;
	end = strchr(at, '\n');
	snprintf(line, size, "%.*s", (int)((end != NULL ? end : at + strlen(at)) - start), start);
	return line;
}

/* The count a report line starts with, perf's thousands separators dropped. */
static unsigned long long leading_count(const char *line)
{
	unsigned long long count = 0;

	while (*line == ' ')
		line++;
	for (; (*line >= '0' && *line <= '9') || *line == ','; line++)
		if (*line != ',')
			count = count * 10 + (unsigned)(*line - '0');
	return count;
}

/* Nobody's policy grants only its own threads: haecer-stat counts CPU-wide, so it is refused
 * with the policy's reason (perf stat's exit 129), the command not run. */
static int stat_as_nobody(void *argument)
{
	char *err = NULL;
	int status = run_stat("cs", false, &err);

	(void)argument;
	CHECK_EQ(status, 129);
	CHECK(err != NULL && strstr(err, "cannot count 'cs'") != NULL);
	CHECK(strstr(err, "CPU-wide perf events not granted") != NULL);
	free(err);
	return 0;
}

/* Root's policy grants software, msr and core events CPU-wide: haecer-stat counts perf's
 * names through msrd's broker on msrd --backend perf, and says so beside each figure; in the
 * same run perf's cycles goes through the broker too, and without a core PMU is <not
 * supported> with the kernel's reason. */
static void test_stat_named_events(void **state)
{
	char *err = NULL, line[512];
	unsigned long long switches = 0, ticks = 0;

	(void)state;
	assert_int_equal(run_stat("context-switches,msr/tsc/,cycles", true, &err), 0);
	assert_non_null(err);
	assert_non_null(report_line(err, "cycles", line, sizeof(line)));
	if (!core_pmu()) {
		assert_non_null(strstr(line, "<not supported>"));
		assert_non_null(strstr(line, NO_CORE_PMU));
	} else {
		assert_non_null(strstr(line, "# perf broker"));
	}
	assert_non_null(err);
	assert_non_null(strstr(err, "msrd backend perf"));
	assert_non_null(report_line(err, "context-switches", line, sizeof(line)));
	assert_non_null(strstr(line, "# perf broker"));
	switches = leading_count(line);
	assert_true(switches >= 1); /* sleep itself switches out */
	assert_non_null(report_line(err, "msr/tsc/", line, sizeof(line)));
	assert_non_null(strstr(line, "# perf broker"));
	ticks = leading_count(line);
	assert_true(ticks >= 2000000); /* 20 ms of a TSC above 100 MHz */
	free(err);
	assert_int_equal(run_as(NOBODY, NOBODY, NULL, 0, stat_as_nobody, NULL), 0);
}

/* haecer-stat's figures of brokered events carry the kernel's times as perf stat's do: a
 * software event counts whenever enabled, so its run time is at least the command's 20 ms (on
 * every CPU of the scope, summed) and it ran 100% of it, unscaled: perf's CSV run-time and
 * percentage fields, perf -j's "event-runtime" / "pcnt-running", and no "(xx.xx%)" note in
 * the text report. (A scaled count's note: tests/stat/test_stats, as nothing multiplexes on
 * a machine without a hardware PMU.) */
static void test_stat_running_time(void **state)
{
	const char *const csv[] = { "-x", ",", "-e", "cs", "--", "/bin/sleep", "0.02", NULL };
	const char *const json[] = { "--json", "-e", "cs", "--", "/bin/sleep", "0.02", NULL };
	char *err = NULL, line[512], *runtime = NULL;
	double run_ns;

	(void)state;
	assert_int_equal(run_tool(csv, NULL, &err), 0);
	assert_non_null(report_line(err, ",cs,", line, sizeof(line)));
	fprintf(stderr, "csv: %s\n", line);
	runtime = strstr(line, ",cs,") + 4;
	run_ns = strtod(runtime, &runtime);
	assert_true(run_ns >= 20e6);
	assert_int_equal(strncmp(runtime, ",100.00,", 8), 0);
	free(err);
	err = NULL;
	assert_int_equal(run_tool(json, NULL, &err), 0);
	assert_non_null(report_line(err, "\"name\": \"cs\"", line, sizeof(line)));
	assert_non_null(strstr(line, "\"source\": \"perf broker\""));
	assert_non_null(strstr(line, "\"pcnt-running\": 100.00"));
	assert_non_null(strstr(line, "\"scaled\": false"));
	runtime = strstr(line, "\"event-runtime\": ");
	assert_non_null(runtime);
	assert_true(strtod(runtime + 17, NULL) >= 20e6);
	free(err);
	err = NULL;
	assert_int_equal(run_stat("cs", false, &err), 0);
	assert_non_null(report_line(err, " cs ", line, sizeof(line)));
	assert_null(strstr(line, "%)"));
	free(err);
}

/* haecer-stat list over msrd --backend perf: perf's software events and the msr PMU's events
 * of this kernel's sysfs, each marked as counted through msrd's perf broker (the list of
 * msrd without a broker says they are not counted: tests/stat/test_perf_formats). */
static void test_list_via_broker(void **state)
{
	const char *const list[] = { "list", NULL };
	char *out = NULL, *err = NULL, line[512];

	(void)state;
	assert_int_equal(run_tool(list, &out, &err), 0);
	assert_non_null(out);
	assert_non_null(report_line(out, "context-switches OR cs ", line, sizeof(line)));
	assert_non_null(strstr(line, "[Software event, via perf broker]"));
	assert_non_null(report_line(out, "page-faults OR faults ", line, sizeof(line)));
	assert_non_null(strstr(line, "[Software event, via perf broker]"));
	assert_non_null(report_line(out, "msr/tsc/ ", line, sizeof(line)));
	assert_non_null(strstr(line, "[Kernel PMU event, via perf broker]"));
	assert_null(strstr(out, "no perf broker"));
	/* This machine has no hardware events and no RAPL: their sections are left out whole,
	 * blank line and all, not as a second blank line. */
	assert_null(strstr(out, "\n\n\n"));
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hardware_events),
		cmocka_unit_test(test_stat_named_events),
		cmocka_unit_test(test_stat_running_time),
		cmocka_unit_test(test_list_via_broker),
	};

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 ||
	    access("/sys/bus/event_source/devices/msr/type", F_OK) != 0) {
		printf("skip: needs 2 CPUs and the kernel's msr PMU\n");
		return 77;
	}
	return MSRD_RUN_GROUP(&server, policy, arguments, &root_conn, tests);
}
