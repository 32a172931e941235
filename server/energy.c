/*
 * server/energy.c — 64-bit energy totals, kept by msrd for every energy-status register.
 *
 * RAPL energy registers are 32-bit counters that wrap after 2^32 units: minutes at high power.
 * msrd reads each one often enough that no wrap can go unseen — every half of the time the
 * register needs to wrap at its domain's maximum power, as the kernel's perf RAPL driver's
 * hrtimer does — and extends it to 64 bits: total & 0xffffffff == raw, the upper bits count the
 * wraps since msrd began sampling. Every read of an energy register by any client extends the
 * total too. Idle, msrd thus wakes once every few minutes.
 *
 * In the simulator's virtual time nothing moves between SIM_ADVANCE requests, so a long advance
 * is cut into steps no longer than the sampling period, with a sample after each.
 *
 * Coarse grants (policy `energy: {min_interval_ms, resolution_uj}`, the PLATYPUS mitigation)
 * change what a reader sees: the total rounded down to the resolution (in register units; raw =
 * that total mod 2^32), and within the minimum interval the uid's previous reading again. Every
 * way a client can have an energy register read goes through here: READ, BATCH and BATCH_RUN
 * (any op kind that reads one), ENERGY_READ, and its schedules; a write's check reads the
 * register too but never shows the value (msr_exec.c), and slot reads resolve to counter
 * registers only.
 */
#include "server/server.h"
#include "backend/backend_sim.h"
#include "common/clock.h"

#include "hw/rapl_quirks.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#define DEFAULT_MAX_POWER_MW 1000000u  /* when the machine says nothing: 1 kW */
#define ENERGY_WRAP_UNITS 4294967296.0 /* 2^32 */

/* AMD's core energy is one register per core; Intel's one per die (machine_energy_key). */
static uint32_t key_of(const struct machine_info *machine, int domain, uint32_t cpu)
{
	return machine_energy_key(machine, domain, cpu);
}

/* Half the time the register needs to wrap at the domain's maximum power. */
static uint64_t half_wrap_ns(const struct machine_info *machine, int domain)
{
	double watts = (machine->rapl_max_power_mw[domain] != 0 ? machine->rapl_max_power_mw[domain]
								 : DEFAULT_MAX_POWER_MW) /
		       1000.0;
	double joules = ENERGY_WRAP_UNITS * rapl_unit_code_joules(machine->rapl_energy_exponent[domain]);

	return (uint64_t)(joules / watts * 1e9 / 2.0);
}

static int add_counter(struct energy_state *energy, int domain, uint32_t cpu, uint8_t exponent,
		       uint32_t max_power_mw)
{
	struct energy_counter *bigger = realloc(energy->counters,
						(energy->count + 1) * sizeof(*bigger));

	if (bigger == NULL)
		return -ENOMEM;
	energy->counters = bigger;
	energy->counters[energy->count++] = (struct energy_counter){
		.cpu = cpu,
		.address = rapl_energy_status_address((enum rapl_domain)domain),
		.domain = (uint8_t)domain,
		.exponent = exponent,
		.max_power_mw = max_power_mw != 0 ? max_power_mw : DEFAULT_MAX_POWER_MW,
	};
	return 0;
}

/* One counter per (domain, key), read through the first CPU with that key: on a two-die
 * package each die's registers through a CPU of that die. */
static int add_domain(struct energy_state *energy, const struct machine_info *machine, int domain)
{
	int32_t *by_key = malloc(machine->cpu_count * sizeof(*by_key));

	if (by_key == NULL)
		return -ENOMEM;
	for (uint32_t key = 0; key < machine->cpu_count; key++)
		by_key[key] = -1;
	energy->by_domain[domain] = by_key;
	for (uint32_t cpu = 0; cpu < machine->cpu_count; cpu++) {
		uint32_t key = key_of(machine, domain, cpu);
		int status;
		if (key >= machine->cpu_count || by_key[key] >= 0)
			continue;
		by_key[key] = (int32_t)energy->count;
		status = add_counter(energy, domain, cpu, machine->rapl_energy_exponent[domain],
				     machine->rapl_max_power_mw[domain]);
		if (status < 0)
			return status;
	}
	return 0;
}

