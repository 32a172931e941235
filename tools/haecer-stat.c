/*
 * tools/haecer-stat.c — measure a whole command: the energy of every RAPL domain, the average
 * power, the elapsed time and (where msrd's policy allows) instructions and cycles or other
 * events, in perf stat's layout; with -r the mean, standard deviation and relative spread of
 * each over the runs (seed 000: Criterion's statistics).
 *
 *   haecer-stat [-r N] [-e EVENTS] [--json | -x SEP] [-I MS] [--cpu CPU | -a] [--per-socket |
 *               --per-core] [-o FILE] -- CMD ARGS
 *   haecer-stat list
 *
 * Exit status: the command's (128 + signal when a signal killed it), 2 bad usage, 125 when
 * haecer-stat could not measure, 129 an -e event cannot be counted (the command did not run), 126/127 when the command cannot be run. The parts live in
 * tools/stat/.
 */
#include <errno.h>
#include <string.h>

#include "tools/common/toolopt.h"
#include "tools/stat/stat.h"

struct interval_state {
	const struct stat_options *options;
	struct stat_session *session;
	FILE *out;
	double last;                      /* seconds since start at the last print */
};

/* perf stat -I: read every counter and print the slice since the last one. */
static void print_interval(void *arg, double seconds)
{
	struct interval_state *state = arg;

	if (stat_metrics_interval(state->session) < 0)
		return;
	stat_report_interval(state->out, state->options, state->session, seconds,
			     seconds - state->last);
	fflush(state->out);
	state->last = seconds;
}

/* Run the command as often as asked; a run that fails ends the repetition (its status is the
 * one returned, as perf stat -r stops at a failing run). */
static int run_all(const struct stat_options *options, struct stat_session *session, FILE *out)
{
	struct interval_state interval = { options, session, out, 0.0 };
	struct stat_run_request request = {
		.command = options->command,
		.host_cpu = session->scope.host_cpu,
		.interval_ms = options->interval_ms,
		.tick = print_interval,
		.tick_arg = &interval,
	};
	int status = 0;

	for (unsigned run = 0; run < options->runs; run++) {
		struct stat_times times = { 0 };
		bool counted = stat_metrics_start(session) == 0;
		int error = stat_run_command(&request, &times, &status);
		if (error < 0)
			return -status;
		if (counted)
			stat_metrics_stop(session);
		session->user[session->runs_done] = times.user;
		session->sys[session->runs_done] = times.sys;
		session->elapsed[session->runs_done++] = times.elapsed;
		session->exit_status = status;
		if (status != 0)
			break;
	}
	return status;
}

/* -o is opened before the command runs: a path that cannot be written fails at once rather than
 * losing the measurement afterwards. */
static FILE *open_output(const struct stat_options *options)
{
	FILE *out;

	if (options->output == NULL)
		return stderr;
	/* "e": close-on-exec, so the measured command does not inherit the report's file. */
	out = fopen(options->output, "we");
	if (out == NULL)
		stat_error("cannot write %s: %s", options->output, strerror(errno));
	return out;
}

static int write_report(FILE *out, const struct stat_options *options,
			const struct stat_session *session)
{
	if (options->json)
		stat_report_json(out, options, session);
	else if (options->separator != NULL)
		stat_report_csv(out, options, session);
	else
		stat_report_text(out, options, session);
	if (fflush(out) != 0 || ferror(out)) {
		stat_error("writing %s failed", options->output != NULL ? options->output
									 : "the report");
		return -EIO;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct stat_options options;
	struct stat_session session;
	FILE *out = NULL;
	int status;

	tool_init("haecer-stat");
	status = stat_parse_options(argc, argv, &options);
	if (status != 0) {
		stat_options_free(&options);
		return status == 1 ? 0 : status;
	}
	if (options.list) {
		status = stat_list(&options);
		stat_options_free(&options);
		return status;
	}
	memset(&session, 0, sizeof(session));
	out = open_output(&options);
	if (out == NULL) {
		status = STAT_EXIT_FAILED;
		goto out;
	}
	if (stat_session_open(&options, &session, &status) < 0)
		goto out;
	status = run_all(&options, &session, out);
	if (status < 0) {
		/* The command could not be started: nothing was measured. */
		status = -status;
		goto out;
	}
	if (write_report(out, &options, &session) < 0 && status == 0)
		status = STAT_EXIT_FAILED;
out:
	if (out != NULL && out != stderr && fclose(out) != 0 && status == 0) {
		stat_error("writing %s failed", options.output);
		status = STAT_EXIT_FAILED;
	}
	stat_session_close(&session);
	stat_options_free(&options);
	return status;
}
