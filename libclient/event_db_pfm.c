/*
 * libclient/event_db_pfm.c — non-architectural events of the machine's CPU model from libpfm4.
 *
 * The model is msrd's (possibly simulated), not the host's, so libpfm4's own detection (host
 * CPUID) cannot choose the PMU. libpfm4 offers LIBPFM_FORCE_PMU, but that replaces the host PMU
 * for the whole process: an application that uses libpfm4 itself (PAPI, perf tools) would then
 * encode its events for the wrong CPU. Instead haecer initialises libpfm4 with
 * LIBPFM_ENCODE_INACTIVE=1, which only adds the tables of undetected PMUs, reachable solely by
 * an explicit "pmu::" prefix, and always names the PMU. The host's unprefixed lookups and its
 * detected PMUs are unchanged.
 *
 * Limitations (documented in event_db.h's users): the variable is set and removed around the
 * one pfm_initialize() call (setenv is not safe against a concurrent getenv in another thread);
 * and when the application initialised libpfm4 before haecer without that variable, only the
 * host's own model resolves — the error says so.
 */
#include "libclient/event_db.h"

#include <errno.h>
#include <perfmon/pfmlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hw/core_type.h"

#define PFM_ENCODE_INACTIVE_VARIABLE "LIBPFM_ENCODE_INACTIVE"
#define PFM_FORCE_PMU_VARIABLE "LIBPFM_FORCE_PMU"
#define PFM_PMU_DELIMITER "::"
#define PFM_NAME_MAX 256u
/* libpfm4's per-core-type tables of Alder/Raptor Lake (lib/pfmlib_intel_adl.c, libpfm4 4.14+). */
#define PFM_HYBRID_CORE_PMU "adl_glc"
#define PFM_HYBRID_ATOM_PMU "adl_grt"

/* A (event, umask) pair libpfm4 can encode for the model, for event_db_pfm_check_raw(). */
struct event_pfm_pair {
	uint16_t event;
	uint8_t umask;
	uint64_t evtsel;
	char *name;
};

/* Family/model ranges -> libpfm4 PMU, from libpfm4's own detection tables (lib/pfmlib_intel_*.c,
 * pfmlib_amd64.c amd64_get_revision) so that a model maps to the PMU libpfm4 would pick on that
 * very CPU. Names newer than Debian 12's libpfm4 4.13 (adl_glc, emr, gnr, zen5) are listed so
 * the error says what is missing and a newer libpfm4 works unchanged. */
struct pfm_model_range {
	enum event_vendor vendor;
	uint32_t family;
	uint32_t model_first, model_last;
	uint32_t stepping_first, stepping_last;
	const char *pmu;
};

#define INTEL_MODEL(first, last, name) {EVENT_VENDOR_INTEL, 6, first, last, 0, 15, name}
#define AMD_FAMILY(family, first, last, name) {EVENT_VENDOR_AMD, family, first, last, 0, 15, name}

