/*
 * backend/sim/sim_build.c — building the simulated CPU from its model (configs/models/): its
 * CPUs, RAPL domains and register map, the host's load it follows, a power script; and taking it
 * down again. sim.c runs what this builds.
 */
#include "backend/sim/sim.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "backend/sim/sim_internal.h"

#define SIM_DEFAULT_MODEL "sandybridge"

/* ---- building the machine ---- */

static uint64_t watts_to_microwatts(double watts)
{
	return (uint64_t)llround(watts * 1e6);
}

/* The domain's unit code, as the kernel's drivers decide it from the unit register
 * (hw/rapl_quirks.h: Silvermont/Airmont count 2^ESU uJ), unless the model fixes it. */
static uint32_t domain_exponent(const struct sim_model *model, const struct sim_model_domain *d)
{
	if (d->energy_exponent)
		return *d->energy_exponent;
	return rapl_unit_code_of(cpu_vendor_is_intel(model->vendor), model->family, model->model,
				 (int)d->domain, model->rapl->unit);
}

static uint64_t domain_phase(const struct sim *sim, enum rapl_domain kind)
{
	const struct sim_model_rough *rough = sim->model->rough;

	for (unsigned i = 0; sim->rough.on && i < rough->phases_count; i++) {
		if (rough->phases[i].domain == kind)
			return rough->phases[i].phase_ns;
	}
	return 0;
}

static uint32_t dies_of(const struct sim_model *model)
{
	return model->dies_per_package > 1 ? model->dies_per_package : 1;
}

/* One instance of `config` driven by the CPUs among first .. first + span - 1 that `member`
 * says are its own (a die's, a package's or a core's); each of them learns it. */
static int add_domain(struct sim *sim, const struct sim_model_domain *config, uint32_t first,
		      uint32_t span, bool (*member)(const struct sim_cpu *, uint32_t), uint32_t id)
{
	struct sim_domain *domain = &sim->domains[sim->domain_count];

	*domain = (struct sim_domain){
		.kind = config->domain,
		.index = sim->domain_count,
		.phase_ns = domain_phase(sim, config->domain),
		.exponent = domain_exponent(sim->model, config),
		.idle_uw = watts_to_microwatts(config->idle_watts),
		.span_uw = watts_to_microwatts(config->max_watts) -
			   watts_to_microwatts(config->idle_watts),
		.first_cpu = first,
		.span = span,
		.clocked = config->domain != RAPL_DOMAIN_DRAM && config->domain != RAPL_DOMAIN_PP1,
		.t = sim->start_ns,
		.law = { .seg_t0 = sim->start_ns, .from_uw = UINT64_MAX },
		.history = calloc(SIM_HISTORY, sizeof(struct sim_history_entry)),
	};
	if (!domain->history)
		return -ENOMEM;
	for (uint32_t cpu = first; cpu < first + span; cpu++) {
		if (!member(&sim->cpus[cpu], id))
			continue;
		sim->cpus[cpu].domain[config->domain] = domain->index;
		domain->cpus++;
	}
	sim->domain_count++;
	sim_domain_set_power(sim, domain);
	sim_rough_last_update(sim, domain, sim->start_ns, &domain->update_ns);
	return 0;
}

static bool any_cpu(const struct sim_cpu *cpu, uint32_t id)
{
	(void)cpu;
	(void)id;
	return true;
}

static bool of_die(const struct sim_cpu *cpu, uint32_t die)
{
	return cpu->die == die;
}

/* One instance per package, or per die where the model has several a package (Intel: RAPL is
 * die-scope there), per core for AMD's core energy; each CPU learns its instances. */
