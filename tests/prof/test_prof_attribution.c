/*
 * haecer-prof charges functions and threads what the simulator says they drew.
 *
 * msrd runs the simulated CPU with a constant scripted load, so the package draws a constant
 * power P whatever else the host does (other tests' load does not reach it), and P comes from
 * the simulator's ground truth (its exact energy integral over a span of its time). By the
 * method (seed 003 §4) a function or thread that used c ns of CPU time on a package of n CPUs is
 * due P × c / n; the program prints the CPU time each function and thread really used
 * (CLOCK_THREAD_CPUTIME_ID). Each one's share of the charges must be its share of the CPU time
 * within 5 %, give or take one sampling period's worth (the sampler cannot resolve less), and
 * together they must be charged what they are due within 10 %: two functions with a 3:1 busy split, two
 * threads on one package (one busy, one half busy), and a thread that mostly sleeps (it is
 * charged its CPU time, not its wall time), and a thread that runs on after the first thread
 * ended. What the program did not use is "other/idle", and
 * program + other/idle is the whole package energy the report measured.
 *
 * It runs with `--sampler perf`; test_prof_timer builds the same checks with PROF_SAMPLER
 * "timer" (the preloaded agent) and adds its own. Run as root, perf samples kernel time too; last,
 * a user for whom perf_event_paranoid (2) allows user-mode samples only gets a profile whose
 * report says that each thread's kernel time is spread over its samples.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"
#include "tests/lib/test_check.h"
#include "harness/text_file.h"
#include "harness/tool_argv.h"

#define HZ "1000"
#ifndef PROF_SAMPLER
#define PROF_SAMPLER "perf"
#define PROF_FUNCTIONS_MODE "functions"
#define PROF_SLEEPER_MODE "sleeper"
#define PROF_TICK_SAMPLER 0
#endif
#define PERIOD_NS 1000000.0

static const char policy[] =
	POLICY_HEADER
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"
	"  - {name: PP0_ENERGY, address: 0x639, read: true, set: rapl}\n"
	"  - {name: PP1_ENERGY, address: 0x641, read: true, set: rapl}\n"
	"rules:\n"
	"  - match: {uid: 0}\n"
	"    allow: [rapl]\n"
	"    create_rings: [1-99]\n"
	"    monitor_rings: [1-99]\n"
	"    capabilities: [sim_control]\n"
	"  - match: {uid: 4302}\n"
	"    allow: [rapl]\n"
	"    create_rings: [1-99]\n"
	"    monitor_rings: [1-99]\n";

#define USER_ONLY_UID 4302

static struct msrd_server server;
static struct haecer_conn *conn;
static char data_path[PATH_MAX + 32];
static char tool[PATH_MAX], helper[PATH_MAX];
static double seconds = 1.5;

/* Package watts of the simulated CPU from its ground truth, over `span_ms` of its time. */
static int truth_watts(double *watts)
{
	struct haecer_sim_truth before, after;

	if (haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &before) < 0)
		return -1;
	usleep(300000);
	if (haecer_sim_energy_truth(conn, 0, RAPL_DOMAIN_PKG, &after) < 0 ||
	    after.now_ns <= before.now_ns)
		return -1;
	*watts = (after.joules - before.joules) / ((after.now_ns - before.now_ns) / 1e9);
	return 0;
}

static int run_tool(const char *const *arguments, char **out)
{
	char *err = NULL;
	int status = harness_run_program(tool, arguments, out, &err);
	if (status != 0)
		fprintf(stderr, "%s %s exited %d:\n%s\n", tool, arguments[0], status, err ? err : "");
	free(err);
	return status;
}

/* The truth line `truth KIND NAME ... NS` for NAME: its last number. */
static double truth_ns(const char *truth, const char *kind, const char *name, int *tid)
{
	char pattern[96];
	snprintf(pattern, sizeof(pattern), "truth %s %s ", kind, name);
	const char *line = strstr(truth, pattern);
	if (!line)
		return -1;
	line += strlen(pattern);
	if (tid) {
		*tid = atoi(line);
		line = strchr(line, ' ');
		if (!line)
			return -1;
	}
	return atof(line);
}

