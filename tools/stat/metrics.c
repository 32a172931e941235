/*
 * tools/stat/metrics.c — what haecer-stat counts: every RAPL domain of the packages in scope
 * (msrd's 64-bit totals, exact however long the command runs) and the events on the CPUs in
 * scope, all in one libhaecer context, read as sets before and after each run.
 */
#include "tools/stat/stat.h"
#include "tools/common/toolopt.h"
#include "common/clock.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hw/vendor.h"

#define DOMAINS 7u

/* The seed's fixed-counter names (FF_counter). */
static const char *const fixed_names[] = { "INST_RETIRED_ANY", "CPU_CLK_UNHALTED_CORE",
					   "CPU_CLK_UNHALTED_REF" };

/* ---- opening ---- */

static bool parse_hex(const char *text, unsigned long max, unsigned long *out)
{
	uint64_t value;

	if (!number_parse(text, 16, max, &value))
		return false;
	*out = (unsigned long)value;
	return true;
}

/* One event on one model CPU, by whichever kind of name it is. perf's software events and
 * PMU events ("context-switches", "msr/tsc/") are the kernel's: msrd's perf broker opens them
 * CPU-wide on the CPU, as haecer-stat counts everything (the policy must grant scope cpu). */
static int open_event(struct haecer_context *ctx, const char *name, uint32_t cpu,
		      struct haecer_counter **out)
{
	struct haecer_perf_spec spec;
	unsigned long number;

	if (haecer_perf_event_by_name(name, &spec) == 0) {
		spec.flags = HAECER_PERF_CPU_WIDE;
		spec.cpu = (int)cpu;
		return haecer_counter_open_perf(ctx, &spec, out);
	}

	/* perf's generic names (with :u / :k), libpfm4's and the architectural ones are the
	 * library's named events. */
	for (unsigned i = 0; i < sizeof(fixed_names) / sizeof(fixed_names[0]); i++)
		if (strcasecmp(name, fixed_names[i]) == 0)
			return haecer_counter_open_fixed(ctx, (int)cpu, i, HAECER_FLAGS_DEFAULT, out);
	if (strncmp(name, "fixed", 5) == 0 && parse_hex(name + 5, 15, &number) &&
	    name[5] >= '0' && name[5] <= '9')
		return haecer_counter_open_fixed(ctx, (int)cpu, (unsigned)number,
						 HAECER_FLAGS_DEFAULT, out);
	if (name[0] == 'r' && parse_hex(name + 1, 0xffff, &number))
		return haecer_counter_open_raw(ctx, (int)cpu, (uint16_t)(number & 0xff),
					       (uint8_t)(number >> 8), HAECER_FLAGS_DEFAULT,
					       HAECER_CMASK_NONE, out);
	return haecer_counter_open_named(ctx, (int)cpu, name, HAECER_FLAGS_DEFAULT,
					 HAECER_CMASK_NONE, out);
}

static int metric_alloc(struct stat_metric *metric, size_t wanted, unsigned runs)
{
	metric->wanted = wanted;
	metric->counters = calloc(wanted, sizeof(*metric->counters));
	metric->units = calloc(wanted, sizeof(*metric->units));
	metric->start = calloc(wanted, sizeof(*metric->start));
	metric->previous = calloc(wanted, sizeof(*metric->previous));
	metric->totals = calloc(wanted, sizeof(*metric->totals));
	metric->interval = calloc(wanted, sizeof(*metric->interval));
	metric->cpus = calloc(wanted, sizeof(*metric->cpus));
	metric->packages = calloc(wanted, sizeof(*metric->packages));
	metric->dies = calloc(wanted, sizeof(*metric->dies));
	metric->samples = calloc(runs, sizeof(*metric->samples));
	metric->marks = calloc(wanted, sizeof(*metric->marks));
	metric->uncertainty = calloc(runs, sizeof(*metric->uncertainty));
	metric->time_start = calloc(wanted, sizeof(*metric->time_start));
	metric->time_previous = calloc(wanted, sizeof(*metric->time_previous));
	if (metric->marks == NULL || metric->uncertainty == NULL || metric->time_start == NULL ||
	    metric->time_previous == NULL)
		return -ENOMEM;
	if (metric->counters == NULL || metric->units == NULL || metric->start == NULL ||
	    metric->previous == NULL || metric->totals == NULL || metric->interval == NULL ||
	    metric->cpus == NULL || metric->packages == NULL || metric->dies == NULL ||
	    metric->samples == NULL)
		return -ENOMEM;
	return 0;
}

