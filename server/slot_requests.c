/*
 * server/slot_requests.c — the SLOT_* requests (proto/PROTOCOL.md): SLOT_ALLOC chooses and takes a
 * counter, SLOT_PROGRAM sets its event select through the policy's write mask, SLOT_CONTROL
 * starts, stops and resets slots, SLOT_READ reads them (optionally stopped together), SLOT_FREE
 * gives one back. Each decodes its frame, answers refusals with a reason, and leaves the registers
 * to the slot mechanism (slots.c, through slots_internal.h).
 */
#include "server/slots_internal.h"

#include "hw/core_type.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- SLOT_ALLOC ---- */

static void refuse(struct client *client, const struct wire_header *header, uint32_t cpu,
		   int status, const char *format, ...) __attribute__((format(printf, 5, 6)));

static void refuse(struct client *client, const struct wire_header *header, uint32_t cpu,
		   int status, const char *format, ...)
{
	char reason[256];
	va_list arguments;

	va_start(arguments, format);
	vsnprintf(reason, sizeof(reason), format, arguments);
	va_end(arguments);
	dispatch_log_refusal(client, header->op, cpu, 0, reason);
	client_reply_error(client, header->op, header->request_id, wire_status_from_errno(status),
			   "%s", reason);
}

/* " (an E-core)" / " (a P-core)" on a hybrid part, "" elsewhere: counters differ by type. */
static const char *core_type_text(const struct msrd *server, uint32_t cpu)
{
	uint8_t type = server->machine.cpu_core_type[cpu];

	return type == CPU_CORE_TYPE_ATOM ? " (an E-core)"
	       : type == CPU_CORE_TYPE_CORE ? " (a P-core)" : "";
}

/* How many counters of the request's kind its CPU has. */
static uint32_t cpu_counter_count(const struct slot_table *table,
				  const struct wire_slot_alloc *request)
{
	const uint32_t *mask = request->kind == WIRE_SLOT_FIXED ? table->fixed_mask : table->gp_mask;

	return mask != NULL ? (uint32_t)__builtin_popcount(mask[request->cpu]) : 0;
}

/* What the user can do about a counter used outside msrd. */
static const char *way_out(uint16_t kind, uint32_t index, const char *user)
{
	bool nmi = strstr(user, "NMI watchdog") != NULL;

	if (kind == WIRE_SLOT_FIXED && index == 1 && nmi)
		return "count cycles on a programmable counter, or set kernel.nmi_watchdog=0";
	if (kind == WIRE_SLOT_FIXED)
		return "count the event on a programmable counter, or end that perf session";
	if (nmi)
		return "ask for any free counter (index -1), or set kernel.nmi_watchdog=0";
	return "ask for any free counter (index -1), or end that perf session";
}

/* Which counter to take: the one asked for, or the first free programmable one. Counters that
 * clients hold, and counters the kernel (or any perf user outside msrd) is counting on, are
 * never taken. */
static int choose(struct client *client, const struct wire_header *header,
		  const struct wire_slot_alloc *request, uint32_t *index)
{
	struct msrd *server = client->server;
	const struct slot_table *table = &server->slots;
	uint32_t count = request->kind == WIRE_SLOT_FIXED ? table->fixed_count : table->gp_count;
	uint32_t granted = 0, outside = 0;
	const char *user = NULL;

	if (request->index >= 0) {
		*index = (uint32_t)request->index;
		if (*slots_holder(table, request->cpu, request->kind, *index) != NULL) {
			refuse(client, header, request->cpu, -EBUSY, "cpu %u %s %u is held by a client",
			       request->cpu, slots_kind_name(request->kind), *index);
			return -EBUSY;
		}
		if (!slots_used_outside(server, request->cpu, request->kind, *index))
			return 0;
		user = slots_user_outside(server, request->cpu, request->kind, *index);
		refuse(client, header, request->cpu, -EBUSY, "cpu %u %s %u is in use by %s: %s",
		       request->cpu, slots_kind_name(request->kind), *index, user,
		       way_out(request->kind, *index, user));
		return -EBUSY;
	}
	for (*index = 0; *index < count; (*index)++) {
		if (!slots_cpu_has(table, request->cpu, request->kind, *index) ||
		    !slots_granted(client, request->kind, *index))
			continue;
		granted++;
		if (*slots_holder(table, request->cpu, request->kind, *index) != NULL)
			continue;
		if (!slots_used_outside(server, request->cpu, request->kind, *index))
			return 0;
		outside++;
		user = slots_user_outside(server, request->cpu, request->kind, *index);
	}
	/* None granted at all is a policy refusal, not a full CPU: the client must not probe. */
	if (granted == 0) {
		refuse(client, header, request->cpu, -EPERM,
		       "the policy grants the registers of none of the %u programmable counters",
		       count);
		return -EPERM;
	}
	if (outside > 0) {
		refuse(client, header, request->cpu, -ENOSPC,
		       "no free programmable counter on cpu %u (%u of %u granted: %u held by "
		       "clients, %u in use by %s)", request->cpu, granted, count, granted - outside,
		       outside, user);
		return -ENOSPC;
	}
	refuse(client, header, request->cpu, -ENOSPC,
	       "no free programmable counter on cpu %u%s (%u of its %u granted, all held)",
	       request->cpu, core_type_text(server, request->cpu), granted,
	       cpu_counter_count(table, request));
	return -ENOSPC;
}

