/*
 * backend/backend.c — opening a backend and routing register accesses to it: the Linux msr driver,
 * LLNL's msr-safe (with its batch ioctl), or the simulated CPU (sim*.c).
 *
 * The device backends do what the drivers do and report what the drivers report: pread/pwrite of
 * 8 bytes at offset = address, -EIO for an MSR the CPU refuses (or a short transfer from a
 * stand-in file), -EPERM for a write the driver does not allow. A device that opens only
 * read-only (no CAP_SYS_RAWIO for writing, a read-only stand-in) is kept, and its writes fail
 * with -EPERM, which is what the msr driver says when writes are disabled or the kernel is
 * locked down.
 */
#include "backend/backend.h"

#include <cpuid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "hw/rapl_quirks.h"
#include "hw/vendor.h"
#include "backend/sim/sim.h"

/* ---- msr-safe's batch ABI (msr_safe.h in LLNL/msr-safe), written from its description ---- */

struct msr_safe_batch_op {
	uint16_t cpu;       /* in */
	uint16_t isrdmsr;   /* in: non-zero = read */
	int32_t err;        /* out: 0 or -errno */
	uint32_t msr;       /* in */
	uint64_t msrdata;   /* in/out */
	uint64_t wmask;     /* out: the allowlist's write mask */
};

struct msr_safe_batch_array {
	uint32_t numops;
	uint32_t version;   /* msr-safe 1.8.0 encodes as (1 << 16) | (8 << 8) | 0 */
	struct msr_safe_batch_op *ops;
};

_Static_assert(sizeof(struct msr_safe_batch_op) == 32, "msr_batch_op is 32 bytes");
_Static_assert(offsetof(struct msr_safe_batch_op, msrdata) == 16, "msrdata at 16");
_Static_assert(sizeof(struct msr_safe_batch_array) == 16, "msr_batch_array is 16 bytes");

#define MSR_SAFE_VERSION ((1u << 16) | (8u << 8))
#define MSR_SAFE_IOC_BATCH _IOWR('c', 0xA2, struct msr_safe_batch_array)
#define MSR_SAFE_MAX_CPU UINT16_MAX

/* Defaults for wrap deadlines when MSR_PKG_POWER_INFO says nothing usable (see README). */
#define DEFAULT_MAX_POWER_MW 1000000u
#define POWER_INFO_TDP_FACTOR 3u

struct msr_backend {
	enum backend_kind kind;
	struct machine_info info;
	struct sim *sim;
	uint32_t cpu_count;
	int *fds;              /* per CPU, -1 when the CPU has no device */
	bool *writable;
	int batch_fd;          /* msr-safe's dev/cpu/msr_batch, or -1 */
	bool batch_unsupported;
	struct msr_safe_batch_op *batch_ops;
	size_t batch_capacity;
};

/* ---- names ---- */

static const char *const kind_names[] = { "auto", "msr", "msr-safe", "sim" };

const char *backend_kind_name(enum backend_kind kind)
{
	if ((unsigned)kind >= sizeof(kind_names) / sizeof(kind_names[0]))
		return "unknown";
	return kind_names[kind];
}