static const struct pfm_model_range pfm_models[] = {
	INTEL_MODEL(15, 15, "core"), INTEL_MODEL(23, 23, "core"), INTEL_MODEL(29, 29, "core"),
	INTEL_MODEL(28, 28, "atom"), INTEL_MODEL(38, 39, "atom"), INTEL_MODEL(53, 54, "atom"),
	INTEL_MODEL(26, 26, "nhm"), INTEL_MODEL(30, 31, "nhm"), INTEL_MODEL(46, 46, "nhm_ex"),
	INTEL_MODEL(37, 37, "wsm"), INTEL_MODEL(44, 44, "wsm_dp"), INTEL_MODEL(47, 47, "wsm_dp"),
	INTEL_MODEL(42, 42, "snb"), INTEL_MODEL(45, 45, "snb_ep"),
	INTEL_MODEL(58, 58, "ivb"), INTEL_MODEL(62, 62, "ivb_ep"),
	INTEL_MODEL(60, 60, "hsw"), INTEL_MODEL(69, 70, "hsw"), INTEL_MODEL(63, 63, "hsw_ep"),
	INTEL_MODEL(61, 61, "bdw"), INTEL_MODEL(71, 71, "bdw"),
	INTEL_MODEL(79, 79, "bdw_ep"), INTEL_MODEL(86, 86, "bdw_ep"),
	INTEL_MODEL(55, 55, "slm"), INTEL_MODEL(76, 77, "slm"),
	INTEL_MODEL(92, 92, "glm"), INTEL_MODEL(95, 95, "glm"),
	INTEL_MODEL(87, 87, "knl"), INTEL_MODEL(133, 133, "knm"),
	INTEL_MODEL(78, 78, "skl"), INTEL_MODEL(94, 94, "skl"), INTEL_MODEL(142, 142, "skl"),
	INTEL_MODEL(158, 158, "skl"), INTEL_MODEL(165, 166, "skl"),
	/* Skylake-SP and Cascade Lake share model 85; libpfm4 splits them at stepping 5. */
	{EVENT_VENDOR_INTEL, 6, 85, 85, 0, 4, "skx"},
	{EVENT_VENDOR_INTEL, 6, 85, 85, 5, 15, "clx"},
	INTEL_MODEL(108, 108, "icl"), INTEL_MODEL(125, 126, "icl"), INTEL_MODEL(157, 157, "icl"),
	INTEL_MODEL(140, 141, "icl"), INTEL_MODEL(167, 167, "icl"),
	INTEL_MODEL(106, 106, "icx"),
	INTEL_MODEL(0x86, 0x86, "tmt"), INTEL_MODEL(0x96, 0x96, "tmt"),
	INTEL_MODEL(143, 143, "spr"), INTEL_MODEL(207, 207, "emr"),
	INTEL_MODEL(0x97, 0x97, "adl_glc"), INTEL_MODEL(0x9A, 0x9A, "adl_glc"),
	INTEL_MODEL(0xB7, 0xB7, "adl_glc"), INTEL_MODEL(0xBA, 0xBA, "adl_glc"),
	INTEL_MODEL(0xBF, 0xBF, "adl_glc"),
	INTEL_MODEL(173, 174, "gnr"),
	AMD_FAMILY(0x10, 0x00, 0x03, "amd64_fam10h_barcelona"),
	AMD_FAMILY(0x10, 0x04, 0x06, "amd64_fam10h_shanghai"),
	AMD_FAMILY(0x10, 0x07, 0x07, "amd64_fam10h_barcelona"),
	AMD_FAMILY(0x10, 0x08, 0x09, "amd64_fam10h_istanbul"),
	AMD_FAMILY(0x10, 0x0A, 0xFF, "amd64_fam10h_barcelona"),
	AMD_FAMILY(0x11, 0x00, 0xFF, "amd64_fam11h_turion"),
	AMD_FAMILY(0x12, 0x00, 0xFF, "amd64_fam12h_llano"),
	AMD_FAMILY(0x14, 0x00, 0xFF, "amd64_fam14h_bobcat"),
	AMD_FAMILY(0x15, 0x00, 0xFF, "amd64_fam15h_interlagos"),
	AMD_FAMILY(0x16, 0x00, 0xFF, "amd64_fam16h"),
	AMD_FAMILY(0x17, 0x00, 0x2F, "amd64_fam17h_zen1"),
	AMD_FAMILY(0x17, 0x30, 0xFF, "amd64_fam17h_zen2"),
	AMD_FAMILY(0x19, 0x00, 0x0F, "amd64_fam19h_zen3"),
	AMD_FAMILY(0x19, 0x10, 0x1F, "amd64_fam19h_zen4"),
	AMD_FAMILY(0x19, 0x20, 0x5F, "amd64_fam19h_zen3"),
	AMD_FAMILY(0x19, 0x60, 0xFF, "amd64_fam19h_zen4"),
	AMD_FAMILY(0x1A, 0x00, 0xFF, "amd64_fam1ah_zen5"),
};

static pthread_once_t pfm_once = PTHREAD_ONCE_INIT;
static int pfm_init_status = PFM_ERR_NOINIT;

static void pfm_initialize_once(void)
{
	bool set_here = getenv(PFM_ENCODE_INACTIVE_VARIABLE) == NULL;

	/* libpfm4 copies the value at initialisation, so the variable can go right after. */
	if (set_here)
		setenv(PFM_ENCODE_INACTIVE_VARIABLE, "1", 0);
	pfm_init_status = pfm_initialize();
	if (set_here)
		unsetenv(PFM_ENCODE_INACTIVE_VARIABLE);
}

static int pfm_ready(char *why, size_t why_size)
{
	pthread_once(&pfm_once, pfm_initialize_once);
	if (pfm_init_status != PFM_SUCCESS) {
		event_db_why(why, why_size, "libpfm4 failed to initialise: %s",
			     pfm_strerror(pfm_init_status));
		return -EOPNOTSUPP;
	}
	return 0;
}

