/*
 * server/slots.c — counter arbitration: msrd owns every programmable and fixed counter of every
 * CPU and lends them out as slots, so two clients never program the same counter.
 *
 * A slot is held by one connection. Before it is handed out, the values of its registers (the
 * counter, its event select or its field of IA32_FIXED_CTR_CTRL, its bit of
 * IA32_PERF_GLOBAL_CTRL) are remembered; freeing it (or its holder disconnecting or dying) stops
 * it and writes them back, so the hardware is returned the way msrd found it. The shared control
 * registers are read-modify-written for the bits of the slot only. A raw write by another
 * connection to a slot's registers, or to its bits of the shared ones, is refused (EBUSY) in
 * msr_exec.c through slots_write_conflict.
 *
 * Programming goes through the policy like a WRITE of the event select would (write mask); taking
 * a slot needs read and write grants for its registers. Register accesses are synchronous
 * backend calls: a handful per request, on the loop's thread.
 */
#include "server/server.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define INTEL_MAX_GP 8u       /* IA32_PMC0..7 / PERFEVTSEL0..7 */
#define INTEL_MAX_FIXED 4u    /* IA32_FIXED_CTR0..3 */
#define AMD_CORE_COUNTERS 6u  /* PerfCtrExtCore, family 17h and later */
#define AMD_COUNTER_WIDTH 48u
#define FIXED_FIELD_MASK 0xFull

/* ---- the machine's counters ---- */

static bool machine_is_amd(const struct machine_info *machine)
{
	return strcmp(machine->vendor, "AuthenticAMD") == 0 ||
	       strcmp(machine->vendor, "HygonGenuine") == 0;
}

int slots_init(struct slot_table *table, const struct machine_info *machine)
{
	uint32_t eax = machine->cpuid_0a[0];
	uint32_t edx = machine->cpuid_0a[3];
	uint32_t version = CPUID_0A_EAX_VERSION(eax);
	size_t cells;

	memset(table, 0, sizeof(*table));
	table->cpu_count = machine->cpu_count;
	table->amd = machine_is_amd(machine);
	if (table->amd && machine->family >= 0x17) {
		table->gp_count = AMD_CORE_COUNTERS;
		table->gp_width = AMD_COUNTER_WIDTH;
		/* PerfMonV2: PERF_CTL.EN alone does not count while the global bit is clear. */
		table->has_global = machine->amd_perfmon_v2;
		table->global_address = table->has_global ? MSR_AMD_PERF_CNTR_GLOBAL_CTL : 0;
	} else if (!table->amd && version >= 1) {
		table->gp_count = CPUID_0A_EAX_GP_COUNTERS(eax);
		table->gp_width = (uint8_t)CPUID_0A_EAX_GP_WIDTH(eax);
		table->has_global = version >= 2;
		table->global_address = table->has_global ? MSR_IA32_PERF_GLOBAL_CTRL : 0;
		if (version >= 2) {
			table->fixed_count = CPUID_0A_EDX_FIXED_COUNTERS(edx);
			table->fixed_width = (uint8_t)CPUID_0A_EDX_FIXED_WIDTH(edx);
		}
	}
	if (table->gp_count > INTEL_MAX_GP)
		table->gp_count = INTEL_MAX_GP;
	if (table->fixed_count > INTEL_MAX_FIXED)
		table->fixed_count = INTEL_MAX_FIXED;
	cells = (size_t)table->cpu_count * (table->gp_count + table->fixed_count);
	if (cells == 0)
		return 0;
	table->holders = calloc(cells, sizeof(*table->holders));
	return table->holders != NULL ? 0 : -ENOMEM;
}

void slots_free(struct slot_table *table)
{
	free(table->holders);
	memset(table, 0, sizeof(*table));
}

/* Slots whose deferred release never ran (msrd is exiting): just their memory. */
void slots_free_deferred(struct msrd *server)
{
	while (server->slot_releases != NULL) {
		struct slot *slot = server->slot_releases;
		server->slot_releases = slot->next;
		free(slot);
	}
}

