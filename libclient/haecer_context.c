/*
 * libclient/haecer_context.c — contexts (one msrd connection, the machine, its event database),
 * the default context of the HAECER API, error texts, CPU mapping and the counter pool.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static __thread char detail[HAECER_DETAIL_SIZE];

static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static struct haecer_context *default_ctx;

/* Counter structures are pooled for the life of the process (see haecer_internal.h). */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct haecer_counter *pool;
static uint32_t next_counter_id = 1;

/* ---- errors ---- */

const char *haecer_strerror(int error)
{
	switch (error) {
	case 0:
		return "success";
	case -EOPNOTSUPP:
		return "not available on this CPU or from this msrd";
	case -ENOENT:
		return "no such event, name or file";
	case -EINVAL:
		return "invalid argument, flags or counter mask";
	case -EBUSY:
		return "counter held by another msrd client";
	case -ENOSPC:
		return "no free counter, or an msrd limit reached";
	case -EBADF:
		return "invalid, failed or freed counter";
	case -ETIMEDOUT:
		return "the energy register did not update";
	case -EEXIST:
		return "counter already attached to a ring";
	case -ENOMEM:
		return "out of memory";
	case -ECONNREFUSED:
		return "msrd is not running (connection refused)";
	case -ENOTCONN:
		return "msrd is not reachable (no socket at that path)";
	default:
		return haecer_msrd_strerror(error);
	}
}

const char *haecer_error_detail(void)
{
	return detail;
}

char *haecer__detail_buffer(void)
{
	return detail;
}

void haecer__clear_detail(void)
{
	detail[0] = '\0';
}

int haecer__fail(int error, const char *format, ...)
{
	va_list arguments;

	va_start(arguments, format);
	vsnprintf(detail, sizeof(detail), format, arguments);
	va_end(arguments);
	return error;
}

int haecer__fail_msrd(struct haecer_context *ctx, int error, const char *what)
{
	const char *text = haecer_conn_error(ctx->conn);

	if (text[0] == '\0')
		text = haecer_strerror(error);
	return haecer__fail(error, "%s: %s", what, text);
}

/* ---- contexts ---- */

static void machine_for_event_db(const struct haecer_machine_info *info,
				 struct event_machine *machine)
{
	memset(machine, 0, sizeof(*machine));
	memcpy(machine->vendor, info->vendor, sizeof(machine->vendor));
	machine->vendor[sizeof(machine->vendor) - 1] = '\0';
	machine->family = info->family;
	machine->model = info->model;
	machine->stepping = info->stepping;
	memcpy(machine->cpuid_0a, info->cpuid_0a, sizeof(machine->cpuid_0a));
	machine->rapl_domains = info->rapl_domains;
	machine->rapl_power_unit = info->rapl_power_unit;
	memcpy(machine->rapl_energy_exponent, info->rapl_energy_exponent,
	       sizeof(machine->rapl_energy_exponent));
	memcpy(machine->sim_model, info->sim_model, sizeof(machine->sim_model));
	machine->sim_model[sizeof(machine->sim_model) - 1] = '\0';
	memcpy(machine->model_name, info->model_name, sizeof(machine->model_name));
	machine->model_name[sizeof(machine->model_name) - 1] = '\0';
	machine->virtual_machine = (info->flags & HAECER_MACHINE_VIRTUAL) != 0;
}

static const char *socket_path_of(const char *path)
{
	if (path == NULL)
		path = getenv(HAECER_SOCKET_ENV);
	if (path == NULL || path[0] == '\0')
		path = HAECER_DEFAULT_SOCKET;
	return path;
}

static int learn_machine(struct haecer_context *ctx)
{
	struct event_machine machine;
	int error;

	error = haecer_machine_info(ctx->conn, &ctx->machine);
	if (error < 0)
		return haecer__fail_msrd(ctx, error, "msrd's machine description");
	if (ctx->machine.cpu_count == 0 || ctx->machine.cpu_count > HAECER_MAX_CPUS)
		return haecer__fail(-EPROTO, "msrd describes a machine of %u CPUs",
				    ctx->machine.cpu_count);
	machine_for_event_db(&ctx->machine, &machine);
	if (ctx->machine.flags & HAECER_MACHINE_HYBRID)
		machine.core_type = HAECER_CORE_TYPE_CORE;
	error = event_db_open(&machine, &ctx->db);
	if (error == 0 && (ctx->machine.flags & HAECER_MACHINE_HYBRID)) {
		machine.core_type = HAECER_CORE_TYPE_ATOM;
		error = event_db_open(&machine, &ctx->db_atom);
	}
	if (error < 0)
		return haecer__fail(error, "event database: %s", event_db_strerror(error));
	ctx->simulated = (ctx->machine.flags & HAECER_MACHINE_SIMULATED) != 0;
	ctx->energy_totals = (haecer_server_info(ctx->conn)->features & HAECER_FEATURE_ENERGY) != 0;
	haecer__rdpmc_detect(ctx);
	return 0;
}

