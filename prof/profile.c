/*
 * prof/profile.c — attribution (seed 003 §4) and aggregation.
 *
 * For every package and every interval between two of msrd's energy sets, each domain's energy
 * E is split over CPU time: the package offers (interval length × its CPUs) of it; every sample
 * of the program taken on one of those CPUs stands for `period` ns of one thread's CPU time
 * (scaled to the thread's exact task clock there), used just before the sample, and is charged
 * E × (its part of the interval) / capacity for each interval that span covers. What the program did not use of the
 * capacity — other processes and idle — keeps its energy and is reported as "other/idle",
 * never spread over the program. (Samples are a systematic 1-in-period sample of each thread's
 * CPU time; when jitter puts more sample time into an interval than it has, the samples of
 * that interval share exactly E.)
 */
#include "prof/prof.h"
#include "tools/common/toolopt.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/energy_share.h"
#include "hw/msr.h"

#define FUNCTION_HASH 4096u
#define TASK_HASH 8192u
#define MAX_HOST_CPUS 1024u

/* Samples against the kernel's exact task clock, per thread and CPU. */
struct task_cpu {
	uint32_t tid, cpu;
	bool used;
	bool exact;
	double sampled_ns, actual_ns;
};

struct series {
	uint64_t *time_ns;
	double *joules[PROF_MAX_DOMAINS];
	size_t count, capacity;
	double *program_ns; /* per interval k (between k-1 and k) */
};

struct builder {
	struct prof_profile *profile;
	struct series packages[PROF_MAX_PACKAGES];
	uint32_t host_package[1024];
	uint32_t host_cpus;
	uint32_t package_cpus[PROF_MAX_PACKAGES];
	size_t function_index[FUNCTION_HASH]; /* index + 1, 0 = empty */
	uint64_t sample_number;
	uint32_t main_tid;
	/* a sample with its call chain replaced by the unwound one */
	uint64_t unwound[(sizeof(struct prof_sample) + 7) / 8 + PROF_MAX_FRAMES];
	struct task_cpu tasks[TASK_HASH];
	double cpu_total_ns[MAX_HOST_CPUS];
	bool scaled_out_of_range;
	/* The timer sampler: every sample carries its thread's exact CPU time since the one
	 * before, so a thread's total only adds what ran after its last sample, however many
	 * samples the tick gave it. */
	bool exact_periods;
};

static struct task_cpu *task_of(struct builder *builder, uint32_t tid, uint32_t cpu)
{
	size_t slot = (size_t)((tid * 2654435761u) ^ (cpu * 40503u)) & (TASK_HASH - 1);

	for (size_t probes = 0; probes < TASK_HASH; probes++) {
		struct task_cpu *task = &builder->tasks[slot];
		if (!task->used) {
			*task = (struct task_cpu){ .tid = tid, .cpu = cpu, .used = true };
			return task;
		}
		if (task->tid == tid && task->cpu == cpu)
			return task;
		slot = (slot + 1) & (TASK_HASH - 1);
	}
	return NULL;
}

/* Threads that exited report their task clock per CPU (PERF_RECORD_READ); the program's main
 * thread does not (its events are the ones we opened), and the kernel does not always deliver
 * an exiting thread's record. Per CPU, what the event's total leaves after the reported threads
 * is shared by the others in proportion to their samples. */
static void settle_task_times(struct builder *builder)
{
	for (uint32_t cpu = 0; cpu < MAX_HOST_CPUS; cpu++) {
		if (builder->cpu_total_ns[cpu] <= 0)
			continue;
		double known = 0, unknown_sampled = 0;
		for (size_t i = 0; i < TASK_HASH; i++) {
			const struct task_cpu *task = &builder->tasks[i];
			if (!task->used || task->cpu != cpu)
				continue;
			if (task->exact)
				known += task->actual_ns;
			else
				unknown_sampled += task->sampled_ns;
		}
		double remaining = builder->cpu_total_ns[cpu] - known;
		if (remaining <= 0 || unknown_sampled <= 0)
			continue;
		for (size_t i = 0; i < TASK_HASH; i++) {
			struct task_cpu *task = &builder->tasks[i];
			if (!task->used || task->cpu != cpu || task->exact)
				continue;
			task->actual_ns = task->sampled_ns * remaining / unknown_sampled;
			task->exact = true;
		}
	}
}

