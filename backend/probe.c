/*
 * backend/probe.c — what the machine behind a device backend is: vendor, family and model from
 * CPUID (dev/cpu/N/cpuid, or the instruction), packages from sysfs topology, which RAPL domains
 * exist and their units (as the kernel's rapl drivers decide it), the TSC frequency, and what the
 * PMU offers (full-width counter writes, SMI count, the NMI watchdog's counter). The simulated CPU
 * describes itself (sim/), but its CPUID, which it answers per CPU, is read here by the same
 * rules as a real one (backend_probe_simulated: core types, TSC rate, invariant TSC).
 */
#include "backend/backend_internal.h"
#include "common/clock.h"

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/sim/sim.h"
#include "common/log.h"
#include "hw/rapl_quirks.h"
#include "hw/vendor.h"

/* Defaults for wrap deadlines when MSR_PKG_POWER_INFO says nothing usable (see README). */
#define DEFAULT_MAX_POWER_MW 1000000u
#define POWER_INFO_TDP_FACTOR 3u

/* ---- CPUID: dev/cpu/N/cpuid or the instruction ---- */

/* The cpuid driver reads 16 bytes (eax, ebx, ecx, edx) at offset (subleaf << 32) | leaf. Its
 * offsets are keys, so neighbouring leaves cannot share a regular file: a stand-in file holds
 * 16-byte records at offset 16 * ((subleaf << 32) | leaf) instead. -ENOENT without the device. */
int backend_read_cpuid_on(const struct msr_backend *backend, const char *dev_root, uint32_t cpu,
			  uint32_t leaf, uint32_t subleaf, uint32_t regs[4])
{
	char path[PATH_MAX];
	uint64_t key = ((uint64_t)subleaf << 32) | leaf;
	struct stat st;
	ssize_t got;
	int fd, ret;

	if (backend->sim)
		return sim_cpuid(backend->sim, cpu, leaf, subleaf, regs);
	ret = backend_root_path(path, sizeof(path), dev_root, "dev/cpu/%u/cpuid", cpu);
	fd = ret == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		key *= 16;
	got = pread(fd, regs, 16, (off_t)key);
	ret = got == 16 ? 0 : (got < 0 ? -errno : -EIO);
	close(fd);
	return ret;
}

/* A leaf the same on every CPU: CPU 0's device, or the instruction wherever we run (never on
 * the simulated CPU, which answers for itself). */
static int read_cpuid(const struct msr_backend *backend, const char *dev_root, uint32_t leaf,
		      uint32_t regs[4])
{
	int ret = backend_read_cpuid_on(backend, dev_root, 0, leaf, 0, regs);

	if (ret == -ENOENT && !backend->sim) {
		__cpuid_count(leaf, 0, regs[0], regs[1], regs[2], regs[3]);
		return 0;
	}
	return ret;
}

static void decode_signature(uint32_t eax, struct machine_info *info)
{
	uint32_t family = (eax >> 8) & 0xF, model = (eax >> 4) & 0xF;

	if (family == 0xF)
		family += (eax >> 20) & 0xFF;
	if (family == 0x6 || family >= 0xF)
		model += ((eax >> 16) & 0xF) << 4;
	info->family = family;
	info->model = model;
	info->stepping = eax & 0xF;
}

/* The hypervisor's vendor signature (leaf 0x40000000 EBX, ECX, EDX; the convention KVM, Xen,
 * Hyper-V and VMware follow), "?" when the leaf cannot be read. */
static void probe_hypervisor(const struct msr_backend *backend, const char *dev_root,
			     struct machine_info *info)
{
	uint32_t regs[4];

	if (read_cpuid(backend, dev_root, 0x40000000u, regs) < 0) {
		strcpy(info->hypervisor, "?");
		return;
	}
	memcpy(info->hypervisor, &regs[1], 4);
	memcpy(info->hypervisor + 4, &regs[2], 4);
	memcpy(info->hypervisor + 8, &regs[3], 4);
	info->hypervisor[12] = '\0';
	if (info->hypervisor[0] == '\0')
		strcpy(info->hypervisor, "?");
}

static int probe_cpuid(const struct msr_backend *backend, const char *dev_root,
		       struct machine_info *info)
{
	uint32_t regs[4];
	int ret = read_cpuid(backend, dev_root, 0, regs);

