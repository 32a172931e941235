/*
 * libclient/haecer_region_probe.c — what regions read, and reading it in one msrd round trip.
 *
 * A source per context remembers what regions on it may read: the context's own event counters
 * (when it had some at its first region) or instructions and cycles opened per CPU, and the
 * package energy counter per package, each opened on first need. A probe is one thread's choice
 * from its source: the energy counter of its package and the counters; reading it is one batch
 * [simulated TSC], [energy total], [slot reads...] under the context's lock. Everything the
 * policy or the machine refuses is left out once, with the reason kept for the report.
 */
#include "libclient/haecer_region_internal.h"
#include "libclient/haecer_energy_cost.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_COUNTERS 2u
#define BATCH_OPS (1u + REGION_DOMAINS + HAECER_REGION_MAX_COUNTERS)

struct cpu_counters {
	bool tried;
	size_t count;
	struct region_counter counters[DEFAULT_COUNTERS];
};

struct package_energy {
	bool tried;
	uint32_t host_cpus;              /* host CPUs that map onto the package */
	struct region_counter energy[REGION_DOMAINS];
	/* The lowest and highest totals any region reading saw: the span the regions ran in. */
	uint64_t first[REGION_DOMAINS], last[REGION_DOMAINS];
	uint32_t seen;                   /* bit per slot */
};

struct region_source {
	struct region_source *next;
	struct haecer_context *ctx;      /* NULL: the offline source (msrd unreachable) */
	struct haecer_conn *conn;        /* with ctx, tells a new context at a reused address */
	bool stale;                      /* its context was closed */
	bool context_counters;           /* regions read the context's own event counters */
	size_t count;
	struct region_counter counters[HAECER_REGION_MAX_COUNTERS];
	uint32_t cpu_count;
	struct cpu_counters *cpus;
	uint32_t package_count;
	struct package_energy *packages;
	uint32_t slots;                  /* bit per share column slot the machine has */
	double max_watts[REGION_DOMAINS]; /* the machine's maximum power per slot, 0: unknown */
	bool simulated;
	bool tsc_refused;                /* the policy refuses the simulated TSC: clock time */
	char machine[96];
	char energy_note[REGION_NOTE_SIZE];
	char counter_note[REGION_NOTE_SIZE];
};

static pthread_mutex_t source_lock = PTHREAD_MUTEX_INITIALIZER;
static struct region_source *sources;
static struct region_source offline = { .machine = "no msrd" };

static const struct {
	unsigned arch_event;
	const char *column;
} default_events[DEFAULT_COUNTERS] = {
	{ INSTRUCTIONS_RETIRED, "instructions" },
	{ UNHALTED_CORE_CYCLES, "cycles" },
};

/* ---- notes ---- */