/* The CPU time one sample of tid on cpu stands for: its period scaled so the thread's samples
 * there add up to its exact task clock. On an overloaded host the timer loses many samples (a
 * third and more); a factor beyond 1/2..3 means the records disagree, and the plain period is
 * used, with a note. */
static double sample_ns(struct builder *builder, const struct prof_sample *sample)
{
	struct task_cpu *task = task_of(builder, sample->tid, sample->cpu);

	if (!task || !task->exact || task->sampled_ns <= 0)
		return (double)sample->period_ns;
	double factor = task->actual_ns / task->sampled_ns;
	if (builder->exact_periods && factor >= 1.0)
		return (double)sample->period_ns * factor;
	/* A thread with few samples on a CPU is off by up to a period or two either way. */
	if (task->actual_ns > 3.0 * task->sampled_ns + 2.0 * (double)sample->period_ns ||
	    task->actual_ns < 0.5 * task->sampled_ns - 2.0 * (double)sample->period_ns) {
		builder->scaled_out_of_range = true;
		return (double)sample->period_ns;
	}
	return (double)sample->period_ns * factor;
}

const char *prof_domain_name(int domain)
{
	static const char *const names[] = { "PKG", "PP0", "PP1", "DRAM", "PSYS", "CORE", "PKG" };

	return domain >= 0 && domain < (int)PROF_MAX_DOMAINS ? names[domain] : "?";
}

static int series_add(struct series *series, const struct prof_energy *energy)
{
	/* Sets arrive in order, one record per domain with one timestamp. */
	if (series->count == 0 || series->time_ns[series->count - 1] != energy->time_ns) {
		if (series->count == series->capacity) {
			size_t capacity = series->capacity ? series->capacity * 2 : 1024;
			uint64_t *times = realloc(series->time_ns, capacity * sizeof(*times));
			if (!times)
				return -ENOMEM;
			series->time_ns = times;
			for (unsigned d = 0; d < PROF_MAX_DOMAINS; d++) {
				double *values = realloc(series->joules[d], capacity * sizeof(*values));
				if (!values)
					return -ENOMEM;
				series->joules[d] = values;
			}
			series->capacity = capacity;
		}
		series->time_ns[series->count] = energy->time_ns;
		for (unsigned d = 0; d < PROF_MAX_DOMAINS; d++)
			series->joules[d][series->count] = NAN;
		series->count++;
	}
	if (energy->domain < PROF_MAX_DOMAINS)
		series->joules[energy->domain][series->count - 1] = energy->joules;
	return 0;
}

/* The interval k (1..count-1) with time[k-1] < t <= time[k], or 0 when t is outside. */
static size_t interval_of(const struct series *series, uint64_t time_ns)
{
	size_t low = 1, high = series->count;

	if (series->count < 2 || time_ns <= series->time_ns[0] ||
	    time_ns > series->time_ns[series->count - 1])
		return 0;
	while (low < high) {
		size_t middle = (low + high) / 2;
		if (series->time_ns[middle] < time_ns)
			low = middle + 1;
		else
			high = middle;
	}
	return low;
}

static double interval_joules(const struct series *series, int domain, size_t k)
{
	double delta = series->joules[domain][k] - series->joules[domain][k - 1];

	return isnan(delta) || delta < 0 ? 0.0 : delta;
}

/* A sample stands for the `ns` of CPU time its thread used before its timestamp: that span is
 * laid over the energy intervals it covers. Without joules: add the CPU time to each interval's
 * program time (pass 1). With joules: the sample's share of each interval's energy against the
 * interval's capacity (or its program time, should jitter put more there than it has). Returns
 * whether any part of the span lay inside the intervals. */