/* A refusal on one CPU: the first reason is kept (the others are usually the same). */
static void note_failure(struct stat_metric *metric, int error, const char *where)
{
	if (metric->reason[0] != '\0')
		return;
	snprintf(metric->reason, sizeof(metric->reason), "%s%s%s", where,
		 where[0] != '\0' ? ": " : "", haecer_error_detail()[0] != '\0'
						       ? haecer_error_detail()
						       : haecer_strerror(error));
	metric->state = error == -ENOENT || error == -EOPNOTSUPP ? STAT_NOT_SUPPORTED
								 : STAT_NOT_COUNTED;
}

static void keep_counter(struct stat_metric *metric, const struct haecer_machine_info *machine,
			 struct haecer_counter *counter)
{
	struct haecer_counter_info info;

	haecer_counter_info(counter, &info);
	metric->units[metric->count] = metric->kind == STAT_METRIC_ENERGY ? info.unit : 1.0;
	metric->cpus[metric->count] = info.cpu;
	metric->packages[metric->count] = info.package;
	metric->dies[metric->count] = stat_die_in_package(machine, info.cpu);
	metric->brokered = info.kind == HAECER_COUNTER_PERF;
	metric->counters[metric->count++] = counter;
}

/* After opening: counted when anything opened; a partial set says where it is missing. */
static void settle(struct stat_metric *metric, const char *what)
{
	char partial[STAT_REASON_MAX];

	if (metric->count == 0)
		return;
	if (metric->count < metric->wanted) {
		snprintf(partial, sizeof(partial), "counted on %zu of %zu %s; %.250s", metric->count,
			 metric->wanted, what, metric->reason);
		snprintf(metric->reason, sizeof(metric->reason), "%s", partial);
	}
	metric->state = STAT_COUNTED;
}

uint32_t stat_die_in_package(const struct haecer_machine_info *machine, uint32_t cpu)
{
	uint32_t first = UINT32_MAX;

	if (!(machine->flags & HAECER_MACHINE_DIES) || cpu >= machine->cpu_count)
		return 0;
	for (uint32_t i = 0; i < machine->cpu_count; i++)
		if (machine->cpu_package[i] == machine->cpu_package[cpu] &&
		    machine->cpu_die[i] < first)
			first = machine->cpu_die[i];
	return machine->cpu_die[cpu] - first;
}

/* The first model CPU of each die of a package (energy is read through a CPU of its die:
 * RAPL is die-scope on Intel packages of several dies); one CPU on a package of one die. */
static size_t package_die_cpus(const struct haecer_machine_info *machine, uint32_t package,
			       uint32_t *cpus, size_t max)
{
	bool dies = (machine->flags & HAECER_MACHINE_DIES) != 0;
	size_t count = 0;

	for (uint32_t i = 0; i < machine->cpu_count && count < max; i++) {
		bool seen = false;
		if (machine->cpu_package[i] != package)
			continue;
		for (size_t k = 0; k < count; k++)
			seen = seen || !dies || machine->cpu_die[cpus[k]] == machine->cpu_die[i];
		if (!seen)
			cpus[count++] = i;
	}
	return count;
}

static int open_energy(struct stat_session *session, unsigned domain, unsigned runs)
{
	const struct haecer_machine_info *machine = haecer_context_machine(session->ctx);
	const struct stat_scope *scope = &session->scope;
	struct stat_metric *metric = &session->metrics[session->metric_count++];
	static uint32_t cpus[HAECER_MAX_CPUS];
	size_t wanted = 0;
	char where[64];

	metric->kind = STAT_METRIC_ENERGY;
	snprintf(metric->name, sizeof(metric->name), "%s", haecer_energy_domain_name(domain));
	for (uint32_t i = 0; i < scope->package_count; i++)
		wanted += package_die_cpus(machine, scope->packages[i], cpus, HAECER_MAX_CPUS);
	if (metric_alloc(metric, wanted, runs) < 0)
		return -ENOMEM;
	for (uint32_t i = 0; i < scope->package_count; i++) {
		uint32_t package = scope->packages[i];
		size_t count = package_die_cpus(machine, package, cpus, HAECER_MAX_CPUS);
		for (size_t k = 0; k < count; k++) {
			struct haecer_counter *counter;
			/* A counter on an explicit CPU: the library pins nothing. */
			int error = haecer_counter_open_energy(session->ctx, (int)cpus[k], domain,
							       &counter);
			snprintf(where, sizeof(where), "package %u", package);
			if (error < 0)
				note_failure(metric, error, where);
			else
				keep_counter(metric, machine, counter);
		}
	}
	settle(metric, wanted > scope->package_count ? "dies" : "packages");
	return 0;
}