int haecer_context_open(const char *socket_path, struct haecer_context **out)
{
	struct haecer_context *ctx;
	const char *path = socket_path_of(socket_path);
	int error;

	if (out == NULL)
		return haecer__fail(-EINVAL, "no place for the context");
	*out = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (ctx == NULL)
		return haecer__fail(-ENOMEM, "out of memory for a context");
	pthread_mutex_init(&ctx->lock, NULL);
	ctx->rdpmc.perf_fd = -1;
	snprintf(ctx->socket_path, sizeof(ctx->socket_path), "%s", path);
	ctx->energy_exact = getenv(HAECER_ENERGY_EXACT_ENV) != NULL &&
			    strcmp(getenv(HAECER_ENERGY_EXACT_ENV), "0") != 0 &&
			    getenv(HAECER_ENERGY_EXACT_ENV)[0] != '\0';
	error = haecer_connect(path, &ctx->conn);
	if (error < 0) {
		char text[96];
		/* A socket error says more in libc's words (no such file, refused, ...), and what
		 * to do about it. */
		haecer__fail(error, "cannot connect to msrd at %s: %s%s%s", path,
			     strerror_r(-error, text, sizeof(text)),
			     haecer_connect_hint(error)[0] != '\0' ? "; " : "",
			     haecer_connect_hint(error));
		/* A missing socket is not a missing event: -ENOENT means that everywhere else. */
		if (error == -ENOENT || error == -ENOTDIR)
			error = -ENOTCONN;
		goto out;
	}
	error = learn_machine(ctx);
	if (error < 0)
		goto out;
	*out = ctx;
	ctx = NULL;
out:
	haecer_context_close(ctx);
	return error;
}

void haecer_context_close(struct haecer_context *ctx)
{
	if (ctx == NULL)
		return;
	pthread_mutex_lock(&ctx->lock);
	while (ctx->counters != NULL) {
		struct haecer_counter *counter = ctx->counters;

		/* Closing the connection frees the slots in msrd (registers restored). */
		haecer__ring_detach(counter);
		haecer__counter_release(counter);
	}
	haecer__pages_close(ctx);
	haecer__rdpmc_close(ctx);
	pthread_mutex_unlock(&ctx->lock);
	haecer_close(ctx->conn);
	if (ctx->db != NULL)
		event_db_close(ctx->db);
	if (ctx->db_atom != NULL)
		event_db_close(ctx->db_atom);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
}

/* A forked child must not speak on its parent's connection (the socket is shared): it starts
 * without a default context. It is the only thread now, so locks another parent thread held
 * at fork() time are simply made anew. Nothing is sent to msrd: closing the child's copy of
 * the socket leaves the parent's connection and slots alone. */
static void forget_default_in_child(void)
{
	pthread_mutex_init(&default_lock, NULL);
	pthread_mutex_init(&pool_lock, NULL);
	if (default_ctx == NULL)
		return;
	pthread_mutex_init(&default_ctx->lock, NULL);
	haecer_context_close(default_ctx);
	default_ctx = NULL;
}

static void register_fork_handler(void)
{
	pthread_atfork(NULL, NULL, forget_default_in_child);
}

int haecer_default_context(struct haecer_context **out)
{
	static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;
	int error = 0;

	pthread_once(&fork_handler_once, register_fork_handler);
	pthread_mutex_lock(&default_lock);
	if (default_ctx == NULL)
		error = haecer_context_open(NULL, &default_ctx);
	*out = default_ctx;
	pthread_mutex_unlock(&default_lock);
	return error;
}

void haecer_shutdown(void)
{
	pthread_mutex_lock(&default_lock);
	haecer_context_close(default_ctx);
	default_ctx = NULL;
	pthread_mutex_unlock(&default_lock);
}

const struct haecer_machine_info *haecer_context_machine(const struct haecer_context *ctx)
{
	return &ctx->machine;
}

const char *haecer_context_backend(const struct haecer_context *ctx)
{
	const struct haecer_server_info *info = ctx && ctx->conn ? haecer_server_info(ctx->conn)
								 : NULL;

	return haecer_backend_name(info ? info->backend : 0);
}

bool haecer_context_simulated(const struct haecer_context *ctx)
{
	return ctx != NULL && ctx->simulated;
}

/* ---- CPUs ---- */

static int current_cpus(const struct haecer_context *ctx, uint32_t *model_cpu, int *host_cpu)
{
	int host = sched_getcpu();

	if (host < 0)
		return haecer__fail(-EOPNOTSUPP, "sched_getcpu() failed: cannot tell the current CPU");
	*host_cpu = host;
	*model_cpu = (uint32_t)host % ctx->machine.cpu_count;
	return 0;
}

