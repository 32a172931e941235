/*
 * tools/mon/rank.c — the processes the attribution engine charged, heaviest first, as far as
 * the caller may see them: what `top --by process` (top_by.c) and serve's per-process series
 * (serve_attribution.c) share.
 *
 * Who sees whose processes: root (the operator: msrd's own policy, its exporter, a root `top`)
 * sees every process; anyone else only processes of their own uid. The others' energy is not
 * hidden, only whose it is: it stays in hidden_joules (shown as one "[others]" row) and in the
 * cgroup figures, so the rows still add up to the package.
 */
#include "tools/mon/mon.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "attribution/attribution.h"

bool mon_sees_every_process(void)
{
	return geteuid() == 0;
}

bool mon_may_see_process(uid_t owner)
{
	return mon_sees_every_process() || owner == getuid();
}

static int heavier_in_interval(const void *a, const void *b)
{
	double left = (*(const struct attribution_process *const *)a)->interval_joules;
	double right = (*(const struct attribution_process *const *)b)->interval_joules;
	return (left < right) - (left > right);
}

static int heavier_in_total(const void *a, const void *b)
{
	double left = (*(const struct attribution_process *const *)a)->joules_total;
	double right = (*(const struct attribution_process *const *)b)->joules_total;
	return (left < right) - (left > right);
}

long mon_rank_processes(struct mon_rank *rank, const struct attribution *engine,
			enum mon_rank_by by)
{
	const struct attribution_process *processes;
	size_t count = attribution_processes(engine, &processes);
	size_t kept = 0;

	if (count > rank->size) {
		const struct attribution_process **bigger =
			reallocarray(rank->order, count, sizeof(*bigger));
		if (bigger == NULL)
			return -ENOMEM;
		rank->order = bigger;
		rank->size = count;
	}
	rank->hidden_joules = 0;
	rank->hidden_error_joules = 0;
	for (size_t i = 0; i < count; i++) {
		if (mon_may_see_process(processes[i].uid)) {
			rank->order[kept++] = &processes[i];
			continue;
		}
		rank->hidden_joules += processes[i].interval_joules;
		rank->hidden_error_joules += processes[i].error_joules;
	}
	qsort(rank->order, kept, sizeof(*rank->order),
	      by == MON_RANK_INTERVAL ? heavier_in_interval : heavier_in_total);
	return (long)kept;
}

void mon_rank_free(struct mon_rank *rank)
{
	free(rank->order);
	*rank = (struct mon_rank){ 0 };
}
