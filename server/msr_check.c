/*
 * server/msr_check.c — steps 1 and 2 of READ, WRITE and BATCH (msr_exec.c has the request's
 * whole course): every op against the client's grant, and every write against the register's
 * current value and the write mask, before anything runs. Split from msr_exec.c by concern: what
 * is allowed here, how it runs there. Neither touches a register; fuzz/fuzz_batch.c drives both
 * checks and the batch decoder directly.
 */
#include "server/server.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void refusal_note(struct refusal *refusal, uint32_t refused, uint32_t index,
			 const char *format, ...) __attribute__((format(printf, 4, 5)));

static void refusal_note(struct refusal *refusal, uint32_t refused, uint32_t index,
			 const char *format, ...)
{
	va_list arguments;

	if (refused > 0)
		return;
	refusal->index = index;
	va_start(arguments, format);
	vsnprintf(refusal->reason, sizeof(refusal->reason), format, arguments);
	va_end(arguments);
}

/* A slot read becomes a read of the slot's counter register; -EIDRM (with `why`) for a slot
 * reprogrammed outside msrd. */
static int resolve_slot_read(const struct client *client, struct msr_op *op, char *why,
			     size_t size)
{
	struct slot *slot = slots_find(client, op->address);

	if (slot == NULL)
		return -ENOENT;
	if (slots_check_programming(client->server, slot, why, size) < 0)
		return -EIDRM;
	op->cpu = slot->cpu;
	op->address = slots_counter_address(client->server, slot);
	return 0;
}

/* Whether the client's grant allows reading `address`. A program reads the same register
 * again and again: the last one allowed is noted in the client's hot lines, so those reads do
 * not look into the grant (two lines of its own, cold at thousands of clients). The note is
 * the grant's and goes with it (client_replace_grant). */
static bool read_granted(struct client *client, uint32_t address)
{
	if (client->read_granted && client->read_granted_address == address)
		return true;
	if (!policy_allows_read(client->grant, address))
		return false;
	client->read_granted_address = address;
	client->read_granted = true;
	return true;
}

/* Step 1 for one op: 0, or its refusal (status set, reason noted). */
static int check_op(struct client *client, struct msr_op *op, uint8_t kind,
		    bool validated, char *reason, size_t size)
{
	uint32_t cpus = backend_cpu_count(client->server->backend);
	uint32_t slot_id = op->address;

	if (op->status == -EOPNOTSUPP) {
		snprintf(reason, size, "op kind not supported by this server");
		return op->status;
	}
	if (op->status < 0) {
		snprintf(reason, size, "op with non-zero flags");
		return op->status;
	}
	reason[0] = '\0';
	if (kind == WIRE_BATCH_SLOT_READ && resolve_slot_read(client, op, reason, size) < 0) {
		if (reason[0] != '\0')
			return op->status = -EIDRM;
		if (slots_is_stale(client, slot_id)) {
			snprintf(reason, size, "counter slot %u was released by a policy reload",
				 slot_id);
			return op->status = -ESTALE;
		}
		snprintf(reason, size, "no counter slot %u on this connection", slot_id);
		return op->status = -ENOENT;
	}
	if (op->cpu >= cpus) {
		snprintf(reason, size, "no CPU %u (the machine has %u)", op->cpu, cpus);
		return op->status = -ENXIO;
	}
	/* An offline CPU keeps its directory but has no device: refused here, so a batch that
	 * names it is not run op by op on the loop's thread past the write lock. */
	if (backend_prep_supported(client->server->backend, op->cpu, false) == -ENXIO) {
		snprintf(reason, size, "CPU %u has no MSR device (offline?)", op->cpu);
		return op->status = -ENXIO;
	}
	if (kind == WIRE_BATCH_ENERGY_READ &&
	    energy_find(client->server, op->cpu, op->address) == NULL) {
		snprintf(reason, size, "not an energy-status register msrd keeps a total for");
		return op->status = -EINVAL;
	}
	if (validated)
		return 0;
	if (op->write && policy_write_mask(client->grant, op->address) == 0) {
		snprintf(reason, size, "write not granted");
		return op->status = -EPERM;
	}
	if (!op->write && !read_granted(client, op->address)) {
		snprintf(reason, size, "read not granted");
		return op->status = -EPERM;
	}
	return 0;
}

/* Step 1: what the grant and the machine allow without looking at any register. */
uint32_t msr_exec_check(struct client *client, struct msr_op *ops, const uint8_t *kinds,
			uint32_t count, bool validated, struct refusal *refusal)
{
	uint32_t refused = 0;
	char reason[sizeof(refusal->reason)];

	for (uint32_t i = 0; i < count; i++) {
		if (check_op(client, &ops[i], kinds[i], validated, reason, sizeof(reason)) == 0)
			continue;
		refusal_note(refusal, refused, i, "%s", reason);
		refused++;
	}
	return refused;
}

/* prior[i] = the last write before op i in this batch to the same register, or -1: one pass
 * with a small open-addressing table keyed by (cpu, address), so a batch of 1024 writes costs
 * about 1024 probes, not half a million comparisons. The table is reused across batches by
 * stamping its slots with a generation instead of clearing it. */
#define PRIOR_TABLE_SIZE (2u * WIRE_MAX_BATCH_OPS) /* a power of two, at most half full */

static struct {
	uint32_t stamp[PRIOR_TABLE_SIZE];
	uint16_t last[PRIOR_TABLE_SIZE];
	uint32_t generation;
} seen_writes;

