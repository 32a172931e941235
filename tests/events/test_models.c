/*
 * tests/events/test_models.c — the event database on every shipped simulated model
 * (configs/models/NAME.yaml), fed with the machine description the real simulated backend of
 * msrd reports (backend_machine_info, the source of MACHINE_INFO). For the models we know, the
 * expected capabilities, PMU, event codes and RAPL units are written here from the manuals;
 * any other model still has to open, resolve every RAPL domain it claims, and agree with its
 * own CPUID leaf on fixed counters. Skips when no model is shipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "backend/backend.h"
#include "backend/backend_sim.h"
#include "tests/events/machines.h"

#define MAX_MODELS 32
#define USR_OS (EVENT_FLAG_USR | EVENT_FLAG_OS)

struct known_event {
	const char *name;       /* libpfm4 name; NULL ends the list */
	uint64_t evtsel;        /* SDM / PPR event select, unit mask, counter mask, USR|OS */
};

struct known_model {
	const char *file;
	enum event_vendor vendor;
	uint8_t version, gp_counters, gp_width, fixed_counters, arch_events;
	const char *pmu;
	struct known_event events[3];
	uint16_t raw_pairs[3][2];  /* the sim's own non-architectural events: event, umask */
	int8_t exponents[RAPL_DOMAIN_COUNT]; /* -1: domain absent */
};

static const struct known_model known_models[] = {
	{"sandybridge", EVENT_VENDOR_INTEL, 3, 4, 48, 3, 0x7F, "snb",
	 {{"L1D.REPLACEMENT", 0x00030151}, {"MEM_LOAD_UOPS_RETIRED:L1_HIT", 0x000301D1}},
	 {{0xD0, 0x81}, {0x0E, 0x01}},
	 {[RAPL_DOMAIN_PKG] = 16, [RAPL_DOMAIN_PP0] = 16, [RAPL_DOMAIN_PP1] = 16,
	  [RAPL_DOMAIN_DRAM] = -1, [RAPL_DOMAIN_PSYS] = -1, [RAPL_DOMAIN_AMD_CORE] = -1,
	  [RAPL_DOMAIN_AMD_PKG] = -1}},
	{"skylake-sp", EVENT_VENDOR_INTEL, 4, 4, 48, 3, 0x7F, "skx",
	 {{"MEM_LOAD_RETIRED.L1_HIT", 0x000301D1}, {"CYCLE_ACTIVITY:STALLS_TOTAL", 0x040304A3}},
	 {{0xD0, 0x81}, {0xD1, 0x01}},
	 {[RAPL_DOMAIN_PKG] = 14, [RAPL_DOMAIN_PP0] = -1, [RAPL_DOMAIN_PP1] = -1,
	  [RAPL_DOMAIN_DRAM] = 16, [RAPL_DOMAIN_PSYS] = -1, [RAPL_DOMAIN_AMD_CORE] = -1,
	  [RAPL_DOMAIN_AMD_PKG] = -1}},
	{"zen3", EVENT_VENDOR_AMD, 0, 0, 0, 0, 0, "amd64_fam19h_zen3",
	 {{"RETIRED_INSTRUCTIONS", 0x000300C0}, {"CYCLES_NOT_IN_HALT", 0x00030076}},
	 {{0xC0, 0x00}},
	 {[RAPL_DOMAIN_PKG] = -1, [RAPL_DOMAIN_PP0] = -1, [RAPL_DOMAIN_PP1] = -1,
	  [RAPL_DOMAIN_DRAM] = -1, [RAPL_DOMAIN_PSYS] = -1, [RAPL_DOMAIN_AMD_CORE] = 16,
	  [RAPL_DOMAIN_AMD_PKG] = 16}},
};

static char model_names[MAX_MODELS][32];
static int model_count;

static const char *models_dir(void)
{
	static char dir[PATH_MAX];
	const char *source = getenv("HAECER_SOURCE");

	snprintf(dir, sizeof(dir), "%s/configs/models", source ? source : ".");
	return dir;
}

/* What MACHINE_INFO carries, copied field by field as the HAECER layer will. */
static struct event_machine machine_of(const struct machine_info *info)
{
	struct event_machine machine;

	memset(&machine, 0, sizeof(machine));
	memcpy(machine.vendor, info->vendor, sizeof(machine.vendor));
	machine.family = info->family;
	machine.model = info->model;
	machine.stepping = info->stepping;
	memcpy(machine.cpuid_0a, info->cpuid_0a, sizeof(machine.cpuid_0a));
	machine.rapl_domains = info->rapl_domains;
	machine.rapl_power_unit = info->rapl_power_unit;
	memcpy(machine.rapl_energy_exponent, info->rapl_energy_exponent,
	       sizeof(machine.rapl_energy_exponent));
	memcpy(machine.sim_model, info->sim_model, sizeof(machine.sim_model));
	return machine;
}