/* The TSC of the sample: the simulated CPU's own (its energy and its TSC are one clock), the
 * real one otherwise. */
static uint64_t sample_tsc(struct msrd *server, uint32_t cpu)
{
	uint64_t tsc;

	if (backend_kind(server->backend) == BACKEND_SIM &&
	    backend_read(server->backend, cpu, MSR_IA32_TSC, &tsc) == 0)
		return tsc;
	return __rdtsc();
}

/* The sampler's view, for energy pages: a change since its previous sample is an update, and
 * it happened between that sample's read (lo: time taken before it) and this one's (time taken
 * after it). */
static bool note_sample(struct energy_counter *counter, uint64_t raw, uint64_t lo_ns,
			uint64_t lo_tsc, uint64_t now_ns, uint64_t tsc)
{
	struct energy_page_reading *seen = &counter->sampled;
	bool changed;

	raw &= RAPL_ENERGY_COUNTER_MASK;
	changed = seen->sample_ns == 0 || raw != seen->raw;
	if (changed) {
		/* The total only moves with the register, so the last sample's is the last
		 * change's. */
		seen->previous_total = seen->update_ns ? seen->total : 0;
		seen->previous_update_ns = seen->update_ns;
		seen->previous_update_tsc = seen->update_tsc;
		seen->previous_update_lo_ns = seen->update_lo_ns;
		seen->previous_update_lo_tsc = seen->update_lo_tsc;
		seen->previous_placed_lo_ns = seen->update_placed_lo_ns;
		seen->previous_placed_hi_ns = seen->update_placed_hi_ns;
		seen->update_lo_ns = seen->sample_ns ? counter->sample_lo_ns : 0;
		seen->update_lo_tsc = seen->sample_ns ? counter->sample_lo_tsc : 0;
		seen->update_ns = now_ns;
		seen->update_tsc = tsc;
		/* Before this change teaches the grid anything: placed by its prediction. */
		energy_edges_place(counter);
	}
	seen->raw = raw;
	seen->total = counter->total;
	seen->sample_ns = now_ns;
	seen->sample_tsc = tsc;
	counter->sample_lo_ns = lo_ns;
	counter->sample_lo_tsc = lo_tsc;
	return changed;
}

bool energy_sample_counter(struct msrd *server, struct energy_counter *counter, uint32_t cpu)
{
	bool timed = server->energy.pages != NULL;
	uint64_t lo_tsc = timed ? sample_tsc(server, counter->cpu) : 0;
	uint64_t lo_ns = clock_monotonic_raw_ns(), raw;
	int status = backend_read(server->backend, cpu, counter->address, &raw);
	uint64_t now_ns = clock_monotonic_raw_ns();
	uint64_t tsc = timed ? sample_tsc(server, counter->cpu) : 0;

	if (status < 0)
		return false;
	energy_observe(server, counter, &raw);
	return note_sample(counter, raw, lo_ns, lo_tsc, now_ns, tsc);
}

void energy_sample_all(struct msrd *server)
{
	struct energy_state *energy = &server->energy;

	for (uint32_t i = 0; i < energy->count; i++)
		energy_sample_counter(server, &energy->counters[i], energy->counters[i].cpu);
	energy->samples++;
	energy_pages_publish(server);
}

void energy_sample_some(struct msrd *server, const bool *wanted)
{
	struct energy_state *energy = &server->energy;

	for (uint32_t i = 0; i < energy->count; i++)
		if (wanted[i])
			energy_sample_counter(server, &energy->counters[i],
					      energy->counters[i].cpu);
	energy_pages_publish(server);
}

int energy_init(struct msrd *server)
{
	const struct machine_info *machine = &server->machine;
	struct energy_state *energy = &server->energy;

	memset(energy, 0, sizeof(*energy));
	for (int domain = 0; domain < RAPL_DOMAIN_COUNT; domain++) {
		uint64_t period;
		int status;
		/* Dormant domains too: one that starts counting later is kept (and coarsened)
		 * from its first unit on. */
		if (((machine->rapl_domains | machine->rapl_dormant_domains) & (1u << domain)) == 0)
			continue;
		status = add_domain(energy, machine, domain);
		if (status < 0)
			return status;
		period = half_wrap_ns(machine, domain);
		if (energy->period_ns == 0 || period < energy->period_ns)
			energy->period_ns = period;
	}
	if (energy->count == 0) {
		log_info("energy: no energy-status registers on this machine");
		return 0;
	}
	if (energy->period_ns < 1000000)
		energy->period_ns = 1000000;
	energy_sample_all(server);
	log_notice("energy: %u energy-status registers kept as 64-bit totals, sampled every %.1f s "
		   "(half the fastest wrap at maximum power)",
		   energy->count, (double)energy->period_ns / 1e9);
	energy_cost_follow_self(server);
	return 0;
}

