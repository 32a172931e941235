/*
 * server/energy_page.c — energy pages: msrd's 64-bit energy totals in shared memory.
 *
 * ENERGY_PAGE hands a client a read-only, sealed page (shm/energy_page.h) holding one energy
 * register's totals: one entry per package (per CPU for AMD's core energy). Pages are shared: one
 * per (register, grant resolution) — a fine one, and one per coarse setting (min_interval_ms,
 * resolution_uj) — made on first request and written while anyone holds it.
 *
 * Sampling only while used: while at least one page is held, a timeout samples every energy
 * register at the highest rate a holder asked for, bounded by the policy's
 * energy_page.max_rate_hz, and publishes. With no page held nothing runs beyond the wrap-safe
 * sampler of energy.c (minutes apart).
 *
 * A coarse page is written only with values quantised to its resolution (in register units, as
 * energy_coarsen does) and at most once per its interval; its times are those of the
 * publications, so nothing finer than the grant ever reaches its memory.
 *
 * A policy reload marks every page STALE and forgets it (a page's holders may have lost their
 * grant, and a page is shared, so none can be trusted to hold only what each holder may see): a
 * holder's library asks again and is refused, or gets a page of its new grant. At exit every page
 * is marked DEAD.
 */
#include "server/server.h"
#include "backend/backend_sim.h"
#include "common/clock.h"

#include "hw/rapl_quirks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shm/energy_page.h"

#define DEFAULT_RATE_HZ 1000u

struct msrd_energy_page {
	struct msrd_energy_page *next;
	uint32_t address;
	bool coarse;
	struct policy_energy_limit limit;
	int fd;                        /* read-write; clients get read-only reopenings */
	struct energy_page_writer writer;
	uint32_t *counters;            /* indices into server->energy.counters, one per entry */
	uint32_t count;
	uint32_t holders;
	uint64_t published_ns;         /* coarse: the newest coarse value's energy_now_ns */
	bool published;
	struct energy_page_reading *last; /* coarse: what was published, per entry */
};

static bool same_setting(const struct msrd_energy_page *page, uint32_t address, bool coarse,
			 const struct policy_energy_limit *limit)
{
	if (page->address != address || page->coarse != coarse)
		return false;
	return !coarse || (page->limit.min_interval_ms == limit->min_interval_ms &&
			   page->limit.resolution_uj == limit->resolution_uj);
}

static void page_free(struct msrd_energy_page *page, enum energy_page_state state)
{
	energy_page_set_state(&page->writer, state);
	energy_page_writer_close(&page->writer);
	if (page->fd >= 0)
		close(page->fd);
	free(page->counters);
	free(page->last);
	free(page);
}

static void publish_fine(struct msrd *server, struct msrd_energy_page *page)
{
	energy_page_begin(&page->writer);
	for (uint32_t i = 0; i < page->count; i++) {
		const struct energy_counter *counter = &server->energy.counters[page->counters[i]];

		energy_page_put(&page->writer, i, &counter->sampled);
	}
	energy_page_end(&page->writer);
}

/* The values of the page's grant setting (energy_coarse_state: the same values round trips and
 * schedules of that setting get, advanced at most once per interval whoever asks), written when
 * one changed; the times are the publication's own, no sample time finer than it. A page made
 * afresh starts from those values too, so freeing and re-making a page gains nothing. */
