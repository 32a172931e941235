/*
 * harness/standin_tree.h — stand-in device and sysfs trees under a temporary root, for
 * backends and msrd started with --dev-root: files at any depth (parents made as needed),
 * registers at offset = address as the msr driver reads them, CPUID records.
 *
 * Failures abort: a tree that cannot be built means the test cannot mean anything.
 */
#ifndef HAECER_HARNESS_STANDIN_TREE_H
#define HAECER_HARNESS_STANDIN_TREE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* mkdir -p of root/relative. */
void tree_mkdir(const char *root, const char *relative);

/* root/relative with formatted text, its directories made first. */
void tree_write_text(const char *root, const char *relative, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

/* Write `size` bytes at `offset` of root/relative, creating it (sparse, mode 0600) when needed. */
void tree_write_at(const char *root, const char *relative, const void *data, size_t size,
		   off_t offset);

/* A stand-in dev/cpu/N/<device> with one MSR value at offset = address. */
void tree_put_msr(const char *root, unsigned cpu, const char *device, uint32_t address,
		  uint64_t value);

/* A stand-in dev/cpu/N/cpuid record (16 bytes at 16 * leaf, see backend/probe.c). */
void tree_put_cpuid(const char *root, unsigned cpu, uint32_t leaf, uint32_t eax, uint32_t ebx,
		    uint32_t ecx, uint32_t edx);

/* Energy units of the stand-in Sandy Bridge: 2^-14 J (RAPL_POWER_UNIT 0x000A0E03). */
#define STANDIN_SNB_ENERGY_UNIT 0x000A0E03ull
#define STANDIN_SNB_JOULE 16384ull

/* A stand-in Sandy Bridge client part for msrd's msr backend (--dev-root root; root is made
 * when missing): GenuineIntel, family 6 model 0x2A (so RAPL PKG, PP0 and PP1, the graphics
 * domain), one CPU whose msr file is 0x2000 bytes, RAPL_POWER_UNIT with energy units of 2^-14 J,
 * PKG_POWER_INFO saying 100 W thermal spec (the bound msrd checks energy movement against) and
 * PKG_ENERGY_STATUS holding `pkg_energy`. PKG_POWER_INFO's bytes overlap PKG's upper ones in the
 * file, so PKG is written after it, as the 32-bit register it is; every other register reads 0. */
void tree_put_sandybridge_rapl(const char *root, uint32_t pkg_energy);

/* The same tree at `dir`/root, its path written to `root` (what --dev-root is given): the
 * prepare step of a test running msrd's msr backend on it. */
void tree_prepare_sandybridge_rapl(const char *dir, char *root, size_t size, uint32_t pkg_energy);

/* A Cascade Lake-AP package of two dies (06_55 stepping 7, one package, die_id 0 for CPUs 0 and
 * 1 and 1 for CPUs 2 and 3: RAPL is per die), at `root`: every CPU's msr file holds the unit
 * register, PKG_POWER_INFO (200 W) and its die's PKG_ENERGY_STATUS, die 0 `die0_energy` and die 1
 * `die1_energy` (in 2^-14 J), and the topology files say each CPU's package and die. */
#define STANDIN_TWO_DIE_CPUS 4u
void tree_put_two_die_package(const char *root, uint32_t die0_energy, uint32_t die1_energy);
static inline uint32_t standin_two_die_of(unsigned cpu)
{
	return cpu < 2 ? 0 : 1;
}

/* A stand-in powercap zone sys/class/powercap/`zone` (e.g. "intel-rapl:0:1") named `name`
 * ("package-0", "dram", ...), wrapping at `range_uj`, its energy_uj holding `energy_uj`. */
void tree_put_powercap_zone(const char *root, const char *zone, const char *name,
			    uint64_t energy_uj, uint64_t range_uj);

/* The zone's energy_uj rewritten in place, always STANDIN_POWERCAP_ENERGY_WIDTH bytes (the
 * digits zero-padded, then a newline): msrd's sampler reads the file meanwhile, and a
 * truncation would show it an empty file (garbage it would rightly log). The _text form writes
 * any text (padded with blanks) for tests of garbage. */
#define STANDIN_POWERCAP_ENERGY_WIDTH 21
void tree_set_powercap_energy(const char *root, const char *zone, uint64_t energy_uj);
void tree_set_powercap_energy_text(const char *root, const char *zone, const char *text);

#endif
