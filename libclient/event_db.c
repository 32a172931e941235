/*
 * libclient/event_db.c — capabilities from CPUID leaf 0xA, the architectural events and fixed
 * counters, and the PERFEVTSEL / FIXED_CTR_CTRL encodings. Rules from the Intel SDM vol. 3B
 * 18.2 (architectural performance monitoring versions 1-5); see event_db.h for the contract.
 */
#include "libclient/event_db.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hw/core_type.h"
#include "hw/vendor.h"

/* CPUID.0AH:EDX[15]: AnyThread deprecation (the ANY bits are reserved when set, SDM 18.2.5). */
#define CPUID_0A_EDX_ANYTHREAD_DEPRECATED (1u << 15)

/* The seed's table 3, event select and unit mask from the SDM table "UMask and Event Select
 * Encodings for Pre-Defined Architectural Performance Events". Index = CPUID.0AH:EBX bit. */
static const struct event_arch_event arch_events[ARCH_EVENT_COUNT] = {
	[ARCH_EVENT_CORE_CYCLES] = {"UNHALTED_CORE_CYCLES", 0x3C, 0x00},
	[ARCH_EVENT_INSTRUCTIONS] = {"INSTRUCTIONS_RETIRED", 0xC0, 0x00},
	[ARCH_EVENT_REFERENCE_CYCLES] = {"UNHALTED_REF_CYCLES", 0x3C, 0x01},
	[ARCH_EVENT_LLC_REFERENCES] = {"LL_CACHE_REFERENCES", 0x2E, 0x4F},
	[ARCH_EVENT_LLC_MISSES] = {"LL_CACHE_MISSES", 0x2E, 0x41},
	[ARCH_EVENT_BRANCHES] = {"BRANCH_INS_RETIRED", 0xC4, 0x00},
	[ARCH_EVENT_BRANCH_MISSES] = {"BRANCH_MIS_RETIRED", 0xC5, 0x00},
};

/* The seed's table 2, in fixed-counter order (IA32_FIXED_CTR0..2). */
static const char *const fixed_names[FIXED_NAMED_COUNT] = {
	[FIXED_INST_RETIRED_ANY] = "INST_RETIRED_ANY",
	[FIXED_CPU_CLK_UNHALTED_CORE] = "CPU_CLK_UNHALTED_CORE",
	[FIXED_CPU_CLK_UNHALTED_REF] = "CPU_CLK_UNHALTED_REF",
};

/* Fixed counter counting the same thing as each architectural event, -1 for none. The fixed
 * reference-cycles counter ticks at the TSC rate while the programmable 3C/01 ticks at the
 * bus clock on Sandy Bridge and later, one more reason to prefer the fixed counter. */
static const int arch_fixed_equivalents[ARCH_EVENT_COUNT] = {
	[ARCH_EVENT_CORE_CYCLES] = FIXED_CPU_CLK_UNHALTED_CORE,
	[ARCH_EVENT_INSTRUCTIONS] = FIXED_INST_RETIRED_ANY,
	[ARCH_EVENT_REFERENCE_CYCLES] = FIXED_CPU_CLK_UNHALTED_REF,
	[ARCH_EVENT_LLC_REFERENCES] = -1,
	[ARCH_EVENT_LLC_MISSES] = -1,
	[ARCH_EVENT_BRANCHES] = -1,
	[ARCH_EVENT_BRANCH_MISSES] = -1,
};

void event_db_why(char *why, size_t why_size, const char *format, ...)
{
	va_list arguments;

	if (!why || why_size == 0)
		return;
	va_start(arguments, format);
	vsnprintf(why, why_size, format, arguments);
	va_end(arguments);
}

static enum event_vendor vendor_of(const char *vendor)
{
	switch (cpu_vendor_of(vendor)) {
	case CPU_VENDOR_INTEL:
		return EVENT_VENDOR_INTEL;
	case CPU_VENDOR_AMD:
		return EVENT_VENDOR_AMD;
	default:
		return EVENT_VENDOR_UNKNOWN;
	}
}

static uint8_t clamp_u8(uint32_t value, uint32_t limit)
{
	return (uint8_t)(value < limit ? value : limit);
}

/* Which of the seven architectural events exist: a bit of EBX is meaningful only below the
 * vector length EAX[31:24]; a set bit means NOT available. */
static uint8_t decode_arch_events(uint32_t eax, uint32_t ebx)
{
	uint32_t length = CPUID_0A_EAX_EBX_LENGTH(eax);
	uint8_t available = 0;

	for (unsigned i = 0; i < ARCH_EVENT_COUNT; i++)
		if (i < length && !(ebx & (1u << i)))
			available |= (uint8_t)(1u << i);
	return available;
}

