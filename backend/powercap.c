/*
 * backend/powercap.c — the powercap backend: RAPL energy from the kernel's powercap zones
 * (sys/class/powercap/intel-rapl:N and intel-rapl:N:M, amd-rapl:... where a kernel names them so)
 * for machines without an MSR device (Secure Boot lockdown, containers, VMs, no msr module).
 *
 * It answers at the register level, as the energy-status registers would: a read of
 * PKG_ENERGY_STATUS (0x611) of a CPU is the package zone of that CPU's package, in units of
 * 2^-POWERCAP_ENERGY_EXPONENT J, modulo 2^32 as the register wraps; the unit register says that
 * exponent. So everything above the backend — msrd's 64-bit totals and wrap handling, the energy
 * page, coarse grants, schedules, rings, and the policy's grants by address — works unchanged,
 * and a client asking for MSR 0x611 gets the package domain on a powercap machine too. Every
 * other register reads -EIO, as a register the CPU does not have.
 *
 * Zone names map to haecer's domains: package-N → PKG, core → PP0, uncore → PP1 (energy-gpu),
 * dram → DRAM, psys → PSYS (package 0). package-N-die-M (die-scope RAPL: Cascade Lake-AP) is
 * die M of package N, keyed as the MSR path keys it (machine_energy_key): a read through a CPU
 * of that die gives that die's zone (and its subzones), so msrd keeps one total per die and the
 * tools sum the dies where a package is asked for; on a machine whose topology shows no dies
 * the die zones are summed into the package. AMD's energy-status addresses name the same zones
 * (AMD_PKG → package, AMD_CORE → core). On an AMD CPU (the kernel registers its zones as
 * intel-rapl too) the package zone is AMD's package domain (0xC001029B, or 0x611 asked for the
 * package); its core zone is one core's register read on the package's lead CPU, which
 * haecer's per-core AMD domain cannot name, so it is ignored.
 *
 * Each zone's energy_uj wraps at its max_energy_range_uj; this file keeps a 64-bit µJ total per
 * zone across those wraps and exposes it as the 32-bit register. The files are opened once at
 * start (they are root-only since CVE-2020-8694, and msrd may drop root later); a zone whose file
 * reads garbage or went away (removed: st_nlink 0, or the kernel's ENODEV) makes that read fail
 * with a log line on the first failure, never a crash.
 */
#include "backend/backend_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "hw/vendor.h"

#define POWERCAP_MAX_ZONES 64u
#define POWERCAP_ENERGY_EXPONENT 16u /* 15.3 µJ units: the register holds 65536 J before it wraps */
/* The unit register: power 2^-3 W, energy 2^-16 J, time 2^-10 s. */
#define POWERCAP_UNIT_REGISTER (0x3ull | ((uint64_t)POWERCAP_ENERGY_EXPONENT << 8) | (0xAull << 16))
#define POWERCAP_DEFAULT_MAX_POWER_MW 1000000ull
#define MICROJOULES_PER_JOULE 1000000ull

struct powercap_zone {
	char name[64];            /* the zone directory, e.g. intel-rapl:0:1 */
	enum rapl_domain domain;
	uint32_t package;
	int32_t die_key;          /* machine_info's dense die of a die-scope zone, or -1 */
	int fd;                   /* energy_uj */
	uint64_t max_range_uj;
	uint64_t last_uj;
	uint64_t total_uj;        /* since msrd opened the zone, across wraps */
	bool failing;             /* the last read failed (logged once per failure run) */
};

struct powercap {
	struct powercap_zone zones[POWERCAP_MAX_ZONES];
	uint32_t count;
};

/* ---- files ---- */

static int read_small_file(const char *path, char *text, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t got;

	if (fd < 0)
		return -errno;
	got = pread(fd, text, size - 1, 0);
	close(fd);
	if (got < 0)
		return -errno;
	text[got] = '\0';
	text[strcspn(text, "\n")] = '\0';
	return 0;
}

