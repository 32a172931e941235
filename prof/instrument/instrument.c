/*
 * libhaecer-instrument.so — the -finstrument-functions runtime (seed 002, CodeCompass): build a
 * program with -finstrument-functions and preload (or link) this library; every function entry
 * and exit becomes a measured region named by dladdr.
 *
 * What a call measures: wall time (CLOCK_MONOTONIC_RAW) and the package energy (msrd's 64-bit
 * total of the PKG domain of the package the thread runs on) from entry to exit, inclusive and
 * exclusive (inclusive less the callees'). Each probe (one clock read and one msrd round trip)
 * costs time and energy itself; both are calibrated once at start (1000 probes) and subtracted
 * per probe inside a call, so a function is charged what it did, not what measuring it cost;
 * the report shows the total probe overhead as a percentage of the run.
 *
 * Environment:
 *   HAECER_INSTRUMENT_INCLUDE  comma-separated fnmatch patterns; only matching functions count
 *   HAECER_INSTRUMENT_EXCLUDE  comma-separated patterns never counted (no probe at all)
 *   HAECER_INSTRUMENT_REPORT   text report path (default haecer-instrument.txt; Callgrind into
 *                              PATH.callgrind); "-" for stderr (text only)
 *   HAECER_SOCKET              msrd
 * RAPL counters move about once a millisecond: a call much shorter than that is charged 0 or
 * a whole update, right only on average over many calls. On msrd's simulated CPU the report
 * says so. Threads share one msrd connection under a lock (a connection serves one thread at a
 * time), so probes of different threads wait for each other.
 */
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "common/clock.h"
#include "hw/msr.h"
#include "hw/rapl_quirks.h"

#define NOINSTR __attribute__((no_instrument_function))
#define TABLE_SIZE 4096u
#define MAX_DEPTH 256u
#define CALIBRATION_PROBES 1000u
#define MAX_PATTERNS 32u

struct function {
	void *address;
	int decision; /* 0 unknown, 1 counted, -1 filtered out */
	char name[128];
	char file[256];
	int line;
	const char *object;
	uint64_t calls;
	double incl_ns, excl_ns, incl_j, excl_j;
};

struct frame {
	struct function *function;
	uint64_t start_ns;
	double start_j;
	double child_ns, child_j;
	uint64_t probes_inside; /* probes of callees, for the compensation */
};

struct thread_stack {
	struct frame frames[MAX_DEPTH];
	unsigned depth;
	unsigned skipped; /* calls deeper than MAX_DEPTH */
};

static struct {
	bool ready;
	bool simulated;
	pthread_mutex_t lock;
	struct haecer_conn *conn;
	Dwfl *dwfl;
	uint32_t package_cpu[HAECER_MAX_CPUS];
	uint16_t cpu_package[HAECER_MAX_CPUS];
	uint32_t cpu_count;
	int exponent;
	double probe_ns, probe_j;
	uint64_t probes;
	uint64_t start_ns;
	struct function table[TABLE_SIZE];
	char *include[MAX_PATTERNS], *exclude[MAX_PATTERNS];
	size_t include_count, exclude_count;
} state = { .lock = PTHREAD_MUTEX_INITIALIZER };

static __thread struct thread_stack *stack;

/* One probe: time and the package energy of the CPU the thread runs on. */
static NOINSTR void probe(uint64_t *time_ns, double *joules)
{
	int cpu = sched_getcpu();
	uint64_t raw, total = 0;

	pthread_mutex_lock(&state.lock);
	uint32_t package = cpu >= 0 && (uint32_t)cpu < state.cpu_count ? state.cpu_package[cpu] : 0;
	haecer_energy_read(state.conn, state.package_cpu[package], MSR_PKG_ENERGY_STATUS, &raw,
			   &total);
	state.probes++;
	pthread_mutex_unlock(&state.lock);
	*joules = (double)total * rapl_unit_code_joules((unsigned)state.exponent);
	*time_ns = clock_monotonic_raw_ns();
}

static NOINSTR void split_patterns(const char *text, char **patterns, size_t *count)
{
	if (!text)
		return;
	char *copy = strdup(text), *saved = NULL;
	for (char *word = strtok_r(copy, ",", &saved); word && *count < MAX_PATTERNS;
	     word = strtok_r(NULL, ",", &saved))
		patterns[(*count)++] = strdup(word);
	free(copy);
}

static NOINSTR bool matches(char *const *patterns, size_t count, const char *name)
{
	for (size_t i = 0; i < count; i++)
		if (fnmatch(patterns[i], name, 0) == 0)
			return true;
	return false;
}

static const Dwfl_Callbacks self_callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
};

/* Names: the symbol table through libdwfl (static functions too, which dladdr does not see),
 * then dladdr's dynamic symbol, then the address; file and first line from the line table. */
