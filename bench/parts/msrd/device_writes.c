/*
 * bench/parts/msrd/device_writes.c — issue 30's figure for bench/msrd: what a WRITE round trip
 * costs against a READ of the same register in the same run, on msrd's msr backend over stand-in
 * device files (regular files with the msr driver's read/write-at-offset interface). A WRITE is
 * checked against its write mask (a read of the register), remembered for the restore, and
 * written; where a privileged parent holds the only writable descriptors, it also crosses to it.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "haecer/haecer.h"
#include "haecer/msrd.h"
#include "bench/lib/bench_stats.h"
#include "harness/msrd_harness.h"
#include "bench/parts/msrd/msrd_bench.h"

#define WRITE_ROUNDS 101
#define WRITE_OPS 200     /* per round; a round's mean is one sample */
#define WRITE_ADDRESS 0x186u /* IA32_PERFEVTSEL0: inside the stand-in file, a full write mask */

static const char writes_policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: IA32_PERFEVTSEL0, address: 0x186, read: true, write_mask: 0xffffffff, "
	"set: pmu}\n"
	"rules:\n"
	"  - {match: {any: true}, allow: [pmu]}\n";

/* Median over rounds of the mean ns of one WRITE (write true) or READ of WRITE_ADDRESS. */
static uint64_t median_round_trip_ns(struct haecer_conn *conn, bool write)
{
	static uint64_t rounds[WRITE_ROUNDS];
	uint64_t value = 0;

	for (int round = 0; round < WRITE_ROUNDS; round++) {
		uint64_t start = bench_now_ns();

		for (int i = 0; i < WRITE_OPS; i++) {
			int status = write ? haecer_msr_write(conn, 0, WRITE_ADDRESS,
							      (uint64_t)(round * WRITE_OPS + i))
					   : haecer_msr_read(conn, 0, WRITE_ADDRESS, &value);
			if (status < 0)
				die(write ? "a WRITE in the device write figures failed"
					  : "a READ in the device write figures failed");
		}
		rounds[round] = (bench_now_ns() - start) / WRITE_OPS;
	}
	return bench_median_u64(rounds, WRITE_ROUNDS);
}

double device_write_ratio(uint64_t *write_ns, uint64_t *read_ns)
{
	static struct msrd_server device_server;
	static char tree[PATH_MAX + 8];
	const char *arguments[] = { "--backend", "msr", "--dev-root", tree, "--log-level", "notice",
				    NULL };
	struct haecer_conn *conn;

	if (msrd_prepare(&device_server, writes_policy) < 0)
		die("preparing the msr-backend msrd");
	snprintf(tree, sizeof(tree), "%s/root", device_server.dir);
	if (harness_standin_msr_tree(tree, 2, 1u << 16) < 0 ||
	    msrd_launch(&device_server, arguments) < 0)
		die("the msr-backend msrd did not start");
	if (haecer_connect(device_server.socket_path, &conn) < 0)
		die("connecting to the msr-backend msrd");
	/* Alternating, so load on the machine hits both alike; the best pass of each. */
	*write_ns = *read_ns = UINT64_MAX;
	for (int pass = 0; pass < 3; pass++) {
		uint64_t w = median_round_trip_ns(conn, true);
		uint64_t r = median_round_trip_ns(conn, false);

		*write_ns = w < *write_ns ? w : *write_ns;
		*read_ns = r < *read_ns ? r : *read_ns;
	}
	haecer_close(conn);
	if (msrd_stop(&device_server) < 0)
		die("the msr-backend msrd did not stop cleanly");
	return (double)*write_ns / (double)*read_ns;
}