/* Fixed counters: none before v2; EDX[4:0] contiguous counters from v2; from v5 a counter i
 * also exists when ECX bit i is set (SDM: FxCtr[i]_is_supported := ECX[i] || EDX[4:0] > i). */
static void decode_fixed(const uint32_t leaf[4], struct event_caps *caps)
{
	uint32_t contiguous = CPUID_0A_EDX_FIXED_COUNTERS(leaf[3]);
	uint32_t mask;

	if (caps->version < 2)
		return;
	if (contiguous > EVENT_DB_MAX_FIXED_COUNTERS)
		contiguous = EVENT_DB_MAX_FIXED_COUNTERS;
	mask = contiguous ? (uint32_t)((1ull << contiguous) - 1) : 0;
	if (caps->version >= 5)
		mask |= leaf[2] & ((1u << EVENT_DB_MAX_FIXED_COUNTERS) - 1);
	caps->fixed_counters = (uint8_t)contiguous;
	caps->fixed_mask = mask;
	if (mask)
		caps->fixed_width = clamp_u8(CPUID_0A_EDX_FIXED_WIDTH(leaf[3]),
					     EVENT_DB_MAX_COUNTER_WIDTH);
}

static void decode_caps(const struct event_machine *machine, struct event_caps *caps)
{
	const uint32_t *leaf = machine->cpuid_0a;

	memset(caps, 0, sizeof(*caps));
	caps->vendor = vendor_of(machine->vendor);
	if (caps->vendor == EVENT_VENDOR_AMD) {
		/* AMD has no CPUID leaf 0xA; Zen's core counters are the legacy PERF_CTL/CTR
		 * pairs extended to six (PerfCtrExtCore, every family 17h+ part). */
		if (machine->family >= 0x17) {
			caps->amd_core_counters = EVENT_DB_AMD_CORE_COUNTERS;
			caps->amd_core_width = EVENT_DB_AMD_CORE_WIDTH;
		}
		return;
	}
	caps->version = (uint8_t)CPUID_0A_EAX_VERSION(leaf[0]);
	if (caps->version == 0)
		return;
	caps->gp_counters = clamp_u8(CPUID_0A_EAX_GP_COUNTERS(leaf[0]), EVENT_DB_MAX_GP_COUNTERS);
	if (caps->gp_counters)
		caps->gp_width = clamp_u8(CPUID_0A_EAX_GP_WIDTH(leaf[0]), EVENT_DB_MAX_COUNTER_WIDTH);
	caps->arch_events_length = (uint8_t)CPUID_0A_EAX_EBX_LENGTH(leaf[0]);
	if (caps->gp_counters)
		caps->arch_events = decode_arch_events(leaf[0], leaf[1]);
	decode_fixed(leaf, caps);
	caps->any_thread = caps->version >= 3 && !(leaf[3] & CPUID_0A_EDX_ANYTHREAD_DEPRECATED);
}

int event_db_open(const struct event_machine *machine, struct event_db **out)
{
	struct event_db *db;

	if (!machine || !out)
		return -EINVAL;
	db = calloc(1, sizeof(*db));
	if (!db)
		return -ENOMEM;
	db->machine = *machine;
	/* Strings from outside the process may lack their terminator. */
	db->machine.vendor[sizeof(db->machine.vendor) - 1] = '\0';
	db->machine.sim_model[sizeof(db->machine.sim_model) - 1] = '\0';
	decode_caps(&db->machine, &db->caps);
	event_db_pfm_open(db);
	*out = db;
	return 0;
}

void event_db_close(struct event_db *db)
{
	if (!db)
		return;
	event_db_pfm_close(db);
	free(db);
}

const struct event_caps *event_db_caps(const struct event_db *db)
{
	return &db->caps;
}

const char *event_db_describe(const struct event_db *db, char *buf, size_t size)
{
	const struct event_machine *machine = &db->machine;
	int length;

	length = snprintf(buf, size, "%s family %#x model %#x stepping %u",
			  machine->vendor[0] ? machine->vendor : "unknown vendor",
			  machine->family, machine->model, machine->stepping);
	if (machine->sim_model[0] && length >= 0 && (size_t)length < size)
		length += snprintf(buf + length, size - (size_t)length, " (simulated model %s)",
				   machine->sim_model);
	if (cpu_core_type_name(machine->core_type) && length >= 0 && (size_t)length < size)
		snprintf(buf + length, size - (size_t)length, ", %s",
			 cpu_core_type_name(machine->core_type));
	return buf;
}