int haecer_context_current_cpu(const struct haecer_context *ctx, uint32_t *cpu)
{
	int host;

	if (ctx == NULL || cpu == NULL)
		return haecer__fail(-EINVAL, "no context or no place for the CPU");
	return current_cpus(ctx, cpu, &host);
}

int haecer__resolve_cpu(struct haecer_context *ctx, int cpu, uint32_t *model_cpu, int *host_cpu)
{
	*host_cpu = -1;
	if (cpu == HAECER_CPU_CURRENT)
		return current_cpus(ctx, model_cpu, host_cpu);
	if (cpu < 0 || (uint32_t)cpu >= ctx->machine.cpu_count)
		return haecer__fail(-ENXIO, "no CPU %d on this machine (0-%u)", cpu,
				    ctx->machine.cpu_count - 1);
	*model_cpu = (uint32_t)cpu;
	return 0;
}

int haecer__pin_to(int host_cpu, cpu_set_t *saved)
{
	cpu_set_t set;

	if (host_cpu < 0)
		return 0;
	if (host_cpu >= CPU_SETSIZE)
		return haecer__fail(-EINVAL, "cannot pin to CPU %d", host_cpu);
	if (saved != NULL && sched_getaffinity(0, sizeof(*saved), saved) < 0)
		return haecer__fail(-errno, "cannot read the thread's CPU mask");
	CPU_ZERO(&set);
	CPU_SET(host_cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		return haecer__fail(-errno, "cannot pin the thread to CPU %d", host_cpu);
	return 0;
}

void haecer__unpin(const cpu_set_t *saved)
{
	/* A failure leaves the thread pinned; nothing better can be done at a region's end. */
	(void)sched_setaffinity(0, sizeof(*saved), saved);
}

/* ---- the counter pool ---- */

int haecer__counter_new(struct haecer_context *ctx, struct haecer_counter **out)
{
	struct haecer_counter *counter;
	uint32_t generation = 0;
	uint32_t id;

	pthread_mutex_lock(&pool_lock);
	counter = pool;
	if (counter != NULL) {
		pool = counter->next;
		generation = counter->generation;
	}
	id = next_counter_id;
	/* Ids wrap below the ring's application-event bit (and skip 0). */
	next_counter_id = next_counter_id + 1 < HAECER__RING_EVENT_BIT ? next_counter_id + 1 : 1;
	pthread_mutex_unlock(&pool_lock);
	if (counter == NULL) {
		counter = malloc(sizeof(*counter));
		if (counter == NULL)
			return haecer__fail(-ENOMEM, "out of memory for a counter");
	}
	memset(counter, 0, sizeof(*counter));
	counter->generation = generation;
	counter->info.id = id;
	counter->width_mask = UINT64_MAX;
	counter->page_entry = -1;
	counter->perf_fd = -1;
	counter->host_cpu = -1;
	counter->next = ctx->counters;
	if (ctx->counters != NULL)
		ctx->counters->prev = counter;
	ctx->counters = counter;
	__atomic_store_n(&counter->ctx, ctx, __ATOMIC_RELEASE);
	*out = counter;
	return 0;
}

void haecer__counter_release(struct haecer_counter *counter)
{
	struct haecer_context *ctx = counter->ctx;

	/* The event is this process's alone: msrd kept no copy. */
	haecer_perf_unmap(counter->perf_map);
	counter->perf_map = NULL;
	if (counter->info.kind == HAECER_COUNTER_PERF && counter->perf_fd >= 0)
		close(counter->perf_fd);
	counter->perf_fd = -1;

	if (counter->prev != NULL)
		counter->prev->next = counter->next;
	else
		ctx->counters = counter->next;
	if (counter->next != NULL)
		counter->next->prev = counter->prev;
	__atomic_store_n(&counter->ctx, NULL, __ATOMIC_RELEASE);
	__atomic_add_fetch(&counter->generation, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&pool_lock);
	counter->prev = NULL;
	counter->next = pool;
	pool = counter;
	pthread_mutex_unlock(&pool_lock);
}

bool haecer__counter_live(const struct haecer_counter *counter)
{
	return counter != NULL && __atomic_load_n(&counter->ctx, __ATOMIC_ACQUIRE) != NULL;
}

int haecer__counter_lock(const struct haecer_counter *counter, struct haecer_context **out)
{
	struct haecer_context *ctx =
		counter != NULL ? __atomic_load_n(&counter->ctx, __ATOMIC_ACQUIRE) : NULL;

	if (ctx == NULL)
		return haecer__fail(-EBADF, "the counter is invalid or was freed");
	pthread_mutex_lock(&ctx->lock);
	if (counter->ctx != ctx) {
		pthread_mutex_unlock(&ctx->lock);
		return haecer__fail(-EBADF, "the counter was freed");
	}
	*out = ctx;
	return 0;
}