/* The shape of the request against the machine: 0 or a refusal already answered. */
static int check_alloc(struct client *client, const struct wire_header *header,
		       const struct wire_slot_alloc *request)
{
	const struct slot_table *table = &client->server->slots;
	uint32_t count = request->kind == WIRE_SLOT_FIXED ? table->fixed_count : table->gp_count;

	if (request->kind != WIRE_SLOT_PROGRAMMABLE && request->kind != WIRE_SLOT_FIXED) {
		refuse(client, header, request->cpu, -EINVAL, "unknown slot kind %u", request->kind);
		return -EINVAL;
	}
	if (request->index < WIRE_SLOT_ANY_INDEX ||
	    (request->index == WIRE_SLOT_ANY_INDEX && request->kind == WIRE_SLOT_FIXED)) {
		refuse(client, header, request->cpu, -EINVAL,
		       "index %d: a fixed counter is asked for by its number", request->index);
		return -EINVAL;
	}
	if (request->cpu >= table->cpu_count) {
		refuse(client, header, request->cpu, -ENXIO, "no CPU %u", request->cpu);
		return -ENXIO;
	}
	if (count == 0 || (request->index >= 0 &&
			   !slots_cpu_has(table, request->cpu, request->kind,
					  (uint32_t)request->index))) {
		refuse(client, header, request->cpu, -EOPNOTSUPP, "cpu %u%s has no such %s (%u of "
		       "them)", request->cpu, core_type_text(client->server, request->cpu),
		       slots_kind_name(request->kind), cpu_counter_count(table, request));
		return -EOPNOTSUPP;
	}
	if (client->slot_count >= CLIENT_MAX_SLOTS) {
		refuse(client, header, request->cpu, -ENOSPC, "this connection holds %u slots already",
		       client->slot_count);
		return -ENOSPC;
	}
	if (request->index >= 0 && !slots_granted(client, request->kind, (uint32_t)request->index)) {
		refuse(client, header, request->cpu, -EPERM,
		       "the policy does not grant the registers of %s %d", slots_kind_name(request->kind),
		       request->index);
		return -EPERM;
	}
	return 0;
}

static void reply_slot(struct client *client, const struct wire_header *header,
		       const struct slot *slot)
{
	const struct slot_table *table = &client->server->slots;
	struct wire_slot wire = {
		.id = slot->id,
		.cpu = slot->cpu,
		.kind = slot->kind,
		.index = slot->index,
		.width = slot->kind == WIRE_SLOT_FIXED ? table->fixed_width : table->gp_width,
		.counter_address = slots_table_counter(table, slot->kind, slot->index),
		.control_address = slots_table_control(table, slot->kind, slot->index),
	};
	struct wire_writer writer;
	uint8_t *space = dispatch_reply_begin(client, WIRE_SLOT_SIZE, &writer);

	if (space == NULL)
		return;
	wire_put_slot(&writer, &wire);
	dispatch_reply_end(client, space, header, &writer, -1);
}

void slots_handle_alloc(struct client *client, const struct wire_header *header,
			const uint8_t *payload, size_t length)
{
	struct wire_slot_alloc request;
	struct slot *slot;
	uint32_t index;
	int status = wire_get_slot_alloc(payload, length, &request);

	if (status == -EBADMSG) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (status < 0) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "reserved fields must be 0");
		return;
	}
	if (check_alloc(client, header, &request) < 0 || choose(client, header, &request, &index) < 0)
		return;
	slot = calloc(1, sizeof(*slot));
	if (slot == NULL) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_NO_MEMORY,
				   "no memory for a slot");
		return;
	}
	*slot = (struct slot){ .owner = client, .id = ++client->next_slot_id, .cpu = request.cpu,
			       .kind = request.kind, .index = (uint16_t)index,
			       .owner_number = client->number, .owner_uid = client->uid,
			       .owner_pid = client->pid };
	status = slots_take(client, slot);
	if (status < 0) {
		free(slot);
		client_reply_error(client, header->op, header->request_id,
				   wire_status_from_errno(status), "cpu %u %s %u: %s", request.cpu,
				   slots_kind_name(request.kind), index, strerror(-status));
		return;
	}
	log_info("client %u (uid %u pid %d) took cpu %u %s %u (slot %u)", client->number,
		 (unsigned)client->uid, (int)client->pid, slot->cpu, slots_kind_name(slot->kind),
		 slot->index, slot->id);
	reply_slot(client, header, slot);
}