static bool spread(const struct builder *builder, struct series *series, uint32_t package,
		   uint64_t end_ns, double ns, double *joules)
{
	size_t k = interval_of(series, end_ns);
	double cpus = builder->package_cpus[package] ? builder->package_cpus[package] : 1;
	double left = ns, cursor = (double)end_ns;
	bool inside = k != 0;

	while (k >= 1 && left > 0) {
		double start = (double)series->time_ns[k - 1];
		double overlap = cursor - start < left ? cursor - start : left;
		if (!joules) {
			series->program_ns[k] += overlap;
		} else {
			double interval = (double)series->time_ns[k] - start;
			for (unsigned d = 0; d < PROF_MAX_DOMAINS; d++)
				joules[d] += energy_share(interval_joules(series, (int)d, k), overlap,
							  interval, cpus, series->program_ns[k]);
		}
		left -= overlap;
		cursor = start;
		k--;
	}
	return inside;
}

static struct prof_thread *thread_of(struct prof_profile *profile, uint32_t pid, uint32_t tid)
{
	for (size_t i = 0; i < profile->thread_count; i++)
		if (profile->threads[i].tid == tid)
			return &profile->threads[i];
	struct prof_thread *grown = realloc(profile->threads,
					    (profile->thread_count + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	profile->threads = grown;
	struct prof_thread *thread = &profile->threads[profile->thread_count++];
	memset(thread, 0, sizeof(*thread));
	thread->pid = pid;
	thread->tid = tid;
	return thread;
}

static struct prof_function *function_of(struct builder *builder, const struct prof_frame *frame)
{
	struct prof_profile *profile = builder->profile;
	size_t slot = ((uintptr_t)frame->function >> 4) & (FUNCTION_HASH - 1);

	for (size_t probes = 0; probes < FUNCTION_HASH; probes++) {
		size_t index = builder->function_index[slot];
		if (index == 0)
			break;
		if (profile->functions[index - 1].name == frame->function)
			return &profile->functions[index - 1];
		slot = (slot + 1) & (FUNCTION_HASH - 1);
	}
	if (profile->function_count >= FUNCTION_HASH / 2)
		return NULL; /* counted in the notes as unresolved */
	struct prof_function *grown = realloc(profile->functions,
					      (profile->function_count + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	profile->functions = grown;
	struct prof_function *function = &profile->functions[profile->function_count++];
	memset(function, 0, sizeof(*function));
	function->name = frame->function;
	function->file = frame->file;
	function->line = frame->line;
	builder->function_index[slot] = profile->function_count;
	return function;
}

static void add_line(struct prof_function *function, uint32_t line, double joules)
{
	for (size_t i = 0; i < function->line_count; i++) {
		if (function->lines[i] == line) {
			function->line_joules[i] += joules;
			function->line_samples[i]++;
			return;
		}
	}
	if (function->line_count == function->line_cap) {
		size_t cap = function->line_cap ? function->line_cap * 2 : 8;
		uint32_t *lines = realloc(function->lines, cap * sizeof(*lines));
		if (!lines)
			return;
		function->lines = lines;
		double *values = realloc(function->line_joules, cap * sizeof(*values));
		if (!values)
			return;
		function->line_joules = values;
		uint64_t *counts = realloc(function->line_samples, cap * sizeof(*counts));
		if (!counts)
			return;
		function->line_samples = counts;
		function->line_cap = cap;
	}
	function->lines[function->line_count] = line;
	function->line_joules[function->line_count] = joules;
	function->line_samples[function->line_count++] = 1;
}

static void add_call(struct prof_profile *profile, struct prof_function *caller,
		     const struct prof_function *callee, uint32_t line, double joules)
{
	size_t callee_index = (size_t)(callee - profile->functions);

	for (size_t i = 0; i < caller->call_count; i++) {
		struct prof_call *call = &caller->calls[i];
		if (call->callee == callee_index && call->line == line) {
			call->count++;
			call->joules += joules;
			return;
		}
	}
	if (caller->call_count == caller->call_cap) {
		size_t cap = caller->call_cap ? caller->call_cap * 2 : 4;
		struct prof_call *calls = realloc(caller->calls, cap * sizeof(*calls));
		if (!calls)
			return;
		caller->calls = calls;
		caller->call_cap = cap;
	}
	caller->calls[caller->call_count++] = (struct prof_call){
		.callee = callee_index, .line = line, .count = 1, .joules = joules };
}

static struct prof_path_node *child_of(struct prof_path_node *parent, const char *function)
{
	for (struct prof_path_node *child = parent->child; child; child = child->sibling)
		if (child->function == function)
			return child;
	struct prof_path_node *child = calloc(1, sizeof(*child));
	if (!child)
		return NULL;
	child->function = function;
	child->parent = parent;
	child->sibling = parent->child;
	parent->child = child;
	return child;
}

static bool is_chain_root(const char *name)
{
	static const char *const roots[] = { "_start", "__libc_start_main", "__libc_start_call_main",
					     "start_thread", "clone", "clone3", "__clone",
					     "__clone3", "__clone_internal" };

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++)
		if (strcmp(name, roots[i]) == 0)
			return true;
	return false;
}

/* Charge one sample: its frames, root first, get `joules` (per domain). */
static void charge(struct builder *builder, const struct prof_sample *sample, uint64_t ns,
		   const double *joules)
{
	struct prof_profile *profile = builder->profile;
	struct prof_frame frames[PROF_MAX_FRAMES * 2];
	size_t count = 0;
	int primary = profile->primary_domain;

	/* Innermost first, as perf gives them; each address may expand to inlined frames. */
	for (uint32_t i = 0; i < sample->nr && count < PROF_MAX_FRAMES * 2; i++)
		count += prof_symbols_lookup(profile->symbols, sample->pid, sample->ips[i], i > 0,
					     frames + count, PROF_MAX_FRAMES * 2 - count);
	if (count == 0)
		return;
	if (sample->nr >= PROF_MAX_FRAMES || !is_chain_root(frames[count - 1].function))
		profile->truncated_samples++;

	builder->sample_number++;
	struct prof_path_node *node = &profile->root;
	size_t outer = SIZE_MAX; /* an index: functions may move as they grow */
	uint32_t outer_line = 0;
	for (size_t i = count; i-- > 0;) {
		struct prof_function *function = function_of(builder, &frames[i]);
		if (node)
			node = child_of(node, frames[i].function);
		if (!function)
			continue;
		if (function->mark != builder->sample_number) {
			function->mark = builder->sample_number;
			for (unsigned d = 0; d < PROF_MAX_DOMAINS; d++)
				function->total_joules[d] += joules[d];
			function->total_samples++;
			function->total_ns += ns;
		}
		if (outer != SIZE_MAX)
			add_call(profile, &profile->functions[outer], function, outer_line,
				 joules[primary]);
		outer = (size_t)(function - profile->functions);
		outer_line = frames[i].line;
		if (i == 0) {
			for (unsigned d = 0; d < PROF_MAX_DOMAINS; d++)
				function->self_joules[d] += joules[d];
			function->self_samples++;
			function->self_ns += ns;
			add_line(function, frames[i].line, joules[primary]);
		}
	}
	if (node) {
		node->self_joules += joules[primary];
		node->self_samples++;
	}
}

static double sum_totals(struct prof_path_node *node, uint64_t *samples)
{
	double total = node->self_joules;
	uint64_t count = node->self_samples;

	for (struct prof_path_node *child = node->child; child; child = child->sibling) {
		uint64_t child_samples = 0;
		total += sum_totals(child, &child_samples);
		count += child_samples;
	}
	node->total_joules = total;
	node->total_samples = count;
	*samples = count;
	return total;
}

/* A number of the data file's meta, by the tools' one rule; 0 when absent or malformed. */
static uint64_t meta_number(const struct prof_data *data, const char *key, int base, uint64_t max)
{
	char *text = prof_meta_get(data, key);
	uint64_t value = 0;

	if (text != NULL && !number_parse(text, base, max, &value))
		value = 0;
	free(text);
	return value;
}

static void read_meta(struct builder *builder, const struct prof_data *data)
{
	struct prof_profile *profile = builder->profile;
	char *text;

	profile->command = prof_meta_get(data, "command");
	profile->sim_model = prof_meta_get(data, "sim_model");
	profile->backend = prof_meta_get(data, "backend");
	profile->perf_opened_by = prof_meta_get(data, "perf_opened_by");
	profile->sampler = prof_meta_get(data, "sampler");
	builder->exact_periods = profile->sampler && strcmp(profile->sampler, "timer") == 0;
	profile->timer_signal = (int)meta_number(data, "timer_signal", 10, INT_MAX);
	if ((text = prof_meta_get(data, "timer_note")))
		snprintf(profile->notes, sizeof(profile->notes), "%s; ", text);
	free(text);
	if ((text = prof_meta_get(data, "kernel_time")) && strcmp(text, "unsampled") == 0) {
		size_t used = strlen(profile->notes);
		snprintf(profile->notes + used, sizeof(profile->notes) - used,
			 "perf sampled user mode only (perf_event_paranoid): each thread's kernel "
			 "time, its start and exit included, is spread over its samples; ");
	}
	free(text);
	profile->hz = (unsigned)meta_number(data, "frequency_hz", 10, UINT_MAX);
	profile->domain_mask = (uint32_t)meta_number(data, "domains", 0, UINT32_MAX);
	profile->package_count = (uint32_t)meta_number(data, "packages", 10, UINT32_MAX);
	profile->start_ns = meta_number(data, "start_ns", 10, UINT64_MAX);
	profile->end_ns = meta_number(data, "end_ns", 10, UINT64_MAX);
	builder->main_tid = (uint32_t)meta_number(data, "pid", 10, UINT32_MAX);
	profile->lost_samples = meta_number(data, "lost_samples", 10, UINT64_MAX);
	if ((text = prof_meta_get(data, "host_cpu_packages"))) {
		char *cursor = text;
		while (*cursor && builder->host_cpus < 1024) {
			char *end;
			unsigned long package = strtoul(cursor, &end, 10);
			if (end == cursor)
				break;
			builder->host_package[builder->host_cpus++] =
				package < PROF_MAX_PACKAGES ? (uint32_t)package : 0;
			cursor = *end == ',' ? end + 1 : end;
		}
	}
	free(text);
	if (profile->package_count == 0 || profile->package_count > PROF_MAX_PACKAGES)
		profile->package_count = 1;
	profile->primary_domain = -1;
	static const int preference[] = { RAPL_DOMAIN_PKG, RAPL_DOMAIN_AMD_PKG, RAPL_DOMAIN_PSYS,
					  RAPL_DOMAIN_PP0, RAPL_DOMAIN_DRAM, RAPL_DOMAIN_PP1 };
	for (size_t i = 0; i < sizeof(preference) / sizeof(preference[0]); i++) {
		if (profile->domain_mask & (1u << preference[i])) {
			profile->primary_domain = preference[i];
			break;
		}
	}
	if (profile->primary_domain < 0)
		profile->primary_domain = RAPL_DOMAIN_PKG;
	for (uint32_t cpu = 0; cpu < builder->host_cpus; cpu++)
		builder->package_cpus[builder->host_package[cpu]]++;
}

/* Other processes' and idle's shares of the host CPUs' time, from /proc/stat at start and end. */
static void cpu_shares(struct builder *builder, const struct prof_data *data)
{
	struct prof_profile *profile = builder->profile;
	uint64_t busy[2] = { 0 }, total[2] = { 0 }, first_time = 0;
	size_t offset = 8;
	uint32_t type, size;
	const void *payload;

	while (prof_data_next(data, &offset, &type, &payload, &size) > 0) {
		if (type != PROF_REC_CPUSTAT || size < sizeof(struct prof_cpustat))
			continue;
		const struct prof_cpustat *stat = payload;
		if (first_time == 0)
			first_time = stat->time_ns;
		int which = stat->time_ns == first_time ? 0 : 1;
		busy[which] += stat->busy_ticks;
		total[which] += stat->total_ticks;
	}
	if (total[1] <= total[0])
		return;
	double ns_per_tick = 1e9 / (double)sysconf(_SC_CLK_TCK);
	double all_ns = (double)(total[1] - total[0]) * ns_per_tick;
	double busy_ns = (double)(busy[1] - busy[0]) * ns_per_tick;
	double others = busy_ns - (double)profile->program_ns;
	profile->other_busy_share = others > 0 ? others / all_ns : 0.0;
	profile->idle_share = 1.0 - busy_ns / all_ns;
	if (profile->idle_share < 0)
		profile->idle_share = 0;
}

int prof_profile_build(const struct prof_data *data, struct prof_profile *profile)
{
	struct builder *builder = calloc(1, sizeof(*builder));
	size_t offset = 8;
	uint32_t type, size;
	const void *payload;
	int error = 0, more;

	memset(profile, 0, sizeof(*profile));
	if (!builder)
		return -ENOMEM;
	builder->profile = profile;
	read_meta(builder, data);
	error = prof_symbols_open(data, &profile->symbols);
	if (error < 0)
		goto out;

	/* Pass 1: energy series, threads' names, each interval's program CPU time. */
	while ((more = prof_data_next(data, &offset, &type, &payload, &size)) > 0) {
		if (type == PROF_REC_ENERGY && size >= sizeof(struct prof_energy)) {
			const struct prof_energy *energy = payload;
			if (energy->package < PROF_MAX_PACKAGES &&
			    (error = series_add(&builder->packages[energy->package], energy)) < 0)
				goto out;
		} else if (type == PROF_REC_TASK_TIME && size >= sizeof(struct prof_task_time)) {
			const struct prof_task_time *time = payload;
			if (time->tid == 0 && time->cpu < MAX_HOST_CPUS) {
				builder->cpu_total_ns[time->cpu] = (double)time->ns;
			} else if (time->tid != 0) {
				struct task_cpu *task = task_of(builder, time->tid, time->cpu);
				if (task) {
					task->actual_ns += (double)time->ns;
					task->exact = true;
				}
			}
		} else if (type == PROF_REC_SAMPLE && size >= sizeof(struct prof_sample)) {
			const struct prof_sample *sample = payload;
			struct task_cpu *task = task_of(builder, sample->tid, sample->cpu);
			if (task)
				task->sampled_ns += (double)sample->period_ns;
		} else if (type == PROF_REC_COMM && size >= sizeof(struct prof_comm)) {
			const struct prof_comm *comm = payload;
			struct prof_thread *thread = thread_of(profile, comm->pid, comm->tid);
			if (thread) {
				memcpy(thread->comm, comm->comm, sizeof(thread->comm));
				thread->comm[sizeof(thread->comm) - 1] = '\0';
			}
		}
	}
	if (more < 0) {
		error = more;
		goto out;
	}
	settle_task_times(builder);
	for (uint32_t p = 0; p < PROF_MAX_PACKAGES; p++) {
		struct series *series = &builder->packages[p];
		if (series->count == 0)
			continue;
		series->program_ns = calloc(series->count, sizeof(double));
		if (!series->program_ns) {
			error = -ENOMEM;
			goto out;
		}
		for (unsigned d = 0; d < PROF_MAX_DOMAINS; d++)
			for (size_t k = 1; k < series->count; k++)
				profile->package_joules[d] += interval_joules(series, (int)d, k);
	}
	offset = 8;
	while (prof_data_next(data, &offset, &type, &payload, &size) > 0) {
		if (type != PROF_REC_SAMPLE || size < sizeof(struct prof_sample))
			continue;
		const struct prof_sample *sample = payload;
		uint32_t package = sample->cpu < builder->host_cpus ? builder->host_package[sample->cpu]
								  : 0;
		spread(builder, &builder->packages[package], package, sample->time_ns,
		       sample_ns(builder, sample), NULL);
	}

	/* Pass 2: charge each sample its part of its interval's energy. */
	offset = 8;
	while (prof_data_next(data, &offset, &type, &payload, &size) > 0) {
		if (type != PROF_REC_SAMPLE || size < sizeof(struct prof_sample))
			continue;
		const struct prof_sample *sample = payload;
		if (sample->nr > (size - sizeof(*sample)) / 8)
			continue;
		/* --call-graph dwarf: the user stack copied with the sample follows it */
		size_t peek = offset;
		uint32_t next_type, next_size;
		const void *next;
		if (prof_data_next(data, &peek, &next_type, &next, &next_size) > 0 &&
		    next_type == PROF_REC_USER_STACK && next_size >= sizeof(struct prof_user_stack)) {
			const struct prof_user_stack *stack = next;
			if (stack->size <= next_size - sizeof(*stack)) {
				struct prof_sample *copy = (struct prof_sample *)builder->unwound;
				*copy = *sample;
				size_t count = prof_symbols_unwind(profile->symbols, sample->pid,
								   sample->tid, stack, copy->ips,
								   PROF_MAX_FRAMES);
				if (count > 0) {
					copy->nr = (uint32_t)count;
					sample = copy;
					profile->unwound_samples++;
				}
			}
		}
		double joules[PROF_MAX_DOMAINS] = { 0 };
		uint32_t package = sample->cpu < builder->host_cpus ? builder->host_package[sample->cpu]
								  : 0;
		double ns = sample_ns(builder, sample);
		profile->samples++;
		profile->program_ns += (uint64_t)ns;
		if (spread(builder, &builder->packages[package], package, sample->time_ns, ns,
			   joules)) {
			for (unsigned d = 0; d < PROF_MAX_DOMAINS; d++)
				profile->program_joules[d] += joules[d];
			profile->attributed_samples++;
		}
		struct prof_thread *thread = thread_of(profile, sample->pid, sample->tid);
		if (thread) {
			thread->samples++;
			thread->cpu_ns += (uint64_t)ns;
			for (unsigned d = 0; d < PROF_MAX_DOMAINS; d++)
				thread->joules[d] += joules[d];
		}
		charge(builder, sample, (uint64_t)ns, joules);
	}
	for (unsigned d = 0; d < PROF_MAX_DOMAINS; d++) {
		profile->other_joules[d] = profile->package_joules[d] - profile->program_joules[d];
		if (profile->other_joules[d] < 0)
			profile->other_joules[d] = 0;
	}
	uint64_t ignored;
	sum_totals(&profile->root, &ignored);
	cpu_shares(builder, data);
	if (profile->samples > profile->attributed_samples)
		snprintf(profile->notes + strlen(profile->notes),
			 sizeof(profile->notes) - strlen(profile->notes),
			 "%llu samples fell outside the energy intervals and carry no energy; ",
			 (unsigned long long)(profile->samples - profile->attributed_samples));
	if (builder->scaled_out_of_range) {
		size_t used = strlen(profile->notes);
		snprintf(profile->notes + used, sizeof(profile->notes) - used,
			 "some threads' samples disagree with their task clock by a factor over 2: "
			 "their samples count one period each");
	}
out:
	for (uint32_t p = 0; p < PROF_MAX_PACKAGES; p++) {
		free(builder->packages[p].time_ns);
		free(builder->packages[p].program_ns);
		for (unsigned d = 0; d < PROF_MAX_DOMAINS; d++)
			free(builder->packages[p].joules[d]);
	}
	free(builder);
	if (error < 0)
		prof_profile_free(profile);
	return error;
}

static void free_nodes(struct prof_path_node *node)
{
	struct prof_path_node *child = node->child;

	while (child) {
		struct prof_path_node *next = child->sibling;
		free_nodes(child);
		free(child);
		child = next;
	}
	node->child = NULL;
}

void prof_profile_free(struct prof_profile *profile)
{
	free(profile->command);
	free(profile->sim_model);
	free(profile->backend);
	free(profile->perf_opened_by);
	free(profile->sampler);
	free(profile->threads);
	for (size_t i = 0; i < profile->function_count; i++) {
		free(profile->functions[i].lines);
		free(profile->functions[i].line_joules);
		free(profile->functions[i].line_samples);
		free(profile->functions[i].calls);
	}
	free(profile->functions);
	free_nodes(&profile->root);
	prof_symbols_close(profile->symbols);
	memset(profile, 0, sizeof(*profile));
}
