/*
 * prof/prof.h — haecer-prof: where the energy of an unmodified program goes, per thread, per
 * function and per call path (private to the tool).
 *
 * record: the program runs under perf_event_open task-clock sampling (one event per CPU,
 * inherited by its threads, each with its mmap ring: the kernel refuses to map an inherited
 * per-task event) while msrd reads every RAPL domain of every package into a ring on a schedule
 * (seed 003's energy samples). Both go, as they are, into one data file; nothing is attributed
 * while the program runs, so the profiler's own work stays small (seed 003 §3: calmness).
 *
 * report: each energy interval of a package is split among the program's samples taken on that
 * package during it, each sample standing for `period` ns of its thread's CPU time there, in
 * proportion to CPU time against the package's capacity (interval × its CPUs); what is left is
 * what other processes and idle drew and is reported as such, never spread over the program.
 */
#ifndef HAECER_PROF_H
#define HAECER_PROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "proto/perf_profile.h"
#include "tools/common/toolopt.h" /* tool_warn: haecer-prof's messages are every tool's */

#define PROF_DEFAULT_FILE "haecer-prof.data"
#define PROF_DEFAULT_HZ 1000u
#define PROF_MAX_HZ 10000u
/* msrd reads the energy every 20 ms while record runs (-E): see prof_record. */
#define PROF_DEFAULT_ENERGY_PERIOD_NS 20000000ull
#define PROF_MAX_DOMAINS 7u      /* enum rapl_domain */
#define PROF_MAX_PACKAGES 16u
#define PROF_MAX_FRAMES 128u

/* ---- the data file: a header, then typed records ---- */

#define PROF_FILE_MAGIC "HAECPRF1"

enum prof_record_type {
	PROF_REC_META = 1,    /* "key=value\n" text */
	PROF_REC_SAMPLE = 2,  /* struct prof_sample + ips[nr] */
	PROF_REC_MMAP = 3,    /* struct prof_mmap + file name */
	PROF_REC_COMM = 4,    /* struct prof_comm */
	PROF_REC_ENERGY = 5,  /* struct prof_energy */
	PROF_REC_CPUSTAT = 6, /* struct prof_cpustat */
	PROF_REC_LOST = 7,    /* uint64_t samples the kernel dropped */
	PROF_REC_TASK_TIME = 8, /* struct prof_task_time: task-clock ns of a thread on a CPU */
	PROF_REC_USER_STACK = 9, /* struct prof_user_stack + stack bytes, for the SAMPLE before it */
};

struct prof_record_head {
	uint32_t type;
	uint32_t size; /* payload bytes after this head */
};

struct prof_sample {
	uint32_t pid, tid;
	uint64_t time_ns; /* CLOCK_MONOTONIC_RAW */
	uint64_t period_ns; /* task-clock ns this sample stands for */
	uint32_t cpu;
	uint32_t nr;      /* user call chain entries that follow, innermost first */
	uint64_t ips[];
};

struct prof_mmap {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	char filename[];
};

struct prof_comm {
	uint32_t pid, tid;
	char comm[16];
};

struct prof_energy {
	uint64_t time_ns;   /* CLOCK_MONOTONIC_RAW, msrd's timestamp of the set */
	uint32_t package;
	uint32_t domain;    /* enum rapl_domain */
	double joules;      /* msrd's 64-bit total in joules */
};

/* The kernel's task clock of one thread on one CPU (PERF_RECORD_READ at its exit, inherit_stat);
 * tid 0: the whole event of that CPU (every thread) read after the program exited. Samples
 * arrive a little less often than every period (the timer re-arms from when it ran, not when
 * it was due), so the report scales each thread's samples on a CPU to its exact time there. */
struct prof_task_time {
	uint32_t pid, tid;
	uint32_t cpu;     /* PROF_TASK_TIME_ALL_CPUS: only from the agent, never in a file */
	uint32_t reserved;
	uint64_t ns;
};

#define PROF_TASK_TIME_ALL_CPUS UINT32_MAX

/* The timer sampler (--sampler timer): libhaecer-prof-agent.so, preloaded, writes SAMPLE, COMM,
 * LOST and TASK_TIME (a thread's total at its end, cpu PROF_TASK_TIME_ALL_CPUS) records, each
 * head + payload in one write of at most PIPE_BUF bytes, into the pipe whose descriptor
 * PROF_AGENT_FD_ENV names; record turns them into the data file's records. */
#define PROF_AGENT_FD_ENV "HAECER_PROF_AGENT_FD"
#define PROF_AGENT_HZ_ENV "HAECER_PROF_AGENT_HZ"
#define PROF_AGENT_SIGNAL_ENV "HAECER_PROF_SIGNAL"
#define PROF_AGENT_LIBRARY_ENV "HAECER_PROF_AGENT"
#define PROF_AGENT_LIBRARY "libhaecer-prof-agent.so"
#define PROF_AGENT_DEFAULT_SIGNAL (SIGRTMAX - 3)