static int32_t prior_scratch[WIRE_MAX_BATCH_OPS];

static uint32_t register_hash(uint32_t cpu, uint32_t address)
{
	return (cpu * 0x9E3779B1u ^ address * 0x85EBCA77u) & (PRIOR_TABLE_SIZE - 1);
}

static void link_prior_writes(const struct msr_op *ops, uint32_t count, int32_t *prior)
{
	if (++seen_writes.generation == 0) {
		memset(seen_writes.stamp, 0, sizeof(seen_writes.stamp));
		seen_writes.generation = 1;
	}
	for (uint32_t i = 0; i < count; i++) {
		uint32_t slot = register_hash(ops[i].cpu, ops[i].address);
		prior[i] = -1;
		if (!ops[i].write)
			continue;
		while (seen_writes.stamp[slot] == seen_writes.generation) {
			const struct msr_op *last = &ops[seen_writes.last[slot]];
			if (last->cpu == ops[i].cpu && last->address == ops[i].address)
				break;
			slot = (slot + 1) & (PRIOR_TABLE_SIZE - 1);
		}
		if (seen_writes.stamp[slot] == seen_writes.generation)
			prior[i] = seen_writes.last[slot];
		seen_writes.stamp[slot] = seen_writes.generation;
		seen_writes.last[slot] = (uint16_t)i;
	}
}

/* Whether a refusal text may show the register's current value (or which of its bits differ):
 * only to a client that may read that register in full. */
static bool may_see_current(const struct client *client, uint32_t address)
{
	struct policy_energy_limit limit;

	return policy_allows_read(client->grant, address) &&
	       policy_energy_limit(client->grant, address, &limit) != 1;
}

static void note_mask_refusal(const struct client *client, struct refusal *refusal,
			      uint32_t refused, uint32_t index, const struct msr_op *op,
			      uint64_t before)
{
	uint64_t mask = policy_write_mask(client->grant, op->address);

	if (!may_see_current(client, op->address)) {
		refusal_note(refusal, refused, index,
			     "write 0x%llx changes bits outside the mask 0x%llx",
			     (unsigned long long)op->value, (unsigned long long)mask);
		return;
	}
	refusal_note(refusal, refused, index,
		     "write 0x%llx over 0x%llx changes bits 0x%llx outside the mask 0x%llx",
		     (unsigned long long)op->value, (unsigned long long)before,
		     (unsigned long long)((before ^ op->value) & ~mask), (unsigned long long)mask);
}

/* Step 2 for every write against the register's value at the time it would run (or the value
 * an earlier write of the batch leaves); prior_writes from link_prior_writes. */
static uint32_t check_writes(const struct client *client, struct msr_op *ops, uint32_t count,
			     const uint64_t *current, const int32_t *current_status,
			     const int32_t *prior_writes, struct refusal *refusal)
{
	uint32_t refused = 0;

	for (uint32_t i = 0; i < count; i++) {
		struct msr_op *op = &ops[i];
		int32_t prior = prior_writes[i];
		uint64_t before;
		int status;

		if (!op->write)
			continue;
		if (prior < 0 && current_status[i] < 0) {
			op->status = current_status[i];
			refusal_note(refusal, refused, i, "its current value cannot be read");
			refused++;
			continue;
		}
		before = prior >= 0 ? ops[prior].value : current[i];
		status = policy_allows_write(client->grant, op->address, before, op->value);
		if (status == 0)
			status = slots_write_conflict(client->server, client, op->cpu, op->address,
						      before, op->value);
		if (status == 0)
			continue;
		op->status = status;
		if (status == -EBUSY)
			refusal_note(refusal, refused, i,
				     "a counter slot another client holds uses this register");
		else if (status == -EACCES)
			note_mask_refusal(client, refusal, refused, i, op, before);
		else
			refusal_note(refusal, refused, i, "write not granted");
		refused++;
	}
	return refused;
}

uint32_t msr_exec_check_writes(const struct client *client, struct msr_op *ops, uint32_t count,
			       const uint64_t *current, const int32_t *current_status,
			       struct refusal *refusal)
{
	link_prior_writes(ops, count, prior_scratch);
	return check_writes(client, ops, count, current, current_status, prior_scratch, refusal);
}

const int32_t *msr_exec_prior_writes(void)
{
	return prior_scratch;
}

int msr_exec_decode_batch(const uint8_t *payload, size_t length, struct msr_op *ops,
			  uint8_t *kinds, uint32_t *count)
{
	int status = wire_get_batch_count(payload, length, WIRE_BATCH_OP_SIZE, WIRE_MAX_BATCH_OPS,
					  count);

	if (status < 0)
		return status;
	for (uint32_t i = 0; i < *count; i++) {
		struct wire_batch_op op;
		int valid = wire_get_batch_op(payload, i, &op);
		ops[i] = (struct msr_op){
			.cpu = op.cpu,
			.address = op.address,
			.value = op.kind == WIRE_BATCH_WRITE ? op.value : 0,
			.write = op.kind == WIRE_BATCH_WRITE,
		};
		kinds[i] = (uint8_t)op.kind;
		/* An op this server cannot run refuses the whole batch, like a policy refusal. */
		if (valid < 0)
			ops[i].status = -EINVAL;
		else if (op.kind < WIRE_BATCH_READ || op.kind > WIRE_BATCH_SLOT_READ)
			ops[i].status = -EOPNOTSUPP;
	}
	return 0;
}
