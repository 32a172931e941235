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
 *
 * This file is the mechanism: the table's layout, who holds what, remembering and restoring a
 * slot's registers, and the guard against raw writes to them (slots_write_conflict) and against
 * counters reprogrammed outside msrd (slots_check_programming). The SLOT_* requests that use it
 * are slot_requests.c.
 */
#include "server/slots_internal.h"

#include "hw/core_type.h"
#include "hw/counter_wrap.h"
#include "hw/vendor.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define INTEL_MAX_GP 8u       /* IA32_PMC0..7 / PERFEVTSEL0..7 */
#define INTEL_MAX_FIXED 4u    /* IA32_FIXED_CTR0..3 */
#define AMD_CORE_COUNTERS 6u  /* PerfCtrExtCore, family 17h and later */
#define AMD_COUNTER_WIDTH 48u

/* ---- the machine's counters ---- */

/* Counters of CPU `cpu` as bitmaps: its own on a hybrid part (backend/probe_cores.c), else
 * leaf 0AH's (perfmon v5's fixed bitmap honoured) or AMD's six. */
static void cpu_counters(const struct machine_info *machine, bool amd, uint32_t cpu,
			 uint32_t *gp, uint32_t *fixed)
{
	uint32_t version = CPUID_0A_EAX_VERSION(machine->cpuid_0a[0]);
	uint32_t count = CPUID_0A_EAX_GP_COUNTERS(machine->cpuid_0a[0]);

	*gp = 0;
	*fixed = 0;
	if (amd && machine->family >= 0x17) {
		*gp = (1u << AMD_CORE_COUNTERS) - 1u;
	} else if (!amd && machine->hybrid) {
		*gp = machine->cpu_gp_mask[cpu];
		*fixed = machine->cpu_fixed_mask[cpu];
	} else if (!amd && version >= 1) {
		*gp = count >= 32 ? UINT32_MAX : (1u << count) - 1u;
		if (version >= 2)
			*fixed = cpuid_0a_fixed_mask(version, machine->cpuid_0a[2],
						     machine->cpuid_0a[3]);
	}
	*gp &= (1u << INTEL_MAX_GP) - 1u;
	*fixed &= (1u << INTEL_MAX_FIXED) - 1u;
}

static uint32_t highest_bit_count(uint32_t mask)
{
	return mask == 0 ? 0 : 32u - (uint32_t)__builtin_clz(mask);
}

/* Each CPU's counters, and the table's layout wide enough for the CPU with the most. */
static int init_cpu_counters(struct slot_table *table, const struct machine_info *machine)
{
	uint32_t gp_all = 0, fixed_all = 0;

	table->gp_mask = calloc(table->cpu_count ? table->cpu_count : 1, sizeof(uint32_t));
	table->fixed_mask = calloc(table->cpu_count ? table->cpu_count : 1, sizeof(uint32_t));
	if (table->gp_mask == NULL || table->fixed_mask == NULL)
		return -ENOMEM;
	for (uint32_t cpu = 0; cpu < table->cpu_count; cpu++) {
		cpu_counters(machine, table->amd, cpu, &table->gp_mask[cpu], &table->fixed_mask[cpu]);
		gp_all |= table->gp_mask[cpu];
		fixed_all |= table->fixed_mask[cpu];
	}
	table->gp_count = highest_bit_count(gp_all);
	table->fixed_count = highest_bit_count(fixed_all);
	return 0;
}

