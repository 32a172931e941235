/*
 * libclient/haecer_region.c — region profiling markers (<haecer/region.h>): per-thread stacks of
 * open regions, the process-wide region tree they add to, and the report at exit.
 *
 * A begin is: find (or add) the node under the thread's innermost open region, then read the
 * probe; an end is: read the probe, then add the difference to the node. So the round trip of
 * the begin counts inside the region only after its reading and bookkeeping stays outside.
 * Energy is not a difference but a charge: every reading ends a stretch of each open frame of
 * the thread on the same probe, charged by common/energy_share.h (seed 003 section 4).
 */
#include "libclient/haecer_region_internal.h"

#include "common/energy_share.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct region_frame {
	struct region_node *node;
	struct region_probe probe;
	struct region_values start;
	struct region_values last;      /* the latest reading of its probe in this thread */
	uint64_t charged[REGION_DOMAINS]; /* nJ charged so far, per domain */
	uint32_t charged_have;          /* bit per domain charged at least once */
	bool via_default;               /* begun with haecer_region_begin */
};

struct region_thread {
	struct region_thread *next, *prev; /* the registry, for fork and thread exit */
	bool pinned;                    /* default counters: pinned while a region is open */
	cpu_set_t saved_mask;           /* the mask it had before, given back at depth 0 */
	size_t depth;
	struct region_frame frames[HAECER_REGION_MAX_DEPTH];
};

static pthread_mutex_t region_lock = PTHREAD_MUTEX_INITIALIZER;
static struct region_node root;
static char column_names[REGION_COLUMNS][HAECER_COUNTER_NAME_MAX] = {
	"time", "pkg-wide", "energy-pkg", "energy-cores", "energy-gpu", "energy-ram", "energy-psys"
};
static unsigned column_count = REGION_COLUMN_COUNTERS;
static struct region_thread *threads;
static uint64_t open_regions;
static uint64_t ended_count, reported_count; /* ends so far / when the report was written */
static bool report_at_exit = true;
static bool default_unreachable;

static __thread struct region_thread *self;
static pthread_key_t thread_key;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;

void haecer__region_lock(void)
{
	pthread_mutex_lock(&region_lock);
}

void haecer__region_unlock(void)
{
	pthread_mutex_unlock(&region_lock);
}

const struct region_node *haecer__region_root(void)
{
	return &root;
}

unsigned haecer__region_column_count(void)
{
	return column_count;
}

const char *haecer__region_column_name(unsigned column)
{
	return column < column_count ? column_names[column] : "";
}

int haecer__region_column(const char *name)
{
	int column = -ENOSPC;

	pthread_mutex_lock(&region_lock);
	for (unsigned i = REGION_COLUMN_COUNTERS; i < column_count; i++) {
		if (strcmp(column_names[i], name) == 0) {
			column = (int)i;
			goto out;
		}
	}
	if (column_count < REGION_COLUMNS) {
		snprintf(column_names[column_count], sizeof(column_names[0]), "%s", name);
		column = (int)column_count++;
	}
out:
	pthread_mutex_unlock(&region_lock);
	return column;
}

/* ---- the tree (region_lock held) ---- */

static struct region_node *child_named(struct region_node *parent, const char *name)
{
	struct region_node *child;

	for (child = parent->children; child != NULL; child = child->next)
		if (strcmp(child->name, name) == 0)
			return child;
	child = calloc(1, sizeof(*child));
	if (child == NULL)
		return NULL;
	child->name = strdup(name);
	if (child->name == NULL) {
		free(child);
		return NULL;
	}
	child->parent = parent;
	child->next = parent->children;
	parent->children = child;
	return child;
}

/* The call site of a node's first begin that had one. */
static void place(struct region_node *node, const char *file, unsigned line)
{
	if (node->file != NULL || file == NULL)
		return;
	node->file = strdup(file);
	node->line = line;
}

static void free_children(struct region_node *node)
{
	while (node->children != NULL) {
		struct region_node *child = node->children;
		node->children = child->next;
		free_children(child);
		free(child->name);
		free(child->file);
		free(child);
	}
}

/* Seed 003 section 4 for the stretch from the frame's last reading to `now` (same probe): each
 * domain's energy over the stretch x the thread's CPU time in it / (the stretch x the package's
 * host CPUs). Rounded once per stretch, and every open frame of the thread on that probe gets
 * the same stretches, so a parent is charged exactly the sum of its children and its own. */
