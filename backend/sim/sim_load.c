/*
 * backend/sim/sim_load.c — the simulated CPU's load: sampled from the host's /proc/stat, or
 * scripted.
 */
#include "backend/sim/sim_load.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

#define HOST_MAX_CPUS 4096u
#define STAT_MAX_BYTES (4u << 20)
#define SCRIPT_MAX_SEGMENTS 1000000u
#define SCRIPT_MAX_LINE 512

/* ---- host load ---- */

struct sim_host_load {
	int fd;
	uint32_t cpu_count;
	uint64_t busy[HOST_MAX_CPUS];
	uint64_t total[HOST_MAX_CPUS];
	uint32_t load[HOST_MAX_CPUS];
	char *buffer;
	size_t buffer_size;
};

/* Read the whole file from offset 0; /proc/stat is generated on each read, so one pass. A read
 * shorter than asked for reached the end: reading on to see 0 would generate it all again. */
static int read_stat(struct sim_host_load *host, size_t *length)
{
	size_t used = 0;

	for (;;) {
		size_t asked;
		ssize_t got;

		if (used + 1 >= host->buffer_size) {
			size_t size = host->buffer_size * 2;
			char *bigger;

			if (size > STAT_MAX_BYTES)
				return -EFBIG;
			bigger = realloc(host->buffer, size);
			if (!bigger)
				return -ENOMEM;
			host->buffer = bigger;
			host->buffer_size = size;
		}
		asked = host->buffer_size - 1 - used;
		got = pread(host->fd, host->buffer + used, asked, (off_t)used);
		if (got < 0)
			return -errno;
		used += (size_t)got;
		if ((size_t)got < asked)
			break;
	}
	host->buffer[used] = '\0';
	*length = used;
	return 0;
}

/* One "cpuN user nice system idle iowait irq softirq steal ..." line. */
static void account_cpu_line(struct sim_host_load *host, const char *line)
{
	unsigned long long field[8] = { 0 };
	unsigned cpu;
	uint64_t busy, total, busy_delta, total_delta;

	if (sscanf(line, "cpu%u %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &field[0],
		   &field[1], &field[2], &field[3], &field[4], &field[5], &field[6],
		   &field[7]) < 5 || cpu >= HOST_MAX_CPUS)
		return;
	busy = field[0] + field[1] + field[2] + field[5] + field[6] + field[7];
	total = busy + field[3] + field[4];
	if (cpu >= host->cpu_count)
		host->cpu_count = cpu + 1;
	total_delta = total - host->total[cpu];
	busy_delta = busy - host->busy[cpu];
	if (total > host->total[cpu] && busy >= host->busy[cpu] && busy_delta <= total_delta)
		host->load[cpu] = (uint32_t)((busy_delta * SIM_LOAD_ONE) / total_delta);
	host->busy[cpu] = busy;
	host->total[cpu] = total;
}

int sim_host_load_sample(struct sim_host_load *host)
{
	size_t length;
	char *line;
	int ret = read_stat(host, &length);

	if (ret < 0)
		return ret;
	for (line = host->buffer; line && *line; line = strchr(line, '\n')) {
		if (*line == '\n')
			line++;
		if (strncmp(line, "cpu", 3) == 0 && isdigit((unsigned char)line[3]))
			account_cpu_line(host, line);
	}
	return host->cpu_count ? 0 : -EINVAL;
}

int sim_host_load_open(const char *stat_path, struct sim_host_load **out)
{
	struct sim_host_load *host = calloc(1, sizeof(*host));
	int ret;

	if (!host)
		return -ENOMEM;
	host->buffer_size = 16384;
	host->buffer = malloc(host->buffer_size);
	host->fd = open(stat_path, O_RDONLY | O_CLOEXEC);
	if (!host->buffer || host->fd < 0) {
		ret = host->buffer ? -errno : -ENOMEM;
		goto fail;
	}
	ret = sim_host_load_sample(host);
	if (ret < 0)
		goto fail;
	*out = host;
	return 0;
fail:
	sim_host_load_close(host);
	return ret;
}

void sim_host_load_close(struct sim_host_load *host)
{
	if (!host)
		return;
	if (host->fd >= 0)
		close(host->fd);
	free(host->buffer);
	free(host);
}