int slots_init(struct slot_table *table, const struct machine_info *machine)
{
	uint32_t eax = machine->cpuid_0a[0];
	uint32_t edx = machine->cpuid_0a[3];
	uint32_t version = CPUID_0A_EAX_VERSION(eax);
	size_t cells;
	int ret;

	memset(table, 0, sizeof(*table));
	table->cpu_count = machine->cpu_count;
	table->amd = cpu_vendor_is_amd(machine->vendor);
	if (table->amd && machine->family >= 0x17) {
		table->gp_width = AMD_COUNTER_WIDTH;
		/* PerfMonV2: PERF_CTL.EN alone does not count while the global bit is clear. */
		table->has_global = machine->amd_perfmon_v2;
		table->global_address = table->has_global ? MSR_AMD_PERF_CNTR_GLOBAL_CTL : 0;
	} else if (!table->amd && version >= 1) {
		table->gp_width = (uint8_t)CPUID_0A_EAX_GP_WIDTH(eax);
		table->has_global = version >= 2;
		table->global_address = table->has_global ? MSR_IA32_PERF_GLOBAL_CTRL : 0;
		if (version >= 2)
			table->fixed_width = (uint8_t)CPUID_0A_EDX_FIXED_WIDTH(edx);
	}
	ret = init_cpu_counters(table, machine);
	if (ret < 0)
		return ret;
	cells = (size_t)table->cpu_count * (table->gp_count + table->fixed_count);
	if (cells == 0)
		return 0;
	table->holders = calloc(cells, sizeof(*table->holders));
	return table->holders != NULL ? 0 : -ENOMEM;
}

bool slots_cpu_has(const struct slot_table *table, uint32_t cpu, uint16_t kind, uint32_t index)
{
	const uint32_t *mask = kind == WIRE_SLOT_FIXED ? table->fixed_mask : table->gp_mask;

	return cpu < table->cpu_count && index < 32 && mask != NULL && ((mask[cpu] >> index) & 1);
}

void slots_free(struct slot_table *table)
{
	free(table->holders);
	free(table->gp_mask);
	free(table->fixed_mask);
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

struct slot **slots_holder(const struct slot_table *table, uint32_t cpu, uint16_t kind,
			   uint32_t index)
{
	size_t per_cpu = table->gp_count + table->fixed_count;
	size_t offset = kind == WIRE_SLOT_FIXED ? table->gp_count + index : index;

	return &table->holders[(size_t)cpu * per_cpu + offset];
}

uint32_t slots_table_counter(const struct slot_table *table, uint16_t kind, uint32_t index)
{
	if (table->amd)
		return msr_amd_perf_ctr(index);
	return kind == WIRE_SLOT_FIXED ? msr_ia32_fixed_ctr(index) : msr_ia32_pmc(index);
}

uint32_t slots_table_control(const struct slot_table *table, uint16_t kind, uint32_t index)
{
	if (table->amd)
		return msr_amd_perf_ctl(index);
	return kind == WIRE_SLOT_FIXED ? MSR_IA32_FIXED_CTR_CTRL : msr_ia32_perfevtsel(index);
}

uint64_t slots_global_bit(uint16_t kind, uint32_t index)
{
	return kind == WIRE_SLOT_FIXED ? 1ull << (GLOBAL_CTRL_FIXED_SHIFT + index) : 1ull << index;
}

uint32_t slots_field_shift(uint32_t index)
{
	return index * FIXED_CTR_CTRL_BITS_PER_COUNTER;
}

uint64_t slots_width_mask(uint8_t width)
{
	return width == 0 || width >= 64 ? UINT64_MAX : (1ull << width) - 1;
}

uint32_t slots_counter_address(const struct msrd *server, const struct slot *slot)
{
	return slots_table_counter(&server->slots, slot->kind, slot->index);
}

/* Which counter a register belongs to as its own (counter, alias, event select): true and
 * (kind, index) set, or false for any other register. */
static bool own_register(const struct slot_table *table, uint32_t address, uint16_t *kind,
			 uint32_t *index)
{
	static const uint32_t gp_bases[] = { MSR_IA32_PMC0, MSR_IA32_A_PMC0, MSR_IA32_PERFEVTSEL0 };
	bool control;

	*kind = WIRE_SLOT_PROGRAMMABLE;
	if (table->amd) {
		if (msr_amd_counter_index(address, table->gp_count, index, &control))
			return true;
		/* The legacy PERF_CTL0..3 (0xC0010000..3) and PERF_CTR0..3 (0xC0010004..7). */
		return msr_amd_legacy_index(address, index, &control) && *index < table->gp_count;
	}
	for (size_t i = 0; i < sizeof(gp_bases) / sizeof(gp_bases[0]); i++) {
		if (msr_index_in(address, gp_bases[i], table->gp_count, index))
			return true;
	}
	if (msr_index_in(address, MSR_IA32_FIXED_CTR0, table->fixed_count, index)) {
		*kind = WIRE_SLOT_FIXED;
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
	return slots_width_mask(kind == WIRE_SLOT_FIXED ? table->fixed_width : table->gp_width);
}

/* Whether another connection holds the counter. One the asking connection holds itself is
 * noted as written raw: msrd no longer knows what its registers should hold, so its read-time
 * check (slots_check_programming) stands down for it. */
static bool held_by_other(const struct slot_table *table, const struct client *client,
			  uint32_t cpu, uint16_t kind, uint32_t index)
{
	struct slot *holder = *slots_holder(table, cpu, kind, index);

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
			if ((changed & slots_global_bit(each, at)) != 0 &&
			    held_by_other(table, client, cpu, each, at))
				return -EBUSY;
		}
	}
	if (!table->amd && address == MSR_IA32_FIXED_CTR_CTRL) {
		for (uint32_t i = 0; i < table->fixed_count; i++) {
			if (((changed >> slots_field_shift(i)) & FIXED_FIELD_MASK) != 0 &&
			    held_by_other(table, client, cpu, WIRE_SLOT_FIXED, i))
				return -EBUSY;
		}
	}
	return 0;
}

