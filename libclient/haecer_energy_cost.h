/*
 * libclient/haecer_energy_cost.h — what measuring a region cost (haecer_energy_cost.c), private
 * to libhaecer.
 */
#ifndef HAECER_LIBCLIENT_ENERGY_COST_H
#define HAECER_LIBCLIENT_ENERGY_COST_H

#include "libclient/haecer_internal.h"

/* msrd's measurement cost counters of the counter's page entry now (the lock is taken here). */
struct haecer_energy_cost_mark {
	uint64_t cpu_ns;
	uint64_t nj;
	bool known;
};

HAECER_INTERNAL void haecer__energy_cost_mark(struct haecer_counter *counter,
					      struct haecer_energy_cost_mark *mark);
/* The region starts now: remember the counters in it. */
HAECER_INTERNAL void haecer__energy_cost_start(struct haecer_counter *counter,
					       struct haecer_energy_region *region);
/* The result's measurement_* from the start's counters to `end` (taken at the end call), with
 * the result's powers (filled already) for the estimate on real hardware. */
HAECER_INTERNAL void haecer__energy_cost_result(const struct haecer_energy_region *region,
						const struct haecer_energy_cost_mark *end,
						struct haecer_energy_result *result);

/* haecer_energy_mark with the reading in joules (region markers read nJ), its moment known to
 * [before_ns, after_ns] and its round trip apart (a marker's batch dates it by the TSC). */
HAECER_INTERNAL int haecer__energy_mark_joules(struct haecer_counter *counter, double joules,
					       uint64_t before_ns, uint64_t after_ns,
					       uint64_t round_trip_ns,
					       struct haecer_energy_mark *out);

#endif
