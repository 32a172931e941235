/*
 * tools/mon/metrics.c — the exporter's state as OpenMetrics 1.0.0 or Prometheus text 0.0.4.
 *
 * The two differ in counters' metadata: OpenMetrics names the family (`haecer_energy_joules`,
 * with `# UNIT`) and its sample `haecer_energy_joules_total`; Prometheus text names both
 * `..._total` and has no UNIT. OpenMetrics ends with `# EOF`. Every family's samples are
 * written together, a family without samples is left out, and label values are escaped (counter
 * names come from producers). With a simulated CPU behind msrd every sample carries
 * simulated="1".
 */
#include "tools/mon/serve.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LABELS 8u

struct family {
	const char *name;      /* a counter's without _total */
	bool counter;
	const char *unit;      /* OpenMetrics UNIT, a suffix of name; NULL for none */
	const char *help;
};

struct writer {
	FILE *out;
	bool openmetrics;
	bool simulated;        /* msrd presents a simulated CPU: label every sample */
	const struct family *started; /* the family whose metadata is written */
};

struct labels {
	size_t count;
	struct {
		const char *name;
		char value[RING_NAME_MAX + 8];
	} items[MAX_LABELS];
};

static const struct family msrd_up = {
	"haecer_msrd_up", false, NULL, "Whether the exporter is connected to msrd (1) or not (0)."
};
static const struct family backend_info = {
	"haecer_backend_info", false, NULL,
	"msrd's backend behind every figure (label backend: msr, msr-safe, powercap, perf, sim); "
	"always 1."
};
static const struct family energy_joules = {
	"haecer_energy_joules", true, "joules",
	"Energy of a RAPL domain since msrd began sampling it (msrd's 64-bit total)."
};
/* A separate family, so summing haecer_energy_joules by package never counts a die twice. */
static const struct family die_energy_joules = {
	"haecer_die_energy_joules", true, "joules",
	"Energy of a RAPL domain of one die of a multi-die package (Cascade Lake-AP); "
	"haecer_energy_joules is their sum."
};
static const struct family power_watts = {
	"haecer_power_watts", false, "watts",
	"Average power of a RAPL domain over the last sampling window."
};
static const struct family ring_records = {
	"haecer_ring_records", true, NULL, "Records pushed into the ring by its producers."
};
static const struct family ring_lost = {
	"haecer_ring_lost_records", true, NULL,
	"Records the exporter missed (overwritten before it read them, or dropped by a producer)."
};
static const struct family ring_dropped = {
	"haecer_ring_producer_dropped_records", true, NULL,
	"Records the ring's producers dropped because a slot was still being written."
};
static const struct family ring_producer_up = {
	"haecer_ring_producer_up", false, NULL, "Whether the ring's producer is still there."
};
static const struct family ring_value = {
	"haecer_ring_value", false, NULL, "Latest raw value of a counter in the ring."
};
static const struct family ring_energy = {
	"haecer_ring_energy_joules", true, "joules",
	"Energy counted by an energy counter of the ring (32-bit wraps undone)."
};
static const struct family ring_power = {
	"haecer_ring_power_watts", false, "watts",
	"Power between the latest two records of an energy counter of the ring."
};

static void label(struct labels *labels, const char *name, const char *format, ...)
	__attribute__((format(printf, 3, 4)));

static void label(struct labels *labels, const char *name, const char *format, ...)
{
	va_list arguments;

	if (labels->count == MAX_LABELS)
		return;
	labels->items[labels->count].name = name;
	va_start(arguments, format);
	vsnprintf(labels->items[labels->count].value, sizeof(labels->items[0].value), format,
		  arguments);
	va_end(arguments);
	labels->count++;
}

static void write_metadata(struct writer *writer, const struct family *family)
{
	const char *suffix = family->counter && !writer->openmetrics ? "_total" : "";

	fprintf(writer->out, "# HELP %s%s %s\n", family->name, suffix, family->help);
	fprintf(writer->out, "# TYPE %s%s %s\n", family->name, suffix,
		family->counter ? "counter" : "gauge");
	if (writer->openmetrics && family->unit != NULL)
		fprintf(writer->out, "# UNIT %s %s\n", family->name, family->unit);
	writer->started = family;
}

void serve_write_label_value(FILE *out, const char *value)
{
	for (const char *c = value; *c != '\0'; c++) {
		if (*c == '\\' || *c == '"')
			fputc('\\', out);
		if (*c == '\n') {
			fputs("\\n", out);
			continue;
		}
		fputc(*c, out);
	}
}

/* One sample line; `value` is already formatted. */
static void write_sample(struct writer *writer, const struct family *family,
			 const struct labels *labels, const char *value)
{
	size_t count = labels != NULL ? labels->count : 0;

	if (writer->started != family)
		write_metadata(writer, family);
	fprintf(writer->out, "%s%s", family->name, family->counter ? "_total" : "");
	for (size_t i = 0; i < count; i++) {
		fprintf(writer->out, "%s%s=\"", i == 0 ? "{" : ",", labels->items[i].name);
		serve_write_label_value(writer->out, labels->items[i].value);
		fputc('"', writer->out);
	}
	/* Every series of a simulated CPU says so, so no dashboard takes it for a measurement. */
	if (writer->simulated)
		fprintf(writer->out, "%ssimulated=\"1\"", count == 0 ? "{" : ",");
	fprintf(writer->out, "%s %s\n", count > 0 || writer->simulated ? "}" : "", value);
}

static void sample_u64(struct writer *writer, const struct family *family,
		       const struct labels *labels, uint64_t value)
{
	char text[24];

	snprintf(text, sizeof(text), "%" PRIu64, value);
	write_sample(writer, family, labels, text);
}