static void free_coarse_streams(struct energy_state *energy);

void energy_free(struct energy_state *energy)
{
	for (int domain = 0; domain < RAPL_DOMAIN_COUNT; domain++)
		free(energy->by_domain[domain]);
	free(energy->counters);
	free_coarse_streams(energy);
	memset(energy, 0, sizeof(*energy));
}

void energy_arm(struct msrd *server)
{
	struct energy_state *energy = &server->energy;
	struct io_uring_sqe *sqe;

	if (energy->armed || energy->count == 0 || backend_sim_virtual_time(server->backend) ||
	    server->stopping)
		return;
	energy->timeout = (struct __kernel_timespec){
		.tv_sec = (long long)(energy->period_ns / 1000000000ull),
		.tv_nsec = (long long)(energy->period_ns % 1000000000ull),
	};
	sqe = loop_sqe(&server->loop);
	io_uring_prep_timeout(sqe, &energy->timeout, 0, 0);
	io_uring_sqe_set_data64(sqe, loop_user_data(server, TAG_ENERGY, 0));
	energy->armed = true;
}

void energy_on_timeout(struct msrd *server, const struct io_uring_cqe *cqe)
{
	server->energy.armed = false;
	if (cqe->res == -ECANCELED)
		return;
	energy_sample_all(server);
	energy_arm(server);
}

struct energy_counter *energy_find(struct msrd *server, uint32_t cpu, uint32_t address)
{
	const struct machine_info *machine = &server->machine;
	struct energy_state *energy = &server->energy;
	int domain = rapl_domain_of_address(address);
	uint32_t key;
	int32_t index;

	if (domain < 0 || energy->by_domain[domain] == NULL || cpu >= machine->cpu_count)
		return NULL;
	key = key_of(machine, domain, cpu);
	index = key < machine->cpu_count ? energy->by_domain[domain][key] : -1;
	return index >= 0 ? &energy->counters[index] : NULL;
}

/* The most units the domain can have counted in `elapsed_ns` at its maximum power: twice its
 * maximum power over the elapsed time plus STALE_SLACK_NS (the read may have been taken that
 * long before its fold: io_uring completion latency), plus a few units of rounding. */
#define STALE_SLACK_NS 100000000ull
#define STALE_MARGIN 2u
#define STALE_BEHIND_UNITS ((RAPL_ENERGY_COUNTER_MASK + 1) / 4)

static uint64_t plausible_units(const struct energy_counter *counter, uint64_t elapsed_ns)
{
	long double joules = (long double)counter->max_power_mw / 1000.0L * STALE_MARGIN *
			     (long double)(elapsed_ns + STALE_SLACK_NS) / 1e9L;
	long double units = joules / (long double)rapl_unit_code_joules(counter->exponent) + 16.0L;

	return units >= (long double)RAPL_ENERGY_COUNTER_MASK ? RAPL_ENERGY_COUNTER_MASK
							       : (uint64_t)units;
}

/* Every one of a kind the first few times, then at powers of two: a broken bound must not flood
 * the log. */
static bool worth_logging(uint64_t count)
{
	return count <= 8 || (count & (count - 1)) == 0;
}

/* The units `raw` adds to the total, or -1 when `raw` is older than the total: behind it by less
 * than a quarter of the register. A late reading is behind by what the domain drew in the moments
 * it was late, far less than that; a step ahead is at most half the register (the sampler's
 * period is half a wrap at the domain's maximum power), and a step of three quarters would need
 * one and a half times that power for the whole period. A step ahead that is more than the
 * domain could draw at its maximum power is counted all the same: the maximum is the machine's
 * word (a model's figure, a simulated power trace, a graphics domain under load can exceed it),
 * and taking such a step for a stale reading froze the total for good, as the kept total's time
 * never moved on: the domain then read 0 J without a word. It is logged instead. */