const char *event_db_strerror(int error)
{
	switch (error) {
	case 0:
		return "success";
	case -ENOENT:
		return "unknown event name";
	case -EOPNOTSUPP:
		return "event or counter kind not available on this CPU";
	case -EINVAL:
		return "invalid flags, counter mask or argument";
	case -ENOMEM:
		return "out of memory";
	default:
		return "unexpected error";
	}
}

/* ---- architectural events and fixed counters ---- */

const struct event_arch_event *event_db_arch_event(unsigned index)
{
	return index < ARCH_EVENT_COUNT ? &arch_events[index] : NULL;
}

int event_db_find_name(const char *name, const void *table, size_t count, size_t stride)
{
	const char *entry = table;

	if (!name)
		return -EINVAL;
	for (size_t i = 0; i < count; i++, entry += stride)
		if (strcasecmp(name, *(const char *const *)(const void *)entry) == 0)
			return (int)i;
	return -ENOENT;
}

int event_db_arch_event_by_name(const char *name)
{
	return event_db_find_name(name, arch_events, ARCH_EVENT_COUNT, sizeof(arch_events[0]));
}

int event_db_arch_available(const struct event_db *db, unsigned index, char *why,
			    size_t why_size)
{
	const struct event_caps *caps = &db->caps;
	const char *name;

	if (index >= ARCH_EVENT_COUNT) {
		event_db_why(why, why_size, "architectural event %u does not exist (0-%u)", index,
			     ARCH_EVENT_COUNT - 1);
		return -EINVAL;
	}
	name = arch_events[index].name;
	if (caps->version == 0) {
		event_db_why(why, why_size,
			     "%s is not available on this CPU (no architectural performance "
			     "monitoring: CPUID.0AH:EAX[7:0] = 0)", name);
		return -EOPNOTSUPP;
	}
	if (caps->gp_counters == 0) {
		event_db_why(why, why_size,
			     "%s is not available on this CPU (no programmable counters: "
			     "CPUID.0AH:EAX[15:8] = 0)", name);
		return -EOPNOTSUPP;
	}
	if (index >= caps->arch_events_length) {
		event_db_why(why, why_size,
			     "%s is not available on this CPU (CPUID.0AH:EAX[31:24] = %u: EBX "
			     "enumerates only the first %u events, this is event %u)", name,
			     caps->arch_events_length, caps->arch_events_length, index);
		return -EOPNOTSUPP;
	}
	if (!(caps->arch_events & (1u << index))) {
		event_db_why(why, why_size,
			     "%s is not available on this CPU (CPUID.0AH:EBX bit %u set)", name,
			     index);
		return -EOPNOTSUPP;
	}
	return 0;
}

const char *event_db_fixed_name(unsigned fixed)
{
	return fixed < FIXED_NAMED_COUNT ? fixed_names[fixed] : NULL;
}

int event_db_fixed_by_name(const char *name)
{
	return event_db_find_name(name, fixed_names, FIXED_NAMED_COUNT, sizeof(fixed_names[0]));
}

static const char *fixed_label(unsigned fixed, char *buf, size_t size)
{
	if (fixed < FIXED_NAMED_COUNT)
		return fixed_names[fixed];
	snprintf(buf, size, "fixed counter %u", fixed);
	return buf;
}

int event_db_fixed_available(const struct event_db *db, unsigned fixed, char *why,
			     size_t why_size)
{
	const struct event_caps *caps = &db->caps;
	char label[32];
	const char *name = fixed_label(fixed, label, sizeof(label));

	if (fixed >= EVENT_DB_MAX_FIXED_COUNTERS) {
		event_db_why(why, why_size, "fixed counter %u does not exist (0-%u)", fixed,
			     EVENT_DB_MAX_FIXED_COUNTERS - 1);
		return -EINVAL;
	}
	if (caps->version < 2) {
		event_db_why(why, why_size,
			     "%s is not available on this CPU (fixed counters need "
			     "architectural perfmon version 2, this CPU has version %u)", name,
			     caps->version);
		return -EOPNOTSUPP;
	}
	if (!(caps->fixed_mask & (1u << fixed))) {
		event_db_why(why, why_size,
			     "%s is not available on this CPU (CPUID.0AH:EDX[4:0] = %u fixed "
			     "counters%s)", name, caps->fixed_counters,
			     caps->version >= 5 ? " and its ECX bit is clear" : "");
		return -EOPNOTSUPP;
	}
	return 0;
}