static struct slot **holder_cell(const struct slot_table *table, uint32_t cpu, uint16_t kind,
				 uint32_t index)
{
	size_t per_cpu = table->gp_count + table->fixed_count;
	size_t offset = kind == WIRE_SLOT_FIXED ? table->gp_count + index : index;

	return &table->holders[(size_t)cpu * per_cpu + offset];
}

static uint32_t counter_address(const struct slot_table *table, uint16_t kind, uint32_t index)
{
	if (table->amd)
		return MSR_AMD_PERF_CTR0 + 2 * index;
	return kind == WIRE_SLOT_FIXED ? MSR_IA32_FIXED_CTR0 + index : MSR_IA32_PMC0 + index;
}

static uint32_t control_address(const struct slot_table *table, uint16_t kind, uint32_t index)
{
	if (table->amd)
		return MSR_AMD_PERF_CTL0 + 2 * index;
	return kind == WIRE_SLOT_FIXED ? MSR_IA32_FIXED_CTR_CTRL : MSR_IA32_PERFEVTSEL0 + index;
}

static uint64_t global_bit(uint16_t kind, uint32_t index)
{
	return kind == WIRE_SLOT_FIXED ? 1ull << (GLOBAL_CTRL_FIXED_SHIFT + index) : 1ull << index;
}

static uint32_t field_shift(uint32_t index)
{
	return index * FIXED_CTR_CTRL_BITS_PER_COUNTER;
}

static uint64_t width_mask(uint8_t width)
{
	return width == 0 || width >= 64 ? UINT64_MAX : (1ull << width) - 1;
}

uint32_t slots_counter_address(const struct msrd *server, const struct slot *slot)
{
	return counter_address(&server->slots, slot->kind, slot->index);
}

/* Which counter a register belongs to as its own (counter, alias, event select): true and
 * (kind, index) set, or false for any other register. */
static bool own_register(const struct slot_table *table, uint32_t address, uint16_t *kind,
			 uint32_t *index)
{
	*kind = WIRE_SLOT_PROGRAMMABLE;
	if (table->amd) {
		if (address >= MSR_AMD_PERF_CTL0 && address < MSR_AMD_PERF_CTL0 + 2 * table->gp_count) {
			*index = (address - MSR_AMD_PERF_CTL0) / 2;
			return true;
		}
		/* The legacy PERF_CTL0..3 (0xC0010000..3) and PERF_CTR0..3 (0xC0010004..7). */
		if (address >= MSR_AMD_PERF_LEGACY_CTL0 && address < MSR_AMD_PERF_LEGACY_CTL0 + 8) {
			*index = (address - MSR_AMD_PERF_LEGACY_CTL0) % 4;
			return *index < table->gp_count;
		}
		return false;
	}
	static const uint32_t gp_bases[] = { MSR_IA32_PMC0, MSR_IA32_A_PMC0, MSR_IA32_PERFEVTSEL0 };
	for (size_t i = 0; i < sizeof(gp_bases) / sizeof(gp_bases[0]); i++) {
		if (address >= gp_bases[i] && address < gp_bases[i] + table->gp_count) {
			*index = address - gp_bases[i];
			return true;
		}
	}
	if (address >= MSR_IA32_FIXED_CTR0 && address < MSR_IA32_FIXED_CTR0 + table->fixed_count) {
		*kind = WIRE_SLOT_FIXED;
		*index = address - MSR_IA32_FIXED_CTR0;
		return true;
	}
	return false;
}

uint64_t slots_counter_mask(const struct msrd *server, uint32_t address)
{
	const struct slot_table *table = &server->slots;
	uint16_t kind;
	uint32_t index;

	if (!own_register(table, address, &kind, &index))
		return UINT64_MAX;
	return width_mask(kind == WIRE_SLOT_FIXED ? table->fixed_width : table->gp_width);
}

/* Whether another connection holds the counter. One the asking connection holds itself is
 * noted as written raw: msrd no longer knows what its registers should hold, so its read-time
 * check (slots_check_programming) stands down for it. */
