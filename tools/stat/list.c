/*
 * tools/stat/list.c — "haecer-stat list", laid out like perf list: perf's generic hardware
 * events this machine can count, the energy domains of its RAPL (power/energy-pkg/ and the
 * others, as the kernel's power PMU names them), the fixed counters and raw syntax, and the
 * libpfm4 events of msrd's CPU model; where msrd runs its perf broker, also perf's software
 * events and the events of the kernel PMUs it brokers (msr/tsc/ ...). Every entry says through
 * which of msrd's backends it is counted ("via sim", "via powercap", "via perf broker"):
 * energy through msrd's backend, events through whatever opened them here (a counter slot of
 * the register backend, or a perf event of msrd's broker).
 */
#include "tools/stat/stat.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DEVICES "/sys/bus/event_source/devices"

/* Sections are set apart by a blank line, printed with a section's first line: one with
 * nothing to list here (no hardware events, no RAPL domain) must not leave a second blank. */
static bool blank_due;

static void section(void)
{
	blank_due = true;
}

static void line_start(void)
{
	if (blank_due)
		printf("\n");
	blank_due = false;
}

static void entry(const char *name, const char *kind, const char *via)
{
	line_start();
	printf("  %-44s [%s, via %s]\n", name, kind, via);
}

static void pfm_entry(void *arg, const char *name)
{
	line_start();
	printf("  %-44s [%s]\n", name, (const char *)arg);
}

#define VIA_BROKER STAT_PERF_BROKER

/* Which of msrd's backends serves what is listed, and whether its perf broker runs; returns
 * what counts events when no event says so by opening: the broker when it runs, else msrd's
 * backend. */
static const char *print_backend(const struct stat_options *options,
				 const struct haecer_context *ctx)
{
	const struct haecer_server_info *info;
	struct haecer_conn *conn;
	bool broker;

	if (haecer_connect(options->socket_path, &conn) < 0) {
		printf("backend: unknown (%s)\n", haecer_error_detail());
		return haecer_context_backend(ctx);
	}
	info = haecer_server_info(conn);
	broker = (info->features & HAECER_FEATURE_PERF) != 0;
	printf("backend: msrd --backend %s%s\n", haecer_backend_name(info->backend),
	       broker ? "; perf events (software, msr, power, core PMUs) through its perf broker"
		      : "");
	haecer_close(conn);
	return broker ? VIA_BROKER : haecer_context_backend(ctx);
}

/* What counted an event that opened: a perf event of msrd's broker, or msrd's backend. */
static const char *opened_via(const struct haecer_context *ctx,
			      const struct haecer_counter *counter)
{
	struct haecer_counter_info info;

	if (haecer_counter_info(counter, &info) == 0 && info.kind == HAECER_COUNTER_PERF)
		return VIA_BROKER;
	return haecer_context_backend(ctx);
}

/* perf's generic events this CPU has, each opened once on CPU 0 (which also tells whether
 * msrd's policy grants it and what counts it); returns what counts events here: `via` as the
 * last open said, or "nothing" when msrd could open none at all (a backend without counters
 * and no broker). */
static const char *list_generic(struct haecer_context *ctx, const char *via)
{
	bool counted = false, refused = false;

	for (size_t i = 0; i < haecer_generic_event_count(); i++) {
		struct haecer_counter *probe = NULL;
		const char *event = haecer_generic_event_name(i);
		int error = haecer_counter_open_named(ctx, 0, event, HAECER_FLAGS_DEFAULT,
						      HAECER_CMASK_NONE, &probe);
		if (error == -EOPNOTSUPP || error == -ENOENT)
			continue;
		if (error == 0)
			via = opened_via(ctx, probe);
		counted |= error == 0;
		refused |= error != 0;
		haecer_counter_free(probe);
		entry(event, error == 0 ? "Hardware event"
					: "Hardware event, not counted here: msrd's policy",
		      via);
	}
	return counted || refused || strcmp(via, VIA_BROKER) == 0
		       ? via
		       : "nothing (msrd's backend has no counters, its perf broker is off)";
}

/* perf's software events, an alias after its event as perf list writes them
 * ("context-switches OR cs"): the names haecer_perf_event_by_name knows. */
static void list_software(void)
{
	struct haecer_perf_spec spec, previous = { .type = UINT32_MAX };
	char line[160] = "";
	const char *name;

	for (size_t i = 0; (name = haecer_perf_software_event_name(i)) != NULL; i++) {
		size_t used = strlen(line);
		if (haecer_perf_event_by_name(name, &spec) < 0)
			continue;
		if (used > 0 && spec.config == previous.config) {
			snprintf(line + used, sizeof(line) - used, " OR %s", name);
			continue;
		}
		if (used > 0)
			entry(line, "Software event", VIA_BROKER);
		snprintf(line, sizeof(line), "%s", name);
		previous = spec;
	}
	if (line[0] != '\0')
		entry(line, "Software event", VIA_BROKER);
}