static int open_events(struct stat_session *session, const char *name, unsigned runs)
{
	const struct stat_scope *scope = &session->scope;
	struct stat_metric *metric = &session->metrics[session->metric_count++];
	char where[64];

	metric->kind = STAT_METRIC_EVENT;
	snprintf(metric->name, sizeof(metric->name), "%s", name);
	if (metric_alloc(metric, scope->cpu_count, runs) < 0)
		return -ENOMEM;
	for (uint32_t i = 0; i < scope->cpu_count; i++) {
		uint32_t cpu = scope->cpus[i];
		struct haecer_counter *counter;
		int error = open_event(session->ctx, name, cpu, &counter);
		where[0] = '\0';
		if (scope->cpu_count > 1)
			snprintf(where, sizeof(where), "CPU %u", cpu);
		if (error < 0)
			note_failure(metric, error, where);
		else
			keep_counter(metric, haecer_context_machine(session->ctx), counter);
	}
	settle(metric, "CPUs");
	return 0;
}

/* ---- scope ---- */

/* "0-3,6": the CPUs of a mask, as /proc's Cpus_allowed_list writes them. */
static void cpu_list_text(const cpu_set_t *set, char *out, size_t size)
{
	size_t used = 0;

	out[0] = '\0';
	for (int cpu = 0; cpu < CPU_SETSIZE && used + 1 < size; cpu++) {
		int last = cpu;
		if (!CPU_ISSET(cpu, set))
			continue;
		while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
			last++;
		used += (size_t)snprintf(out + used, size - used, last > cpu ? "%s%d-%d" : "%s%d",
					 used > 0 ? "," : "", cpu, last);
		cpu = last;
	}
}

/* Add a model CPU (and its package) to the scope once. */
static void scope_add(struct stat_scope *scope, const struct haecer_machine_info *machine,
		      uint32_t cpu, bool *cpu_seen, bool *package_seen)
{
	uint32_t package = machine->cpu_package[cpu];

	if (!cpu_seen[cpu]) {
		cpu_seen[cpu] = true;
		scope->cpus[scope->cpu_count++] = cpu;
	}
	if (package < HAECER_MAX_CPUS && !package_seen[package]) {
		package_seen[package] = true;
		scope->packages[scope->package_count++] = package;
	}
}