/* A decimal count as powercap prints it: digits, then an optional newline; -EBADMSG else. */
static int parse_count(const char *text, uint64_t *value)
{
	char *end;

	if (text[0] < '0' || text[0] > '9')
		return -EBADMSG;
	errno = 0;
	*value = strtoull(text, &end, 10);
	if (errno != 0 || (*end != '\0' && *end != '\n'))
		return -EBADMSG;
	return 0;
}

static int zone_file(const char *root, const char *zone, const char *file, char *text, size_t size)
{
	char path[PATH_MAX];
	int ret = backend_root_path(path, sizeof(path), root, "sys/class/powercap/%s/%s", zone, file);

	return ret < 0 ? ret : read_small_file(path, text, size);
}

/* ---- names ---- */

/* The domain, package and die (-1: none) a top-level zone stands for, from its name;
 * -ENOENT for a name haecer has no domain for. A subzone's package and die are its parent's. */
static int map_zone_name(const char *name, bool subzone, enum rapl_domain *domain,
			 uint32_t *package, int *die)
{
	unsigned number, die_id;
	char tail;

	*package = 0;
	*die = -1;
	if (!subzone && sscanf(name, "package-%u%c", &number, &tail) == 1) {
		*domain = RAPL_DOMAIN_PKG;
		*package = number;
		return 0;
	}
	if (!subzone && sscanf(name, "package-%u-die-%u%c", &number, &die_id, &tail) == 2) {
		*domain = RAPL_DOMAIN_PKG;
		*package = number;
		*die = (int)die_id;
		return 0;
	}
	if (strcmp(name, "core") == 0)
		*domain = RAPL_DOMAIN_PP0;
	else if (strcmp(name, "uncore") == 0)
		*domain = RAPL_DOMAIN_PP1;
	else if (strcmp(name, "dram") == 0)
		*domain = RAPL_DOMAIN_DRAM;
	else if (strcmp(name, "psys") == 0)
		*domain = RAPL_DOMAIN_PSYS;
	else
		return -ENOENT;
	return 0;
}

/* intel-rapl:N or amd-rapl:N (top level, *sub = -1) or intel-rapl:N:M; not intel-rapl-mmio,
 * which repeats the package zone through another interface. */
static bool parse_zone_dir(const char *dir, unsigned *top, int *sub)
{
	unsigned a, b;
	char tail;
	const char *rest = strncmp(dir, "intel-rapl:", 11) == 0 ? dir + 11 :
			   strncmp(dir, "amd-rapl:", 9) == 0 ? dir + 9 : NULL;

	if (!rest)
		return false;
	if (sscanf(rest, "%u:%u%c", &a, &b, &tail) == 2) {
		*top = a;
		*sub = (int)b;
		return true;
	}
	if (sscanf(rest, "%u%c", &a, &tail) == 1) {
		*top = a;
		*sub = -1;
		return true;
	}
	return false;
}

/* ---- opening ---- */

static int open_zone(struct powercap_zone *zone, const char *root)
{
	char path[PATH_MAX], text[64];
	uint64_t value;
	int ret = zone_file(root, zone->name, "max_energy_range_uj", text, sizeof(text));

	if (ret == 0)
		ret = parse_count(text, &zone->max_range_uj);
	if (ret == 0 && zone->max_range_uj == 0)
		ret = -EBADMSG;
	if (ret < 0) {
		log_warn_errno(ret, "powercap: zone %s: max_energy_range_uj unusable, zone ignored",
			       zone->name);
		return ret;
	}
	ret = backend_root_path(path, sizeof(path), root, "sys/class/powercap/%s/energy_uj",
				zone->name);
	zone->fd = ret < 0 ? ret : open(path, O_RDONLY | O_CLOEXEC);
	if (zone->fd < 0) {
		ret = ret < 0 ? ret : -errno;
		log_warn_errno(ret, "powercap: zone %s: energy_uj (root only since CVE-2020-8694)",
			       zone->name);
		return ret;
	}
	ret = zone_file(root, zone->name, "energy_uj", text, sizeof(text));
	if (ret == 0)
		ret = parse_count(text, &value);
	zone->last_uj = ret == 0 ? value : 0;
	return 0;
}

