/*
 * backend/sim/sim_model.c — reading configs/models/NAME.yaml into a struct sim_model, and finding
 * the directory the models live in.
 */
#include "backend/sim/sim_model.h"

#include <cyaml/cyaml.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "backend/backend.h"
#include "backend/backend_sim.h"

/* ---- schema ---- */

static const cyaml_strval_t domain_names[] = {
	{ "pkg", RAPL_DOMAIN_PKG },   { "pp0", RAPL_DOMAIN_PP0 },
	{ "pp1", RAPL_DOMAIN_PP1 },   { "dram", RAPL_DOMAIN_DRAM },
	{ "psys", RAPL_DOMAIN_PSYS }, { "amd_core", RAPL_DOMAIN_AMD_CORE },
	{ "amd_pkg", RAPL_DOMAIN_AMD_PKG },
};

static const cyaml_schema_field_t domain_fields[] = {
	CYAML_FIELD_ENUM("domain", CYAML_FLAG_DEFAULT, struct sim_model_domain, domain,
			 domain_names, sizeof(domain_names) / sizeof(domain_names[0])),
	CYAML_FIELD_FLOAT("idle_watts", CYAML_FLAG_DEFAULT, struct sim_model_domain, idle_watts),
	CYAML_FIELD_FLOAT("max_watts", CYAML_FLAG_DEFAULT, struct sim_model_domain, max_watts),
	CYAML_FIELD_UINT_PTR("energy_exponent", CYAML_FLAG_OPTIONAL, struct sim_model_domain,
			     energy_exponent),
	CYAML_FIELD_END
};

static const cyaml_schema_value_t domain_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct sim_model_domain, domain_fields),
};

static const cyaml_schema_field_t rapl_fields[] = {
	CYAML_FIELD_UINT("unit", CYAML_FLAG_DEFAULT, struct sim_model_rapl, unit),
	CYAML_FIELD_UINT_PTR("power_info", CYAML_FLAG_OPTIONAL, struct sim_model_rapl, power_info),
	CYAML_FIELD_SEQUENCE("domains", CYAML_FLAG_POINTER, struct sim_model_rapl, domains,
			     &domain_entry, 1, RAPL_DOMAIN_COUNT),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t event_fields[] = {
	CYAML_FIELD_UINT("event", CYAML_FLAG_DEFAULT, struct sim_model_event, event),
	CYAML_FIELD_UINT("umask", CYAML_FLAG_DEFAULT, struct sim_model_event, umask),
	CYAML_FIELD_FLOAT("per_kinst", CYAML_FLAG_DEFAULT, struct sim_model_event, per_kinst),
	CYAML_FIELD_END
};

static const cyaml_schema_value_t event_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct sim_model_event, event_fields),
};

static const cyaml_schema_field_t pmu_fields[] = {
	CYAML_FIELD_FLOAT("ipc", CYAML_FLAG_DEFAULT, struct sim_model_pmu, ipc),
	CYAML_FIELD_FLOAT("user_share", CYAML_FLAG_DEFAULT, struct sim_model_pmu, user_share),
	CYAML_FIELD_FLOAT("llc_references_per_kinst", CYAML_FLAG_DEFAULT, struct sim_model_pmu,
			  llc_references_per_kinst),
	CYAML_FIELD_FLOAT("llc_misses_per_kinst", CYAML_FLAG_DEFAULT, struct sim_model_pmu,
			  llc_misses_per_kinst),
	CYAML_FIELD_FLOAT("branches_per_kinst", CYAML_FLAG_DEFAULT, struct sim_model_pmu,
			  branches_per_kinst),
	CYAML_FIELD_FLOAT("branch_misses_per_kinst", CYAML_FLAG_DEFAULT, struct sim_model_pmu,
			  branch_misses_per_kinst),
	CYAML_FIELD_SEQUENCE("events", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct sim_model_pmu, events, &event_entry, 0, 64),
	CYAML_FIELD_END
};

static const cyaml_schema_field_t register_fields[] = {
	CYAML_FIELD_UINT("address", CYAML_FLAG_DEFAULT, struct sim_model_register, address),
	CYAML_FIELD_UINT("value", CYAML_FLAG_DEFAULT, struct sim_model_register, value),
	CYAML_FIELD_UINT("write_mask", CYAML_FLAG_OPTIONAL, struct sim_model_register,
			 write_mask),
	CYAML_FIELD_END
};

