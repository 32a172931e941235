/*
 * libclient/haecer_counter.c — setting counters up and managing them: the event database turns
 * an event into a counter kind and an encoding, msrd hands out the counter slot (two clients
 * never share one), and the counter starts enabled at 0.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hw/core_type.h"

/* The public constants are the event database's and hw/msr.h's numbers. */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(HAECER_FLAG_USR, EVENT_FLAG_USR) && SAME(HAECER_FLAG_OS, EVENT_FLAG_OS) &&
		       SAME(HAECER_FLAG_EDGE, EVENT_FLAG_EDGE) &&
		       SAME(HAECER_FLAG_INV, EVENT_FLAG_INV) && SAME(HAECER_FLAG_ANY, EVENT_FLAG_ANY),
	       "flags");
_Static_assert(SAME(UNHALTED_CORE_CYCLES, ARCH_EVENT_CORE_CYCLES) &&
		       SAME(INSTRUCTIONS_RETIRED, ARCH_EVENT_INSTRUCTIONS) &&
		       SAME(UNHALTED_REF_CYCLES, ARCH_EVENT_REFERENCE_CYCLES) &&
		       SAME(LL_CACHE_REFERENCES, ARCH_EVENT_LLC_REFERENCES) &&
		       SAME(LL_CACHE_MISSES, ARCH_EVENT_LLC_MISSES) &&
		       SAME(BRANCH_INS_RETIRED, ARCH_EVENT_BRANCHES) &&
		       SAME(BRANCH_MIS_RETIRED, ARCH_EVENT_BRANCH_MISSES),
	       "ARCH_counter values are CPUID.0AH:EBX bit numbers");
_Static_assert(SAME(INST_RETIRED_ANY, FIXED_INST_RETIRED_ANY) &&
		       SAME(CPU_CLK_UNHALTED_CORE, FIXED_CPU_CLK_UNHALTED_CORE) &&
		       SAME(CPU_CLK_UNHALTED_REF, FIXED_CPU_CLK_UNHALTED_REF),
	       "FF_counter values are fixed counter indexes");
_Static_assert(SAME(RAPL_PKG, RAPL_DOMAIN_PKG) && SAME(RAPL_PP0, RAPL_DOMAIN_PP0) &&
		       SAME(RAPL_PP1, RAPL_DOMAIN_PP1) && SAME(RAPL_DRAM, RAPL_DOMAIN_DRAM) &&
		       SAME(RAPL_PSYS, RAPL_DOMAIN_PSYS) &&
		       SAME(RAPL_AMD_CORE, RAPL_DOMAIN_AMD_CORE) &&
		       SAME(RAPL_AMD_PKG, RAPL_DOMAIN_AMD_PKG),
	       "RAPLCounter values are hw/msr.h domains");

#define EVTSEL_NOT_FIXED (PERFEVTSEL_EDGE | PERFEVTSEL_INV | (0xFFull << PERFEVTSEL_CMASK_SHIFT))

/* What an event needs: a fixed counter, a programmable one, or a fixed one with a programmable
 * one as the fallback when the fixed counter is taken or not granted. */
struct event_request {
	char name[HAECER_COUNTER_NAME_MAX];
	int fixed;                  /* fixed counter wanted, -1 for none */
	uint64_t fixed_field;       /* its 4-bit FIXED_CTR_CTRL field */
	bool programmable;          /* a programmable counter may count it */
	uint64_t evtsel;            /* with this PERFEVTSEL / PERF_CTL value */
	int generic;                /* perf's generic name of this architectural event, or -1 */
};

/* Without a privilege level a counter would count nothing: then it counts both. HAECER_FLAG_PIN
 * is the library's, not the encoding's: it is taken out here and read by open_event. */
static uint32_t event_flags(uint32_t flags)
{
	flags &= ~(uint32_t)HAECER_FLAG_PIN;
	if (!(flags & (EVENT_FLAG_USR | EVENT_FLAG_OS)))
		flags |= EVENT_FLAG_USR | EVENT_FLAG_OS;
	return flags;
}

static bool is_amd(const struct haecer_context *ctx)
{
	return event_db_caps(ctx->db)->vendor == EVENT_VENDOR_AMD;
}

