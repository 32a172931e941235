/*
 * libclient/haecer_energy_smi.c — where an energy region's SMI count comes from (a region an
 * SMI hit says so, and callers filter it: seed 001 2.1.2.6).
 *
 * Intel: MSR_SMI_COUNT (0x34, 32 bits), where the model has it. AMD (family 17h on, and Hygon,
 * which the library treats as AMD): no such register, but the core counter event PMCx02B
 * (LsSmiRx, "SMIs received", AMD PPR for family 17h/19h; perf's msr/smi/ is MSR_SMI_COUNT on
 * Intel only) counts the same, so a region counter opens one on its CPU (haecer_counter's
 * "smi", a slot msrd lends like any other) the first time a region starts, and reads its
 * register in the same batch as the energy register. Without either, or when the policy
 * refuses them (or msrd has no counter free), the count stays unknown (HAECER_SMI_UNKNOWN).
 */
#include "libclient/haecer_internal.h"

#define SMI_COUNT_MASK 0xFFFFFFFFull /* MSR_SMI_COUNT bits 31:0 */

static bool amd_smis(const struct haecer_context *ctx)
{
	return event_db_caps(ctx->db)->vendor == EVENT_VENDOR_AMD;
}

void haecer__smi_prepare(struct haecer_counter *energy)
{
	struct haecer_context *ctx = energy->ctx;
	struct haecer_counter *smi = NULL;

	if (ctx == NULL || !amd_smis(ctx) || energy->smi_counter != NULL || energy->smi_unreadable)
		return;
	/* A refused counter costs the region its SMI count only, never the region. */
	if (haecer_counter_open_named(ctx, (int)energy->info.cpu, "smi", 0, 0, &smi) < 0) {
		haecer__clear_detail();
		energy->smi_unreadable = true;
		return;
	}
	energy->smi_counter = smi;
}

bool haecer__smi_op(const struct haecer_counter *energy, struct haecer_msr_op *op)
{
	const struct haecer_context *ctx = energy->ctx;

	if (energy->smi_unreadable)
		return false;
	*op = (struct haecer_msr_op){ .kind = HAECER_MSR_READ, .cpu = energy->info.cpu };
	if (energy->smi_counter != NULL) {
		op->cpu = energy->smi_counter->info.cpu;
		op->address = energy->smi_counter->info.counter_address;
		return true;
	}
	op->address = MSR_SMI_COUNT;
	return !amd_smis(ctx) && (ctx->machine.flags & HAECER_MACHINE_HAS_SMI_COUNT);
}

uint32_t haecer__smi_between(const struct haecer_counter *energy, uint64_t from, uint64_t to)
{
	uint64_t mask = energy->smi_counter != NULL ? energy->smi_counter->width_mask
						    : SMI_COUNT_MASK;

	return (uint32_t)((to - from) & mask);
}