static int64_t fold_delta(struct energy_counter *counter, uint64_t raw, uint64_t now)
{
	uint64_t delta = (raw - counter->total) & RAPL_ENERGY_COUNTER_MASK;
	uint64_t elapsed = now > counter->folded_ns ? now - counter->folded_ns : 0;

	if (delta > RAPL_ENERGY_COUNTER_MASK + 1 - STALE_BEHIND_UNITS)
		return -1;
	if (delta > plausible_units(counter, elapsed)) {
		counter->above_max_reads++;
		if (worth_logging(counter->above_max_reads))
			log_warnx("energy: %#x on CPU %u counted %llu units in %.3f s, more than its "
				  "maximum power of %u mW allows: counted all the same (%llu such "
				  "readings so far; a wrap could go unseen if it stays above it)",
				  counter->address, counter->cpu, (unsigned long long)delta,
				  (double)elapsed / 1e9, counter->max_power_mw,
				  (unsigned long long)counter->above_max_reads);
	}
	return (int64_t)delta;
}

uint64_t energy_observe(struct msrd *server, struct energy_counter *counter, uint64_t *raw)
{
	uint64_t now = energy_now_ns(server), reread;
	int64_t delta;

	*raw &= RAPL_ENERGY_COUNTER_MASK;
	if (!counter->valid) {
		counter->total = *raw;
		counter->valid = true;
		counter->folded_ns = now;
		return counter->total;
	}
	delta = fold_delta(counter, *raw, now);
	if (delta < 0) {
		/* As the kernel's rapl read loop does: read again, now that everything older
		 * has been folded. */
		counter->stale_reads++;
		if (backend_read(server->backend, counter->cpu, counter->address, &reread) == 0) {
			reread &= RAPL_ENERGY_COUNTER_MASK;
			now = energy_now_ns(server);
			delta = fold_delta(counter, reread, now);
		}
		if (worth_logging(counter->stale_reads))
			log_warnx("energy: a reading of %#x on CPU %u (%#llx) is older than the total "
				  "(%#llx): it would add a whole wrap; %s (%llu stale readings so far)",
				  counter->address, counter->cpu, (unsigned long long)*raw,
				  (unsigned long long)(counter->total & RAPL_ENERGY_COUNTER_MASK),
				  delta >= 0 ? "re-read" : "the re-read is stale too, total kept",
				  (unsigned long long)counter->stale_reads);
		*raw = delta >= 0 ? reread : counter->total & RAPL_ENERGY_COUNTER_MASK;
		if (delta < 0)
			return counter->total;
	}
	counter->total += (uint64_t)delta;
	counter->folded_ns = now;
	return counter->total;
}

int energy_sim_advance(struct msrd *server, uint64_t ns)
{
	uint64_t period = server->energy.period_ns;
	int status = 0;

	if (server->energy.count == 0 || period == 0)
		return backend_sim_advance(server->backend, ns);
	do {
		uint64_t step = ns < period ? ns : period;
		status = backend_sim_advance(server->backend, step);
		if (status < 0)
			return status;
		energy_sample_all(server);
		ns -= step;
	} while (ns > 0);
	return status;
}

uint64_t energy_now_ns(struct msrd *server)
{
	uint64_t now;

	if (backend_sim_virtual_time(server->backend) &&
	    backend_sim_now(server->backend, &now) == 0)
		return now;
	return msrd_now_ns();
}

/* The resolution in register units, at least one. */
static uint64_t resolution_units(const struct energy_counter *counter,
				 const struct policy_energy_limit *limit)
{
	unsigned __int128 units = rapl_unit_code_units_of_uj(counter->exponent, limit->resolution_uj);

	if (units == 0)
		return 1;
	return units > UINT64_MAX ? UINT64_MAX : (uint64_t)units;
}