/* Inclusive energy of `function` from folded lines: the weight of every path through it. */
static double folded_joules(const char *folded, const char *function)
{
	char frame[128];
	double total = 0;

	snprintf(frame, sizeof(frame), "%s", function);
	for (const char *line = folded; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t length = end ? (size_t)(end - line) : strlen(line);
		const char *space = memrchr(line, ' ', length);
		for (const char *at = line; space && at < space;) {
			const char *next = memchr(at, ';', (size_t)(space - at));
			size_t frame_length = (size_t)((next ? next : space) - at);
			if (frame_length == strlen(frame) && memcmp(at, frame, frame_length) == 0) {
				total += atof(space + 1) / 1e6;
				break;
			}
			at = next ? next + 1 : space;
		}
		line = end ? end + 1 : NULL;
	}
	return total;
}

/* Energy of thread `tid` from the text report's per-thread table. */
static double thread_joules(const char *text, int tid)
{
	const char *table = strstr(text, "Per thread");
	char key[32];

	if (!table)
		return -1;
	snprintf(key, sizeof(key), "\n%10d ", tid);
	const char *row = strstr(table, key);
	if (!row)
		return -1;
	char name[32];
	unsigned long long samples;
	double cpu, joules;
	if (sscanf(row, "%*d %31s %llu %lf %lf", name, &samples, &cpu, &joules) != 4)
		return -1;
	return joules;
}

/* charged[i] for work that used cpu_ns[i]: each one's share of the charges within 5 % (plus one
 * sampling period: the sampler resolves no less) of its share of the CPU time, and the sum
 * within 10 % of what the simulator's power makes due (the kernel's task clock, which the
 * samples are scaled to, runs a few per cent ahead of the threads' own CPU clocks when the host
 * is overloaded). random_samples (the timer sampler only): the samples of a tick-driven sampler,
 * which on a busy host are a random sample of the program's phases, not a systematic one; twice
 * their binomial error is allowed on top. */
static int close_to(const char *const *names, const double *charged, const double *cpu_ns,
		    size_t count, double watts, int cpus, double random_samples)
{
	double charged_sum = 0, cpu_sum = 0;

	for (size_t i = 0; i < count; i++) {
		charged_sum += charged[i];
		cpu_sum += cpu_ns[i];
	}
	for (size_t i = 0; i < count; i++)
		fprintf(stderr, "%-12s charged %.4f J (%.2f %%), CPU time %.3f s (%.2f %%)\n", names[i],
			charged[i], 100 * charged[i] / charged_sum, cpu_ns[i] / 1e9,
			100 * cpu_ns[i] / cpu_sum);
	double due = watts * cpu_sum / 1e9 / cpus;
	fprintf(stderr, "together    charged %.4f J, due %.4f J\n", charged_sum, due);
	CHECK(charged_sum > 0);
	for (size_t i = 0; i < count; i++) {
		double share = charged[i] / charged_sum, truth = cpu_ns[i] / cpu_sum;
		double random = random_samples > 0
					? 2 * sqrt(truth * (1 - truth) / random_samples)
					: 0;
		CHECK(fabs(share - truth) <= 0.05 * truth + PERIOD_NS / cpu_sum + random);
	}
	CHECK(fabs(charged_sum - due) <= 0.10 * due);
	return 0;
}

static int record(const char *mode, char **truth)
{
	char duration[32];
	snprintf(duration, sizeof(duration), "%.2f", seconds);
	const char *arguments[] = { "record", "-q", "-F", HZ, "--sampler", PROF_SAMPLER, "-o",
				    data_path, "--", helper, mode, duration, NULL };
	return run_tool(arguments, truth);
}

static int report(const char *format, char **out)
{
	const char *arguments[] = { "report", "-i", data_path, "--format", format, NULL };
	return run_tool(arguments, out);
}