static int visible(const struct dirent *entry)
{
	return entry->d_name[0] != '.';
}

/* The events of one kernel PMU, as perf list writes them ("msr/tsc/"): the files of its
 * events/ directory, without their .scale / .unit companions. */
static void list_pmu_events(const char *root, const char *pmu)
{
	struct dirent **events;
	char path[512], name[STAT_NAME_MAX];
	int count;

	snprintf(path, sizeof(path), "%s" DEVICES "/%s/events", root, pmu);
	count = scandir(path, &events, visible, alphasort);
	for (int i = 0; i < count; i++) {
		if (strchr(events[i]->d_name, '.') == NULL) {
			snprintf(name, sizeof(name), "%s/%.64s/", pmu, events[i]->d_name);
			entry(name, "Kernel PMU event", VIA_BROKER);
		}
		free(events[i]);
	}
	if (count >= 0)
		free(events);
}

/* What msrd's perf broker counts besides perf's generic events: the software events and the
 * events of the kernel's msr and core PMUs (the classes msrd brokers; the power PMU's
 * energy-* are the energy domains listed below, counted by msrd's energy path). Without the
 * broker none of them is counted here, and the list says so. */
static void list_perf(bool broker)
{
	static const char *const pmus[] = { "msr", "cpu", "cpu_core", "cpu_atom" };
	const char *root = getenv(HAECER_SYSFS_ROOT_ENV);

	section();
	if (!broker) {
		line_start();
		printf("  (perf's software and kernel PMU events, e.g. context-switches and msr/tsc/, "
		       "are not counted here: msrd runs no perf broker)\n");
		return;
	}
	list_software();
	section();
	for (size_t i = 0; i < sizeof(pmus) / sizeof(pmus[0]); i++)
		list_pmu_events(root != NULL ? root : "", pmus[i]);
}

int stat_list(const struct stat_options *options)
{
	const struct haecer_machine_info *machine;
	struct haecer_context *ctx;
	const char *events_via, *backend_via;
	bool simulated;
	char name[64];

	if (haecer_context_open(options->socket_path, &ctx) < 0) {
		stat_error("%s", haecer_error_detail());
		return STAT_EXIT_FAILED;
	}
	machine = haecer_context_machine(ctx);
	simulated = (machine->flags & HAECER_MACHINE_SIMULATED) != 0;
	printf("List of events of %s%s (%u CPUs, %u package%s):\n",
	       simulated ? "the SIMULATED CPU " : "", simulated ? machine->sim_model
							     : machine->model_name,
	       machine->cpu_count, machine->package_count, machine->package_count == 1 ? "" : "s");
	backend_via = print_backend(options, ctx);
	section();
	events_via = list_generic(ctx, backend_via);
	list_perf(strcmp(backend_via, VIA_BROKER) == 0);
	section();
	for (unsigned domain = 0; domain < HAECER_RAPL_DOMAINS; domain++) {
		const char *domain_name = haecer_energy_domain_name(domain);
		if (domain_name == NULL || !(machine->rapl_domains & (1u << domain)))
			continue;
		snprintf(name, sizeof(name), "power/%s/", domain_name);
		entry(name, "Kernel PMU event, package-wide energy (J)", haecer_context_backend(ctx));
	}
	section();
	entry("fixed0, fixed1, fixed2", "Fixed counters (INST_RETIRED_ANY, CPU_CLK_UNHALTED_*)",
	      events_via);
	entry("rUUEE", "Raw event descriptor: umask UU, event EE (hex)", events_via);
	section();
	/* libpfm4's events of msrd's model (not necessarily the host's), as -e takes them. */
	const char *pmu = NULL;
	char kind[128];
	haecer_event_list(ctx, NULL, NULL, &pmu);
	snprintf(kind, sizeof(kind), "libpfm4 event of PMU %s, via %s", pmu != NULL ? pmu : "?",
		 events_via);
	if (haecer_event_list(ctx, pfm_entry, kind, NULL) < 0) {
		line_start();
		printf("  (no libpfm4 events: %s)\n", haecer_error_detail());
	}
	printf("\nModifiers :u (user) and :k (kernel) apply to every event above.\n");
	haecer_context_close(ctx);
	return 0;
}
