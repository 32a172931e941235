/*
 * server/client.c — one connected client's lifecycle: accept, close, retirement and freeing, the
 * deadlines the tick checks, and how its refusals are logged. Its input is client_input.c, its
 * replies client_output.c; client_internal.h is what the three share.
 *
 * Limits: a client with CLIENT_MAX_IN_FLIGHT replies or CLIENT_PAUSE_BYTES queued is not
 * served further until they drain; once CLIENT_MAX_INPUT bytes wait in its input buffer its
 * multishot recv is cancelled, so msrd stops reading from it (throttled, not dropped: what the
 * kernel had already received by then is kept, at most what the shared receive buffers hold).
 * A reply queue over CLIENT_MAX_QUEUED, a send that makes no progress for --client-timeout, or a
 * frame not completed within --frame-timeout drops the client.
 *
 * Lifetime: a closed client is retired when its last SQE completes, and freed only at the end
 * of that loop turn (client_free_retired), since the turn's lists may still name it.
 */
#include "server/client_internal.h"
#include "backend/backend_sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void client_log(const struct client *client, enum log_level level, const char *what)
{
	log_message(level, "client %u (uid %u pid %d): %s", client->number, (unsigned)client->uid,
		    (int)client->pid, what);
}

int client_accept(struct msrd *server, int fd)
{
	/* Aligned to a line: its hot part then takes exactly CLIENT_HOT_BYTES / 64 lines. */
	size_t size = (sizeof(struct client) + 63u) & ~(size_t)63u;
	struct client *client = aligned_alloc(64, size);
	int status;

	if (client == NULL)
		return -ENOMEM;
	memset(client, 0, sizeof(*client));
	client->server = server;
	client->fd = fd;
	status = listener_identify(fd, &client->pid, &client->uid, &client->gid, &client->groups,
				   &client->group_count);
	if (status < 0)
		goto fail;
	client->account = accounts_get(&server->accounts, client->uid);
	if (client->account == NULL) {
		status = -ENOMEM;
		goto fail;
	}
	if (accounts_take(&server->accounts, client->account, ACCOUNT_CONNECTIONS, 1) < 0) {
		char reason[160];
		accounts_describe_limit(&server->accounts, client->account, ACCOUNT_CONNECTIONS,
					reason, sizeof(reason));
		log_notice("refused a connection (pid %d): %s", (int)client->pid, reason);
		accounts_drop_unused(&server->accounts, client->account);
		client->account = NULL;
		status = -EUSERS;
		goto fail;
	}
	status = msrd_resolve_grant(server, client, &client->grant);
	if (status < 0)
		goto fail;
	client->grant_generation = server->policy_generation;
	/* On the simulated CPU, the client's load at 1 ms samples (its task clock or CPU-time clock,
	 * sim_follow.c), not at /proc/stat's tick: its measured code and its polling then draw
	 * different power. Not
	 * available in virtual time or on hardware: nothing to do then. */
	client->followed = backend_sim_follow_process(server->backend, (int)client->pid, true) == 0;
	client->number = ++server->next_client_number;
	client->next = server->clients;
	if (server->clients != NULL)
		server->clients->prev = client;
	server->clients = client;
	server->client_count++;
	if (log_get_level() >= LOG_LEVEL_INFO) {
		char line[160];
		snprintf(line, sizeof(line), "connected (gid %u, %u groups%s)",
			 (unsigned)client->gid, client->group_count,
			 policy_grant_matched(client->grant) ? "" : ", no policy rule matches");
		client_log(client, LOG_LEVEL_INFO, line);
	}
	client_rearm_recv(client);
	return 0;
fail:
	if (client->account != NULL)
		accounts_give_back(&server->accounts, client->account, ACCOUNT_CONNECTIONS, 1);
	free(client->groups);
	free(client);
	return status;
}

/* On the tick's list: a deadline was set (a partial frame or a send started). Only these are
 * looked at by the tick, so a loop turn or a tick never costs anything per idle client. */
void client_watch_deadline(struct client *client)
{
	struct msrd *server = client->server;

	loop_want_tick(server);
	if (client->timed)
		return;
	client->timed = true;
	client->prev_timed = NULL;
	client->next_timed = server->timed;
	if (server->timed != NULL)
		server->timed->prev_timed = client;
	server->timed = client;
}

void client_unwatch_deadline(struct client *client)
{
	struct msrd *server = client->server;

	if (!client->timed)
		return;
	if (client->prev_timed != NULL)
		client->prev_timed->next_timed = client->next_timed;
	else
		server->timed = client->next_timed;
	if (client->next_timed != NULL)
		client->next_timed->prev_timed = client->prev_timed;
	client->prev_timed = NULL;
	client->next_timed = NULL;
	client->timed = false;
}

/* Out of the client list, onto the dead list: completions of this turn may still name it (on
 * server->dirty or server->rearm), so its memory stays until the turn is over. */
static void client_retire(struct client *client)
{
	struct msrd *server = client->server;

	if (client->prev != NULL)
		client->prev->next = client->next;
	else
		server->clients = client->next;
	if (client->next != NULL)
		client->next->prev = client->prev;
	server->client_count--;
	client_unwatch_deadline(client);
	accounts_give_back(&server->accounts, client->account, ACCOUNT_CONNECTIONS, 1);
	client->account = NULL;
	client->prev = NULL;
	client->next = server->dead;
	server->dead = client;
}

static void client_free(struct client *client)
{
	for (uint8_t i = 0; i < client->fd_mark_count; i++)
		close(client->fd_marks[i].fd);
	close(client->fd);
	policy_grant_free(client->grant);
	free(client->fd_send);
	free(client->input);
	free(client->sending.data);
	free(client->pending.data);
	free(client->groups);
	free(client->rings);
	free(client->stale_slots);
	handles_release_client(client);
	free(client);
}