/* Append length bytes of text to out (size bytes, NUL-terminated), truncating. */
static size_t append(char *out, size_t size, size_t used, const char *text, size_t length)
{
	if (used + length >= size)
		length = size - used - 1;
	memcpy(out + used, text, length);
	out[used + length] = '\0';
	return used + length;
}

/* libpfm4's canonical "snb::UOPS_ISSUED:ANY:k=1:u=1:e=0:i=0:c=0:t=0" without the modifiers,
 * which the counter's config already says: "snb::UOPS_ISSUED:ANY". */
static void pfm_short_name(const char *full, char *out, size_t size)
{
	const char *separator = strstr(full, "::");
	const char *event = separator != NULL ? separator + 2 : full;
	size_t used = append(out, size, 0, full, (size_t)(event - full));

	for (const char *segment = event; *segment != '\0';) {
		size_t length = strcspn(segment, ":");
		if (memchr(segment, '=', length) == NULL) {
			if (segment != event)
				used = append(out, size, used, ":", 1);
			used = append(out, size, used, segment, length);
		}
		segment += length + (segment[length] == ':');
	}
}

static void request_init(struct event_request *request, const char *name)
{
	memset(request, 0, sizeof(*request));
	snprintf(request->name, sizeof(request->name), "%s", name);
	request->fixed = -1;
	request->generic = -1;
}

/* ---- taking a slot from msrd ---- */

/* A fixed counter that cannot be had may still be replaced by a programmable one. */
static bool worth_falling_back(int error)
{
	return error == -EBUSY || error == -EPERM || error == -EOPNOTSUPP || error == -EACCES;
}

/* Any free programmable counter: msrd answers -EPERM (with the reason) when the policy grants
 * none of them, -ENOSPC when those it grants are all held. */
static int take_programmable(struct haecer_context *ctx, uint32_t cpu, const char *name,
			     struct haecer_slot *slot)
{
	char what[HAECER_COUNTER_NAME_MAX + 64];
	int error;

	snprintf(what, sizeof(what), "a programmable counter for %s on CPU %u", name, cpu);
	error = haecer_slot_alloc(ctx->conn, cpu, HAECER_SLOT_PROGRAMMABLE, -1, slot);
	return error < 0 ? haecer__fail_msrd(ctx, error, what) : 0;
}

static int take_slot(struct haecer_context *ctx, uint32_t cpu, const struct event_request *request,
		     struct haecer_slot *slot, uint64_t *config)
{
	char fixed_refusal[HAECER_DETAIL_SIZE];
	char what[HAECER_COUNTER_NAME_MAX + 64];
	int error;

	if (!(haecer_server_info(ctx->conn)->features & HAECER_FEATURE_SLOTS))
		return haecer__fail(-EOPNOTSUPP, "msrd does not hand out counter slots (its HELLO "
				    "lacks HAECER_FEATURE_SLOTS): %s cannot be counted",
				    request->name);
	if (request->fixed >= 0) {
		error = haecer_slot_alloc(ctx->conn, cpu, HAECER_SLOT_FIXED, request->fixed, slot);
		if (error == 0) {
			*config = request->fixed_field;
			return 0;
		}
		snprintf(what, sizeof(what), "fixed counter %d for %s on CPU %u", request->fixed,
			 request->name, cpu);
		haecer__fail_msrd(ctx, error, what);
		if (!request->programmable || !worth_falling_back(error))
			return error;
		snprintf(fixed_refusal, sizeof(fixed_refusal), "%s", haecer_error_detail());
		error = take_programmable(ctx, cpu, request->name, slot);
		if (error < 0) {
			/* Both refusals matter to whoever reads this. */
			char programmable_refusal[HAECER_DETAIL_SIZE];
			snprintf(programmable_refusal, sizeof(programmable_refusal), "%s",
				 haecer_error_detail());
			return haecer__fail(error, "%s; %s", programmable_refusal, fixed_refusal);
		}
	} else {
		error = take_programmable(ctx, cpu, request->name, slot);
		if (error < 0)
			return error;
	}
	*config = request->evtsel;
	return 0;
}

