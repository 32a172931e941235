/*
 * server/msrstate.c — the value every MSR had before msrd first wrote it, so SIGTERM can put the
 * machine back the way msrd found it.
 *
 * Recorded before a validated write is submitted (the value comes from the write-mask check's
 * read), once per (cpu, address): later writes do not change what is restored.
 */
#include "server/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int compare_saved(const struct msr_saved *saved, uint32_t cpu, uint32_t address)
{
	if (saved->cpu != cpu)
		return saved->cpu < cpu ? -1 : 1;
	if (saved->address != address)
		return saved->address < address ? -1 : 1;
	return 0;
}

static size_t lower_bound(const struct msrstate *state, uint32_t cpu, uint32_t address)
{
	size_t low = 0;
	size_t high = state->count;

	while (low < high) {
		size_t middle = low + (high - low) / 2;
		if (compare_saved(&state->entries[middle], cpu, address) < 0)
			low = middle + 1;
		else
			high = middle;
	}
	return low;
}

int msrstate_remember(struct msrstate *state, uint32_t cpu, uint32_t address, uint64_t original)
{
	size_t index = lower_bound(state, cpu, address);

	if (index < state->count && compare_saved(&state->entries[index], cpu, address) == 0)
		return 0;
	if (state->count == state->capacity) {
		size_t capacity = state->capacity > 0 ? state->capacity * 2 : 32;
		struct msr_saved *bigger = realloc(state->entries, sizeof(*bigger) * capacity);
		if (bigger == NULL)
			return -ENOMEM;
		state->entries = bigger;
		state->capacity = capacity;
	}
	memmove(&state->entries[index + 1], &state->entries[index],
		sizeof(*state->entries) * (state->count - index));
	state->entries[index] = (struct msr_saved){ .cpu = cpu, .address = address,
						    .original = original };
	state->count++;
	return 0;
}

size_t msrstate_restore(struct msrstate *state, struct msr_backend *backend)
{
	size_t failed = 0;

	for (size_t i = 0; i < state->count; i++) {
		const struct msr_saved *saved = &state->entries[i];
		int status = backend_write(backend, saved->cpu, saved->address, saved->original);
		if (status < 0) {
			log_warn_errno(status, "restoring cpu %u MSR 0x%x to 0x%llx", saved->cpu,
				       saved->address, (unsigned long long)saved->original);
			failed++;
			continue;
		}
		log_info("restored cpu %u MSR 0x%x to 0x%llx", saved->cpu, saved->address,
			 (unsigned long long)saved->original);
	}
	return failed;
}

void msrstate_free(struct msrstate *state)
{
	free(state->entries);
	*state = (struct msrstate){ 0 };
}