/* ---- register access for one slot ---- */

int slots_read_register(struct msrd *server, uint32_t cpu, uint32_t address, uint64_t *value)
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
int slots_update_bits(struct msrd *server, uint32_t cpu, uint32_t address, uint64_t bits,
		      uint64_t value)
{
	uint64_t current;
	int status = slots_read_register(server, cpu, address, &current);

	if (status < 0)
		return status;
	if (((current ^ value) & bits) == 0)
		return 0;
	return write_register(server, cpu, address, (current & ~bits) | (value & bits));
}

static int set_global(struct msrd *server, const struct slot *slot, bool on)
{
	uint64_t bit = slots_global_bit(slot->kind, slot->index);

	if (!server->slots.has_global)
		return 0;
	return slots_update_bits(server, slot->cpu, server->slots.global_address, bit, on ? bit : 0);
}

/* The slot's own control: its event select (EN from `enabled`), or its fixed field. */
int slots_write_control(struct msrd *server, const struct slot *slot, uint64_t config,
			bool enabled)
{
	uint32_t address = slots_table_control(&server->slots, slot->kind, slot->index);

	/* A fixed counter stops by its own field, not only its GLOBAL_CTRL bit: the kernel
	 * rewrites the whole global register on every perf enable (__intel_pmu_enable_all writes
	 * its own mask), which would start a fixed slot stopped by its global bit alone wherever
	 * perf is active (the NMI watchdog keeps it active on many distributions). */
	if (slot->kind == WIRE_SLOT_FIXED)
		return slots_update_bits(server, slot->cpu, address,
					 FIXED_FIELD_MASK << slots_field_shift(slot->index),
					 (enabled ? config : 0) << slots_field_shift(slot->index));
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
		return msr_ia32_a_pmc(slot->index);
	return slots_table_counter(table, slot->kind, slot->index);
}

int slots_write_counter(struct msrd *server, const struct slot *slot, uint64_t value)
{
	return write_register(server, slot->cpu, counter_write_address(server, slot), value);
}

/* What a counter holds after `value` is written through its legacy address. */
static uint64_t legacy_write_result(uint64_t value, uint8_t width)
{
	return (uint64_t)(int64_t)(int32_t)(uint32_t)value & slots_width_mask(width);
}