static void publish_coarse(struct msrd *server, struct msrd_energy_page *page)
{
	bool changed = !page->published;

	for (uint32_t i = 0; i < page->count; i++) {
		const struct energy_counter *counter = &server->energy.counters[page->counters[i]];
		struct energy_coarse *state = energy_coarse_state(server, counter, &page->limit);
		uint64_t raw = counter->sampled.raw, total = counter->sampled.total;

		if (state == NULL)
			return; /* nothing rather than a fine value, for want of memory */
		energy_coarsen(server, counter, &page->limit, state, &raw, &total);
		changed |= state->at_ns > page->published_ns;
	}
	if (!changed)
		return;
	page->published = true;
	energy_page_begin(&page->writer);
	for (uint32_t i = 0; i < page->count; i++) {
		const struct energy_counter *counter = &server->energy.counters[page->counters[i]];
		const struct energy_coarse *state =
			energy_coarse_state(server, counter, &page->limit);
		struct energy_page_reading *last = &page->last[i];
		uint64_t at_ns = counter->sampled.sample_ns, at_tsc = counter->sampled.sample_tsc;

		if (state->at_ns > page->published_ns)
			page->published_ns = state->at_ns;
		if (!last->sample_ns || state->total != last->total) {
			last->update_ns = at_ns;
			last->update_tsc = at_tsc;
		}
		last->total = state->total;
		last->raw = state->raw;
		last->sample_ns = at_ns;
		last->sample_tsc = at_tsc;
		energy_page_put(&page->writer, i, last);
	}
	energy_page_end(&page->writer);
}

void energy_pages_publish(struct msrd *server)
{
	for (struct msrd_energy_page *page = server->energy.pages; page != NULL; page = page->next)
		(page->coarse ? publish_coarse : publish_fine)(server, page);
}

void energy_pages_publish_coarse(struct msrd *server)
{
	for (struct msrd_energy_page *page = server->energy.pages; page != NULL; page = page->next)
		if (page->coarse)
			publish_coarse(server, page);
}

/* The precise edges' windows publish to fine pages only: a coarse page is written from the
 * page sampler's regular ticks alone, so not even its publication times follow the windows. */
void energy_pages_publish_fine(struct msrd *server)
{
	for (struct msrd_energy_page *page = server->energy.pages; page != NULL; page = page->next)
		if (!page->coarse)
			publish_fine(server, page);
}

static uint32_t policy_rate_bound(const struct msrd *server)
{
	uint32_t bound = policy_energy_page_max_hz(server->policy);

	return bound != 0 ? bound : DEFAULT_RATE_HZ;
}

uint64_t energy_pages_period_ns(const struct msrd *server)
{
	uint32_t rate = server->energy.page_rate_hz;

	return rate != 0 ? 1000000000ull / rate : 0;
}

static void arm(struct msrd *server)
{
	struct energy_state *energy = &server->energy;
	uint64_t period = energy_pages_period_ns(server);
	struct io_uring_sqe *sqe;

	if (energy->page_armed || period == 0 || server->stopping ||
	    backend_sim_virtual_time(server->backend))
		return;
	energy->page_timeout = (struct __kernel_timespec){
		.tv_sec = (long long)(period / 1000000000ull),
		.tv_nsec = (long long)(period % 1000000000ull),
	};
	sqe = loop_sqe(&server->loop);
	io_uring_prep_timeout(sqe, &energy->page_timeout, 0, 0);
	io_uring_sqe_set_data64(sqe, loop_user_data(server, TAG_ENERGY_PAGE, 0));
	energy->page_armed = true;
}

/* A client holds its first page / no page any more: update_rate looks at holders only, so
 * what a rate change or a lease costs never depends on the idle connections. */
static void add_holder(struct client *client)
{
	struct energy_state *energy = &client->server->energy;

	client->prev_holder = NULL;
	client->next_holder = energy->holders;
	if (energy->holders != NULL)
		energy->holders->prev_holder = client;
	energy->holders = client;
}

static void remove_holder(struct client *client)
{
	struct energy_state *energy = &client->server->energy;

	if (client->prev_holder != NULL)
		client->prev_holder->next_holder = client->next_holder;
	else
		energy->holders = client->next_holder;
	if (client->next_holder != NULL)
		client->next_holder->prev_holder = client->prev_holder;
	client->prev_holder = NULL;
	client->next_holder = NULL;
}

static bool holds_precise(const struct client *client);

/* The precise edges' CPU budget is per second: a new second forgets what the windows took. */
static void budget_second(struct energy_state *energy, uint64_t now)
{
	if (now - energy->edge_budget_from_ns < EDGE_BUDGET_NS)
		return;
	energy->edge_budget_from_ns = now;
	energy->edge_cpu_ns = 0;
	for (uint32_t i = 0; i < energy->count; i++)
		energy->counters[i].edge.cpu_ns = 0;
}