static int build_domains(struct sim *sim)
{
	const struct sim_model *model = sim->model;
	uint32_t threads = model->threads_per_core, dies = dies_of(model), count = 0;
	int ret = 0;

	if (!model->rapl)
		return 0;
	for (unsigned i = 0; i < model->rapl->domains_count; i++) {
		bool per_core = model->rapl->domains[i].domain == RAPL_DOMAIN_AMD_CORE;

		count += per_core ? sim->cpu_count / threads : model->packages * dies;
	}
	sim->domains = calloc(count, sizeof(*sim->domains));
	if (!sim->domains)
		return -ENOMEM;
	for (unsigned i = 0; i < model->rapl->domains_count && ret == 0; i++) {
		const struct sim_model_domain *config = &model->rapl->domains[i];

		if (config->domain == RAPL_DOMAIN_AMD_CORE) {
			for (uint32_t first = 0; first < sim->cpu_count && ret == 0; first += threads)
				ret = add_domain(sim, config, first, threads, any_cpu, 0);
			continue;
		}
		for (uint32_t die = 0; die < model->packages * dies && ret == 0; die++)
			ret = add_domain(sim, config, die / dies * model->cpus_per_package,
					 model->cpus_per_package, of_die, die);
	}
	return ret;
}

/* Linux numbers the threads of a core n and n + cores of the package (sim_clock.c); a die holds
 * an equal run of the package's cores. */
static uint32_t die_of_cpu(const struct sim_model *model, uint32_t cpu)
{
	uint32_t cores = model->cpus_per_package / model->threads_per_core;
	uint32_t core = cpu % model->cpus_per_package % cores;

	return cpu / model->cpus_per_package * dies_of(model) + core / (cores / dies_of(model));
}

static int build_cpus(struct sim *sim)
{
	const struct sim_model *model = sim->model;
	const struct sim_model_core_type *type;

	sim->cpu_count = model->packages * model->cpus_per_package;
	sim->cpus = calloc(sim->cpu_count, sizeof(*sim->cpus));
	if (!sim->cpus)
		return -ENOMEM;
	for (uint32_t i = 0; i < sim->cpu_count; i++) {
		struct sim_cpu *cpu = &sim->cpus[i];

		cpu->t = sim->start_ns;
		cpu->clock_q = SIM_CLOCK_ONE;
		cpu->power_q = SIM_POWER_ONE;
		cpu->package = i / model->cpus_per_package;
		cpu->die = die_of_cpu(model, i);
		cpu->source = sim->virtual_time ? SIM_LOAD_FIXED : SIM_LOAD_HOST;
		for (uint32_t kind = 0; kind < RAPL_DOMAIN_COUNT; kind++)
			cpu->domain[kind] = SIM_NO_DOMAIN;
		type = sim_core_type_of(model, i % model->cpus_per_package);
		cpu->core_type = type ? (uint8_t)type->core_type : 0;
		sim_pmu_reset_cpu(sim, cpu);
	}
	return 0;
}

/* Plain registers of the model. Installed after everything else so that an address the sim
 * already simulates is found by a test read and refused. */
static int build_registers(struct sim *sim, char *why, size_t why_size)
{
	const struct sim_model *model = sim->model;
	uint64_t ignored;

	for (unsigned i = 0; i < model->registers_count; i++) {
		if (sim_read_register(sim, &sim->cpus[0], model->registers[i].address, &ignored) != -EIO) {
			snprintf(why, why_size, "model %s: register 0x%X is simulated, not plain",
				 sim->info.sim_model, model->registers[i].address);
			return -EINVAL;
		}
	}
	for (uint32_t cpu = 0; cpu < sim->cpu_count && model->registers_count; cpu++) {
		sim->cpus[cpu].registers = calloc(model->registers_count, sizeof(uint64_t));
		if (!sim->cpus[cpu].registers)
			return -ENOMEM;
		for (unsigned i = 0; i < model->registers_count; i++)
			sim->cpus[cpu].registers[i] = model->registers[i].value;
	}
	return 0;
}

static void fill_rapl_info(const struct sim *sim, struct machine_info *info)
{
	const struct sim_model *model = sim->model;

	if (!model->rapl)
		return;
	info->rapl_power_unit = model->rapl->unit;
	for (unsigned i = 0; i < model->rapl->domains_count; i++) {
		const struct sim_model_domain *domain = &model->rapl->domains[i];

		info->rapl_domains |= 1u << domain->domain;
		info->rapl_energy_exponent[domain->domain] = (uint8_t)domain_exponent(model, domain);
		info->rapl_max_power_mw[domain->domain] =
			(uint32_t)ceil(domain->max_watts * 1000.0);
	}
}

