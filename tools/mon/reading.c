/*
 * tools/mon/reading.c — ring records as readings: counter names from the ring header, joules for
 * energy counters, watts between consecutive records of the same counter, and a running total
 * that survives 32-bit wraps.
 *
 * The header is a snapshot taken at attach time and is only ever read from our own copy, so a
 * producer rewriting its header cannot change what a counter id means halfway through.
 */
#include "tools/mon/mon.h"

#include <string.h>

void mon_decoder_init(struct mon_decoder *decoder, const struct ring_info *info)
{
	memset(decoder, 0, sizeof(*decoder));
	decoder->info = *info;
	if (decoder->info.counter_count > RING_MAX_COUNTERS)
		decoder->info.counter_count = RING_MAX_COUNTERS;
}

double mon_ring_seconds(const struct ring_info *info, uint64_t timestamp)
{
	if (info->clock == RING_CLOCK_TSC && info->tsc_hz > 0)
		return (double)timestamp / (double)info->tsc_hz;
	return (double)timestamp / 1e9;
}

static const struct ring_counter_info *counter_info(const struct mon_decoder *decoder,
						    uint32_t id)
{
	for (uint32_t i = 0; i < decoder->info.counter_count; i++)
		if (decoder->info.counters[i].id == id)
			return &decoder->info.counters[i];
	return NULL;
}

/* The counter's state; NULL when MON_MAX_TRACKED other ids came first (no power for it). */
static struct mon_counter_state *counter_state(struct mon_decoder *decoder, uint32_t id)
{
	for (size_t i = 0; i < decoder->tracked; i++)
		if (decoder->states[i].id == id)
			return &decoder->states[i];
	if (decoder->tracked == MON_MAX_TRACKED)
		return NULL;
	decoder->states[decoder->tracked] = (struct mon_counter_state){ .id = id };
	return &decoder->states[decoder->tracked++];
}

static void describe_counter(const struct mon_decoder *decoder, const struct ring_record *record,
			     struct mon_reading *reading)
{
	const struct ring_counter_info *info = counter_info(decoder, record->counter_id);

	if (info != NULL) {
		mon_safe_name(info->name, sizeof(info->name), reading->name, sizeof(reading->name));
		reading->kind = info->kind;
		reading->package = info->package;
		reading->cpu = info->cpu;
	} else {
		snprintf(reading->name, sizeof(reading->name), "counter%u", record->counter_id);
		reading->kind = RING_COUNTER_SOFTWARE;
		reading->package = -1;
		reading->cpu = -1;
	}
	/* FERRET's convention: a record with a unit exponent is energy, even when the header does
	 * not describe its counter. */
	reading->is_energy = reading->kind == RING_COUNTER_ENERGY ||
			     (info == NULL && record->unit_exponent != 0);
	reading->unit_exponent = record->unit_exponent;
	if (reading->unit_exponent == 0 && info != NULL)
		reading->unit_exponent = info->unit_exponent;
}

/* Advance the counter's state by this reading and fill in power and total. The interval comes
 * from the integer timestamps, so large clock values lose no precision. */
static void track_energy(const struct ring_info *info, struct mon_counter_state *state,
			 struct mon_reading *reading)
{
	uint64_t delta;

	if (!state->seen) {
		state->extended = reading->value;
	} else if (mon_energy_delta(state->value, reading->value, &delta) == 0) {
		state->extended += delta;
		state->have_watts = reading->timestamp > state->timestamp;
		if (state->have_watts)
			state->watts = mon_joules(delta, reading->unit_exponent) /
				       mon_ring_seconds(info, reading->timestamp - state->timestamp);
	} else {
		/* The producer restarted its total: start over from here. */
		state->extended = reading->value;
		state->have_watts = false;
	}
	reading->have_watts = state->have_watts;
	reading->watts = state->watts;
	reading->total_joules = mon_joules(state->extended, reading->unit_exponent);
}

void mon_decode(struct mon_decoder *decoder, const struct ring_record *record,
		struct mon_reading *reading)
{
	struct mon_counter_state *state = counter_state(decoder, record->counter_id);

	memset(reading, 0, sizeof(*reading));
	reading->counter_id = record->counter_id;
	reading->value = record->value;
	reading->timestamp = record->timestamp;
	reading->seconds = mon_ring_seconds(&decoder->info, record->timestamp);
	reading->simulated = decoder->simulated;
	reading->backend = decoder->backend != NULL ? decoder->backend : "unknown";
	describe_counter(decoder, record, reading);
	if (reading->is_energy) {
		reading->joules = mon_joules(record->value, reading->unit_exponent);
		if (state != NULL)
			track_energy(&decoder->info, state, reading);
		else
			reading->total_joules = reading->joules;
	}
	if (state == NULL)
		return;
	state->seen = true;
	state->value = record->value;
	state->timestamp = record->timestamp;
}