/* Top-level zone intel-rapl:`top` (its subzones' package and die), or NULL. */
static const struct powercap_zone *parent_zone(const struct powercap *state, const char *dir,
					       unsigned top)
{
	char parent[64];

	snprintf(parent, sizeof(parent), "%.*s%u", (int)(strchr(dir, ':') - dir + 1), dir, top);
	for (uint32_t i = 0; i < state->count; i++) {
		if (strcmp(state->zones[i].name, parent) == 0)
			return &state->zones[i];
	}
	return NULL;
}

/* The dense die (machine_info's cpu_die) of die `die` of `package`, found through a CPU whose
 * topology/die_id says it, as the kernel names its package-N-die-M zones; -1 when no CPU does. */
static int32_t die_key_of(const struct machine_info *info, const char *root, uint32_t package,
			  int die)
{
	for (uint32_t cpu = 0; cpu < info->cpu_count; cpu++) {
		char path[PATH_MAX], text[32];
		uint64_t die_id;

		if (info->cpu_package[cpu] != package ||
		    backend_root_path(path, sizeof(path), root,
				      "sys/devices/system/cpu/cpu%u/topology/die_id", cpu) < 0 ||
		    read_small_file(path, text, sizeof(text)) < 0 || parse_count(text, &die_id) < 0)
			continue;
		if (die_id == (uint64_t)die)
			return info->cpu_die[cpu];
	}
	return -1;
}

/* Whether energy is per die here (Intel packages of several dies: machine_energy_key), so a
 * die's zone answers for that die's CPUs alone, as its registers would; otherwise a package's
 * die zones are summed into it. */
static bool energy_per_die(const struct machine_info *info, bool amd)
{
	return !amd && info->die_count > info->package_count;
}

/* The zone's domain, package and die from its name `name` (read here) or its parent's;
 * -ENOENT when it stands for nothing haecer keeps (logged). */
static int place_zone(const struct powercap *state, struct powercap_zone *zone, const char *root,
		      const char *dir, const struct machine_info *info, bool amd, char *name,
		      size_t name_size)
{
	const struct powercap_zone *parent = NULL;
	unsigned top;
	int sub, die;

	if (!parse_zone_dir(dir, &top, &sub))
		return -ENOENT;
	if (zone_file(root, dir, "name", name, name_size) < 0 ||
	    (sub >= 0 && !(parent = parent_zone(state, dir, top))) ||
	    map_zone_name(name, sub >= 0, &zone->domain, &zone->package, &die) < 0) {
		log_info("powercap: zone %s (\"%s\") has no haecer domain; ignored", dir, name);
		return -ENOENT;
	}
	if (amd && zone->domain != RAPL_DOMAIN_PKG) {
		/* The kernel reads AMD's core zone on one CPU of the package (its lead CPU): one
		 * core's energy, which haecer's per-core AMD domain cannot name. */
		log_info("powercap: zone %s (\"%s\") has no haecer domain on AMD; ignored", dir,
			 name);
		return -ENOENT;
	}
	zone->domain = amd ? RAPL_DOMAIN_AMD_PKG : zone->domain;
	zone->package = parent ? parent->package : zone->package;
	zone->die_key = parent ? parent->die_key : -1;
	if (zone->package >= info->package_count) {
		log_warnx("powercap: zone %s (\"%s\") names package %u of %u; ignored", dir, name,
			  zone->package, info->package_count);
		return -ENOENT;
	}
	if (die >= 0 && energy_per_die(info, amd) &&
	    (zone->die_key = die_key_of(info, root, zone->package, die)) < 0) {
		log_warnx("powercap: zone %s (\"%s\"): no CPU of package %u has die_id %d; ignored",
			  dir, name, zone->package, die);
		return -ENOENT;
	}
	return 0;
}

