/*
 * backend/backend.c — opening a backend and routing register accesses to it: the Linux msr driver
 * (msr.c), LLNL's msr-safe with its batch ioctl (msr_safe.c), or the simulated CPU (sim/). What
 * the machine is comes from probe.c (devices) or the simulated model. Like Redis's ae.c over
 * ae_epoll.c and ae_kqueue.c, this file is the one place that knows which backend is open.
 */
#include "backend/backend_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/sim/sim.h"
#include "common/log.h"

/* ---- names ---- */

static const char *const kind_names[] = { "auto", "msr", "msr-safe", "sim", "powercap", "perf" };

const char *backend_kind_name(enum backend_kind kind)
{
	if ((unsigned)kind >= sizeof(kind_names) / sizeof(kind_names[0]))
		return "unknown";
	return kind_names[kind];
}

int backend_kind_parse(const char *name, enum backend_kind *out)
{
	for (size_t i = 0; name && i < sizeof(kind_names) / sizeof(kind_names[0]); i++) {
		if (strcmp(name, kind_names[i]) == 0) {
			*out = (enum backend_kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

enum backend_kind backend_kind(const struct msr_backend *backend)
{
	return backend->kind;
}

/* ---- opening ---- */

static struct msr_backend *backend_alloc(enum backend_kind kind)
{
	struct msr_backend *backend = calloc(1, sizeof(*backend));

	if (backend) {
		backend->kind = kind;
		backend->batch_fd = -1;
	}
	return backend;
}

/* The msr driver's device opens read-write under kernel lockdown (integrity or confidentiality:
 * LOCKDOWN_MSR) and with msr.allow_writes=off, and then refuses every write with EPERM; so the
 * backend is made read-only there, reads keep working (RAPL), and nothing tries to program
 * counters through it: backend_programs_pmcs says no and msrd's perf broker takes them. */
static int refuse_refused_writes(const struct backend_options *options,
				 struct msr_backend *backend)
{
	struct backend_diagnosis diagnosis;
	int ret;

	if (backend_diagnose(options, &diagnosis) < 0 ||
	    (!diagnosis.lockdown && diagnosis.writes_allowed))
		return 0;
	ret = backend_msr_reopen_read_only(backend);
	if (ret < 0)
		return ret;
	memset(backend->writable, 0, backend->cpu_count * sizeof(*backend->writable));
	backend->read_only_why = diagnosis.lockdown
		? "the kernel is locked down (sys/kernel/security/lockdown): it refuses MSR writes, "
		  "reads are allowed"
		: "msr.allow_writes is off: the kernel refuses MSR writes, reads are allowed";
	log_notice("backend: the msr driver read-only: %s", backend->read_only_why);
	return 0;
}

static int open_device_backend(const struct backend_options *options, enum backend_kind kind,
			       struct msr_backend **out, char *why, size_t why_size)
{
	struct msr_backend *backend = backend_alloc(kind);
	int ret;

	if (!backend)
		return -ENOMEM;
	ret = backend_msr_open(backend, options->dev_root,
			       kind == BACKEND_MSR ? "msr" : "msr_safe", why, why_size);
	if (ret == 0 && kind == BACKEND_MSR_SAFE)
		ret = backend_msr_safe_open_batch(backend, options->dev_root);
	if (ret == 0 && kind == BACKEND_MSR_SAFE)
		ret = backend_standin_allowlist_open(backend, options->dev_root);
	if (ret == 0 && kind == BACKEND_MSR)
		ret = refuse_refused_writes(options, backend);
	if (ret < 0) {
		backend_close(backend);
		return ret;
	}
	backend_probe_machine(backend, options->dev_root);
	*out = backend;
	return 0;
}

static int open_sim_backend(const struct backend_options *options, struct msr_backend **out,
			    char *why, size_t why_size)
{
	struct msr_backend *backend = backend_alloc(BACKEND_SIM);
	int ret;

	if (!backend)
		return -ENOMEM;
	ret = sim_open(options, &backend->sim, why, why_size);
	if (ret < 0) {
		free(backend);
		return ret;
	}
	backend->info = *sim_machine_info(backend->sim);
	backend->cpu_count = backend->info.cpu_count;
	backend_probe_simulated(backend);
	*out = backend;
	return 0;
}

static int open_powercap_backend(const struct backend_options *options,
				 struct msr_backend **out, char *why, size_t why_size)
{
	struct msr_backend *backend = backend_alloc(BACKEND_POWERCAP);
	int ret;

	if (!backend)
		return -ENOMEM;
	ret = backend_powercap_open(backend,
				    options->sysfs_root ? options->sysfs_root : options->dev_root,
				    why, why_size);
	if (ret < 0) {
		backend_close(backend);
		return ret;
	}
	*out = backend;
	return 0;
}

/* No register at all: the machine as sysfs and CPUID describe it, for msrd's perf broker. */
static int open_perf_backend(const struct backend_options *options, struct msr_backend **out,
			     char *why, size_t why_size)
{
	struct msr_backend *backend = backend_alloc(BACKEND_PERF);
	const char *root = options->sysfs_root ? options->sysfs_root : options->dev_root;

	if (!backend)
		return -ENOMEM;
	backend->cpu_count = backend_sysfs_cpu_count(root);
	backend_probe_machine(backend, root);
	snprintf(why, why_size, "perf events only: no register reads (every one says EIO)");
	*out = backend;
	return 0;
}

static void append(char *text, size_t size, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

static void append(char *text, size_t size, const char *format, ...)
{
	size_t used = strlen(text);
	va_list arguments;

	if (used + 1 >= size)
		return;
	va_start(arguments, format);
	vsnprintf(text + used, size - used, format, arguments);
	va_end(arguments);
}

/* Without an MSR device: energy from powercap, else no registers at all but perf events through
 * msrd's broker. Appends what happened to `why`. */
static int open_kernel_interfaces(const struct backend_options *options,
				  struct msr_backend **out, char *why, size_t why_size)
{
	char reason[512] = "";

	if (open_powercap_backend(options, out, reason, sizeof(reason)) == 0) {
		append(why, why_size, "; %s for energy (counters: perf events through the broker)",
		       reason);
		return 0;
	}
	append(why, why_size, "; %s", reason);
	if (!backend_perf_available(options)) {
		append(why, why_size, "; perf: no perf_event (proc/sys/kernel/perf_event_paranoid)");
		return -ENODEV;
	}
	reason[0] = '\0';
	if (open_perf_backend(options, out, reason, sizeof(reason)) < 0)
		return -ENODEV;
	append(why, why_size, "; using perf: %s", reason);
	return 0;
}

/* msr, then msr-safe, then powercap, then perf, then (only when asked for) the simulated CPU; `why` keeps what each
 * refusal was and what the operator could do about it. */
static int open_auto(const struct backend_options *options, struct msr_backend **out, char *why,
		     size_t why_size)
{
	struct backend_diagnosis diagnosis;
	char reason[512] = "";
	int ret;

	ret = open_device_backend(options, BACKEND_MSR, out, reason, sizeof(reason));
	if (ret == 0) {
		snprintf(why, why_size, "using the msr driver%s%s%s",
			 (*out)->writable[0] ? "" : " read-only (writes fail with EPERM",
			 (*out)->read_only_why ? ": " : "",
			 (*out)->read_only_why ? (*out)->read_only_why : "");
		if (!(*out)->writable[0])
			append(why, why_size, "); energy (RAPL) from the msr driver; core PMCs: %s",
			       backend_perf_available(options)
				       ? "perf events through msrd's perf broker"
				       : "none (no perf_event: proc/sys/kernel/perf_event_paranoid)");
		return 0;
	}
	snprintf(why, why_size, "msr: %s", reason);
	if (backend_diagnose(options, &diagnosis) == 0 && diagnosis.advice[0])
		append(why, why_size, " (%s)", diagnosis.advice);
	reason[0] = '\0';
	ret = open_device_backend(options, BACKEND_MSR_SAFE, out, reason, sizeof(reason));
	if (ret == 0) {
		append(why, why_size, "; using msr-safe");
		return 0;
	}
	append(why, why_size, "; msr-safe: %s", reason);
	if (open_kernel_interfaces(options, out, why, why_size) == 0)
		return 0;
	if (!options->allow_sim_fallback) {
		append(why, why_size, "; no usable MSR device, and the simulated CPU is used only "
		       "when asked for (--backend sim, or --allow-sim-fallback)");
		return -ENODEV;
	}
	reason[0] = '\0';
	ret = open_sim_backend(options, out, reason, sizeof(reason));
	if (ret < 0) {
		append(why, why_size, "; %s", reason);
		return ret;
	}
	append(why, why_size, "; using the simulated CPU (model %s)", (*out)->info.sim_model);
	return 0;
}

int backend_open(const struct backend_options *options, struct msr_backend **out, char *why,
		 size_t why_size)
{
	struct backend_diagnosis diagnosis;
	char ignored[8];
	int ret;

	if (!why || why_size == 0) {
		why = ignored;
		why_size = sizeof(ignored);
	}
	why[0] = '\0';
	switch (options->kind) {
	case BACKEND_AUTO:
		return open_auto(options, out, why, why_size);
	case BACKEND_MSR:
		ret = open_device_backend(options, options->kind, out, why, why_size);
		if (ret < 0 && backend_diagnose(options, &diagnosis) == 0 && diagnosis.advice[0])
			append(why, why_size, " (%s)", diagnosis.advice);
		return ret;
	case BACKEND_MSR_SAFE:
		return open_device_backend(options, options->kind, out, why, why_size);
	case BACKEND_SIM:
		return open_sim_backend(options, out, why, why_size);
	case BACKEND_POWERCAP:
		return open_powercap_backend(options, out, why, why_size);
	case BACKEND_PERF:
		return open_perf_backend(options, out, why, why_size);
	default:
		snprintf(why, why_size, "unknown backend kind %d", (int)options->kind);
		return -EINVAL;
	}
}

void backend_close(struct msr_backend *backend)
{
	if (!backend)
		return;
	backend_msr_close(backend);
	backend_msr_safe_close(backend);
	backend_standin_allowlist_close(backend);
	backend_powercap_close(backend);
	sim_close(backend->sim);
	free(backend);
}

/* ---- access ---- */

int backend_machine_info(const struct msr_backend *backend, struct machine_info *out)
{
	*out = backend->info;
	return 0;
}

uint32_t backend_cpu_count(const struct msr_backend *backend)
{
	return backend->cpu_count;
}

int backend_read(struct msr_backend *backend, uint32_t cpu, uint32_t address, uint64_t *value)
{
	if (backend->sim)
		return sim_read(backend->sim, cpu, address, value);
	if (backend->powercap)
		return backend_powercap_read(backend, cpu, address, value);
	if (backend->kind == BACKEND_PERF)
		return cpu < backend->cpu_count ? -EIO : -ENXIO;
	return backend_device_read(backend, cpu, address, value);
}

int backend_write(struct msr_backend *backend, uint32_t cpu, uint32_t address, uint64_t value)
{
	if (backend->sim)
		return sim_write(backend->sim, cpu, address, value);
	if (backend->powercap || backend->kind == BACKEND_PERF)
		return -EIO; /* powercap zones are read-only energy; perf has no registers */
	if (backend->standin_allowlist)
		value = backend_standin_allowlist_apply(backend, cpu, address, value);
	return backend_device_write(backend, cpu, address, value);
}

void backend_run_one_by_one(struct msr_backend *backend, struct msr_op *ops, size_t count,
			    const bool *skip)
{
	for (size_t i = 0; i < count; i++) {
		if (skip && skip[i])
			continue;
		ops[i].status = ops[i].write ?
					backend_write(backend, ops[i].cpu, ops[i].address,
						      ops[i].value) :
					backend_read(backend, ops[i].cpu, ops[i].address,
						     &ops[i].value);
	}
}

static bool any_write(const struct msr_op *ops, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		if (ops[i].write)
			return true;
	}
	return false;
}

int backend_run_batch(struct msr_backend *backend, struct msr_op *ops, size_t count)
{
	/* A delegated write must reach the parent: msr-safe's batch would write here. */
	bool delegated = backend->write_delegate != NULL && any_write(ops, count);

	if (!delegated && backend_msr_safe_run(backend, ops, count) == 0)
		return 0;
	backend_run_one_by_one(backend, ops, count, NULL);
	return 0;
}

/* ---- privilege separation ---- */

bool backend_has_devices(const struct msr_backend *backend)
{
	return backend->kind == BACKEND_MSR || backend->kind == BACKEND_MSR_SAFE;
}

int backend_delegate_writes(struct msr_backend *backend, backend_write_fn write, void *context)
{
	int ret;

	if (!backend_has_devices(backend))
		return -EOPNOTSUPP;
	ret = backend_msr_reopen_read_only(backend);
	if (ret == 0)
		ret = backend_msr_safe_reopen_read_only(backend);
	if (ret < 0)
		return ret;
	backend->write_delegate = write;
	backend->delegate_context = context;
	return 0;
}