static NOINSTR void name_function(struct function *function, void *address, const Dl_info *info)
{
	const char *name = NULL;
	Dwfl_Module *module = state.dwfl ? dwfl_addrmodule(state.dwfl, (Dwarf_Addr)address) : NULL;

	if (!module && state.dwfl) {
		/* loaded after start (dlopen): report the process's modules again */
		dwfl_report_begin_add(state.dwfl);
		dwfl_linux_proc_report(state.dwfl, getpid());
		dwfl_report_end(state.dwfl, NULL, NULL);
		module = dwfl_addrmodule(state.dwfl, (Dwarf_Addr)address);
	}
	if (module) {
		name = dwfl_module_addrname(module, (Dwarf_Addr)address);
		Dwfl_Line *line = dwfl_module_getsrc(module, (Dwarf_Addr)address);
		const char *file = line ? dwfl_lineinfo(line, NULL, &function->line, NULL, NULL, NULL)
					: NULL;
		const char *dir = line ? dwfl_line_comp_dir(line) : NULL;
		if (file && file[0] != '/' && dir)
			snprintf(function->file, sizeof(function->file), "%s/%s", dir, file);
		else if (file)
			snprintf(function->file, sizeof(function->file), "%s", file);
	}
	if (!name && info && info->dli_sname)
		name = info->dli_sname;
	if (name)
		snprintf(function->name, sizeof(function->name), "%s", name);
	else
		snprintf(function->name, sizeof(function->name), "%p", address);
	function->object = info && info->dli_fname ? info->dli_fname : "??";
	if (!function->file[0])
		snprintf(function->file, sizeof(function->file), "%s", function->object);
}

static NOINSTR struct function *function_of(void *address)
{
	size_t slot = ((uintptr_t)address >> 4) & (TABLE_SIZE - 1);

	for (size_t probes = 0; probes < TABLE_SIZE; probes++) {
		struct function *function = &state.table[slot];
		if (function->address == address)
			return function;
		if (!function->address) {
			Dl_info info;
			function->address = address;
			name_function(function, address, dladdr(address, &info) ? &info : NULL);
			bool counted = (state.include_count == 0 ||
					matches(state.include, state.include_count, function->name)) &&
				       !matches(state.exclude, state.exclude_count, function->name);
			function->decision = counted ? 1 : -1;
			return function;
		}
		slot = (slot + 1) & (TABLE_SIZE - 1);
	}
	return NULL;
}

static NOINSTR void calibrate(void)
{
	uint64_t first_ns, last_ns;
	double first_j, last_j;

	probe(&first_ns, &first_j);
	for (unsigned i = 1; i < CALIBRATION_PROBES; i++)
		probe(&last_ns, &last_j);
	state.probe_ns = (double)(last_ns - first_ns) / (CALIBRATION_PROBES - 1);
	state.probe_j = (last_j - first_j) / (CALIBRATION_PROBES - 1);
	state.probes = 0;
}

static NOINSTR __attribute__((constructor)) void instrument_start(void)
{
	struct haecer_machine_info machine;

	if (haecer_connect(NULL, &state.conn) < 0 || haecer_machine_info(state.conn, &machine) < 0) {
		fprintf(stderr, "haecer-instrument: msrd unreachable: nothing is measured\n");
		return;
	}
	state.cpu_count = machine.cpu_count < HAECER_MAX_CPUS ? machine.cpu_count : HAECER_MAX_CPUS;
	memcpy(state.cpu_package, machine.cpu_package, sizeof(state.cpu_package));
	for (uint32_t cpu = state.cpu_count; cpu-- > 0;)
		if (machine.cpu_package[cpu] < HAECER_MAX_CPUS)
			state.package_cpu[machine.cpu_package[cpu]] = cpu;
	state.exponent = machine.rapl_energy_exponent[RAPL_DOMAIN_PKG]
				 ? machine.rapl_energy_exponent[RAPL_DOMAIN_PKG]
				 : (int)RAPL_UNIT_ENERGY(machine.rapl_power_unit);
	state.simulated = machine.flags & HAECER_MACHINE_SIMULATED;
	uint64_t raw, total;
	if (haecer_energy_read(state.conn, state.package_cpu[0], MSR_PKG_ENERGY_STATUS, &raw,
			       &total) < 0) {
		fprintf(stderr, "haecer-instrument: msrd does not let this user read package "
				"energy: %s\n",
			haecer_conn_error(state.conn));
		return;
	}
	state.dwfl = dwfl_begin(&self_callbacks);
	if (state.dwfl) {
		dwfl_report_begin(state.dwfl);
		dwfl_linux_proc_report(state.dwfl, getpid());
		dwfl_report_end(state.dwfl, NULL, NULL);
	}
	split_patterns(getenv("HAECER_INSTRUMENT_INCLUDE"), state.include, &state.include_count);
	split_patterns(getenv("HAECER_INSTRUMENT_EXCLUDE"), state.exclude, &state.exclude_count);
	calibrate();
	state.start_ns = clock_monotonic_raw_ns();
	state.ready = true;
}

NOINSTR void __cyg_profile_func_enter(void *function_address, void *call_site);
NOINSTR void __cyg_profile_func_exit(void *function_address, void *call_site);