static int remember(struct msrd *server, struct slot *slot)
{
	uint32_t control = slots_table_control(&server->slots, slot->kind, slot->index);
	uint64_t value;
	int status = slots_read_register(server, slot->cpu,
				   slots_table_counter(&server->slots, slot->kind, slot->index),
				   &slot->saved_counter);

	if (status == 0)
		status = slots_read_register(server, slot->cpu, control, &value);
	if (status < 0)
		return status;
	slot->saved_control = slot->kind == WIRE_SLOT_FIXED
				      ? (value >> slots_field_shift(slot->index)) & FIXED_FIELD_MASK
				      : value;
	if (!server->slots.has_global)
		return 0;
	status = slots_read_register(server, slot->cpu, server->slots.global_address, &value);
	slot->saved_global_bit = (value & slots_global_bit(slot->kind, slot->index)) != 0;
	return status;
}

/* Stopped, nothing selected, counter 0. */
static int clear(struct msrd *server, const struct slot *slot)
{
	int status = set_global(server, slot, false);

	if (status == 0)
		status = slots_write_control(server, slot, 0, false);
	if (status == 0)
		status = slots_write_counter(server, slot, 0);
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
	bool was_enabled = fixed || (slot->saved_control & PERFEVTSEL_EN) != 0; /* fixed: as saved */
	int status = clear(server, slot);
	uint32_t written_at = counter_write_address(server, slot);

	if (written_at == slots_table_counter(&server->slots, slot->kind, slot->index) &&
	    !server->slots.amd && slot->kind == WIRE_SLOT_PROGRAMMABLE &&
	    legacy_write_result(slot->saved_counter, server->slots.gp_width) != slot->saved_counter)
		log_warnx("cpu %u counter %u: 0x%llx cannot be written back whole through MSR 0x%x "
			  "(no full-width writes on this CPU): restored 0x%llx", slot->cpu,
			  slot->index, (unsigned long long)slot->saved_counter, written_at,
			  (unsigned long long)legacy_write_result(slot->saved_counter,
								  server->slots.gp_width));
	keep_first(&status, slots_write_counter(server, slot, slot->saved_counter));
	keep_first(&status, slots_write_control(server, slot, selection, was_enabled));
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

const char *slots_kind_name(uint16_t kind)
{
	return kind == WIRE_SLOT_FIXED ? "fixed counter" : "counter";
}

/* Restore a slot's registers, log it, and free it. Its holder is the client (still linked) or,
 * for a deferred release, the identity kept in the slot. */
static void release_now(struct msrd *server, struct slot *slot, const char *why)
{
	/* A counter someone outside msrd reprogrammed is theirs now: writing msrd's saved values
	 * back would break their session. Checked again here, not only at the last read: a perf
	 * event may have moved onto the counter since. */
	char why_lost[200];
	int status = 0;

	if (!slot->lost)
		(void)slots_check_programming(server, slot, why_lost, sizeof(why_lost));
	if (!slot->lost)
		status = restore(server, slot);

	if (status < 0) {
		server->restore_incomplete = true;
		log_warn_errno(status, "client %u: restoring cpu %u %s %u", slot->owner_number,
			       slot->cpu, slots_kind_name(slot->kind), slot->index);
	}
	log_info("client %u (uid %u pid %d) released cpu %u %s %u (slot %u, %s)",
		 slot->owner_number, (unsigned)slot->owner_uid, (int)slot->owner_pid, slot->cpu,
		 slots_kind_name(slot->kind), slot->index, slot->id, why);
	*slots_holder(&server->slots, slot->cpu, slot->kind, slot->index) = NULL;
	free(slot);
}

/* Take a slot from its client. Its registers are written back at once, unless an asynchronous
 * write batch is between its check and its run (msr backend): then the release waits for it
 * (slots_run_deferred), the counter meanwhile held by nobody's connection, so no one else can
 * take it or write its registers before they are restored. */
void slots_release(struct client *client, struct slot *slot, const char *why)
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
		slots_release(client, client->slots, "disconnected");
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

void slots_forget_stale(struct client *client, uint32_t id)
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

void slots_policy_reloaded(struct msrd *server)
{
	for (struct client *client = server->clients; client != NULL; client = client->next) {
		struct slot *next;
		for (struct slot *slot = client->slots; slot != NULL; slot = next) {
			next = slot->next;
			if (slots_granted(client, slot->kind, slot->index))
				continue;
			log_notice("client %u (uid %u pid %d): slot %u (cpu %u %s %u) released: the "
				   "reloaded policy does not grant its registers",
				   client->number, (unsigned)client->uid, (int)client->pid, slot->id,
				   slot->cpu, slots_kind_name(slot->kind), slot->index);
			remember_stale(client, slot->id);
			slots_release(client, slot, "policy reloaded");
		}
	}
}

/* ---- what a slot needs from the policy ---- */

/* A slot needs read and write grants for its registers: the counter (any write), its event
 * select with EN, and its bits of the shared control registers. */
bool slots_granted(const struct client *client, uint16_t kind, uint32_t index)
{
	const struct slot_table *table = &client->server->slots;
	const struct policy_grant *grant = client->grant;
	uint32_t counter = slots_table_counter(table, kind, index);
	uint32_t control = slots_table_control(table, kind, index);
	uint64_t control_bits = kind == WIRE_SLOT_FIXED ? FIXED_FIELD_MASK << slots_field_shift(index)
							: PERFEVTSEL_EN;

	if (!policy_allows_read(grant, counter) || policy_write_mask(grant, counter) == 0)
		return false;
	if (!policy_allows_read(grant, control) ||
	    (policy_write_mask(grant, control) & control_bits) == 0)
		return false;
	if (!table->has_global)
		return true;
	return policy_allows_read(grant, table->global_address) &&
	       (policy_write_mask(grant, table->global_address) & slots_global_bit(kind, index)) != 0;
}

/* ---- counters used outside msrd ---- */

/* Whether a counter msrd does not hold is counting for someone else: its enable bit
 * (PERFEVTSELx / PERF_CTL EN; a fixed counter's OS or USR bits in IA32_FIXED_CTR_CTRL together
 * with its IA32_PERF_GLOBAL_CTRL bit). The kernel's perf and NMI watchdog program the
 * registers directly, so they are the only sign. A register that cannot be read counts as free:
 * the take then fails on it anyway. */
bool slots_used_outside(struct msrd *server, uint32_t cpu, uint16_t kind, uint32_t index)
{
	const struct slot_table *table = &server->slots;
	uint64_t control, global = UINT64_MAX;

	if (slots_read_register(server, cpu, slots_table_control(table, kind, index), &control) < 0)
		return false;
	if (kind != WIRE_SLOT_FIXED)
		return (control & PERFEVTSEL_EN) != 0;
	if (((control >> slots_field_shift(index)) & (FIXED_CTR_CTRL_OS | FIXED_CTR_CTRL_USR)) == 0)
		return false;
	if (table->has_global && slots_read_register(server, cpu, table->global_address, &global) < 0)
		return false;
	return (global & slots_global_bit(kind, index)) != 0;
}

/* Who: the NMI watchdog counts cycles (fixed counter 1, or a programmable counter with a PMI),
 * anything else is some perf user. */
const char *slots_user_outside(struct msrd *server, uint32_t cpu, uint16_t kind, uint32_t index)
{
	const struct slot_table *table = &server->slots;
	uint64_t control = 0;

	if (!server->machine.nmi_watchdog)
		return "the kernel's perf (another PMU user outside msrd)";
	if (kind == WIRE_SLOT_FIXED)
		return index == 1 ? "the kernel (NMI watchdog)"
				  : "the kernel's perf (another PMU user outside msrd)";
	slots_read_register(server, cpu, slots_table_control(table, kind, index), &control);
	return (control & PERFEVTSEL_INT) ? "the kernel (NMI watchdog)"
					  : "the kernel's perf (another PMU user outside msrd)";
}

static void lost_count_why(const struct slot *slot, char *why, size_t size)
{
	snprintf(why, size, "cpu %u %s %u (slot %u) went back behind msrd's back (zeroed by the "
		 "kernel's perf_clear_dirty_counters or another writer): its count is lost; free "
		 "the slot and take another", slot->cpu, slots_kind_name(slot->kind), slot->index,
		 slot->id);
}

int slots_check_continuity(struct msrd *server, struct slot *slot, uint64_t value, bool written,
			   char *why, size_t size)
{
	uint8_t width = slot->kind == WIRE_SLOT_FIXED ? server->slots.fixed_width
						      : server->slots.gp_width;
	uint64_t now = energy_now_ns(server);

	if (!written && !slot->count_lost && !slot->written_raw && slot->seen_ns != 0 &&
	    !counter_move_plausible(slot->seen_value, value, slots_width_mask(width),
				    now - slot->seen_ns)) {
		slot->count_lost = true;
		log_warnx("client %u (uid %u pid %d): cpu %u %s %u (slot %u) went back from %#llx "
			  "to %#llx in %llu us, more than a wrap explains: its count is lost",
			  slot->owner_number, (unsigned)slot->owner_uid, (int)slot->owner_pid,
			  slot->cpu, slots_kind_name(slot->kind), slot->index, slot->id,
			  (unsigned long long)slot->seen_value, (unsigned long long)value,
			  (unsigned long long)((now - slot->seen_ns) / 1000));
	}
	if (slot->count_lost) {
		lost_count_why(slot, why, size);
		return -EIDRM;
	}
	slot->seen_value = value;
	slot->seen_ns = now;
	return 0;
}

int slots_check_programming(struct msrd *server, struct slot *slot, char *why, size_t size)
{
	const struct slot_table *table = &server->slots;
	uint32_t address = slots_table_control(table, slot->kind, slot->index);
	uint64_t control, expected, global;
	bool in_place;

	if (slot->count_lost) {
		lost_count_why(slot, why, size);
		return -EIDRM;
	}
	if (slot->written_raw)
		return 0; /* its holder programs it with plain writes: nothing to compare with */
	if (!slot->lost) {
		if (slots_read_register(server, slot->cpu, address, &control) < 0)
			return 0; /* the read of the counter itself will say what is wrong */
		if (slot->kind == WIRE_SLOT_FIXED) {
			control = (control >> slots_field_shift(slot->index)) & FIXED_FIELD_MASK;
			expected = slot->enabled ? slot->config : 0;
		} else {
			expected = slot->config | (slot->enabled ? PERFEVTSEL_EN : 0);
		}
		in_place = control == expected;
		/* A stopped slot's global bit is the kernel's to rewrite (its own field or EN
		 * stops it); a running one needs it. */
		if (in_place && slot->enabled && table->has_global &&
		    slots_read_register(server, slot->cpu, table->global_address, &global) == 0)
			in_place = (global & slots_global_bit(slot->kind, slot->index)) != 0;
		if (in_place)
			return 0;
		slot->lost = true;
		/* Theirs now, also for a restart after a crash: the counter and its own event
		 * select (the shared control registers stay journalled for the other slots). */
		journal_forget(server, slot->cpu, slots_table_counter(table, slot->kind, slot->index));
		if (slot->kind != WIRE_SLOT_FIXED)
			journal_forget(server, slot->cpu, address);
		log_warnx("client %u (uid %u pid %d): cpu %u %s %u (slot %u) was reprogrammed "
			  "outside msrd (MSR %#x is %#llx, msrd left %#llx): its count is lost",
			  slot->owner_number, (unsigned)slot->owner_uid, (int)slot->owner_pid,
			  slot->cpu, slots_kind_name(slot->kind), slot->index, slot->id, address,
			  (unsigned long long)control, (unsigned long long)expected);
	}
	snprintf(why, size, "cpu %u %s %u (slot %u) was reprogrammed outside msrd (the kernel's "
		 "perf or NMI watchdog): its count is lost; free the slot and take another",
		 slot->cpu, slots_kind_name(slot->kind), slot->index, slot->id);
	return -EIDRM;
}

/* ---- taking a slot ---- */

int slots_take(struct client *client, struct slot *slot)
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
	slots_check_continuity(server, slot, 0, true, NULL, 0);
	*slots_holder(&server->slots, slot->cpu, slot->kind, slot->index) = slot;
	slot->next = client->slots;
	client->slots = slot;
	client->slot_count++;
	return 0;
}