static void charge(struct region_frame *frame, const struct region_values *now)
{
	const struct region_values *last = &frame->last;
	double interval = now->host_ns > last->host_ns ? (double)(now->host_ns - last->host_ns) : 0;
	double used = now->thread_ns > last->thread_ns ? (double)(now->thread_ns - last->thread_ns)
						       : 0;

	for (unsigned d = 0; d < REGION_DOMAINS; d++) {
		unsigned column = REGION_COLUMN_SHARE + d;
		if (!(last->have & now->have & (1u << column)) ||
		    now->value[column] < last->value[column])
			continue;
		double joules = (double)(now->value[column] - last->value[column]);
		frame->charged[d] += (uint64_t)llround(energy_share(
			joules, used, interval, frame->probe.package_cpus, used));
		frame->charged_have |= 1u << d;
	}
	frame->last = *now;
}

static bool same_probe(const struct region_probe *a, const struct region_probe *b)
{
	return a->source == b->source && a->cpu == b->cpu;
}

/* A reading of `probe` in this thread ends the current stretch of every open frame on it. */
static void charge_open(struct region_thread *thread, const struct region_probe *probe,
			const struct region_values *now)
{
	for (size_t i = 0; i < thread->depth; i++)
		if (same_probe(&thread->frames[i].probe, probe))
			charge(&thread->frames[i], now);
}

static void add_span(struct region_node *node, const struct haecer_energy_span *span)
{
	node->spanned++;
	node->uncertainty_j += span->uncertainty_joules;
	node->measurement_cpu_ns += span->measurement_cpu_ns;
	node->measurement_j += span->measurement_joules;
	node->measurement_doubt_j += span->measurement_uncertainty_joules;
}

static void add_instance(struct region_node *node, const struct region_frame *frame,
			 const struct region_values *end, const struct haecer_energy_span *span)
{
	const struct region_values *start = &frame->start;
	uint32_t both = start->have & end->have;

	if (span != NULL)
		add_span(node, span);

	for (unsigned d = 0; d < REGION_DOMAINS; d++) {
		unsigned column = REGION_COLUMN_SHARE + d;
		if (!(frame->charged_have & (1u << d)))
			continue;
		node->inclusive[column] += frame->charged[d];
		node->counted[column]++;
		if ((both & (1u << column)) && end->value[column] == start->value[column])
			node->no_update[d]++;
	}
	for (unsigned column = 0; column < REGION_COLUMNS; column++) {
		if (!(both & (1u << column)) ||
		    (column >= REGION_COLUMN_SHARE && column < REGION_COLUMN_COUNTERS))
			continue;
		/* A counter never goes back; a difference below 0 is a counter replaced under
		 * the region (context closed and reopened): nothing is added. */
		if (end->value[column] >= start->value[column]) {
			node->inclusive[column] += end->value[column] - start->value[column];
			node->counted[column]++;
		}
	}
	node->calls++;
}

/* ---- threads, fork and exit ---- */

/* Open regions of an exiting thread are abandoned: they never end. */
static void thread_exit(void *data)
{
	struct region_thread *thread = data;

	pthread_mutex_lock(&region_lock);
	for (size_t i = 0; i < thread->depth; i++) {
		thread->frames[i].node->open--;
		thread->frames[i].node->abandoned++;
		open_regions--;
	}
	if (thread->prev != NULL)
		thread->prev->next = thread->next;
	else
		threads = thread->next;
	if (thread->next != NULL)
		thread->next->prev = thread->prev;
	pthread_mutex_unlock(&region_lock);
	free(thread);
	self = NULL;
}

/* The child of fork() is alone: locks are made anew, the parent's regions and sources are
 * forgotten, and it reports only when it asks to (its exit must not overwrite the parent's
 * report). */
static void forget_in_child(void)
{
	pthread_mutex_init(&region_lock, NULL);
	free_children(&root);
	memset(&root, 0, sizeof(root));
	while (threads != NULL) {
		struct region_thread *thread = threads;
		threads = thread->next;
		if (thread != self)
			free(thread);
	}
	if (self != NULL) {
		self->depth = 0;
		self->next = self->prev = NULL;
		threads = self;
	}
	column_count = REGION_COLUMN_COUNTERS;
	open_regions = ended_count = reported_count = 0;
	report_at_exit = false;
	default_unreachable = false;
	haecer__region_forget_sources();
}

static void report_at_exit_handler(void)
{
	int error;

	pthread_mutex_lock(&region_lock);
	bool due = report_at_exit && ended_count != reported_count;
	pthread_mutex_unlock(&region_lock);
	if (!due)
		return;
	error = haecer_region_report(NULL);
	if (error < 0)
		fprintf(stderr, "haecer regions: the report could not be written: %s\n",
			haecer_error_detail());
}

static void set_up_once(void)
{
	pthread_key_create(&thread_key, thread_exit);
	pthread_atfork(NULL, NULL, forget_in_child);
	atexit(report_at_exit_handler);
}

static struct region_thread *this_thread(void)
{
	struct region_thread *thread = self;

