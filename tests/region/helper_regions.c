/*
 * helper_regions — a small instrumented program for the report-at-exit tests: nested regions,
 * a forked child that marks a region of its own and exits (it must not write the report), and
 * a region left open at exit. It writes nothing itself: the report comes from libhaecer's
 * atexit handler, wherever $HAECER_REGION_REPORT says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <haecer/perfmon.h>

static void pause_ms(long ms)
{
	struct timespec pause = { .tv_sec = 0, .tv_nsec = ms * 1000000L };

	nanosleep(&pause, NULL);
}

static int child_region(void)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		haecer_region_begin("child-only");
		haecer_region_end("child-only");
		exit(0);
	}
	return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0
		       ? 0
		       : -1;
}

int main(void)
{
	if (haecer_region_begin("outer") < 0) {
		fprintf(stderr, "begin: %s\n", haecer_error_detail());
		return 1;
	}
	for (int i = 0; i < 3; i++) {
		haecer_region_begin("inner");
		pause_ms(2);
		haecer_region_end("inner");
	}
	if (child_region() < 0)
		return 1;
	if (haecer_region_end("outer") < 0) {
		fprintf(stderr, "end: %s\n", haecer_error_detail());
		return 1;
	}
	haecer_region_begin("left-open");
	return 0;
}