int event_db_arch_fixed_equivalent(unsigned index)
{
	if (index >= ARCH_EVENT_COUNT)
		return -EINVAL;
	return arch_fixed_equivalents[index] >= 0 ? arch_fixed_equivalents[index] : -ENOENT;
}

/* Flags valid for any counter kind: only known bits, at least one privilege level, ANY only
 * where the SDM does not reserve it. */
static int check_common_flags(const struct event_db *db, uint32_t flags, char *why,
			      size_t why_size)
{
	if (flags & ~EVENT_FLAG_ALL) {
		event_db_why(why, why_size, "unknown flag bits %#x", flags & ~EVENT_FLAG_ALL);
		return -EINVAL;
	}
	if (!(flags & (EVENT_FLAG_USR | EVENT_FLAG_OS))) {
		event_db_why(why, why_size,
			     "neither USR nor OS is set: the counter would count nothing");
		return -EINVAL;
	}
	if ((flags & EVENT_FLAG_ANY) && !db->caps.any_thread) {
		if (db->caps.vendor == EVENT_VENDOR_AMD)
			event_db_why(why, why_size, "ANY (AnyThread) is an Intel bit; AMD "
				     "counters have no such bit");
		else if (db->caps.version < 3)
			event_db_why(why, why_size, "ANY (AnyThread) is reserved before "
				     "architectural perfmon version 3; this CPU has version %u",
				     db->caps.version);
		else
			event_db_why(why, why_size, "ANY (AnyThread) is deprecated on this CPU "
				     "(CPUID.0AH:EDX[15] set), the bit is reserved");
		return -EINVAL;
	}
	return 0;
}

int event_db_arch_prefer_fixed(const struct event_db *db, unsigned index, uint32_t flags,
			       uint8_t cmask)
{
	int fixed = event_db_arch_fixed_equivalent(index);

	if (fixed < 0)
		return fixed;
	/* A fixed counter filters only by privilege level (and AnyThread). */
	if (cmask || (flags & (EVENT_FLAG_EDGE | EVENT_FLAG_INV)))
		return -ENOENT;
	if (check_common_flags(db, flags, NULL, 0) < 0)
		return -ENOENT;
	if (event_db_fixed_available(db, (unsigned)fixed, NULL, 0) < 0)
		return -ENOENT;
	return fixed;
}

/* ---- encodings ---- */

/* Where each EVENT_FLAG_* lands in a register. */
struct flag_bit {
	uint32_t flag;
	uint64_t bit;
};

#define FLAG_BITS_COUNT(map) (sizeof(map) / sizeof((map)[0]))

static const struct flag_bit evtsel_bits[] = {
	{EVENT_FLAG_USR, PERFEVTSEL_USR}, {EVENT_FLAG_OS, PERFEVTSEL_OS},
	{EVENT_FLAG_EDGE, PERFEVTSEL_EDGE}, {EVENT_FLAG_INV, PERFEVTSEL_INV},
	{EVENT_FLAG_ANY, PERFEVTSEL_ANY},
};

static const struct flag_bit fixed_ctrl_bits[] = {
	{EVENT_FLAG_OS, FIXED_CTR_CTRL_OS}, {EVENT_FLAG_USR, FIXED_CTR_CTRL_USR},
	{EVENT_FLAG_ANY, FIXED_CTR_CTRL_ANY},
};

static uint64_t register_bits(uint32_t flags, const struct flag_bit *map, size_t count)
{
	uint64_t bits = 0;

	for (size_t i = 0; i < count; i++)
		if (flags & map[i].flag)
			bits |= map[i].bit;
	return bits;
}

int event_db_check_flags(const struct event_db *db, uint32_t flags, uint8_t cmask, char *why,
			 size_t why_size)
{
	int error = check_common_flags(db, flags, why, why_size);

	if (error < 0)
		return error;
	if ((flags & EVENT_FLAG_INV) && cmask == 0) {
		event_db_why(why, why_size, "INV inverts the counter-mask comparison and needs a "
			     "non-zero counter mask");
		return -EINVAL;
	}
	return 0;
}