	if (thread != NULL)
		return thread;
	pthread_once(&setup_once, set_up_once);
	thread = calloc(1, sizeof(*thread));
	if (thread == NULL)
		return NULL;
	pthread_mutex_lock(&region_lock);
	thread->next = threads;
	if (threads != NULL)
		threads->prev = thread;
	threads = thread;
	pthread_mutex_unlock(&region_lock);
	pthread_setspecific(thread_key, thread);
	self = thread;
	return thread;
}

/* ---- begin and end ---- */

static int check_name(const char *name)
{
	if (name == NULL || name[0] == '\0')
		return haecer__fail(-EINVAL, "a region needs a name");
	if (strnlen(name, HAECER_REGION_NAME_MAX + 1) > HAECER_REGION_NAME_MAX)
		return haecer__fail(-EINVAL, "region name longer than %u bytes",
				    HAECER_REGION_NAME_MAX);
	return 0;
}

/* The default context, or NULL when msrd cannot be reached: then regions measure time only,
 * and the first failure's reason stays in the report (no reconnect per region). */
static struct haecer_context *default_context(void)
{
	struct haecer_context *ctx = NULL;

	if (__atomic_load_n(&default_unreachable, __ATOMIC_ACQUIRE))
		return NULL;
	if (haecer_default_context(&ctx) < 0) {
		haecer__region_note_unreachable(haecer_error_detail());
		__atomic_store_n(&default_unreachable, true, __ATOMIC_RELEASE);
		haecer__clear_detail();
		return NULL;
	}
	return ctx;
}

static void choose_probe(struct region_thread *thread, struct haecer_context *ctx,
			 struct region_frame *frame)
{
	const struct region_frame *parent =
		thread->depth > 0 ? &thread->frames[thread->depth - 1] : NULL;

	if (parent != NULL && haecer__region_probe_for(&parent->probe, ctx)) {
		frame->probe = parent->probe;
		return;
	}
	haecer__region_probe(ctx, &thread->pinned, &thread->saved_mask, &frame->probe);
}

static int begin(struct haecer_context *ctx, bool via_default, const char *name,
		 const char *file, unsigned line)
{
	struct region_thread *thread;
	struct region_frame *frame;
	struct region_node *parent;
	int error = check_name(name);

	if (error < 0)
		return error;
	thread = this_thread();
	if (thread == NULL)
		return haecer__fail(-ENOMEM, "out of memory for the region stack");
	if (thread->depth == HAECER_REGION_MAX_DEPTH)
		return haecer__fail(-E2BIG, "more than %u regions open in this thread (\"%s\")",
				    HAECER_REGION_MAX_DEPTH, name);
	frame = &thread->frames[thread->depth];
	choose_probe(thread, ctx, frame);
	frame->via_default = via_default;
	parent = thread->depth > 0 ? thread->frames[thread->depth - 1].node : &root;
	pthread_mutex_lock(&region_lock);
	frame->node = child_named(parent, name);
	if (frame->node != NULL) {
		place(frame->node, file, line);
		frame->node->open++;
		open_regions++;
	}
	pthread_mutex_unlock(&region_lock);
	if (frame->node == NULL)
		return haecer__fail(-ENOMEM, "out of memory for region \"%s\"", name);
	haecer__region_read(&frame->probe, &frame->start);
	charge_open(thread, &frame->probe, &frame->start);
	frame->last = frame->start;
	memset(frame->charged, 0, sizeof(frame->charged));
	frame->charged_have = 0;
	thread->depth++;
	return 0;
}

static int check_end(const struct region_thread *thread, const struct haecer_context *ctx,
		     bool via_default, const char *name)
{
	const struct region_frame *frame;

	if (thread == NULL || thread->depth == 0)
		return haecer__fail(-EINVAL, "region \"%s\" ends, but no region is open in this "
				    "thread", name);
	frame = &thread->frames[thread->depth - 1];
	if (strcmp(frame->node->name, name) != 0)
		return haecer__fail(-EINVAL, "region \"%s\" ends, but the innermost open region "
				    "of this thread is \"%s\"", name, frame->node->name);
	if (via_default && !frame->via_default)
		return haecer__fail(-EINVAL, "region \"%s\" was begun with a context: end it with "
				    "haecer_region_end_ctx", name);
	if (!via_default && !haecer__region_probe_for(&frame->probe, ctx))
		return haecer__fail(-EINVAL, "region \"%s\" was begun with another context", name);
	return 0;
}