static const cyaml_schema_value_t register_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct sim_model_register, register_fields),
};

static const cyaml_strval_t jitter_names[] = {
	{ "uniform", SIM_JITTER_UNIFORM },
	{ "normal", SIM_JITTER_NORMAL },
};

static const cyaml_schema_field_t phase_fields[] = {
	CYAML_FIELD_ENUM("domain", CYAML_FLAG_DEFAULT, struct sim_model_phase, domain,
			 domain_names, sizeof(domain_names) / sizeof(domain_names[0])),
	CYAML_FIELD_UINT("phase_ns", CYAML_FLAG_DEFAULT, struct sim_model_phase, phase_ns),
	CYAML_FIELD_END
};

static const cyaml_schema_value_t phase_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct sim_model_phase, phase_fields),
};

static const cyaml_schema_field_t rough_fields[] = {
	CYAML_FIELD_UINT("update_interval_ns", CYAML_FLAG_DEFAULT, struct sim_model_rough,
			 update_interval_ns),
	CYAML_FIELD_ENUM("jitter", CYAML_FLAG_DEFAULT, struct sim_model_rough, jitter,
			 jitter_names, sizeof(jitter_names) / sizeof(jitter_names[0])),
	CYAML_FIELD_UINT("jitter_spread_ns", CYAML_FLAG_DEFAULT, struct sim_model_rough,
			 jitter_spread_ns),
	CYAML_FIELD_SEQUENCE("phases", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct sim_model_rough, phases, &phase_entry, 0, RAPL_DOMAIN_COUNT),
	CYAML_FIELD_UINT("smi_min_cycles", CYAML_FLAG_OPTIONAL, struct sim_model_rough,
			 smi_min_cycles),
	CYAML_FIELD_UINT("smi_max_cycles", CYAML_FLAG_OPTIONAL, struct sim_model_rough,
			 smi_max_cycles),
	CYAML_FIELD_UINT("smi_jitter_us", CYAML_FLAG_OPTIONAL, struct sim_model_rough,
			 smi_jitter_us),
	CYAML_FIELD_UINT("host_sample_us", CYAML_FLAG_DEFAULT, struct sim_model_rough,
			 host_sample_us),
	CYAML_FIELD_END
};

static const cyaml_schema_value_t mhz_entry = {
	CYAML_VALUE_UINT(CYAML_FLAG_DEFAULT, unsigned),
};

static const cyaml_schema_field_t clock_fields[] = {
	CYAML_FIELD_SEQUENCE("turbo_mhz", CYAML_FLAG_POINTER, struct sim_model_clock, turbo_mhz,
			     &mhz_entry, 1, 256),
	CYAML_FIELD_UINT("min_mhz", CYAML_FLAG_DEFAULT, struct sim_model_clock, min_mhz),
	CYAML_FIELD_UINT("noise_mhz", CYAML_FLAG_DEFAULT, struct sim_model_clock, noise_mhz),
	CYAML_FIELD_UINT("noise_interval_us", CYAML_FLAG_DEFAULT, struct sim_model_clock,
			 noise_interval_us),
	CYAML_FIELD_FLOAT("power_exponent", CYAML_FLAG_DEFAULT, struct sim_model_clock,
			  power_exponent),
	CYAML_FIELD_BOOL("power_limit", CYAML_FLAG_OPTIONAL, struct sim_model_clock, power_limit),
	CYAML_FIELD_END
};

static const cyaml_schema_value_t cpuid_entry = {
	CYAML_VALUE_UINT(CYAML_FLAG_DEFAULT, uint32_t),
};