static int check_functions(double watts, int cpus)
{
	char *truth = NULL, *folded = NULL, *text = NULL;
	int failed = 1;

	CHECK(record(PROF_FUNCTIONS_MODE, &truth) == 0);
	if (report("folded", &folded) != 0 || report("text", &text) != 0)
		goto out;
	double heavy = truth_ns(truth, "function", "burn_heavy", NULL);
	double light = truth_ns(truth, "function", "burn_light", NULL);
	if (heavy <= 0 || light <= 0 || !strstr(text, "SIMULATED CPU") ||
	    !strstr(text, "sampler: " PROF_SAMPLER " (")) {
		fprintf(stderr, "no truth or no simulated marker:\n%s\n%s\n", truth, text);
		goto out;
	}
	const char *names[] = { "burn_heavy", "burn_light" };
	double charged[] = { folded_joules(folded, "burn_heavy"), folded_joules(folded, "burn_light") };
	double used[] = { heavy, light };
	/* the header's "N samples at HZ Hz", the line after the sampler's */
	unsigned long long samples = 0;
	const char *sampler_line = strstr(text, "\nsampler: ");
	const char *count_line = sampler_line ? strchr(sampler_line + 1, '\n') : NULL;
	if (PROF_TICK_SAMPLER &&
	    (!count_line || sscanf(count_line + 1, "%llu samples", &samples) != 1)) {
		fprintf(stderr, "no sample count:\n%s\n", text);
		goto out;
	}
	if (close_to(names, charged, used, 2, watts, cpus, (double)samples)) {
		fprintf(stderr, "%s\n", text);
		goto out;
	}
	/* program + other/idle = everything measured */
	double program, other, total;
	const char *row = strstr(text, "  program ");
	const char *other_row = strstr(text, "  other/idle ");
	const char *total_row = strstr(text, "  total ");
	if (!row || !other_row || !total_row || sscanf(row, " program %lf", &program) != 1 ||
	    sscanf(other_row, " other/idle %lf", &other) != 1 ||
	    sscanf(total_row, " total %lf", &total) != 1 ||
	    fabs(program + other - total) > 1e-5 * total || other <= 0) {
		fprintf(stderr, "program/other/total do not add up:\n%s\n", text);
		goto out;
	}
	failed = 0;
out:
	free(truth);
	free(folded);
	free(text);
	return failed;
}

static int check_threads(const char *mode, const char *first, const char *second, double watts,
			 int cpus)
{
	char *truth = NULL, *text = NULL;
	int failed = 1, tid_first = 0, tid_second = 0;

	CHECK(record(mode, &truth) == 0);
	if (report("text", &text) != 0)
		goto out;
	double first_ns = truth_ns(truth, "thread", first, &tid_first);
	double second_ns = truth_ns(truth, "thread", second, &tid_second);
	if (first_ns <= 0 || second_ns <= 0) {
		fprintf(stderr, "no truth:\n%s\n", truth);
		goto out;
	}
	const char *names[] = { first, second };
	double charged[] = { thread_joules(text, tid_first), thread_joules(text, tid_second) };
	double used[] = { first_ns, second_ns };
	if (close_to(names, charged, used, 2, watts, cpus, 0)) {
		fprintf(stderr, "%s\n", text);
		goto out;
	}
	failed = 0;
out:
	free(truth);
	free(text);
	return failed;
}

/* A 0.3 s profile of the functions into `path` (with `--sampler sampler` unless NULL) whose text
 * report must name burn_heavy and contain `expected`; else `complaint` and the report. */
static int short_profile_says(const char *path, const char *sampler, const char *expected,
			      const char *complaint)
{
	const char *record_arguments[16] = { "record", "-q", "-F", HZ };
	const char *report_arguments[] = { "report", "-i", path, "--format", "text", NULL };
	char *out = NULL, *text = NULL;
	size_t count = 4;
	int failed = 1;

	if (sampler != NULL) {
		record_arguments[count++] = "--sampler";
		record_arguments[count++] = sampler;
	}
	record_arguments[count++] = "-o";
	record_arguments[count++] = path;
	record_arguments[count++] = "--";
	record_arguments[count++] = helper;
	record_arguments[count++] = PROF_FUNCTIONS_MODE;
	record_arguments[count++] = "0.3";
	if (run_tool(record_arguments, &out) != 0 || run_tool(report_arguments, &text) != 0)
		goto out;
	if (!strstr(text, expected) || !strstr(text, "burn_heavy")) {
		fprintf(stderr, "%s:\n%s\n", complaint, text);
		goto out;
	}
	failed = 0;
out:
	free(out);
	free(text);
	return failed;
}

/* A program whose first thread ends (pthread_exit) while thread "late" runs on: perf's events
 * hang up with the first thread, record must keep copying the rings until the program is gone.
 * Every sample of "late" is there (none lost, as many as its CPU time makes due) and it is
 * charged its energy. */