static struct event_db *open_model(const char *name)
{
	struct backend_options options = {
		.kind = BACKEND_SIM,
		.sim_model = name,
		.models_dir = models_dir(),
		.sim_virtual_time = true,
	};
	struct msr_backend *backend = NULL;
	struct machine_info info;
	struct event_machine machine;
	struct event_db *db = NULL;
	char why[512] = "";
	int error = backend_open(&options, &backend, why, sizeof(why));

	if (error < 0)
		fail_msg("sim model %s: %d %s", name, error, why);
	assert_int_equal(backend_machine_info(backend, &info), 0);
	backend_close(backend);
	assert_string_equal(info.sim_model, name);
	machine = machine_of(&info);
	assert_int_equal(event_db_open(&machine, &db), 0);
	return db;
}

static void check_known(struct event_db *db, const struct known_model *known)
{
	const struct event_caps *caps = event_db_caps(db);
	struct event_encoding encoding;
	struct event_rapl rapl;
	char why[EVENT_DB_WHY_SIZE] = "";

	assert_int_equal(caps->vendor, known->vendor);
	assert_int_equal(caps->version, known->version);
	assert_int_equal(caps->gp_counters, known->gp_counters);
	assert_int_equal(caps->gp_width, known->gp_width);
	assert_int_equal(caps->fixed_counters, known->fixed_counters);
	assert_int_equal(caps->arch_events, known->arch_events);
	assert_string_equal(event_db_pmu_name(db), known->pmu);
	for (const struct known_event *event = known->events; event->name; event++) {
		if (event_db_pfm_encode(db, event->name, USR_OS, 0, &encoding, why, sizeof(why)))
			fail_msg("%s %s: %s", known->file, event->name, why);
		assert_int_equal(encoding.evtsel, event->evtsel);
	}
	for (size_t i = 0; i < 3 && (known->raw_pairs[i][0] || known->raw_pairs[i][1]); i++)
		if (event_db_pfm_check_raw(db, known->raw_pairs[i][0], (uint8_t)known->raw_pairs[i][1],
					   NULL, why, sizeof(why)))
			fail_msg("%s: %s", known->file, why);
	for (unsigned d = 0; d < RAPL_DOMAIN_COUNT; d++) {
		int error = event_db_rapl_lookup(db, d, &rapl, why, sizeof(why));

		if (known->exponents[d] < 0) {
			assert_int_equal(error, -EOPNOTSUPP);
			continue;
		}
		if (error)
			fail_msg("%s %s: %s", known->file, event_db_rapl_domain(d)->name, why);
		assert_int_equal(rapl.exponent, known->exponents[d]);
	}
}

/* What any model must satisfy, known or not. */
static void check_generic(struct event_db *db, const char *name)
{
	const struct event_caps *caps = event_db_caps(db);
	struct event_rapl rapl;
	char why[EVENT_DB_WHY_SIZE] = "";

	for (unsigned d = 0; d < RAPL_DOMAIN_COUNT; d++)
		if (db->machine.rapl_domains & (1u << d) &&
		    event_db_rapl_lookup(db, d, &rapl, why, sizeof(why)))
			fail_msg("%s claims %s: %s", name, event_db_rapl_domain(d)->name, why);
	for (unsigned f = 0; f < FIXED_NAMED_COUNT; f++) {
		/* SDM: FxCtr[f] exists when EDX[4:0] > f or, from version 5, ECX bit f is set. */
		uint32_t ecx = db->machine.cpuid_0a[2], edx = db->machine.cpuid_0a[3];
		bool expected = caps->version >= 2 &&
				((edx & 0x1F) > f || (caps->version >= 5 && (ecx >> f) & 1));

		assert_int_equal(event_db_fixed_available(db, f, NULL, 0) == 0, expected);
	}
	if (caps->version >= 2 && caps->fixed_counters >= 1)
		assert_int_equal(event_db_arch_prefer_fixed(db, ARCH_EVENT_INSTRUCTIONS, USR_OS, 0),
				 FIXED_INST_RETIRED_ANY);
}

static void every_shipped_model(void **state)
{
	(void)state;
	for (int m = 0; m < model_count; m++) {
		struct event_db *db = open_model(model_names[m]);
		bool known = false;

		check_generic(db, model_names[m]);
		for (size_t k = 0; k < sizeof(known_models) / sizeof(known_models[0]); k++)
			if (strcmp(known_models[k].file, model_names[m]) == 0) {
				check_known(db, &known_models[k]);
				known = true;
			}
		if (!known)
			print_message("model %s: generic checks only (no expectations written)\n",
				      model_names[m]);
		event_db_close(db);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_shipped_model),
	};

	log_init("test_models", LOG_LEVEL_ERROR, false);
	unsetenv("LIBPFM_ENCODE_INACTIVE");
	model_count = backend_sim_list_models(models_dir(), model_names, MAX_MODELS);
	if (model_count <= 0) {
		printf("no simulated models in %s (%d)\n", models_dir(), model_count);
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
