#include "harness/standin_tree.h"

#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p of the directory part of root/relative (root itself exists). */
static void make_parents(const char *root, const char *relative)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, relative);
	for (char *slash = strchr(path + strlen(root) + 1, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(path, 0755);
		*slash = '/';
	}
}

void tree_mkdir(const char *root, const char *relative)
{
	char path[PATH_MAX];

	make_parents(root, relative);
	snprintf(path, sizeof(path), "%s/%s", root, relative);
	mkdir(path, 0755);
}

void tree_write_text(const char *root, const char *relative, const char *format, ...)
{
	char path[PATH_MAX];
	va_list arguments;
	FILE *file;

	make_parents(root, relative);
	snprintf(path, sizeof(path), "%s/%s", root, relative);
	file = fopen(path, "w");
	if (!file)
		abort();
	va_start(arguments, format);
	vfprintf(file, format, arguments);
	va_end(arguments);
	fclose(file);
}

void tree_write_at(const char *root, const char *relative, const void *data, size_t size,
		   off_t offset)
{
	char path[PATH_MAX];
	int fd;

	make_parents(root, relative);
	snprintf(path, sizeof(path), "%s/%s", root, relative);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	if (fd < 0 || pwrite(fd, data, size, offset) != (ssize_t)size)
		abort();
	close(fd);
}

void tree_put_msr(const char *root, unsigned cpu, const char *device, uint32_t address,
		  uint64_t value)
{
	char relative[64];

	snprintf(relative, sizeof(relative), "dev/cpu/%u/%s", cpu, device);
	tree_write_at(root, relative, &value, sizeof(value), address);
}

void tree_put_cpuid(const char *root, unsigned cpu, uint32_t leaf, uint32_t eax, uint32_t ebx,
		    uint32_t ecx, uint32_t edx)
{
	uint32_t regs[4] = { eax, ebx, ecx, edx };
	char relative[64];

	snprintf(relative, sizeof(relative), "dev/cpu/%u/cpuid", cpu);
	tree_write_at(root, relative, regs, sizeof(regs), (off_t)leaf * 16);
}

void tree_put_sandybridge_rapl(const char *root, uint32_t pkg_energy)
{
	static const uint8_t last_byte;

	mkdir(root, 0755);
	tree_write_at(root, "dev/cpu/0/msr", &last_byte, 1, 0x2000 - 1);
	tree_put_msr(root, 0, "msr", 0x606, STANDIN_SNB_ENERGY_UNIT);
	tree_put_msr(root, 0, "msr", 0x614, 800); /* 100 W in eighths of a watt */
	tree_write_at(root, "dev/cpu/0/msr", &pkg_energy, sizeof(pkg_energy), 0x611);
	tree_put_cpuid(root, 0, 0, 0xD, 0x756e6547, 0x6c65746e, 0x49656e69); /* GenuineIntel */
	tree_put_cpuid(root, 0, 1, 0x000206A7, 0, 0, 0);                    /* Sandy Bridge */
}

void tree_prepare_sandybridge_rapl(const char *dir, char *root, size_t size, uint32_t pkg_energy)
{
	snprintf(root, size, "%s/root", dir);
	tree_put_sandybridge_rapl(root, pkg_energy);
}

void tree_put_two_die_package(const char *root, uint32_t die0_energy, uint32_t die1_energy)
{
	char path[96];

	mkdir(root, 0755);
	for (unsigned cpu = 0; cpu < STANDIN_TWO_DIE_CPUS; cpu++) {
		uint32_t die = standin_two_die_of(cpu);

		tree_put_msr(root, cpu, "msr", 0x606, STANDIN_SNB_ENERGY_UNIT);
		tree_put_msr(root, cpu, "msr", 0x614, 1600); /* 200 W in eighths */
		tree_put_msr(root, cpu, "msr", 0x611, die ? die1_energy : die0_energy);
		tree_put_cpuid(root, cpu, 0, 0x16, 0x756e6547, 0x6c65746e, 0x49656e69);
		tree_put_cpuid(root, cpu, 1, 0x00050657, 0, 0, 0); /* 06_55 stepping 7 */
		snprintf(path, sizeof(path), "sys/devices/system/cpu/cpu%u/topology/physical_package_id",
			 cpu);
		tree_write_text(root, path, "0\n");
		snprintf(path, sizeof(path), "sys/devices/system/cpu/cpu%u/topology/die_id", cpu);
		tree_write_text(root, path, "%u\n", die);
	}
}

void tree_set_powercap_energy_text(const char *root, const char *zone, const char *text)
{
	char relative[128], padded[STANDIN_POWERCAP_ENERGY_WIDTH + 1];

	snprintf(relative, sizeof(relative), "sys/class/powercap/%s/energy_uj", zone);
	snprintf(padded, sizeof(padded), "%-*.*s\n", STANDIN_POWERCAP_ENERGY_WIDTH - 1,
		 STANDIN_POWERCAP_ENERGY_WIDTH - 1, text);
	tree_write_at(root, relative, padded, STANDIN_POWERCAP_ENERGY_WIDTH, 0);
}

void tree_set_powercap_energy(const char *root, const char *zone, uint64_t energy_uj)
{
	char text[32];

	snprintf(text, sizeof(text), "%0*llu", STANDIN_POWERCAP_ENERGY_WIDTH - 1,
		 (unsigned long long)energy_uj);
	tree_set_powercap_energy_text(root, zone, text);
}

void tree_put_powercap_zone(const char *root, const char *zone, const char *name,
			    uint64_t energy_uj, uint64_t range_uj)
{
	char relative[128];

	snprintf(relative, sizeof(relative), "sys/class/powercap/%s/name", zone);
	tree_write_text(root, relative, "%s\n", name);
	snprintf(relative, sizeof(relative), "sys/class/powercap/%s/max_energy_range_uj", zone);
	tree_write_text(root, relative, "%llu\n", (unsigned long long)range_uj);
	tree_set_powercap_energy(root, zone, energy_uj);
}