NOINSTR void __cyg_profile_func_enter(void *function_address, void *call_site)
{
	(void)call_site;
	if (!state.ready)
		return;
	if (!stack && !(stack = calloc(1, sizeof(*stack))))
		return;
	pthread_mutex_lock(&state.lock);
	struct function *function = function_of(function_address);
	pthread_mutex_unlock(&state.lock);
	if (!function || function->decision < 0)
		return;
	if (stack->depth == MAX_DEPTH) {
		stack->skipped++;
		return;
	}
	struct frame *frame = &stack->frames[stack->depth++];
	*frame = (struct frame){ .function = function };
	probe(&frame->start_ns, &frame->start_j);
}

NOINSTR void __cyg_profile_func_exit(void *function_address, void *call_site)
{
	(void)call_site;
	if (!state.ready || !stack)
		return;
	if (stack->skipped) {
		stack->skipped--;
		return;
	}
	if (stack->depth == 0 || stack->frames[stack->depth - 1].function->address != function_address)
		return; /* a filtered-out function, or unbalanced (longjmp) */
	uint64_t end_ns;
	double end_j;
	probe(&end_ns, &end_j);
	struct frame *frame = &stack->frames[--stack->depth];
	/* Compensation: this call's own two probes (half of each lies inside it) and every probe
	 * its callees made are subtracted, at their calibrated time and energy. */
	double probes = 1.0 + (double)frame->probes_inside;
	double incl_ns = (double)(end_ns - frame->start_ns) - probes * state.probe_ns;
	double incl_j = (end_j - frame->start_j) - probes * state.probe_j;
	if (incl_ns < 0)
		incl_ns = 0;
	if (incl_j < 0)
		incl_j = 0;
	pthread_mutex_lock(&state.lock);
	struct function *function = frame->function;
	function->calls++;
	function->incl_ns += incl_ns;
	function->incl_j += incl_j;
	function->excl_ns += incl_ns - frame->child_ns > 0 ? incl_ns - frame->child_ns : 0;
	function->excl_j += incl_j - frame->child_j > 0 ? incl_j - frame->child_j : 0;
	pthread_mutex_unlock(&state.lock);
	if (stack->depth > 0) {
		struct frame *parent = &stack->frames[stack->depth - 1];
		parent->child_ns += incl_ns;
		parent->child_j += incl_j;
		parent->probes_inside += frame->probes_inside + 2;
	}
}

static NOINSTR void write_text(FILE *out, double run_s)
{
	double overhead_s = (double)state.probes * state.probe_ns / 1e9;

	fprintf(out, "haecer-instrument: -finstrument-functions regions, package energy (PKG)%s\n",
		state.simulated ? "; SIMULATED CPU: energies from a model, not hardware" : "");
	fprintf(out, "probe overhead: %.0f ns and %.3g J per probe (calibrated over %u probes), "
		     "%" PRIu64 " probes = %.3f s, %.2f %% of the run's %.3f s (subtracted)\n",
		state.probe_ns, state.probe_j, CALIBRATION_PROBES, state.probes, overhead_s,
		run_s > 0 ? 100 * overhead_s / run_s : 0, run_s);
	fprintf(out, "%10s %12s %12s %12s %12s  %s\n", "calls", "incl s", "excl s", "incl J",
		"excl J", "function (object)");
	for (size_t i = 0; i < TABLE_SIZE; i++) {
		const struct function *f = &state.table[i];
		if (f->address && f->calls)
			fprintf(out, "%10" PRIu64 " %12.6f %12.6f %12.6f %12.6f  %s (%s)\n", f->calls,
				f->incl_ns / 1e9, f->excl_ns / 1e9, f->incl_j, f->excl_j, f->name,
				f->object);
	}
}

static NOINSTR void write_callgrind(FILE *out)
{
	fprintf(out, "# callgrind format\nversion: 1\ncreator: haecer-instrument\n");
	if (state.simulated)
		fprintf(out, "desc: Simulated CPU: energies from a model, not hardware\n");
	fprintf(out, "positions: line\nevents: ns uJ Calls\n\n");
	for (size_t i = 0; i < TABLE_SIZE; i++) {
		const struct function *f = &state.table[i];
		if (f->address && f->calls)
			fprintf(out, "fl=%s\nfn=%s\n%d %.0f %.0f %" PRIu64 "\n\n", f->file, f->name,
				f->line, f->excl_ns, f->excl_j * 1e6, f->calls);
	}
}

static NOINSTR __attribute__((destructor)) void instrument_stop(void)
{
	if (!state.ready)
		return;
	state.ready = false;
	double run_s = (double)(clock_monotonic_raw_ns() - state.start_ns) / 1e9;
	const char *path = getenv("HAECER_INSTRUMENT_REPORT");
	if (!path || !*path)
		path = "haecer-instrument.txt";
	if (strcmp(path, "-") == 0) {
		write_text(stderr, run_s);
	} else {
		FILE *out = fopen(path, "w");
		char callgrind_path[4096];
		if (out) {
			write_text(out, run_s);
			fclose(out);
		}
		snprintf(callgrind_path, sizeof(callgrind_path), "%s.callgrind", path);
		out = fopen(callgrind_path, "w");
		if (out) {
			write_callgrind(out);
			fclose(out);
		}
	}
	haecer_close(state.conn);
	if (state.dwfl)
		dwfl_end(state.dwfl);
}