static const cyaml_schema_field_t model_fields[] = {
	CYAML_FIELD_STRING_PTR("description", CYAML_FLAG_OPTIONAL, struct sim_model, description,
			       0, 200),
	CYAML_FIELD_STRING_PTR("vendor", CYAML_FLAG_DEFAULT, struct sim_model, vendor, 12, 12),
	CYAML_FIELD_STRING_PTR("model_name", CYAML_FLAG_DEFAULT, struct sim_model, model_name, 1,
			       63),
	CYAML_FIELD_UINT("family", CYAML_FLAG_DEFAULT, struct sim_model, family),
	CYAML_FIELD_UINT("model", CYAML_FLAG_DEFAULT, struct sim_model, model),
	CYAML_FIELD_UINT("stepping", CYAML_FLAG_DEFAULT, struct sim_model, stepping),
	CYAML_FIELD_UINT("packages", CYAML_FLAG_DEFAULT, struct sim_model, packages),
	CYAML_FIELD_UINT("cpus_per_package", CYAML_FLAG_DEFAULT, struct sim_model,
			 cpus_per_package),
	CYAML_FIELD_UINT("threads_per_core", CYAML_FLAG_DEFAULT, struct sim_model,
			 threads_per_core),
	CYAML_FIELD_UINT("dies_per_package", CYAML_FLAG_OPTIONAL, struct sim_model,
			 dies_per_package),
	CYAML_FIELD_UINT("core_hz", CYAML_FLAG_DEFAULT, struct sim_model, core_hz),
	CYAML_FIELD_UINT("tsc_hz", CYAML_FLAG_DEFAULT, struct sim_model, tsc_hz),
	{
		.key = "cpuid_0a",
		.data_offset = offsetof(struct sim_model, cpuid_0a),
		.value = {
			CYAML_VALUE_SEQUENCE_FIXED(CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
						   uint32_t, &cpuid_entry, 4),
		},
	},
	CYAML_FIELD_SEQUENCE("core_types", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct sim_model, core_types, &sim_model_core_type_entry, 0, 4),
	CYAML_FIELD_SEQUENCE("cpuid", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL, struct sim_model,
			     cpuid, &sim_model_cpuid_entry, 0, 64),
	CYAML_FIELD_UINT("perf_capabilities", CYAML_FLAG_OPTIONAL, struct sim_model,
			 perf_capabilities),
	CYAML_FIELD_UINT("core_counters", CYAML_FLAG_OPTIONAL, struct sim_model, core_counters),
	CYAML_FIELD_UINT("core_counter_width", CYAML_FLAG_OPTIONAL, struct sim_model,
			 core_counter_width),
	CYAML_FIELD_BOOL("perfmon_v2", CYAML_FLAG_OPTIONAL, struct sim_model, perfmon_v2),
	CYAML_FIELD_BOOL("smi_count", CYAML_FLAG_OPTIONAL, struct sim_model, smi_count),
	CYAML_FIELD_UINT("smi_period_ms", CYAML_FLAG_OPTIONAL, struct sim_model, smi_period_ms),
	CYAML_FIELD_UINT("ref_xclk_hz", CYAML_FLAG_OPTIONAL, struct sim_model, ref_xclk_hz),
	CYAML_FIELD_MAPPING_PTR("rough", CYAML_FLAG_OPTIONAL, struct sim_model, rough,
				rough_fields),
	CYAML_FIELD_MAPPING_PTR("clock", CYAML_FLAG_OPTIONAL, struct sim_model, clock,
				clock_fields),
	CYAML_FIELD_BOOL("aperf_mperf", CYAML_FLAG_OPTIONAL, struct sim_model, aperf_mperf),
	CYAML_FIELD_BOOL_PTR("tsx", CYAML_FLAG_OPTIONAL, struct sim_model, tsx),
	CYAML_FIELD_MAPPING_PTR("pmu", CYAML_FLAG_OPTIONAL, struct sim_model, pmu, pmu_fields),
	CYAML_FIELD_MAPPING_PTR("rapl", CYAML_FLAG_OPTIONAL, struct sim_model, rapl, rapl_fields),
	CYAML_FIELD_SEQUENCE("registers", CYAML_FLAG_POINTER | CYAML_FLAG_OPTIONAL,
			     struct sim_model, registers, &register_entry, 0, 256),
	CYAML_FIELD_END
};

static const cyaml_schema_value_t model_schema = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct sim_model, model_fields),
};

/* libcyaml reports where a document went wrong only through its log callback: keep the lines
 * so the error we log names the field and line. */
struct cyaml_messages {
	char text[512];
};