static bool held_by_other(const struct slot_table *table, const struct client *client,
			  uint32_t cpu, uint16_t kind, uint32_t index)
{
	struct slot *holder = *holder_cell(table, cpu, kind, index);

	if (holder != NULL && holder->owner == client)
		holder->written_raw = true;
	return holder != NULL && holder->owner != client;
}

int slots_write_conflict(const struct msrd *server, const struct client *client, uint32_t cpu,
			 uint32_t address, uint64_t current, uint64_t proposed)
{
	const struct slot_table *table = &server->slots;
	uint64_t changed = current ^ proposed;
	uint16_t kind;
	uint32_t index;

	if (cpu >= table->cpu_count || table->holders == NULL)
		return 0;
	if (own_register(table, address, &kind, &index))
		return held_by_other(table, client, cpu, kind, index) ? -EBUSY : 0;
	/* Intel's IA32_PERF_GLOBAL_CTRL or AMD's PerfCntrGlobalCtl: a holder's bit is its own. */
	if (table->has_global && address == table->global_address) {
		for (uint32_t i = 0; i < table->gp_count + table->fixed_count; i++) {
			uint16_t each = i < table->gp_count ? WIRE_SLOT_PROGRAMMABLE : WIRE_SLOT_FIXED;
			uint32_t at = i < table->gp_count ? i : i - table->gp_count;
			if ((changed & global_bit(each, at)) != 0 &&
			    held_by_other(table, client, cpu, each, at))
				return -EBUSY;
		}
	}
	if (!table->amd && address == MSR_IA32_FIXED_CTR_CTRL) {
		for (uint32_t i = 0; i < table->fixed_count; i++) {
			if (((changed >> field_shift(i)) & FIXED_FIELD_MASK) != 0 &&
			    held_by_other(table, client, cpu, WIRE_SLOT_FIXED, i))
				return -EBUSY;
		}
	}
	return 0;
}

/* ---- register access for one slot ---- */

static int read_register(struct msrd *server, uint32_t cpu, uint32_t address, uint64_t *value)
{
	return backend_read(server->backend, cpu, address, value);
}

static int write_register(struct msrd *server, uint32_t cpu, uint32_t address, uint64_t value)
{
	int status = journal_note_current(server, cpu, address);

	if (status < 0)
		return status;
	return backend_write(server->backend, cpu, address, value);
}

/* Set or clear `bits` of a shared register, leaving the others as they are. */
static int update_bits(struct msrd *server, uint32_t cpu, uint32_t address, uint64_t bits,
		       uint64_t value)
{
	uint64_t current;
	int status = read_register(server, cpu, address, &current);

	if (status < 0)
		return status;
	if (((current ^ value) & bits) == 0)
		return 0;
	return write_register(server, cpu, address, (current & ~bits) | (value & bits));
}

static int set_global(struct msrd *server, const struct slot *slot, bool on)
{
	uint64_t bit = global_bit(slot->kind, slot->index);

	if (!server->slots.has_global)
		return 0;
	return update_bits(server, slot->cpu, server->slots.global_address, bit, on ? bit : 0);
}

/* The slot's own control: its event select (EN from `enabled`), or its fixed field. */
static int write_control(struct msrd *server, const struct slot *slot, uint64_t config,
			 bool enabled)
{
	uint32_t address = control_address(&server->slots, slot->kind, slot->index);

	if (slot->kind == WIRE_SLOT_FIXED)
		return update_bits(server, slot->cpu, address, FIXED_FIELD_MASK << field_shift(slot->index),
				   config << field_shift(slot->index));
	return write_register(server, slot->cpu, address, config | (enabled ? PERFEVTSEL_EN : 0));
}

/* A programmable Intel counter written through IA32_PMCx keeps only bits 31:0, sign-extended:
 * where the CPU has the full-width aliases (PERF_CAPABILITIES bit 13) msrd writes through
 * IA32_A_PMCx, so a restored count keeps its upper bits. */