static int compare_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int choose_scope(const struct stat_options *options, struct stat_session *session,
			int *status)
{
	const struct haecer_machine_info *machine = haecer_context_machine(session->ctx);
	struct stat_scope *scope = &session->scope;
	bool cpu_seen[HAECER_MAX_CPUS] = { false }, package_seen[HAECER_MAX_CPUS] = { false };
	cpu_set_t allowed;

	scope->all_cpus = options->all_cpus;
	scope->host_cpu = -1;
	snprintf(scope->machine, sizeof(scope->machine),
		 "%s%s (%u CPUs, %u package%s; msrd backend %s)",
		 machine->flags & HAECER_MACHINE_SIMULATED ? "simulated " : "",
		 machine->flags & HAECER_MACHINE_SIMULATED ? machine->sim_model
							   : machine->model_name,
		 machine->cpu_count, machine->package_count,
		 machine->package_count == 1 ? "" : "s", haecer_context_backend(session->ctx));
	if (machine->cpu_count == 0 || machine->cpu_count > HAECER_MAX_CPUS) {
		stat_error("msrd describes a machine of %u CPUs", machine->cpu_count);
		*status = STAT_EXIT_FAILED;
		return -EPROTO;
	}
	if (options->all_cpus) {
		scope->mode = STAT_SCOPE_ALL;
		for (uint32_t cpu = 0; cpu < machine->cpu_count; cpu++)
			scope_add(scope, machine, cpu, cpu_seen, package_seen);
	} else if (options->cpu >= 0) {
		scope->mode = STAT_SCOPE_PINNED;
		scope->host_cpu = options->cpu;
		/* The library's mapping: host CPU i is model CPU i mod the model's CPU count. */
		scope->model_cpu = (uint32_t)scope->host_cpu % machine->cpu_count;
		scope_add(scope, machine, scope->model_cpu, cpu_seen, package_seen);
	} else {
		/* The command inherits this process's mask: count where it may run. */
		scope->mode = STAT_SCOPE_AFFINITY;
		if (sched_getaffinity(0, sizeof(allowed), &allowed) < 0) {
			stat_error("cannot read the CPU mask the command will inherit: %s; use -a "
				   "or --cpu", strerror(errno));
			*status = STAT_EXIT_FAILED;
			return -EOPNOTSUPP;
		}
		cpu_list_text(&allowed, scope->host_cpus, sizeof(scope->host_cpus));
		for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
			if (CPU_ISSET(cpu, &allowed))
				scope_add(scope, machine, (uint32_t)cpu % machine->cpu_count,
					  cpu_seen, package_seen);
		qsort(scope->cpus, scope->cpu_count, sizeof(scope->cpus[0]), compare_u32);
		qsort(scope->packages, scope->package_count, sizeof(scope->packages[0]),
		      compare_u32);
	}
	return 0;
}

/* Every counter in one array, for set reads. */
static int gather(struct stat_session *session)
{
	size_t total = 0;

	for (size_t i = 0; i < session->metric_count; i++)
		total += session->metrics[i].count;
	session->all = calloc(total > 0 ? total : 1, sizeof(*session->all));
	session->values = calloc(total > 0 ? total : 1, sizeof(*session->values));
	session->read_before = calloc(total > 0 ? total : 1, sizeof(*session->read_before));
	session->read_after = calloc(total > 0 ? total : 1, sizeof(*session->read_after));
	if (session->all == NULL || session->values == NULL || session->read_before == NULL ||
	    session->read_after == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < session->metric_count; i++)
		for (size_t j = 0; j < session->metrics[i].count; j++)
			session->all[session->all_count++] = session->metrics[i].counters[j];
	return 0;
}

/* Whether a -e name means an energy domain (perf's power/energy-pkg/ or energy-pkg, or the
 * seed's RAPL_PKG); *domain is -1 when it looks like one but names none. */
static bool energy_name(const char *name, bool amd, int *domain)
{
	*domain = haecer_energy_domain_by_name(name, amd);
	return *domain >= 0 || strncmp(name, "power/", 6) == 0 || strncmp(name, "energy-", 7) == 0;
}

/* A -e energy name this machine cannot count: a metric that says so. */
static void missing_domain(struct stat_session *session, const char *name, int domain)
{
	struct stat_metric *metric = &session->metrics[session->metric_count++];

	metric->kind = STAT_METRIC_ENERGY;
	metric->state = STAT_NOT_SUPPORTED;
	snprintf(metric->name, sizeof(metric->name), "%s", name);
	if (domain < 0)
		snprintf(metric->reason, sizeof(metric->reason), "no energy domain of that name "
			 "(energy-pkg, energy-cores, energy-gpu, energy-ram, energy-psys)");
	else
		snprintf(metric->reason, sizeof(metric->reason), "this CPU has no %s domain",
			 haecer_energy_domain_name((unsigned)domain));
}

static bool domain_wanted(const struct stat_options *options, bool amd, unsigned domain,
			  bool *any_named)
{
	bool wanted = false;
	int named;

	*any_named = false;
	for (size_t i = 0; i < options->event_count; i++) {
		if (!energy_name(options->events[i], amd, &named))
			continue;
		*any_named = true;
		wanted = wanted || named == (int)domain;
	}
	return wanted;
}