static void cyaml_collect(cyaml_log_t level, void *context, const char *format, va_list args)
{
	struct cyaml_messages *messages = context;
	size_t used = strlen(messages->text);
	char line[256];

	if (level < CYAML_LOG_ERROR)
		return;
	vsnprintf(line, sizeof(line), format, args);
	line[strcspn(line, "\n")] = '\0';
	if (used + strlen(line) + 3 >= sizeof(messages->text))
		return;
	snprintf(messages->text + used, sizeof(messages->text) - used, "%s%s", used ? "; " : "",
		 line);
}

static const cyaml_config_t base_config = {
	.log_fn = cyaml_collect,
	.mem_fn = cyaml_mem,
	.log_level = CYAML_LOG_ERROR,
	.flags = CYAML_CFG_NO_ALIAS,
};

/* ---- search path ---- */

static bool is_directory(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int copy_path(char *dir, size_t dir_size, const char *path)
{
	if ((size_t)snprintf(dir, dir_size, "%s", path) >= dir_size)
		return -ENAMETOOLONG;
	return 0;
}

/* <dir of /proc/self/exe>/RELATIVE: ../configs/models for build/msrd in a source tree,
 * ../share/haecer/models for PREFIX/sbin/msrd installed under any PREFIX. */
static int exe_relative_dir(const char *relative, char *dir, size_t dir_size)
{
	char exe[PATH_MAX];
	ssize_t length = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (length <= 0)
		return -ENOENT;
	exe[length] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	if ((size_t)snprintf(dir, dir_size, "%s/%s", exe, relative) >= dir_size)
		return -ENAMETOOLONG;
	return is_directory(dir) ? 0 : -ENOENT;
}

static const char *const exe_relative[] = { "../configs/models", "../share/haecer/models" };
static const char *const system_dirs[] = { "/usr/local/share/haecer/models",
					   "/usr/share/haecer/models" };

void sim_model_describe_search(const char *models_dir, char *out, size_t size)
{
	const char *from_environment = getenv("HAECER_MODELS_DIR");
	char dir[PATH_MAX];
	size_t used = 0;

	out[0] = '\0';
	if (models_dir && *models_dir) {
		snprintf(out, size, "%s (--models-dir)", models_dir);
		return;
	}
	if (from_environment && *from_environment) {
		snprintf(out, size, "%s ($HAECER_MODELS_DIR)", from_environment);
		return;
	}
	for (size_t i = 0; i < sizeof(exe_relative) / sizeof(exe_relative[0]); i++) {
		exe_relative_dir(exe_relative[i], dir, sizeof(dir));
		used += (size_t)snprintf(out + used, used < size ? size - used : 0, "%s%s",
					 used > 0 ? ", " : "", dir);
	}
	for (size_t i = 0; i < sizeof(system_dirs) / sizeof(system_dirs[0]); i++)
		used += (size_t)snprintf(out + used, used < size ? size - used : 0, ", %s",
					 system_dirs[i]);
}

int sim_model_find_dir(const char *models_dir, char *dir, size_t dir_size)
{
	const char *from_environment = getenv("HAECER_MODELS_DIR");

	if (models_dir && *models_dir)
		return is_directory(models_dir) ? copy_path(dir, dir_size, models_dir) : -ENOENT;
	if (from_environment && *from_environment)
		return is_directory(from_environment) ?
			       copy_path(dir, dir_size, from_environment) : -ENOENT;
	for (size_t i = 0; i < sizeof(exe_relative) / sizeof(exe_relative[0]); i++)
		if (exe_relative_dir(exe_relative[i], dir, dir_size) == 0)
			return 0;
	for (size_t i = 0; i < sizeof(system_dirs) / sizeof(system_dirs[0]); i++) {
		if (is_directory(system_dirs[i]))
			return copy_path(dir, dir_size, system_dirs[i]);
	}
	return -ENOENT;
}

/* ---- checks libcyaml cannot do ---- */

bool sim_model_is_amd(const struct sim_model *model)
{
	return strcmp(model->vendor, "AuthenticAMD") == 0;
}

bool sim_model_has_tsx(const struct sim_model *model)
{
	/* Family 6 models whose CPUID reported HLE/RTM when they shipped: Haswell (3C 3F 45 46),
	 * Broadwell (3D 47 4F 56), Skylake (4E 5E 55: SKX/CLX/CPX), Kaby/Coffee Lake (8E 9E),
	 * Ice Lake server (6A 6C), Sapphire/Emerald Rapids (8F CF). Sandy/Ivy Bridge have none. */
	static const unsigned models[] = { 0x3C, 0x3F, 0x45, 0x46, 0x3D, 0x47, 0x4F, 0x56, 0x4E,
					   0x5E, 0x55, 0x8E, 0x9E, 0x6A, 0x6C, 0x8F, 0xCF };

	if (model->tsx != NULL)
		return *model->tsx;
	if (strcmp(model->vendor, "GenuineIntel") != 0 || model->family != 6)
		return false;
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		if (models[i] == model->model)
			return true;
	}
	return false;
}

