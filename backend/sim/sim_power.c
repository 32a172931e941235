/*
 * backend/sim/sim_power.c — power traces: a client (or --sim-power-script) imposes the power of
 * RAPL domains as steps and ramps, so behaviour under changing power is tested deterministically.
 *
 * Text, one segment per line: `DOMAIN: DURATION_MS WATTS [END_WATTS]` — DURATION_MS at WATTS, or
 * a linear ramp from WATTS to END_WATTS. Each domain's lines play in order from the moment the
 * trace is loaded, on every instance of the domain (each package; each core for amd_core); after
 * its last segment a domain holds the last power. Domains the trace does not name follow the
 * load. `#` starts a comment. Durations 0.001 ms .. 1 hour, powers 0 .. 10 kW.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "backend/sim/sim_internal.h"

#define TRACE_MAX_SEGMENTS 100000u
#define TRACE_MAX_LINE 256u
#define TRACE_MAX_NS (3600ull * SIM_NS_PER_SECOND)
#define TRACE_MAX_WATTS 10000.0

static const struct {
	const char *name;
	enum rapl_domain domain;
} domain_names[] = {
	{ "pkg", RAPL_DOMAIN_PKG },       { "pp0", RAPL_DOMAIN_PP0 },
	{ "pp1", RAPL_DOMAIN_PP1 },       { "dram", RAPL_DOMAIN_DRAM },
	{ "psys", RAPL_DOMAIN_PSYS },     { "amd_core", RAPL_DOMAIN_AMD_CORE },
	{ "amd_pkg", RAPL_DOMAIN_AMD_PKG },
};

void sim_power_free(struct sim_power_trace *trace)
{
	if (!trace)
		return;
	for (unsigned kind = 0; kind < RAPL_DOMAIN_COUNT; kind++)
		free(trace->segments[kind]);
	free(trace);
}

static bool model_has_domain(const struct sim *sim, enum rapl_domain kind)
{
	return (sim->info.rapl_domains & (1u << kind)) != 0;
}

static const char *parse_watts(const char *text, char **end, uint64_t *uw)
{
	double watts = strtod(text, end);

	if (*end == text || !isfinite(watts) || watts < 0.0 || watts > TRACE_MAX_WATTS)
		return "expected watts in [0, 10000]";
	*uw = (uint64_t)llround(watts * 1e6);
	return NULL;
}

static const char *parse_line(const struct sim *sim, char *line, struct sim_power_trace *trace)
{
	struct sim_power_segment segment;
	char *colon = strchr(line, ':'), *cursor, *end;
	size_t length;
	unsigned kind = RAPL_DOMAIN_COUNT;
	double milliseconds;
	const char *problem;
	struct sim_power_segment *grown;

	if (!colon)
		return "expected `DOMAIN: DURATION_MS WATTS [END_WATTS]`";
	*colon = '\0';
	length = strcspn(line, " \t");
	line[length] = '\0';
	for (size_t i = 0; i < sizeof(domain_names) / sizeof(domain_names[0]); i++) {
		if (strcmp(line, domain_names[i].name) == 0)
			kind = domain_names[i].domain;
	}
	if (kind == RAPL_DOMAIN_COUNT)
		return "unknown domain (pkg, pp0, pp1, dram, psys, amd_pkg, amd_core)";
	if (!model_has_domain(sim, kind))
		return "the model has no such domain";
	cursor = colon + 1;
	milliseconds = strtod(cursor, &end);
	if (end == cursor || !isfinite(milliseconds) || milliseconds < 0.001 ||
	    milliseconds * 1e6 > (double)TRACE_MAX_NS)
		return "expected a duration in ms (0.001 .. 3600000)";
	segment.duration_ns = (uint64_t)llround(milliseconds * 1e6);
	problem = parse_watts(end, &cursor, &segment.from_uw);
	if (problem)
		return problem;
	segment.to_uw = segment.from_uw;
	while (*cursor == ' ' || *cursor == '\t')
		cursor++;
	if (*cursor && *cursor != '\n' && *cursor != '\r') {
		problem = parse_watts(cursor, &cursor, &segment.to_uw);
		if (problem)
			return problem;
	}
	while (isspace((unsigned char)*cursor))
		cursor++;
	if (*cursor)
		return "unexpected text after the watts";
	if (trace->count[kind] >= TRACE_MAX_SEGMENTS)
		return "too many segments";
	grown = realloc(trace->segments[kind], (trace->count[kind] + 1) * sizeof(*grown));
	if (!grown)
		return "out of memory";
	trace->segments[kind] = grown;
	grown[trace->count[kind]++] = segment;
	return NULL;
}

int sim_power_parse(const struct sim *sim, const char *text, const char *where,
		    struct sim_power_trace **out)
{
	struct sim_power_trace *trace = calloc(1, sizeof(*trace));
	const char *problem = NULL, *cursor = text;
	unsigned line_number = 0;

	if (!trace)
		return -ENOMEM;
	while (*cursor && !problem) {
		size_t length = strcspn(cursor, "\n");
		char line[TRACE_MAX_LINE + 1];
		char *start;

		line_number++;
		if (length > TRACE_MAX_LINE) {
			problem = "line too long";
			break;
		}
		memcpy(line, cursor, length);
		line[length] = '\0';
		cursor += length + (cursor[length] == '\n');
		line[strcspn(line, "#")] = '\0';
		start = line + strspn(line, " \t\r");
		if (*start)
			problem = parse_line(sim, start, trace);
	}
	if (problem) {
		log_warnx("sim: power trace %s:%u: %s", where, line_number, problem);
		sim_power_free(trace);
		return -EINVAL;
	}
	*out = trace;
	return 0;
}
