/*
 * server/msrstate.h — msrd's original MSR values (msrstate.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_MSRSTATE_H
#define HAECER_SERVER_MSRSTATE_H

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

struct msr_saved {
	uint32_t cpu;
	uint32_t address;
	uint64_t original;
	uint64_t touched;              /* bits msrd's writes changed (msrstate_touch) */
	bool bitwise;                  /* touched is known: shared registers go back by bit */
};

struct msrstate {
	struct msr_saved *entries;     /* sorted by (cpu, address) */
	size_t count;
	size_t capacity;
	bool intel_pmcs;               /* IA32_PMCx / IA32_A_PMCx aliases exist */
	bool amd_legacy;               /* AMD's legacy counter addresses alias PERF_CTL/CTRx */
	bool full_width_writes;        /* PERF_CAPABILITIES bit 13 */
	uint8_t pmc_width;
};

/* Empty, for this machine's register aliases. */
void msrstate_init(struct msrstate *state, const struct machine_info *machine);
/* Remember `original` for (cpu, address) unless a value is already remembered for that register
 * (under either of its addresses). */
int msrstate_remember(struct msrstate *state, uint32_t cpu, uint32_t address, uint64_t original);
/* Drop what is remembered for (cpu, address) or its alias: the register is not msrd's to
 * write back any more. */
void msrstate_forget(struct msrstate *state, uint32_t cpu, uint32_t address);
/* msrd is about to write `after` where `before` was: the bits it changes are msrd's to put
 * back, the others of a shared register (the global enables, the fixed counters' control) stay
 * whatever the kernel makes of them meanwhile. */
void msrstate_touch(struct msrstate *state, uint32_t cpu, uint32_t address, uint64_t before,
		    uint64_t after);
/* Whether a value is remembered for (cpu, address) or its alias. */
bool msrstate_has(const struct msrstate *state, uint32_t cpu, uint32_t address);
/* Write every remembered value back, in an order that leaves no counter counting msrd's events;
 * returns how many restores failed. Those are remembered in `unrestored` when it is not NULL
 * (SIZE_MAX: one could not be). */
size_t msrstate_restore(struct msrstate *state, struct msr_backend *backend,
			struct msrstate *unrestored);
void msrstate_free(struct msrstate *state);

#endif
