/*
 * <haecer/region.h> — region profiling: mark named regions of a program and get, per region,
 * the time, the energy of every RAPL domain charged to it, and counter deltas spent in it, with
 * call counts, inclusive and exclusive, as a text table, a Callgrind file with the regions'
 * source files and lines (KCachegrind, callgrind_annotate), a CSV table and a JSON document.
 * Included by <haecer/perfmon.h>; link with libhaecer.
 *
 *     haecer_region_begin("solve");
 *     ...                                   // nested regions are children of "solve"
 *     haecer_region_end("solve");
 *
 * What a region measures, from its begin to its end (one msrd round trip each, a batch):
 *   - time: CLOCK_MONOTONIC_RAW; on a simulated CPU its TSC, read in the same batch as the
 *     energy register, so time and energy share one clock (also in msrd's virtual time);
 *   - energy, per RAPL domain the machine has (perf's names: energy-pkg, energy-cores,
 *     energy-gpu, energy-ram, energy-psys; AMD's per-core domain is left out): msrd's 64-bit
 *     totals of the package the thread runs on at its outermost region's begin, charged to the
 *     thread's regions by seed 003 section 4 (CHAPPIE, the rule haecer-prof uses): every begin
 *     and end reads the totals, the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) and
 *     CLOCK_MONOTONIC_RAW; for the stretch between two such readings of a thread, each region
 *     open in it is charged
 *         E x c / (T x N)
 *     E the domain's energy over the stretch, c the thread's CPU time in it, T its length, N
 *     the host CPUs of that package (T x N: the CPU time, busy and idle, the package offered,
 *     as /proc/stat counts its CPUs). Two threads in concurrent regions on one package are so
 *     charged in proportion to their CPU time, and what other processes and idle drew (the
 *     capacity nobody in the regions used) is charged to no region. A stretch's power is its
 *     average: the more markers, the finer the split. On msrd's virtual time (a test mode) the
 *     threads' CPU time does not follow the simulated clock and the charges mean nothing;
 *     The report ends with what every package drew from the first region reading to the
 *     last, per domain, what of it the outermost regions were charged, and the rest (the
 *     program outside its regions, other processes, idle), charged to no region;
 *   - pkg-wide: the package domain's whole energy over the region, as RAPL gives it: it
 *     includes whatever else the package ran, and regions running at the same time in several
 *     threads each count all of it;
 *   - counters: the event counters the context has when it is first used for a region (the ones
 *     the process set up before, e.g. setupArchCounter), read wherever they count; when it has
 *     none, instructions and core cycles on the CPU the thread runs on, opened for it; the
 *     thread is then pinned to that CPU while its outermost region is open, and its own mask
 *     is given back when that region ends (counters count per CPU, not per thread: they
 *     include every thread that runs there). A thread created inside an open region inherits
 *     the one-CPU mask; one created outside never does. A counter the policy refuses is not
 *     counted: the report shows "-".
 * Whatever cannot be measured (msrd unreachable, a domain or counter the policy refuses) is left
 * out; the region still counts calls and time, and the report says why.
 *
 * Regions nest per thread and form a tree: a region begun while another is open in the same
 * thread is its child. Inclusive = from begin to end; exclusive = inclusive minus the inclusive
 * values of the children (exact: every value is an integer — ns, nJ, counts — and children lie
 * inside their parent; a region's energy shares are charged stretch by stretch, and a parent
 * gets the same stretches as its children when both read through the same context). Nested regions of a thread read the counters their outermost open region
 * chose, so the relation holds even if the thread moves.
 *
 * Thread-safe: every thread has its own stack of open regions; regions of different threads
 * with the same path (e.g. "worker" at the top) add up in one row.
 *
 * The report is written at exit (atexit) unless nothing changed since the program wrote it with
 * haecer_region_report(), and goes where $HAECER_REGION_REPORT says:
 *   unset, ""   the text table on stderr
 *   PATH        the text table into PATH, the Callgrind file into PATH.callgrind, a CSV table
 *               into PATH.csv (RFC 4180, one row per region path, integer ns / nJ / counts,
 *               inclusive and self) and a JSON document into PATH.json (the same, with the
 *               machine and whether it is simulated)
 *   "none"      nothing
 * A forked child starts with no regions and writes no report at exit unless it calls
 * haecer_region_report() itself (it would overwrite its parent's).
 *
 * Every function returns 0 or a negative errno value (never sets errno), with the reason in
 * haecer_error_detail():
 *   -EINVAL  NULL or empty name (or longer than HAECER_REGION_NAME_MAX), an end whose name is
 *            not the innermost open region of the calling thread (mismatched or not begun),
 *            a context other than the one the region was begun with;
 *   -E2BIG   more than HAECER_REGION_MAX_DEPTH regions open in one thread;
 *   -EBUSY   haecer_region_reset while a region is open;
 *   -ENOMEM  out of memory; report: the errors of creating and writing the files.
 * A failed begin or end changes nothing.
 */
#ifndef HAECER_REGION_H
#define HAECER_REGION_H

#ifdef __cplusplus
extern "C" {
#endif

struct haecer_context;

#define HAECER_REGION_REPORT_ENV "HAECER_REGION_REPORT"
#define HAECER_REGION_NAME_MAX 128u
#define HAECER_REGION_MAX_DEPTH 64u
/* Counter columns of a report (time and energy come on top). */
#define HAECER_REGION_MAX_COUNTERS 16u

/* Open region `name` in the calling thread, measured through the default context (as the HAECER
 * functions use it). haecer_region_begin is a macro that passes the call site (__FILE__,
 * __LINE__): the first begin of a region with a call site gives its file and line in the
 * reports. The functions of the plain names stay for programs built before (no call site). */
int haecer_region_begin_at(const char *name, const char *file, unsigned line);
int haecer_region_begin(const char *name);
#define haecer_region_begin(name) haecer_region_begin_at((name), __FILE__, __LINE__)

/* Close the calling thread's innermost open region, which must be `name`. */
int haecer_region_end(const char *name);

/* The same through an explicit context: its counters and its msrd connection. A region must be
 * ended with the context it was begun with. */
int haecer_region_begin_ctx_at(struct haecer_context *ctx, const char *name, const char *file,
				unsigned line);
int haecer_region_begin_ctx(struct haecer_context *ctx, const char *name);
#define haecer_region_begin_ctx(ctx, name) \
	haecer_region_begin_ctx_at((ctx), (name), __FILE__, __LINE__)
int haecer_region_end_ctx(struct haecer_context *ctx, const char *name);

/* Write the report now: text into `path`, Callgrind into `path`.callgrind, CSV into
 * `path`.csv, JSON into `path`.json; NULL: where
 * $HAECER_REGION_REPORT says (see above). Regions still open are listed as such and not counted.
 * The report at exit is skipped when no region ended after this call. */
int haecer_region_report(const char *path);

/* Forget every region measured so far (counters opened for regions are kept). -EBUSY when a
 * region is open in any thread. */
int haecer_region_reset(void);

#ifdef __cplusplus
}
#endif

#endif
