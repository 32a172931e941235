/*
 * libclient/haecer_page.c — energy readings from msrd's energy page instead of a round trip.
 *
 * The first read of an energy register asks msrd for its page (ENERGY_PAGE) and maps it; later
 * reads are a seqlock copy from shared memory. Whatever the page cannot answer truthfully goes
 * to the exact round trip instead, which applies msrd's current policy:
 *  - opted out ($HAECER_ENERGY_EXACT=1, or haecer_context_set_energy_exact), an msrd without
 *    pages, a refusal (msrd also refuses pages in the simulator's virtual time);
 *  - a STALE page (the policy was reloaded): asked for again once, so the new grant applies —
 *    a coarse page, or a refusal and round trips that are refused too; never the old fine page;
 *  - a DEAD page (msrd stopped): the context reconnects (a restarted msrd) and asks again;
 *  - a LIVE page whose last sample is older than 20 sampling periods (at least 100 ms): msrd was
 *    killed without marking it.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STALE_PERIODS 20ull
#define STALE_MIN_NS 100000000ull
/* An energy region finds the register's update between two polls; a page sampled less often
 * than this blurs that edge more than a round trip does (bench/fidelity: 1 ms regions read
 * -49 % at the median through a 1 kHz page, +0.3 % through round trips), so regions poll by
 * round trip unless the page is sampled at 10 kHz. */
#define REGION_PAGE_MAX_PERIOD_NS 100000ull
/* With precise edges (msrd brackets each update to a few microseconds) the page serves regions
 * whatever its period: the edge comes from the bracket, not from the poll that saw it. */

