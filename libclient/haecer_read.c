/*
 * libclient/haecer_read.c — reading counters (64-bit extension, one msrd round trip per read or
 * per set) and publishing readings into rings monitors consume (FERRET, seed 2.2.2).
 *
 * The hot path of a monitored read is the unmonitored read plus two vDSO clock reads and one
 * ring push into memory mapped at setup: no system call beyond the round trip itself.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hw/counter_wrap.h"

/* How long RDPMC reads go on between two reads through msrd, which checks that the counter is
 * still programmed as msrd left it (haecer__read_locked). */
#define RDPMC_RECHECK_NS 10000000ull

uint64_t haecer__extend(struct haecer_counter *counter, uint64_t raw)
{
	counter->value += (raw - counter->last_raw) & counter->width_mask;
	counter->last_raw = raw & counter->width_mask;
	return counter->value;
}

static int count_lost_error(const struct haecer_counter *counter)
{
	return haecer__fail(-EIDRM, "%s lost its count: its register went back from %#llx to "
			    "%#llx in %llu us, more than a wrap can explain (written behind "
			    "msrd's back, e.g. zeroed by the kernel's perf_clear_dirty_counters); "
			    "set the counter up again", counter->info.name,
			    (unsigned long long)counter->lost_from,
			    (unsigned long long)counter->lost_to,
			    (unsigned long long)(counter->lost_after_ns / 1000));
}

/* An event counter's reading extended to 64 bits, or -EIDRM once the register went back by
 * more than a wrap can explain in the time since the previous read (hw/counter_wrap.h). A
 * simulated CPU in virtual time runs on msrd's clock, not ours: there msrd alone judges (it
 * checks every read through it; there is no RDPMC). */
static int extend_event(struct haecer_counter *counter, uint64_t raw, uint64_t *value)
{
	const struct haecer_context *ctx = counter->ctx;
	uint64_t now = clock_monotonic_raw_ns();
	bool own_clock = !(ctx->simulated && (ctx->machine.flags & HAECER_MACHINE_VIRTUAL_TIME));
	uint64_t elapsed = counter->raw_ns != 0 && own_clock ? now - counter->raw_ns : UINT64_MAX;

	if (!counter->count_lost &&
	    !counter_move_plausible(counter->last_raw, raw, counter->width_mask, elapsed)) {
		counter->count_lost = true;
		counter->lost_from = counter->last_raw;
		counter->lost_to = raw & counter->width_mask;
		counter->lost_after_ns = elapsed;
	}
	*value = counter->value;
	if (counter->count_lost)
		return count_lost_error(counter);
	counter->raw_ns = now;
	*value = haecer__extend(counter, raw);
	return 0;
}

/* Without msrd's totals the raw register is extended here: exact for reads less than one wrap
 * apart. */
/* At the first total of a restarted msrd: the register's movement since the last fold, if the
 * domain can have drawn that much energy in the time (twice its maximum power, plus an update's
 * rounding), carries the value on; more means an unknown number of wraps (or a simulated CPU
 * that started again from 0), and the counter's continuity is lost rather than guessed. */
static void rebase_total(struct haecer_counter *counter, uint64_t raw, uint64_t total,
			 uint64_t now_ns)
{
	const struct haecer_context *ctx = counter->ctx;
	uint64_t moved = (raw - counter->last_raw) & counter->width_mask;
	double watts = counter->rapl_domain < HAECER_RAPL_DOMAINS ?
			       (double)ctx->machine.rapl_max_power_mw[counter->rapl_domain] / 1000.0 :
			       0.0;
	double seconds = (double)(now_ns - counter->folded_ns) / 1e9;
	double plausible = counter->info.unit > 0 ? 2.0 * watts * seconds / counter->info.unit + 2.0
						  : 0.0;

	counter->total_rebase = false;
	if ((double)moved > plausible) {
		counter->continuity_lost = true;
		return;
	}
	counter->total_offset = counter->value + moved - total;
}