static int check_main_exits(double watts, int cpus)
{
	char *truth = NULL, *text = NULL;
	int failed = 1, tid = 0;

	CHECK(record("main-exits", &truth) == 0);
	if (report("text", &text) != 0)
		goto out;
	double late_ns = truth_ns(truth, "thread", "late", &tid);
	char key[32];
	snprintf(key, sizeof(key), "\n%10d late ", tid);
	const char *table = strstr(text, "Per thread");
	const char *row = table ? strstr(table, key) : NULL;
	unsigned long long samples = 0, lost = 1;
	const char *header = strstr(text, " samples at ");
	if (late_ns <= 0 || !row || sscanf(row, "%*d %*s %llu", &samples) != 1 || !header ||
	    sscanf(header, " samples at %*u Hz (%llu lost)", &lost) != 1) {
		fprintf(stderr, "no truth or no row for late:\n%s\n%s\n", truth, text);
		goto out;
	}
	fprintf(stderr, "main-exits: late has %llu samples for %.3f s of CPU time, %llu lost\n",
		samples, late_ns / 1e9, lost);
	const char *names[] = { "late" };
	double charged[] = { thread_joules(text, tid) }, used[] = { late_ns };
	if (lost != 0 || (double)samples < 0.95 * late_ns / PERIOD_NS - 2 ||
	    close_to(names, charged, used, 1, watts, cpus, 0)) {
		fprintf(stderr, "%s\n", text);
		goto out;
	}
	failed = 0;
out:
	free(truth);
	free(text);
	return failed;
}

/* As USER_ONLY_UID: a profile into `argument` (a directory that uid owns). */
static int record_as_user(void *argument)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/user.data", (const char *)argument);
	return short_profile_says(path, "perf", "perf sampled user mode only",
				  "a user-mode-only profile does not say so");
}

/* perf_event_paranoid 2 lets a user sample its own programs in user mode only: record falls
 * back to that, and the report says what it does with the kernel time no sample saw. As root
 * the profiles above sampled the kernel too, and say nothing of it. */
static int check_user_only(void)
{
	char dir[PATH_MAX + 32], *paranoid = NULL;
	int failed = 1;

	if (strcmp(PROF_SAMPLER, "perf") != 0)
		return 0;
	paranoid = harness_read_text("/proc/sys/kernel/perf_event_paranoid", 64);
	if (geteuid() != 0 || !paranoid || atoi(paranoid) != 2) {
		fprintf(stderr, "not root or perf_event_paranoid is not 2: user-only perf not "
				"tested\n");
		free(paranoid);
		return 0;
	}
	free(paranoid);
	snprintf(dir, sizeof(dir), "%s/user", server.dir);
	if (mkdir(dir, 0700) < 0 || chown(dir, USER_ONLY_UID, USER_ONLY_UID) < 0) {
		fprintf(stderr, "cannot make %s: %s\n", dir, strerror(errno));
		return 1;
	}
	failed = run_as(USER_ONLY_UID, USER_ONLY_UID, NULL, 0, record_as_user, dir) != 0;
	return failed;
}

int main(void)
{
	char script[PATH_MAX + 32];
	double watts;
	int failed = 1;
	int cpus = (int)sysconf(_SC_NPROCESSORS_CONF);

	if (harness_small_scale())
		seconds = 0.6;
	snprintf(tool, sizeof(tool), "%s/haecer-prof", harness_build_dir());
	snprintf(helper, sizeof(helper), "%s/tests/prof/helper_prof_work", harness_build_dir());
	if (msrd_prepare(&server, policy) < 0)
		return 1;
	snprintf(script, sizeof(script), "%s/load.txt", server.dir);
	snprintf(data_path, sizeof(data_path), "%s/prof.data", server.dir);
	/* One constant load: the simulated package's power does not follow the host's. */
	CHECK(harness_write_file(script, "1000 0.5\n", 0644) == 0);
	const char *const arguments[] = { "--backend", "sim", "--sim-model", "sandybridge",
					  "--sim-load-script", script, NULL };
	if (msrd_launch(&server, arguments) < 0)
		return 1;
	setenv(HAECER_SOCKET_ENV, server.socket_path, 1);
	if (haecer_connect(server.socket_path, &conn) < 0 || truth_watts(&watts) < 0) {
		fprintf(stderr, "no ground truth from the simulator\n");
		goto out;
	}
	fprintf(stderr, "simulated package: %.3f W; %d host CPUs\n", watts, cpus);
	if (check_functions(watts, cpus) ||
	    check_threads("threads", "heavy", "light", watts, cpus) ||
	    check_threads(PROF_SLEEPER_MODE, "busy", "sleepy", watts, cpus) || check_user_only() ||
	    (!PROF_TICK_SAMPLER && check_main_exits(watts, cpus)))
		goto out;
#ifdef PROF_EXTRA_CHECK
	if (PROF_EXTRA_CHECK())
		goto out;
#endif
	failed = 0;
out:
	haecer_close(conn);
	if (failed) {
		msrd_kill(&server);
		return 1;
	}
	return msrd_stop(&server) == 0 ? 0 : 1;
}