	if (ret < 0)
		return ret;
	memcpy(info->vendor, &regs[1], 4);
	memcpy(info->vendor + 4, &regs[3], 4);
	memcpy(info->vendor + 8, &regs[2], 4);
	info->vendor[12] = '\0';
	if (regs[0] >= 1 && read_cpuid(backend, dev_root, 1, regs) == 0) {
		decode_signature(regs[0], info);
		if (regs[2] >> 31)
			probe_hypervisor(backend, dev_root, info);
	}
	if (cpu_vendor_is_intel(info->vendor) && read_cpuid(backend, dev_root, 0, regs) == 0 &&
	    regs[0] >= 0xA)
		ret = read_cpuid(backend, dev_root, 0xA, info->cpuid_0a);
	if (cpu_vendor_is_amd(info->vendor) &&
	    read_cpuid(backend, dev_root, 0x80000000u, regs) == 0 && regs[0] >= CPUID_AMD_EXT_PERFMON &&
	    regs[0] < 0x8000FFFFu && read_cpuid(backend, dev_root, CPUID_AMD_EXT_PERFMON, regs) == 0)
		info->amd_perfmon_v2 = CPUID_AMD_EXT_PERFMON_V2(regs[0]) != 0;
	snprintf(info->model_name, sizeof(info->model_name), "%s family 0x%X model 0x%X%s%s",
		 info->vendor, info->family, info->model,
		 info->hypervisor[0] ? ", VM under " : "", info->hypervisor);
	return ret;
}

/* ---- topology ---- */

/* topology/<name> of a CPU (physical_package_id, die_id), 0 when absent. */
static int topology_id(const char *dev_root, uint32_t cpu, const char *name)
{
	char path[PATH_MAX], text[32] = "";
	FILE *file;
	int package = 0;

	if (backend_root_path(path, sizeof(path), dev_root,
		      "sys/devices/system/cpu/cpu%u/topology/%s", cpu, name) < 0)
		return 0;
	file = fopen(path, "re");
	if (!file)
		return 0;
	if (fgets(text, sizeof(text), file))
		package = atoi(text);
	fclose(file);
	return package < 0 ? 0 : package;
}

/* (package, die) pairs numbered densely in CPU order, from topology/die_id (Linux 5.3+; absent:
 * one die a package). */
static void probe_dies(const char *dev_root, struct machine_info *info)
{
	static int dense_die_of[MACHINE_MAX_CPUS]; /* by package * MAX_DIES + die */
	enum { MAX_DIES = 8 };

	info->die_count = 0;
	for (uint32_t slot = 0; slot < MACHINE_MAX_CPUS; slot++)
		dense_die_of[slot] = -1;
	for (uint32_t cpu = 0; cpu < info->cpu_count; cpu++) {
		int die = topology_id(dev_root, cpu, "die_id");
		uint32_t slot = (uint32_t)info->cpu_package[cpu] * MAX_DIES +
				(die >= 0 && die < MAX_DIES ? (uint32_t)die : 0);

		if (slot >= MACHINE_MAX_CPUS)
			slot = info->cpu_package[cpu] % MACHINE_MAX_CPUS;
		if (dense_die_of[slot] < 0) {
			dense_die_of[slot] = (int)info->die_count;
			info->die_count++;
		}
		info->cpu_die[cpu] = (uint16_t)dense_die_of[slot];
	}
}

/* Packages are numbered densely in the order of their physical ids. */
static void probe_packages(const char *dev_root, struct machine_info *info)
{
	int physical[MACHINE_MAX_CPUS];
	bool used[MACHINE_MAX_CPUS] = { false };
	uint16_t dense[MACHINE_MAX_CPUS];

	for (uint32_t cpu = 0; cpu < info->cpu_count; cpu++) {
		physical[cpu] = topology_id(dev_root, cpu, "physical_package_id");
		if (physical[cpu] < (int)MACHINE_MAX_CPUS)
			used[physical[cpu]] = true;
		else
			physical[cpu] = 0;
	}
	info->package_count = 0;
	for (uint32_t id = 0; id < MACHINE_MAX_CPUS; id++) {
		if (used[id])
			dense[id] = (uint16_t)info->package_count++;
	}
	for (uint32_t cpu = 0; cpu < info->cpu_count; cpu++)
		info->cpu_package[cpu] = dense[physical[cpu]];
	probe_dies(dev_root, info);
}

/* ---- RAPL ---- */

/* Upper bound of a package's power for wrap deadlines: max(PKG_POWER_INFO maximum power,
 * 3 x its thermal spec power), or 1000 W when the register says nothing. Turbo limits (PL2) run
 * above TDP, up to about twice on recent desktop parts, hence the factor 3. */