int haecer_context_set_energy_exact(struct haecer_context *ctx, bool exact)
{
	if (ctx == NULL)
		return haecer__fail(-EINVAL, "no context");
	pthread_mutex_lock(&ctx->lock);
	ctx->energy_exact = exact;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

static void page_forget(struct haecer_page *page)
{
	if (page->mapped)
		energy_page_detach(&page->reader);
	page->mapped = false;
}

void haecer__pages_close(struct haecer_context *ctx)
{
	for (unsigned i = 0; i < HAECER_CONTEXT_PAGES; i++) {
		page_forget(&ctx->pages[i]);
		ctx->pages[i] = (struct haecer_page){ 0 };
	}
}

/* Counters read their entry again after the page changed, and stop holding a round trip's
 * value against it. */
static void entries_forget(struct haecer_context *ctx, uint32_t address)
{
	for (struct haecer_counter *counter = ctx->counters; counter != NULL;
	     counter = counter->next)
		if (counter->info.counter_address == address) {
			counter->page_entry = -1;
			/* Perhaps another grant: its values may rightly be coarser than the
			 * latest round trip's. */
			counter->exact_held = false;
		}
}

static struct haecer_page *page_slot(struct haecer_context *ctx, uint32_t address)
{
	struct haecer_page *free_slot = NULL;

	for (unsigned i = 0; i < HAECER_CONTEXT_PAGES; i++) {
		struct haecer_page *page = &ctx->pages[i];
		if ((page->mapped || page->unavailable) && page->address == address)
			return page;
		if (!page->mapped && !page->unavailable && free_slot == NULL)
			free_slot = page;
	}
	if (free_slot != NULL)
		*free_slot = (struct haecer_page){ .address = address };
	return free_slot;
}

static int page_map(struct haecer_context *ctx, struct haecer_page *page)
{
	struct haecer_energy_page_info info;
	uint64_t period;
	int fd = -1;
	int error;

	if ((haecer_server_info(ctx->conn)->features & HAECER_FEATURE_ENERGY_PAGE) == 0)
		error = -EOPNOTSUPP;
	else
		error = haecer_energy_page_request(ctx->conn, page->address, 0,
						   page->precise_asked ? HAECER_ENERGY_PAGE_PRECISE
								       : 0, &info, &fd);
	if (error == 0) {
		error = energy_page_attach(&page->reader, fd);
		close(fd);
	}
	if (error < 0) {
		page->unavailable = true;
		return error;
	}
	period = info.rate_hz != 0 ? 1000000000ull / info.rate_hz : STALE_MIN_NS;
	page->period_ns = period;
	page->precise = info.precise_edges;
	page->stale_after_ns = period * STALE_PERIODS > STALE_MIN_NS ? period * STALE_PERIODS
								     : STALE_MIN_NS;
	page->mapped = true;
	entries_forget(ctx, page->address);
	return 0;
}

/* msrd stopped: a restarted msrd is another connection. */
static int reconnect(struct haecer_context *ctx)
{
	struct haecer_conn *fresh;
	int error = haecer_connect(ctx->socket_path, &fresh);

	if (error < 0)
		return error;
	haecer_close(ctx->conn);
	ctx->conn = fresh;
	for (struct haecer_counter *counter = ctx->counters; counter != NULL; counter = counter->next)
		if (counter->info.kind == HAECER_COUNTER_ENERGY && counter->folded_ns != 0)
			counter->total_rebase = true;
	/* Every page of the old msrd is gone with it. */
	for (unsigned i = 0; i < HAECER_CONTEXT_PAGES; i++) {
		page_forget(&ctx->pages[i]);
		ctx->pages[i] = (struct haecer_page){ 0 };
	}
	return 0;
}

/* The lean read (total and sample time) serves counter reads; a region's poll also needs the
 * sample's TSC and takes the whole entry. */
static int page_read_entry(struct haecer_counter *counter, struct haecer_page *page,
			   struct energy_page_total *lean, struct energy_page_reading *full)
{
	int error;

	if (counter->page_entry < 0) {
		int found = energy_page_find(&page->reader, counter->info.cpu,
					     (uint32_t)counter->info.package);
		if (found < 0)
			return found;
		counter->page_entry = found;
	}
	if (full == NULL)
		return energy_page_read_total(&page->reader, (uint32_t)counter->page_entry, lean);
	error = energy_page_read(&page->reader, (uint32_t)counter->page_entry, full);
	if (error == 0)
		*lean = (struct energy_page_total){ .total = full->total,
						    .sample_ns = full->sample_ns,
						    .state = full->state };
	return error;
}

bool haecer__page_held(struct haecer_counter *counter)
{
	struct haecer_context *ctx = counter->ctx;

	for (unsigned i = 0; i < HAECER_CONTEXT_PAGES; i++)
		if (ctx->pages[i].mapped && ctx->pages[i].address == counter->info.counter_address)
			return !ctx->energy_exact;
	return false;
}

int haecer__page_reading(struct haecer_counter *counter, struct energy_page_total *reading,
			 struct energy_page_reading *full)
{
	struct haecer_context *ctx = counter->ctx;
	struct haecer_page *page;
	int error;

	if (ctx->energy_exact || counter->info.kind != HAECER_COUNTER_ENERGY)
		return -ENOENT;
	page = page_slot(ctx, counter->info.counter_address);
	if (page == NULL || page->unavailable)
		return -ENOENT;
	/* Regions and estimates want the update's bracket to a few microseconds: ask for the same
	 * page with precise edges once (msrd keeps the first hold too, until the connection ends;
	 * a coarse grant's page comes back without them). */
	if (counter->wants_precise && page->mapped && !page->precise_asked) {
		page_forget(page);
		page->precise_asked = true;
	}
	if (counter->wants_precise)
		page->precise_asked = true;
	for (unsigned attempt = 0; attempt < 2; attempt++) {
		if (!page->mapped) {
			error = page_map(ctx, page);
			if (error < 0)
				return error;
		}
		error = page_read_entry(counter, page, reading, full);
		if (error < 0)
			return error;
		if (reading->state == ENERGY_PAGE_LIVE) {
			/* This clock read serves the staleness check, the fold and the age. */
			counter->page_checked_ns = clock_monotonic_raw_ns();
			if (counter->page_checked_ns - reading->sample_ns > page->stale_after_ns)
				return -ESTALE;
			return 0;
		}
		/* STALE: ask again under the policy msrd has now. DEAD: msrd stopped. */
		page_forget(page);
		if (reading->state == ENERGY_PAGE_DEAD) {
			error = reconnect(ctx);
			if (error < 0)
				return error;
			page = page_slot(ctx, counter->info.counter_address);
			if (page == NULL)
				return -ENOENT;
		}
	}
	return -ESTALE;
}

/* The last update's bracket on the TSC, [*lo, *hi] (0, 0 when unknown): where msrd placed it
 * (the bracket itself, or its part around the learnt update grid, server/energy_edges.c), its
 * ends carried from CLOCK_MONOTONIC_RAW to the TSC along the bracket, whose ends msrd took on
 * both clocks. */
static void placed_bracket(const struct energy_page_reading *reading, uint64_t *lo, uint64_t *hi)
{
	uint64_t lo_ns = reading->update_lo_ns, hi_ns = reading->update_ns;
	uint64_t lo_tsc = reading->update_lo_tsc, hi_tsc = reading->update_tsc;
	double ticks_per_ns;

	*lo = lo_tsc;
	*hi = lo_tsc ? hi_tsc : 0;
	if (lo_tsc == 0 || hi_tsc <= lo_tsc || hi_ns <= lo_ns ||
	    reading->update_placed_lo_ns < lo_ns || reading->update_placed_hi_ns > hi_ns ||
	    reading->update_placed_hi_ns < reading->update_placed_lo_ns)
		return;
	ticks_per_ns = (double)(hi_tsc - lo_tsc) / (double)(hi_ns - lo_ns);
	*lo = lo_tsc + (uint64_t)llround((double)(reading->update_placed_lo_ns - lo_ns) *
					 ticks_per_ns);
	*hi = lo_tsc + (uint64_t)llround((double)(reading->update_placed_hi_ns - lo_ns) *
					 ticks_per_ns);
}

int haecer__page_sample(struct haecer_counter *counter, struct energy_sample *sample)
{
	struct energy_page_reading reading;
	struct energy_page_total lean;
	const struct haecer_page *page;
	bool held;
	int error = haecer__page_reading(counter, &lean, &reading);

	if (error < 0)
		return error;
	page = page_slot(counter->ctx, counter->info.counter_address);
	if (page == NULL || (page->period_ns > REGION_PAGE_MAX_PERIOD_NS && !page->precise))
		return -ENOENT;
	/* Behind the latest round trip, the page's sample time is not the value's: poll by round
	 * trip until the page catches up. */
	if (haecer__page_behind(counter, reading.total))
		return -ENOENT;
	sample->total = haecer__fold_page(counter, reading.total, &held);
	/* The register was read when msrd sampled it, not now: an energy region must not take a
	 * value up to one sampling period old for a fresh one. The caller sets before/after. */
	sample->tsc = reading.sample_tsc;
	placed_bracket(&reading, &sample->edge_lo, &sample->edge_hi);
	sample->smi = 0;
	sample->smi_exact = false;
	return 0;
}
