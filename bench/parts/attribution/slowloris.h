/*
 * bench/parts/attribution/slowloris.h — how long a scrape of `haecer-mon serve` takes while
 * 1 000 idle partial connections are held open (issue 25 item 5), beside a baseline scrape
 * without them (bench/attribution's third part).
 */
#ifndef HAECER_BENCH_PARTS_ATTRIBUTION_SLOWLORIS_H
#define HAECER_BENCH_PARTS_ATTRIBUTION_SLOWLORIS_H

struct slowloris_cost {
	unsigned connections;	/* partial connections held open during the second set */
	double baseline_ms;	/* median scrape: connect, GET /metrics, whole reply */
	double slowloris_ms;	/* the same with the partial connections open */
	double slowloris_max_ms;
};

/* Real msrd (simulated CPU) and real serve; 0 or -errno (-EMFILE: the descriptor limit is below
 * cost->connections). */
int slowloris_measure(struct slowloris_cost *cost);

#endif
