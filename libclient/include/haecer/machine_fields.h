/*
 * <haecer/machine_fields.h> — what a description of the machine holds, listed once.
 *
 * struct haecer_machine_info (<haecer/msrd.h>), the MACHINE_INFO message of msrd's protocol
 * (its struct, encoder and decoder in proto/) and msrd's own description of the machine
 * (struct machine_info, backend/backend.h, which adds what only msrd needs) are each spelled
 * from this list, in its order; msrd and libhaecer copy one into the other field by field from
 * it too. Adding a field is one line here (plus the code that finds its value); since it grows
 * the public struct, it needs a new soname (scripts/check-abi.sh).
 *
 * The header is a leaf (it includes only <stdint.h>), so that every layer may include it
 * (HACKING.md, Layering). Its macros are the library's: an application reads the struct in
 * <haecer/msrd.h> and has no need of them.
 *
 * HAECER_MACHINE_FIELDS(TEXT, NUMBER, NUMBERS, COUNT, FLAGS, PER_CPU) calls, for each field:
 *   TEXT(name, size)            char name[size], NUL-padded
 *   NUMBER(type, name)          a uint32_t or uint64_t
 *   NUMBERS(type, name, n)      an array of n uint8_t or uint32_t
 *   COUNT(name)                 uint32_t: how many CPUs, which bounds the per-CPU arrays
 *   FLAGS(name)                 uint32_t: HAECER_MACHINE_* (msrd derives it from its own fields)
 *   PER_CPU(type, name, when)   type name[HAECER_MAX_CPUS], uint8_t or uint16_t; on the wire
 *                               after every other field, COUNT of them, when (flags & when) or
 *                               `when` is 0
 */
#ifndef HAECER_MACHINE_FIELDS_H
#define HAECER_MACHINE_FIELDS_H

#include <stdint.h>

#define HAECER_MAX_CPUS 1024u
#define HAECER_RAPL_DOMAINS 8u

/* What `flags` says. */
#define HAECER_MACHINE_HAS_SMI_COUNT 0x1u
#define HAECER_MACHINE_PMC_FULL_WIDTH 0x2u
#define HAECER_MACHINE_SIMULATED 0x4u
#define HAECER_MACHINE_VIRTUAL_TIME 0x8u /* simulated time moves only by SIM_ADVANCE requests */
/* A hybrid part (Alder/Raptor/Meteor Lake): cpu_core_type says each CPU's kind, whose counters
 * and model-specific event encodings differ (libpfm4's adl_glc for P-cores, adl_grt for
 * E-cores). */
#define HAECER_MACHINE_HYBRID 0x10u
/* Intel packages of several dies (Cascade Lake-AP): RAPL energy is per die, and cpu_die says
 * each CPU's die (numbered densely over the machine); read a package's energy through a CPU of
 * each of its dies and sum them. Without the flag, one die a package. */
#define HAECER_MACHINE_DIES 0x20u
/* A hypervisor runs msrd (CPUID 1 ECX[31]); model_name ends ", VM under SIG" with
 * its CPUID 0x40000000 signature ("KVMKVMKVM", "VMwareVMware"). */
#define HAECER_MACHINE_VIRTUAL 0x40u
/* CPUID 80000007H EDX[8]: the TSC is invariant, ticking at tsc_hz in every P- and C-state.
 * Clear: it is not (msrd's log says so), or CPUID could not say. */
#define HAECER_MACHINE_TSC_INVARIANT 0x80u
/* Bits 11:8 of flags: where tsc_hz came from (haecer_tsc_source_name). */
#define HAECER_MACHINE_TSC_SOURCE(flags) (((flags) >> 8) & 0xFu)

#define HAECER_MACHINE_FIELDS(TEXT, NUMBER, NUMBERS, COUNT, FLAGS, PER_CPU)                   \
	TEXT(vendor, 16)              /* CPUID leaf 0: "GenuineIntel", "AuthenticAMD" */       \
	TEXT(model_name, 64)          /* e.g. "Intel Core i5-2520M (Sandy Bridge)" */          \
	TEXT(sim_model, 32)           /* model file name when simulated, "" otherwise */       \
	NUMBER(uint32_t, family)      /* display family (base + extended) */                   \
	NUMBER(uint32_t, model)       /* display model (base + extended << 4) */               \
	NUMBER(uint32_t, stepping)                                                             \
	NUMBERS(uint32_t, cpuid_0a, 4) /* leaf 0xA: eax, ebx, ecx, edx (zeros on AMD) */       \
	COUNT(cpu_count)                                                                       \
	NUMBER(uint32_t, package_count)                                                        \
	/* bit (1 << enum rapl_domain of hw/msr.h) per domain that exists */                   \
	NUMBER(uint32_t, rapl_domains)                                                         \
	FLAGS(flags)                                                                           \
	NUMBER(uint64_t, rapl_power_unit) /* raw RAPL unit register (0 when no RAPL) */        \
	NUMBER(uint64_t, tsc_hz)          /* 0 when no source gave it */                       \
	/* J = count * 2^-exponent; 0x80 | e (Silvermont/Airmont): J = count * 2^e * 10^-6 */ \
	NUMBERS(uint8_t, rapl_energy_exponent, HAECER_RAPL_DOMAINS)                            \
	NUMBERS(uint32_t, rapl_max_power_mw, HAECER_RAPL_DOMAINS) /* bounds wrap deadlines */  \
	PER_CPU(uint16_t, cpu_package, 0)                                                      \
	/* HAECER_CORE_TYPE_* (CPUID 1AH on that CPU, or sysfs), 0 when not hybrid */          \
	PER_CPU(uint8_t, cpu_core_type, HAECER_MACHINE_HYBRID)                                 \
	PER_CPU(uint16_t, cpu_die, HAECER_MACHINE_DIES) /* dense (package, die) index */

/* The list as struct members: every field (HAECER_MACHINE_MEMBERS), or all but the flags
 * (HAECER_MACHINE_MEMBERS_BUT_FLAGS: msrd keeps what they say in fields of its own). */
#define HAECER_MACHINE_MEMBER_TEXT(name, size) char name[size];
#define HAECER_MACHINE_MEMBER_NUMBER(type, name) type name;
#define HAECER_MACHINE_MEMBER_NUMBERS(type, name, n) type name[n];
#define HAECER_MACHINE_MEMBER_U32(name) uint32_t name;
#define HAECER_MACHINE_MEMBER_NONE(name)
#define HAECER_MACHINE_MEMBER_PER_CPU(type, name, when) type name[HAECER_MAX_CPUS];
#define HAECER_MACHINE_MEMBERS                                                          \
	HAECER_MACHINE_FIELDS(HAECER_MACHINE_MEMBER_TEXT, HAECER_MACHINE_MEMBER_NUMBER, \
			      HAECER_MACHINE_MEMBER_NUMBERS, HAECER_MACHINE_MEMBER_U32, \
			      HAECER_MACHINE_MEMBER_U32, HAECER_MACHINE_MEMBER_PER_CPU)
#define HAECER_MACHINE_MEMBERS_BUT_FLAGS                                                \
	HAECER_MACHINE_FIELDS(HAECER_MACHINE_MEMBER_TEXT, HAECER_MACHINE_MEMBER_NUMBER, \
			      HAECER_MACHINE_MEMBER_NUMBERS, HAECER_MACHINE_MEMBER_U32, \
			      HAECER_MACHINE_MEMBER_NONE, HAECER_MACHINE_MEMBER_PER_CPU)

#endif
