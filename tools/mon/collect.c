/*
 * tools/mon/collect.c — what `haecer-mon serve` exports: msrd's 64-bit energy totals per RAPL
 * domain and package (a multi-die package's dies summed), and the latest readings of every
 * ring the caller may monitor.
 *
 * Energy totals never wrap (msrd extends the 32-bit registers), so they are Prometheus counters
 * as they are. Power is the energy of the last complete window of at least one interval, so a
 * coarse grant that repeats a reading within its minimum interval does not show zero watts.
 *
 * Rings: msrd keeps a ring listed while any connected client that opened it is connected, so
 * the exporter opens rings on a short-lived connection and keeps only the mappings; a ring whose
 * producer left then disappears from msrd's directory after its grace period, and from the
 * exporter with it. AMD's per-core energy is left out (one series per core is not what a
 * cluster dashboard wants; the package total is there).
 */
#include "tools/mon/serve.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "haecer/perfmon.h"
#include "hw/msr.h"

#define LIST_MAX 4096u
#define BATCH_RECORDS 256u

void serve_state_init(struct serve_state *state, const char *socket_path, double interval,
		      uint64_t resolution_uj)
{
	memset(state, 0, sizeof(*state));
	state->socket_path = socket_path;
	state->interval = interval;
	state->resolution_uj = resolution_uj;
	state->energy_status = -ENOTCONN;
}

static void ring_free(struct serve_ring *ring)
{
	mon_ring_close(&ring->ring);
	free(ring);
}

void serve_state_free(struct serve_state *state)
{
	serve_attribution_close(state);
	serve_slurm_close(state);
	for (size_t i = 0; i < state->ring_count; i++)
		ring_free(state->rings[i]);
	state->ring_count = 0;
	haecer_close(state->conn);
	state->conn = NULL;
}

/* ---- energy ---- */

/* The entry of (name, package) already found, else a new one; NULL when full. */
static struct serve_domain *domain_of(struct serve_state *state, const char *name,
				      uint32_t package)
{
	for (size_t i = 0; i < state->domain_count; i++)
		if (strcmp(state->domains[i].name, name) == 0 && state->domains[i].package == package)
			return &state->domains[i];
	if (state->domain_count == SERVE_MAX_DOMAINS)
		return NULL;
	return &state->domains[state->domain_count++];
}

/* Every (domain, package) the machine has, each die of a multi-die package read on a CPU of
 * that die (RAPL is die-scope there; the package is the sum). */
static void find_domains(struct serve_state *state, const struct haecer_machine_info *machine)
{
	struct mon_energy_domain found[SERVE_MAX_DOMAINS];
	size_t count = mon_energy_dies(machine, found, SERVE_MAX_DOMAINS);

	state->domain_count = 0;
	for (size_t i = 0; i < count; i++) {
		struct serve_domain *domain = domain_of(state, found[i].name, found[i].package);
		if (domain == NULL || domain->die_count == SERVE_MAX_DIES)
			continue;
		if (domain->die_count == 0)
			*domain = (struct serve_domain){
				.name = found[i].name,
				.package = found[i].package,
				.address = found[i].address,
				.exponent = found[i].exponent,
			};
		domain->cpus[domain->die_count++] = found[i].cpu;
	}
}

static void drop_connection(struct serve_state *state, int status)
{
	tool_warn("lost msrd: %s", haecer_msrd_strerror(status));
	haecer_close(state->conn);
	state->conn = NULL;
	state->energy_status = -ENOTCONN;
}

static bool connection_broken(int status)
{
	return status == -EPIPE || status == -ECONNRESET || status == -EPROTO ||
	       status == -EBADMSG;
}

/* Log the energy setting in use, once and again whenever it changes (a reconnect to an msrd
 * with another policy). */