static void add_zone(struct powercap *state, const char *root, const char *dir, bool subzones,
		     const struct machine_info *info, bool amd)
{
	struct powercap_zone *zone = &state->zones[state->count];
	char name[64] = "";
	unsigned top;
	int sub;

	if (strlen(dir) >= sizeof(zone->name) || !parse_zone_dir(dir, &top, &sub) ||
	    (sub >= 0) != subzones || state->count == POWERCAP_MAX_ZONES ||
	    place_zone(state, zone, root, dir, info, amd, name, sizeof(name)) < 0)
		return;
	memcpy(zone->name, dir, strlen(dir) + 1); /* fits: checked above */
	if (open_zone(zone, root) == 0) {
		log_info("powercap: zone %s (\"%s\") is domain %d of package %u%s, wraps at %" PRIu64
			 " uJ", dir, name, (int)zone->domain, zone->package,
			 zone->die_key >= 0 ? " (its own die)" : "", zone->max_range_uj);
		state->count++;
	}
}

/* Top-level zones first: a subzone's package is its parent's. */
static int scan_zones(struct powercap *state, const char *root, const struct machine_info *info,
		      bool amd)
{
	char path[PATH_MAX];
	int ret = backend_root_path(path, sizeof(path), root, "sys/class/powercap");

	for (int pass = 0; ret == 0 && pass < 2; pass++) {
		DIR *directory = opendir(path);
		struct dirent *entry;

		if (!directory)
			return -errno;
		while ((entry = readdir(directory)) != NULL)
			add_zone(state, root, entry->d_name, pass == 1, info, amd);
		closedir(directory);
	}
	return ret < 0 ? ret : (state->count ? 0 : -ENOENT);
}

uint32_t backend_sysfs_cpu_count(const char *root)
{
	char path[PATH_MAX];
	uint32_t count = 0;
	struct dirent *entry;
	DIR *directory;

	if (backend_root_path(path, sizeof(path), root, "sys/devices/system/cpu") < 0 ||
	    !(directory = opendir(path)))
		return 1;
	while ((entry = readdir(directory)) != NULL) {
		unsigned cpu;
		char tail;

		if (sscanf(entry->d_name, "cpu%u%c", &cpu, &tail) == 1 && cpu < MACHINE_MAX_CPUS &&
		    cpu + 1 > count)
			count = cpu + 1;
	}
	closedir(directory);
	return count ? count : 1;
}

/* The power bound msrd schedules its wrap reads by: the 32-bit register wraps after 65536 J,
 * the zone after max_energy_range_uj; msrd must read before the earlier of the two at 1 kW. */
static uint32_t zone_power_bound_mw(const struct powercap_zone *zone)
{
	uint64_t register_uj = (1ull << (32 - POWERCAP_ENERGY_EXPONENT)) * MICROJOULES_PER_JOULE;
	uint64_t bound = POWERCAP_DEFAULT_MAX_POWER_MW;

	if (zone->max_range_uj < register_uj)
		bound = (uint64_t)((unsigned __int128)bound * register_uj / zone->max_range_uj);
	return bound > UINT32_MAX ? UINT32_MAX : (uint32_t)bound;
}

static void describe_domains(struct msr_backend *backend)
{
	struct machine_info *info = &backend->info;

	info->rapl_power_unit = POWERCAP_UNIT_REGISTER;
	for (uint32_t i = 0; i < backend->powercap->count; i++) {
		const struct powercap_zone *zone = &backend->powercap->zones[i];
		uint32_t bit = 1u << zone->domain, bound = zone_power_bound_mw(zone);

		if (zone->last_uj != 0)
			info->rapl_domains |= bit;
		else
			info->rapl_dormant_domains |= bit;
		info->rapl_dormant_domains &= ~info->rapl_domains;
		info->rapl_energy_exponent[zone->domain] = POWERCAP_ENERGY_EXPONENT;
		if (bound > info->rapl_max_power_mw[zone->domain])
			info->rapl_max_power_mw[zone->domain] = bound;
	}
}

