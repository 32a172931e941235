/*
 * backend/sim/sim_cpuid.c — CPUID as each simulated CPU answers it, so that msrd learns the
 * simulated machine the way it learns a real one (backend/probe.c, backend/probe_cores.c): leaf
 * 0 (highest basic leaf, vendor), 1 (signature), 7 (EDX[15] hybrid), 0AH (the model's
 * cpuid_0a), 1AH (the CPU's core type on a hybrid part) and 80000000H (highest extended leaf)
 * follow from the model; the model's `cpuid` list answers any other leaf (15H, 16H, 80000007H)
 * and overrides these. A leaf nothing says is all zeros, as a CPU answers a reserved leaf
 * within its range.
 *
 * Hybrid parts (`core_types`): Alder and Raptor Lake enumerate in leaf 0AH only the counters
 * every core type has (Linux, arch/x86/events/intel/core.c, commit ee72a94ea4a6: "the number
 * enumerated in the CPUID only reflects the common counters. The big core may has more
 * counters"), so every CPU answers the model's cpuid_0a, and only the counters that exist
 * differ by type (sim_pmu.c).
 */
#include <errno.h>
#include <string.h>

#include "backend/sim/sim.h"
#include "backend/sim/sim_internal.h"
#include "hw/core_type.h"

static const cyaml_schema_field_t core_type_fields[] = {
	CYAML_FIELD_UINT("core_type", CYAML_FLAG_DEFAULT, struct sim_model_core_type, core_type),
	CYAML_FIELD_UINT("cpus", CYAML_FLAG_DEFAULT, struct sim_model_core_type, cpus),
	CYAML_FIELD_UINT("gp_counters", CYAML_FLAG_DEFAULT, struct sim_model_core_type,
			 gp_counters),
	CYAML_FIELD_UINT("fixed_counters", CYAML_FLAG_DEFAULT, struct sim_model_core_type,
			 fixed_counters),
	CYAML_FIELD_UINT("slots_per_cycle", CYAML_FLAG_OPTIONAL, struct sim_model_core_type,
			 slots_per_cycle),
	CYAML_FIELD_END
};

const cyaml_schema_value_t sim_model_core_type_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct sim_model_core_type, core_type_fields),
};

static const cyaml_schema_value_t register_value = {
	CYAML_VALUE_UINT(CYAML_FLAG_DEFAULT, uint32_t),
};

static const cyaml_schema_field_t cpuid_fields[] = {
	CYAML_FIELD_UINT("leaf", CYAML_FLAG_DEFAULT, struct sim_model_cpuid_leaf, leaf),
	CYAML_FIELD_UINT("subleaf", CYAML_FLAG_OPTIONAL, struct sim_model_cpuid_leaf, subleaf),
	{
		.key = "regs",
		.data_offset = offsetof(struct sim_model_cpuid_leaf, regs),
		.value = {
			CYAML_VALUE_SEQUENCE_FIXED(CYAML_FLAG_POINTER, uint32_t, &register_value,
						   4),
		},
	},
	CYAML_FIELD_END
};

const cyaml_schema_value_t sim_model_cpuid_entry = {
	CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct sim_model_cpuid_leaf, cpuid_fields),
};

static const char *check_core_type(const struct sim_model_core_type *type)
{
	if (type->core_type != CPU_CORE_TYPE_CORE && type->core_type != CPU_CORE_TYPE_ATOM)
		return "core_types: core_type is 0x40 (Intel Core) or 0x20 (Intel Atom)";
	if (type->cpus == 0)
		return "core_types: cpus must be at least 1";
	if (type->gp_counters > SIM_MAX_GP_COUNTERS ||
	    type->fixed_counters > SIM_MAX_FIXED_COUNTERS)
		return "core_types: at most 8 general-purpose and 4 fixed counters";
	if (type->fixed_counters == SIM_MAX_FIXED_COUNTERS && type->slots_per_cycle == 0)
		return "core_types: fixed counter 3 (TOPDOWN.SLOTS) needs slots_per_cycle";
	return NULL;
}