static uint32_t package_power_bound_mw(const struct msr_backend *backend, uint64_t unit_raw,
				       bool atom)
{
	uint64_t info, tdp, max, bound;
	unsigned power_exponent = RAPL_UNIT_POWER(unit_raw);

	if (backend_device_read(backend, 0, MSR_PKG_POWER_INFO, &info) < 0)
		return DEFAULT_MAX_POWER_MW;
	tdp = info & 0x7FFF;
	max = (info >> 32) & 0x7FFF;
	bound = max > POWER_INFO_TDP_FACTOR * tdp ? max : POWER_INFO_TDP_FACTOR * tdp;
	/* Silvermont/Airmont count power in 2^PU mW (powercap's rapl_check_unit_atom). */
	bound = atom ? bound << power_exponent : (bound * 1000) >> power_exponent;
	if (bound == 0 || bound > UINT32_MAX)
		return DEFAULT_MAX_POWER_MW;
	return (uint32_t)bound;
}

static bool psys_without_msr(const struct machine_info *info)
{
	if (!rapl_psys_without_msr(cpu_vendor_is_intel(info->vendor), info->family, info->model))
		return false;
	log_info("backend: Granite Rapids: the platform energy (energy-psys) has no MSR-side "
		 "source (it is in TPMI); psys: use --backend powercap (the kernel's psys zone)");
	return true;
}

/* As the kernel's rapl drivers do: a domain exists when its status register reads non-zero; one
 * that reads 0 is dormant (it may start counting later, and msrd must coarsen it all the same). */
static void probe_rapl(const struct msr_backend *backend, struct machine_info *info)
{
	bool amd = cpu_vendor_is_amd(info->vendor);
	uint32_t unit_address = amd ? MSR_AMD_RAPL_POWER_UNIT : MSR_RAPL_POWER_UNIT;
	uint32_t bound_mw;
	uint64_t unit, value;

	if (backend_device_read(backend, 0, unit_address, &unit) < 0 || unit == 0) {
		if (info->hypervisor[0] != '\0')
			log_warnx("backend: no RAPL: this is a virtual machine (hypervisor \"%s\", "
				  "CPUID 0x40000000), which does not pass the energy registers "
				  "through; measure energy on the host", info->hypervisor);
		return;
	}
	info->rapl_power_unit = unit;
	bound_mw = amd ? DEFAULT_MAX_POWER_MW
		       : package_power_bound_mw(backend, unit,
						rapl_unit_is_atom_microjoule(
							cpu_vendor_is_intel(info->vendor),
							info->family, info->model));
	for (enum rapl_domain domain = 0; domain < RAPL_DOMAIN_COUNT; domain++) {
		if (domain == RAPL_DOMAIN_PSYS && psys_without_msr(info))
			continue;
		if (rapl_domain_is_amd(domain) != amd ||
		    backend_device_read(backend, 0, rapl_energy_status_address(domain), &value) < 0)
			continue;
		if ((value & RAPL_ENERGY_COUNTER_MASK) != 0)
			info->rapl_domains |= 1u << domain;
		else
			info->rapl_dormant_domains |= 1u << domain;
		info->rapl_energy_exponent[domain] = rapl_unit_code_of(
			cpu_vendor_is_intel(info->vendor), info->family, info->model, (int)domain,
			unit);
		info->rapl_max_power_mw[domain] = domain == RAPL_DOMAIN_PSYS ? DEFAULT_MAX_POWER_MW :
										bound_mw;
	}
}

/* ---- TSC frequency ---- */

static bool is_nehalem_westmere(uint32_t model)
{
	static const uint32_t models[] = { 0x1A, 0x1E, 0x1F, 0x2E, 0x25, 0x2C, 0x2F };

	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		if (models[i] == model)
			return true;
	}
	return false;
}

static uint64_t calibrated_tsc_hz(const struct msr_backend *backend, uint8_t *source);

/* The core crystal clock of the models whose CPUID 0x15 gives the ratio but ECX = 0: Intel SDM
 * vol. 3B, "Determining the Processor Base Frequency" (table "Nominal Core Crystal Clock
 * Frequency"): 6th and 7th generation Core (and Coffee Lake, the same model numbers) 24 MHz,
 * Xeon Scalable 06_55 (Skylake-SP, Cascade/Cooper Lake) 25 MHz, Atom Goldmont 06_5C 19.2 MHz;
 * Linux's native_calibrate_tsc (arch/x86/kernel/tsc.c) carried the same list before it derived
 * the crystal from CPUID 0x16's base, and keeps Denverton (06_5F) at 25 MHz and Goldmont Plus
 * (06_7A) at 19.2 MHz. The base frequency of 0x16 is not the TSC's: a Core i7-6700K's base is
 * 4000 MHz, its TSC 24 MHz x 334 / 2 = 4008 MHz. */