static void say_setting(struct serve_state *state, double interval, uint64_t resolution_uj,
			const char *why)
{
	if (state->setting_said && interval == state->interval &&
	    resolution_uj == state->resolution_uj)
		return;
	state->interval = interval;
	state->resolution_uj = resolution_uj;
	state->setting_said = true;
	tool_warn("serve: energy totals at most once per %g s, rounded down to %g J (%s)", interval,
		  resolution_uj / 1e6, why);
}

/* Raise *interval and *resolution_uj, where the options left them to the policy, to the running
 * policy's coarse setting as msrd tells it (ENERGY_GRANT); `why` says what came of it. */
static void raise_to_policy(struct serve_state *state, double *interval, uint64_t *resolution_uj,
			    char *why, size_t size)
{
	struct haecer_energy_grant grant;
	int status = haecer_energy_grant(state->conn, state->domains[0].address, &grant);

	if (status < 0) {
		snprintf(why, size, "serve's default: msrd did not say the policy's coarse "
			 "setting: %s", haecer_conn_error(state->conn)[0] != '\0'
			 ? haecer_conn_error(state->conn) : strerror(-status));
		return;
	}
	if (!(grant.flags & HAECER_ENERGY_GRANT_POLICY_COARSE)) {
		snprintf(why, size, "serve's default: the running policy has no coarse setting");
		return;
	}
	if (state->interval_by_policy)
		*interval = fmax(*interval, grant.policy_min_interval_ms / 1000.0);
	if (state->resolution_by_policy && grant.policy_resolution_uj > *resolution_uj)
		*resolution_uj = grant.policy_resolution_uj;
	snprintf(why, size, "no finer than the running policy's coarse setting, %g s and %g J%s",
		 grant.policy_min_interval_ms / 1000.0, grant.policy_resolution_uj / 1e6,
		 !state->interval_by_policy ? "; the interval as --interval says"
		 : !state->resolution_by_policy ? "; the resolution as --resolution-uj says" : "");
}

/* Where --interval / --resolution-uj did not say: serve's defaults, raised to the running
 * policy's coarse setting, so that whoever reaches the endpoint learns no more than the
 * policy's coarse users may, whatever the exporter's own grant. */
static void apply_policy_setting(struct serve_state *state)
{
	double interval = state->interval_by_policy ? SERVE_DEFAULT_INTERVAL_MS / 1000.0
						    : state->interval;
	uint64_t resolution = state->resolution_by_policy ? SERVE_DEFAULT_RESOLUTION_UJ
							  : state->resolution_uj;
	char why[192] = "as configured";

	if (state->interval_by_policy || state->resolution_by_policy) {
		if (state->domain_count == 0)
			return; /* no energy to publish, nothing to ask */
		raise_to_policy(state, &interval, &resolution, why, sizeof(why));
	}
	say_setting(state, interval, resolution, why);
}

static void connect_msrd(struct serve_state *state)
{
	struct haecer_machine_info *machine = calloc(1, sizeof(*machine));
	int status = machine != NULL ? haecer_connect(state->socket_path, &state->conn) : -ENOMEM;

	if (status == 0)
		status = haecer_machine_info(state->conn, machine);
	if (status < 0) {
		if (!state->msrd_warned)
			tool_warn("cannot reach msrd: %s (retrying)",
				  strerror(-status));
		state->msrd_warned = true;
		haecer_close(state->conn);
		state->conn = NULL;
		goto out;
	}
	if (state->msrd_warned)
		tool_warn("connected to msrd");
	state->msrd_warned = false;
	state->simulated = (machine->flags & HAECER_MACHINE_SIMULATED) != 0;
	state->backend = mon_msrd_backend(state->conn);
	state->energy_status = 0;
	find_domains(state, machine);
	apply_policy_setting(state);
out:
	free(machine);
}

static void note_refusal(struct serve_domain *domain, struct haecer_conn *conn, int status)
{
	domain->refused = true;
	tool_warn("leaving out %s energy of package %u: %s", domain->name,
		  domain->package, haecer_conn_error(conn)[0] != '\0' ? haecer_conn_error(conn)
		  : strerror(-status));
}