static uint32_t counter_write_address(const struct msrd *server, const struct slot *slot)
{
	const struct slot_table *table = &server->slots;

	if (!table->amd && slot->kind == WIRE_SLOT_PROGRAMMABLE &&
	    server->machine.pmc_full_width_writes)
		return MSR_IA32_A_PMC0 + slot->index;
	return counter_address(table, slot->kind, slot->index);
}

static int write_counter(struct msrd *server, const struct slot *slot, uint64_t value)
{
	return write_register(server, slot->cpu, counter_write_address(server, slot), value);
}

/* What a counter holds after `value` is written through its legacy address. */
static uint64_t legacy_write_result(uint64_t value, uint8_t width)
{
	return (uint64_t)(int64_t)(int32_t)(uint32_t)value & width_mask(width);
}

static int remember(struct msrd *server, struct slot *slot)
{
	uint32_t control = control_address(&server->slots, slot->kind, slot->index);
	uint64_t value;
	int status = read_register(server, slot->cpu,
				   counter_address(&server->slots, slot->kind, slot->index),
				   &slot->saved_counter);

	if (status == 0)
		status = read_register(server, slot->cpu, control, &value);
	if (status < 0)
		return status;
	slot->saved_control = slot->kind == WIRE_SLOT_FIXED
				      ? (value >> field_shift(slot->index)) & FIXED_FIELD_MASK
				      : value;
	if (!server->slots.has_global)
		return 0;
	status = read_register(server, slot->cpu, server->slots.global_address, &value);
	slot->saved_global_bit = (value & global_bit(slot->kind, slot->index)) != 0;
	return status;
}

/* Stopped, nothing selected, counter 0. */
static int clear(struct msrd *server, const struct slot *slot)
{
	int status = set_global(server, slot, false);

	if (status == 0)
		status = write_control(server, slot, 0, false);
	if (status == 0)
		status = write_counter(server, slot, 0);
	return status;
}

static void keep_first(int *status, int next)
{
	if (*status == 0)
		*status = next;
}

/* Back to what the registers held before the slot was taken: stopped first, then the count,
 * so a counter that was running before resumes from its own value, then its selection, then
 * its global bit. */
static int restore(struct msrd *server, const struct slot *slot)
{
	bool fixed = slot->kind == WIRE_SLOT_FIXED;
	uint64_t selection = fixed ? slot->saved_control : slot->saved_control & ~PERFEVTSEL_EN;
	bool was_enabled = !fixed && (slot->saved_control & PERFEVTSEL_EN) != 0;
	int status = clear(server, slot);
	uint32_t written_at = counter_write_address(server, slot);

	if (written_at == counter_address(&server->slots, slot->kind, slot->index) &&
	    !server->slots.amd && slot->kind == WIRE_SLOT_PROGRAMMABLE &&
	    legacy_write_result(slot->saved_counter, server->slots.gp_width) != slot->saved_counter)
		log_warnx("cpu %u counter %u: 0x%llx cannot be written back whole through MSR 0x%x "
			  "(no full-width writes on this CPU): restored 0x%llx", slot->cpu,
			  slot->index, (unsigned long long)slot->saved_counter, written_at,
			  (unsigned long long)legacy_write_result(slot->saved_counter,
								  server->slots.gp_width));
	keep_first(&status, write_counter(server, slot, slot->saved_counter));
	keep_first(&status, write_control(server, slot, selection, was_enabled));
	if (server->slots.has_global)
		keep_first(&status, set_global(server, slot, slot->saved_global_bit));
	return status;
}

/* ---- who holds what ---- */

struct slot *slots_find(const struct client *client, uint32_t id)
{
	for (struct slot *slot = client->slots; slot != NULL; slot = slot->next) {
		if (slot->id == id)
			return slot;
	}
	return NULL;
}

static const char *kind_name(uint16_t kind)
{
	return kind == WIRE_SLOT_FIXED ? "fixed counter" : "counter";
}