static uint64_t sdm_crystal_hz(uint32_t model)
{
	switch (model) {
	case 0x4E: case 0x5E: case 0x8E: case 0x9E:
		return 24000000u;
	case 0x55: case 0x5F:
		return 25000000u;
	case 0x5C: case 0x7A:
		return 19200000u;
	default:
		return 0;
	}
}

/* What CPUID 0x15 alone says of an Intel TSC: crystal x EBX / EAX, or the SDM's crystal of the
 * model x that ratio where ECX gives no crystal; 0 when it says nothing. */
static uint64_t cpuid_15_tsc_hz(const struct msr_backend *backend, const char *dev_root,
				const struct machine_info *info, uint32_t max_leaf, uint8_t *source)
{
	uint32_t regs[4];

	if (max_leaf < 0x15 || read_cpuid(backend, dev_root, 0x15, regs) < 0 || !regs[0] || !regs[1])
		return 0;
	if (regs[2]) {
		*source = TSC_SOURCE_CPUID_15;
		return (uint64_t)regs[2] * regs[1] / regs[0];
	}
	if (info->family == 6 && sdm_crystal_hz(info->model) != 0) {
		*source = TSC_SOURCE_CRYSTAL_TABLE;
		return sdm_crystal_hz(info->model) * regs[1] / regs[0];
	}
	return 0;
}

static uint64_t intel_tsc_hz(const struct msr_backend *backend, const char *dev_root,
			     const struct machine_info *info, uint8_t *source)
{
	uint32_t regs[4], max_leaf;
	uint64_t platform, hz;

	if (read_cpuid(backend, dev_root, 0, regs) < 0)
		return 0;
	max_leaf = regs[0];
	hz = cpuid_15_tsc_hz(backend, dev_root, info, max_leaf, source);
	if (hz != 0)
		return hz;
	/* 0x15 without the crystal on another model: a calibration is better than 0x16's base
	 * (within a MHz; the kernel too calibrates when it derived the crystal from 0x16). */
	if (max_leaf >= 0x16 && (hz = calibrated_tsc_hz(backend, source)) != 0)
		return hz;
	if (max_leaf >= 0x16 && read_cpuid(backend, dev_root, 0x16, regs) == 0 && (regs[0] & 0xFFFF)) {
		*source = TSC_SOURCE_CPUID_16;
		return (uint64_t)(regs[0] & 0xFFFF) * 1000000u;
	}
	if (info->family == 6 && backend_device_read(backend, 0, MSR_PLATFORM_INFO, &platform) == 0 &&
	    ((platform >> 8) & 0xFF) != 0) {
		*source = TSC_SOURCE_PLATFORM_INFO;
		return ((platform >> 8) & 0xFF) *
		       (is_nehalem_westmere(info->model) ? 133333333ull : 100000000ull);
	}
	return 0;
}

static uint64_t amd_tsc_hz(const struct msr_backend *backend, const struct machine_info *info,
			   uint8_t *source)
{
	uint64_t pstate, mhz = 0;

	if (info->family < 0x17 || backend_device_read(backend, 0, MSR_AMD_PSTATE_DEF0, &pstate) < 0 ||
	    !(pstate & AMD_PSTATE_ENABLED))
		return 0;
	if (info->family >= 0x1A) {
		mhz = (pstate & 0xFFF) * 5;
	} else {
		uint64_t fid = pstate & 0xFF, dfs = (pstate >> 8) & 0x3F;
		mhz = dfs ? fid * 200 / dfs : 0;
	}
	if (mhz == 0)
		return 0;
	*source = TSC_SOURCE_AMD_P0;
	return mhz * 1000000u;
}

/* The TSC through the device against CLOCK_MONOTONIC_RAW over 20 ms, rounded to 1 MHz; 0 when
 * the TSC does not move (a stand-in file). */