static bool name_is_valid(const char *name)
{
	size_t length = strlen(name);

	if (length == 0 || length > SIM_MODEL_NAME_MAX)
		return false;
	for (size_t i = 0; i < length; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return false;
	}
	return true;
}

static const char *check_topology(const struct sim_model *model)
{
	uint64_t cpus = (uint64_t)model->packages * model->cpus_per_package;

	if (strcmp(model->vendor, "GenuineIntel") != 0 && !sim_model_is_amd(model))
		return "vendor: must be GenuineIntel or AuthenticAMD";
	if (model->packages < 1 || model->packages > 64)
		return "packages: must be 1..64";
	if (model->cpus_per_package < 1 || cpus > MACHINE_MAX_CPUS)
		return "cpus_per_package: the model must have 1..1024 CPUs in all";
	if (model->threads_per_core < 1 || model->threads_per_core > 8 ||
	    model->cpus_per_package % model->threads_per_core != 0)
		return "threads_per_core: must be 1..8 and divide cpus_per_package";
	if (model->dies_per_package > 8 ||
	    (model->dies_per_package > 1 &&
	     ((model->cpus_per_package / model->threads_per_core) % model->dies_per_package != 0 ||
	      sim_model_is_amd(model) || (model->clock && model->clock->power_limit))))
		return "dies_per_package: at most 8, dividing the cores, Intel only, without "
		       "clock.power_limit (PL1 is per package)";
	if (model->core_hz < 1000000 || model->core_hz > 20000000000ull)
		return "core_hz: must be 1 MHz..20 GHz";
	if (model->tsc_hz < 1000000 || model->tsc_hz > 20000000000ull)
		return "tsc_hz: must be 1 MHz..20 GHz";
	if (model->smi_period_ms > 60000)
		return "smi_period_ms: at most 60000";
	if (model->ref_xclk_hz > model->tsc_hz)
		return "ref_xclk_hz: at most tsc_hz";
	return NULL;
}

/* The grid must keep updates in order (|jitter| < interval / 2) and SMIs apart. */
static const char *check_rough(const struct sim_model *model)
{
	const struct sim_model_rough *rough = model->rough;
	uint64_t smi_max_ns;

	if (!rough)
		return NULL;
	if (rough->update_interval_ns < 100000 || rough->update_interval_ns > 100000000)
		return "rough.update_interval_ns: must be 100 us..100 ms";
	if (rough->jitter_spread_ns >= rough->update_interval_ns / 2)
		return "rough.jitter_spread_ns: must be below half the update interval";
	for (unsigned i = 0; i < rough->phases_count; i++) {
		if (rough->phases[i].phase_ns >= rough->update_interval_ns)
			return "rough.phases: phase_ns must be below the update interval";
	}
	if (rough->smi_min_cycles > rough->smi_max_cycles)
		return "rough.smi_min_cycles: must not exceed smi_max_cycles";
	smi_max_ns = (uint64_t)rough->smi_max_cycles * 1000000000ull / model->tsc_hz;
	if (model->smi_period_ms &&
	    smi_max_ns + 2000ull * rough->smi_jitter_us >= model->smi_period_ms * 1000000ull / 2)
		return "rough: an SMI and its jitter must fit in half of smi_period_ms";
	if (rough->host_sample_us < 100 || rough->host_sample_us > 1000000)
		return "rough.host_sample_us: must be 100 us..1 s";
	return NULL;
}

static const struct sim_model_register *find_register(const struct sim_model *model,
						      unsigned address)
{
	for (unsigned i = 0; i < model->registers_count; i++) {
		if (model->registers[i].address == address)
			return &model->registers[i];
	}
	return NULL;
}

