/*
 * <haecer/region.h> — region profiling: mark named regions of a program and get, per region,
 * the time, package energy and counter deltas spent in it, with call counts, inclusive and
 * exclusive, as a text table and a Callgrind file (KCachegrind, callgrind_annotate).
 * Included by <haecer/perfmon.h>; link with libhaecer.
 *
 *     haecer_region_begin("solve");
 *     ...                                   // nested regions are children of "solve"
 *     haecer_region_end("solve");
 *
 * What a region measures, from its begin to its end (one msrd round trip each, a batch):
 *   - time: CLOCK_MONOTONIC_RAW; on a simulated CPU its TSC, read in the same batch as the
 *     energy register, so time and energy share one clock (also in msrd's virtual time);
 *   - package energy: msrd's 64-bit total of the package (AMD: package) energy domain of the
 *     package the thread runs on. RAPL energy is package-wide: it includes whatever else the
 *     package ran, and regions running at the same time in several threads each count all of
 *     it (the report says so);
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
 * inside their parent). Nested regions of a thread read the counters their outermost open region
 * chose, so the relation holds even if the thread moves.
 *
 * Thread-safe: every thread has its own stack of open regions; regions of different threads
 * with the same path (e.g. "worker" at the top) add up in one row.
 *
 * The report is written at exit (atexit) unless nothing changed since the program wrote it with
 * haecer_region_report(), and goes where $HAECER_REGION_REPORT says:
 *   unset, ""   the text table on stderr
 *   PATH        the text table into PATH, the Callgrind file into PATH.callgrind
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
 * functions use it). */
int haecer_region_begin(const char *name);

/* Close the calling thread's innermost open region, which must be `name`. */
int haecer_region_end(const char *name);

/* The same through an explicit context: its counters and its msrd connection. A region must be
 * ended with the context it was begun with. */
int haecer_region_begin_ctx(struct haecer_context *ctx, const char *name);
int haecer_region_end_ctx(struct haecer_context *ctx, const char *name);

/* Write the report now: text into `path`, Callgrind into `path`.callgrind; NULL: where
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