static int open_metrics(const struct stat_options *options, struct stat_session *session)
{
	static const char *const default_events[] = { "instructions", "cycles" };
	const struct haecer_machine_info *machine = haecer_context_machine(session->ctx);
	bool amd = cpu_vendor_is_amd(machine->vendor), any_named; /* Hygon too */
	const char *const *events = options->event_count > 0 ? options->events : default_events;
	size_t event_count = options->event_count > 0 ? options->event_count : 2;
	int error = 0, domain;

	session->metrics = calloc(DOMAINS + event_count, sizeof(*session->metrics));
	session->elapsed = calloc(options->runs, sizeof(*session->elapsed));
	session->user = calloc(options->runs, sizeof(*session->user));
	session->sys = calloc(options->runs, sizeof(*session->sys));
	if (session->metrics == NULL || session->elapsed == NULL || session->user == NULL ||
	    session->sys == NULL)
		return -ENOMEM;
	for (unsigned d = 0; d < DOMAINS && error == 0; d++) {
		bool wanted = domain_wanted(options, amd, d, &any_named);
		/* Without energy names in -e every domain is counted, as before. */
		if (!(machine->rapl_domains & (1u << d)) || (any_named && !wanted))
			continue;
		/* Core energy is per core: summing it over CPUs would count SMT siblings twice. */
		if (d == RAPL_AMD_CORE && session->scope.cpu_count > 1)
			continue;
		error = open_energy(session, d, options->runs);
	}
	for (size_t i = 0; i < event_count && error == 0; i++) {
		if (energy_name(events[i], amd, &domain)) {
			if (domain < 0 || !(machine->rapl_domains & (1u << domain)))
				missing_domain(session, events[i], domain);
			continue;
		}
		error = open_events(session, events[i], options->runs);
	}
	return error < 0 ? error : gather(session);
}

/* perf stat refuses to run the command when a named event cannot be counted (exit 129); the
 * default events, which nobody asked for by name, only show "<not counted>". */
static int check_requested(const struct stat_options *options, struct stat_session *session,
			   int *status)
{
	const struct haecer_machine_info *machine = haecer_context_machine(session->ctx);
	bool amd = cpu_vendor_is_amd(machine->vendor), energy_named = false;
	int refused = 0, domain;

	if (options->event_count == 0 || options->skip_unavailable)
		return 0;
	for (size_t i = 0; i < options->event_count; i++)
		energy_named = energy_named || energy_name(options->events[i], amd, &domain);
	for (size_t i = 0; i < session->metric_count; i++) {
		const struct stat_metric *metric = &session->metrics[i];
		if (metric->state == STAT_COUNTED)
			continue;
		/* Energy domains are requests only when -e named some (then only those open). */
		if (metric->kind == STAT_METRIC_ENERGY && !energy_named)
			continue;
		stat_error("cannot count '%s': %s", metric->name, metric->reason);
		refused++;
	}
	if (refused == 0)
		return 0;
	tool_warn("the command was not run; --skip-unavailable counts the "
		  "rest without %s", refused == 1 ? "it" : "them");
	*status = STAT_EXIT_EVENT;
	return -ENOENT;
}

int stat_session_open(const struct stat_options *options, struct stat_session *session,
		      int *status)
{
	int error;

	memset(session, 0, sizeof(*session));
	error = haecer_context_open(options->socket_path, &session->ctx);
	if (error < 0) {
		stat_error("%s", haecer_error_detail());
		*status = STAT_EXIT_FAILED;
		return error;
	}
	/* A command's span is measured between two readings: they must be exact at the moment
	 * they are taken, not up to a sampling period old as energy page readings are. */
	haecer_context_set_energy_exact(session->ctx, true);
	error = choose_scope(options, session, status);
	if (error < 0)
		return error;
	error = open_metrics(options, session);
	if (error < 0) {
		stat_error("out of memory");
		*status = STAT_EXIT_FAILED;
		return error;
	}
	return check_requested(options, session, status);
}

void stat_session_close(struct stat_session *session)
{
	for (size_t i = 0; i < session->metric_count; i++) {
		struct stat_metric *metric = &session->metrics[i];
		free(metric->counters);
		free(metric->units);
		free(metric->start);
		free(metric->previous);
		free(metric->totals);
		free(metric->interval);
		free(metric->cpus);
		free(metric->packages);
		free(metric->dies);
		free(metric->samples);
		free(metric->marks);
		free(metric->uncertainty);
		free(metric->time_start);
		free(metric->time_previous);
	}
	free(session->metrics);
	free(session->all);
	free(session->values);
	free(session->read_before);
	free(session->read_after);
	free(session->elapsed);
	free(session->user);
	free(session->sys);
	/* Closing the context frees every counter (slots back to msrd). */
	haecer_context_close(session->ctx);
	memset(session, 0, sizeof(*session));
}