/* The ratio MSR_TURBO_RATIO_LIMIT gives `active` cores: byte active - 1 (Sandy Bridge client),
 * or the byte of the first group of MSR_TURBO_RATIO_LIMIT_CORES (0x1AE) that holds that many
 * (Skylake-SP); 0 when it says nothing for them. */
static unsigned turbo_ratio(uint64_t limit, const struct sim_model_register *cores,
			    unsigned active)
{
	if (!cores)
		return active <= 8 ? (unsigned)(limit >> (8 * (active - 1))) & 0xFF : 0;
	for (unsigned group = 0; group < 8; group++) {
		if (((cores->value >> (8 * group)) & 0xFF) >= active)
			return (unsigned)(limit >> (8 * group)) & 0xFF;
	}
	return 0;
}

/* A model that lists MSR_TURBO_RATIO_LIMIT must run the bins it reports (100 MHz a ratio). */
static const char *check_turbo_register(const struct sim_model *model)
{
	const struct sim_model_register *limit = find_register(model, MSR_TURBO_RATIO_LIMIT);
	const struct sim_model_register *cores = find_register(model, 0x1AE);

	if (!limit || !model->clock)
		return NULL;
	for (unsigned n = 1; n <= model->clock->turbo_mhz_count; n++) {
		unsigned ratio = turbo_ratio(limit->value, cores, n);

		if (ratio && ratio * 100 != model->clock->turbo_mhz[n - 1])
			return "clock.turbo_mhz: disagrees with MSR_TURBO_RATIO_LIMIT (0x1AD)";
	}
	return NULL;
}

/* Bins run from one active core down, every one at least the base clock and min_mhz at most
 * the lowest; the noise stays well inside the clock so no stretch of busy time runs backwards. */
static const char *check_clock(const struct sim_model *model)
{
	const struct sim_model_clock *clock = model->clock;
	uint64_t cores = model->cpus_per_package / model->threads_per_core;

	if (!clock)
		return NULL;
	if (!model->rough)
		return "clock: belongs to the rough CPU (needs a rough section)";
	if (clock->turbo_mhz_count > cores)
		return "clock.turbo_mhz: at most one bin per core of a package";
	for (unsigned i = 0; i < clock->turbo_mhz_count; i++) {
		uint64_t hz = (uint64_t)clock->turbo_mhz[i] * 1000000ull;

		if (hz < model->core_hz || clock->turbo_mhz[i] > 20000)
			return "clock.turbo_mhz: every bin must be core_hz..20 GHz";
		if (i > 0 && clock->turbo_mhz[i] > clock->turbo_mhz[i - 1])
			return "clock.turbo_mhz: bins must not rise with more active cores";
	}
	if (clock->min_mhz < 1 || (uint64_t)clock->min_mhz * 1000000ull > model->core_hz)
		return "clock.min_mhz: must be 1..core_hz";
	if (clock->noise_mhz * 4 > clock->min_mhz)
		return "clock.noise_mhz: at most a quarter of min_mhz";
	if (clock->noise_interval_us < 10 || clock->noise_interval_us > 1000000)
		return "clock.noise_interval_us: must be 10 us..1 s";
	if (!isfinite(clock->power_exponent) || clock->power_exponent < 0.0 ||
	    clock->power_exponent > 4.0)
		return "clock.power_exponent: must be in [0, 4]";
	return check_turbo_register(model);
}

/* AMD: core_counters PERF_CTL/CTR pairs instead of CPUID leaf 0xA. */
static const char *check_amd_counters(const struct sim_model *model)
{
	if (!model->core_counters)
		return model->pmu ? "pmu: needs core_counters on AMD"
		       : model->perfmon_v2 ? "perfmon_v2: needs core_counters" : NULL;
	if (model->core_counters > 6)
		return "core_counters: at most 6";
	if (model->core_counter_width < 32 || model->core_counter_width > 64)
		return "core_counter_width: must be 32..64";
	return model->pmu ? NULL : "pmu: required with core_counters";
}