static uint64_t budget_ns(uint32_t percent)
{
	return (uint64_t)percent * (EDGE_BUDGET_NS / 100);
}

/* What a client's precise holds cost this second: the windows of every register they show. */
static uint64_t holds_cpu_ns(const struct msrd *server, const struct client *client)
{
	uint64_t ns = 0;

	for (uint32_t i = 0; i < client->page_hold_count; i++) {
		const struct energy_page_hold *hold = &client->page_holds[i];

		for (uint32_t e = 0; hold->precise && e < hold->page->count; e++)
			ns += server->energy.counters[hold->page->counters[e]].edge.cpu_ns;
	}
	return ns;
}

/* Each uid's share of this second's windows, summed over its precise holders, leased or not
 * (one left out for its budget still counts what it took), a register two of them show
 * charged to both: the bound errs on the strict side. */
static void sum_uid_cpu(struct msrd *server)
{
	struct client *holders = server->energy.holders;

	/* Holders only: what a check costs never depends on the idle connections. */
	for (struct client *client = holders; client != NULL; client = client->next_holder)
		if (client->account != NULL)
			client->account->edge_cpu_ns = 0;
	for (struct client *client = holders; client != NULL; client = client->next_holder)
		if (client->account != NULL)
			client->account->edge_cpu_ns += holds_cpu_ns(server, client);
}

/* Whether the client's precise holds may have windows now: the total and its uid's share of
 * the budget left (the refusal logged once per uid and second). */
static bool within_budget(struct msrd *server, const struct client *client)
{
	struct energy_state *energy = &server->energy;
	uint64_t total = budget_ns(policy_edge_cpu_percent(server->policy));
	uint64_t per_uid = budget_ns(policy_edge_cpu_percent_per_uid(server->policy));
	struct uid_account *account = client->account;

	if (energy->edge_cpu_ns >= total) {
		if (energy->edge_total_logged != energy->edge_budget_from_ns + 1)
			log_notice("energy pages: precise edges took %llu us of CPU this second, "
				   "their bound of %u %% (energy_page.edge_cpu_percent): none until "
				   "the next second",
				   (unsigned long long)(energy->edge_cpu_ns / 1000),
				   policy_edge_cpu_percent(server->policy));
		energy->edge_total_logged = energy->edge_budget_from_ns + 1;
		return false;
	}
	if (account == NULL || account->edge_cpu_ns < per_uid)
		return true;
	if (account->edge_logged != energy->edge_budget_from_ns + 1)
		log_notice("energy pages: uid %u's precise edges took %llu us of CPU this second, "
			   "its bound of %u %% (energy_page.edge_cpu_percent_per_uid): none for "
			   "it until the next second",
			   (unsigned)account->uid, (unsigned long long)(account->edge_cpu_ns / 1000),
			   policy_edge_cpu_percent_per_uid(server->policy));
	account->edge_logged = energy->edge_budget_from_ns + 1;
	return false;
}

/* The later of the two leases (energy_edges.h): an ENERGY_READ's long one, any request's short
 * one; or earlier, where a region's body begins (energy_pages_note_region). */
static uint64_t lease_lapse(const struct client *client)
{
	uint64_t short_lapse = client->last_request_raw_ns + EDGE_SHORT_LEASE_NS;
	uint64_t long_lapse = client->last_energy_read_raw_ns + EDGE_LEASE_NS;
	uint64_t lapse = long_lapse > short_lapse ? long_lapse : short_lapse;

	if (client->edges_pause_raw_ns != 0 && client->edges_pause_raw_ns < lapse)
		return client->edges_pause_raw_ns;
	return lapse;
}

/* Windows only for the registers the holder measures: of each precise page, the entries it
 * read (by READ or ENERGY_READ: an estimate's or a region's renewal) while holding it, or every
 * entry until it read one. Per page, not per client: libhaecer renews a context's lease through
 * whichever of its counters asks first, so a page whose register was never read is not one its
 * holder does not measure (narrowing across pages left a second counter's page without windows).
 * A page of more than 64 entries (a core energy register of a large AMD part) folds their
 * indices onto 64 bits: an alias gets windows it was not asked for, never the other way round. */