uint32_t sim_host_load_of(const struct sim_host_load *host, uint32_t cpu)
{
	return host->load[cpu % host->cpu_count];
}

uint32_t sim_host_load_cpus(const struct sim_host_load *host)
{
	return host->cpu_count;
}

void sim_host_load_ticks(const struct sim_host_load *host, uint32_t cpu, uint64_t *busy,
			 uint64_t *total)
{
	*busy = host->busy[cpu % host->cpu_count];
	*total = host->total[cpu % host->cpu_count];
}

/* ---- scripts ---- */

void sim_script_free(struct sim_script *script)
{
	if (!script)
		return;
	for (size_t i = 0; i < script->timeline_count; i++) {
		free(script->timelines[i].duration_ns);
		free(script->timelines[i].load);
	}
	free(script->timelines);
	free(script->cpu_timeline);
	free(script);
}

static int timeline_append(struct sim_timeline *timeline, uint64_t duration_ns, uint32_t load)
{
	size_t count = timeline->count + 1;
	uint64_t *durations;
	uint32_t *loads;

	if (count > SCRIPT_MAX_SEGMENTS)
		return -E2BIG;
	durations = realloc(timeline->duration_ns, count * sizeof(*durations));
	if (!durations)
		return -ENOMEM;
	timeline->duration_ns = durations;
	loads = realloc(timeline->load, count * sizeof(*loads));
	if (!loads)
		return -ENOMEM;
	timeline->load = loads;
	durations[count - 1] = duration_ns;
	loads[count - 1] = load;
	timeline->count = count;
	return 0;
}

/* "0,2-3" -> bits in `selected`; returns 0 or a message. */
static const char *parse_cpu_list(const char *text, uint32_t cpu_count, bool *selected)
{
	const char *cursor = text;

	while (*cursor) {
		char *end;
		unsigned long first = strtoul(cursor, &end, 10), last;

		if (end == cursor)
			return "expected a CPU number";
		last = first;
		cursor = end;
		if (*cursor == '-') {
			last = strtoul(cursor + 1, &end, 10);
			if (end == cursor + 1 || last < first)
				return "bad CPU range";
			cursor = end;
		}
		if (last >= cpu_count)
			return "CPU beyond the model";
		for (unsigned long cpu = first; cpu <= last; cpu++)
			selected[cpu] = true;
		while (*cursor == ' ' || *cursor == '\t')
			cursor++;
		if (*cursor == ',')
			cursor++;
		else if (*cursor)
			return "expected ',' between CPUs";
	}
	return NULL;
}

/* The timeline of a `cpu LIST:` line: the one the same CPU set already has, or a new one when
 * none of the CPUs has one yet. A CPU may not be in two different sets. */
static int timeline_for_cpus(struct sim_script *script, const bool *selected, size_t *index)
{
	struct sim_timeline *timelines;
	int32_t found = -1;
	bool first = true, mixed = false;

	for (uint32_t cpu = 0; cpu < script->cpu_count; cpu++) {
		int32_t current = script->cpu_timeline[cpu];

		if (!selected[cpu])
			continue;
		mixed |= !first && current != found;
		found = first ? current : found;
		first = false;
	}
	for (uint32_t cpu = 0; !mixed && found >= 1 && cpu < script->cpu_count; cpu++)
		mixed = !selected[cpu] && script->cpu_timeline[cpu] == found;
	if (mixed)
		return -EEXIST;
	if (found >= 1) {
		*index = (size_t)found;
		return 0;
	}
	timelines = realloc(script->timelines, (script->timeline_count + 1) * sizeof(*timelines));
	if (!timelines)
		return -ENOMEM;
	script->timelines = timelines;
	memset(&timelines[script->timeline_count], 0, sizeof(*timelines));
	*index = script->timeline_count++;
	for (uint32_t cpu = 0; cpu < script->cpu_count; cpu++) {
		if (selected[cpu])
			script->cpu_timeline[cpu] = (int32_t)*index;
	}
	return 0;
}

static const char *parse_segment(const char *text, uint64_t *duration_ns, uint32_t *load)
{
	char *end;
	double milliseconds = strtod(text, &end), share;

	if (end == text || !isfinite(milliseconds) || milliseconds <= 0.0 ||
	    milliseconds > 1e12)
		return "expected a duration in ms > 0";
	text = end;
	share = strtod(text, &end);
	if (end == text || !isfinite(share) || share < 0.0 || share > 1.0)
		return "expected a load in [0, 1]";
	while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
		end++;
	if (*end)
		return "unexpected text after the load";
	*duration_ns = (uint64_t)llround(milliseconds * 1e6);
	*load = (uint32_t)lround(share * SIM_LOAD_ONE);
	return *duration_ns ? NULL : "duration rounds to 0 ns";
}