static void fill_info(struct sim *sim, const char *name)
{
	const struct sim_model *model = sim->model;
	struct machine_info *info = &sim->info;

	memset(info, 0, sizeof(*info));
	snprintf(info->vendor, sizeof(info->vendor), "%s", model->vendor);
	snprintf(info->model_name, sizeof(info->model_name), "%s", model->model_name);
	snprintf(info->sim_model, sizeof(info->sim_model), "%s", name);
	info->family = model->family;
	info->model = model->model;
	info->stepping = model->stepping;
	if (model->cpuid_0a)
		memcpy(info->cpuid_0a, model->cpuid_0a, sizeof(info->cpuid_0a));
	info->cpu_count = sim->cpu_count;
	info->package_count = model->packages;
	for (uint32_t cpu = 0; cpu < sim->cpu_count; cpu++) {
		info->cpu_package[cpu] = (uint16_t)sim->cpus[cpu].package;
		info->cpu_die[cpu] = (uint16_t)sim->cpus[cpu].die;
	}
	if (dies_of(model) > 1)
		info->die_count = model->packages * dies_of(model);
	fill_rapl_info(sim, info);
	info->tsc_hz = model->tsc_hz;
	info->tsc_source = TSC_SOURCE_SIMULATED;
	info->has_smi_count = model->smi_count;
	info->pmc_full_width_writes = sim->pmu.full_width_writes;
	info->amd_perfmon_v2 = sim->pmu.perfmon_v2;
	info->simulated = true;
	info->sim_virtual_time = sim->virtual_time;
}

/* Host load from <dev_root>/proc/stat when the tree has one (tests), else /proc/stat. */
static int open_host_load(struct sim *sim, const char *dev_root)
{
	char path[PATH_MAX];
	struct stat st;
	int ret;

	snprintf(path, sizeof(path), "/proc/stat");
	if (dev_root && *dev_root && strcmp(dev_root, "/") != 0) {
		snprintf(path, sizeof(path), "%s/proc/stat", dev_root);
		if (stat(path, &st) != 0)
			snprintf(path, sizeof(path), "/proc/stat");
	}
	ret = sim_host_load_open(path, &sim->host);
	if (ret < 0)
		return ret;
	/* A stand-in /proc/stat (tests) and the real CPU-time clocks of msrd's clients would not
	 * add up: clients are followed on the host's own only. */
	sim->host_is_real = strcmp(path, "/proc/stat") == 0;
	/* The first sample is the load since boot: a fair start until the next one. */
	sim->host_sampled_at = sim->start_ns;
	for (uint32_t cpu = 0; cpu < sim->cpu_count; cpu++)
		sim_cpu_set_load(sim, cpu, sim_host_load_of(sim->host, cpu), sim->start_ns);
	return 0;
}

static int load_power_script(struct sim *sim, const char *path)
{
	char *text = NULL;
	size_t size = 0;
	FILE *file = fopen(path, "re");
	FILE *memory;
	char chunk[4096];
	size_t got;
	int ret = 0;

	if (!file) {
		ret = -errno;
		log_warn_errno(ret, "sim: power script %s", path);
		return ret;
	}
	memory = open_memstream(&text, &size);
	if (!memory) {
		fclose(file);
		return -ENOMEM;
	}
	while ((got = fread(chunk, 1, sizeof(chunk), file)) > 0 && size < (1u << 24))
		fwrite(chunk, 1, got, memory);
	if (ferror(file) || size >= (1u << 24))
		ret = -EINVAL;
	fclose(file);
	if (fclose(memory) != 0 && ret == 0)
		ret = -ENOMEM;
	if (ret == 0)
		ret = sim_power_trace(sim, text, path);
	free(text);
	return ret;
}