/* ---- SLOT_PROGRAM ---- */

/* msr-safe applies its own allowlist to every write and drops the bits it lacks without an
 * error: the slot would count something else and later look reprogrammed. Read the control
 * back; bits that did not take are refused by name (-EACCES) and the register restored. */
static int check_not_masked(struct msrd *server, struct slot *slot, uint32_t address,
			    uint64_t proposed, char *reason, size_t size)
{
	uint64_t now, lost;
	int status;

	if (backend_kind(server->backend) != BACKEND_MSR_SAFE)
		return 0;
	status = slots_read_register(server, slot->cpu, address, &now);
	if (status < 0) {
		snprintf(reason, size, "reading back MSR 0x%x: %s", address, strerror(-status));
		return status;
	}
	lost = now ^ proposed;
	if (lost == 0)
		return 0;
	slots_write_control(server, slot, slot->config, slot->enabled);
	snprintf(reason, size, "msr-safe dropped bits 0x%llx of MSR 0x%x: the policy grants them, "
		 "the site's msr_allowlist lacks them", (unsigned long long)lost, address);
	log_warnx("slots: %s", reason);
	return -EACCES;
}

static int program(struct client *client, struct slot *slot, uint64_t config, char *reason,
		   size_t size)
{
	struct msrd *server = client->server;
	uint32_t address = slots_table_control(&server->slots, slot->kind, slot->index);
	uint64_t current, proposed;
	int status;

	if (slot->kind == WIRE_SLOT_FIXED && config > FIXED_FIELD_MASK) {
		snprintf(reason, size, "a fixed counter's control is 4 bits, not 0x%llx",
			 (unsigned long long)config);
		return -EINVAL;
	}
	if (slot->kind != WIRE_SLOT_FIXED)
		config &= ~PERFEVTSEL_EN;
	status = slots_read_register(server, slot->cpu, address, &current);
	if (status < 0) {
		snprintf(reason, size, "reading MSR 0x%x: %s", address, strerror(-status));
		return status;
	}
	if (slot->kind == WIRE_SLOT_FIXED)
		proposed = (current & ~(FIXED_FIELD_MASK << slots_field_shift(slot->index))) |
			   config << slots_field_shift(slot->index);
	else
		proposed = config | (slot->enabled ? PERFEVTSEL_EN : 0);
	status = policy_allows_write(client->grant, address, current, proposed);
	if (status < 0) {
		snprintf(reason, size, "MSR 0x%x: 0x%llx changes bits outside the write mask 0x%llx",
			 address, (unsigned long long)proposed,
			 (unsigned long long)policy_write_mask(client->grant, address));
		return status;
	}
	status = slots_write_control(server, slot, config, slot->enabled);
	if (status < 0) {
		snprintf(reason, size, "the CPU refused 0x%llx in MSR 0x%x", (unsigned long long)config,
			 address);
		return status;
	}
	status = check_not_masked(server, slot, address, proposed, reason, size);
	if (status < 0)
		return status;
	slot->config = config;
	return 0;
}

static void reply_unknown_slot(struct client *client, const struct wire_header *header,
			       uint32_t id)
{
	if (slots_is_stale(client, id)) {
		dispatch_log_refusal(client, header->op, 0, 0,
				     "slot released by a policy reload");
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_STALE,
				   "slot %u was released when the policy was reloaded: the new "
				   "policy does not grant its registers", id);
		return;
	}
	dispatch_log_refusal(client, header->op, 0, 0, "no such slot on this connection");
	client_reply_error(client, header->op, header->request_id, WIRE_STATUS_NOT_FOUND,
			   "no slot %u on this connection", id);
}