/* Restore a slot's registers, log it, and free it. Its holder is the client (still linked) or,
 * for a deferred release, the identity kept in the slot. */
static void release_now(struct msrd *server, struct slot *slot, const char *why)
{
	/* A counter someone outside msrd reprogrammed is theirs now: writing msrd's saved values
	 * back would break their session. */
	int status = slot->lost ? 0 : restore(server, slot);

	if (status < 0) {
		server->restore_incomplete = true;
		log_warn_errno(status, "client %u: restoring cpu %u %s %u", slot->owner_number,
			       slot->cpu, kind_name(slot->kind), slot->index);
	}
	log_info("client %u (uid %u pid %d) released cpu %u %s %u (slot %u, %s)",
		 slot->owner_number, (unsigned)slot->owner_uid, (int)slot->owner_pid, slot->cpu,
		 kind_name(slot->kind), slot->index, slot->id, why);
	*holder_cell(&server->slots, slot->cpu, slot->kind, slot->index) = NULL;
	free(slot);
}

/* Take a slot from its client. Its registers are written back at once, unless an asynchronous
 * write batch is between its check and its run (msr backend): then the release waits for it
 * (slots_run_deferred), the counter meanwhile held by nobody's connection, so no one else can
 * take it or write its registers before they are restored. */
static void release(struct client *client, struct slot *slot, const char *why)
{
	struct msrd *server = client->server;

	for (struct slot **link = &client->slots; *link != NULL; link = &(*link)->next) {
		if (*link == slot) {
			*link = slot->next;
			break;
		}
	}
	client->slot_count--;
	slot->owner = NULL;
	if (!msr_exec_write_locked(server)) {
		release_now(server, slot, why);
		return;
	}
	slot->release_why = why;
	slot->next = server->slot_releases;
	server->slot_releases = slot;
}

void slots_run_deferred(struct msrd *server)
{
	while (server->slot_releases != NULL) {
		struct slot *slot = server->slot_releases;
		server->slot_releases = slot->next;
		release_now(server, slot, slot->release_why);
	}
}

void slots_release_client(struct client *client)
{
	while (client->slots != NULL)
		release(client, client->slots, "disconnected");
}

/* ---- slots a policy reload took away ---- */

bool slots_is_stale(const struct client *client, uint32_t id)
{
	for (uint32_t i = 0; i < client->stale_slot_count; i++) {
		if (client->stale_slots[i] == id)
			return true;
	}
	return false;
}

static void forget_stale(struct client *client, uint32_t id)
{
	for (uint32_t i = 0; i < client->stale_slot_count; i++) {
		if (client->stale_slots[i] == id) {
			client->stale_slots[i] = client->stale_slots[--client->stale_slot_count];
			return;
		}
	}
}

/* Ids are never reused on a connection, so a stale one cannot be confused with a live one.
 * Without memory the id just becomes unknown (NOT_FOUND). */
static void remember_stale(struct client *client, uint32_t id)
{
	uint32_t *bigger = realloc(client->stale_slots,
				   (client->stale_slot_count + 1) * sizeof(*bigger));

	if (bigger == NULL)
		return;
	client->stale_slots = bigger;
	client->stale_slots[client->stale_slot_count++] = id;
}

static bool grants_slot(const struct client *client, uint16_t kind, uint32_t index);

void slots_policy_reloaded(struct msrd *server)
{
	for (struct client *client = server->clients; client != NULL; client = client->next) {
		struct slot *next;
		for (struct slot *slot = client->slots; slot != NULL; slot = next) {
			next = slot->next;
			if (grants_slot(client, slot->kind, slot->index))
				continue;
			log_notice("client %u (uid %u pid %d): slot %u (cpu %u %s %u) released: the "
				   "reloaded policy does not grant its registers",
				   client->number, (unsigned)client->uid, (int)client->pid, slot->id,
				   slot->cpu, kind_name(slot->kind), slot->index);
			remember_stale(client, slot->id);
			release(client, slot, "policy reloaded");
		}
	}
}