/* Program and start a slot just taken. */
static int start_slot(struct haecer_context *ctx, const struct haecer_slot *slot, uint64_t config,
		      const char *name)
{
	char what[HAECER_COUNTER_NAME_MAX + 32];
	int error;

	error = haecer_slot_program(ctx->conn, slot->id, config);
	if (error < 0) {
		snprintf(what, sizeof(what), "programming %s (%#llx)", name,
			 (unsigned long long)config);
		return haecer__fail_msrd(ctx, error, what);
	}
	error = haecer_slot_control(ctx->conn, &slot->id, 1, HAECER_SLOT_ENABLE);
	if (error < 0) {
		snprintf(what, sizeof(what), "enabling %s", name);
		return haecer__fail_msrd(ctx, error, what);
	}
	return 0;
}

/* The event database of the CPU's core type: a hybrid part's E-cores have their own. */
static struct event_db *event_db_of(const struct haecer_context *ctx, int cpu)
{
	if (ctx->db_atom != NULL && cpu >= 0 && (uint32_t)cpu < ctx->machine.cpu_count &&
	    ctx->machine.cpu_core_type[cpu] == HAECER_CORE_TYPE_ATOM)
		return ctx->db_atom;
	return ctx->db;
}

static void describe_event_counter(struct haecer_counter *counter, uint32_t cpu,
				   const char *name, uint64_t config)
{
	struct haecer_counter_info *info = &counter->info;
	const struct haecer_slot *slot = &counter->slot;

	snprintf(info->name, sizeof(info->name), "%s", name);
	info->kind = slot->kind == HAECER_SLOT_FIXED ? HAECER_COUNTER_FIXED
						     : HAECER_COUNTER_PROGRAMMABLE;
	info->hardware_index = slot->index;
	info->cpu = cpu;
	info->package = counter->ctx->machine.cpu_package[cpu];
	info->core_type = cpu_core_type_name(counter->ctx->machine.cpu_core_type[cpu]);
	info->width = slot->width;
	info->unit = 1.0;
	info->unit_name = "events";
	info->config = config;
	info->counter_address = slot->counter_address;
	info->enabled = true;
	counter->width_mask = slot->width == 0 || slot->width >= 64 ? UINT64_MAX
								     : (1ull << slot->width) - 1;
}

/* A new counter of ctx on `cpu` (lock held): the model CPU, and the host CPU to pin to (or -1). */
static int counter_on(struct haecer_context *ctx, int cpu, struct haecer_counter **counter,
		      uint32_t *model_cpu, int *host_cpu)
{
	int error = haecer__resolve_cpu(ctx, cpu, model_cpu, host_cpu);

	if (error < 0)
		return error;
	return haecer__counter_new(ctx, counter);
}

/* The request as the perf event msrd's broker opens (haecer_perf_core.c): perf's generic
 * event for a generic name, the programmable encoding placed per the core PMU's format, else
 * the fixed counter's generic event. */
static int brokered_spec(const struct haecer_context *ctx, uint32_t cpu, uint32_t flags,
			 const struct event_request *request, struct haecer_perf_spec *spec)
{
	uint32_t core_type = ctx->machine.cpu_core_type[cpu];
	uint32_t levels = event_flags(flags) & (HAECER_FLAG_USR | HAECER_FLAG_OS);

	if (request->generic >= 0)
		return haecer__perf_generic_spec((unsigned)request->generic, levels, core_type, cpu,
						 spec);
	if (request->programmable)
		return haecer__perf_core_spec(request->evtsel, core_type, cpu, spec);
	return haecer__perf_fixed_spec((unsigned)request->fixed, levels, core_type, cpu, spec);
}

/* Through msrd's perf broker, CPU-wide on the counter's CPU as a slot would count. */
static int open_brokered(struct haecer_context *ctx, int cpu, uint32_t flags,
			 const struct event_request *request, struct haecer_counter **out)
{
	struct haecer_perf_spec spec;
	uint32_t model_cpu;
	int host_cpu;
	int error;

	pthread_mutex_lock(&ctx->lock);
	error = haecer__resolve_cpu(ctx, cpu, &model_cpu, &host_cpu);
	pthread_mutex_unlock(&ctx->lock);
	if (error == 0)
		error = brokered_spec(ctx, model_cpu, flags, request, &spec);
	if (error == 0)
		error = haecer__counter_open_perf_named(ctx, &spec, request->name, out);
	if (error == 0 && (flags & HAECER_FLAG_PIN))
		error = haecer__pin_to(host_cpu, NULL);
	if (error < 0 && *out != NULL) {
		haecer_counter_free(*out);
		*out = NULL;
	}
	return error;
}

