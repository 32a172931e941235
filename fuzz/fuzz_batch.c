/*
 * fuzz/fuzz_batch.c — msrd's check of a decoded batch against a client's policy grant.
 *
 * The real server code without its event loop: the simulated CPU (Skylake-SP or Zen 3) opened as
 * msrd opens it, the shipped and golden policies, and two connections on it. "other" holds
 * counter slots (taken through SLOT_ALLOC as msrd would), "self" holds one and sends the batch.
 * Steps 1 (msr_exec_check: kinds, CPUs, grants, slot ids, energy registers) and 2
 * (msr_exec_check_writes: write masks against the registers' values, other connections' slots)
 * run on a BATCH payload from the input, with register values from the input too.
 *
 * Input: byte 0 machine (bit 0), byte 1 policy, byte 2 identity (uid 0, a member of group
 * haecer, another user, nobody), u16 payload length, the payload, then per op the register's
 * current value (u64) and a byte whose bit 0 says the value could not be read.
 *
 * Whenever a batch is accepted, an oracle written independently of the server (no hash tables,
 * no slot table) confirms it grants nothing beyond the policy: every op names an existing CPU;
 * every read is of a register the grant may read; every energy read names an energy register
 * msrd keeps a total for; every slot read names one of self's slots; every write has a write
 * mask and changes only its bits relative to the value before it (the register's, or an
 * earlier write's in the same batch), and leaves every register and control bit of other's
 * slots alone. A refused batch names a refused op.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef FUZZ_SOURCE_DIR
#define FUZZ_SOURCE_DIR "."
#endif
#define MAX_POLICIES 32

struct machine {
	struct msrd server;
	struct msrd_config config;
	struct client self;
	struct client other;
	struct policy_grant *root;
} __attribute__((aligned(16)));

static struct machine machines[2];
static struct policy *policies[MAX_POLICIES];
static size_t policy_count;
static struct msr_op ops[WIRE_MAX_BATCH_OPS];
static struct msr_op asked[WIRE_MAX_BATCH_OPS];
static uint8_t kinds[WIRE_MAX_BATCH_OPS];
static uint64_t current[WIRE_MAX_BATCH_OPS];
static int32_t current_status[WIRE_MAX_BATCH_OPS];

static const gid_t haecer_groups[] = { 4242 };
static const struct policy_subject subjects[] = {
	{ .uid = 0, .gid = 0 },
	{ .uid = 1000, .gid = 1000, .groups = haecer_groups, .group_count = 1 },
	{ .uid = 1001, .gid = 1001 },
	{ .uid = 65534, .gid = 65534 },
};

static const char *source_dir(void)
{
	const char *source = getenv("HAECER_SOURCE");

	return source != NULL && source[0] != '\0' ? source : FUZZ_SOURCE_DIR;
}

/* A shipped or golden policy; "group: haecer" becomes gid 4242 so subject 1 matches it. */
static void load_policy(const char *path)
{
	static char text[1 << 20];
	size_t length;
	FILE *file = fopen(path, "r");
	char *group;

	if (file == NULL || policy_count == MAX_POLICIES) {
		if (file != NULL)
			fclose(file);
		return;
	}
	length = fread(text, 1, sizeof(text) - 1, file);
	fclose(file);
	text[length] = '\0';
	while ((group = strstr(text, "group: haecer")) != NULL)
		memcpy(group, "gid:     4242", 13);
	if (policy_load_buffer(text, length, path, &policies[policy_count], NULL) == 0)
		policy_count++;
}