int event_db_encode_evtsel(const struct event_db *db, uint16_t event, uint8_t umask,
			   uint32_t flags, uint8_t cmask, uint64_t *out, char *why,
			   size_t why_size)
{
	bool amd = db->caps.vendor == EVENT_VENDOR_AMD;
	uint64_t value;
	int error;

	if (!out)
		return -EINVAL;
	if (db->caps.gp_counters == 0 && db->caps.amd_core_counters == 0) {
		event_db_why(why, why_size, "this CPU has no programmable counters");
		return -EOPNOTSUPP;
	}
	if (event > (amd ? 0xFFFu : 0xFFu)) {
		event_db_why(why, why_size, "event select %#x does not fit in %s bits", event,
			     amd ? "12" : "8");
		return -EINVAL;
	}
	error = event_db_check_flags(db, flags, cmask, why, why_size);
	if (error < 0)
		return error;
	value = (event & PERFEVTSEL_EVENT_MASK) | (uint64_t)umask << PERFEVTSEL_UMASK_SHIFT |
		(uint64_t)cmask << PERFEVTSEL_CMASK_SHIFT;
	if (amd)
		value |= (uint64_t)(event >> 8) << 32; /* PERF_CTL EventSelect[11:8] */
	*out = value | register_bits(flags, evtsel_bits, FLAG_BITS_COUNT(evtsel_bits));
	return 0;
}

/* AMD family 17h+ core-counter events that count what an architectural event counts (PPR for
 * family 19h, "Core Performance Monitor Counters"); event 0 = none. */
static const struct event_arch_event amd_arch_events[ARCH_EVENT_COUNT] = {
	[ARCH_EVENT_CORE_CYCLES] = { "UNHALTED_CORE_CYCLES", 0x76, 0x00 }, /* Cycles not in Halt */
	[ARCH_EVENT_INSTRUCTIONS] = { "INSTRUCTIONS_RETIRED", 0xC0, 0x00 }, /* Retired Instr. */
	[ARCH_EVENT_BRANCHES] = { "BRANCH_INS_RETIRED", 0xC2, 0x00 },  /* Retired Branch Instr. */
	[ARCH_EVENT_BRANCH_MISSES] = { "BRANCH_MIS_RETIRED", 0xC3, 0x00 }, /* ... Mispredicted */
};

const struct event_arch_event *event_db_amd_arch_equivalent(unsigned index)
{
	if (index >= ARCH_EVENT_COUNT || amd_arch_events[index].event == 0)
		return NULL;
	return &amd_arch_events[index];
}

static int encode_amd_arch(const struct event_db *db, unsigned index, uint32_t flags,
			   uint8_t cmask, uint64_t *out, char *why, size_t why_size)
{
	const struct event_arch_event *equivalent = event_db_amd_arch_equivalent(index);

	if (index >= ARCH_EVENT_COUNT) {
		event_db_why(why, why_size, "architectural event %u does not exist (0-%u)", index,
			     ARCH_EVENT_COUNT - 1);
		return -EINVAL;
	}
	if (equivalent == NULL) {
		event_db_why(why, why_size, "%s is not available on this CPU (AMD core counters "
			     "have no equivalent event)", arch_events[index].name);
		return -EOPNOTSUPP;
	}
	return event_db_encode_evtsel(db, equivalent->event, equivalent->umask, flags, cmask, out,
				      why, why_size);
}

int event_db_encode_arch(const struct event_db *db, unsigned index, uint32_t flags,
			 uint8_t cmask, uint64_t *out, char *why, size_t why_size)
{
	int error;

	if (db->caps.vendor == EVENT_VENDOR_AMD)
		return encode_amd_arch(db, index, flags, cmask, out, why, why_size);
	error = event_db_arch_available(db, index, why, why_size);
	if (error < 0)
		return error;
	return event_db_encode_evtsel(db, arch_events[index].event, arch_events[index].umask,
				      flags, cmask, out, why, why_size);
}

int event_db_encode_fixed(const struct event_db *db, unsigned fixed, uint32_t flags,
			  uint64_t *bits, uint64_t *mask, char *why, size_t why_size)
{
	unsigned shift = fixed * FIXED_CTR_CTRL_BITS_PER_COUNTER;
	uint64_t nibble;
	int error;

	if (!bits || !mask)
		return -EINVAL;
	error = event_db_fixed_available(db, fixed, why, why_size);
	if (error < 0)
		return error;
	if (flags & (EVENT_FLAG_EDGE | EVENT_FLAG_INV)) {
		event_db_why(why, why_size, "fixed counters have no EDGE or INV control");
		return -EINVAL;
	}
	error = check_common_flags(db, flags, why, why_size);
	if (error < 0)
		return error;
	nibble = register_bits(flags, fixed_ctrl_bits, FLAG_BITS_COUNT(fixed_ctrl_bits));
	*bits = nibble << shift;
	*mask = (uint64_t)0xF << shift;
	return 0;
}