void slots_handle_program(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length)
{
	struct wire_slot_program request;
	struct slot *slot;
	char reason[200];
	int status = wire_get_slot_program(payload, length, &request);

	if (status == -EBADMSG) {
		dispatch_malformed(client, header, length);
		return;
	}
	slot = status == 0 ? slots_find(client, request.id) : NULL;
	if (status < 0 || slot == NULL) {
		if (status < 0)
			client_reply_error(client, header->op, header->request_id,
					   WIRE_STATUS_INVALID, "reserved fields must be 0");
		else
			reply_unknown_slot(client, header, request.id);
		return;
	}
	status = slots_check_programming(client->server, slot, reason, sizeof(reason));
	if (status == 0)
		status = program(client, slot, request.config, reason, sizeof(reason));
	if (status < 0) {
		if (status == -EACCES || status == -EPERM)
			dispatch_log_refusal(client, header->op, slot->cpu,
					     slots_table_control(&client->server->slots, slot->kind,
							     slot->index),
					     reason);
		client_reply_error(client, header->op, header->request_id,
				   wire_status_from_errno(status), "%s", reason);
		return;
	}
	dispatch_reply_empty(client, header);
}

/* ---- SLOT_CONTROL and SLOT_READ ---- */

/* Decode the ids and find every slot; 0, or a refusal already answered. */
static int find_all(struct client *client, const struct wire_header *header,
		    const uint8_t *payload, size_t length, struct wire_slot_ids *ids,
		    struct slot **slots)
{
	int status = wire_get_slot_ids(payload, length, ids);

	if (status == -EBADMSG) {
		dispatch_malformed(client, header, length);
		return status;
	}
	if (status < 0) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "1..%u slot ids, reserved fields 0", WIRE_MAX_SLOT_IDS);
		return status;
	}
	for (uint32_t i = 0; i < ids->count; i++) {
		char why[200];
		slots[i] = slots_find(client, ids->ids[i]);
		if (slots[i] == NULL) {
			reply_unknown_slot(client, header, ids->ids[i]);
			return -ENOENT;
		}
		/* A counter someone else reprogrammed is reported lost, never read or driven. */
		status = slots_check_programming(client->server, slots[i], why, sizeof(why));
		if (status < 0) {
			client_reply_error(client, header->op, header->request_id,
					   wire_status_from_errno(status), "%s", why);
			return status;
		}
	}
	return 0;
}

/* The GLOBAL_CTRL bits of the slots on `cpu` (those enabled, when only_enabled). */
static uint64_t bits_on_cpu(struct slot *const *slots, uint32_t count, uint32_t cpu,
			    bool only_enabled)
{
	uint64_t bits = 0;

	for (uint32_t i = 0; i < count; i++) {
		if (slots[i]->cpu == cpu && (slots[i]->enabled || !only_enabled))
			bits |= slots_global_bit(slots[i]->kind, slots[i]->index);
	}
	return bits;
}

static bool first_on_cpu(struct slot *const *slots, uint32_t index)
{
	for (uint32_t i = 0; i < index; i++) {
		if (slots[i]->cpu == slots[index]->cpu)
			return false;
	}
	return true;
}

/* One GLOBAL_CTRL write per CPU for the slots' bits (when the machine has it). */
static int set_global_all(struct msrd *server, struct slot *const *slots, uint32_t count,
			  bool only_enabled, bool on)
{
	int status = 0;

	if (!server->slots.has_global)
		return 0;
	for (uint32_t i = 0; i < count && status == 0; i++) {
		uint64_t bits;
		if (!first_on_cpu(slots, i))
			continue;
		bits = bits_on_cpu(slots, count, slots[i]->cpu, only_enabled);
		if (bits != 0)
			status = slots_update_bits(server, slots[i]->cpu, server->slots.global_address, bits,
					     on ? bits : 0);
	}
	return status;
}

/* EN of every programmable slot, the field of every fixed one (slots_write_control). */
static int set_enable_bits(struct msrd *server, struct slot *const *slots, uint32_t count,
			   bool only_enabled, bool on)
{
	int status = 0;

	for (uint32_t i = 0; i < count && status == 0; i++) {
		if (only_enabled && !slots[i]->enabled)
			continue;
		status = slots_write_control(server, slots[i], slots[i]->config, on);
	}
	return status;
}