static void load_policies_from(const char *directory)
{
	char path[4096];
	struct dirent *entry;
	DIR *dir = opendir(directory);

	if (dir == NULL)
		return;
	while ((entry = readdir(dir)) != NULL) {
		size_t length = strlen(entry->d_name);
		if (length < 5 || strcmp(entry->d_name + length - 5, ".yaml") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", directory, entry->d_name);
		load_policy(path);
	}
	closedir(dir);
}

static void take_slot(struct machine *machine, struct client *client, uint32_t cpu,
		      uint16_t kind, int32_t index)
{
	struct wire_slot_alloc request = { .cpu = cpu, .kind = kind, .index = index };
	struct wire_header header = { .op = WIRE_OP_SLOT_ALLOC, .request_id = 1 };
	uint8_t payload[WIRE_SLOT_ALLOC_SIZE];
	struct wire_writer writer;

	wire_writer_init(&writer, payload, sizeof(payload));
	wire_put_slot_alloc(&writer, &request);
	client->grant = machine->root;
	slots_handle_alloc(client, &header, payload, writer.used);
	/* The reply is not needed: drop it as if it had been sent. */
	free(client->pending.data);
	client->pending = (struct output_buffer){ 0 };
	client->stream_queued = client->stream_sent = 0;
	client->replies_pending = 0;
	client->dirty = false;
	machine->server.dirty = NULL;
}

static void open_machine(struct machine *machine, const char *model, const char *models_dir,
			 const struct policy *root_policy)
{
	struct msrd *server = &machine->server;
	struct policy_subject root = { .uid = 0, .gid = 0 };
	char why[256];

	machine->config = (struct msrd_config){
		.backend = { .kind = BACKEND_SIM, .sim_model = model, .models_dir = models_dir,
			     .sim_virtual_time = true },
		.max_clients_per_uid = 8,
		.max_rings_per_uid = 8,
		.max_handles_per_uid = 8,
		.max_schedules_per_uid = 8,
	};
	*server = (struct msrd){ .config = &machine->config, .listen_fd = -1, .signal_fd = -1,
			    .journal = { .fd = -1 } }; /* the simulated CPU keeps none */
	if (backend_open(&machine->config.backend, &server->backend, why, sizeof(why)) < 0 ||
	    backend_machine_info(server->backend, &server->machine) < 0) {
		fprintf(stderr, "fuzz_batch: cannot open the simulated %s: %s\n", model, why);
		abort();
	}
	msrstate_init(&server->saved, &server->machine);
	accounts_init(&server->accounts, &machine->config);
	assert(slots_init(&server->slots, &server->machine) == 0);
	assert(energy_init(server) == 0);
	assert(policy_resolve(root_policy, &root, &machine->root) == 0);
	machine->self = (struct client){ .server = server, .number = 1, .uid = 1000 };
	machine->other = (struct client){ .server = server, .number = 2, .uid = 1001 };
	/* other: programmable counters 1 and 2 of CPU 0, fixed counter 1 of CPU 1 (none on AMD);
	 * self: programmable counter 0 of CPU 0 (its slot id 1). */
	take_slot(machine, &machine->other, 0, WIRE_SLOT_PROGRAMMABLE, 1);
	take_slot(machine, &machine->other, 0, WIRE_SLOT_PROGRAMMABLE, 2);
	take_slot(machine, &machine->other, 1, WIRE_SLOT_FIXED, 1);
	take_slot(machine, &machine->self, 0, WIRE_SLOT_PROGRAMMABLE, 0);
	assert(machine->self.slot_count == 1 && machine->other.slot_count >= 2);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static char models[4096], shipped[4096], golden[4096], path[4200];

	(void)argc;
	(void)argv;
	log_init("fuzz_batch", getenv("FUZZ_LOG") != NULL ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR, false);
	snprintf(shipped, sizeof(shipped), "%s/configs/policies", source_dir());
	snprintf(golden, sizeof(golden), "%s/tests/policy/good", source_dir());
	snprintf(models, sizeof(models), "%s/configs/models", source_dir());
	/* Slots are taken under root's grant of the shipped policy for the vendor: policies[0]
	 * and [1]. */
	snprintf(path, sizeof(path), "%s/default.yaml", shipped);
	load_policy(path);
	snprintf(path, sizeof(path), "%s/amd-zen.yaml", shipped);
	load_policy(path);
	assert(policy_count == 2);
	load_policies_from(shipped);
	load_policies_from(golden);
	open_machine(&machines[0], "skylake-sp", models, policies[0]);
	open_machine(&machines[1], "zen3", models, policies[1]);
	return 0;
}

/* ---- the oracle ---- */

static bool is_amd(const struct msrd *server)
{
	return server->slots.amd;
}

/* Whether a write to (cpu, address) of `value` over `before` touches one of other's slots:
 * written from the SDM's and the PPR's register lists, not from slots.c. */
static bool touches_slot(const struct msrd *server, const struct slot *slot, uint32_t cpu,
			 uint32_t address, uint64_t before, uint64_t value)
{
	uint64_t changed = before ^ value;
	uint32_t i = slot->index;

	if (slot->cpu != cpu)
		return false;
	if (is_amd(server))
		return address == 0xC0010200 + 2 * i || address == 0xC0010201 + 2 * i ||
		       (i < 4 && (address == 0xC0010000 + i || address == 0xC0010004 + i));
	if (slot->kind == WIRE_SLOT_FIXED)
		return address == 0x309 + i ||
		       (address == 0x38D && ((changed >> (4 * i)) & 0xF) != 0) ||
		       (address == 0x38F && ((changed >> (32 + i)) & 1) != 0);
	return address == 0xC1 + i || address == 0x4C1 + i || address == 0x186 + i ||
	       (address == 0x38F && ((changed >> i) & 1) != 0);
}

static uint64_t value_before(uint32_t index)
{
	for (uint32_t j = index; j-- > 0;) {
		if (ops[j].write && ops[j].cpu == ops[index].cpu &&
		    ops[j].address == ops[index].address)
			return ops[j].value;
	}
	return current[index];
}

static void check_accepted(struct machine *machine, uint32_t count)
{
	struct msrd *server = &machine->server;
	const struct policy_grant *grant = machine->self.grant;

	for (uint32_t i = 0; i < count; i++) {
		const struct msr_op *op = &ops[i];
		assert(op->status == 0);
		assert(kinds[i] >= WIRE_BATCH_READ && kinds[i] <= WIRE_BATCH_SLOT_READ);
		assert(op->cpu < server->machine.cpu_count);
		if (kinds[i] == WIRE_BATCH_SLOT_READ) {
			/* self's only slot: id 1, programmable counter 0 of CPU 0. */
			assert(asked[i].address == 1 && op->cpu == 0);
			assert(op->address == (is_amd(server) ? 0xC0010201u : 0xC1u));
		}
		if (kinds[i] == WIRE_BATCH_ENERGY_READ)
			assert(energy_find(server, op->cpu, op->address) != NULL);
		if (!op->write) {
			assert(policy_allows_read(grant, op->address));
			continue;
		}
		uint64_t before = value_before(i);
		uint64_t mask = policy_write_mask(grant, op->address);
		assert(mask != 0 && ((before ^ op->value) & ~mask) == 0);
		for (const struct slot *slot = machine->other.slots; slot; slot = slot->next)
			assert(!touches_slot(server, slot, op->cpu, op->address, before, op->value));
	}
}

/* ---- one input ---- */

static size_t take_u16(const uint8_t **data, size_t *size)
{
	uint16_t value = 0;

	if (*size >= 2)
		memcpy(&value, *data, 2);
	*data += *size >= 2 ? 2 : *size;
	*size -= *size >= 2 ? 2 : *size;
	return value;
}

static void take_register_values(const uint8_t *data, size_t size, uint32_t count)
{
	for (uint32_t i = 0; i < count; i++) {
		current[i] = 0;
		current_status[i] = 0;
		if (size >= 9) {
			memcpy(&current[i], data, 8);
			current_status[i] = (data[8] & 1) ? -EIO : 0;
			data += 9;
			size -= 9;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct machine *machine;
	struct policy_grant *grant = NULL;
	struct refusal refusal = { 0 };
	uint32_t count, refused;
	size_t length;
	int status;

	if (size < 3)
		return 0;
	machine = &machines[data[0] & 1];
	assert(policy_resolve(policies[data[1] % policy_count], &subjects[data[2] % 4], &grant) ==
	       0);
	client_replace_grant(&machine->self, grant);
	data += 3;
	size -= 3;
	length = take_u16(&data, &size);
	if (length > size)
		length = size;
	status = msr_exec_decode_batch(data, length, ops, kinds, &count);
	assert(status == 0 || status == -EBADMSG || status == -EINVAL);
	if (status < 0)
		goto out;
	assert(count >= 1 && count <= WIRE_MAX_BATCH_OPS);
	memcpy(asked, ops, sizeof(ops[0]) * count);
	take_register_values(data + length, size - length, count);
	refused = msr_exec_check(&machine->self, ops, kinds, count, false, &refusal);
	if (refused == 0)
		refused = msr_exec_check_writes(&machine->self, ops, count, current, current_status,
						&refusal);
	if (refused > 0) {
		assert(refusal.index < count && ops[refusal.index].status < 0);
		assert(memchr(refusal.reason, '\0', sizeof(refusal.reason)) != NULL);
	} else {
		check_accepted(machine, count);
	}
out:
	client_replace_grant(&machine->self, NULL);
	return 0;
}