static int open_event(struct haecer_context *ctx, int cpu, uint32_t flags,
		      const struct event_request *request, struct haecer_counter **out)
{
	struct haecer_counter *counter = NULL;
	bool have_slot = false;
	uint32_t model_cpu;
	uint64_t config = 0;
	int host_cpu;
	int error;

	if (haecer__counters_brokered(ctx))
		return open_brokered(ctx, cpu, flags, request, out);
	pthread_mutex_lock(&ctx->lock);
	error = counter_on(ctx, cpu, &counter, &model_cpu, &host_cpu);
	if (error < 0)
		goto out;
	error = take_slot(ctx, model_cpu, request, &counter->slot, &config);
	if (error < 0)
		goto out;
	have_slot = true;
	error = start_slot(ctx, &counter->slot, config, request->name);
	if (error < 0)
		goto out;
	describe_event_counter(counter, model_cpu, request->name, config);
	/* Only on request: a pinned thread's mask is inherited by every thread it creates later
	 * (issue 15: an OpenMP program set up in main ran on one CPU). Pinning is the last step,
	 * so a failed setup leaves the thread where it was. */
	if (flags & HAECER_FLAG_PIN)
		error = haecer__pin_to(host_cpu, NULL);
	/* RDPMC reads the CPU the thread is on: only a pinned thread stays on the counter's. */
	if (error == 0 && (flags & HAECER_FLAG_PIN))
		counter->host_cpu = host_cpu;
out:
	if (error < 0 && have_slot)
		haecer_slot_free(ctx->conn, counter->slot.id);
	if (error < 0 && counter != NULL)
		haecer__counter_release(counter);
	pthread_mutex_unlock(&ctx->lock);
	*out = error < 0 ? NULL : counter;
	return error;
}

/* ---- what an event needs ---- */

static int request_fixed(struct haecer_context *ctx, unsigned fixed, uint32_t flags,
			 struct event_request *request)
{
	char why[EVENT_DB_WHY_SIZE] = "";
	uint64_t bits, mask;
	int error;

	error = event_db_encode_fixed(ctx->db, fixed, flags, &bits, &mask, why, sizeof(why));
	if (error < 0)
		return haecer__fail(error, "%s", why);
	request->fixed = (int)fixed;
	request->fixed_field = bits >> (fixed * FIXED_CTR_CTRL_BITS_PER_COUNTER);
	return 0;
}

/* The architectural event whose encoding this is, or -1. */
static int arch_index_of(uint16_t event, uint8_t umask)
{
	for (unsigned i = 0; i < ARCH_EVENT_COUNT; i++) {
		const struct event_arch_event *arch = event_db_arch_event(i);
		if (arch->event == event && arch->umask == umask)
			return (int)i;
	}
	return -1;
}

/* Prefer the fixed counter of an Intel architectural event when flags and cmask allow it; the
 * programmable encoding already in the request stays as the fallback. */
static int prefer_fixed(struct haecer_context *ctx, int arch_index, uint32_t flags,
			uint8_t cmask, struct event_request *request)
{
	int fixed;

	if (arch_index < 0 || is_amd(ctx))
		return 0;
	fixed = event_db_arch_prefer_fixed(ctx->db, (unsigned)arch_index, flags, cmask);
	if (fixed < 0)
		return 0;
	return request_fixed(ctx, (unsigned)fixed, flags, request);
}

static int request_arch(struct haecer_context *ctx, unsigned index, uint32_t flags, uint8_t cmask,
			struct event_request *request)
{
	char why[EVENT_DB_WHY_SIZE] = "";
	int error;

	/* On AMD the database encodes the core-counter event that counts the same thing. */
	error = event_db_encode_arch(ctx->db, index, flags, cmask, &request->evtsel, why,
				     sizeof(why));
	request->programmable = error == 0;
	/* Unavailable as a programmable event (CPUID.0AH:EBX) may still mean available as a
	 * fixed counter. */
	prefer_fixed(ctx, (int)index, flags, cmask, request);
	if (request->fixed < 0 && !request->programmable)
		return haecer__fail(error, "%s", why);
	return 0;
}

