/*
 * bench/energy_read — haecer_counter_read of an energy counter, as an application calls it: from
 * msrd's energy page, no round trip. The C figure the Python package's read is compared with
 * (bench/python_read.py runs this against its own msrd, $HAECER_SOCKET); alone, it starts msrd
 * on the simulated CPU with the shipped policy. Not a test: it prints figures.
 *
 * Last line: c_read_ns=… (median over batches of READS_PER_BATCH reads)
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/lib/bench_stats.h"
#include "haecer/haecer.h"
#include "harness/msrd_harness.h"

#define BATCHES 41
#define READS_PER_BATCH 20000

int main(void)
{
	const char *arguments[] = {"--backend", "sim", "--sim-model", "sandybridge", "--log-level",
				   "notice", NULL};
	uint64_t batch_ns[BATCHES], value, sink = 0;
	struct msrd_server server = { 0 };
	struct haecer_context *ctx;
	struct haecer_counter *energy;
	bool own_server = getenv("HAECER_SOCKET") == NULL;
	int status = 1;

	if (own_server && bench_start_msrd(&server, arguments) < 0) {
		fprintf(stderr, "bench/energy_read: cannot start msrd\n");
		return 1;
	}
	if (haecer_default_context(&ctx) < 0 ||
	    haecer_counter_open_energy(ctx, 0, HAECER_ENERGY_PKG, &energy) < 0) {
		fprintf(stderr, "bench/energy_read: %s\n", haecer_error_detail());
		goto out;
	}
	for (int i = 0; i < READS_PER_BATCH; i++) /* warm: the page is mapped on the first read */
		sink += haecer_counter_read(energy, &value) == 0 ? value : 0;
	for (int batch = 0; batch < BATCHES; batch++) {
		uint64_t start = bench_now_ns();
		for (int i = 0; i < READS_PER_BATCH; i++)
			sink += haecer_counter_read(energy, &value) == 0 ? value : 0;
		batch_ns[batch] = bench_now_ns() - start;
	}
	haecer_counter_free(energy);
	printf("haecer_counter_read of energy-pkg (energy page): median %.1f ns over %d batches of "
	       "%d (checksum %llu)\n",
	       (double)bench_median_u64(batch_ns, BATCHES) / READS_PER_BATCH, BATCHES,
	       READS_PER_BATCH, (unsigned long long)(sink & 1));
	printf("c_read_ns=%.1f\n", (double)bench_median_u64(batch_ns, BATCHES) / READS_PER_BATCH);
	status = 0;
out:
	haecer_shutdown();
	if (own_server && msrd_stop(&server) < 0)
		status = 1;
	return status;
}