static const char *check_perfmon(const struct sim_model *model)
{
	uint32_t eax, edx;

	if (model->core_counters && !sim_model_is_amd(model))
		return "core_counters: Intel parts describe their counters in cpuid_0a";
	if (sim_model_is_amd(model) && !model->cpuid_0a)
		return check_amd_counters(model);
	if (!model->cpuid_0a)
		return model->pmu ? "pmu: needs cpuid_0a" : NULL;
	if (sim_model_is_amd(model))
		return "cpuid_0a: AMD parts have no Intel architectural perfmon";
	if (!model->pmu)
		return "pmu: required with cpuid_0a";
	eax = model->cpuid_0a[0];
	edx = model->cpuid_0a[3];
	if (CPUID_0A_EAX_VERSION(eax) < 1 || CPUID_0A_EAX_VERSION(eax) > 5)
		return "cpuid_0a: perfmon version must be 1..5";
	if (CPUID_0A_EAX_GP_COUNTERS(eax) > SIM_MAX_GP_COUNTERS)
		return "cpuid_0a: at most 8 general-purpose counters";
	if (CPUID_0A_EAX_GP_WIDTH(eax) < 32 || CPUID_0A_EAX_GP_WIDTH(eax) > 64)
		return "cpuid_0a: counter width must be 32..64";
	if (CPUID_0A_EAX_VERSION(eax) >= 2 &&
	    (CPUID_0A_EDX_FIXED_COUNTERS(edx) > SIM_MAX_FIXED_COUNTERS ||
	     (CPUID_0A_EDX_FIXED_COUNTERS(edx) &&
	      (CPUID_0A_EDX_FIXED_WIDTH(edx) < 32 || CPUID_0A_EDX_FIXED_WIDTH(edx) > 64))))
		return "cpuid_0a: at most 4 fixed counters of width 32..64";
	return NULL;
}

static bool rate_is_valid(double value, double max)
{
	return isfinite(value) && value >= 0.0 && value <= max;
}

static const char *check_pmu(const struct sim_model_pmu *pmu)
{
	if (!pmu)
		return NULL;
	if (!rate_is_valid(pmu->ipc, 16.0) || pmu->ipc <= 0.0)
		return "pmu.ipc: must be in (0, 16]";
	if (!rate_is_valid(pmu->user_share, 1.0))
		return "pmu.user_share: must be in [0, 1]";
	if (!rate_is_valid(pmu->llc_references_per_kinst, 1000.0) ||
	    !rate_is_valid(pmu->llc_misses_per_kinst, 1000.0) ||
	    !rate_is_valid(pmu->branches_per_kinst, 1000.0) ||
	    !rate_is_valid(pmu->branch_misses_per_kinst, 1000.0))
		return "pmu: rates per 1000 instructions must be in [0, 1000]";
	for (unsigned i = 0; i < pmu->events_count; i++) {
		if (pmu->events[i].event > 0xFFF || pmu->events[i].umask > 0xFF ||
		    !rate_is_valid(pmu->events[i].per_kinst, 10000.0))
			return "pmu.events: event 0..0xFFF, umask 0..0xFF, per_kinst 0..10000";
	}
	return NULL;
}

static bool domain_fits_vendor(enum rapl_domain domain, bool amd)
{
	bool amd_domain = domain == RAPL_DOMAIN_AMD_CORE || domain == RAPL_DOMAIN_AMD_PKG;

	return amd == amd_domain;
}

static const char *check_rapl(const struct sim_model *model)
{
	const struct sim_model_rapl *rapl = model->rapl;
	uint32_t seen = 0;

	if (!rapl)
		return NULL;
	if (RAPL_UNIT_ENERGY(rapl->unit) > 32 || (rapl->unit & ~0xF1F0Full) != 0)
		return "rapl.unit: energy field 12:8 must be <= 32 and reserved bits clear";
	for (unsigned i = 0; i < rapl->domains_count; i++) {
		const struct sim_model_domain *domain = &rapl->domains[i];

		if (!domain_fits_vendor(domain->domain, sim_model_is_amd(model)))
			return "rapl.domains: amd_core/amd_pkg on AMD parts, the others on Intel";
		if (seen & (1u << domain->domain))
			return "rapl.domains: a domain is listed twice";
		seen |= 1u << domain->domain;
		if (!rate_is_valid(domain->idle_watts, 10000.0) ||
		    !rate_is_valid(domain->max_watts, 10000.0) ||
		    domain->idle_watts > domain->max_watts)
			return "rapl.domains: need 0 <= idle_watts <= max_watts <= 10000";
		if (domain->energy_exponent && *domain->energy_exponent > 32)
			return "rapl.domains: energy_exponent must be <= 32";
	}
	if (rapl->power_info && sim_model_is_amd(model))
		return "rapl.power_info: MSR_PKG_POWER_INFO is Intel only";
	return NULL;
}