static int check_open_arguments(struct haecer_context *ctx, struct haecer_counter **out)
{
	haecer__clear_detail();
	if (out != NULL)
		*out = NULL;
	if (ctx == NULL || out == NULL)
		return haecer__fail(-EINVAL, "no context or no place for the counter");
	return 0;
}

/* generic: asked by perf's generic name (cycles, instructions, ...), which the perf broker
 * opens as perf's generic event (PERF_TYPE_HARDWARE) when no cmask is asked for. */
static int open_arch(struct haecer_context *ctx, int cpu, unsigned arch_event, uint32_t flags,
		     uint8_t cmask, bool generic, struct haecer_counter **out)
{
	const struct event_arch_event *arch = event_db_arch_event(arch_event);
	struct event_request request;
	int error = check_open_arguments(ctx, out);

	if (error < 0)
		return error;
	if (arch == NULL)
		return haecer__fail(-EINVAL, "architectural event %u does not exist (0-%u)",
				    arch_event, ARCH_EVENT_COUNT - 1);
	request_init(&request, arch->name);
	error = request_arch(ctx, arch_event, event_flags(flags), cmask, &request);
	if (error < 0)
		return error;
	if (generic && cmask == 0)
		request.generic = (int)arch_event;
	return open_event(ctx, cpu, flags, &request, out);
}

int haecer_counter_open_arch(struct haecer_context *ctx, int cpu, unsigned arch_event,
			     uint32_t flags, uint8_t cmask, struct haecer_counter **out)
{
	return open_arch(ctx, cpu, arch_event, flags, cmask, false, out);
}

int haecer_counter_open_fixed(struct haecer_context *ctx, int cpu, unsigned fixed,
			      uint32_t flags, struct haecer_counter **out)
{
	char name[32];
	struct event_request request;
	int error = check_open_arguments(ctx, out);

	if (error < 0)
		return error;
	if (event_db_fixed_name(fixed) != NULL)
		snprintf(name, sizeof(name), "%s", event_db_fixed_name(fixed));
	else
		snprintf(name, sizeof(name), "FIXED_CTR%u", fixed);
	request_init(&request, name);
	error = request_fixed(ctx, fixed, event_flags(flags), &request);
	if (error < 0)
		return error;
	return open_event(ctx, cpu, flags, &request, out);
}

int haecer_counter_open_raw(struct haecer_context *ctx, int cpu, uint16_t event, uint8_t umask,
			    uint32_t flags, uint8_t cmask, struct haecer_counter **out)
{
	char why[EVENT_DB_WHY_SIZE] = "";
	struct event_encoding known;
	struct event_request request;
	uint32_t encoded;
	int error = check_open_arguments(ctx, out);

	if (error < 0)
		return error;
	encoded = event_flags(flags);
	/* libpfm4's table of the model decides whether the pair exists; without a table for the
	 * model (a CPU newer than libpfm4) the pair is programmed as given. */
	error = event_db_pfm_check_raw(event_db_of(ctx, cpu), event, umask, &known, why,
				       sizeof(why));
	if (error < 0 && error != -EOPNOTSUPP)
		return haecer__fail(error, "%s", why);
	if (error == 0) {
		char name[HAECER_COUNTER_NAME_MAX];
		pfm_short_name(known.name, name, sizeof(name));
		request_init(&request, name);
	} else {
		char name[32];
		snprintf(name, sizeof(name), "RAW_%03X_%02X", event, umask);
		request_init(&request, name);
	}
	error = event_db_encode_evtsel(event_db_of(ctx, cpu), event, umask, encoded, cmask,
				       &request.evtsel, why, sizeof(why));
	if (error < 0)
		return haecer__fail(error, "%s", why);
	request.programmable = true;
	error = prefer_fixed(ctx, arch_index_of(event, umask), encoded, cmask, &request);
	if (error < 0)
		return error;
	return open_event(ctx, cpu, flags, &request, out);
}