static bool entry_asked(const struct energy_page_hold *hold, uint32_t entry)
{
	return hold->asked_entries == 0 || (hold->asked_entries >> (entry % 64u) & 1u) != 0;
}

/* The rate: the highest any holder asked for (bounded when it asked); 0 when none holds one.
 * The precise edges: the registers of leased precise holders' pages, while the CPU budget
 * lasts (a holder over it counts as unleased: its next request asks again). */
static void update_rate(struct msrd *server)
{
	struct energy_state *energy = &server->energy;
	uint32_t rate = 0;
	uint32_t bound = policy_rate_bound(server);
	uint64_t now = clock_monotonic_raw_ns();
	bool precise = false;

	if (energy->page_wanted == NULL && energy->count > 0)
		energy->page_wanted = calloc(energy->count, sizeof(*energy->page_wanted));
	if (energy->page_wanted != NULL) {
		memset(energy->page_wanted, 0, energy->count * sizeof(*energy->page_wanted));
		for (struct msrd_energy_page *page = energy->pages; page != NULL; page = page->next)
			for (uint32_t i = 0; i < page->count; i++)
				energy->page_wanted[page->counters[i]] = true;
	}

	if (energy->edge_wanted == NULL && energy->count > 0)
		energy->edge_wanted = calloc(energy->count, sizeof(*energy->edge_wanted));
	if (energy->edge_wanted != NULL)
		memset(energy->edge_wanted, 0, energy->count * sizeof(*energy->edge_wanted));
	energy->edge_lease_lapse_ns = UINT64_MAX;
	budget_second(energy, now);
	energy->edge_checked_ns = now;
	sum_uid_cpu(server);
	for (struct client *client = energy->holders; client != NULL; client = client->next_holder) {
		uint64_t lapse = lease_lapse(client);

		/* Only holders within their lease: the windows cost the package they measure ~6 %
		 * of a CPU, and nobody reads sharp edges it did not ask for. */
		client->edges_leased = lapse > now && (!holds_precise(client) ||
						       within_budget(server, client));
		for (uint32_t i = 0; i < client->page_hold_count; i++) {
			const struct energy_page_hold *hold = &client->page_holds[i];

			if (hold->rate_hz > rate)
				rate = hold->rate_hz;
			for (uint32_t e = 0; hold->precise && client->edges_leased &&
					     energy->edge_wanted != NULL && e < hold->page->count;
			     e++) {
				if (!entry_asked(hold, e))
					continue;
				energy->edge_wanted[hold->page->counters[e]] = true;
				precise = true;
				if (lapse < energy->edge_lease_lapse_ns)
					energy->edge_lease_lapse_ns = lapse;
			}
		}
	}
	energy_edges_set(server, precise ? energy->edge_wanted : NULL);
	if (rate > bound)
		rate = bound;
	if (rate != server->energy.page_rate_hz)
		log_info("energy pages: sampling at %u Hz%s", rate, rate ? "" : " (none held)");
	server->energy.page_rate_hz = rate;
	arm(server);
}

void energy_pages_on_timeout(struct msrd *server, const struct io_uring_cqe *cqe)
{
	uint64_t cpu;

	server->energy.page_armed = false;
	if (cqe->res == -ECANCELED || server->energy.page_rate_hz == 0 ||
	    server->energy.page_wanted == NULL)
		return;
	/* Only the registers some page shows: a page of the package energy does not make msrd
	 * read DRAM and core energy ten thousand times a second. */
	cpu = energy_cost_thread_cpu_ns();
	energy_sample_some(server, server->energy.page_wanted);
	/* Shown from the next publication on (this one is out already). */
	energy_cost_charge_sampler(server, server->energy.page_wanted,
				   energy_cost_thread_cpu_ns() - cpu);
	server->energy.page_samples++;
	arm(server);
}