/* The total rounded down to the exporter's resolution (in the register's units, at least one):
 * what anyone who can reach the endpoint may see, which is not what msrd grants the exporter. */
static uint64_t publishable(const struct serve_state *state, const struct serve_domain *domain,
			    uint64_t total)
{
	unsigned __int128 units;

	if (state->resolution_uj == 0 || domain->exponent < 0 || domain->exponent > 63)
		return total;
	units = ((unsigned __int128)state->resolution_uj << domain->exponent) / 1000000u;
	if (units <= 1)
		return total;
	if (units > UINT64_MAX)
		return 0;
	return total - total % (uint64_t)units;
}

static void sample_domain(struct serve_domain *domain, uint64_t total, double now,
			  double interval)
{
	domain->total = total;
	domain->have_total = true;
	if (!domain->have_window || total < domain->window_total) {
		domain->window_total = total;
		domain->window_start = now;
		domain->have_window = true;
		domain->have_watts = false;
		return;
	}
	if (now - domain->window_start < interval)
		return;
	domain->watts = mon_joules(total - domain->window_total, domain->exponent) /
			(now - domain->window_start);
	domain->have_watts = true;
	domain->window_total = total;
	domain->window_start = now;
}

/* The domain's total: its dies' totals, each rounded to the resolution, summed. */
static int read_domain(struct serve_state *state, struct serve_domain *domain, uint64_t *sum)
{
	*sum = 0;
	for (size_t die = 0; die < domain->die_count; die++) {
		uint64_t total;
		int status = haecer_energy_read(state->conn, domain->cpus[die], domain->address,
						NULL, &total);
		if (status < 0)
			return status;
		domain->die_totals[die] = publishable(state, domain, total);
		*sum += domain->die_totals[die];
	}
	return 0;
}

static void sample_energy(struct serve_state *state)
{
	state->energy_sampled_at = mon_now();
	for (size_t i = 0; i < state->domain_count && state->conn != NULL; i++) {
		struct serve_domain *domain = &state->domains[i];
		uint64_t total;
		int status;
		if (domain->refused || state->energy_status != 0)
			continue;
		status = read_domain(state, domain, &total);
		if (status == -EOPNOTSUPP) {
			state->energy_status = status;
			tool_warn("msrd does not provide energy totals "
				  "(ENERGY_READ: %s): no energy series",
				  haecer_msrd_strerror(status));
		} else if (connection_broken(status)) {
			drop_connection(state, status);
		} else if (status < 0) {
			note_refusal(domain, state->conn, status);
		} else {
			sample_domain(domain, total, mon_now(), state->interval);
		}
	}
}

/* ---- rings ---- */

static void remember(struct serve_ring *ring, const struct mon_reading *reading)
{
	for (size_t i = 0; i < ring->latest_count; i++) {
		if (ring->latest[i].counter_id == reading->counter_id) {
			ring->latest[i] = *reading;
			return;
		}
	}
	if (ring->latest_count < MON_MAX_TRACKED)
		ring->latest[ring->latest_count++] = *reading;
}

static void read_ring(struct serve_ring *ring, struct ring_record *records)
{
	struct mon_reading reading;
	ssize_t got;

	if (ring->corrupted)
		return;
	do {
		uint64_t lost = 0;
		got = ring->producer_gone
			? ring_consume_final(&ring->ring.consumer, records, BATCH_RECORDS, &lost)
			: ring_consume(&ring->ring.consumer, records, BATCH_RECORDS, &lost);
		ring->lost += lost;
		for (ssize_t i = 0; i < got; i++) {
			mon_decode(&ring->decoder, &records[i], &reading);
			remember(ring, &reading);
		}
	} while (got == BATCH_RECORDS);
	if (got == RING_CORRUPTED || ring_consumer_corrupted(&ring->ring.consumer)) {
		/* Counts from a lying header would be exported as facts: the ring is left out
		 * (still tracked, so it is not opened again). */
		ring->corrupted = true;
		tool_warn("ring %u.%u.%u (uid %u): " RING_CORRUPTED_TEXT
			  ": no longer exported",
			  ring->ring.info.major, ring->ring.info.minor, ring->ring.info.instance,
			  (unsigned)ring->ring.entry.owner_uid);
	}
}

