/*
 * bench/parts/msrd/backends.c — issue 24's figures for bench/msrd: the perf broker and the
 * powercap backend, each against its floor in the same run.
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

/* ---- issue 24: the perf broker and the powercap backend, each against its floor ---- */

#define BACKEND_ROUNDS 201
#define BACKEND_READS 200  /* per round; a round's mean is one sample */
#define NOBODY 65534

static const char backends_policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"
	"rules:\n"
	"  - {match: {any: true}, allow: [rapl], perf: {events: [software]}}\n";

/* Median over rounds of the mean ns of one call of read_once(fd) within a round. */
static uint64_t median_read_ns(int (*read_once)(void *), void *argument)
{
	static uint64_t rounds[BACKEND_ROUNDS];

	for (int round = 0; round < BACKEND_ROUNDS; round++) {
		uint64_t start = bench_now_ns();

		for (int i = 0; i < BACKEND_READS; i++)
			if (read_once(argument) < 0)
				die("a read in the backend figures failed");
		rounds[round] = (bench_now_ns() - start) / BACKEND_READS;
	}
	return bench_median_u64(rounds, BACKEND_ROUNDS);
}

static int read_perf_fd(void *argument)
{
	struct haecer_perf_value value;

	return haecer_perf_read(*(int *)argument, &value);
}

/* A software event read() through the descriptor msrd's broker handed over, against the same
 * event the process opened itself (root here: the kernel lets it). Returns broker / own. */
double broker_read_ratio(uint64_t *broker_ns, uint64_t *own_ns)
{
	const char *arguments[] = { "--backend", "perf", "--log-level", "notice", NULL };
	struct haecer_perf_spec spec = { .type = PERF_TYPE_SOFTWARE,
					 .config = PERF_COUNT_SW_CONTEXT_SWITCHES, .cpu = -1 };
	struct perf_event_attr attr = {
		.size = sizeof(attr), .type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CONTEXT_SWITCHES,
		.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
	};
	struct msrd_server broker;
	struct haecer_conn *conn;
	int brokered = -1, own;

	if (msrd_start(&broker, backends_policy, arguments) < 0)
		die("msrd --backend perf did not start");
	if (haecer_connect(broker.socket_path, &conn) < 0 ||
	    haecer_perf_open(conn, &spec, &brokered, NULL) < 0)
		die("no event from msrd's perf broker");
	own = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (own < 0)
		die("perf_event_open of the floor's own event");
	/* Alternating, so load on the machine hits both alike. */
	*broker_ns = *own_ns = UINT64_MAX;
	for (int pass = 0; pass < 3; pass++) {
		uint64_t b = median_read_ns(read_perf_fd, &brokered);
		uint64_t o = median_read_ns(read_perf_fd, &own);

		*broker_ns = b < *broker_ns ? b : *broker_ns;
		*own_ns = o < *own_ns ? o : *own_ns;
	}
	close(own);
	close(brokered);
	haecer_close(conn);
	if (msrd_stop(&broker) < 0)
		die("msrd --backend perf did not stop cleanly");
	return (double)*broker_ns / (double)*own_ns;
}

struct energy_file {
	int fd;
	uint64_t sum;
};

static int pread_energy_uj(void *argument)
{
	struct energy_file *file = argument;
	char text[32];
	ssize_t got = pread(file->fd, text, sizeof(text) - 1, 0);

	if (got <= 0)
		return -1;
	text[got] = '\0';
	file->sum += strtoull(text, NULL, 10);
	return 0;
}

static int read_energy_counter(void *argument)
{
	uint64_t value;

	return haecer_counter_read(argument, &value);
}

/* As nobody: readCounter of energy-pkg, served from msrd's energy page; into *page_ns (shared
 * memory: the figure crosses the fork). */
static int unprivileged_page_reads(void *argument)
{
	uint64_t *page_ns = argument;
	struct haecer_context *ctx;
	struct haecer_counter *counter;

	if (haecer_context_open(getenv("HAECER_SOCKET"), &ctx) < 0 ||
	    haecer_counter_open_energy(ctx, 0, HAECER_ENERGY_PKG, &counter) < 0)
		return 1;
	*page_ns = median_read_ns(read_energy_counter, counter);
	haecer_counter_free(counter);
	haecer_context_close(ctx);
	return 0;
}

/* A stand-in powercap tree (an Intel CPU by stand-in CPUID, one package-0 zone) under dir. */
static void powercap_tree(const char *root)
{
	tree_put_cpuid(root, 0, 0, 0xD, 0x756E6547u, 0x6C65746Eu, 0x49656E69u);
	tree_put_cpuid(root, 0, 1, 0x806C1u, 0, 0, 0);
	tree_write_text(root, "sys/devices/system/cpu/cpu0/topology/physical_package_id", "0\n");
	tree_write_text(root, "sys/class/powercap/intel-rapl:0/name", "package-0\n");
	tree_write_text(root, "sys/class/powercap/intel-rapl:0/max_energy_range_uj",
			"262143328850\n");
	tree_write_text(root, "sys/class/powercap/intel-rapl:0/energy_uj", "123456789\n");
}

/* An unprivileged readCounter of a powercap domain through msrd's energy page, against root's
 * pread of the stand-in energy_uj it comes from. Returns page / pread. */
double powercap_read_ratio(uint64_t *page_ns, uint64_t *pread_ns)
{
	char root[PATH_MAX + 16], path[PATH_MAX + 96];
	const char *arguments[] = { "--backend", "powercap", "--sysfs-root", root, "--log-level",
				    "notice", NULL };
	uint64_t *shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct energy_file file = { .fd = -1 };
	struct msrd_server powercap;

	if (shared == MAP_FAILED || msrd_prepare(&powercap, backends_policy) < 0)
		die("preparing msrd --backend powercap");
	snprintf(root, sizeof(root), "%s/root", powercap.dir);
	tree_mkdir(powercap.dir, "root");
	powercap_tree(root);
	if (msrd_launch(&powercap, arguments) < 0)
		die("msrd --backend powercap did not start");
	setenv("HAECER_SOCKET", powercap.socket_path, 1);
	if (run_as(NOBODY, NOBODY, NULL, 0, unprivileged_page_reads, shared) != 0)
		die("nobody's readCounter of energy-pkg through msrd");
	*page_ns = *shared;
	snprintf(path, sizeof(path), "%s/sys/class/powercap/intel-rapl:0/energy_uj", root);
	file.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (file.fd < 0)
		die("the stand-in energy_uj");
	*pread_ns = median_read_ns(pread_energy_uj, &file);
	close(file.fd);
	munmap(shared, sizeof(*shared));
	if (msrd_stop(&powercap) < 0)
		die("msrd --backend powercap did not stop cleanly");
	return (double)*page_ns / (double)*pread_ns;
}
