/*
 * bench/parts/attribution/node_cost.h — what msrd and `haecer-mon serve` cost on a node with
 * many processes (bench/attribution's second part).
 */
#ifndef HAECER_BENCH_PARTS_ATTRIBUTION_NODE_COST_H
#define HAECER_BENCH_PARTS_ATTRIBUTION_NODE_COST_H

struct node_cost {
	unsigned processes;   /* sleeping processes added to the node */
	double msrd_cpu_pct;  /* of one CPU, over the measured window */
	double serve_cpu_pct;
	long msrd_rss_kib;
	long serve_rss_kib;
};

/* Real msrd (simulated CPU) and real serve (--interval 1000, --top 20) on this node, with
 * cost->processes extra sleeping processes; 0 or -errno. */
int node_cost_measure(struct node_cost *cost);

#endif