static int pfm_pmu_info(int pmu_id, pfm_pmu_info_t *info)
{
	memset(info, 0, sizeof(*info));
	info->size = sizeof(*info);
	return pfm_get_pmu_info((pfm_pmu_t)pmu_id, info);
}

/* pfm_pmu_t of a PMU name in the installed libpfm4, or -1. */
static int pfm_pmu_id_of(const char *name)
{
	pfm_pmu_info_t info;

	for (int id = PFM_PMU_NONE + 1; id < PFM_PMU_MAX; id++)
		if (pfm_pmu_info(id, &info) == PFM_SUCCESS && info.name &&
		    strcasecmp(info.name, name) == 0)
			return id;
	return -1;
}

const char *event_db_pfm_pmu_for(enum event_vendor vendor, uint32_t family, uint32_t model,
				 uint32_t stepping)
{
	for (size_t i = 0; i < sizeof(pfm_models) / sizeof(pfm_models[0]); i++) {
		const struct pfm_model_range *range = &pfm_models[i];

		if (range->vendor == vendor && range->family == family &&
		    model >= range->model_first && model <= range->model_last &&
		    stepping >= range->stepping_first && stepping <= range->stepping_last)
			return range->pmu;
	}
	return NULL;
}

void event_db_pfm_open(struct event_db *db)
{
	const struct event_machine *machine = &db->machine;

	pthread_mutex_init(&db->pfm_lock, NULL);
	db->pmu_id = -1;
	db->pmu_name = event_db_pfm_pmu_for(db->caps.vendor, machine->family, machine->model,
					    machine->stepping);
	/* Hybrid Alder/Raptor Lake: libpfm4 has one table per core type, and a Golden Cove
	 * encoding programmed on a Gracemont E-core counts something else. */
	if (machine->core_type == CPU_CORE_TYPE_ATOM && db->pmu_name != NULL &&
	    strcmp(db->pmu_name, PFM_HYBRID_CORE_PMU) == 0)
		db->pmu_name = PFM_HYBRID_ATOM_PMU;
}

void event_db_pfm_close(struct event_db *db)
{
	for (size_t i = 0; i < db->pfm_pair_count; i++)
		free(db->pfm_pairs[i].name);
	free(db->pfm_pairs);
	pthread_mutex_destroy(&db->pfm_lock);
}

const char *event_db_pmu_name(const struct event_db *db)
{
	return db->pmu_name;
}

/* LIBPFM_FORCE_PMU, set by the application, keeps every other PMU out of libpfm4. */
static void explain_forced(const struct event_db *db, char *why, size_t why_size)
{
	event_db_why(why, why_size, "%s=%s restricts libpfm4 to one PMU in this process, so the "
		     "event table '%s' of this CPU is unavailable", PFM_FORCE_PMU_VARIABLE,
		     getenv(PFM_FORCE_PMU_VARIABLE), db->pmu_name);
}

/* libpfm4 initialised and the model's PMU present in it; resolves pmu_id on first use. */
static int pfm_model_ready(struct event_db *db, char *why, size_t why_size)
{
	char description[128];
	int error = pfm_ready(why, why_size);
	int id;

	if (error < 0)
		return error;
	if (!db->pmu_name) {
		event_db_why(why, why_size, "no libpfm4 event table is known for %s",
			     event_db_describe(db, description, sizeof(description)));
		return -EOPNOTSUPP;
	}
	pthread_mutex_lock(&db->pfm_lock);
	if (db->pmu_id < 0)
		db->pmu_id = pfm_pmu_id_of(db->pmu_name);
	id = db->pmu_id;
	pthread_mutex_unlock(&db->pfm_lock);
	if (id < 0 && getenv(PFM_FORCE_PMU_VARIABLE)) {
		explain_forced(db, why, why_size);
		return -EOPNOTSUPP;
	}
	if (id < 0) {
		event_db_why(why, why_size, "the installed libpfm4 (%#x) has no event table '%s' for "
			     "%s", (unsigned)pfm_get_version(), db->pmu_name,
			     event_db_describe(db, description, sizeof(description)));
		return -EOPNOTSUPP;
	}
	return 0;
}