int backend_powercap_open(struct msr_backend *backend, const char *root, char *why,
			  size_t why_size)
{
	int ret;

	backend->powercap = calloc(1, sizeof(*backend->powercap));
	if (!backend->powercap)
		return -ENOMEM;
	backend->cpu_count = backend_sysfs_cpu_count(root);
	backend_probe_machine(backend, root);
	ret = scan_zones(backend->powercap, root, &backend->info,
			 cpu_vendor_is_amd(backend->info.vendor));
	if (ret < 0) {
		snprintf(why, why_size, "powercap: no usable zone under %s/sys/class/powercap (%s)",
			 root ? root : "", strerror(-ret));
		return ret;
	}
	describe_domains(backend);
	snprintf(why, why_size, "using powercap (%u zones)", backend->powercap->count);
	return 0;
}

void backend_powercap_close(struct msr_backend *backend)
{
	if (!backend->powercap)
		return;
	for (uint32_t i = 0; i < backend->powercap->count; i++)
		close(backend->powercap->zones[i].fd);
	free(backend->powercap);
	backend->powercap = NULL;
}

/* ---- reading ---- */

static int sample_zone(struct powercap_zone *zone)
{
	char text[32];
	struct stat st;
	uint64_t now;
	ssize_t got = pread(zone->fd, text, sizeof(text) - 1, 0);
	int ret = got < 0 ? -errno : 0;

	if (ret == 0 && fstat(zone->fd, &st) == 0 && st.st_nlink == 0)
		ret = -ENODEV;
	if (ret == 0) {
		text[got] = '\0';
		ret = parse_count(text, &now);
	}
	if (ret == 0 && now > zone->max_range_uj)
		ret = -ERANGE;
	if (ret < 0) {
		if (!zone->failing)
			log_warn_errno(ret, "powercap: zone %s: energy_uj unreadable%s", zone->name,
				       ret == -ENODEV ? " (the zone went away)" : "");
		zone->failing = true;
		return ret;
	}
	if (zone->failing)
		log_notice("powercap: zone %s: energy_uj reads again", zone->name);
	zone->failing = false;
	zone->total_uj += now >= zone->last_uj ? now - zone->last_uj
					      : zone->max_range_uj - zone->last_uj + now;
	zone->last_uj = now;
	return 0;
}

/* The zones' domain an energy-status address asks for: the package by either vendor's address
 * (a policy written for the other vendor still names the package), the cores likewise. */
static int address_domain(uint32_t address, bool amd)
{
	int domain = rapl_domain_of_address(address);

	if (amd && domain == RAPL_DOMAIN_PKG)
		return RAPL_DOMAIN_AMD_PKG;
	if (!amd && domain == RAPL_DOMAIN_AMD_PKG)
		return RAPL_DOMAIN_PKG;
	if (!amd && domain == RAPL_DOMAIN_AMD_CORE)
		return RAPL_DOMAIN_PP0;
	return domain;
}

int backend_powercap_read(struct msr_backend *backend, uint32_t cpu, uint32_t address,
			  uint64_t *value)
{
	struct powercap *state = backend->powercap;
	int domain = address_domain(address, cpu_vendor_is_amd(backend->info.vendor));
	uint64_t total_uj = 0;
	bool found = false;

	if (cpu >= backend->cpu_count)
		return -ENXIO;
	if (address == MSR_RAPL_POWER_UNIT || address == MSR_AMD_RAPL_POWER_UNIT) {
		*value = POWERCAP_UNIT_REGISTER;
		return 0;
	}
	for (uint32_t i = 0; domain >= 0 && i < state->count; i++) {
		struct powercap_zone *zone = &state->zones[i];
		int ret;

		if ((int)zone->domain != domain ||
		    zone->package != backend->info.cpu_package[cpu] ||
		    (zone->die_key >= 0 && zone->die_key != backend->info.cpu_die[cpu]))
			continue;
		ret = sample_zone(zone);
		if (ret < 0)
			return -EIO;
		total_uj += zone->total_uj;
		found = true;
	}
	if (!found)
		return -EIO;
	*value = (uint64_t)(((unsigned __int128)total_uj << POWERCAP_ENERGY_EXPONENT) /
			    MICROJOULES_PER_JOULE) & RAPL_ENERGY_COUNTER_MASK;
	return 0;
}