static int end(struct haecer_context *ctx, bool via_default, const char *name)
{
	struct region_thread *thread = self;
	struct region_values finish;
	struct haecer_energy_span span;
	struct region_frame *frame;
	bool spanned;
	int error = check_name(name);

	if (error < 0)
		return error;
	error = check_end(thread, ctx, via_default, name);
	if (error < 0)
		return error;
	frame = &thread->frames[thread->depth - 1];
	haecer__region_read(&frame->probe, &finish);
	charge_open(thread, &frame->probe, &finish);
	spanned = haecer__region_energy_span(&frame->probe, &frame->start, &finish, &span);
	pthread_mutex_lock(&region_lock);
	add_instance(frame->node, frame, &finish, spanned ? &span : NULL);
	frame->node->open--;
	open_regions--;
	ended_count++;
	pthread_mutex_unlock(&region_lock);
	thread->depth--;
	if (thread->depth == 0 && thread->pinned) {
		haecer__unpin(&thread->saved_mask);
		thread->pinned = false;
	}
	return 0;
}

int haecer_region_begin_at(const char *name, const char *file, unsigned line)
{
	haecer__clear_detail();
	return begin(default_context(), true, name, file, line);
}

/* The function behind the macro's name, for programs built against the header before it was
 * a macro (and for taking its address): no call site. */
int(haecer_region_begin)(const char *name)
{
	return haecer_region_begin_at(name, NULL, 0);
}

int haecer_region_end(const char *name)
{
	haecer__clear_detail();
	return end(NULL, true, name);
}

static int check_context(const struct haecer_context *ctx, const char *name)
{
	if (ctx == NULL)
		return haecer__fail(-EINVAL, "no context for region \"%s\"",
				    name != NULL ? name : "");
	return 0;
}

int haecer_region_begin_ctx_at(struct haecer_context *ctx, const char *name, const char *file,
				unsigned line)
{
	haecer__clear_detail();
	int error = check_context(ctx, name);
	return error < 0 ? error : begin(ctx, false, name, file, line);
}

int(haecer_region_begin_ctx)(struct haecer_context *ctx, const char *name)
{
	return haecer_region_begin_ctx_at(ctx, name, NULL, 0);
}

int haecer_region_end_ctx(struct haecer_context *ctx, const char *name)
{
	haecer__clear_detail();
	int error = check_context(ctx, name);
	return error < 0 ? error : end(ctx, false, name);
}

int haecer_region_reset(void)
{
	int error = 0;

	haecer__clear_detail();
	pthread_mutex_lock(&region_lock);
	if (open_regions > 0) {
		error = haecer__fail(-EBUSY, "%llu regions are open",
				     (unsigned long long)open_regions);
		goto out;
	}
	free_children(&root);
	reported_count = ended_count;
out:
	pthread_mutex_unlock(&region_lock);
	return error;
}

/* ---- the report ---- */

static int open_output(const char *path, const char *suffix, FILE **out)
{
	char name[4096];
	int length = snprintf(name, sizeof(name), "%s%s", path, suffix);

	if (length < 0 || (size_t)length >= sizeof(name))
		return haecer__fail(-ENAMETOOLONG, "report path too long: %s", path);
	*out = fopen(name, "w");
	if (*out == NULL)
		return haecer__fail(-errno, "cannot create %s: %s", name, strerror(errno));
	return 0;
}

static int close_output(FILE *file, const char *path, int error)
{
	if (file == NULL)
		return error;
	if (fclose(file) != 0 && error == 0)
		error = haecer__fail(-EIO, "writing the region report %s failed", path);
	return error;
}

static int write_files(const char *path)
{
	FILE *text = NULL, *callgrind = NULL, *csv = NULL, *json = NULL;
	int error;

	error = open_output(path, "", &text);
	if (error < 0)
		goto out;
	error = open_output(path, ".callgrind", &callgrind);
	if (error < 0)
		goto out;
	error = open_output(path, ".csv", &csv);
	if (error < 0)
		goto out;
	error = open_output(path, ".json", &json);
	if (error < 0)
		goto out;
	error = haecer__region_write(text, callgrind, csv, json);
out:
	error = close_output(json, path, error);
	error = close_output(csv, path, error);
	error = close_output(callgrind, path, error);
	return close_output(text, path, error);
}

int haecer_region_report(const char *path)
{
	uint64_t ended;
	int error = 0;

	haecer__clear_detail();
	pthread_mutex_lock(&region_lock);
	ended = ended_count;
	report_at_exit = true;
	pthread_mutex_unlock(&region_lock);
	if (path == NULL)
		path = getenv(HAECER_REGION_REPORT_ENV);
	if (path == NULL || path[0] == '\0') {
		error = haecer__region_write(stderr, NULL, NULL, NULL);
		fflush(stderr);
	} else if (strcmp(path, "none") != 0) {
		error = write_files(path);
	}
	if (error < 0)
		return error;
	pthread_mutex_lock(&region_lock);
	reported_count = ended;
	pthread_mutex_unlock(&region_lock);
	return 0;
}