int haecer__continuity_error(const struct haecer_counter *counter)
{
	if (!counter->continuity_lost)
		return 0;
	return haecer__fail(-EIDRM, "%s lost its continuity when msrd restarted: its register "
			    "moved by more than the domain can draw in the time (wrapped, or a "
			    "simulated CPU that started again); set the counter up again",
			    counter->info.name);
}

static uint64_t fold_total(struct haecer_counter *counter, uint64_t raw, uint64_t total,
			   uint64_t now_ns)
{
	if (counter->continuity_lost)
		return counter->value;
	if (counter->total_rebase)
		rebase_total(counter, raw, total, now_ns);
	if (counter->continuity_lost)
		return counter->value;
	counter->value = total + counter->total_offset;
	counter->last_raw = raw & counter->width_mask;
	counter->folded_ns = now_ns;
	return counter->value;
}

/* msrd's page is written at each of its samples, a round trip reads msrd's total now: a page
 * read after a round trip may still hold the sample before it. Within one page mapping (one
 * grant: a policy reload marks the page STALE and the library maps the new one, entries_forget)
 * the counter keeps the round trip's value until the page passes it. */
bool haecer__page_behind(const struct haecer_counter *counter, uint64_t total)
{
	return counter->exact_held && !counter->continuity_lost && !counter->total_rebase &&
	       total + counter->total_offset < counter->exact_value;
}

uint64_t haecer__fold_page(struct haecer_counter *counter, uint64_t total, bool *held)
{
	/* The register is the total mod 2^32: msrd folds each reading into the total. */
	*held = haecer__page_behind(counter, total);
	if (*held)
		return counter->exact_value;
	counter->exact_held = false;
	return fold_total(counter, total, total, counter->page_checked_ns);
}

uint64_t haecer__fold_energy(struct haecer_counter *counter, uint64_t raw, const uint64_t *total)
{
	if (total != NULL) {
		uint64_t value = fold_total(counter, raw, *total, clock_monotonic_raw_ns());

		if (!counter->continuity_lost) {
			counter->exact_held = true;
			counter->exact_value = value;
			counter->exact_ns = counter->folded_ns;
		}
		return value;
	}
	if (!counter->have_raw) {
		counter->have_raw = true;
		counter->value = raw & counter->width_mask;
		counter->last_raw = counter->value;
		return counter->value;
	}
	return haecer__extend(counter, raw);
}

static int read_energy(struct haecer_counter *counter, uint64_t *value)
{
	struct haecer_context *ctx = counter->ctx;
	struct energy_page_total reading;
	uint64_t raw = 0, total = 0;
	char what[HAECER_COUNTER_NAME_MAX + 48];
	int error;

	counter->reading_dated = false;
	if (haecer__page_reading(counter, &reading, NULL) == 0) {
		bool held;

		*value = haecer__fold_page(counter, reading.total, &held);
		counter->reading_dated = true;
		counter->reading_ns = held ? counter->exact_ns : reading.sample_ns;
		return haecer__continuity_error(counter);
	}
	if (ctx->energy_totals)
		error = haecer_energy_read(ctx->conn, counter->info.cpu,
					   counter->info.counter_address, &raw, &total);
	else
		error = haecer_msr_read(ctx->conn, counter->info.cpu, counter->info.counter_address,
					&raw);
	if (error < 0) {
		snprintf(what, sizeof(what), "reading %s (MSR %#x) on CPU %u", counter->info.name,
			 counter->info.counter_address, counter->info.cpu);
		return haecer__fail_msrd(ctx, error, what);
	}
	*value = haecer__fold_energy(counter, raw, ctx->energy_totals ? &total : NULL);
	return haecer__continuity_error(counter);
}