static uint16_t event_of_code(const struct event_db *db, uint64_t code)
{
	uint16_t event = (uint16_t)(code & PERFEVTSEL_EVENT_MASK);

	if (db->caps.vendor == EVENT_VENDOR_AMD)
		event |= (uint16_t)(((code >> 32) & 0xF) << 8);
	return event;
}

/* Encode a full "pmu::..." name; libpfm4's status is returned as is (PFM_SUCCESS or < 0). */
static int pfm_encode_full(const struct event_db *db, const char *full, int plm,
			   struct event_encoding *out)
{
	pfm_pmu_encode_arg_t argument;
	char *canonical = NULL;
	int status;

	memset(&argument, 0, sizeof(argument));
	argument.size = sizeof(argument);
	argument.fstr = &canonical;
	status = pfm_get_os_event_encoding(full, plm, PFM_OS_NONE, &argument);
	if (status != PFM_SUCCESS)
		goto out;
	if (argument.count != 1) {
		/* e.g. OFFCORE_RESPONSE: a second MSR haecer does not program */
		status = PFM_ERR_NOTSUPP;
		goto out;
	}
	out->evtsel = argument.codes[0] & ~(PERFEVTSEL_EN | PERFEVTSEL_INT);
	out->event = event_of_code(db, argument.codes[0]);
	out->umask = (uint8_t)(argument.codes[0] >> PERFEVTSEL_UMASK_SHIFT);
	snprintf(out->name, sizeof(out->name), "%s", canonical ? canonical : full);
out:
	free(argument.codes);
	free(canonical);
	return status;
}

/* ---- the (event, umask) table ---- */

static int pair_append(struct event_db *db, size_t *capacity, const char *name,
		       const struct event_encoding *encoding)
{
	struct event_pfm_pair *pair;

	if (db->pfm_pair_count == *capacity) {
		size_t grown = *capacity ? *capacity * 2 : 256;
		struct event_pfm_pair *pairs = realloc(db->pfm_pairs, grown * sizeof(*pairs));

		if (!pairs)
			return -ENOMEM;
		db->pfm_pairs = pairs;
		*capacity = grown;
	}
	pair = &db->pfm_pairs[db->pfm_pair_count];
	pair->name = strdup(name);
	if (!pair->name)
		return -ENOMEM;
	pair->event = encoding->event;
	pair->umask = encoding->umask;
	pair->evtsel = encoding->evtsel;
	db->pfm_pair_count++;
	return 0;
}

/* Encode "pmu::event[:umask]" and append it when libpfm4 accepts it alone (events that need
 * a second unit mask or an extra MSR are skipped: no raw pair can express them). */
static int pair_try(struct event_db *db, size_t *capacity, const char *event, const char *umask)
{
	struct event_encoding encoding;
	char full[PFM_NAME_MAX];
	int length;

	length = snprintf(full, sizeof(full), "%s%s%s%s%s", db->pmu_name, PFM_PMU_DELIMITER,
			  event, umask ? ":" : "", umask ? umask : "");
	if (length < 0 || (size_t)length >= sizeof(full))
		return 0;
	if (pfm_encode_full(db, full, PFM_PLM0 | PFM_PLM3, &encoding) != PFM_SUCCESS)
		return 0;
	return pair_append(db, capacity, full, &encoding);
}

static int pairs_of_event(struct event_db *db, size_t *capacity, int index)
{
	pfm_event_info_t event;
	bool has_umask = false;
	int error = 0;

	memset(&event, 0, sizeof(event));
	event.size = sizeof(event);
	if (pfm_get_event_info(index, PFM_OS_NONE, &event) != PFM_SUCCESS)
		return 0;
	for (int a = 0; a < event.nattrs && error == 0; a++) {
		pfm_event_attr_info_t attribute;

		memset(&attribute, 0, sizeof(attribute));
		attribute.size = sizeof(attribute);
		if (pfm_get_event_attr_info(index, a, PFM_OS_NONE, &attribute) != PFM_SUCCESS ||
		    attribute.type != PFM_ATTR_UMASK)
			continue;
		has_umask = true;
		error = pair_try(db, capacity, event.name, attribute.name);
	}
	if (!has_umask && error == 0)
		error = pair_try(db, capacity, event.name, NULL);
	return error;
}