static int make_page(struct msrd *server, uint32_t address, bool coarse,
		     const struct policy_energy_limit *limit, struct msrd_energy_page **out)
{
	struct energy_state *energy = &server->energy;
	struct energy_page_slot *slots = NULL;
	struct msrd_energy_page *page;
	struct energy_page_params params = {
		.address = address,
		.flags = (coarse ? ENERGY_PAGE_COARSE : 0) |
			 (backend_kind(server->backend) == BACKEND_SIM ? ENERGY_PAGE_SIMULATED : 0),
		.min_interval_ms = coarse ? limit->min_interval_ms : 0,
		.resolution_uj = coarse ? limit->resolution_uj : 0,
		.tsc_hz = server->machine.tsc_hz,
	};
	int status = -ENOMEM;

	page = calloc(1, sizeof(*page));
	if (page == NULL)
		return -ENOMEM;
	page->fd = -1;
	page->address = address;
	page->coarse = coarse;
	if (coarse)
		page->limit = *limit;
	page->counters = calloc(energy->count, sizeof(*page->counters));
	page->last = calloc(energy->count, sizeof(*page->last));
	slots = calloc(energy->count, sizeof(*slots));
	if (page->counters == NULL || page->last == NULL || slots == NULL)
		goto out;
	for (uint32_t i = 0; i < energy->count; i++) {
		const struct energy_counter *counter = &energy->counters[i];
		if (counter->address != address)
			continue;
		slots[page->count] = (struct energy_page_slot){
			.cpu = counter->cpu,
			.package = server->machine.cpu_package[counter->cpu],
			.domain = counter->domain,
			.exponent = counter->exponent,
			.per_cpu = counter->domain == RAPL_DOMAIN_AMD_CORE,
		};
		page->counters[page->count++] = i;
	}
	params.entry_count = page->count;
	status = page->count == 0 ? -EINVAL
				  : energy_page_create(&params, slots, &page->writer, &page->fd);
	if (status < 0)
		goto out;
	/* Listed first, so that this sample already takes the times a page needs. */
	page->next = energy->pages;
	energy->pages = page;
	energy_sample_all(server);
	*out = page;
	page = NULL;
out:
	free(slots);
	if (page != NULL)
		page_free(page, ENERGY_PAGE_DEAD);
	return status;
}

static struct msrd_energy_page *find_page(struct msrd *server, uint32_t address, bool coarse,
					  const struct policy_energy_limit *limit)
{
	for (struct msrd_energy_page *page = server->energy.pages; page != NULL; page = page->next)
		if (same_setting(page, address, coarse, limit))
			return page;
	return NULL;
}

static bool keeps_total(struct msrd *server, uint32_t address)
{
	for (uint32_t i = 0; i < server->energy.count; i++)
		if (server->energy.counters[i].address == address)
			return true;
	return false;
}

static void reply_page(struct client *client, const struct wire_header *header,
		       const struct msrd_energy_page *page, uint32_t rate_hz, bool precise,
		       int fd)
{
	struct wire_energy_page reply = {
		.address = page->address,
		.flags = (page->coarse ? WIRE_ENERGY_PAGE_COARSE : 0) |
			 (precise ? WIRE_ENERGY_PAGE_PRECISE : 0),
		.entry_count = page->count,
		.rate_hz = rate_hz,
		.min_interval_ms = page->coarse ? page->limit.min_interval_ms : 0,
		.resolution_uj = page->coarse ? page->limit.resolution_uj : 0,
		.bytes = page->writer.bytes,
	};
	struct wire_writer writer;
	uint8_t *space = dispatch_reply_begin(client, WIRE_ENERGY_PAGE_REPLY_SIZE, &writer);

	if (space == NULL) {
		close(fd);
		return;
	}
	wire_put_energy_page(&writer, &reply);
	dispatch_reply_end(client, space, header, &writer, fd);
}