/* --call-graph dwarf: the user registers and a copy of the top of the user stack at a sample
 * (x86-64: perf's AX BX CX DX SI DI BP SP IP R8..R15 order), unwound at report time with the
 * modules' CFI (.eh_frame / .debug_frame), which needs no frame pointers. */
#define PROF_USER_REGS 17u
#define PROF_USER_STACK_BYTES PERF_PROFILE_USER_STACK_BYTES
struct prof_user_stack {
	uint64_t regs[PROF_USER_REGS];
	uint64_t size; /* stack bytes that follow, copied from regs[SP] up */
	unsigned char data[];
};

struct prof_cpustat {
	uint64_t time_ns;
	uint32_t cpu;
	uint32_t reserved;
	uint64_t busy_ticks;  /* /proc/stat user..steal, USER_HZ */
	uint64_t total_ticks;
};

/* Writing. */
struct prof_writer {
	FILE *file;
	int error; /* first -errno */
};
int prof_writer_open(struct prof_writer *writer, const char *path);
void prof_write(struct prof_writer *writer, uint32_t type, const void *a, size_t a_size,
		const void *b, size_t b_size);
int prof_writer_close(struct prof_writer *writer);

/* Reading: the whole file in memory, records walked in order. */
struct prof_data {
	unsigned char *bytes;
	size_t size;
	char *meta;       /* concatenated META text, NUL-terminated */
};
int prof_data_load(const char *path, struct prof_data *data);
void prof_data_free(struct prof_data *data);
/* Next record at *offset: 1 and type/payload/size, 0 at the end, -EBADMSG when torn. */
int prof_data_next(const struct prof_data *data, size_t *offset, uint32_t *type,
		   const void **payload, uint32_t *size);
/* META value of key (a malloc'ed copy) or NULL. */
char *prof_meta_get(const struct prof_data *data, const char *key);

/* ---- record ---- */

enum prof_sampler { PROF_SAMPLER_AUTO, PROF_SAMPLER_PERF, PROF_SAMPLER_TIMER };

struct prof_record_options {
	unsigned hz;
	enum prof_sampler sampler; /* AUTO: perf, the timer agent when perf is refused */
	const char *output;
	const char *socket;   /* NULL: $HAECER_SOCKET / default */
	char *const *command;
	uint64_t energy_period_ns; /* 0: PROF_DEFAULT_ENERGY_PERIOD_NS (never below a sample) */
	bool dwarf_unwind;    /* --call-graph dwarf: copy user stacks for CFI unwinding */
	bool quiet;
};
/* Runs the command and writes the data file; returns the command's exit status (0..255), or
 * 128 + signal, or a negative errno when the profile could not be taken. */
int prof_record(const struct prof_record_options *options);

/* The timer sampler's side in record (prof/timer.c): the agent library is found
 * ($HAECER_PROF_AGENT, beside haecer-prof, or ../lib from it) and a pipe made (open); the
 * forked child puts the agent into its environment (child); the parent keeps the read end
 * (started) and turns what arrives into data-file records (drain, and finish after the exit). */
struct prof_timer;
int prof_timer_open(struct prof_timer **out);
const char *prof_timer_library(const struct prof_timer *timer);
int prof_timer_fd(const struct prof_timer *timer);
void prof_timer_child(struct prof_timer *timer, unsigned hz);
void prof_timer_started(struct prof_timer *timer, pid_t pid);
void prof_timer_drain(struct prof_timer *timer, struct prof_writer *writer);
void prof_timer_finish(struct prof_timer *timer, struct prof_writer *writer);
/* started: the agent spoke (its constructor ran in the program) */
void prof_timer_counts(const struct prof_timer *timer, uint64_t *samples, uint64_t *lost,
		       bool *broken, bool *started);
/* Threads that ended with CPU time but no sample: the timer fires on the kernel's tick, so a
 * thread whose short runs fall between ticks is never seen, and its energy is not the program's
 * in the report. */
void prof_timer_unsampled(const struct prof_timer *timer, uint64_t *threads, uint64_t *cpu_ns);
void prof_timer_close(struct prof_timer *timer);

/* ---- symbols ---- */

struct prof_frame {
	const char *function;  /* interned */
	const char *file;      /* interned, "??" unknown */
	uint32_t line;
	bool inlined;          /* an inlined frame (its caller follows in the chain) */
};
struct prof_symbols;
int prof_symbols_open(const struct prof_data *data, struct prof_symbols **out);
void prof_symbols_close(struct prof_symbols *symbols);
/* The frames at `ip` of process pid, innermost first (inlined frames first, then the function
 * they are inlined into); `return_address` looks up ip - 1. Returns how many (<= max, >= 1). */
