/*
 * server/slots_internal.h — what the SLOT_* request handlers (slot_requests.c) use of the slot
 * mechanism (slots.c): the table's layout, register access for one slot, taking and releasing.
 * Private to those two files; the rest of msrd uses the slots_* calls of server.h.
 */
#ifndef HAECER_SERVER_SLOTS_INTERNAL_H
#define HAECER_SERVER_SLOTS_INTERNAL_H

#include "server/server.h"

#define FIXED_FIELD_MASK 0xFull /* a fixed counter's field of IA32_FIXED_CTR_CTRL */

/* ---- layout ---- */

/* The cell that says who holds counter (kind, index) of `cpu` (NULL: nobody). */
struct slot **slots_holder(const struct slot_table *table, uint32_t cpu, uint16_t kind,
			   uint32_t index);
/* Its counter register, and its control register (its event select, or IA32_FIXED_CTR_CTRL). */
uint32_t slots_table_counter(const struct slot_table *table, uint16_t kind, uint32_t index);
uint32_t slots_table_control(const struct slot_table *table, uint16_t kind, uint32_t index);
/* Its bit of the global enable register, and the shift of a fixed counter's control field. */
uint64_t slots_global_bit(uint16_t kind, uint32_t index);
uint32_t slots_field_shift(uint32_t index);
/* The bits a counter of `width` bits keeps (all for 0 or 64). */
uint64_t slots_width_mask(uint8_t width);
/* "counter" or "fixed counter", for messages. */
const char *slots_kind_name(uint16_t kind);

/* ---- register access for one slot (synchronous backend calls; writes are journalled) ---- */

int slots_read_register(struct msrd *server, uint32_t cpu, uint32_t address, uint64_t *value);
/* Set or clear `bits` of a shared register, leaving the others as they are. */
int slots_update_bits(struct msrd *server, uint32_t cpu, uint32_t address, uint64_t bits,
		      uint64_t value);
/* The slot's own control: its event select (EN from `enabled`), or its fixed field (the
 * config when enabled, 0 when not). */
int slots_write_control(struct msrd *server, const struct slot *slot, uint64_t config,
			bool enabled);
/* Its counter, through the full-width alias where the CPU has one. */
int slots_write_counter(struct msrd *server, const struct slot *slot, uint64_t value);

/* ---- ownership ---- */

/* Whether the client's grant covers every register the slot (kind, index) needs. */
bool slots_granted(const struct client *client, uint16_t kind, uint32_t index);
/* Whether a counter no client holds counts for someone outside msrd, and who that is. */
bool slots_used_outside(struct msrd *server, uint32_t cpu, uint16_t kind, uint32_t index);
const char *slots_user_outside(struct msrd *server, uint32_t cpu, uint16_t kind,
			       uint32_t index);
/* Remember the slot's registers, stop and clear its counter, and give it to its owner:
 * 0, or -errno with the registers restored and nothing held. */
int slots_take(struct client *client, struct slot *slot);
/* Take the slot from its client and write its registers back (now, or once the write lock is
 * free). */
void slots_release(struct client *client, struct slot *slot, const char *why);
/* A stale id is told once (on SLOT_FREE); then it is simply unknown. */
void slots_forget_stale(struct client *client, uint32_t id);

#endif
