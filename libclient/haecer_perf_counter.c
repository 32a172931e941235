/*
 * libclient/haecer_perf_counter.c — counters whose event msrd's perf broker opened
 * (haecer_counter_open_perf): the kernel counts (following the thread across CPUs, scaling
 * when it multiplexes), the library reads the descriptor msrd handed over, from its mmap page
 * with RDPMC where the kernel allows it (haecer_perf_map.c), else with read().
 */
#include "libclient/haecer_internal.h"
#include "hw/core_type.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

int haecer__perf_read_locked(struct haecer_counter *counter, uint64_t *value)
{
	struct haecer_perf_value reading;
	unsigned path;
	int error = counter->perf_map != NULL
			    ? haecer_perf_read_mapped(counter->perf_map, &reading, &path, NULL, 0)
			    : haecer_perf_read(counter->perf_fd, &reading);

	if (error < 0)
		return haecer__fail(error, "reading perf event %s", counter->info.name);
	counter->info.scaled = reading.scaled;
	counter->perf_time_enabled = reading.time_enabled;
	counter->perf_time_running = reading.time_running;
	counter->value = reading.value;
	*value = reading.value;
	return 0;
}

int haecer_counter_times(const struct haecer_counter *counter, uint64_t *time_enabled,
			 uint64_t *time_running)
{
	struct haecer_context *ctx;
	int error;

	if (time_enabled == NULL || time_running == NULL)
		return haecer__fail(-EINVAL, "no place for the counter's times");
	error = haecer__counter_lock(counter, &ctx);
	if (error < 0)
		return error;
	if (counter->info.kind == HAECER_COUNTER_PERF) {
		*time_enabled = counter->perf_time_enabled;
		*time_running = counter->perf_time_running;
	} else {
		error = haecer__fail(-EOPNOTSUPP, "counter %s is no perf event: it has no "
				     "time_enabled / time_running", counter->info.name);
	}
	pthread_mutex_unlock(&ctx->lock);
	return error;
}

int haecer__perf_control(struct haecer_counter *counter, uint16_t action)
{
	unsigned long request = action == HAECER_SLOT_ENABLE	? PERF_EVENT_IOC_ENABLE
				: action == HAECER_SLOT_DISABLE ? PERF_EVENT_IOC_DISABLE
								: PERF_EVENT_IOC_RESET;

	if (ioctl(counter->perf_fd, request, 0) < 0)
		return haecer__fail(-errno, "perf event %s: ioctl", counter->info.name);
	if (action != HAECER_SLOT_RESET)
		counter->info.enabled = action == HAECER_SLOT_ENABLE;
	return 0;
}

static void describe(struct haecer_counter *counter, const struct haecer_perf_spec *spec,
		     const char *name)
{
	const struct haecer_machine_info *machine = &counter->ctx->machine;
	struct haecer_counter_info *info = &counter->info;

	if (name != NULL)
		snprintf(info->name, sizeof(info->name), "%s", name);
	else
		snprintf(info->name, sizeof(info->name), "perf:%u/%#llx/", spec->type,
			 (unsigned long long)spec->config);
	info->kind = HAECER_COUNTER_PERF;
	info->cpu = spec->cpu < 0 ? 0 : (uint32_t)spec->cpu;
	info->package = -1;
	/* A CPU-wide event is that CPU's, as a counter slot is. */
	if ((spec->flags & HAECER_PERF_CPU_WIDE) && info->cpu < machine->cpu_count) {
		info->package = (int)machine->cpu_package[info->cpu];
		info->core_type = cpu_core_type_name(machine->cpu_core_type[info->cpu]);
	}
	info->width = 64;
	info->unit = 1.0;
	info->unit_name = "events";
	info->config = spec->config;
	info->enabled = !(spec->flags & HAECER_PERF_DISABLED);
}

int haecer_counter_open_perf(struct haecer_context *ctx, const struct haecer_perf_spec *spec,
			     struct haecer_counter **out)
{
	return haecer__counter_open_perf_named(ctx, spec, NULL, out);
}

int haecer__counter_open_perf_named(struct haecer_context *ctx,
				    const struct haecer_perf_spec *spec, const char *name,
				    struct haecer_counter **out)
{
	struct haecer_counter *counter = NULL;
	uint64_t value;
	int error;

	if (!ctx || !spec || !out)
		return haecer__fail(-EINVAL, "haecer_counter_open_perf needs a context, a spec "
				    "and a place for the counter");
	pthread_mutex_lock(&ctx->lock);
	error = haecer__counter_new(ctx, &counter);
	if (error < 0)
		goto out;
	error = haecer_perf_open(ctx->conn, spec, &counter->perf_fd, NULL);
	if (error < 0) {
		haecer__fail_msrd(ctx, error, "opening a perf event through msrd");
		goto out;
	}
	describe(counter, spec, name);
	/* Without its page (mmap refused) the counter is read with read() alone. */
	if (haecer_perf_map(counter->perf_fd, spec->flags & HAECER_PERF_CPU_WIDE ? -1 : spec->tid,
			    &counter->perf_map) < 0)
		counter->perf_map = NULL;
	error = haecer__perf_read_locked(counter, &value);
out:
	if (error < 0 && counter != NULL)
		haecer__counter_release(counter);
	pthread_mutex_unlock(&ctx->lock);
	*out = error < 0 ? NULL : counter;
	return error;
}