void energy_coarsen(struct msrd *server, const struct energy_counter *counter,
		    const struct policy_energy_limit *limit, struct energy_coarse *previous,
		    uint64_t *raw, uint64_t *total)
{
	uint64_t now = energy_now_ns(server);
	uint64_t interval = (uint64_t)limit->min_interval_ms * 1000000ull;
	uint64_t units;

	if (previous->valid && now - previous->at_ns < interval) {
		*raw = previous->raw;
		*total = previous->total;
		return;
	}
	units = resolution_units(counter, limit);
	*total -= *total % units;
	*raw = *total & RAPL_ENERGY_COUNTER_MASK;
	*previous = (struct energy_coarse){ .at_ns = now, .raw = *raw, .total = *total,
					    .valid = true };
}

/* The coarse values of one grant setting: every path that hands out a coarse value (round
 * trips, schedules, coarse pages, a fresh page's first publication) takes it from here, so the
 * interval holds across them all and across connections, pages and processes: whatever a uid
 * does, no more than one fresh value per interval exists for its setting. Kept until exit (one
 * per setting a policy ever named: a handful), so no page or connection going away resets it. */
struct energy_coarse_stream {
	struct energy_coarse_stream *next;
	uint32_t min_interval_ms;
	uint64_t resolution_uj;
	struct energy_coarse *per_counter;
};

struct energy_coarse *energy_coarse_state(struct msrd *server,
					  const struct energy_counter *counter,
					  const struct policy_energy_limit *limit)
{
	struct energy_state *energy = &server->energy;
	uint32_t index = (uint32_t)(counter - energy->counters);
	struct energy_coarse_stream *stream;

	if (index >= energy->count)
		return NULL;
	for (stream = energy->coarse_streams; stream != NULL; stream = stream->next)
		if (stream->min_interval_ms == limit->min_interval_ms &&
		    stream->resolution_uj == limit->resolution_uj)
			return &stream->per_counter[index];
	stream = calloc(1, sizeof(*stream));
	if (stream == NULL)
		return NULL;
	stream->per_counter = calloc(energy->count, sizeof(*stream->per_counter));
	if (stream->per_counter == NULL) {
		free(stream);
		return NULL;
	}
	stream->min_interval_ms = limit->min_interval_ms;
	stream->resolution_uj = limit->resolution_uj;
	stream->next = energy->coarse_streams;
	energy->coarse_streams = stream;
	return &stream->per_counter[index];
}

static void free_coarse_streams(struct energy_state *energy)
{
	while (energy->coarse_streams != NULL) {
		struct energy_coarse_stream *stream = energy->coarse_streams;

		energy->coarse_streams = stream->next;
		free(stream->per_counter);
		free(stream);
	}
}

void energy_finish_reads(struct client *client, struct msr_op *ops, const uint8_t *kinds,
			 uint64_t *totals, uint32_t count)
{
	bool advanced = false; /* some coarse value is new: its pages show it before the reply */
	uint64_t advanced_at;

	for (uint32_t i = 0; i < count; i++) {
		struct policy_energy_limit limit;
		struct energy_counter *counter;
		struct energy_coarse *previous;
		uint64_t raw, total;

		totals[i] = 0;
		if (ops[i].write || ops[i].status != 0 || kinds[i] == WIRE_BATCH_SLOT_READ)
			continue;
		counter = energy_find(client->server, ops[i].cpu, ops[i].address);
		if (counter == NULL) {
			/* Fail closed: an energy-status register msrd keeps no total for is never
			 * shown raw to a coarse grant. */
			if (rapl_domain_of_address(ops[i].address) >= 0 &&
			    policy_energy_limit(client->grant, ops[i].address, &limit) == 1)
				ops[i].status = -EPERM;
			continue;
		}
		raw = ops[i].value;
		total = energy_observe(client->server, counter, &raw);
		if (policy_energy_limit(client->grant, ops[i].address, &limit) == 1) {
			previous = energy_coarse_state(client->server, counter, &limit);
			if (previous == NULL) {
				/* A fine reading must not leak for want of memory. */
				ops[i].status = -ENOMEM;
				continue;
			}
			advanced_at = previous->at_ns;
			energy_coarsen(client->server, counter, &limit, previous, &raw, &total);
			advanced |= previous->at_ns != advanced_at;
		}
		ops[i].value = raw;
		totals[i] = total;
	}
	if (advanced)
		energy_pages_publish_coarse(client->server);
}