static void read_rings(struct serve_state *state)
{
	struct ring_record *records = calloc(BATCH_RECORDS, sizeof(*records));

	if (records == NULL)
		return;
	for (size_t i = 0; i < state->ring_count; i++)
		read_ring(state->rings[i], records);
	free(records);
}

static struct serve_ring *find_ring(struct serve_state *state, uint32_t instance)
{
	for (size_t i = 0; i < state->ring_count; i++)
		if (state->rings[i]->ring.entry.instance == instance)
			return state->rings[i];
	return NULL;
}

/* A ring msrd fills for a schedule: msrd is its producer (its pid, not the owner's, which a
 * ring a client made always has as both: msrd sets both from SO_PEERCRED). */
static bool msrd_filled(const struct haecer_ring_entry *entry)
{
	return entry->producer_pid != entry->owner_pid;
}

static size_t followed_of(const struct serve_state *state, bool by_msrd, uint32_t uid)
{
	size_t count = 0;

	for (size_t i = 0; i < state->ring_count; i++) {
		const struct serve_ring *ring = state->rings[i];

		if (ring->listed && ring->msrd_filled == by_msrd &&
		    (by_msrd || ring->ring.entry.owner_uid == uid))
			count++;
	}
	return count;
}

static int compare_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Each uid's share of the producers' rings: the limit split evenly between the uids whose
 * rings msrd lists, so one uid's flood of rings cannot hide another's. */
static size_t ring_share(const struct haecer_ring_entry *entries, size_t count)
{
	uint32_t *uids = calloc(count > 0 ? count : 1, sizeof(*uids));
	size_t n = 0, distinct = 0;

	if (uids == NULL)
		return SERVE_MAX_RINGS;
	for (size_t i = 0; i < count; i++)
		if (!msrd_filled(&entries[i]))
			uids[n++] = entries[i].owner_uid;
	qsort(uids, n, sizeof(*uids), compare_u32);
	for (size_t i = 0; i < n; i++)
		distinct += i == 0 || uids[i] != uids[i - 1];
	free(uids);
	return distinct > 1 ? SERVE_MAX_RINGS / distinct : SERVE_MAX_RINGS;
}

/* Say once (until another uid is named) whose rings were left out. */
static void warn_ring_limit(struct serve_state *state, uint32_t uid, size_t share)
{
	if (state->ring_limit_warned && state->ring_limit_uid == uid)
		return;
	tool_warn("uid %u lists more rings than its share of %zu of the %u "
		  "producers' rings serve follows: its newer rings are left out",
		  (unsigned)uid, share, SERVE_MAX_RINGS);
	state->ring_limit_warned = true;
	state->ring_limit_uid = uid;
}

/* A followed uid past a share that shrank (another uid's rings appeared): its newest rings
 * are let go (marked unlisted: drop_unlisted reads and frees them). */
static void trim_to_share(struct serve_state *state, size_t share)
{
	for (size_t i = state->ring_count; i-- > 0;) {
		struct serve_ring *ring = state->rings[i];
		uint32_t uid = ring->ring.entry.owner_uid;

		if (ring->listed && !ring->msrd_filled && followed_of(state, false, uid) > share) {
			ring->listed = false;
			warn_ring_limit(state, uid, share);
		}
	}
}

/* Open a ring msrd just listed, on `opener` (connected on first use; see the top), if its
 * uid's share (or msrd's own allowance) has room. */