int haecer__read_locked(struct haecer_counter *counter, uint64_t *value)
{
	char what[HAECER_COUNTER_NAME_MAX + 32];
	uint64_t raw;
	int error;

	if (counter->info.kind == HAECER_COUNTER_ENERGY)
		return read_energy(counter, value);
	if (counter->info.kind == HAECER_COUNTER_PERF)
		return haecer__perf_read_locked(counter, value);
	/* RDPMC cannot tell that the kernel (perf, the NMI watchdog) reprogrammed the counter:
	 * at least every RDPMC_RECHECK_NS a read goes through msrd, which checks its programming
	 * and fails a lost slot with EIDRM. */
	if (clock_monotonic_raw_ns() - counter->slot_checked_ns < RDPMC_RECHECK_NS &&
	    haecer__rdpmc_read(counter, &raw) == 0)
		return extend_event(counter, raw, value);
	error = haecer_slot_read(counter->ctx->conn, &counter->slot.id, 1, &raw, false);
	if (error < 0) {
		snprintf(what, sizeof(what), "reading %s", counter->info.name);
		return haecer__fail_msrd(counter->ctx, error, what);
	}
	counter->slot_checked_ns = clock_monotonic_raw_ns();
	return extend_event(counter, raw, value);
}

void haecer__publish(struct haecer_counter *counter, uint64_t value, uint64_t timestamp)
{
	struct ring_record record = {
		.value = value,
		.timestamp = timestamp,
		.counter_id = counter->info.id,
		.unit_exponent = counter->info.unit_exponent,
	};

	if (counter->info.monitored)
		ring_push(&counter->ring, &record);
}

int haecer_counter_read_aged(struct haecer_counter *counter, uint64_t *value, uint64_t *age_ns)
{
	struct haecer_context *ctx;
	uint64_t before, after, at;
	int error;

	if (value == NULL)
		return haecer__fail(-EINVAL, "no place for the value");
	error = haecer__counter_lock(counter, &ctx);
	if (error < 0)
		return error;
	before = clock_monotonic_raw_ns();
	counter->reading_dated = false;
	error = haecer__read_locked(counter, value);
	/* A page reading took the time right after it (haecer__page_reading). */
	after = counter->reading_dated ? counter->page_checked_ns : clock_monotonic_raw_ns();
	/* A page reading was true at msrd's sample (a held round trip's value: when that round
	 * trip returned); a round trip read the register somewhere in it, its middle the best
	 * estimate of when. */
	at = counter->reading_dated ? counter->reading_ns : before + (after - before) / 2;
	if (error == 0 && counter->info.monitored)
		haecer__publish(counter, *value, at);
	if (error == 0 && age_ns != NULL)
		*age_ns = after > at ? after - at : 0;
	pthread_mutex_unlock(&ctx->lock);
	return error;
}

int haecer_counter_read(struct haecer_counter *counter, uint64_t *value)
{
	return haecer_counter_read_aged(counter, value, NULL);
}

/* ---- sets ---- */


static int check_set(struct haecer_counter *const *counters, size_t count,
		     const struct haecer_context *ctx)
{
	for (size_t i = 0; i < count; i++) {
		if (counters[i] == NULL || counters[i]->ctx != ctx)
			return haecer__fail(-EINVAL, "counter %zu of the set is invalid, freed, or "
					    "of another context", i);
	}
	return 0;
}

static void plan_set(struct haecer_counter *const *counters, size_t count, struct read_set *set)
{
	bool totals = counters[0]->ctx->energy_totals;

	set->slot_count = 0;
	set->energy_count = 0;
	set->perf_count = 0;
	for (size_t i = 0; i < count; i++) {
		const struct haecer_counter *counter = counters[i];
		if (counter->info.kind == HAECER_COUNTER_PERF) {
			set->perf_of[set->perf_count++] = i;
			continue;
		}
		if (counter->info.kind != HAECER_COUNTER_ENERGY) {
			set->slot_of[set->slot_count] = i;
			set->slot_ids[set->slot_count++] = counter->slot.id;
			continue;
		}
		set->energy_of[set->energy_count] = i;
		set->energy_ops[set->energy_count++] = (struct haecer_msr_op){
			.kind = totals ? HAECER_MSR_ENERGY_READ : HAECER_MSR_READ,
			.cpu = counter->info.cpu,
			.address = counter->info.counter_address,
		};
	}
}

