/*
 * backend/choose.c — which backend serves which event class on this machine (issue 24, item 3):
 * what `--backend auto` falls back to after msr and msr-safe (powercap for energy, then perf,
 * which has no registers and leaves everything to msrd's perf broker), whether the broker is
 * needed for counters, and `msrd --probe`'s report of each class and what is missing.
 *
 * Everything is looked up under the sysfs root (options->sysfs_root, else dev_root), so tests
 * see the same answers on stand-in trees.
 */
#include "backend/backend_internal.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "hw/rapl_quirks.h"
#include "hw/vendor.h"

static const char *sysfs_root(const struct backend_options *options)
{
	return options->sysfs_root ? options->sysfs_root : options->dev_root;
}

static bool exists(const struct backend_options *options, const char *relative)
{
	char path[PATH_MAX];
	struct stat st;

	return backend_root_path(path, sizeof(path), sysfs_root(options), "%s", relative) == 0 &&
	       stat(path, &st) == 0;
}

bool backend_perf_available(const struct backend_options *options)
{
	return exists(options, "proc/sys/kernel/perf_event_paranoid");
}

bool backend_programs_pmcs(const struct msr_backend *backend)
{
	if (backend->kind == BACKEND_SIM)
		return true;
	return (backend->kind == BACKEND_MSR || backend->kind == BACKEND_MSR_SAFE) &&
	       backend->writable && backend->cpu_count > 0 && backend->writable[0];
}

/* The event names a PMU lists (sys/bus/event_source/devices/PMU/events), comma-separated. */
static void pmu_events(const struct backend_options *options, const char *pmu, char *text,
		       size_t size)
{
	char path[PATH_MAX];
	struct dirent *entry;
	DIR *directory;

	text[0] = '\0';
	if (backend_root_path(path, sizeof(path), sysfs_root(options),
			      "sys/bus/event_source/devices/%s/events", pmu) < 0 ||
	    !(directory = opendir(path)))
		return;
	while ((entry = readdir(directory)) != NULL) {
		size_t used = strlen(text);

		if (entry->d_name[0] == '.' || strchr(entry->d_name, '.'))
			continue; /* .scale / .unit files describe an event, they are none */
		snprintf(text + used, size - used, "%s%s", used ? ", " : "", entry->d_name);
	}
	closedir(directory);
}

static bool pmu_present(const struct backend_options *options, const char *pmu)
{
	char relative[128];

	snprintf(relative, sizeof(relative), "sys/bus/event_source/devices/%s/type", pmu);
	return exists(options, relative);
}

/* A register backend opened just to see what it offers, then closed. */
static struct msr_backend *try_backend(const struct backend_options *options,
				       enum backend_kind kind, char *why, size_t why_size)
{
	struct backend_options trial = *options;
	struct msr_backend *backend = NULL;

	trial.kind = kind;
	if (backend_open(&trial, &backend, why, why_size) < 0)
		return NULL;
	return backend;
}

/* Granite Rapids' PSYS is TPMI's (hw/rapl_quirks.h): no MSR backend has it, powercap does when
 * the kernel has a psys zone, and one msrd serves every energy domain from one backend. */
static void report_psys(const struct backend_options *options, const struct machine_info *info,
			FILE *out)
{
	char why[512];
	struct msr_backend *powercap;
	bool zone;

	if (!rapl_psys_without_msr(cpu_vendor_is_intel(info->vendor), info->family, info->model))
		return;
	powercap = try_backend(options, BACKEND_POWERCAP, why, sizeof(why));
	zone = powercap && ((powercap->info.rapl_domains | powercap->info.rapl_dormant_domains) &
			    (1u << RAPL_DOMAIN_PSYS));
	backend_close(powercap);
	fprintf(out, "energy-psys: no MSR-side source on this model (it is in TPMI); psys: use "
		"--backend powercap (%s)\n", zone ? "the kernel's psys zone is there"
					      : "no psys zone in sys/class/powercap here");
}

static void report_energy(const struct backend_options *options, FILE *out)
{
	static const enum backend_kind order[] = { BACKEND_MSR, BACKEND_MSR_SAFE,
						   BACKEND_POWERCAP };
	char why[512], missing[1600] = "";

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		struct msr_backend *backend = try_backend(options, order[i], why, sizeof(why));
		uint32_t domains = backend ? backend->info.rapl_domains |
						     backend->info.rapl_dormant_domains
					   : 0;

		if (domains) {
			fprintf(out, "energy (RAPL): %s (domain mask %#x)\n",
				backend_kind_name(order[i]), domains);
			if (order[i] != BACKEND_POWERCAP)
				report_psys(options, &backend->info, out);
			backend_close(backend);
			return;
		}
		backend_close(backend);
		/* powercap's reason names itself already; the device backends' name a path. */
		snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s%s%s",
			 i ? "; " : "", order[i] == BACKEND_POWERCAP ? "" : backend_kind_name(order[i]),
			 order[i] == BACKEND_POWERCAP ? "" : ": ", backend ? "no RAPL domain" : why);
	}
	fprintf(out, "energy (RAPL): none (%s)%s\n", missing,
		pmu_present(options, "power") ? "; the power PMU is there: perf broker, class power"
					      : "");
}

static void report_counters(const struct backend_options *options, FILE *out)
{
	char why[512];
	struct msr_backend *backend = try_backend(options, BACKEND_MSR, why, sizeof(why));
	bool msr = backend && backend_programs_pmcs(backend);

	if (backend && !msr)
		snprintf(why, sizeof(why), "read-only: %s", backend->read_only_why
			 ? backend->read_only_why : "the device opens only for reading");
	backend_close(backend);
	if (msr)
		fprintf(out, "core PMCs: msr (counter slots)\n");
	else if (pmu_present(options, "cpu") && backend_perf_available(options))
		fprintf(out, "core PMCs: perf (broker, class core; the MSR path: %s)\n", why);
	else
		fprintf(out, "core PMCs: none (no writable MSR device: %s; no core PMU in "
			"sys/bus/event_source/devices/cpu: a VM without a virtual PMU?)\n", why);
}

void backend_probe_report(const struct backend_options *options, FILE *out)
{
	char events[512];
	bool perf = backend_perf_available(options);

	report_energy(options, out);
	report_counters(options, out);
	pmu_events(options, "msr", events, sizeof(events));
	if (perf && pmu_present(options, "msr"))
		fprintf(out, "msr PMU (%s): perf (broker, class msr)\n", events);
	else
		fprintf(out, "msr PMU: none (%s)\n", perf ? "no msr PMU in "
					"sys/bus/event_source/devices" : "no perf_event");
	pmu_events(options, "power", events, sizeof(events));
	if (perf && pmu_present(options, "power"))
		fprintf(out, "power PMU (%s): perf (broker, class power)\n", events);
	else
		fprintf(out, "power PMU: none (no power PMU in sys/bus/event_source/devices: no "
			"RAPL the kernel knows, or a VM)\n");
	fprintf(out, "software events: %s\n",
		perf ? "perf (broker, class software)" : "none (no perf_event in this kernel)");
}
