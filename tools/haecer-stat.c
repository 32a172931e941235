/*
 * tools/haecer-stat.c — measure a whole command: the energy of every RAPL domain, the average
 * power, the elapsed time and (where msrd's policy allows) instructions and cycles or other
 * events, in perf stat's layout; with -r the mean, standard deviation and relative spread of
 * each over the runs (seed 000: Criterion's statistics).
 *
 *   haecer-stat [-r N] [-e EVENTS] [--json] [--cpu CPU | -a] [-o FILE] -- CMD ARGS
 *
 * Exit status: the command's (128 + signal when a signal killed it), 2 bad usage, 125 when
 * haecer-stat could not measure, 126/127 when the command cannot be run. The parts live in
 * tools/stat/.
 */
#include <errno.h>
#include <string.h>

#include "tools/stat/stat.h"

/* Run the command as often as asked; a run that fails ends the repetition (its status is the
 * one returned, as perf stat -r stops at a failing run). */
static int run_all(const struct stat_options *options, struct stat_session *session)
{
	int status = 0;

	for (unsigned run = 0; run < options->runs; run++) {
		double seconds = 0.0;
		bool counted = stat_metrics_start(session) == 0;
		int error = stat_run_command(options->command, session->scope.host_cpu, &seconds,
					     &status);
		if (error < 0)
			return -status;
		if (counted)
			stat_metrics_stop(session);
		session->elapsed[session->runs_done++] = seconds;
		session->exit_status = status;
		if (status != 0)
			break;
	}
	return status;
}

static int write_report(const struct stat_options *options, const struct stat_session *session)
{
	FILE *out = stderr;

	if (options->output != NULL) {
		out = fopen(options->output, "w");
		if (out == NULL) {
			stat_error("cannot write %s: %s", options->output, strerror(errno));
			return -errno;
		}
	}
	if (options->json)
		stat_report_json(out, options, session);
	else
		stat_report_text(out, options, session);
	if (out != stderr && fclose(out) != 0) {
		stat_error("writing %s failed", options->output);
		return -EIO;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct stat_options options;
	struct stat_session session;
	int status = stat_parse_options(argc, argv, &options);

	if (status != 0) {
		stat_options_free(&options);
		return status == 1 ? 0 : status;
	}
	if (stat_session_open(&options, &session, &status) < 0)
		goto out;
	status = run_all(&options, &session);
	if (status < 0) {
		/* The command could not be started: nothing was measured. */
		status = -status;
		goto out;
	}
	if (write_report(&options, &session) < 0 && status == 0)
		status = STAT_EXIT_FAILED;
out:
	stat_session_close(&session);
	stat_options_free(&options);
	return status;
}