static int run_energy_ops(struct haecer_context *ctx, struct read_set *set)
{
	int error;

	if (set->energy_count == 0)
		return 0;
	error = haecer_msr_batch(ctx->conn, set->energy_ops, set->energy_count);
	if (error < 0)
		return haecer__fail_msrd(ctx, error, "reading the energy counters of the set");
	for (size_t i = 0; i < set->energy_count; i++) {
		if (set->energy_ops[i].status < 0)
			return haecer__fail(set->energy_ops[i].status, "reading energy register "
					    "%#x of the set: %s", set->energy_ops[i].address,
					    haecer_strerror(set->energy_ops[i].status));
	}
	return 0;
}

static int run_set(struct haecer_context *ctx, struct read_set *set, bool synchronized)
{
	int error;

	if (set->slot_count > 0) {
		error = haecer_slot_read(ctx->conn, set->slot_ids, set->slot_count, set->slot_raw,
					 synchronized);
		if (error < 0)
			return haecer__fail_msrd(ctx, error, "reading the event counters of the set");
	}
	return run_energy_ops(ctx, set);
}

static int finish_set(struct haecer_counter *const *counters, const struct read_set *set,
		      uint64_t *values)
{
	bool totals = counters[0]->ctx->energy_totals;
	int error = 0;

	for (size_t i = 0; i < set->slot_count; i++) {
		int status = extend_event(counters[set->slot_of[i]], set->slot_raw[i],
					  &values[set->slot_of[i]]);

		error = error < 0 ? error : status;
	}
	for (size_t i = 0; i < set->energy_count; i++) {
		const struct haecer_msr_op *op = &set->energy_ops[i];
		values[set->energy_of[i]] = haecer__fold_energy(counters[set->energy_of[i]], op->value,
							totals ? &op->total : NULL);
	}
	/* The broker's events are the kernel's: one read() each, right after msrd's reads. */
	for (size_t i = 0; i < set->perf_count && error == 0; i++)
		error = haecer__perf_read_locked(counters[set->perf_of[i]],
						 &values[set->perf_of[i]]);
	return error;
}

int haecer_counter_read_many(struct haecer_counter *const *counters, size_t count,
			     uint64_t *values, unsigned flags)
{
	struct haecer_context *ctx;
	uint64_t before, after;
	int error;

	if (counters == NULL || values == NULL || count == 0 || count > HAECER_READ_MAX)
		return haecer__fail(-EINVAL, "a set of 1 to %u counters is read", HAECER_READ_MAX);
	if (flags & ~HAECER_READ_SYNCHRONIZED)
		return haecer__fail(-EINVAL, "unknown read flags %#x", flags);
	error = haecer__counter_lock(counters[0], &ctx);
	if (error < 0)
		return error;
	error = check_set(counters, count, ctx);
	if (error < 0)
		goto out;
	plan_set(counters, count, &ctx->set);
	before = clock_monotonic_raw_ns();
	error = run_set(ctx, &ctx->set, flags & HAECER_READ_SYNCHRONIZED);
	after = clock_monotonic_raw_ns();
	if (error < 0)
		goto out;
	error = finish_set(counters, &ctx->set, values);
	if (error < 0)
		goto out;
	for (size_t i = 0; i < count; i++)
		haecer__publish(counters[i], values[i], before + (after - before) / 2);
out:
	pthread_mutex_unlock(&ctx->lock);
	return error;
}

/* ---- rings ---- */

static uint16_t ring_kind_of(uint16_t kind)
{
	switch (kind) {
	case HAECER_COUNTER_ENERGY:
		return RING_COUNTER_ENERGY;
	case HAECER_COUNTER_FIXED:
		return RING_COUNTER_FIXED;
	default:
		return RING_COUNTER_PROGRAMMABLE;
	}
}

