/*
 * bench/parts/msrd/syscalls.c — system calls per read, counted with strace -c over client
 * and msrd together (bench/msrd's syscalls_per_read).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <liburing.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "haecer/haecer.h"
#include "haecer/msrd.h"
#include "proto/wire.h"
#include "shm/ring.h"
#include "bench/lib/bench_stats.h"
#include "harness/msrd_harness.h"
#include "harness/process_figures.h"
#include "harness/raw_client.h"
#include "harness/standin_tree.h"
#include "bench/parts/msrd/msrd_bench.h"

/* ---- system calls per read ---- */



/* strace's -c summary: the calls column (the fourth) of a syscall's line, or of "total". */
static long summary_calls(const char *path, const char *name)
{
	char line[256];
	long found = -1;
	FILE *file = fopen(path, "r");

	if (file == NULL)
		return -1;
	while (fgets(line, sizeof(line), file) != NULL) {
		char last[64];
		double percent, seconds;
		long usecs, calls;
		const char *word = strrchr(line, ' ');

		if (word == NULL || sscanf(word + 1, "%63s", last) != 1 || strcmp(last, name) != 0)
			continue;
		if (sscanf(line, "%lf %lf %ld %ld", &percent, &seconds, &usecs, &calls) == 4)
			found = calls;
	}
	fclose(file);
	return found;
}

static void counted_client(const struct msrd_server *target, uint32_t address, int go, int done,
			   int cpu)
{
	struct haecer_conn *conn;
	uint64_t value;
	char byte;

	bench_pin(0, cpu);
	if (haecer_connect(target->socket_path, &conn) < 0 ||
	    haecer_msr_read(conn, 0, address, &value) < 0)
		_exit(1);
	if (write(done, "r", 1) != 1 || read(go, &byte, 1) != 1)
		_exit(1);
	for (int i = 0; i < COUNTED_READS; i++)
		if (haecer_msr_read(conn, 0, address, &value) < 0)
			_exit(1);
	if (write(done, "d", 1) != 1 || read(go, &byte, 1) != 1)
		_exit(1);
	_exit(0);
}

/* Every system call of a co-located client and msrd over COUNTED_READS reads, from strace. */
struct syscall_count count_syscalls(const struct msrd_server *target, uint32_t address,
					   int cpu)
{
	struct syscall_count out = { 0 };
	char summary[PATH_MAX + 32], msrd_pid[16], client_pid[16];
	int go[2], done[2];
	pid_t client, tracer;
	char byte;
	long total, enters;

	snprintf(summary, sizeof(summary), "%s/strace-summary", target->dir);
	if (pipe(go) < 0 || pipe(done) < 0)
		die("pipe");
	client = fork();
	if (client == 0)
		counted_client(target, address, go[0], done[1], cpu);
	if (read(done[0], &byte, 1) != 1)
		die("counted client");
	bench_pin(target->pid, cpu);
	snprintf(msrd_pid, sizeof(msrd_pid), "%d", (int)target->pid);
	snprintf(client_pid, sizeof(client_pid), "%d", (int)client);
	tracer = fork();
	if (tracer == 0) {
		execlp("strace", "strace", "-c", "-f", "-qq", "-o", summary, "-p", msrd_pid, "-p",
		       client_pid, (char *)NULL);
		_exit(127);
	}
	usleep(500000); /* strace attaches */
	if (write(go[1], "g", 1) != 1 || read(done[0], &byte, 1) != 1)
		die("counted reads");
	kill(tracer, SIGINT);
	waitpid(tracer, NULL, 0);
	if (write(go[1], "e", 1) != 1)
		die("counted client exit");
	waitpid(client, NULL, 0);
	bench_pin(target->pid, -1);
	close(go[0]);
	close(go[1]);
	close(done[0]);
	close(done[1]);
	total = summary_calls(summary, "total");
	enters = summary_calls(summary, "io_uring_enter");
	if (total <= 0 || enters < 0) {
		fprintf(stderr, "bench/msrd: no strace summary (is strace installed?)\n");
		return out;
	}
	/* The client's own write and read on the pipe after the reads are in the count: two calls
	 * of the harness, not of a read. */
	out.total = (double)(total - 2) / COUNTED_READS;
	out.server = (double)enters / COUNTED_READS;
	out.counted = true;
	return out;
}

/* The same count against msrd's msr backend on a stand-in device tree (regular files with the
 * msr driver's read-at-offset interface): its reads are io_uring READs of the device. */
struct syscall_count count_syscalls_msr_backend(int cpu)
{
	static struct msrd_server device_server;
	static char tree[PATH_MAX + 8];
	const char *arguments[] = { "--backend", "msr", "--dev-root", tree, "--log-level", "notice",
				    NULL };
	struct syscall_count out = { 0 };

	if (msrd_prepare(&device_server, policy) < 0)
		return out;
	snprintf(tree, sizeof(tree), "%s/root", device_server.dir);
	if (harness_standin_msr_tree(tree, 2, 1u << 16) < 0 ||
	    msrd_launch(&device_server, arguments) < 0) {
		msrd_kill(&device_server);
		return out;
	}
	/* The TSC: a register whose READ msrd links to its reply (an energy register's reading
	 * goes through msrd's 64-bit total first). */
	out = count_syscalls(&device_server, 0x10, cpu);
	if (msrd_stop(&device_server) < 0)
		die("the msr-backend msrd did not stop cleanly");
	return out;
}
