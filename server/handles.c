/*
 * server/handles.c — registered batches: a batch checked against the policy once, then run many
 * times by handle.
 *
 * Registration does step 1 of msr_exec.c (kinds, CPUs, grants, slot ids, energy registers) and
 * keeps the ops. A run copies them and goes through msr_exec_request marked as validated, so
 * only what depends on the moment is done again: slot ids resolved to the slots this connection
 * holds now, and each write's mask comparison against the register's current value (and that it
 * touches no slot another connection holds). A policy reload makes every handle stale: the grants
 * it was checked against are gone, so it must be registered again.
 */
#include "server/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct registered_batch *handles_find(const struct client *client, uint32_t handle)
{
	if (handle == 0 || handle > client->handle_capacity)
		return NULL;
	return client->handles[handle - 1];
}

static void batch_free(struct registered_batch *batch)
{
	if (batch == NULL)
		return;
	free(batch->ops);
	free(batch->kinds);
	free(batch);
}

static struct registered_batch *batch_new(const struct msr_op *ops, const uint8_t *kinds,
					  uint32_t count, uint64_t generation)
{
	struct registered_batch *batch = calloc(1, sizeof(*batch));

	if (batch == NULL)
		return NULL;
	batch->count = count;
	batch->generation = generation;
	batch->ops = malloc(count * sizeof(*batch->ops));
	batch->kinds = malloc(count);
	if (batch->ops == NULL || batch->kinds == NULL) {
		batch_free(batch);
		return NULL;
	}
	memcpy(batch->ops, ops, count * sizeof(*ops));
	memcpy(batch->kinds, kinds, count);
	return batch;
}

/* A free handle number for `batch`: the first empty entry, or a new one. */
static int store(struct client *client, struct registered_batch *batch)
{
	uint32_t index = 0;

	while (index < client->handle_capacity && client->handles[index] != NULL)
		index++;
	if (index == client->handle_capacity) {
		uint32_t capacity = client->handle_capacity > 0 ? client->handle_capacity * 2 : 4;
		struct registered_batch **bigger = realloc(client->handles,
							   capacity * sizeof(*bigger));
		if (bigger == NULL)
			return -ENOMEM;
		memset(bigger + client->handle_capacity, 0,
		       (capacity - client->handle_capacity) * sizeof(*bigger));
		client->handles = bigger;
		client->handle_capacity = capacity;
	}
	client->handles[index] = batch;
	client->handle_count++;
	accounts_take(&client->server->accounts, client->account, ACCOUNT_HANDLES, 1);
	batch->handle = index + 1;
	return 0;
}

/* Forget handle `handle` of the client. */
static void forget(struct client *client, uint32_t handle)
{
	batch_free(client->handles[handle - 1]);
	client->handles[handle - 1] = NULL;
	client->handle_count--;
	accounts_give_back(&client->server->accounts, client->account, ACCOUNT_HANDLES, 1);
}

/* Room for one more handle on this connection and for its uid; false after refusing. */
static bool room_for_a_handle(struct client *client, const struct wire_header *header)
{
	const struct accounts *accounts = &client->server->accounts;
	char reason[160];

	if (client->handle_count >= CLIENT_MAX_HANDLES)
		snprintf(reason, sizeof(reason), "this connection holds %u handles already",
			 client->handle_count);
	else if (client->account->used[ACCOUNT_HANDLES] >= accounts->limits[ACCOUNT_HANDLES])
		accounts_describe_limit(accounts, client->account, ACCOUNT_HANDLES, reason,
					sizeof(reason));
	else
		return true;
	dispatch_log_refusal(client, header->op, 0, 0, reason);
	client_reply_error(client, header->op, header->request_id, WIRE_STATUS_LIMIT, "%s", reason);
	return false;
}

/* The client's batch `handle`, or NULL after answering NOT_FOUND. */
static struct registered_batch *find_or_refuse(struct client *client,
					       const struct wire_header *header, uint32_t handle)
{
	struct registered_batch *batch = handles_find(client, handle);

	if (batch == NULL)
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_NOT_FOUND,
				   "no batch handle %u on this connection", handle);
	return batch;
}

static void reply_u32(struct client *client, const struct wire_header *header, uint32_t value)
{
	struct wire_writer writer;
	uint8_t *space = dispatch_reply_begin(client, WIRE_U32_SIZE, &writer);

	if (space == NULL)
		return;
	wire_put_u32(&writer, value);
	dispatch_reply_end(client, space, header, &writer, -1);
}

void handles_handle_register(struct client *client, const struct wire_header *header,
			     const uint8_t *payload, size_t length)
{
	struct msrd *server = client->server;
	struct registered_batch *batch;
	struct refusal refusal = { 0 };
	uint32_t refused;
	uint32_t count;

	if (dispatch_decode_batch(client, header, payload, length, &count) < 0)
		return;
	if (!room_for_a_handle(client, header))
		return;
	/* Kept before the check, which resolves slot ids into counter registers in place. */
	batch = batch_new(server->scratch, server->scratch_kinds, count, server->policy_generation);
	if (batch == NULL || store(client, batch) < 0) {
		batch_free(batch);
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_NO_MEMORY,
				   "no memory for the batch");
		return;
	}
	refused = msr_exec_check(client, server->scratch, server->scratch_kinds, count, false,
				 &refusal);
	if (refused > 0) {
		forget(client, batch->handle);
		msr_exec_reply_refused(client, header->op, header->request_id, server->scratch, count,
				       refused, &refusal);
		return;
	}
	log_debug("client %u registered batch %u (%u ops)", client->number, batch->handle, count);
	reply_u32(client, header, batch->handle);
}

void handles_handle_run(struct client *client, const struct wire_header *header,
			const uint8_t *payload, size_t length)
{
	struct msrd *server = client->server;
	struct registered_batch *batch;
	uint32_t handle, count;
	struct msr_request request = {
		.op = header->op,
		.request_id = header->request_id,
		.ops = server->scratch,
		.kinds = server->scratch_kinds,
		.validated = true,
	};

	if (wire_get_batch_run(payload, length, &handle, &count) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	batch = find_or_refuse(client, header, handle);
	if (batch == NULL)
		return;
	if (batch->generation != server->policy_generation) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_STALE,
				   "batch handle %u was checked against a policy since reloaded: "
				   "register it again",
				   handle);
		return;
	}
	if (count != batch->count) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "batch handle %u has %u ops, not %u", handle, batch->count, count);
		return;
	}
	memcpy(server->scratch, batch->ops, batch->count * sizeof(*batch->ops));
	memcpy(server->scratch_kinds, batch->kinds, batch->count);
	request.count = batch->count;
	msr_exec_request(client, &request);
}

void handles_handle_release(struct client *client, const struct wire_header *header,
			    const uint8_t *payload, size_t length)
{
	struct registered_batch *batch;
	uint32_t handle;

	if (wire_get_u32_payload(payload, length, &handle) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	batch = find_or_refuse(client, header, handle);
	if (batch == NULL)
		return;
	forget(client, handle);
	dispatch_reply_empty(client, header);
}

void handles_release_client(struct client *client)
{
	accounts_give_back(&client->server->accounts, client->account, ACCOUNT_HANDLES,
			   client->handle_count);
	for (uint32_t i = 0; i < client->handle_capacity; i++)
		batch_free(client->handles[i]);
	free(client->handles);
	client->handles = NULL;
	client->handle_capacity = 0;
	client->handle_count = 0;
}