/* ---- reading ---- */

static int read_all(struct stat_session *session)
{
	for (size_t done = 0; done < session->all_count;) {
		size_t count = session->all_count - done;
		if (count > HAECER_READ_MAX)
			count = HAECER_READ_MAX;
		uint64_t before = clock_monotonic_raw_ns();
		int error = haecer_counter_read_many(session->all + done, count,
						     session->values + done, 0);
		uint64_t after = clock_monotonic_raw_ns();

		for (size_t i = done; i < done + count; i++) {
			session->read_before[i] = before;
			session->read_after[i] = after;
		}
		if (error < 0) {
			snprintf(session->read_error, sizeof(session->read_error),
				 "reading the counters failed: %s", haecer_error_detail());
			return error;
		}
		done += count;
	}
	return 0;
}

/* A brokered event's times as of the latest read (perf stat's percentage of running time);
 * zero for the other counters, which count whenever enabled. */
static struct stat_event_times times_of(const struct stat_metric *metric, size_t counter)
{
	struct stat_event_times times = { 0, 0 };

	if (metric->brokered &&
	    haecer_counter_times(metric->counters[counter], &times.enabled, &times.running) < 0)
		times = (struct stat_event_times){ 0, 0 };
	return times;
}

/* A failed read leaves nothing to trust: every metric becomes "not counted" with the reason. */
static void give_up(struct stat_session *session)
{
	for (size_t i = 0; i < session->metric_count; i++) {
		struct stat_metric *metric = &session->metrics[i];
		if (metric->state != STAT_COUNTED)
			continue;
		metric->state = STAT_NOT_COUNTED;
		snprintf(metric->reason, sizeof(metric->reason), "%s", session->read_error);
	}
}

int stat_metrics_start(struct stat_session *session)
{
	size_t at = 0;
	int error = read_all(session);

	if (error < 0) {
		give_up(session);
		return error;
	}
	for (size_t i = 0; i < session->metric_count; i++)
		for (size_t j = 0; j < session->metrics[i].count; j++, at++) {
			struct stat_metric *metric = &session->metrics[i];
			metric->start[j] = metric->previous[j] = session->values[at];
			metric->time_start[j] = metric->time_previous[j] = times_of(metric, j);
		}
	return stat_energy_marks_start(session);
}

int stat_metrics_interval(struct stat_session *session)
{
	size_t at = 0;
	int error = read_all(session);

	if (error < 0)
		return error;
	for (size_t i = 0; i < session->metric_count; i++) {
		struct stat_metric *metric = &session->metrics[i];
		metric->interval_enabled = metric->interval_running = 0.0;
		for (size_t j = 0; j < metric->count; j++, at++) {
			struct stat_event_times now = times_of(metric, j);
			metric->interval[j] = (double)(session->values[at] - metric->previous[j]) *
					      metric->units[j];
			metric->previous[j] = session->values[at];
			metric->interval_enabled += (double)(now.enabled -
							     metric->time_previous[j].enabled);
			metric->interval_running += (double)(now.running -
							     metric->time_previous[j].running);
			metric->time_previous[j] = now;
		}
	}
	return 0;
}

int stat_metrics_stop(struct stat_session *session)
{
	size_t at = 0;
	int error = read_all(session);

	if (error < 0) {
		give_up(session);
		return error;
	}
	for (size_t i = 0; i < session->metric_count; i++) {
		struct stat_metric *metric = &session->metrics[i];
		double sum = 0.0;
		for (size_t j = 0; j < metric->count; j++, at++) {
			struct stat_event_times now = times_of(metric, j);
			double value = (double)(session->values[at] - metric->start[j]) *
				       metric->units[j];
			metric->time_enabled += (double)(now.enabled - metric->time_start[j].enabled);
			metric->time_running += (double)(now.running - metric->time_start[j].running);
			metric->totals[j] += value;
			sum += value;
		}
		metric->samples[metric->sample_count++] = sum;
	}
	return stat_energy_marks_stop(session);
}