int backend_kind_parse(const char *name, enum backend_kind *out)
{
	for (size_t i = 0; name && i < sizeof(kind_names) / sizeof(kind_names[0]); i++) {
		if (strcmp(name, kind_names[i]) == 0) {
			*out = (enum backend_kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

enum backend_kind backend_kind(const struct msr_backend *backend)
{
	return backend->kind;
}

/* ---- paths under dev_root ---- */

static const char *root_of(const char *dev_root)
{
	if (!dev_root || !*dev_root || strcmp(dev_root, "/") == 0)
		return "";
	return dev_root;
}

static int __attribute__((format(printf, 4, 5)))
root_path(char *path, size_t size, const char *dev_root, const char *format, ...)
{
	size_t used = (size_t)snprintf(path, size, "%s/", root_of(dev_root));
	va_list arguments;
	int length;

	if (used >= size)
		return -ENAMETOOLONG;
	va_start(arguments, format);
	length = vsnprintf(path + used, size - used, format, arguments);
	va_end(arguments);
	return length < 0 || (size_t)length >= size - used ? -ENAMETOOLONG : 0;
}

/* CPUs are the numbered directories of dev/cpu; the count is the highest number + 1. */
static int count_cpu_directories(const char *dev_root, uint32_t *count)
{
	char path[PATH_MAX];
	struct dirent *entry;
	DIR *directory;
	int ret = root_path(path, sizeof(path), dev_root, "dev/cpu");

	if (ret < 0)
		return ret;
	directory = opendir(path);
	if (!directory)
		return -errno;
	*count = 0;
	while ((entry = readdir(directory)) != NULL) {
		char *end;
		unsigned long number = strtoul(entry->d_name, &end, 10);

		if (end == entry->d_name || *end || entry->d_name[0] == '+')
			continue;
		if (number >= MACHINE_MAX_CPUS) {
			log_warnx("backend: %s/%s ignored (more than %u CPUs)", path,
				  entry->d_name, MACHINE_MAX_CPUS);
			continue;
		}
		if (number + 1 > *count)
			*count = (uint32_t)number + 1;
	}
	closedir(directory);
	return *count ? 0 : -ENOENT;
}

/* ---- device access ---- */

static int device_read(const struct msr_backend *backend, uint32_t cpu, uint32_t address,
		       uint64_t *value)
{
	ssize_t got;

	if (cpu >= backend->cpu_count || backend->fds[cpu] < 0)
		return -ENXIO;
	got = pread(backend->fds[cpu], value, sizeof(*value), (off_t)address);
	if (got < 0)
		return -errno;
	return got == sizeof(*value) ? 0 : -EIO;
}

static int device_write(const struct msr_backend *backend, uint32_t cpu, uint32_t address,
			uint64_t value)
{
	ssize_t put;

	if (cpu >= backend->cpu_count || backend->fds[cpu] < 0)
		return -ENXIO;
	if (!backend->writable[cpu])
		return -EPERM;
	put = pwrite(backend->fds[cpu], &value, sizeof(value), (off_t)address);
	if (put < 0)
		return -errno;
	return put == sizeof(value) ? 0 : -EIO;
}

/* Open read-write, or read-only when writing is what is refused. */
static int open_device(const char *path, bool *writable)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);

	*writable = fd >= 0;
	if (fd < 0 && (errno == EACCES || errno == EPERM || errno == EROFS))
		fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int open_cpu_devices(struct msr_backend *backend, const char *dev_root,
			    const char *device, char *why, size_t why_size)
{
	char path[PATH_MAX];
	int ret = count_cpu_directories(dev_root, &backend->cpu_count);

	if (ret < 0) {
		root_path(path, sizeof(path), dev_root, "dev/cpu");
		snprintf(why, why_size, "%s: %s", path, strerror(-ret));
		return ret;
	}
	backend->fds = malloc(backend->cpu_count * sizeof(*backend->fds));
	backend->writable = calloc(backend->cpu_count, sizeof(*backend->writable));
	if (!backend->fds || !backend->writable)
		return -ENOMEM;
	for (uint32_t cpu = 0; cpu < backend->cpu_count; cpu++)
		backend->fds[cpu] = -1;
	for (uint32_t cpu = 0; cpu < backend->cpu_count; cpu++) {
		ret = root_path(path, sizeof(path), dev_root, "dev/cpu/%u/%s", cpu, device);
		if (ret == 0)
			ret = open_device(path, &backend->writable[cpu]);
		if (ret == -ENOENT && cpu > 0)
			continue; /* an offline CPU keeps its directory but has no device */
		if (ret < 0) {
			snprintf(why, why_size, "%s: %s", path, strerror(-ret));
			return ret;
		}
		backend->fds[cpu] = ret;
	}
	if (!backend->writable[0])
		log_warnx("backend: %s opened read-only: every write will fail with EPERM", path);
	return 0;
}

/* ---- CPUID: dev/cpu/N/cpuid or the instruction ---- */

/* The cpuid driver reads 16 bytes (eax, ebx, ecx, edx) at offset (subleaf << 32) | leaf. Its
 * offsets are keys, so neighbouring leaves cannot share a regular file: a stand-in file holds
 * 16-byte records at offset 16 * ((subleaf << 32) | leaf) instead. */
static int read_cpuid(const char *dev_root, uint32_t leaf, uint32_t regs[4])
{
	char path[PATH_MAX];
	uint64_t key = leaf;
	struct stat st;
	ssize_t got;
	int fd, ret = root_path(path, sizeof(path), dev_root, "dev/cpu/0/cpuid");

	fd = ret == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0) {
		__cpuid_count(leaf, 0, regs[0], regs[1], regs[2], regs[3]);
		return 0;
	}
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		key *= 16;
	got = pread(fd, regs, 16, (off_t)key);
	ret = got == 16 ? 0 : (got < 0 ? -errno : -EIO);
	close(fd);
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

static int probe_cpuid(const char *dev_root, struct machine_info *info)
{
	uint32_t regs[4];
	int ret = read_cpuid(dev_root, 0, regs);

	if (ret < 0)
		return ret;
	memcpy(info->vendor, &regs[1], 4);
	memcpy(info->vendor + 4, &regs[3], 4);
	memcpy(info->vendor + 8, &regs[2], 4);
	info->vendor[12] = '\0';
	if (regs[0] >= 1 && read_cpuid(dev_root, 1, regs) == 0)
		decode_signature(regs[0], info);
	if (cpu_vendor_is_intel(info->vendor) && read_cpuid(dev_root, 0, regs) == 0 &&
	    regs[0] >= 0xA)
		ret = read_cpuid(dev_root, 0xA, info->cpuid_0a);
	if (cpu_vendor_is_amd(info->vendor) &&
	    read_cpuid(dev_root, 0x80000000u, regs) == 0 && regs[0] >= CPUID_AMD_EXT_PERFMON &&
	    regs[0] < 0x8000FFFFu && read_cpuid(dev_root, CPUID_AMD_EXT_PERFMON, regs) == 0)
		info->amd_perfmon_v2 = CPUID_AMD_EXT_PERFMON_V2(regs[0]) != 0;
	snprintf(info->model_name, sizeof(info->model_name), "%s family 0x%X model 0x%X",
		 info->vendor, info->family, info->model);
	return ret;
}

/* ---- topology ---- */

static int physical_package(const char *dev_root, uint32_t cpu)
{
	char path[PATH_MAX], text[32] = "";
	FILE *file;
	int package = 0;

	if (root_path(path, sizeof(path), dev_root,
		      "sys/devices/system/cpu/cpu%u/topology/physical_package_id", cpu) < 0)
		return 0;
	file = fopen(path, "re");
	if (!file)
		return 0;
	if (fgets(text, sizeof(text), file))
		package = atoi(text);
	fclose(file);
	return package < 0 ? 0 : package;
}

/* Packages are numbered densely in the order of their physical ids. */
static void probe_packages(const char *dev_root, struct machine_info *info)
{
	int physical[MACHINE_MAX_CPUS];
	bool used[MACHINE_MAX_CPUS] = { false };
	uint16_t dense[MACHINE_MAX_CPUS];

	for (uint32_t cpu = 0; cpu < info->cpu_count; cpu++) {
		physical[cpu] = physical_package(dev_root, cpu);
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
}

/* ---- RAPL ---- */

/* Upper bound of a package's power for wrap deadlines: max(PKG_POWER_INFO maximum power,
 * 3 x its thermal spec power), or 1000 W when the register says nothing. Turbo limits (PL2) run
 * above TDP, up to about twice on recent desktop parts, hence the factor 3. */
static uint32_t package_power_bound_mw(const struct msr_backend *backend, uint64_t unit_raw)
{
	uint64_t info, tdp, max, bound;
	unsigned power_exponent = RAPL_UNIT_POWER(unit_raw);

	if (device_read(backend, 0, MSR_PKG_POWER_INFO, &info) < 0)
		return DEFAULT_MAX_POWER_MW;
	tdp = info & 0x7FFF;
	max = (info >> 32) & 0x7FFF;
	bound = max > POWER_INFO_TDP_FACTOR * tdp ? max : POWER_INFO_TDP_FACTOR * tdp;
	bound = (bound * 1000) >> power_exponent;
	if (bound == 0 || bound > UINT32_MAX)
		return DEFAULT_MAX_POWER_MW;
	return (uint32_t)bound;
}

/* As the kernel's rapl drivers do: a domain exists when its status register reads non-zero; one
 * that reads 0 is dormant (it may start counting later, and msrd must coarsen it all the same). */
static void probe_rapl(const struct msr_backend *backend, struct machine_info *info)
{
	bool amd = cpu_vendor_is_amd(info->vendor);
	uint32_t unit_address = amd ? MSR_AMD_RAPL_POWER_UNIT : MSR_RAPL_POWER_UNIT;
	uint32_t bound_mw;
	uint64_t unit, value;

	if (device_read(backend, 0, unit_address, &unit) < 0 || unit == 0)
		return;
	info->rapl_power_unit = unit;
	bound_mw = amd ? DEFAULT_MAX_POWER_MW : package_power_bound_mw(backend, unit);
	for (enum rapl_domain domain = 0; domain < RAPL_DOMAIN_COUNT; domain++) {
		uint8_t exponent = (uint8_t)RAPL_UNIT_ENERGY(unit);
		const struct rapl_unit_quirk *quirk;

		if (rapl_domain_is_amd(domain) != amd ||
		    device_read(backend, 0, rapl_energy_status_address(domain), &value) < 0)
			continue;
		quirk = rapl_unit_quirk_of(cpu_vendor_is_intel(info->vendor), info->family,
					   info->model, (int)domain);
		if (quirk)
			exponent = quirk->exponent;
		if ((value & RAPL_ENERGY_COUNTER_MASK) != 0)
			info->rapl_domains |= 1u << domain;
		else
			info->rapl_dormant_domains |= 1u << domain;
		info->rapl_energy_exponent[domain] = exponent;
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

static uint64_t intel_tsc_hz(const struct msr_backend *backend, const char *dev_root,
			     const struct machine_info *info, uint8_t *source)
{
	uint32_t regs[4], max_leaf;
	uint64_t platform;

	if (read_cpuid(dev_root, 0, regs) < 0)
		return 0;
	max_leaf = regs[0];
	if (max_leaf >= 0x15 && read_cpuid(dev_root, 0x15, regs) == 0 && regs[0] && regs[1] &&
	    regs[2]) {
		*source = TSC_SOURCE_CPUID_15;
		return (uint64_t)regs[2] * regs[1] / regs[0];
	}
	/* 0x15 without the crystal: the base frequency of 0x16 is the TSC's (the kernel derives
	 * the crystal from it the same way). */
	if (max_leaf >= 0x16 && read_cpuid(dev_root, 0x16, regs) == 0 && (regs[0] & 0xFFFF)) {
		*source = TSC_SOURCE_CPUID_16;
		return (uint64_t)(regs[0] & 0xFFFF) * 1000000u;
	}
	if (info->family == 6 && device_read(backend, 0, MSR_PLATFORM_INFO, &platform) == 0 &&
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

	if (info->family < 0x17 || device_read(backend, 0, MSR_AMD_PSTATE_DEF0, &pstate) < 0 ||
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

static uint64_t monotonic_raw_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC_RAW, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* The TSC through the device against CLOCK_MONOTONIC_RAW over 20 ms, rounded to 1 MHz; 0 when
 * the TSC does not move (a stand-in file). */
static uint64_t calibrated_tsc_hz(const struct msr_backend *backend, uint8_t *source)
{
	struct timespec pause = { .tv_nsec = 20000000 };
	uint64_t tsc0, tsc1, t0, t1;

	t0 = monotonic_raw_ns();
	if (device_read(backend, 0, MSR_IA32_TSC, &tsc0) < 0)
		return 0;
	nanosleep(&pause, NULL);
	t1 = monotonic_raw_ns();
	if (device_read(backend, 0, MSR_IA32_TSC, &tsc1) < 0 || tsc1 <= tsc0 || t1 <= t0)
		return 0;
	*source = TSC_SOURCE_CALIBRATED;
	return ((unsigned __int128)(tsc1 - tsc0) * 1000000000u / (t1 - t0) + 500000) / 1000000 *
	       1000000;
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
}

/* kernel.nmi_watchdog: "1" when the hard-lockup detector holds a cycles counter. */
static bool nmi_watchdog_on(const char *dev_root)
{
	char path[PATH_MAX], text[8] = "";
	FILE *file;

	if (root_path(path, sizeof(path), dev_root, "proc/sys/kernel/nmi_watchdog") < 0)
		return false;
	file = fopen(path, "re");
	if (!file)
		return false;
	if (!fgets(text, sizeof(text), file))
		text[0] = '\0';
	fclose(file);
	return text[0] == '1';
}

static void probe_machine(struct msr_backend *backend, const char *dev_root)
{
	struct machine_info *info = &backend->info;
	uint64_t capabilities;

	if (probe_cpuid(dev_root, info) < 0)
		log_warnx("backend: CPUID could not be read; vendor and model are unknown");
	info->cpu_count = backend->cpu_count;
	probe_packages(dev_root, info);
	probe_rapl(backend, info);
	probe_tsc(backend, dev_root, info);
	info->nmi_watchdog = nmi_watchdog_on(dev_root);
	info->has_smi_count = cpu_vendor_is_intel(info->vendor) &&
			      device_read(backend, 0, MSR_SMI_COUNT, &capabilities) == 0;
	if (CPUID_0A_EAX_VERSION(info->cpuid_0a[0]) >= 2 &&
	    device_read(backend, 0, MSR_IA32_PERF_CAPABILITIES, &capabilities) == 0)
		info->pmc_full_width_writes = (capabilities >> 13) & 1;
}

/* ---- opening ---- */

static struct msr_backend *backend_alloc(enum backend_kind kind)
{
	struct msr_backend *backend = calloc(1, sizeof(*backend));

	if (backend) {
		backend->kind = kind;
		backend->batch_fd = -1;
	}
	return backend;
}

static int open_msr_safe_batch(struct msr_backend *backend, const char *dev_root)
{
	char path[PATH_MAX];
	bool writable;
	int fd;

	if (root_path(path, sizeof(path), dev_root, "dev/cpu/msr_batch") < 0)
		return 0;
	fd = open_device(path, &writable);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0) {
		log_warn_errno(fd, "backend: %s (batches run op by op)", path);
		return 0;
	}
	backend->batch_fd = fd;
	return 0;
}

static int open_device_backend(const struct backend_options *options, enum backend_kind kind,
			       struct msr_backend **out, char *why, size_t why_size)
{
	struct msr_backend *backend = backend_alloc(kind);
	int ret;

	if (!backend)
		return -ENOMEM;
	ret = open_cpu_devices(backend, options->dev_root,
			       kind == BACKEND_MSR ? "msr" : "msr_safe", why, why_size);
	if (ret == 0 && kind == BACKEND_MSR_SAFE)
		ret = open_msr_safe_batch(backend, options->dev_root);
	if (ret < 0) {
		backend_close(backend);
		return ret;
	}
	probe_machine(backend, options->dev_root);
	*out = backend;
	return 0;
}

static int open_sim_backend(const struct backend_options *options, struct msr_backend **out,
			    char *why, size_t why_size)
{
	struct msr_backend *backend = backend_alloc(BACKEND_SIM);
	int ret;

	if (!backend)
		return -ENOMEM;
	ret = sim_open(options, &backend->sim, why, why_size);
	if (ret < 0) {
		free(backend);
		return ret;
	}
	backend->info = *sim_machine_info(backend->sim);
	backend->cpu_count = backend->info.cpu_count;
	*out = backend;
	return 0;
}

static void append(char *text, size_t size, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

static void append(char *text, size_t size, const char *format, ...)
{
	size_t used = strlen(text);
	va_list arguments;

	if (used + 1 >= size)
		return;
	va_start(arguments, format);
	vsnprintf(text + used, size - used, format, arguments);
	va_end(arguments);
}

/* msr, then msr-safe, then (only when asked for) the simulated CPU; `why` keeps what each
 * refusal was and what the operator could do about it. */
static int open_auto(const struct backend_options *options, struct msr_backend **out, char *why,
		     size_t why_size)
{
	struct backend_diagnosis diagnosis;
	char reason[512] = "";
	int ret;

	ret = open_device_backend(options, BACKEND_MSR, out, reason, sizeof(reason));
	if (ret == 0) {
		snprintf(why, why_size, "using the msr driver%s",
			 (*out)->writable[0] ? "" : " read-only (writes fail with EPERM)");
		return 0;
	}
	snprintf(why, why_size, "msr: %s", reason);
	if (backend_diagnose(options, &diagnosis) == 0 && diagnosis.advice[0])
		append(why, why_size, " (%s)", diagnosis.advice);
	reason[0] = '\0';
	ret = open_device_backend(options, BACKEND_MSR_SAFE, out, reason, sizeof(reason));
	if (ret == 0) {
		append(why, why_size, "; using msr-safe");
		return 0;
	}
	append(why, why_size, "; msr-safe: %s", reason);
	if (!options->allow_sim_fallback) {
		append(why, why_size, "; no usable MSR device, and the simulated CPU is used only "
		       "when asked for (--backend sim, or --allow-sim-fallback)");
		return -ENODEV;
	}
	reason[0] = '\0';
	ret = open_sim_backend(options, out, reason, sizeof(reason));
	if (ret < 0) {
		append(why, why_size, "; %s", reason);
		return ret;
	}
	append(why, why_size, "; using the simulated CPU (model %s)", (*out)->info.sim_model);
	return 0;
}

int backend_open(const struct backend_options *options, struct msr_backend **out, char *why,
		 size_t why_size)
{
	struct backend_diagnosis diagnosis;
	char ignored[8];
	int ret;

	if (!why || why_size == 0) {
		why = ignored;
		why_size = sizeof(ignored);
	}
	why[0] = '\0';
	switch (options->kind) {
	case BACKEND_AUTO:
		return open_auto(options, out, why, why_size);
	case BACKEND_MSR:
		ret = open_device_backend(options, options->kind, out, why, why_size);
		if (ret < 0 && backend_diagnose(options, &diagnosis) == 0 && diagnosis.advice[0])
			append(why, why_size, " (%s)", diagnosis.advice);
		return ret;
	case BACKEND_MSR_SAFE:
		return open_device_backend(options, options->kind, out, why, why_size);
	case BACKEND_SIM:
		return open_sim_backend(options, out, why, why_size);
	default:
		snprintf(why, why_size, "unknown backend kind %d", (int)options->kind);
		return -EINVAL;
	}
}

void backend_close(struct msr_backend *backend)
{
	if (!backend)
		return;
	for (uint32_t cpu = 0; backend->fds && cpu < backend->cpu_count; cpu++) {
		if (backend->fds[cpu] >= 0)
			close(backend->fds[cpu]);
	}
	if (backend->batch_fd >= 0)
		close(backend->batch_fd);
	sim_close(backend->sim);
	free(backend->fds);
	free(backend->writable);
	free(backend->batch_ops);
	free(backend);
}

/* ---- access ---- */

int backend_machine_info(const struct msr_backend *backend, struct machine_info *out)
{
	*out = backend->info;
	return 0;
}

uint32_t backend_cpu_count(const struct msr_backend *backend)
{
	return backend->cpu_count;
}

int backend_read(struct msr_backend *backend, uint32_t cpu, uint32_t address, uint64_t *value)
{
	if (backend->sim)
		return sim_read(backend->sim, cpu, address, value);
	return device_read(backend, cpu, address, value);
}

int backend_write(struct msr_backend *backend, uint32_t cpu, uint32_t address, uint64_t value)
{
	if (backend->sim)
		return sim_write(backend->sim, cpu, address, value);
	return device_write(backend, cpu, address, value);
}

static void run_ops_one_by_one(struct msr_backend *backend, struct msr_op *ops, size_t count,
			       const bool *skip)
{
	for (size_t i = 0; i < count; i++) {
		if (skip && skip[i])
			continue;
		ops[i].status = ops[i].write ?
					backend_write(backend, ops[i].cpu, ops[i].address,
						      ops[i].value) :
					backend_read(backend, ops[i].cpu, ops[i].address,
						     &ops[i].value);
	}
}

static int reserve_batch(struct msr_backend *backend, size_t count)
{
	struct msr_safe_batch_op *ops;

	if (count <= backend->batch_capacity)
		return 0;
	ops = realloc(backend->batch_ops, count * sizeof(*ops));
	if (!ops)
		return -ENOMEM;
	backend->batch_ops = ops;
	backend->batch_capacity = count;
	return 0;
}

/* The ioctl fails as a whole when msr-safe's allowlist refuses any op (-ENXIO, -EACCES, -EROFS
 * in that op's err): then nothing ran, and the others still run one by one. When an op fails
 * while running (-EIO), the others did run. */
static bool allowlist_refused(const struct msr_safe_batch_op *ops, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		if (ops[i].err == -ENXIO || ops[i].err == -EACCES || ops[i].err == -EROFS)
			return true;
	}
	return false;
}

static int run_msr_safe_batch(struct msr_backend *backend, struct msr_op *ops, size_t count)
{
	struct msr_safe_batch_array array = { .numops = (uint32_t)count,
					      .version = MSR_SAFE_VERSION };
	bool *refused = NULL;
	int ret = reserve_batch(backend, count);

	if (ret < 0)
		return ret;
	for (size_t i = 0; i < count; i++) {
		backend->batch_ops[i] = (struct msr_safe_batch_op){
			.cpu = (uint16_t)ops[i].cpu, .isrdmsr = !ops[i].write,
			.msr = ops[i].address, .msrdata = ops[i].write ? ops[i].value : 0 };
	}
	array.ops = backend->batch_ops;
	if (ioctl(backend->batch_fd, MSR_SAFE_IOC_BATCH, &array) < 0) {
		ret = -errno;
		if (ret == -ENOTTY) {
			log_info("backend: dev/cpu/msr_batch has no batch ioctl; ops run one by one");
			backend->batch_unsupported = true;
			return ret;
		}
		if (allowlist_refused(backend->batch_ops, count)) {
			refused = calloc(count, sizeof(*refused));
			if (!refused)
				return -ENOMEM;
			for (size_t i = 0; i < count; i++)
				refused[i] = backend->batch_ops[i].err != 0;
		} else if (ret != -EIO) {
			return ret; /* nothing ran: the caller runs the ops one by one */
		}
	}
	for (size_t i = 0; i < count; i++) {
		ops[i].status = backend->batch_ops[i].err;
		if (!ops[i].write && backend->batch_ops[i].err == 0)
			ops[i].value = backend->batch_ops[i].msrdata;
	}
	if (refused)
		run_ops_one_by_one(backend, ops, count, refused);
	free(refused);
	return 0;
}

unsigned long backend_ioctl_request(void)
{
	return MSR_SAFE_IOC_BATCH;
}

int backend_run_batch(struct msr_backend *backend, struct msr_op *ops, size_t count)
{
	bool usable = backend->batch_fd >= 0 && !backend->batch_unsupported && count > 0 &&
		      count <= UINT32_MAX;

	for (size_t i = 0; usable && i < count; i++)
		usable = ops[i].cpu < backend->cpu_count && ops[i].cpu <= MSR_SAFE_MAX_CPU;
	if (usable && run_msr_safe_batch(backend, ops, count) == 0)
		return 0;
	run_ops_one_by_one(backend, ops, count, NULL);
	return 0;
}

int backend_device_fd(const struct msr_backend *backend, uint32_t cpu)
{
	if (backend->sim)
		return -EOPNOTSUPP;
	if (cpu >= backend->cpu_count || backend->fds[cpu] < 0)
		return -ENXIO;
	return backend->fds[cpu];
}

int backend_device_write_fd(const struct msr_backend *backend, uint32_t cpu)
{
	int fd = backend_device_fd(backend, cpu);

	if (fd >= 0 && !backend->writable[cpu])
		return -EPERM;
	return fd;
}

/* ---- the simulated CPU's own calls ---- */

int backend_sim_now(const struct msr_backend *backend, uint64_t *now_ns)
{
	return backend->sim ? sim_now(backend->sim, now_ns) : -EOPNOTSUPP;
}

int backend_sim_advance(struct msr_backend *backend, uint64_t ns)
{
	return backend->sim ? sim_advance(backend->sim, ns) : -EOPNOTSUPP;
}

int backend_sim_set_load(struct msr_backend *backend, int cpu, double load)
{
	return backend->sim ? sim_set_load(backend->sim, cpu, load) : -EOPNOTSUPP;
}

int backend_sim_load_script(struct msr_backend *backend, const char *path)
{
	return backend->sim ? sim_load_script(backend->sim, path) : -EOPNOTSUPP;
}

int backend_sim_energy_truth_cpu(const struct msr_backend *backend, uint32_t cpu,
				 enum rapl_domain domain, struct sim_energy_truth *out)
{
	return backend->sim ? sim_energy_truth(backend->sim, cpu, domain, out) : -EOPNOTSUPP;
}

int backend_sim_energy_at(const struct msr_backend *backend, uint32_t package,
			  enum rapl_domain domain, uint64_t at_ns, struct sim_energy_truth *out)
{
	int cpu;

	if (!backend->sim)
		return -EOPNOTSUPP;
	cpu = sim_package_first_cpu(backend->sim, package);
	if (cpu < 0)
		return cpu;
	return sim_energy_at(backend->sim, (uint32_t)cpu, domain, at_ns, out);
}

int backend_sim_power_trace(struct msr_backend *backend, const char *text, const char *where)
{
	return backend->sim ? sim_power_trace(backend->sim, text, where) : -EOPNOTSUPP;
}

int backend_sim_energy_truth(const struct msr_backend *backend, uint32_t package,
			     enum rapl_domain domain, struct sim_energy_truth *out)
{
	int cpu;

	if (!backend->sim)
		return -EOPNOTSUPP;
	cpu = sim_package_first_cpu(backend->sim, package);
	if (cpu < 0)
		return cpu;
	return sim_energy_truth(backend->sim, (uint32_t)cpu, domain, out);
}