static int control(struct msrd *server, struct slot *const *slots, uint32_t count,
		   uint16_t action)
{
	int status = 0;

	switch (action) {
	case WIRE_SLOT_ENABLE:
		status = set_enable_bits(server, slots, count, false, true);
		if (status == 0)
			status = set_global_all(server, slots, count, false, true);
		break;
	case WIRE_SLOT_DISABLE:
		status = set_global_all(server, slots, count, false, false);
		if (status == 0)
			status = set_enable_bits(server, slots, count, false, false);
		break;
	case WIRE_SLOT_RESET:
		for (uint32_t i = 0; i < count && status == 0; i++) {
			status = slots_write_counter(server, slots[i], 0);
			if (status == 0) /* msrd's own zero: the count goes on from it */
				slots_check_continuity(server, slots[i], 0, true, NULL, 0);
		}
		return status;
	default:
		return -EINVAL;
	}
	for (uint32_t i = 0; i < count && status == 0; i++)
		slots[i]->enabled = action == WIRE_SLOT_ENABLE;
	return status;
}

void slots_handle_control(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length)
{
	static struct wire_slot_ids ids;          /* 1 KiB: not on the stack, one thread */
	static struct slot *slots[WIRE_MAX_SLOT_IDS];
	int status;

	if (find_all(client, header, payload, length, &ids, slots) < 0)
		return;
	status = control(client->server, slots, ids.count, ids.action);
	if (status < 0) {
		client_reply_error(client, header->op, header->request_id,
				   wire_status_from_errno(status), status == -EINVAL
								  ? "unknown action %u"
								  : "the CPU refused action %u",
				   ids.action);
		return;
	}
	dispatch_reply_empty(client, header);
}

/* Stop the running ones together (one GLOBAL_CTRL write per CPU; on AMD each EN), read them
 * all, start them again. */
static int read_all(struct msrd *server, struct slot *const *slots, uint32_t count,
		    bool synchronized, uint64_t *values, char *why, size_t size)
{
	bool by_global = server->slots.has_global;
	int status = 0;

	if (synchronized)
		status = by_global ? set_global_all(server, slots, count, true, false)
				   : set_enable_bits(server, slots, count, true, false);
	for (uint32_t i = 0; i < count && status == 0; i++) {
		struct slot *slot = slots[i];
		uint8_t width = slot->kind == WIRE_SLOT_FIXED ? server->slots.fixed_width
							      : server->slots.gp_width;
		status = slots_read_register(server, slot->cpu,
				       slots_table_counter(&server->slots, slot->kind, slot->index),
				       &values[i]);
		values[i] &= slots_width_mask(width);
		if (status == 0)
			status = slots_check_continuity(server, slot, values[i], false, why, size);
	}
	if (synchronized) {
		int restart = by_global ? set_global_all(server, slots, count, true, true)
					: set_enable_bits(server, slots, count, true, true);
		status = status < 0 ? status : restart;
	}
	return status;
}

void slots_handle_read(struct client *client, const struct wire_header *header,
		       const uint8_t *payload, size_t length)
{
	static struct wire_slot_ids ids;
	static struct slot *slots[WIRE_MAX_SLOT_IDS];
	static uint64_t values[WIRE_MAX_SLOT_IDS];
	char why[200] = "";
	struct wire_writer writer;
	uint8_t *space;
	int status;

	if (find_all(client, header, payload, length, &ids, slots) < 0)
		return;
	if ((ids.action & ~WIRE_SLOT_READ_SYNCHRONIZED) != 0) {
		client_reply_error(client, header->op, header->request_id, WIRE_STATUS_INVALID,
				   "unknown SLOT_READ flags 0x%x", ids.action);
		return;
	}
	status = read_all(client->server, slots, ids.count,
			  (ids.action & WIRE_SLOT_READ_SYNCHRONIZED) != 0, values, why, sizeof(why));
	if (status == -EIDRM) {
		client_reply_error(client, header->op, header->request_id,
				   wire_status_from_errno(status), "%s", why);
		return;
	}
	if (status < 0) {
		client_reply_error(client, header->op, header->request_id,
				   wire_status_from_errno(status), "reading counters: %s",
				   strerror(-status));
		return;
	}
	space = dispatch_reply_begin(client, WIRE_SLOT_IDS_HEADER_SIZE + ids.count * sizeof(uint64_t),
				     &writer);
	if (space == NULL)
		return;
	wire_put_slot_values(&writer, values, ids.count);
	dispatch_reply_end(client, space, header, &writer, -1);
}

/* ---- SLOT_FREE ---- */

void slots_handle_free(struct client *client, const struct wire_header *header,
		       const uint8_t *payload, size_t length)
{
	struct slot *slot;
	uint32_t id;

	if (wire_get_u32_payload(payload, length, &id) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	slot = slots_find(client, id);
	if (slot == NULL) {
		reply_unknown_slot(client, header, id);
		slots_forget_stale(client, id); /* told once on free; the id is then simply unknown */
		return;
	}
	slots_release(client, slot, "freed");
	dispatch_reply_empty(client, header);
}
