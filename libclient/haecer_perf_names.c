/*
 * libclient/haecer_perf_names.c — perf's names of the events msrd's broker opens: the software
 * events (perf list: "Software event") and a PMU's events as perf writes them, "msr/tsc/" or
 * "PMU/term=value,.../", from the kernel's sysfs description of the PMU
 * (/sys/bus/event_source/devices/PMU: `type`, events/NAME "event=0x00,umask=0x01", and
 * format/TERM "config:0-7,21" saying where each term's bits go), as perf itself resolves them.
 * $HAECER_SYSFS_ROOT (tests) prefixes the sysfs path.
 */
#include "libclient/haecer_internal.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEVICES "/sys/bus/event_source/devices"
#define PMU_NAME_MAX 64u
#define TERMS_MAX 256u

static const struct {
	const char *name;
	uint64_t config;
} software_events[] = {
	{ "cpu-clock", PERF_COUNT_SW_CPU_CLOCK },
	{ "task-clock", PERF_COUNT_SW_TASK_CLOCK },
	{ "page-faults", PERF_COUNT_SW_PAGE_FAULTS },
	{ "faults", PERF_COUNT_SW_PAGE_FAULTS },
	{ "context-switches", PERF_COUNT_SW_CONTEXT_SWITCHES },
	{ "cs", PERF_COUNT_SW_CONTEXT_SWITCHES },
	{ "cpu-migrations", PERF_COUNT_SW_CPU_MIGRATIONS },
	{ "migrations", PERF_COUNT_SW_CPU_MIGRATIONS },
	{ "minor-faults", PERF_COUNT_SW_PAGE_FAULTS_MIN },
	{ "major-faults", PERF_COUNT_SW_PAGE_FAULTS_MAJ },
	{ "alignment-faults", PERF_COUNT_SW_ALIGNMENT_FAULTS },
	{ "emulation-faults", PERF_COUNT_SW_EMULATION_FAULTS },
};

/* The first line of DEVICES/pmu/file into text: 0, or -ENOENT. */
static int read_pmu_file(const char *pmu, const char *file, char *text, size_t size)
{
	const char *root = getenv(HAECER_SYSFS_ROOT_ENV);
	char path[512];
	FILE *stream;
	int error = 0;

	snprintf(path, sizeof(path), "%s" DEVICES "/%s/%s", root != NULL ? root : "", pmu, file);
	stream = fopen(path, "re");
	if (stream == NULL)
		return -ENOENT;
	if (fgets(text, (int)size, stream) == NULL)
		error = -ENOENT;
	fclose(stream);
	text[strcspn(text, "\n")] = '\0';
	return error;
}

/* Put value's bits, lowest first, at the bit positions of one format ("config1:0-7,21"). */
static int place_bits(const char *format, uint64_t value, struct haecer_perf_spec *spec)
{
	uint64_t *target = strncmp(format, "config1:", 8) == 0 ? &spec->config1
			   : strncmp(format, "config:", 7) == 0	  ? &spec->config
								  : NULL;
	const char *range = strchr(format, ':');

	if (target == NULL || range == NULL)
		return -EINVAL; /* config2, or not a format haecer knows */
	while (range != NULL) {
		unsigned low, high;
		int used = 0;

		if (sscanf(range + 1, "%u%n", &low, &used) != 1 || low > 63)
			return -EINVAL;
		high = low;
		if (range[1 + used] == '-' && (sscanf(range + 2 + used, "%u", &high) != 1 ||
					       high > 63 || high < low))
			return -EINVAL;
		for (unsigned bit = low; bit <= high; bit++, value >>= 1)
			*target |= (value & 1) << bit;
		range = strchr(range + 1, ',');
	}
	return value == 0 ? 0 : -ERANGE; /* more bits than the field has */
}

/* One term, "event=0x3c", "umask", or an event alias (events/NAME, itself terms). */
static int apply_terms(const char *pmu, char *terms, struct haecer_perf_spec *spec, int depth);

