/*
 * bench/parts/attribution/node_cost.c — msrd's and serve's CPU and memory with N processes on
 * the node: a real msrd on the simulated CPU, a real `haecer-mon serve` (per-process series on,
 * one attribution interval a second), N real sleeping children of this benchmark; after a
 * warm-up, both daemons' CPU time over WINDOW_S and their resident memory (/proc). The baseline
 * is the same measurement with no added process.
 */
#include "bench/parts/attribution/node_cost.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/msrd_harness.h"
#include "harness/policy_text.h"
#include "harness/process_figures.h"

#define WARM_UP_S 3
#define WINDOW_S 5

static const char policy[] = POLICY_RAPL_PKG_FOR_ROOT;

/* count children that sleep until killed (or until this benchmark dies). */
static pid_t *start_sleepers(unsigned count)
{
	pid_t *pids = calloc(count ? count : 1, sizeof(*pids));

	for (unsigned i = 0; pids != NULL && i < count; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (;;)
				pause();
		}
		if (pids[i] < 0) {
			for (unsigned j = 0; j < i; j++)
				kill(pids[j], SIGKILL);
			free(pids);
			return NULL;
		}
	}
	return pids;
}

static void stop_sleepers(pid_t *pids, unsigned count)
{
	for (unsigned i = 0; i < count; i++)
		kill(pids[i], SIGKILL);
	for (unsigned i = 0; i < count; i++)
		waitpid(pids[i], NULL, 0);
	free(pids);
}

static pid_t start_serve(const char *socket_path)
{
	char path[4096];
	pid_t pid;

	snprintf(path, sizeof(path), "%s/haecer-mon", harness_build_dir());
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		execl(path, path, "--socket", socket_path, "serve", "--listen", "127.0.0.1:0",
		      "--interval", "1000", "--top", "20", (char *)NULL);
		_exit(127);
	}
	return pid;
}

int node_cost_measure(struct node_cost *cost)
{
	const char *arguments[] = { "--backend", "sim", NULL };
	struct msrd_server server;
	long ticks = sysconf(_SC_CLK_TCK);
	long long msrd_before, serve_before;
	pid_t *sleepers, serve;
	int status = 0;

	if (msrd_start(&server, policy, arguments) != 0)
		return -EIO;
	sleepers = start_sleepers(cost->processes);
	serve = sleepers != NULL ? start_serve(server.socket_path) : -1;
	if (serve < 0) {
		status = sleepers == NULL ? -EAGAIN : -errno;
		goto out;
	}
	sleep(WARM_UP_S);
	msrd_before = harness_process_cpu_ticks(server.pid);
	serve_before = harness_process_cpu_ticks(serve);
	sleep(WINDOW_S);
	cost->msrd_cpu_pct = 100.0 * (harness_process_cpu_ticks(server.pid) - msrd_before) /
			     ticks / WINDOW_S;
	cost->serve_cpu_pct = 100.0 * (harness_process_cpu_ticks(serve) - serve_before) / ticks /
			      WINDOW_S;
	cost->msrd_rss_kib = harness_process_status_kib(server.pid, "VmRSS:");
	cost->serve_rss_kib = harness_process_status_kib(serve, "VmRSS:");
	kill(serve, SIGTERM);
	waitpid(serve, NULL, 0);
out:
	if (sleepers != NULL)
		stop_sleepers(sleepers, cost->processes);
	msrd_kill(&server);
	return status;
}