static void sample_double(struct writer *writer, const struct family *family,
			  const struct labels *labels, double value)
{
	char text[40];

	if (!isfinite(value) || (family->counter && value < 0))
		return;
	snprintf(text, sizeof(text), "%.15g", value);
	write_sample(writer, family, labels, text);
}

static void domain_labels(const struct serve_domain *domain, struct labels *labels)
{
	labels->count = 0;
	label(labels, "domain", "%s", domain->name);
	label(labels, "package", "%u", domain->package);
}

/* Each die's own total, only for packages whose dies have their own registers. */
static void write_die_energy(struct writer *writer, const struct serve_state *state)
{
	struct labels labels;

	for (size_t i = 0; i < state->domain_count; i++) {
		const struct serve_domain *domain = &state->domains[i];
		if (domain->die_count < 2 || !domain->have_total || domain->refused)
			continue;
		for (size_t die = 0; die < domain->die_count; die++) {
			domain_labels(domain, &labels);
			label(&labels, "die", "%zu", die);
			sample_double(writer, &die_energy_joules, &labels,
				      mon_joules(domain->die_totals[die], domain->exponent));
		}
	}
}

static void write_energy(struct writer *writer, const struct serve_state *state)
{
	struct labels labels;

	sample_u64(writer, &msrd_up, NULL, state->conn != NULL);
	if (state->conn != NULL && state->backend != NULL) {
		labels.count = 0;
		label(&labels, "backend", "%s", state->backend);
		sample_u64(writer, &backend_info, &labels, 1);
	}
	for (size_t i = 0; i < state->domain_count; i++) {
		const struct serve_domain *domain = &state->domains[i];
		domain_labels(domain, &labels);
		if (domain->have_total && !domain->refused)
			sample_double(writer, &energy_joules, &labels,
				      mon_joules(domain->total, domain->exponent));
	}
	for (size_t i = 0; i < state->domain_count; i++) {
		const struct serve_domain *domain = &state->domains[i];
		domain_labels(domain, &labels);
		if (domain->have_watts && !domain->refused)
			sample_double(writer, &power_watts, &labels, domain->watts);
	}
	write_die_energy(writer, state);
}

static void ring_labels(const struct serve_ring *ring, struct labels *labels)
{
	labels->count = 0;
	label(labels, "major", "%u", ring->ring.info.major);
	label(labels, "minor", "%u", ring->ring.info.minor);
	label(labels, "ring_instance", "%u", ring->ring.info.instance);
}

/* The ring's labels plus the counter's; energy counters call their name the domain. */
static void counter_labels(const struct serve_ring *ring, const struct mon_reading *reading,
			   struct labels *labels)
{
	ring_labels(ring, labels);
	label(labels, "counter_id", "%u", reading->counter_id);
	label(labels, reading->is_energy ? "domain" : "counter", "%s", reading->name);
	if (reading->package >= 0)
		label(labels, "package", "%d", (int)reading->package);
	if (reading->cpu >= 0)
		label(labels, "cpu", "%d", (int)reading->cpu);
}

static void write_ring_totals(struct writer *writer, const struct serve_state *state)
{
	const struct family *families[] = { &ring_records, &ring_lost, &ring_dropped,
					    &ring_producer_up };
	struct labels labels;

	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		for (size_t i = 0; i < state->ring_count; i++) {
			const struct serve_ring *ring = state->rings[i];
			struct ring_info info;
			uint64_t values[4];
			if (ring->corrupted)
				continue;
			ring_consumer_info(&ring->ring.consumer, &info);
			values[0] = info.pushed;
			values[1] = ring->lost;
			/* Rewritten since the last read: never more drops than records. */
			values[2] = info.producer_dropped < info.pushed ? info.producer_dropped
									: info.pushed;
			values[3] = !ring->producer_gone;
			ring_labels(ring, &labels);
			sample_u64(writer, families[f], &labels, values[f]);
		}
	}
}

/* 0: latest value, 1: energy total, 2: power. */
static void write_ring_counters(struct writer *writer, const struct serve_state *state,
				const struct family *family, int what)
{
	struct labels labels;

	for (size_t i = 0; i < state->ring_count; i++) {
		const struct serve_ring *ring = state->rings[i];
		for (size_t c = 0; !ring->corrupted && c < ring->latest_count; c++) {
			const struct mon_reading *reading = &ring->latest[c];
			counter_labels(ring, reading, &labels);
			if (what == 0)
				sample_u64(writer, family, &labels, reading->value);
			else if (what == 1 && reading->is_energy)
				sample_double(writer, family, &labels, reading->total_joules);
			else if (what == 2 && reading->is_energy && reading->have_watts)
				sample_double(writer, family, &labels, reading->watts);
		}
	}
}

int serve_render(const struct serve_state *state, bool openmetrics, char **text, size_t *length)
{
	struct writer writer = { .openmetrics = openmetrics, .simulated = state->simulated };
	int status = 0;

	*text = NULL;
	*length = 0;
	writer.out = open_memstream(text, length);
	if (writer.out == NULL)
		return -ENOMEM;
	write_energy(&writer, state);
	write_ring_totals(&writer, state);
	write_ring_counters(&writer, state, &ring_value, 0);
	write_ring_counters(&writer, state, &ring_energy, 1);
	write_ring_counters(&writer, state, &ring_power, 2);
	serve_attribution_render(state, writer.out, openmetrics);
	serve_slurm_render(state, writer.out, openmetrics);
	if (openmetrics)
		fputs("# EOF\n", writer.out);
	if (ferror(writer.out))
		status = -ENOMEM;
	if (fclose(writer.out) != 0)
		status = -ENOMEM;
	if (status < 0) {
		free(*text);
		*text = NULL;
		*length = 0;
	}
	return status;
}