static const char *check_model(const struct sim_model *model)
{
	const char *problem = check_topology(model);

	if (!problem)
		problem = check_perfmon(model);
	if (!problem)
		problem = check_pmu(model->pmu);
	if (!problem && model->pmu && !sim_model_is_amd(model)) {
		for (unsigned i = 0; i < model->pmu->events_count; i++) {
			if (model->pmu->events[i].event > 0xFF)
				return "pmu.events: Intel event codes are 0..0xFF";
		}
	}
	if (!problem)
		problem = check_rapl(model);
	if (!problem)
		problem = check_rough(model);
	if (!problem)
		problem = check_clock(model);
	if (!problem)
		problem = sim_model_check_cpuid(model);
	return problem;
}

void sim_model_free(struct sim_model *model)
{
	if (model)
		cyaml_free(&base_config, &model_schema, model, 0);
}

int sim_model_load(const char *models_dir, const char *name, struct sim_model **out)
{
	struct cyaml_messages messages = { .text = "" };
	cyaml_config_t config = base_config;
	struct sim_model *model = NULL;
	char dir[PATH_MAX], path[PATH_MAX + 64];
	const char *problem;
	cyaml_err_t error;
	int ret;

	if (!name_is_valid(name)) {
		log_warnx("sim: model name \"%s\" is invalid (a-z, 0-9, '-', '_', up to 31)", name);
		return -EINVAL;
	}
	ret = sim_model_find_dir(models_dir, dir, sizeof(dir));
	if (ret < 0) {
		char searched[PATH_MAX * 2];
		sim_model_describe_search(models_dir, searched, sizeof(searched));
		log_warn_errno(ret, "sim: no model directory (searched %s; --models-dir DIR "
			       "names one)", searched);
		return ret;
	}
	snprintf(path, sizeof(path), "%s/%s.yaml", dir, name);
	config.log_ctx = &messages;
	error = cyaml_load_file(path, &config, &model_schema, (cyaml_data_t **)&model, NULL);
	if (error == CYAML_ERR_FILE_OPEN) {
		log_warnx("sim: %s: no such model", path);
		return -ENOENT;
	}
	if (error != CYAML_OK) {
		log_warnx("sim: %s: %s%s%s", path, cyaml_strerror(error),
			  messages.text[0] ? ": " : "", messages.text);
		return -EINVAL;
	}
	if (!model) {
		log_warnx("sim: %s: empty model", path);
		return -EINVAL;
	}
	problem = check_model(model);
	if (problem) {
		log_warnx("sim: %s: %s", path, problem);
		sim_model_free(model);
		return -EINVAL;
	}
	*out = model;
	return 0;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* Names of NAME.yaml files in the model directory, sorted. */
int backend_sim_list_models(const char *models_dir, char names[][32], size_t max)
{
	char dir[PATH_MAX];
	struct dirent *entry;
	size_t count = 0;
	DIR *stream;
	int ret;

	ret = sim_model_find_dir(models_dir, dir, sizeof(dir));
	if (ret < 0)
		return ret;
	stream = opendir(dir);
	if (!stream)
		return -errno;
	while ((entry = readdir(stream)) != NULL && count < max) {
		size_t length = strlen(entry->d_name);
		char name[64];

		if (length <= 5 || length - 5 >= sizeof(name) ||
		    strcmp(entry->d_name + length - 5, ".yaml") != 0)
			continue;
		memcpy(name, entry->d_name, length - 5);
		name[length - 5] = '\0';
		if (!name_is_valid(name))
			continue;
		memcpy(names[count++], name, length - 4);
	}
	closedir(stream);
	qsort(names, count, sizeof(names[0]), compare_names);
	return (int)count;
}

void backend_sim_describe_search(const char *models_dir, char *out, size_t size)
{
	sim_model_describe_search(models_dir, out, size);
}