void client_free_retired(struct msrd *server)
{
	while (server->dead != NULL) {
		struct client *client = server->dead;
		server->dead = client->next;
		client_free(client);
	}
}

void client_sqe_done(struct client *client)
{
	client->sqes_in_flight--;
	if (client->closing && client->sqes_in_flight == 0)
		client_retire(client);
}

#define REFUSAL_LOG_INTERVAL_NS (5ull * 1000000000ull)
#define REFUSAL_LOG_UID_FACTOR 4u /* a uid's lines: those of a few of its connections */

static void summarise_refusals(struct client *client)
{
	struct uid_account *account = client->account;

	if (account == NULL || account->refusals.suppressed == 0)
		return;
	log_notice("refused: %llu more refusals of uid %u suppressed",
		   (unsigned long long)account->refusals.suppressed, (unsigned)client->uid);
	account->refusals.suppressed = 0;
}

bool client_refusal_loggable(struct client *client)
{
	struct uid_account *account = client->account;
	unsigned burst = client->server->config->refusal_log_burst;
	uint64_t now = msrd_now_ns();

	if (burst == 0)
		return true;
	if (account != NULL && account->refusals.suppressed > 0 &&
	    now - account->refusals.window_start_ns >= REFUSAL_LOG_INTERVAL_NS)
		summarise_refusals(client);
	if (!log_ratelimit_pass(&client->refusals, now, REFUSAL_LOG_INTERVAL_NS,
				burst)) {
		if (account != NULL)
			account->refusals.suppressed++;
		return false;
	}
	return account == NULL || log_ratelimit_pass(&account->refusals, now,
						     REFUSAL_LOG_INTERVAL_NS,
						     REFUSAL_LOG_UID_FACTOR * burst);
}

void client_replace_grant(struct client *client, struct policy_grant *grant)
{
	policy_grant_free(client->grant);
	client->grant = grant;
	client->read_granted = false;
}

void client_close(struct client *client, const char *reason)
{
	uint64_t now = msrd_now_ns();

	char line[160];

	if (client->closing)
		return;
	client->closing = true;
	/* One uniform word, whatever the reason: tests and operators grep for it. */
	snprintf(line, sizeof(line), "disconnected (%s)", reason);
	client_log(client, LOG_LEVEL_INFO, line);
	summarise_refusals(client);
	for (uint16_t i = 0; i < client->ring_count; i++)
		ringdir_release(&client->server->rings, client->rings[i].entry,
				client->rings[i].producer, now);
	accounts_give_back(&client->server->accounts, client->account, ACCOUNT_RINGS,
			   client->ring_count);
	client->ring_count = 0;
	/* Whatever it held goes back now, not when its last SQE completes: the counters to the
	 * state msrd found them in, its schedules stopped (unless persistent). */
	slots_release_client(client);
	schedule_release_client(client);
	handles_release_client(client);
	energy_pages_release_client(client);
	perf_requests_release_client(client);
	if (client->followed)
		backend_sim_follow_process(client->server->backend, (int)client->pid, false);
	client->followed = false;
	if (client->server->rings.count > 0)
		loop_want_tick(client->server);
	/* Wakes the recv (it completes with 0) and fails a send in flight; the client is freed
	 * when the last of its SQEs has completed. */
	shutdown(client->fd, SHUT_RDWR);
	if (client->sqes_in_flight == 0)
		client_retire(client);
}

/* ---- periodic checks ---- */

static bool check_timeouts(struct client *client, uint64_t now_ns)
{
	const struct msrd_config *config = client->server->config;

	if (client->closing)
		return false;
	if (client->frame_started_ns != 0 &&
	    now_ns - client->frame_started_ns > (uint64_t)config->frame_timeout_ms * 1000000ull) {
		char detail[96];
		snprintf(detail, sizeof(detail), "frame not completed within %u ms",
			 config->frame_timeout_ms);
		client_fail(client, 0, WIRE_STATUS_TIMEOUT, detail);
		return true;
	}
	if (client->send_started_ns != 0 &&
	    now_ns - client->send_started_ns > (uint64_t)config->client_timeout_ms * 1000000ull) {
		client_close(client, "its replies could not be sent: it stopped reading");
		return false;
	}
	return client->frame_started_ns != 0 || client->send_started_ns != 0;
}

bool clients_check_timeouts(struct msrd *server, uint64_t now_ns)
{
	bool needed = false;
	struct client *next;

	for (struct client *client = server->timed; client != NULL; client = next) {
		next = client->next_timed;
		if (check_timeouts(client, now_ns))
			needed = true;
		else
			client_unwatch_deadline(client); /* set again by its next partial frame or send */
	}
	return needed;
}

int client_add_ring(struct client *client, struct ring_entry *entry, bool producer)
{
	struct accounts *accounts = &client->server->accounts;

	if (client->ring_count >= client->server->config->max_rings_per_client)
		return -ENOSPC;
	if (client->ring_count == client->ring_capacity) {
		uint16_t capacity = client->ring_capacity > 0 ? (uint16_t)(client->ring_capacity * 2)
							       : 4;
		struct ring_ref *bigger = realloc(client->rings, sizeof(*bigger) * capacity);
		if (bigger == NULL)
			return -ENOMEM;
		client->rings = bigger;
		client->ring_capacity = capacity;
	}
	if (accounts_take(accounts, client->account, ACCOUNT_RINGS, 1) < 0)
		return -ENOSPC;
	client->rings[client->ring_count++] = (struct ring_ref){ .entry = entry,
								  .producer = producer };
	return 0;
}