void energy_pages_handle_request(struct client *client, const struct wire_header *header,
				 const uint8_t *payload, size_t length)
{
	struct msrd *server = client->server;
	struct wire_energy_page_request request;
	struct policy_energy_limit limit = { 0 };
	struct msrd_energy_page *page;
	uint32_t bound = policy_rate_bound(server);
	uint32_t rate;
	bool coarse, precise;
	int status;
	int fd;

	if (wire_get_energy_page_request(payload, length, &request) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (!policy_allows_read(client->grant, request.address)) {
		dispatch_log_refusal(client, header->op, 0, request.address, "read not granted");
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_DENIED,
				   "uid %u may not read MSR 0x%x", (unsigned)client->uid,
				   request.address);
		return;
	}
	if (backend_sim_virtual_time(server->backend)) {
		/* Its time moves with register accesses and SIM_ADVANCE: a page would stand
		 * still between them, and sampling for it would move time itself. */
		client_reply_error(client, header->op, header->request_id,
				   WIRE_STATUS_UNSUPPORTED,
				   "no energy pages in the simulator's virtual time");
		return;
	}
	if (!keeps_total(server, request.address)) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "MSR 0x%x is no energy register msrd keeps a total for",
				   request.address);
		return;
	}
	if (client->page_hold_count >= CLIENT_MAX_ENERGY_PAGES) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_LIMIT,
				   "this connection holds %u energy pages already",
				   client->page_hold_count);
		return;
	}
	coarse = policy_energy_limit(client->grant, request.address, &limit) == 1;
	page = find_page(server, request.address, coarse, &limit);
	if (page == NULL) {
		status = make_page(server, request.address, coarse, &limit, &page);
		if (status < 0) {
			client_reply_error(client, header->op, header->request_id,
					   wire_status_from_errno(status),
					   "cannot make the energy page: %s", strerror(-status));
			return;
		}
	}
	fd = energy_page_reopen_readonly(page->fd);
	if (fd < 0) {
		client_reply_error(client, header->op, header->request_id,
				   wire_status_from_errno(fd), "cannot open the energy page: %s",
				   strerror(-fd));
		return;
	}
	rate = request.rate_hz == 0 || request.rate_hz > bound ? bound : request.rate_hz;
	/* Precise edges only on a fine page: a coarse grant must not learn when the register
	 * changes any finer than its interval (the request is granted, coarse, without them). */
	precise = (request.flags & WIRE_ENERGY_PAGE_PRECISE) != 0 && !coarse;
	if (client->page_hold_count == 0)
		add_holder(client);
	/* The short lease runs from the page's making on, not from the request's arrival: a page
	 * made under valgrind took longer than the lease, and the windows never started. */
	client->last_request_raw_ns = clock_monotonic_raw_ns();
	client->page_holds[client->page_hold_count++] =
		(struct energy_page_hold){ .page = page, .rate_hz = rate, .precise = precise };
	page->holders++;
	update_rate(server);
	reply_page(client, header, page, rate, precise, fd);
}

/* Forget pages nobody holds (they are made again on request). */
static void drop_unheld(struct msrd *server)
{
	struct msrd_energy_page **link = &server->energy.pages;

	while (*link != NULL) {
		struct msrd_energy_page *page = *link;
		if (page->holders > 0) {
			link = &page->next;
			continue;
		}
		*link = page->next;
		page_free(page, server->stopping ? ENERGY_PAGE_DEAD : ENERGY_PAGE_STALE);
	}
}

static bool holds_precise(const struct client *client)
{
	for (uint32_t i = 0; i < client->page_hold_count; i++)
		if (client->page_holds[i].precise)
			return true;
	return false;
}

void energy_pages_client_request(struct client *client)
{
	client->last_request_raw_ns = clock_monotonic_raw_ns();
	/* Any request ends a region's pause: its end asks for the closing update's window. */
	client->edges_pause_raw_ns = 0;
	/* A lapsed lease renewed: the windows start again (their grid is kept, energy_edges.c). */
	if (!client->edges_leased && holds_precise(client))
		update_rate(client->server);
}