/* SMIs on AMD: PMCx02B, SMIs received (AMD PPR for family 17h/19h, Core::X86::Pmc::Core::
 * LsSmiRx), where Intel has MSR_SMI_COUNT; libpfm4 4.13's Zen tables lack it, so it is encoded
 * here. perf's name of the count is msr/smi/. */
#define AMD_EVENT_SMI_RECEIVED 0x2Bu

static bool is_smi_name(const char *name)
{
	return strcmp(name, "smi") == 0 || strcmp(name, "msr/smi/") == 0;
}

static int open_smi(struct haecer_context *ctx, int cpu, uint32_t flags,
		    struct haecer_counter **out)
{
	char why[EVENT_DB_WHY_SIZE] = "";
	struct event_request request;
	int error;

	if (!is_amd(ctx))
		return haecer__fail(-EOPNOTSUPP, "smi: on Intel SMIs are counted by MSR_SMI_COUNT "
				    "(0x34), not by a counter: read it (energy regions do)");
	request_init(&request, "smi");
	error = event_db_encode_evtsel(event_db_of(ctx, cpu), AMD_EVENT_SMI_RECEIVED, 0,
				       event_flags(flags), 0, &request.evtsel, why, sizeof(why));
	if (error < 0)
		return haecer__fail(error, "%s", why);
	request.programmable = true;
	return open_event(ctx, cpu, flags, &request, out);
}

int haecer_counter_open_named(struct haecer_context *ctx, int cpu, const char *name,
			      uint32_t flags, uint8_t cmask, struct haecer_counter **out)
{
	char why[EVENT_DB_WHY_SIZE] = "";
	struct event_encoding encoding;
	struct event_request request;
	uint32_t encoded;
	int index;
	int error = check_open_arguments(ctx, out);

	if (error < 0)
		return error;
	if (name == NULL)
		return haecer__fail(-EINVAL, "no event name");
	/* perf's energy names (power/energy-pkg/, energy-ram) are energy counters, as in perf. */
	index = haecer_energy_domain_by_name(name, is_amd(ctx));
	if (index >= 0)
		return haecer_counter_open_energy(ctx, cpu, (unsigned)index, out);
	unsigned generic;
	error = haecer__parse_generic_event(name, &generic, &flags);
	if (error < 0)
		return error;
	if (error > 0)
		return open_arch(ctx, cpu, generic, flags, cmask, true, out);
	index = event_db_arch_event_by_name(name);
	if (index >= 0)
		return haecer_counter_open_arch(ctx, cpu, (unsigned)index, flags, cmask, out);
	index = event_db_fixed_by_name(name);
	if (index >= 0 && cmask == 0)
		return haecer_counter_open_fixed(ctx, cpu, (unsigned)index, flags, out);
	if (is_smi_name(name) && cmask == 0)
		return open_smi(ctx, cpu, flags, out);
	encoded = event_flags(flags);
	error = event_db_pfm_encode(event_db_of(ctx, cpu), name, encoded, cmask, &encoding, why,
				    sizeof(why));
	if (error < 0)
		return haecer__fail(error, "%s", why);
	request_init(&request, "");
	pfm_short_name(encoding.name, request.name, sizeof(request.name));
	request.programmable = true;
	request.evtsel = encoding.evtsel;
	if (!(encoding.evtsel & EVTSEL_NOT_FIXED)) {
		error = prefer_fixed(ctx, arch_index_of(encoding.event, encoding.umask), encoded, 0,
				     &request);
		if (error < 0)
			return error;
	}
	return open_event(ctx, cpu, flags, &request, out);
}

/* ---- energy ---- */

static void describe_energy_counter(struct haecer_counter *counter, uint32_t cpu,
				    const struct event_rapl *rapl)
{
	struct haecer_counter_info *info = &counter->info;

	/* perf's name (energy-pkg, ...): what every tool shows for the domain. */
	snprintf(info->name, sizeof(info->name), "%s",
		 haecer_energy_domain_name(rapl->domain->domain));
	info->kind = HAECER_COUNTER_ENERGY;
	info->cpu = cpu;
	info->package = counter->ctx->machine.cpu_package[cpu];
	info->width = 32;
	info->unit_exponent = rapl->exponent;
	info->unit = rapl->joules_per_count;
	info->unit_name = "J";
	info->config = rapl->domain->energy_msr;
	info->counter_address = rapl->domain->energy_msr;
	info->enabled = true;
	counter->width_mask = RAPL_ENERGY_COUNTER_MASK;
	counter->rapl_domain = (unsigned)rapl_domain_of_address(rapl->domain->energy_msr);
}