static void note(char *buffer, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Keep the first reason only: later ones are usually the same refusal on another CPU. */
static void note(char *buffer, const char *format, ...)
{
	va_list arguments;

	if (buffer[0] != '\0')
		return;
	va_start(arguments, format);
	vsnprintf(buffer, REGION_NOTE_SIZE, format, arguments);
	va_end(arguments);
}

void haecer__region_note_unreachable(const char *reason)
{
	pthread_mutex_lock(&source_lock);
	note(offline.energy_note, "msrd unreachable: %s", reason);
	note(offline.counter_note, "msrd unreachable");
	pthread_mutex_unlock(&source_lock);
}

/* ---- sources (source_lock held) ---- */

static bool counter_alive(const struct region_counter *counter, const struct haecer_context *ctx)
{
	return counter->counter != NULL &&
	       __atomic_load_n(&counter->counter->ctx, __ATOMIC_ACQUIRE) == ctx &&
	       __atomic_load_n(&counter->counter->generation, __ATOMIC_ACQUIRE) ==
		       counter->generation;
}

static bool opened_counters_alive(const struct region_source *source)
{
	for (uint32_t i = 0; i < source->package_count; i++) {
		const struct package_energy *package = &source->packages[i];
		for (unsigned d = 0; d < REGION_DOMAINS; d++)
			if (package->energy[d].counter != NULL &&
			    !counter_alive(&package->energy[d], source->ctx))
				return false;
	}
	for (uint32_t i = 0; i < source->cpu_count; i++) {
		for (size_t j = 0; j < source->cpus[i].count; j++)
			if (!counter_alive(&source->cpus[i].counters[j], source->ctx))
				return false;
	}
	return true;
}

static struct region_source *find_source(const struct haecer_context *ctx)
{
	for (struct region_source *source = sources; source != NULL; source = source->next) {
		if (source->stale || source->ctx != ctx || source->conn != ctx->conn)
			continue;
		/* Counters of ours that died mean the context was closed and this is a new
		 * one at the same address. */
		if (opened_counters_alive(source))
			return source;
		source->stale = true;
	}
	return NULL;
}

static void remember(struct region_counter *out, struct haecer_counter *counter, unsigned column)
{
	out->counter = counter;
	out->generation = __atomic_load_n(&counter->generation, __ATOMIC_ACQUIRE);
	out->column = column;
}

/* The event counters the process set up on the context, in setup order. */
static void take_context_counters(struct region_source *source)
{
	struct haecer_counter *found[HAECER_REGION_MAX_COUNTERS];
	struct haecer_context *ctx = source->ctx;
	size_t count = 0;

	pthread_mutex_lock(&ctx->lock);
	for (struct haecer_counter *counter = ctx->counters; counter != NULL;
	     counter = counter->next) {
		if (counter->info.kind == HAECER_COUNTER_ENERGY || counter->region_counter)
			continue;
		if (count == HAECER_REGION_MAX_COUNTERS)
			memmove(found, found + 1, sizeof(found[0]) * --count);
		found[count++] = counter;
	}
	pthread_mutex_unlock(&ctx->lock);
	source->context_counters = count > 0;
	for (size_t i = count; i-- > 0;) {
		int column = haecer__region_column(found[i]->info.name);
		if (column < 0) {
			note(source->counter_note, "more than %u counters: %s and later ones are "
			     "not read", HAECER_REGION_MAX_COUNTERS, found[i]->info.name);
			break;
		}
		remember(&source->counters[source->count++], found[i], (unsigned)column);
	}
}

static void describe_machine(struct region_source *source)
{
	const struct haecer_machine_info *machine = &source->ctx->machine;

	if (source->simulated)
		snprintf(source->machine, sizeof(source->machine), "msrd, simulated %s",
			 machine->sim_model);
	else
		snprintf(source->machine, sizeof(source->machine), "msrd, %s",
			 machine->model_name);
}

/* The RAPL domain (enum RAPLCounter) of share column slot d on this machine, -1 for none. AMD's
 * core domain counts one core, not the package: regions leave it out, as haecer-prof does. */
static int slot_domain(const struct haecer_context *ctx, unsigned d)
{
	static const unsigned intel[REGION_DOMAINS] = { RAPL_DOMAIN_PKG, RAPL_DOMAIN_PP0,
							RAPL_DOMAIN_PP1, RAPL_DOMAIN_DRAM,
							RAPL_DOMAIN_PSYS };
	unsigned domain = d == 0 ? haecer__package_domain(ctx) : intel[d];

	if (domain == RAPL_DOMAIN_PP0 && haecer__package_domain(ctx) == RAPL_DOMAIN_AMD_PKG)
		return -1;
	return ctx->machine.rapl_domains & (1u << domain) ? (int)domain : -1;
}

static struct region_source *new_source(struct haecer_context *ctx)
{
	struct region_source *source = calloc(1, sizeof(*source));

	if (source == NULL)
		return NULL;
	source->ctx = ctx;
	source->conn = ctx->conn;
	source->simulated = ctx->simulated;
	source->cpu_count = ctx->machine.cpu_count;
	source->package_count = ctx->machine.package_count;
	source->cpus = calloc(source->cpu_count, sizeof(*source->cpus));
	source->packages = calloc(source->package_count, sizeof(*source->packages));
	if (source->cpus == NULL || source->packages == NULL) {
		free(source->cpus);
		free(source->packages);
		free(source);
		return NULL;
	}
	/* Host CPU h runs as model CPU h mod the model's count (as the library maps them). */
	long host_cpus = sysconf(_SC_NPROCESSORS_CONF);
	for (long h = 0; h < host_cpus && source->cpu_count > 0; h++) {
		uint32_t package = ctx->machine.cpu_package[(uint32_t)h % source->cpu_count];
		if (package < source->package_count)
			source->packages[package].host_cpus++;
	}
	for (unsigned d = 0; d < REGION_DOMAINS; d++) {
		int domain = slot_domain(ctx, d);
		if (domain < 0)
			continue;
		source->slots |= 1u << d;
		source->max_watts[d] = (double)ctx->machine.rapl_max_power_mw[domain] / 1000.0;
	}
	describe_machine(source);
	take_context_counters(source);
	source->next = sources;
	sources = source;
	return source;
}

static struct region_source *source_of(struct haecer_context *ctx)
{
	struct region_source *source;

	if (ctx == NULL)
		return &offline;
	source = find_source(ctx);
	if (source == NULL)
		source = new_source(ctx);
	if (source == NULL) {
		note(offline.energy_note, "out of memory for a region source");
		return &offline;
	}
	return source;
}

/* ---- counters for a thread (source_lock held) ---- */

static void open_energy(struct region_source *source, uint32_t cpu, struct package_energy *out)
{
	struct haecer_context *ctx = source->ctx;

	out->tried = true;
	for (unsigned d = 0; d < REGION_DOMAINS; d++) {
		struct haecer_counter *counter;
		int domain = slot_domain(ctx, d), error;

		if (domain < 0)
			continue;
		error = haecer_counter_open_energy(ctx, (int)cpu, (unsigned)domain, &counter);
		if (error < 0) {
			note(source->energy_note, "%s not measured: %s (%s)",
			     haecer_energy_domain_name((unsigned)domain), haecer_strerror(error),
			     haecer_error_detail());
			continue;
		}
		remember(&out->energy[d], counter, REGION_COLUMN_SHARE + d);
	}
}

static void open_defaults(struct region_source *source, uint32_t cpu, struct cpu_counters *out)
{
	out->tried = true;
	for (size_t i = 0; i < DEFAULT_COUNTERS; i++) {
		struct haecer_counter *counter;
		int column = haecer__region_column(default_events[i].column);
		int error = column < 0 ? column
				       : haecer_counter_open_arch(source->ctx, (int)cpu,
								  default_events[i].arch_event,
								  HAECER_FLAGS_DEFAULT,
								  HAECER_CMASK_NONE, &counter);
		if (error < 0) {
			note(source->counter_note, "%s on CPU %u not counted: %s (%s)",
			     default_events[i].column, cpu, haecer_strerror(error),
			     haecer_error_detail());
			continue;
		}
		remember(&out->counters[out->count++], counter, (unsigned)column);
	}
}

/* The thread's CPU: host CPU and model CPU (host mod the model's count, as the library maps
 * them). */
static int current_cpu(const struct region_source *source, int *host, uint32_t *cpu)
{
	*host = sched_getcpu();
	if (*host < 0 || source->cpu_count == 0)
		return -EOPNOTSUPP;
	*cpu = (uint32_t)*host % source->cpu_count;
	return 0;
}

static void choose_counters(struct region_source *source, uint32_t cpu,
			    struct region_probe *probe)
{
	const struct region_counter *chosen = source->counters;
	size_t count = source->count;

	if (!source->context_counters) {
		struct cpu_counters *set = &source->cpus[cpu];
		if (!set->tried)
			open_defaults(source, cpu, set);
		chosen = set->counters;
		count = set->count;
	}
	memcpy(probe->counters, chosen, sizeof(chosen[0]) * count);
	probe->count = count;
}

static void fill_probe(struct region_source *source, bool *pinned, cpu_set_t *saved,
		       struct region_probe *probe)
{
	uint32_t cpu, package;
	int host;

	if (current_cpu(source, &host, &cpu) < 0) {
		note(source->energy_note, "%s", "sched_getcpu() failed: the thread's CPU is unknown");
		return;
	}
	/* Default counters count on this CPU: keep the thread there while its outermost region
	 * is open (haecer_region.c gives the mask back at its end, so threads created later do
	 * not inherit a one-CPU mask). */
	if (!source->context_counters && !*pinned) {
		if (haecer__pin_to(host, saved) < 0)
			note(source->counter_note, "%s", haecer_error_detail());
		else
			*pinned = true;
	}
	probe->cpu = cpu;
	package = source->ctx->machine.cpu_package[cpu];
	if (package < source->package_count) {
		struct package_energy *energy = &source->packages[package];
		if (!energy->tried)
			open_energy(source, cpu, energy);
		memcpy(probe->energy, energy->energy, sizeof(probe->energy));
		probe->package_cpus = energy->host_cpus;
		probe->package = package;
	}
	choose_counters(source, cpu, probe);
}

void haecer__region_probe(struct haecer_context *ctx, bool *pinned, cpu_set_t *saved,
			  struct region_probe *probe)
{
	memset(probe, 0, sizeof(*probe));
	pthread_mutex_lock(&source_lock);
	probe->source = source_of(ctx);
	if (probe->source != &offline)
		fill_probe(probe->source, pinned, saved, probe);
	pthread_mutex_unlock(&source_lock);
}

bool haecer__region_probe_for(const struct region_probe *probe, const struct haecer_context *ctx)
{
	return probe->source != NULL && probe->source->ctx == ctx;
}

void haecer__region_forget_sources(void)
{
	pthread_mutex_init(&source_lock, NULL);
	while (sources != NULL) {
		struct region_source *source = sources;
		sources = source->next;
		free(source->cpus);
		free(source->packages);
		free(source);
	}
	memset(&offline, 0, sizeof(offline));
	snprintf(offline.machine, sizeof(offline.machine), "no msrd");
}

/* ---- reading ---- */

struct read_plan {
	struct haecer_msr_op ops[BATCH_OPS];
	const struct region_counter *of[BATCH_OPS]; /* NULL for the TSC */
	size_t count;
	int tsc;                                    /* op index, -1 when not read */
};

static uint64_t clock_ns(void)
{
	return clock_monotonic_raw_ns();
}

/* The calling thread's CPU time: while it waits for msrd's answer it uses none, so reading it
 * before the batch is as good as at the energy reading. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec now;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0)
		return 0;
	return (uint64_t)now.tv_sec * NS_PER_SECOND + (uint64_t)now.tv_nsec;
}

static bool probe_empty(const struct region_probe *probe)
{
	for (unsigned d = 0; d < REGION_DOMAINS; d++)
		if (probe->energy[d].counter != NULL)
			return false;
	return probe->count == 0;
}

/* Lock the context through any live counter of the probe (never through a stored context
 * pointer: the context may have been closed). */
static struct haecer_context *lock_probe(const struct region_probe *probe)
{
	struct haecer_context *ctx;

	for (unsigned d = 0; d < REGION_DOMAINS; d++)
		if (probe->energy[d].counter != NULL &&
		    haecer__counter_lock(probe->energy[d].counter, &ctx) == 0)
			return ctx;
	for (size_t i = 0; i < probe->count; i++)
		if (haecer__counter_lock(probe->counters[i].counter, &ctx) == 0)
			return ctx;
	return NULL;
}

static void plan_op(struct read_plan *plan, const struct region_counter *counter,
		    struct haecer_msr_op op)
{
	plan->of[plan->count] = counter;
	plan->ops[plan->count++] = op;
}

static void plan_read(const struct region_probe *probe, const struct haecer_context *ctx,
		      bool tsc, struct read_plan *plan)
{
	plan->count = 0;
	plan->tsc = -1;
	if (tsc) {
		plan->tsc = 0;
		plan_op(plan, NULL, (struct haecer_msr_op){ .kind = HAECER_MSR_READ,
							    .cpu = probe->cpu,
							    .address = MSR_IA32_TSC });
	}
	for (unsigned d = 0; d < REGION_DOMAINS; d++) {
		const struct region_counter *energy = &probe->energy[d];
		if (counter_alive(energy, ctx))
			plan_op(plan, energy, (struct haecer_msr_op){
				.kind = ctx->energy_totals ? HAECER_MSR_ENERGY_READ : HAECER_MSR_READ,
				.cpu = energy->counter->info.cpu,
				.address = energy->counter->info.counter_address });
	}
	for (size_t i = 0; i < probe->count; i++) {
		const struct region_counter *counter = &probe->counters[i];
		if (counter_alive(counter, ctx))
			plan_op(plan, counter, (struct haecer_msr_op){
				.kind = HAECER_MSR_SLOT_READ, .address = counter->counter->slot.id });
	}
}

static uint64_t nanojoules(const struct haecer_counter *counter, uint64_t units)
{
	return (uint64_t)(((unsigned __int128)units * NS_PER_SECOND) >>
			  counter->info.unit_exponent);
}

/* Fold the batch's values into the counters (context locked) and the values. */
static void take_values(const struct haecer_context *ctx, const struct read_plan *plan,
			struct region_values *out)
{
	for (size_t i = 0; i < plan->count; i++) {
		const struct haecer_msr_op *op = &plan->ops[i];
		const struct region_counter *counter = plan->of[i];
		struct haecer_counter *hw = counter != NULL ? counter->counter : NULL;
		if (hw == NULL || op->status < 0)
			continue;
		if (hw->info.kind == HAECER_COUNTER_ENERGY)
			out->value[counter->column] = nanojoules(
				hw, haecer__fold_energy(hw, op->value,
							ctx->energy_totals ? &op->total : NULL));
		else
			out->value[counter->column] = haecer__extend(hw, op->value);
		out->have |= 1u << counter->column;
	}
	/* The package-wide column is the package domain's total. */
	if (out->have & (1u << REGION_COLUMN_SHARE)) {
		out->value[REGION_COLUMN_ENERGY] = out->value[REGION_COLUMN_SHARE];
		out->have |= 1u << REGION_COLUMN_ENERGY;
	}
}

/* One batch; a policy that refuses the simulated TSC only costs the shared clock. */
static int run_plan(struct region_probe *probe, struct haecer_context *ctx,
		    struct read_plan *plan)
{
	struct region_source *source = probe->source;
	bool tsc = ctx->simulated && ctx->machine.tsc_hz > 0 &&
		   !__atomic_load_n(&source->tsc_refused, __ATOMIC_ACQUIRE);
	int error;

	plan_read(probe, ctx, tsc, plan);
	if (plan->count == 0)
		return -ENOENT;
	error = haecer_msr_batch(ctx->conn, plan->ops, plan->count);
	if (error == -EPERM && plan->tsc >= 0 && plan->ops[plan->tsc].status == -EPERM) {
		__atomic_store_n(&source->tsc_refused, true, __ATOMIC_RELEASE);
		plan_read(probe, ctx, false, plan);
		if (plan->count == 0)
			return -ENOENT;
		error = haecer_msr_batch(ctx->conn, plan->ops, plan->count);
	}
	return error;
}

/* Widen the package's span by a reading (source_lock: taken after the context's lock is given
 * back, as haecer__region_probe takes them the other way round). */
static void widen_span(const struct region_probe *probe, const struct region_values *values)
{
	struct region_source *source = probe->source;

	pthread_mutex_lock(&source_lock);
	if (source != &offline && probe->package < source->package_count) {
		struct package_energy *package = &source->packages[probe->package];
		for (unsigned d = 0; d < REGION_DOMAINS; d++) {
			uint64_t value = values->value[REGION_COLUMN_SHARE + d];
			if (!(values->have & (1u << (REGION_COLUMN_SHARE + d))))
				continue;
			if (!(package->seen & (1u << d))) {
				package->first[d] = package->last[d] = value;
				package->seen |= 1u << d;
			}
			package->first[d] = value < package->first[d] ? value : package->first[d];
			package->last[d] = value > package->last[d] ? value : package->last[d];
		}
	}
	pthread_mutex_unlock(&source_lock);
}

void haecer__region_span(uint64_t *nanojoules, uint32_t *have)
{
	*have = 0;
	memset(nanojoules, 0, sizeof(uint64_t) * REGION_DOMAINS);
	pthread_mutex_lock(&source_lock);
	for (const struct region_source *source = sources; source != NULL; source = source->next) {
		for (uint32_t p = 0; p < source->package_count; p++) {
			const struct package_energy *package = &source->packages[p];
			for (unsigned d = 0; d < REGION_DOMAINS; d++) {
				if (!(package->seen & (1u << d)))
					continue;
				nanojoules[d] += package->last[d] - package->first[d];
				*have |= 1u << d;
			}
		}
	}
	pthread_mutex_unlock(&source_lock);
}

void haecer__region_max_watts(double *watts)
{
	memset(watts, 0, sizeof(double) * REGION_DOMAINS);
	pthread_mutex_lock(&source_lock);
	for (const struct region_source *source = sources; source != NULL; source = source->next)
		for (unsigned d = 0; d < REGION_DOMAINS; d++)
			if (source->max_watts[d] > watts[d])
				watts[d] = source->max_watts[d];
	pthread_mutex_unlock(&source_lock);
}

void haecer__region_read(struct region_probe *probe, struct region_values *out)
{
	struct haecer_context *ctx;
	struct read_plan plan;
	uint64_t before, after, half, at;
	int error;

	out->have = 1u << REGION_COLUMN_TIME;
	out->pkg_marked = false;
	out->thread_ns = thread_cpu_ns();
	ctx = probe_empty(probe) ? NULL : lock_probe(probe);
	if (ctx == NULL) {
		out->value[REGION_COLUMN_TIME] = out->host_ns = clock_ns();
		return;
	}
	before = clock_ns();
	error = run_plan(probe, ctx, &plan);
	after = clock_ns();
	out->value[REGION_COLUMN_TIME] = out->host_ns = before + (after - before) / 2;
	half = (after - before) / 2;
	if (error == 0) {
		take_values(ctx, &plan, out);
		if (plan.tsc >= 0 && plan.ops[plan.tsc].status == 0) {
			out->value[REGION_COLUMN_TIME] = (uint64_t)(
				(unsigned __int128)plan.ops[plan.tsc].value * NS_PER_SECOND /
				ctx->machine.tsc_hz);
			/* Read in the batch beside the energy: the reading's moment is known,
			 * not just somewhere in the round trip. In real time the simulated TSC
			 * runs on CLOCK_MONOTONIC_RAW, so it dates the reading for the charge too:
			 * the round trip's middle was off by half a round trip at each end, and
			 * under two valgrind jobs at once (round trips of tens of ms) a thread
			 * that slept two thirds of a 0.3 s region was charged 23 % too much. */
			half = 0;
			if (!haecer__energy_virtual_time(ctx))
				out->host_ns = out->value[REGION_COLUMN_TIME];
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	/* After the context's lock: a mark takes it itself. */
	/* Dated by the time column (the simulated TSC where there is one: in virtual time the
	 * host clock says nothing of how long the energy took), with the round trip's doubt. */
	at = out->value[REGION_COLUMN_TIME];
	if ((out->have & (1u << REGION_COLUMN_SHARE)) && probe->energy[0].counter != NULL &&
	    at >= half &&
	    haecer__energy_mark_joules(probe->energy[0].counter,
				       (double)out->value[REGION_COLUMN_SHARE] / 1e9, at - half,
				       at + half, after - before, &out->pkg_mark) == 0)
		out->pkg_marked = true;
	if (out->have & ((1u << REGION_COLUMN_COUNTERS) - (1u << REGION_COLUMN_SHARE)))
		widen_span(probe, out);
}

bool haecer__region_energy_span(const struct region_probe *probe,
				const struct region_values *start, const struct region_values *end,
				struct haecer_energy_span *out)
{
	struct haecer_context *ctx;
	bool alive;

	if (!start->pkg_marked || !end->pkg_marked || probe->energy[0].counter == NULL)
		return false;
	if (haecer__counter_lock(probe->energy[0].counter, &ctx) < 0)
		return false;
	alive = counter_alive(&probe->energy[0], ctx);
	pthread_mutex_unlock(&ctx->lock);
	return alive && haecer_energy_span(probe->energy[0].counter, &start->pkg_mark,
					   &end->pkg_mark, out) == 0;
}

/* ---- description for the report ---- */

static void describe_counters(FILE *out, const struct region_source *source)
{
	if (source->context_counters) {
		fprintf(out, "  counters: the context's own (");
		for (size_t i = 0; i < source->count; i++)
			fprintf(out, "%s%s", i > 0 ? ", " : "",
				haecer__region_column_name(source->counters[i].column));
		fprintf(out, "), on the CPUs they were set up for\n");
	} else if (source->ctx != NULL) {
		fprintf(out, "  counters: instructions and cycles of the CPU each thread is pinned "
			"to (per CPU: everything that runs there counts)\n");
	}
	if (source->counter_note[0] != '\0')
		fprintf(out, "  counters: %s\n", source->counter_note);
}

static void describe(FILE *out, const struct region_source *source)
{
	fprintf(out, "%s:\n", source->machine);
	if (source->ctx != NULL && source->simulated && !source->tsc_refused)
		fprintf(out, "  time: the simulated TSC, read in the batch with the energy\n");
	else
		fprintf(out, "  time: CLOCK_MONOTONIC_RAW%s\n", source->tsc_refused ?
			" (the policy refuses the simulated TSC)" : "");
	if (source->ctx != NULL) {
		fprintf(out, "  energy:");
		for (unsigned d = 0; d < REGION_DOMAINS; d++)
			if (source->slots & (1u << d))
				fprintf(out, " %s", haecer__region_column_name(REGION_COLUMN_SHARE + d));
		fprintf(out, " of the package each thread runs on, charged per thread (seed 003 "
			"4): between two markers of a thread, a region gets the package's energy x "
			"the thread's CPU time / (the stretch x the package's %u host CPUs); other "
			"processes' and idle's part is not charged to regions\n",
			source->package_count > 0 ? source->packages[0].host_cpus : 0);
		fprintf(out, "  pkg-wide: the package's whole energy-pkg over each region, "
			"package-wide (RAPL): it includes everything the package ran; regions open "
			"at the same time count the same joules\n");
	}
	if (source->energy_note[0] != '\0')
		fprintf(out, "  energy: %s\n", source->energy_note);
	describe_counters(out, source);
}

void haecer__region_machines(char *out, size_t size, bool *simulated)
{
	size_t used = 0;

	out[0] = '\0';
	*simulated = false;
	pthread_mutex_lock(&source_lock);
	for (const struct region_source *source = sources; source != NULL; source = source->next) {
		int length = snprintf(out + used, size - used, "%s%s", used > 0 ? "; " : "",
				      source->machine);
		if (length < 0 || (size_t)length >= size - used)
			break;
		used += (size_t)length;
		*simulated |= source->simulated;
	}
	pthread_mutex_unlock(&source_lock);
	if (used == 0)
		snprintf(out, size, "no msrd");
}

void haecer__region_describe_sources(FILE *out)
{
	pthread_mutex_lock(&source_lock);
	for (const struct region_source *source = sources; source != NULL; source = source->next)
		describe(out, source);
	if (offline.energy_note[0] != '\0')
		describe(out, &offline);
	pthread_mutex_unlock(&source_lock);
}
