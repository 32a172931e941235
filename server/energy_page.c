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
	uint64_t published_ns;         /* coarse: energy_now_ns of the last publication */
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

/* Resolution in register units, at least one (as energy.c rounds round-trip readings). */
static struct msrd_energy_page *find_page(struct msrd *server, uint32_t address, bool coarse,
					  const struct policy_energy_limit *limit);

static uint64_t resolution_units(uint8_t exponent, uint64_t resolution_uj)
{
	unsigned __int128 units = rapl_unit_code_units_of_uj(exponent, resolution_uj);

	if (units == 0)
		return 1;
	return units > UINT64_MAX ? UINT64_MAX : (uint64_t)units;
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

/* At most once per interval, values rounded down to the resolution, the publication's own
 * times: the same rounding as a coarse round-trip read, and no sample time finer than it. */
static void publish_coarse(struct msrd *server, struct msrd_energy_page *page)
{
	uint64_t now = energy_now_ns(server);
	uint64_t interval = (uint64_t)page->limit.min_interval_ms * 1000000ull;

	if (page->published && now - page->published_ns < interval)
		return;
	page->published = true;
	page->published_ns = now;
	energy_page_begin(&page->writer);
	for (uint32_t i = 0; i < page->count; i++) {
		const struct energy_counter *counter = &server->energy.counters[page->counters[i]];
		struct energy_page_reading *last = &page->last[i];
		uint64_t units = resolution_units(counter->exponent, page->limit.resolution_uj);
		uint64_t total = counter->sampled.total - counter->sampled.total % units;
		/* The coarse value's publication time; the sampler's own times stay private. */
		uint64_t at_ns = counter->sampled.sample_ns, at_tsc = counter->sampled.sample_tsc;

		if (!last->sample_ns || total != last->total) {
			last->update_ns = at_ns;
			last->update_tsc = at_tsc;
		}
		last->total = total;
		last->raw = total & RAPL_ENERGY_COUNTER_MASK;
		last->sample_ns = at_ns;
		last->sample_tsc = at_tsc;
		energy_page_put(&page->writer, i, last);
	}
	energy_page_end(&page->writer);
}

bool energy_pages_coarse_reading(struct msrd *server, const struct energy_counter *counter,
				  const struct policy_energy_limit *limit, uint64_t *raw,
				  uint64_t *total)
{
	struct msrd_energy_page *page = find_page(server, counter->address, true, limit);

	if (page == NULL || !page->published)
		return false;
	for (uint32_t i = 0; i < page->count; i++) {
		if (&server->energy.counters[page->counters[i]] != counter)
			continue;
		*raw = page->last[i].raw;
		*total = page->last[i].total;
		return true;
	}
	return false;
}

void energy_pages_publish(struct msrd *server)
{
	for (struct msrd_energy_page *page = server->energy.pages; page != NULL; page = page->next)
		(page->coarse ? publish_coarse : publish_fine)(server, page);
}

/* The precise edges' windows publish to fine pages only: a coarse page is written from the
 * page sampler's regular ticks alone, so not even its publication times follow the windows. */
void energy_pages_publish_fine(struct msrd *server)
{
	for (struct msrd_energy_page *page = server->energy.pages; page != NULL; page = page->next)
		if (!page->coarse)
			publish_fine(server, page);
}

static bool virtual_time(const struct msrd *server)
{
	return server->config->backend.sim_virtual_time &&
	       backend_kind(server->backend) == BACKEND_SIM;
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

	if (energy->page_armed || period == 0 || server->stopping || virtual_time(server))
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

static uint64_t now_raw_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC_RAW, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* The rate: the highest any holder asked for (bounded when it asked); 0 when none holds one.
 * The precise edges: the registers of leased precise holders' pages. */
static void update_rate(struct msrd *server)
{
	struct energy_state *energy = &server->energy;
	uint32_t rate = 0;
	uint32_t bound = policy_rate_bound(server);
	uint64_t now = now_raw_ns();
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
	for (struct client *client = server->clients; client != NULL; client = client->next) {
		uint64_t lapse = client->last_request_ns + EDGE_LEASE_NS;

		/* Only holders that sent a request within the lease: the windows cost the package
		 * they measure ~6 % of a CPU, and nobody reads sharp edges between requests. */
		client->edges_leased = lapse > now;
		for (uint32_t i = 0; i < client->page_hold_count; i++) {
			const struct energy_page_hold *hold = &client->page_holds[i];

			if (hold->rate_hz > rate)
				rate = hold->rate_hz;
			for (uint32_t e = 0; hold->precise && client->edges_leased &&
					     energy->edge_wanted != NULL && e < hold->page->count;
			     e++) {
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
	server->energy.page_armed = false;
	if (cqe->res == -ECANCELED || server->energy.page_rate_hz == 0 ||
	    server->energy.page_wanted == NULL)
		return;
	/* Only the registers some page shows: a page of the package energy does not make msrd
	 * read DRAM and core energy ten thousand times a second. */
	energy_sample_some(server, server->energy.page_wanted);
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
	if (virtual_time(server)) {
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
	client->last_request_ns = now_raw_ns();
	/* A lapsed lease renewed: the windows start again (their grid is kept, energy_edges.c). */
	if (!client->edges_leased && holds_precise(client))
		update_rate(client->server);
}

void energy_pages_leases_check(struct msrd *server)
{
	if (now_raw_ns() >= server->energy.edge_lease_lapse_ns)
		update_rate(server);
}

void energy_pages_release_client(struct client *client)
{
	if (client->page_hold_count == 0)
		return;
	for (uint32_t i = 0; i < client->page_hold_count; i++)
		client->page_holds[i].page->holders--;
	client->page_hold_count = 0;
	drop_unheld(client->server);
	update_rate(client->server);
}

void energy_pages_policy_reloaded(struct msrd *server)
{
	unsigned dropped = 0;

	for (struct client *client = server->clients; client != NULL; client = client->next)
		client->page_hold_count = 0;
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