void energy_pages_note_read(struct client *client, uint32_t cpu, uint32_t address,
			    bool energy_read)
{
	struct msrd *server = client->server;
	const struct energy_counter *counter;
	bool more = false, renewed = false;

	if (client->page_hold_count == 0)
		return;
	if (energy_read) {
		renewed = client->last_energy_read_raw_ns + EDGE_LEASE_NS <= client->last_request_raw_ns;
		client->last_energy_read_raw_ns = client->last_request_raw_ns;
	}
	counter = energy_find(server, cpu, address);
	for (uint32_t i = 0; counter != NULL && i < client->page_hold_count; i++) {
		struct energy_page_hold *hold = &client->page_holds[i];
		uint32_t index = (uint32_t)(counter - server->energy.counters);

		for (uint32_t e = 0; hold->page->address == address && e < hold->page->count; e++) {
			uint64_t bit = 1ull << (e % 64u);

			if (hold->page->counters[e] != index || (hold->asked_entries & bit) != 0)
				continue;
			hold->asked_entries |= bit;
			more |= hold->precise;
		}
	}
	/* A first entry read narrows the windows to it; a lapsed long lease renewed extends
	 * them (the short one, renewed by the same request, already started them). Else
	 * nothing: a read must not walk every holder. */
	if (more || renewed)
		update_rate(server);
}

/* Only the earliest lapse moves: the windows' timer computes the set again when it comes (and
 * finds this pause, or a request that ended it), so a flood of these costs no walk over the
 * holders. */
void energy_pages_note_region(struct client *client, uint32_t region_edges_us)
{
	struct energy_state *energy = &client->server->energy;

	if (client->page_hold_count == 0)
		return;
	client->edges_pause_raw_ns = client->last_request_raw_ns + region_edges_us * 1000ull;
	if (client->edges_leased && client->edges_pause_raw_ns < energy->edge_lease_lapse_ns)
		energy->edge_lease_lapse_ns = client->edges_pause_raw_ns;
}

void energy_pages_charge_edges(struct msrd *server, struct energy_counter *counter, uint64_t ns)
{
	struct energy_state *energy = &server->energy;
	uint64_t now = clock_monotonic_raw_ns();

	budget_second(energy, now);
	counter->edge.cpu_ns += ns;
	energy->edge_cpu_ns += ns;
	/* Every EDGE_BUDGET_CHECK_NS the holders are weighed against the budget again (each
	 * window would cost a walk over every client). */
	if (now - energy->edge_checked_ns >= EDGE_BUDGET_CHECK_NS)
		update_rate(server);
}

void energy_pages_leases_check(struct msrd *server)
{
	if (clock_monotonic_raw_ns() >= server->energy.edge_lease_lapse_ns)
		update_rate(server);
}

void energy_pages_release_client(struct client *client)
{
	if (client->page_hold_count == 0)
		return;
	for (uint32_t i = 0; i < client->page_hold_count; i++)
		client->page_holds[i].page->holders--;
	client->page_hold_count = 0;
	remove_holder(client);
	drop_unheld(client->server);
	update_rate(client->server);
}

void energy_pages_policy_reloaded(struct msrd *server)
{
	unsigned dropped = 0;

	while (server->energy.holders != NULL) {
		server->energy.holders->page_hold_count = 0;
		remove_holder(server->energy.holders);
	}
	while (server->energy.pages != NULL) {
		struct msrd_energy_page *page = server->energy.pages;
		server->energy.pages = page->next;
		page_free(page, ENERGY_PAGE_STALE);
		dropped++;
	}
	if (dropped > 0)
		log_notice("SIGHUP: %u energy pages marked stale; holders ask again", dropped);
	update_rate(server);
}

void energy_pages_free(struct msrd *server)
{
	while (server->energy.pages != NULL) {
		struct msrd_energy_page *page = server->energy.pages;
		server->energy.pages = page->next;
		page_free(page, ENERGY_PAGE_DEAD);
	}
	server->energy.page_rate_hz = 0;
	free(server->energy.page_wanted);
	server->energy.page_wanted = NULL;
	energy_edges_set(server, NULL);
	free(server->energy.edge_wanted);
	server->energy.edge_wanted = NULL;
}