/* ---- SLOT_ALLOC ---- */

/* A slot needs read and write grants for its registers: the counter (any write), its event
 * select with EN, and its bits of the shared control registers. */
static bool grants_slot(const struct client *client, uint16_t kind, uint32_t index)
{
	const struct slot_table *table = &client->server->slots;
	const struct policy_grant *grant = client->grant;
	uint32_t counter = counter_address(table, kind, index);
	uint32_t control = control_address(table, kind, index);
	uint64_t control_bits = kind == WIRE_SLOT_FIXED ? FIXED_FIELD_MASK << field_shift(index)
							: PERFEVTSEL_EN;

	if (!policy_allows_read(grant, counter) || policy_write_mask(grant, counter) == 0)
		return false;
	if (!policy_allows_read(grant, control) ||
	    (policy_write_mask(grant, control) & control_bits) == 0)
		return false;
	if (!table->has_global)
		return true;
	return policy_allows_read(grant, table->global_address) &&
	       (policy_write_mask(grant, table->global_address) & global_bit(kind, index)) != 0;
}

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

/* ---- counters used outside msrd ---- */

/* Whether a counter msrd does not hold is counting for someone else: its enable bit
 * (PERFEVTSELx / PERF_CTL EN; a fixed counter's OS or USR bits in IA32_FIXED_CTR_CTRL together
 * with its IA32_PERF_GLOBAL_CTRL bit). The kernel's perf and NMI watchdog program the
 * registers directly, so they are the only sign. A register that cannot be read counts as free:
 * the take then fails on it anyway. */
static bool used_outside(struct msrd *server, uint32_t cpu, uint16_t kind, uint32_t index)
{
	const struct slot_table *table = &server->slots;
	uint64_t control, global = UINT64_MAX;

	if (read_register(server, cpu, control_address(table, kind, index), &control) < 0)
		return false;
	if (kind != WIRE_SLOT_FIXED)
		return (control & PERFEVTSEL_EN) != 0;
	if (((control >> field_shift(index)) & (FIXED_CTR_CTRL_OS | FIXED_CTR_CTRL_USR)) == 0)
		return false;
	if (table->has_global && read_register(server, cpu, table->global_address, &global) < 0)
		return false;
	return (global & global_bit(kind, index)) != 0;
}

/* Who: the NMI watchdog counts cycles (fixed counter 1, or a programmable counter with a PMI),
 * anything else is some perf user. */