static void ring_spec_of(const struct haecer_counter *counter, uint16_t major, uint16_t minor,
			 uint32_t capacity, struct haecer_ring_spec *spec)
{
	struct haecer_ring_counter *described = &spec->counters[0];

	memset(spec, 0, sizeof(*spec));
	spec->major = major;
	spec->minor = minor;
	spec->capacity = capacity;
	/* Every push happens under the context's lock: one producer at a time. */
	spec->flags = RING_SINGLE_PRODUCER;
	spec->clock = RING_CLOCK_MONOTONIC_RAW;
	spec->counter_count = 1;
	/* Ring names are shorter than libpfm4's: drop the "pmu::" prefix when it does not fit. */
	const char *name = counter->info.name;
	const char *event = strstr(name, "::");
	if (strlen(name) >= sizeof(described->name) && event != NULL)
		name = event + 2;
	snprintf(described->name, sizeof(described->name), "%.*s",
		 (int)sizeof(described->name) - 1, name);
	described->id = counter->info.id;
	described->kind = ring_kind_of(counter->info.kind);
	described->unit_exponent = counter->info.unit_exponent;
	described->package = counter->info.package;
	described->cpu = (int32_t)counter->info.cpu;
}

static int attach_ring(struct haecer_counter *counter, const struct haecer_ring_spec *spec)
{
	struct haecer_context *ctx = counter->ctx;
	struct haecer_ring_entry entry;
	char what[96];
	int fd = -1;
	int error;

	error = haecer_ring_create(ctx->conn, spec, &entry, &fd);
	if (error < 0) {
		snprintf(what, sizeof(what), "creating ring (%u, %u)", spec->major, spec->minor);
		return haecer__fail_msrd(ctx, error, what);
	}
	error = ring_producer_attach(&counter->ring, fd);
	close(fd);
	if (error < 0)
		return haecer__fail(error, "mapping ring (%u, %u) from msrd: %s", spec->major,
				    spec->minor, haecer_strerror(error));
	counter->info.monitored = true;
	counter->info.major = spec->major;
	counter->info.minor = spec->minor;
	counter->info.ring_instance = entry.instance;
	counter->info.ring_capacity = spec->capacity;
	return 0;
}

/* Rings hold a power of two of records (a mask, not a division, finds a slot): the smallest
 * one that holds `wanted`. info.ring_capacity tells the caller what it got. */
static uint32_t ring_capacity_for(uint32_t wanted)
{
	uint32_t capacity = RING_MIN_CAPACITY;

	while (capacity < wanted)
		capacity <<= 1;
	return capacity;
}

int haecer_counter_monitor(struct haecer_counter *counter, uint16_t major, uint16_t minor,
			   uint32_t capacity)
{
	struct haecer_ring_spec spec;
	struct haecer_context *ctx;
	int error;

	if (capacity == 0)
		capacity = HAECER_MONITOR_DEFAULT_CAPACITY;
	if (capacity > RING_MAX_CAPACITY)
		return haecer__fail(-EINVAL, "ring capacity %u is over %u records", capacity,
				    RING_MAX_CAPACITY);
	capacity = ring_capacity_for(capacity);
	error = haecer__counter_lock(counter, &ctx);
	if (error < 0)
		return error;
	if (counter->info.monitored) {
		error = haecer__fail(-EEXIST, "%s is already attached to ring (%u, %u)",
				     counter->info.name, counter->info.major, counter->info.minor);
		goto out;
	}
	ring_spec_of(counter, major, minor, capacity, &spec);
	error = attach_ring(counter, &spec);
out:
	pthread_mutex_unlock(&ctx->lock);
	return error;
}

void haecer__ring_detach(struct haecer_counter *counter)
{
	if (!counter->info.monitored)
		return;
	ring_producer_detach(&counter->ring);
	counter->info.monitored = false;
	counter->info.ring_capacity = 0;
}