static int sim_start(struct sim *sim, const struct backend_options *options, const char *name,
		     char *why, size_t why_size)
{
	uint64_t seed;
	int ret;

	sim->virtual_time = options->sim_virtual_time;
	sim->access_step_ns = options->sim_virtual_time ? options->sim_access_step_ns : 0;
	sim->late_energy_reads = options->sim_late_energy_reads;
	sim->start_ns = sim->virtual_time ? 0 : clock_monotonic_raw_ns();
	sim->now = sim->start_ns;
	sim->next_script_change = UINT64_MAX;
	sim->next_power_change = UINT64_MAX;
	for (unsigned kind = 0; kind < RAPL_DOMAIN_COUNT; kind++)
		sim->power_state[kind].segment_end = UINT64_MAX;
	seed = options->sim_seed;
	if (seed == 0)
		seed = clock_monotonic_raw_ns() ^ ((uint64_t)getpid() << 32);
	sim_rough_configure(sim, options->sim_ideal, seed);
	if (sim->rough.on)
		log_info("sim: model %s, rough%s (seed %llu: --sim-seed replays it)", name,
			 sim->model->clock ? ", turbo clock" : "", (unsigned long long)seed);
	else
		log_info("sim: model %s, ideal (energy updates every 1 ms in phase, SMIs take no "
			 "time, constant clock)", name);
	if (sim->model->rapl)
		sim->unit_address = sim_model_is_amd(sim->model) ? MSR_AMD_RAPL_POWER_UNIT :
								   MSR_RAPL_POWER_UNIT;
	ret = sim_pmu_configure(sim);
	if (ret == 0)
		ret = build_cpus(sim);
	if (ret == 0)
		ret = build_domains(sim);
	fill_info(sim, name);
	if (ret == 0)
		ret = build_registers(sim, why, why_size);
	if (ret == 0)
		ret = sim_clock_configure(sim, options->sim_ideal);
	for (uint32_t package = 0; ret == 0 && package < sim->model->packages; package++)
		sim_package_set(sim, package, UINT32_MAX, 0, sim->start_ns);
	if (ret == 0 && !sim->virtual_time) {
		ret = open_host_load(sim, options->dev_root);
		if (ret < 0)
			snprintf(why, why_size, "sim: cannot read the host load: %s", strerror(-ret));
	}
	if (ret == 0)
		ret = sim_kernel_configure(sim, options->sim_kernel_counters, why, why_size);
	sim->info.nmi_watchdog = sim->kernel_nmi_watchdog;
	if (ret == 0 && options->sim_power_script) {
		ret = load_power_script(sim, options->sim_power_script);
		if (ret < 0)
			snprintf(why, why_size, "sim: power script %s is invalid (see the log)",
				 options->sim_power_script);
	}
	if (ret == 0 && options->sim_load_script) {
		ret = sim_load_script(sim, options->sim_load_script);
		if (ret < 0)
			snprintf(why, why_size, "sim: load script %s is invalid (see the log)",
				 options->sim_load_script);
	}
	return ret;
}

int sim_open(const struct backend_options *options, struct sim **out, char *why,
	     size_t why_size)
{
	const char *name = options->sim_model ? options->sim_model : SIM_DEFAULT_MODEL;
	struct sim *sim = calloc(1, sizeof(*sim));
	int ret;

	if (!sim)
		return -ENOMEM;
	ret = sim_model_load(options->models_dir, name, &sim->model);
	if (ret < 0) {
		snprintf(why, why_size, "sim: model %s: %s", name,
			 ret == -ENOENT ? "not found (msrd --list-sim-models names them)" :
					  "invalid (see the log)");
		free(sim);
		return ret;
	}
	ret = sim_start(sim, options, name, why, why_size);
	if (ret < 0) {
		if (ret == -ENOMEM)
			snprintf(why, why_size, "sim: out of memory");
		sim_close(sim);
		return ret;
	}
	*out = sim;
	return 0;
}

void sim_close(struct sim *sim)
{
	if (!sim)
		return;
	sim_script_release(sim);
	sim_power_free(sim->power);
	sim_host_load_close(sim->host);
	sim_follow_free(sim->follow);
	for (uint32_t i = 0; sim->domains && i < sim->domain_count; i++)
		free(sim->domains[i].history);
	for (uint32_t cpu = 0; sim->cpus && cpu < sim->cpu_count; cpu++)
		free(sim->cpus[cpu].registers);
	free(sim->cpus);
	free(sim->domains);
	sim_clock_free(sim);
	sim_pmu_free(sim);
	sim_model_free(sim->model);
	free(sim);
}