static int pairs_build(struct event_db *db)
{
	pfm_pmu_info_t pmu;
	size_t capacity = 0;
	int error = 0;

	if (pfm_pmu_info(db->pmu_id, &pmu) != PFM_SUCCESS)
		return -EOPNOTSUPP;
	for (int index = pmu.first_event; index != -1 && error == 0;
	     index = pfm_get_event_next(index))
		error = pairs_of_event(db, &capacity, index);
	if (error == 0 && db->pfm_pair_count == 0)
		error = -EOPNOTSUPP;
	return error;
}

/* Build the table once per database; later calls return the first outcome. */
static int pairs_ready(struct event_db *db, char *why, size_t why_size)
{
	int error = pfm_model_ready(db, why, why_size);

	if (error < 0)
		return error;
	pthread_mutex_lock(&db->pfm_lock);
	if (!db->pfm_table_built) {
		db->pfm_table_error = pairs_build(db);
		db->pfm_table_built = true;
	}
	error = db->pfm_table_error;
	pthread_mutex_unlock(&db->pfm_lock);
	if (error == -EOPNOTSUPP && getenv(PFM_FORCE_PMU_VARIABLE))
		explain_forced(db, why, why_size);
	else if (error == -EOPNOTSUPP)
		event_db_why(why, why_size,
			     "libpfm4 cannot encode events of PMU '%s' in this process: it was "
			     "initialised before haecer without LIBPFM_ENCODE_INACTIVE=1, so only "
			     "the host CPU's own events resolve", db->pmu_name);
	else if (error < 0)
		event_db_why(why, why_size, "out of memory building the '%s' event table",
			     db->pmu_name);
	return error;
}

int event_db_pfm_list(struct event_db *db, void (*each)(void *arg, const char *name), void *arg,
		      char *why, size_t why_size)
{
	int error = pairs_ready(db, why, why_size);

	if (error < 0)
		return error;
	/* The table is immutable once built. */
	for (size_t i = 0; each != NULL && i < db->pfm_pair_count; i++) {
		const char *name = db->pfm_pairs[i].name;
		const char *bare = strstr(name, PFM_PMU_DELIMITER);
		each(arg, bare != NULL ? bare + strlen(PFM_PMU_DELIMITER) : name);
	}
	return (int)db->pfm_pair_count;
}

/* ---- public lookups ---- */

static int status_to_error(int status)
{
	switch (status) {
	case PFM_ERR_NOTFOUND:
	case PFM_ERR_ATTR:
		return -ENOENT;
	case PFM_ERR_NOTSUPP:
		return -EOPNOTSUPP;
	case PFM_ERR_NOMEM:
		return -ENOMEM;
	default:
		return -EINVAL;
	}
}

/* The part of `name` after a "pmu::" prefix, after checking the prefix names this model. */
static int strip_prefix(struct event_db *db, const char *name, const char **rest, char *why,
			size_t why_size)
{
	const char *delimiter = strstr(name, PFM_PMU_DELIMITER);
	char prefix[64];
	size_t length;

	*rest = name;
	if (!delimiter)
		return 0;
	length = (size_t)(delimiter - name);
	if (length >= sizeof(prefix)) {
		event_db_why(why, why_size, "unknown libpfm4 PMU in event name '%s'", name);
		return -ENOENT;
	}
	memcpy(prefix, name, length);
	prefix[length] = '\0';
	*rest = delimiter + strlen(PFM_PMU_DELIMITER);
	if (strcasecmp(prefix, db->pmu_name) == 0)
		return 0;
	if (pfm_pmu_id_of(prefix) < 0) {
		event_db_why(why, why_size, "unknown libpfm4 PMU '%s' in event name '%s'", prefix,
			     name);
		return -ENOENT;
	}
	event_db_why(why, why_size, "'%s' is an event of PMU '%s'; this CPU's PMU is '%s'", name,
		     prefix, db->pmu_name);
	return -EOPNOTSUPP;
}

/* "pmu::rest" plus libpfm4 modifiers for the flags other than privilege levels. */
static int compose_name(const struct event_db *db, const char *rest, uint32_t flags,
			uint8_t cmask, char *full, size_t size)
{
	int length = snprintf(full, size, "%s%s%s%s%s%s", db->pmu_name, PFM_PMU_DELIMITER, rest,
			      flags & EVENT_FLAG_EDGE ? ":e=1" : "",
			      flags & EVENT_FLAG_INV ? ":i=1" : "",
			      flags & EVENT_FLAG_ANY ? ":t=1" : "");

	if (length >= 0 && (size_t)length < size && cmask)
		length += snprintf(full + length, size - (size_t)length, ":c=%u", cmask);
	return length < 0 || (size_t)length >= size ? -EINVAL : 0;
}

