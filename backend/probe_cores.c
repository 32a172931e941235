/*
 * backend/probe_cores.c — hybrid Intel parts (hw/core_type.h): which CPUs are P-cores and which
 * E-cores, and how many counters each has. One CPUID answer does not describe the machine
 * there: CPUID runs on whichever CPU msrd happens to be on, and a Gracemont E-core has 6
 * general-purpose counters where a Golden Cove P-core has 8. So every CPU's own leaves are read
 * through its dev/cpu/N/cpuid; without the cpuid driver the core types come from the kernel's
 * hybrid PMUs (sys/devices/cpu_core/cpus, sys/devices/cpu_atom/cpus), each CPU then keeping
 * the leaf 0AH of the CPU msrd read.
 */
#include "backend/backend_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "hw/core_type.h"

static uint32_t gp_mask_of(uint32_t eax)
{
	uint32_t count = CPUID_0A_EAX_GP_COUNTERS(eax);

	return count >= 32 ? UINT32_MAX : (1u << count) - 1u;
}

/* The counters leaf 0AH describes (no fixed counters before v2). */
static void counters_of_leaf_0a(const uint32_t leaf[4], uint32_t *gp, uint32_t *fixed)
{
	uint32_t version = CPUID_0A_EAX_VERSION(leaf[0]);

	*gp = version >= 1 ? gp_mask_of(leaf[0]) : 0;
	*fixed = version >= 2 ? cpuid_0a_fixed_mask(version, leaf[2], leaf[3]) : 0;
}

/* One CPU's counters: leaf 23H sub-leaf 1 where the CPU has it (Meteor Lake and later), else
 * its own leaf 0AH (*common_leaf set: on a hybrid part only the common counters). -ENOENT when
 * its cpuid device is missing. */
static int probe_cpu_counters(const struct msr_backend *backend, const char *dev_root,
			      uint32_t cpu, uint32_t max_leaf, struct machine_info *info,
			      bool *common_leaf)
{
	uint32_t regs[4];
	int ret;

	if (max_leaf >= CPUID_PERFMON_EXT_LEAF &&
	    backend_read_cpuid_on(backend, dev_root, cpu, CPUID_PERFMON_EXT_LEAF, 0, regs) == 0 &&
	    CPUID_23_SUBLEAF1_VALID(regs[0]) &&
	    backend_read_cpuid_on(backend, dev_root, cpu, CPUID_PERFMON_EXT_LEAF, 1, regs) == 0) {
		info->cpu_gp_mask[cpu] = regs[0];
		info->cpu_fixed_mask[cpu] = regs[1];
		return 0;
	}
	ret = backend_read_cpuid_on(backend, dev_root, cpu, 0x0A, 0, regs);
	if (ret < 0)
		return ret;
	counters_of_leaf_0a(regs, &info->cpu_gp_mask[cpu], &info->cpu_fixed_mask[cpu]);
	*common_leaf = true;
	return 0;
}

/* Alder and Raptor Lake enumerate in leaf 0AH only the counters every core type has, on every
 * CPU; a Golden Cove / Raptor Cove P-core has two general-purpose counters and one fixed counter
 * (3, TOPDOWN.SLOTS) more. Linux adds them the same way (arch/x86/events/intel/core.c,
 * intel_pmu_init: cpu_core's num_counters + 2, num_counters_fixed + 1 when X86_FEATURE_HYBRID_CPU;
 * commit ee72a94ea4a6: "the number enumerated in the CPUID only reflects the common counters").
 * Leaf 23H (Meteor Lake on) gives each type's own bitmaps instead; a leaf 0AH that already
 * gives a P-core more than the common six is taken as it stands. */
static void add_p_core_counters(struct machine_info *info, uint32_t cpu)
{
	uint32_t gp = (uint32_t)__builtin_popcount(info->cpu_gp_mask[cpu]);
	uint32_t fixed = (uint32_t)__builtin_popcount(info->cpu_fixed_mask[cpu]);

	if (info->cpu_core_type[cpu] != CPU_CORE_TYPE_CORE || gp == 0 || gp > 6 || fixed > 3)
		return;
	info->cpu_gp_mask[cpu] = (1u << (gp + 2)) - 1u;
	info->cpu_fixed_mask[cpu] |= 1u << fixed;
}

/* Mark the CPUs of a sysfs CPU list ("0-15", "16-23,28") with `type`. */
static int mark_cpu_list(const char *dev_root, const char *pmu, uint8_t type,
			 struct machine_info *info)
{
	char path[PATH_MAX], text[4096] = "", *cursor;
	FILE *file;

