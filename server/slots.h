/*
 * server/slots.h — msrd's counter slots (slots.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_SLOTS_H
#define HAECER_SERVER_SLOTS_H

#include <limits.h>
#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "common/log.h"
#include "policy/policy.h"
#include "proto/wire.h"
#include "shm/energy_page.h"

struct client;
struct msrd;

struct slot {
	struct slot *next;             /* the owner's list, or server->slot_releases */
	struct client *owner;          /* NULL once released (a deferred release waits) */
	uint32_t owner_number;         /* the owner's connection number, uid and pid, for logs */
	uid_t owner_uid;
	pid_t owner_pid;
	const char *release_why;       /* a deferred release's reason (a string constant) */
	uint32_t id;                   /* per connection, from 1 */
	uint32_t cpu;
	uint16_t kind;                 /* WIRE_SLOT_* */
	uint16_t index;
	uint64_t config;               /* programmed selection, EN excluded (fixed: 4-bit field) */
	bool enabled;
	bool lost;                     /* reprogrammed outside msrd: never read or restored again */
	bool written_raw;              /* its holder wrote its registers with plain writes */
	bool count_lost;               /* its counter went back behind msrd's back (zeroed) */
	uint64_t seen_value;           /* msrd's latest read or write of the counter, */
	uint64_t seen_ns;              /* and when (energy_now_ns) */
	uint64_t saved_counter;        /* what the registers held before the slot was taken */
	uint64_t saved_control;        /* event select, or the fixed counter's 4-bit field */
	bool saved_global_bit;
};

struct slot_table {
	bool amd;                      /* PERF_CTL/PERF_CTR pairs, no global control */
	bool has_global;               /* a global enable register gates counting: */
	uint32_t global_address;       /* IA32_PERF_GLOBAL_CTRL (Intel perfmon v2 and later) or
					* PerfCntrGlobalCtl (AMD PerfMonV2), 0 for none */
	uint32_t cpu_count;
	uint32_t gp_count;
	uint32_t fixed_count;
	uint8_t gp_width;
	uint8_t fixed_width;
	struct slot **holders;         /* cpu_count x (gp_count + fixed_count); NULL = free */
	/* Per CPU, bit i: counter i exists there (a hybrid part's E-cores have fewer than its
	 * P-cores; perfmon v5 may leave holes among fixed counters). gp_count and fixed_count
	 * are the layout: one past the highest counter of any CPU. */
	uint32_t *gp_mask;
	uint32_t *fixed_mask;
};

/* The counters of the machine, from CPUID 0xA (Intel) or the family (AMD 17h and later: six
 * PERF_CTL/PERF_CTR pairs of 48 bits). */
int slots_init(struct slot_table *table, const struct machine_info *machine);
void slots_free(struct slot_table *table);
/* Whether CPU `cpu` has counter `index` of `kind` (WIRE_SLOT_PROGRAMMABLE or WIRE_SLOT_FIXED). */
bool slots_cpu_has(const struct slot_table *table, uint32_t cpu, uint16_t kind, uint32_t index);
void slots_handle_alloc(struct client *client, const struct wire_header *header,
			const uint8_t *payload, size_t length);
void slots_handle_program(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length);
void slots_handle_control(struct client *client, const struct wire_header *header,
			  const uint8_t *payload, size_t length);
void slots_handle_read(struct client *client, const struct wire_header *header,
		       const uint8_t *payload, size_t length);
void slots_handle_free(struct client *client, const struct wire_header *header,
		       const uint8_t *payload, size_t length);
/* Free every slot of a client that is going away, restoring the registers (at once, or once
 * the write lock is free: slots_run_deferred). */
void slots_release_client(struct client *client);
/* The releases that waited for the write lock (msr_exec.c calls it when the lock is free). */
void slots_run_deferred(struct msrd *server);
/* Free the memory of releases that never ran (exit). */
void slots_free_deferred(struct msrd *server);
/* After a reload: release (and restore) every slot whose registers its client's new grant does
 * not cover; their ids answer STALE from then on (until SLOT_FREE says so once). */
void slots_policy_reloaded(struct msrd *server);
/* Whether `id` is a slot of this client that a policy reload released. */
bool slots_is_stale(const struct client *client, uint32_t id);
/* The slot `id` of this client, or NULL. */
struct slot *slots_find(const struct client *client, uint32_t id);
uint32_t slots_counter_address(const struct msrd *server, const struct slot *slot);
/* Whether msrd's programming of a held slot is still in its registers (event select with EN as
 * msrd left it, or the fixed field; its global enable bit). Someone outside msrd (the kernel's
 * perf, the NMI watchdog) reprogrammed it: -EIDRM with `why`, logged once, and the slot is
 * lost for good: never read, driven or restored again. */
int slots_check_programming(struct msrd *server, struct slot *slot, char *why, size_t size);
/* A counter msrd read (`value`, masked to its width) or wrote: -EIDRM with `why` when it went
 * back by more than a wrap explains since msrd's previous look (hw/counter_wrap.h). */
int slots_check_continuity(struct msrd *server, struct slot *slot, uint64_t value, bool written,
			   char *why, size_t size);
/* Mask of a counter's width for the counter register at `address` (all ones when unknown). */
uint64_t slots_counter_mask(const struct msrd *server, uint32_t address);
/* -EBUSY when a write of `proposed` over `current` to (cpu, address) by `client` would touch a
 * counter slot another connection holds (any write to its own registers, a change of its bits
 * in the shared control registers); 0 otherwise. */
int slots_write_conflict(const struct msrd *server, const struct client *client, uint32_t cpu,
			 uint32_t address, uint64_t current, uint64_t proposed);

#endif