static const char *user_outside(struct msrd *server, uint32_t cpu, uint16_t kind, uint32_t index)
{
	const struct slot_table *table = &server->slots;
	uint64_t control = 0;

	if (!server->machine.nmi_watchdog)
		return "the kernel's perf (another PMU user outside msrd)";
	if (kind == WIRE_SLOT_FIXED)
		return index == 1 ? "the kernel (NMI watchdog)"
				  : "the kernel's perf (another PMU user outside msrd)";
	read_register(server, cpu, control_address(table, kind, index), &control);
	return (control & PERFEVTSEL_INT) ? "the kernel (NMI watchdog)"
					  : "the kernel's perf (another PMU user outside msrd)";
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

int slots_check_programming(struct msrd *server, struct slot *slot, char *why, size_t size)
{
	const struct slot_table *table = &server->slots;
	uint32_t address = control_address(table, slot->kind, slot->index);
	uint64_t control, expected, global;
	bool in_place;

	if (slot->written_raw)
		return 0; /* its holder programs it with plain writes: nothing to compare with */
	if (!slot->lost) {
		if (read_register(server, slot->cpu, address, &control) < 0)
			return 0; /* the read of the counter itself will say what is wrong */
		if (slot->kind == WIRE_SLOT_FIXED) {
			control = (control >> field_shift(slot->index)) & FIXED_FIELD_MASK;
			expected = slot->config;
		} else {
			expected = slot->config | (slot->enabled ? PERFEVTSEL_EN : 0);
		}
		in_place = control == expected;
		if (in_place && table->has_global &&
		    read_register(server, slot->cpu, table->global_address, &global) == 0)
			in_place = ((global & global_bit(slot->kind, slot->index)) != 0) ==
				   slot->enabled;
		if (in_place)
			return 0;
		slot->lost = true;
		/* Theirs now, also for a restart after a crash: the counter and its own event
		 * select (the shared control registers stay journalled for the other slots). */
		journal_forget(server, slot->cpu, counter_address(table, slot->kind, slot->index));
		if (slot->kind != WIRE_SLOT_FIXED)
			journal_forget(server, slot->cpu, address);
		log_warnx("client %u (uid %u pid %d): cpu %u %s %u (slot %u) was reprogrammed "
			  "outside msrd (MSR %#x is %#llx, msrd left %#llx): its count is lost",
			  slot->owner_number, (unsigned)slot->owner_uid, (int)slot->owner_pid,
			  slot->cpu, kind_name(slot->kind), slot->index, slot->id, address,
			  (unsigned long long)control, (unsigned long long)expected);
	}
	snprintf(why, size, "cpu %u %s %u (slot %u) was reprogrammed outside msrd (the kernel's "
		 "perf or NMI watchdog): its count is lost; free the slot and take another",
		 slot->cpu, kind_name(slot->kind), slot->index, slot->id);
	return -EIDRM;
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
		if (*holder_cell(table, request->cpu, request->kind, *index) != NULL) {
			refuse(client, header, request->cpu, -EBUSY, "cpu %u %s %u is held by a client",
			       request->cpu, kind_name(request->kind), *index);
			return -EBUSY;
		}
		if (!used_outside(server, request->cpu, request->kind, *index))
			return 0;
		user = user_outside(server, request->cpu, request->kind, *index);
		refuse(client, header, request->cpu, -EBUSY, "cpu %u %s %u is in use by %s: %s",
		       request->cpu, kind_name(request->kind), *index, user,
		       way_out(request->kind, *index, user));
		return -EBUSY;
	}
	for (*index = 0; *index < count; (*index)++) {
		if (!grants_slot(client, request->kind, *index))
			continue;
		granted++;
		if (*holder_cell(table, request->cpu, request->kind, *index) != NULL)
			continue;
		if (!used_outside(server, request->cpu, request->kind, *index))
			return 0;
		outside++;
		user = user_outside(server, request->cpu, request->kind, *index);
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
	       "no free programmable counter on cpu %u (%u of %u granted, all held)", request->cpu,
	       granted, count);
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
	if (count == 0 || (request->index >= 0 && (uint32_t)request->index >= count)) {
		refuse(client, header, request->cpu, -EOPNOTSUPP, "the CPU has no such %s (%u of them)",
		       kind_name(request->kind), count);
		return -EOPNOTSUPP;
	}
	if (client->slot_count >= CLIENT_MAX_SLOTS) {
		refuse(client, header, request->cpu, -ENOSPC, "this connection holds %u slots already",
		       client->slot_count);
		return -ENOSPC;
	}
	if (request->index >= 0 && !grants_slot(client, request->kind, (uint32_t)request->index)) {
		refuse(client, header, request->cpu, -EPERM,
		       "the policy does not grant the registers of %s %d", kind_name(request->kind),
		       request->index);
		return -EPERM;
	}
	return 0;
}

static int take(struct client *client, struct slot *slot)
{
	struct msrd *server = client->server;
	int status = remember(server, slot);

	if (status < 0)
		return status;
	status = clear(server, slot);
	if (status < 0) {
		restore(server, slot);
		return status;
	}
	*holder_cell(&server->slots, slot->cpu, slot->kind, slot->index) = slot;
	slot->next = client->slots;
	client->slots = slot;
	client->slot_count++;
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
		.counter_address = counter_address(table, slot->kind, slot->index),
		.control_address = control_address(table, slot->kind, slot->index),
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
	status = take(client, slot);
	if (status < 0) {
		free(slot);
		client_reply_error(client, header->op, header->request_id,
				   wire_status_from_errno(status), "cpu %u %s %u: %s", request.cpu,
				   kind_name(request.kind), index, strerror(-status));
		return;
	}
	log_info("client %u (uid %u pid %d) took cpu %u %s %u (slot %u)", client->number,
		 (unsigned)client->uid, (int)client->pid, slot->cpu, kind_name(slot->kind),
		 slot->index, slot->id);
	reply_slot(client, header, slot);
}