static void track_ring(struct serve_state *state, struct haecer_conn **opener,
		       const struct haecer_ring_entry *entry, size_t share)
{
	bool by_msrd = msrd_filled(entry);
	struct serve_ring *ring;

	if (by_msrd ? followed_of(state, true, 0) >= SERVE_MAX_MSRD_RINGS
		    : followed_of(state, false, entry->owner_uid) >= share) {
		if (!by_msrd)
			warn_ring_limit(state, entry->owner_uid, share);
		return;
	}
	if (state->ring_count == SERVE_MAX_RINGS + SERVE_MAX_MSRD_RINGS)
		return; /* unlisted rings still in the table: room after drop_unlisted */
	if (*opener == NULL && haecer_connect(state->socket_path, opener) < 0)
		return;
	ring = calloc(1, sizeof(*ring));
	if (ring == NULL)
		return;
	if (mon_ring_open(*opener, entry->major, entry->minor, entry->instance, &ring->ring) < 0) {
		free(ring); /* gone meanwhile, or past the per-connection limit: next tick */
		haecer_close(*opener);
		*opener = NULL;
		return;
	}
	mon_decoder_init(&ring->decoder, &ring->ring.info);
	ring->decoder.simulated = state->simulated;
	ring->decoder.backend = state->backend;
	ring->listed = true;
	ring->msrd_filled = by_msrd;
	ring->producer_gone = !(entry->flags & HAECER_RING_PRODUCER_CONNECTED) ||
			      !ring_producer_alive(&ring->ring.info);
	state->rings[state->ring_count++] = ring;
}

/* Forget rings msrd no longer lists (after a last read). */
static void drop_unlisted(struct serve_state *state, struct ring_record *records)
{
	size_t kept = 0;

	for (size_t i = 0; i < state->ring_count; i++) {
		struct serve_ring *ring = state->rings[i];
		if (ring->listed) {
			state->rings[kept++] = ring;
			continue;
		}
		ring->producer_gone = true;
		read_ring(ring, records);
		ring_free(ring);
	}
	state->ring_count = kept;
}

static void discover_rings(struct serve_state *state)
{
	struct haecer_ring_entry *entries = calloc(LIST_MAX, sizeof(*entries));
	struct ring_record *records = calloc(BATCH_RECORDS, sizeof(*records));
	struct haecer_conn *opener = NULL;
	int count = -ENOMEM;
	size_t share;

	if (entries != NULL && records != NULL)
		count = haecer_ring_list(state->conn, entries, LIST_MAX);
	if (count < 0) {
		if (connection_broken(count))
			drop_connection(state, count);
		goto out;
	}
	for (size_t i = 0; i < state->ring_count; i++)
		state->rings[i]->listed = false;
	/* Rings followed already first: the shares count them before any new one is opened. */
	for (int i = 0; i < count && (size_t)i < LIST_MAX; i++) {
		struct serve_ring *ring = find_ring(state, entries[i].instance);
		if (ring == NULL)
			continue;
		ring->listed = true;
		/* Gone once: read what is left without waiting for records never finished. */
		if (!(entries[i].flags & HAECER_RING_PRODUCER_CONNECTED) ||
		    !ring_producer_alive(&ring->ring.info))
			ring->producer_gone = true;
	}
	share = ring_share(entries, count < (int)LIST_MAX ? (size_t)count : LIST_MAX);
	trim_to_share(state, share);
	drop_unlisted(state, records);
	for (int i = 0; i < count && (size_t)i < LIST_MAX; i++)
		if (find_ring(state, entries[i].instance) == NULL)
			track_ring(state, &opener, &entries[i], share);
out:
	haecer_close(opener);
	free(entries);
	free(records);
}

void serve_tick(struct serve_state *state)
{
	if (state->conn == NULL)
		connect_msrd(state);
	sample_energy(state);
	serve_attribution_tick(state);
	serve_slurm_tick(state);
	if (state->conn != NULL)
		discover_rings(state);
	read_rings(state);
}

void serve_refresh(struct serve_state *state)
{
	if (mon_now() - state->energy_sampled_at >= state->interval)
		sample_energy(state);
	read_rings(state);
}