static int parse_line(struct sim_script *script, char *line, bool *selected,
		      const char **problem)
{
	size_t index = 0;
	uint64_t duration_ns;
	uint32_t load;
	char *body = line;
	int ret;

	if (strncmp(line, "cpu", 3) == 0) {
		char *colon = strchr(line, ':');

		if (!colon) {
			*problem = "expected `cpu LIST:`";
			return -EINVAL;
		}
		*colon = '\0';
		memset(selected, 0, script->cpu_count * sizeof(*selected));
		*problem = parse_cpu_list(line + 3 + strspn(line + 3, " \t"), script->cpu_count,
					  selected);
		if (*problem)
			return -EINVAL;
		ret = timeline_for_cpus(script, selected, &index);
		if (ret == -EEXIST) {
			*problem = "a CPU already has a timeline of another CPU set";
			ret = -EINVAL;
		}
		if (ret < 0)
			return ret;
		body = colon + 1;
	}
	*problem = parse_segment(body, &duration_ns, &load);
	if (*problem)
		return -EINVAL;
	ret = timeline_append(&script->timelines[index], duration_ns, load);
	if (ret == -E2BIG)
		*problem = "too many segments";
	return ret;
}

static int script_create(uint32_t cpu_count, struct sim_script **out)
{
	struct sim_script *script = calloc(1, sizeof(*script));

	if (!script)
		return -ENOMEM;
	script->cpu_count = cpu_count;
	script->timeline_count = 1;
	script->timelines = calloc(1, sizeof(*script->timelines));
	script->cpu_timeline = malloc(cpu_count * sizeof(*script->cpu_timeline));
	if (!script->timelines || !script->cpu_timeline) {
		sim_script_free(script);
		return -ENOMEM;
	}
	for (uint32_t cpu = 0; cpu < cpu_count; cpu++)
		script->cpu_timeline[cpu] = -1;
	*out = script;
	return 0;
}

/* CPUs named by no `cpu` line follow the default timeline when it has segments. */
static void assign_default_timeline(struct sim_script *script)
{
	if (script->timelines[0].count == 0)
		return;
	for (uint32_t cpu = 0; cpu < script->cpu_count; cpu++) {
		if (script->cpu_timeline[cpu] < 0)
			script->cpu_timeline[cpu] = 0;
	}
}

int sim_script_load(const char *path, uint32_t cpu_count, struct sim_script **out)
{
	struct sim_script *script = NULL;
	const char *problem = NULL;
	char line[SCRIPT_MAX_LINE + 2];
	bool *selected = calloc(cpu_count, sizeof(*selected));
	unsigned line_number = 0;
	FILE *file = fopen(path, "re");
	int ret = -ENOMEM;

	if (!file || !selected) {
		ret = file ? -ENOMEM : -errno;
		log_warn_errno(ret, "sim: load script %s", path);
		goto out;
	}
	ret = script_create(cpu_count, &script);
	if (ret < 0)
		goto out;
	while (fgets(line, sizeof(line), file)) {
		char *start = line + strspn(line, " \t");

		line_number++;
		if (strlen(line) > SCRIPT_MAX_LINE) {
			problem = "line too long";
			ret = -EINVAL;
			break;
		}
		start[strcspn(start, "#")] = '\0';
		if (start[strspn(start, " \t\r\n")] == '\0')
			continue;
		ret = parse_line(script, start, selected, &problem);
		if (ret < 0)
			break;
	}
	if (ret == 0 && script->timeline_count == 1 && script->timelines[0].count == 0) {
		problem = "no segments";
		ret = -EINVAL;
	}
	if (ret < 0) {
		log_warnx("sim: %s:%u: %s", path, line_number, problem ? problem : strerror(-ret));
		goto out;
	}
	assign_default_timeline(script);
	*out = script;
	script = NULL;
out:
	sim_script_free(script);
	free(selected);
	if (file)
		fclose(file);
	return ret;
}
