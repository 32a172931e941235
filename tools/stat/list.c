/*
 * tools/stat/list.c — "haecer-stat list", laid out like perf list: perf's generic hardware
 * events this machine can count, the energy domains of its RAPL (power/energy-pkg/ and the
 * others, as the kernel's power PMU names them), the fixed counters and raw syntax, and the
 * libpfm4 events of msrd's CPU model.
 */
#include "tools/stat/stat.h"

#include <errno.h>
#include <string.h>

static void entry(const char *name, const char *kind)
{
	printf("  %-44s [%s]\n", name, kind);
}

static void pfm_entry(void *arg, const char *name)
{
	entry(name, (const char *)arg);
}

/* Which of msrd's backends serves what is listed, and whether its perf broker runs. */
static void print_backend(const struct stat_options *options)
{
	const struct haecer_server_info *info;
	struct haecer_conn *conn;

	if (haecer_connect(options->socket_path, &conn) < 0) {
		printf("backend: unknown (%s)\n\n", haecer_error_detail());
		return;
	}
	info = haecer_server_info(conn);
	printf("backend: msrd --backend %s%s\n\n", haecer_backend_name(info->backend),
	       info->features & HAECER_FEATURE_PERF
		       ? "; perf events (software, msr, power, core PMUs) through its perf broker"
		       : "");
	haecer_close(conn);
}

int stat_list(const struct stat_options *options)
{
	const struct haecer_machine_info *machine;
	struct haecer_context *ctx;
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
	print_backend(options);
	for (size_t i = 0; i < haecer_generic_event_count(); i++) {
		/* Listed when this CPU has it: opened once on CPU 0, which also tells whether msrd's
		 * policy grants it. */
		struct haecer_counter *probe = NULL;
		struct haecer_counter_info info = { 0 };
		const char *event = haecer_generic_event_name(i);
		int error = haecer_counter_open_named(ctx, 0, event, HAECER_FLAGS_DEFAULT,
						      HAECER_CMASK_NONE, &probe);
		if (error == -EOPNOTSUPP || error == -ENOENT)
			continue; /* also: msrd's broker, and the kernel has no core PMU */
		if (error == 0)
			haecer_counter_info(probe, &info);
		haecer_counter_free(probe);
		entry(event, error < 0 ? "Hardware event, not counted here: msrd's policy"
			     : info.kind == HAECER_COUNTER_PERF ? "Hardware event, " STAT_PERF_BROKER
								: "Hardware event");
	}
	printf("\n");
	for (unsigned domain = 0; domain < HAECER_RAPL_DOMAINS; domain++) {
		const char *domain_name = haecer_energy_domain_name(domain);
		if (domain_name == NULL || !(machine->rapl_domains & (1u << domain)))
			continue;
		snprintf(name, sizeof(name), "power/%s/", domain_name);
		entry(name, "Kernel PMU event, package-wide energy (J)");
	}
	printf("\n");
	entry("fixed0, fixed1, fixed2", "Fixed counters (INST_RETIRED_ANY, CPU_CLK_UNHALTED_*)");
	entry("rUUEE", "Raw event descriptor: umask UU, event EE (hex)");
	printf("\n");
	/* libpfm4's events of msrd's model (not necessarily the host's), as -e takes them. */
	const char *pmu = NULL;
	char kind[64];
	haecer_event_list(ctx, NULL, NULL, &pmu);
	snprintf(kind, sizeof(kind), "libpfm4 event of PMU %s", pmu != NULL ? pmu : "?");
	if (haecer_event_list(ctx, pfm_entry, kind, NULL) < 0)
		printf("  (no libpfm4 events: %s)\n", haecer_error_detail());
	printf("\nModifiers :u (user) and :k (kernel) apply to every event above.\n");
	haecer_context_close(ctx);
	return 0;
}