static uint64_t calibrated_tsc_hz(const struct msr_backend *backend, uint8_t *source)
{
	struct timespec pause = { .tv_nsec = 20000000 };
	uint64_t tsc0, tsc1, t0, t1;

	t0 = clock_monotonic_raw_ns();
	if (backend_device_read(backend, 0, MSR_IA32_TSC, &tsc0) < 0)
		return 0;
	nanosleep(&pause, NULL);
	t1 = clock_monotonic_raw_ns();
	if (backend_device_read(backend, 0, MSR_IA32_TSC, &tsc1) < 0 || tsc1 <= tsc0 || t1 <= t0)
		return 0;
	*source = TSC_SOURCE_CALIBRATED;
	return ((unsigned __int128)(tsc1 - tsc0) * 1000000000u / (t1 - t0) + 500000) / 1000000 *
	       1000000;
}

/* Invariant TSC (Intel SDM vol. 3B 18.17.1; AMD APM vol. 3 CPUID Fn8000_0007 EDX[8]
 * TscInvariant): 1, 0, or -1 when the leaf cannot be read. */
static int8_t tsc_invariant(const struct msr_backend *backend, const char *dev_root)
{
	uint32_t regs[4];

	if (read_cpuid(backend, dev_root, 0x80000000u, regs) < 0 || regs[0] < 0x80000007u ||
	    read_cpuid(backend, dev_root, 0x80000007u, regs) < 0)
		return -1;
	return (regs[3] >> 8) & 1;
}

/* In order of trust: what the CPU says of itself, then a measurement. */
static void probe_tsc(const struct msr_backend *backend, const char *dev_root,
		      struct machine_info *info)
{
	bool amd = cpu_vendor_is_amd(info->vendor);

	info->tsc_source = TSC_SOURCE_UNKNOWN;
	info->tsc_hz = amd ? amd_tsc_hz(backend, info, &info->tsc_source)
			   : cpu_vendor_is_intel(info->vendor)
				   ? intel_tsc_hz(backend, dev_root, info, &info->tsc_source)
				   : 0;
	if (info->tsc_hz == 0)
		info->tsc_hz = calibrated_tsc_hz(backend, &info->tsc_source);
	info->tsc_invariant = tsc_invariant(backend, dev_root);
	if (info->tsc_invariant == 0)
		log_warnx("backend: the TSC is not invariant (CPUID 0x80000007 EDX[8] clear): its "
			  "rate follows the core's P-state and halts in deep C-states, so seconds "
			  "and watts msrd and libhaecer derive from it are wrong");
}

void backend_probe_simulated(struct msr_backend *backend)
{
	struct machine_info *info = &backend->info;
	uint32_t regs[4];
	uint64_t hz;
	uint8_t source = TSC_SOURCE_UNKNOWN;

	if (cpu_vendor_is_intel(info->vendor)) {
		backend_probe_core_types(backend, NULL, info);
		if (read_cpuid(backend, NULL, 0, regs) == 0 &&
		    (hz = cpuid_15_tsc_hz(backend, NULL, info, regs[0], &source)) != 0) {
			info->tsc_hz = hz;
			info->tsc_source = source;
		}
	}
	info->tsc_invariant = tsc_invariant(backend, NULL);
}

/* kernel.nmi_watchdog: "1" when the hard-lockup detector holds a cycles counter. */
static bool nmi_watchdog_on(const char *dev_root)
{
	char path[PATH_MAX], text[8] = "";
	FILE *file;

	if (backend_root_path(path, sizeof(path), dev_root, "proc/sys/kernel/nmi_watchdog") < 0)
		return false;
	file = fopen(path, "re");
	if (!file)
		return false;
	if (!fgets(text, sizeof(text), file))
		text[0] = '\0';
	fclose(file);
	return text[0] == '1';
}

void backend_probe_machine(struct msr_backend *backend, const char *dev_root)
{
	struct machine_info *info = &backend->info;
	uint64_t capabilities;

	if (probe_cpuid(backend, dev_root, info) < 0)
		log_warnx("backend: CPUID could not be read; vendor and model are unknown");
	info->cpu_count = backend->cpu_count;
	probe_packages(dev_root, info);
	if (cpu_vendor_is_intel(info->vendor))
		backend_probe_core_types(backend, dev_root, info);
	probe_rapl(backend, info);
	probe_tsc(backend, dev_root, info);
	info->nmi_watchdog = nmi_watchdog_on(dev_root);
	info->has_smi_count = cpu_vendor_is_intel(info->vendor) &&
			      backend_device_read(backend, 0, MSR_SMI_COUNT, &capabilities) == 0;
	if (CPUID_0A_EAX_VERSION(info->cpuid_0a[0]) >= 2 &&
	    backend_device_read(backend, 0, MSR_IA32_PERF_CAPABILITIES, &capabilities) == 0)
		info->pmc_full_width_writes = (capabilities >> 13) & 1;
}