	if (backend_root_path(path, sizeof(path), dev_root, "sys/devices/%s/cpus", pmu) < 0)
		return -ENAMETOOLONG;
	file = fopen(path, "re");
	if (file == NULL)
		return -ENOENT;
	if (fgets(text, sizeof(text), file) == NULL)
		text[0] = '\0';
	fclose(file);
	for (cursor = text; *cursor != '\0' && *cursor != '\n';) {
		char *end;
		unsigned long first = strtoul(cursor, &end, 10), last = first;

		if (end == cursor)
			return -EINVAL;
		if (*end == '-')
			last = strtoul(end + 1, &end, 10);
		for (unsigned long cpu = first; cpu <= last && cpu < info->cpu_count; cpu++)
			info->cpu_core_type[cpu] = type;
		cursor = *end == ',' ? end + 1 : end;
	}
	return 0;
}

/* Each CPU's type and counters from its own CPUID; false when some CPU's device is missing. */
static bool probe_by_cpuid(const struct msr_backend *backend, const char *dev_root,
			   uint32_t max_leaf, struct machine_info *info)
{
	uint32_t regs[4];

	for (uint32_t cpu = 0; cpu < info->cpu_count; cpu++) {
		bool common_leaf = false;

		if (backend_read_cpuid_on(backend, dev_root, cpu, CPUID_CORE_TYPE_LEAF, 0, regs) < 0 ||
		    probe_cpu_counters(backend, dev_root, cpu, max_leaf, info, &common_leaf) < 0)
			return false;
		info->cpu_core_type[cpu] = (uint8_t)CPUID_1A_EAX_CORE_TYPE(regs[0]);
		if (common_leaf)
			add_p_core_counters(info, cpu);
	}
	return true;
}

static void log_core_types(const struct machine_info *info)
{
	uint32_t count[2] = { 0, 0 }, gp[2] = { 0, 0 };

	for (uint32_t cpu = 0; cpu < info->cpu_count; cpu++) {
		int atom = info->cpu_core_type[cpu] == CPU_CORE_TYPE_ATOM;

		count[atom]++;
		gp[atom] = (uint32_t)__builtin_popcount(info->cpu_gp_mask[cpu]);
	}
	log_info("backend: hybrid CPU: %u P-cores (%u programmable counters each), %u E-cores "
		  "(%u each); events are encoded and counters counted per core type",
		  count[0], gp[0], count[1], gp[1]);
}

void backend_probe_core_types(const struct msr_backend *backend, const char *dev_root,
			      struct machine_info *info)
{
	uint32_t regs[4], max_leaf = 0;
	uint32_t gp, fixed;

	counters_of_leaf_0a(info->cpuid_0a, &gp, &fixed);
	for (uint32_t cpu = 0; cpu < info->cpu_count; cpu++) {
		info->cpu_gp_mask[cpu] = gp;
		info->cpu_fixed_mask[cpu] = fixed;
	}
	if (backend_read_cpuid_on(backend, dev_root, 0, 0, 0, regs) == 0)
		max_leaf = regs[0];
	if (max_leaf >= CPUID_HYBRID_LEAF &&
	    backend_read_cpuid_on(backend, dev_root, 0, CPUID_HYBRID_LEAF, 0, regs) == 0)
		info->hybrid = CPUID_07_EDX_HYBRID(regs[3]) != 0;
	if (!info->hybrid && !backend->sim) {
		/* Without the cpuid driver, the kernel's hybrid PMUs still say it. */
		info->hybrid = mark_cpu_list(dev_root, "cpu_atom", CPU_CORE_TYPE_ATOM, info) == 0;
		if (info->hybrid)
			mark_cpu_list(dev_root, "cpu_core", CPU_CORE_TYPE_CORE, info);
	}
	if (!info->hybrid)
		return;
	if (max_leaf < CPUID_CORE_TYPE_LEAF || !probe_by_cpuid(backend, dev_root, max_leaf, info)) {
		memset(info->cpu_core_type, 0, sizeof(info->cpu_core_type));
		for (uint32_t cpu = 0; cpu < info->cpu_count; cpu++) {
			info->cpu_gp_mask[cpu] = gp;
			info->cpu_fixed_mask[cpu] = fixed;
		}
		mark_cpu_list(dev_root, "cpu_atom", CPU_CORE_TYPE_ATOM, info);
		mark_cpu_list(dev_root, "cpu_core", CPU_CORE_TYPE_CORE, info);
		log_warnx("backend: hybrid CPU without per-CPU CPUID (load the cpuid module): core "
			  "types from sysfs, every CPU assumed to have CPU 0's counters");
	}
	log_core_types(info);
}