static int apply_term(const char *pmu, char *term, struct haecer_perf_spec *spec, int depth)
{
	char *equals = strchr(term, '='), path[PMU_NAME_MAX + 16], text[TERMS_MAX], *end;
	uint64_t value = 1;

	if (equals != NULL) {
		*equals = '\0';
		errno = 0;
		value = strtoull(equals + 1, &end, 0);
		if (errno != 0 || end == equals + 1 || *end != '\0')
			return -EINVAL;
	}
	snprintf(path, sizeof(path), "format/%s", term);
	if (read_pmu_file(pmu, path, text, sizeof(text)) == 0)
		return place_bits(text, value, spec);
	snprintf(path, sizeof(path), "events/%s", term);
	if (equals != NULL || depth > 0 || read_pmu_file(pmu, path, text, sizeof(text)) < 0)
		return -ENOENT;
	return apply_terms(pmu, text, spec, depth + 1);
}

static int apply_terms(const char *pmu, char *terms, struct haecer_perf_spec *spec, int depth)
{
	char *saved = NULL;

	for (char *term = strtok_r(terms, ",", &saved); term != NULL;
	     term = strtok_r(NULL, ",", &saved)) {
		int error = apply_term(pmu, term, spec, depth);
		if (error < 0)
			return error;
	}
	return 0;
}

/* The PMU's type number (DEVICES/pmu/type): 0, or -ENOENT without one, -EINVAL garbage. */
int haecer__perf_pmu_type(const char *pmu, uint32_t *type)
{
	char text[16], *end;
	long number;

	if (read_pmu_file(pmu, "type", text, sizeof(text)) < 0)
		return -ENOENT;
	number = strtol(text, &end, 10);
	if (end == text || number < 0 || number > UINT32_MAX)
		return -EINVAL;
	*type = (uint32_t)number;
	return 0;
}

/* "pmu/terms/" (the closing slash optional, as perf has it). */
static int pmu_event(const char *name, struct haecer_perf_spec *spec)
{
	char pmu[PMU_NAME_MAX], terms[TERMS_MAX];
	const char *slash = strchr(name, '/');
	size_t length = strlen(name);
	int error;

	if (slash == NULL || slash == name || (size_t)(slash - name) >= sizeof(pmu) ||
	    length - (size_t)(slash - name) >= sizeof(terms))
		return -ENOENT;
	memcpy(pmu, name, (size_t)(slash - name));
	pmu[slash - name] = '\0';
	snprintf(terms, sizeof(terms), "%s", slash + 1);
	if (terms[0] != '\0' && terms[strlen(terms) - 1] == '/')
		terms[strlen(terms) - 1] = '\0';
	if (strchr(pmu, '.') != NULL || strchr(terms, '/') != NULL || terms[0] == '\0')
		return -ENOENT;
	error = haecer__perf_pmu_type(pmu, &spec->type);
	return error < 0 ? error : apply_terms(pmu, terms, spec, 0);
}

const char *haecer_perf_software_event_name(size_t index)
{
	return index < sizeof(software_events) / sizeof(software_events[0])
		       ? software_events[index].name
		       : NULL;
}

int haecer_perf_event_by_name(const char *name, struct haecer_perf_spec *spec)
{
	int error;

	if (name == NULL || spec == NULL)
		return -EINVAL;
	*spec = (struct haecer_perf_spec){ .cpu = -1 };
	for (size_t i = 0; i < sizeof(software_events) / sizeof(software_events[0]); i++) {
		if (strcmp(name, software_events[i].name) == 0) {
			spec->type = PERF_TYPE_SOFTWARE;
			spec->config = software_events[i].config;
			return 0;
		}
	}
	error = pmu_event(name, spec);
	if (error < 0)
		*spec = (struct haecer_perf_spec){ .cpu = -1 };
	return error;
}