int haecer_counter_open_energy(struct haecer_context *ctx, int cpu, unsigned domain,
			       struct haecer_counter **out)
{
	char why[EVENT_DB_WHY_SIZE] = "";
	struct haecer_counter *counter = NULL;
	struct event_rapl rapl;
	uint32_t model_cpu;
	uint64_t value;
	int host_cpu;
	int error = check_open_arguments(ctx, out);

	if (error < 0)
		return error;
	error = event_db_rapl_lookup(ctx->db, domain, &rapl, why, sizeof(why));
	if (error < 0)
		return haecer__fail(error, "%s", why);
	pthread_mutex_lock(&ctx->lock);
	error = counter_on(ctx, cpu, &counter, &model_cpu, &host_cpu);
	if (error < 0)
		goto out;
	describe_energy_counter(counter, model_cpu, &rapl);
	/* A first read proves the policy grants the register, so setup is where refusals show. */
	error = haecer__read_locked(counter, &value);
out:
	if (error < 0 && counter != NULL)
		haecer__counter_release(counter);
	pthread_mutex_unlock(&ctx->lock);
	*out = error < 0 ? NULL : counter;
	return error;
}

/* ---- management ---- */

static int control(struct haecer_counter *counter, uint16_t action, const char *what)
{
	struct haecer_context *ctx;
	int error = haecer__counter_lock(counter, &ctx);

	if (error < 0)
		return error;
	if (counter->info.kind == HAECER_COUNTER_ENERGY)
		goto out;
	if (counter->info.kind == HAECER_COUNTER_PERF) {
		error = haecer__perf_control(counter, action);
		goto out;
	}
	error = haecer_slot_control(ctx->conn, &counter->slot.id, 1, action);
	if (error < 0) {
		char text[HAECER_COUNTER_NAME_MAX + 32];
		snprintf(text, sizeof(text), "%s %s", what, counter->info.name);
		haecer__fail_msrd(ctx, error, text);
		goto out;
	}
	if (action == HAECER_SLOT_RESET) {
		counter->value = 0;
		counter->last_raw = 0;
		counter->raw_ns = clock_monotonic_raw_ns();
	} else {
		counter->info.enabled = action == HAECER_SLOT_ENABLE;
	}
out:
	pthread_mutex_unlock(&ctx->lock);
	return error;
}

int haecer_counter_enable(struct haecer_counter *counter)
{
	return control(counter, HAECER_SLOT_ENABLE, "enabling");
}

int haecer_counter_disable(struct haecer_counter *counter)
{
	return control(counter, HAECER_SLOT_DISABLE, "disabling");
}

int haecer_counter_reset(struct haecer_counter *counter)
{
	return control(counter, HAECER_SLOT_RESET, "resetting");
}

void haecer_counter_free(struct haecer_counter *counter)
{
	struct haecer_context *ctx;
	struct haecer_counter *smi;

	if (haecer__counter_lock(counter, &ctx) < 0)
		return;
	/* A failure leaves the slot to msrd, which frees it when the connection ends. */
	if (counter->info.kind != HAECER_COUNTER_ENERGY && counter->info.kind != HAECER_COUNTER_PERF)
		haecer_slot_free(ctx->conn, counter->slot.id);
	smi = counter->smi_counter; /* an AMD energy counter's SMI counter goes with it */
	haecer__ring_detach(counter);
	haecer__counter_release(counter);
	pthread_mutex_unlock(&ctx->lock);
	if (smi != NULL)
		haecer_counter_free(smi);
}

int haecer_counter_info(const struct haecer_counter *counter, struct haecer_counter_info *out)
{
	struct haecer_context *ctx;
	int error;

	if (out == NULL)
		return haecer__fail(-EINVAL, "no place for the counter's description");
	error = haecer__counter_lock(counter, &ctx);
	if (error < 0)
		return error;
	*out = counter->info;
	out->simulated = ctx->simulated;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}