static int plm_of(uint32_t flags)
{
	return (flags & EVENT_FLAG_USR ? PFM_PLM3 : 0) | (flags & EVENT_FLAG_OS ? PFM_PLM0 : 0);
}

static void explain_status(const struct event_db *db, int status, const char *name, char *why,
			   size_t why_size)
{
	switch (status) {
	case PFM_ERR_NOTFOUND:
		event_db_why(why, why_size, "no event '%s' in libpfm4's table for PMU '%s'", name,
			     db->pmu_name);
		break;
	case PFM_ERR_ATTR:
		event_db_why(why, why_size, "'%s': unknown unit mask or modifier for PMU '%s'",
			     name, db->pmu_name);
		break;
	case PFM_ERR_NOTSUPP:
		event_db_why(why, why_size, "'%s' needs more than one register (e.g. an offcore "
			     "response MSR), which haecer does not program", name);
		break;
	case PFM_ERR_UMASK:
		event_db_why(why, why_size, "'%s' needs a unit mask (libpfm4: %s)", name,
			     pfm_strerror(status));
		break;
	default:
		event_db_why(why, why_size, "'%s': %s", name, pfm_strerror(status));
		break;
	}
}

int event_db_pfm_encode(struct event_db *db, const char *name, uint32_t flags, uint8_t cmask,
			struct event_encoding *out, char *why, size_t why_size)
{
	struct event_encoding encoding;
	char full[PFM_NAME_MAX];
	const char *rest;
	int status;
	int error;

	if (!name || !out || !*name || strlen(name) >= PFM_NAME_MAX) {
		event_db_why(why, why_size, "event name missing, empty or longer than %u bytes",
			     PFM_NAME_MAX - 1);
		return -EINVAL;
	}
	error = pfm_model_ready(db, why, why_size);
	if (error < 0)
		return error;
	error = strip_prefix(db, name, &rest, why, why_size);
	if (error < 0)
		return error;
	error = event_db_check_flags(db, flags, cmask, why, why_size);
	if (error < 0)
		return error;
	if (compose_name(db, rest, flags, cmask, full, sizeof(full)) < 0) {
		event_db_why(why, why_size, "event name '%s' too long", name);
		return -EINVAL;
	}
	status = pfm_encode_full(db, full, plm_of(flags), &encoding);
	if (status == PFM_ERR_NOTFOUND) {
		/* Unknown name, or a PMU libpfm4 will not encode here: the table tells which. */
		error = pairs_ready(db, why, why_size);
		if (error < 0)
			return error;
	}
	if (status != PFM_SUCCESS) {
		explain_status(db, status, name, why, why_size);
		return status_to_error(status);
	}
	*out = encoding;
	return 0;
}

/* Index of the best pair: one without CMASK/INV/EDGE (the plain event) before one that only
 * shares its event and unit mask. */
static long pair_find(const struct event_db *db, uint16_t event, uint8_t umask)
{
	const uint64_t filters = (0xFFull << PERFEVTSEL_CMASK_SHIFT) | PERFEVTSEL_INV |
				 PERFEVTSEL_EDGE;
	long found = -1;

	for (size_t i = 0; i < db->pfm_pair_count; i++) {
		const struct event_pfm_pair *pair = &db->pfm_pairs[i];

		if (pair->event != event || pair->umask != umask)
			continue;
		if (!(pair->evtsel & filters))
			return (long)i;
		if (found < 0)
			found = (long)i;
	}
	return found;
}

int event_db_pfm_check_raw(struct event_db *db, uint16_t event, uint8_t umask,
			   struct event_encoding *out, char *why, size_t why_size)
{
	const struct event_pfm_pair *pair;
	int error = pairs_ready(db, why, why_size);
	long index;

	if (error < 0)
		return error;
	index = pair_find(db, event, umask);
	if (index < 0) {
		event_db_why(why, why_size, "libpfm4's table for PMU '%s' has no event with event "
			     "select %#x and unit mask %#x", db->pmu_name, event, umask);
		return -ENOENT;
	}
	pair = &db->pfm_pairs[index];
	if (out) {
		out->evtsel = pair->evtsel;
		out->event = pair->event;
		out->umask = pair->umask;
		snprintf(out->name, sizeof(out->name), "%s", pair->name);
	}
	return 0;
}