const char *sim_model_check_cpuid(const struct sim_model *model)
{
	unsigned cpus = 0;

	for (unsigned i = 0; i < model->core_types_count; i++) {
		const char *problem = check_core_type(&model->core_types[i]);

		if (problem)
			return problem;
		cpus += model->core_types[i].cpus;
	}
	if (model->core_types_count == 0)
		return NULL;
	if (sim_model_is_amd(model) || !model->cpuid_0a)
		return "core_types: an Intel hybrid part, with cpuid_0a (its common counters)";
	if (cpus != model->cpus_per_package)
		return "core_types: their cpus must add up to cpus_per_package";
	return NULL;
}

/* The core type entry of CPU `index` of a package, or NULL on a part that is not hybrid. */
const struct sim_model_core_type *sim_core_type_of(const struct sim_model *model,
						   uint32_t index)
{
	for (unsigned i = 0; i < model->core_types_count; i++) {
		if (index < model->core_types[i].cpus)
			return &model->core_types[i];
		index -= model->core_types[i].cpus;
	}
	return NULL;
}

static const struct sim_model_cpuid_leaf *listed_leaf(const struct sim_model *model,
						      uint32_t leaf, uint32_t subleaf)
{
	for (unsigned i = 0; i < model->cpuid_count; i++) {
		if (model->cpuid[i].leaf == leaf && model->cpuid[i].subleaf == subleaf)
			return &model->cpuid[i];
	}
	return NULL;
}

/* The highest leaf of the range `base` starts (0 basic, 80000000H extended) that the model
 * answers. */
static uint32_t highest_leaf(const struct sim_model *model, uint32_t base)
{
	uint32_t highest = base == 0 ? (model->core_types ? CPUID_CORE_TYPE_LEAF
					: model->cpuid_0a ? 0x0Au : 0x07u)
				     : base;

	for (unsigned i = 0; i < model->cpuid_count; i++) {
		uint32_t leaf = model->cpuid[i].leaf;

		if ((leaf & 0x80000000u) == base && leaf > highest)
			highest = leaf;
	}
	return highest;
}

/* CPUID 1 EAX: stepping, model, family, extended model and family (SDM vol. 2A, CPUID). */
static uint32_t signature(const struct sim_model *model)
{
	uint32_t family = model->family >= 0xF ? 0xF : model->family;
	uint32_t extended_family = model->family >= 0xF ? model->family - 0xF : 0;

	return (model->stepping & 0xF) | ((model->model & 0xF) << 4) | (family << 8) |
	       (((model->model >> 4) & 0xF) << 16) | (extended_family << 20);
}

static void derived_leaf(const struct sim *sim, uint32_t cpu, uint32_t leaf, uint32_t regs[4])
{
	const struct sim_model *model = sim->model;
	const char *vendor = model->vendor;

	switch (leaf) {
	case 0:
		regs[0] = highest_leaf(model, 0);
		memcpy(&regs[1], vendor, 4);
		memcpy(&regs[3], vendor + 4, 4);
		memcpy(&regs[2], vendor + 8, 4);
		break;
	case 1:
		regs[0] = signature(model);
		break;
	case CPUID_HYBRID_LEAF:
		regs[3] = model->core_types ? 1u << 15 : 0;
		break;
	case 0x0A:
		if (model->cpuid_0a && !sim_model_is_amd(model))
			memcpy(regs, model->cpuid_0a, 4 * sizeof(uint32_t));
		break;
	case CPUID_CORE_TYPE_LEAF:
		if (model->core_types)
			regs[0] = (uint32_t)sim->cpus[cpu].core_type << 24;
		break;
	case 0x80000000u:
		regs[0] = highest_leaf(model, 0x80000000u);
		break;
	default:
		break;
	}
}

int sim_cpuid(const struct sim *sim, uint32_t cpu, uint32_t leaf, uint32_t subleaf,
	      uint32_t regs[4])
{
	const struct sim_model_cpuid_leaf *listed;

	if (cpu >= sim->cpu_count)
		return -ENXIO;
	memset(regs, 0, 4 * sizeof(uint32_t));
	listed = listed_leaf(sim->model, leaf, subleaf);
	if (listed) {
		memcpy(regs, listed->regs, 4 * sizeof(uint32_t));
		return 0;
	}
	if (subleaf == 0)
		derived_leaf(sim, cpu, leaf, regs);
	return 0;
}