size_t prof_symbols_lookup(struct prof_symbols *symbols, uint32_t pid, uint64_t ip,
			   bool return_address, struct prof_frame *frames, size_t max);
/* Unwind a copied user stack with CFI: the return addresses, innermost first (the first is
 * the sampled ip). Returns how many, 0 when it could not (the caller keeps the frame-pointer
 * chain). */
size_t prof_symbols_unwind(struct prof_symbols *symbols, uint32_t pid, uint32_t tid,
			   const struct prof_user_stack *stack, uint64_t *ips, size_t max);
/* Interned string (lives as long as the symbols). */
const char *prof_intern(struct prof_symbols *symbols, const char *text);

/* ---- the profile: attribution and aggregation ---- */

struct prof_path_node {
	const char *function;             /* interned; NULL at the root */
	struct prof_path_node *parent;
	struct prof_path_node *child, *sibling;
	double self_joules;     /* PKG-first domain */
	double total_joules;    /* filled by prof_profile_build */
	uint64_t self_samples;
	uint64_t total_samples;
};

struct prof_function {
	const char *name;
	const char *file;
	uint32_t line;          /* the first line seen of it */
	double self_joules[PROF_MAX_DOMAINS];
	double total_joules[PROF_MAX_DOMAINS];
	uint64_t self_samples, total_samples;
	uint64_t self_ns, total_ns;
	/* self cost per source line */
	uint32_t *lines;
	double *line_joules;
	uint64_t *line_samples;
	size_t line_count, line_cap;
	/* callees: inclusive cost by callee and call-site line */
	struct prof_call *calls;
	size_t call_count, call_cap;
	uint64_t mark; /* recursion guard while charging one sample */
};

struct prof_call {
	size_t callee;  /* index into functions */
	uint32_t line;  /* call site line in the caller */
	uint64_t count; /* samples */
	double joules;
};

struct prof_thread {
	uint32_t pid, tid;
	char comm[16];
	uint64_t samples;
	uint64_t cpu_ns;
	double joules[PROF_MAX_DOMAINS];
};

struct prof_profile {
	/* what the file says */
	char *command;
	char *sim_model;       /* NULL: real hardware */
	char *perf_opened_by;  /* "msrd" (its perf broker) or "haecer-prof"; NULL: unrecorded */
	char *backend;         /* msrd's backend behind the energy ("msr", "sim", ...), NULL:
				* a data file from before it was recorded */
	char *sampler;         /* "perf" or "timer" (the preloaded agent) */
	int timer_signal;      /* the agent's signal, timer sampler only */
	unsigned hz;
	uint32_t domain_mask;
	int primary_domain;    /* the domain whose energy weighs the call paths (PKG first) */
	uint32_t package_count;
	uint64_t start_ns, end_ns;
	uint64_t lost_samples;
	uint64_t samples, attributed_samples, truncated_samples;
	uint64_t unwound_samples;  /* call chains from CFI unwinding (--call-graph dwarf) */
	uint64_t program_ns;
	/* energy */
	double package_joules[PROF_MAX_DOMAINS];  /* measured, every package, over the run */
	double program_joules[PROF_MAX_DOMAINS];  /* charged to the program's samples */
	double other_joules[PROF_MAX_DOMAINS];    /* other processes and idle */
	double other_busy_share;                  /* of the host CPUs' time: others' busy share */
	double idle_share;
	/* results */
	struct prof_thread *threads;
	size_t thread_count;
	struct prof_function *functions;
	size_t function_count;
	struct prof_path_node root;
	struct prof_symbols *symbols;
	char notes[1024];
};

int prof_profile_build(const struct prof_data *data, struct prof_profile *profile);
void prof_profile_free(struct prof_profile *profile);
const char *prof_domain_name(int domain);

/* ---- report ---- */

enum prof_format { PROF_TEXT, PROF_FOLDED, PROF_CALLGRIND, PROF_JSON, PROF_SVG };
int prof_report(const struct prof_profile *profile, enum prof_format format, FILE *out);
int prof_report_svg(const struct prof_profile *profile, FILE *out);

/* ---- calm ---- */

struct prof_calm_options {
	unsigned hz;
	unsigned runs;
	const char *sampler;  /* "perf", "timer", or NULL: record's own choice */
	const char *socket;
	char *const *command;
};
int prof_calm(const struct prof_calm_options *options);

/* The package energy of the whole machine now, in joules: msrd's 64-bit totals of the primary
 * domain (PKG, or AMD's package register) of every package, summed, read in one round trip.
 * 0, or what msrd or the connection said (-EPERM: not granted). */
struct haecer_conn;
struct haecer_machine_info;
int prof_package_joules(struct haecer_conn *conn, const struct haecer_machine_info *machine,
			double *joules);

#endif