/* ---- SLOT_PROGRAM ---- */

static int program(struct client *client, struct slot *slot, uint64_t config, char *reason,
		   size_t size)
{
	struct msrd *server = client->server;
	uint32_t address = control_address(&server->slots, slot->kind, slot->index);
	uint64_t current, proposed;
	int status;

	if (slot->kind == WIRE_SLOT_FIXED && config > FIXED_FIELD_MASK) {
		snprintf(reason, size, "a fixed counter's control is 4 bits, not 0x%llx",
			 (unsigned long long)config);
		return -EINVAL;
	}
	if (slot->kind != WIRE_SLOT_FIXED)
		config &= ~PERFEVTSEL_EN;
	status = read_register(server, slot->cpu, address, &current);
	if (status < 0) {
		snprintf(reason, size, "reading MSR 0x%x: %s", address, strerror(-status));
		return status;
	}
	if (slot->kind == WIRE_SLOT_FIXED)
		proposed = (current & ~(FIXED_FIELD_MASK << field_shift(slot->index))) |
			   config << field_shift(slot->index);
	else
		proposed = config | (slot->enabled ? PERFEVTSEL_EN : 0);
	status = policy_allows_write(client->grant, address, current, proposed);
	if (status < 0) {
		snprintf(reason, size, "MSR 0x%x: 0x%llx changes bits outside the write mask 0x%llx",
			 address, (unsigned long long)proposed,
			 (unsigned long long)policy_write_mask(client->grant, address));
		return status;
	}
	status = write_control(server, slot, config, slot->enabled);
	if (status < 0) {
		snprintf(reason, size, "the CPU refused 0x%llx in MSR 0x%x", (unsigned long long)config,
			 address);
		return status;
	}
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
					     control_address(&client->server->slots, slot->kind,
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
			bits |= global_bit(slots[i]->kind, slots[i]->index);
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
			status = update_bits(server, slots[i]->cpu, server->slots.global_address, bits,
					     on ? bits : 0);
	}
	return status;
}

/* EN of every programmable slot (the fixed ones start and stop by their global bit only). */
static int set_enable_bits(struct msrd *server, struct slot *const *slots, uint32_t count,
			   bool only_enabled, bool on)
{
	int status = 0;

	for (uint32_t i = 0; i < count && status == 0; i++) {
		if (slots[i]->kind == WIRE_SLOT_FIXED || (only_enabled && !slots[i]->enabled))
			continue;
		status = write_control(server, slots[i], slots[i]->config, on);
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
		for (uint32_t i = 0; i < count && status == 0; i++)
			status = write_counter(server, slots[i], 0);
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
		    bool synchronized, uint64_t *values)
{
	bool by_global = server->slots.has_global;
	int status = 0;

	if (synchronized)
		status = by_global ? set_global_all(server, slots, count, true, false)
				   : set_enable_bits(server, slots, count, true, false);
	for (uint32_t i = 0; i < count && status == 0; i++) {
		const struct slot *slot = slots[i];
		uint8_t width = slot->kind == WIRE_SLOT_FIXED ? server->slots.fixed_width
							      : server->slots.gp_width;
		status = read_register(server, slot->cpu,
				       counter_address(&server->slots, slot->kind, slot->index),
				       &values[i]);
		values[i] &= width_mask(width);
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
			  (ids.action & WIRE_SLOT_READ_SYNCHRONIZED) != 0, values);
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
		forget_stale(client, id); /* told once on free; the id is then simply unknown */
		return;
	}
	release(client, slot, "freed");
	dispatch_reply_empty(client, header);
}
