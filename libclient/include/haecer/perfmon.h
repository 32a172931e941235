/*
 * <haecer/perfmon.h> — the HAECER API of the seed design (setupArchCounter, readCounter,
 * setupFerretMonitor, startEnergyRead, ...): a process-wide default context created on first
 * use, counters as `PerfCounter` values, failures that never cause side effects.
 *
 * A thin layer over the haecer_* API of <haecer/haecer.h>, which it includes (one library,
 * libhaecer, `pkg-config haecer`); that header says where counters count, how wide their values
 * are, what is thread-safe and what each error code means. The seed's names (PerfCounter,
 * readCounter, RAPL_PKG, ...) carry no prefix: programs that only want the haecer_* API include
 * <haecer/haecer.h> and keep those names for themselves.
 */
#ifndef HAECER_PERFMON_H
#define HAECER_PERFMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <haecer/haecer.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================== */
/* The HAECER API (seed design, listings 1, 2, 4, 5 and section 2.2.2)                       */
/* ======================================================================================== */

/* Seed table 2: the fixed-function counters. */
typedef enum {
	INST_RETIRED_ANY = HAECER_FIXED_INST_RETIRED_ANY,
	CPU_CLK_UNHALTED_CORE = HAECER_FIXED_CPU_CLK_UNHALTED_CORE,
	CPU_CLK_UNHALTED_REF = HAECER_FIXED_CPU_CLK_UNHALTED_REF,
} FF_counter;

/* Seed table 3: the architectural events (bit n of CPUID.0AH:EBX). */
typedef enum {
	UNHALTED_CORE_CYCLES = HAECER_ARCH_UNHALTED_CORE_CYCLES,
	INSTRUCTIONS_RETIRED = HAECER_ARCH_INSTRUCTIONS_RETIRED,
	UNHALTED_REF_CYCLES = HAECER_ARCH_UNHALTED_REF_CYCLES,
	LL_CACHE_REFERENCES = HAECER_ARCH_LL_CACHE_REFERENCES,
	LL_CACHE_MISSES = HAECER_ARCH_LL_CACHE_MISSES,
	BRANCH_INS_RETIRED = HAECER_ARCH_BRANCH_INS_RETIRED,
	BRANCH_MIS_RETIRED = HAECER_ARCH_BRANCH_MIS_RETIRED,
} ARCH_counter;

/* Seed table 5, plus the platform domain and AMD's domains. */
typedef enum {
	RAPL_PKG = HAECER_ENERGY_PKG,
	RAPL_PP0 = HAECER_ENERGY_PP0,
	RAPL_PP1 = HAECER_ENERGY_PP1,
	RAPL_DRAM = HAECER_ENERGY_DRAM,
	RAPL_PSYS = HAECER_ENERGY_PSYS,
	RAPL_AMD_CORE = HAECER_ENERGY_AMD_CORE,
	RAPL_AMD_PKG = HAECER_ENERGY_AMD_PKG,
} RAPLCounter;

/* The argument types of setupNonArchCounter. The seed calls them `event` and `umask`; those
 * names are opt-in (define HAECER_SEED_TYPEDEFS before including this header), because `umask`
 * is also the libc function of <sys/stat.h> and `event` a common variable name. */
typedef uint16_t haecer_event_select;
typedef uint8_t haecer_umask;
#ifdef HAECER_SEED_TYPEDEFS
typedef haecer_event_select event;
typedef haecer_umask umask;
#endif

/* A counter as the setup functions return it, by value. `valid` says whether setup succeeded;
 * `error` is 0 or why it failed (haecer_strerror, haecer_error_detail). An invalid counter
 * never causes a side effect: reads of it return -1 (ULLONG_MAX), other operations do nothing.
 * Copies refer to the same counter; once freed (through any copy) every copy is invalid. */
typedef struct PerfCounter {
	struct haecer_counter *counter;  /* private */
	uint32_t generation;             /* private */
	int error;
	bool valid;
} PerfCounter;

/* Listing 1. `flags`: HAECER_FLAG_* (no USR/OS: both); `mask`: counter mask (0 = none).
 * Each counts on the CPU the calling thread runs on at setup; the thread is pinned there only
 * with HAECER_FLAG_PIN (needed to count one thread: otherwise it may migrate away). */
PerfCounter setupArchCounter(ARCH_counter ctr, int flags, char mask);
PerfCounter setupFFCounter(FF_counter ctr, int flags);
PerfCounter setupNonArchCounter(haecer_event_select ev, haecer_umask um, int flags, char mask);
/* Not in the seed: a non-architectural event by libpfm4 name (haecer_counter_open_named). */
PerfCounter setupNamedCounter(const char *name, int flags, char mask);

/* Listing 2. */
void disableCounter(PerfCounter *ctr);
void enableCounter(PerfCounter *ctr);
void resetCounter(PerfCounter *ctr);
void freeCounter(PerfCounter *ctr);
unsigned long long readCounter(PerfCounter *ctr);
/* Reads ctr[0..count-1] into buffer with HAECER_READ_SYNCHRONIZED; -1 for invalid ones. */
void simultaneousReadCounter(PerfCounter *ctr, unsigned long long *buffer, int count);

/* Listing 4. The energy counter of the package the calling thread runs on. On AMD, RAPL_PKG is
 * AMD's package energy (RAPL_AMD_PKG) and RAPL_PP0 the core energy of the calling thread's core
 * (RAPL_AMD_CORE), so seed programs measure there too (also startEnergyRead). getEnergyUnit():
 * joules per count of the package domain (RAPL_PKG; RAPL_AMD_PKG on AMD), -1.0 when unknown.
 * Other domains may count in other units (server DRAM: 2^-16 J): see haecer_counter_info. */
PerfCounter setupEnergyCounter(RAPLCounter type);
double getEnergyUnit(void);

/* Section 2.2.2. The seed's monitor holds a list of 3000 entries; rings hold a power of two,
 * so the ring holds 4096 records (haecer_counter_monitor rounds up; haecer_counter_info of
 * haecer_perf_counter(ctr) says ring_capacity 4096). 0 or the error (-EBADF for an invalid
 * counter). */
#define HAECER_FERRET_SEED_CAPACITY 3000u
int setupFerretMonitor(PerfCounter *ctr, uint16_t major, uint16_t minor);

/* Listing 5. Per thread and domain, on the package the calling thread runs on. endEnergyRead
 * returns joules, or NaN when no measurement was possible (no startEnergyRead, domain missing,
 * msrd refused). */
void startEnergyRead(RAPLCounter domain);
double endEnergyRead(RAPLCounter domain);

/* The full result (SMI count, wait energy, ticks) of the calling thread's latest endEnergyRead
 * of `domain`; -ENOENT when there is none. */
int haecer_last_energy_result(RAPLCounter domain, struct haecer_energy_result *out);

/* The haecer_* handle behind a PerfCounter, NULL when invalid. */
struct haecer_counter *haecer_perf_counter(const PerfCounter *ctr);

#ifdef __cplusplus
}
#endif

#endif
