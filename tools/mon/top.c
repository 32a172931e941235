/*
 * tools/mon/top.c — `haecer-mon top`: the whole node's power, per package and RAPL domain, live,
 * as turbostat shows PkgWatt/CorWatt/GFXWatt/RAMWatt: one row per package and interval.
 *
 * msrd does the sampling: one registered batch reads every domain's energy total on the first
 * CPU of its package, and an msrd schedule runs it every --interval (default 1000 ms) into a
 * ring msrd produces (MAJOR MINOR as given, default TOP_MAJOR TOP_MINOR; a fresh instance);
 * top reads that ring. Watts come from
 * two consecutive sets of msrd's 64-bit totals and msrd's timestamps, so haecer-mon's own
 * scheduling delays do not distort them. Needs the policy's read grant of the energy registers
 * and create_rings and monitor_rings for the major (the shipped policy grants group haecer
 * majors 1-99).
 */
#include "tools/mon/mon.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define TOP_MAJOR 99u
#define TOP_MINOR 1u
#define TOP_DEFAULT_INTERVAL_MS 1000u
#define TOP_POLL_MS 20u
#define TOP_MAX_DOMAINS HAECER_SCHEDULE_MAX_OPS

struct top {
	enum mon_format format;
	bool header_done;
	bool simulated;
	const char *backend;           /* msrd's backend behind the figures: "msr", "sim", ... */
	const char *model;
	struct mon_energy_domain domains[TOP_MAX_DOMAINS];
	size_t domain_count;
	uint32_t packages;
	uint64_t wanted_rows;          /* --count: intervals to print; 0 unlimited */
	uint64_t rows_done;
	uint64_t set_timestamp;        /* the set being gathered */
	double set_seconds;
	bool have_set;
	bool have_watts[TOP_MAX_DOMAINS];
	double watts[TOP_MAX_DOMAINS];
	char columns[TOP_MAX_DOMAINS][40]; /* "energy-pkg_watts": rows keep pointers to them */
	struct mon_row row;
	struct mon_top_by *by;	       /* --by: rows per process or cgroup instead */
	double previous_seconds;       /* the set before, for --by's joules */
};

#define TOP_MAX_PACKAGES 64u

/* --by: the package energy of the interval that ends at this set (energy-pkg's watts × the time
 * since the set before) charged by the attribution engine; the first set only takes the engine's
 * first snapshot. */
static int print_set_by(struct top *top)
{
	double joules[TOP_MAX_PACKAGES] = { 0 };
	double interval_s = top->set_seconds - top->previous_seconds;
	unsigned packages = 0;
	bool any = false;

	for (size_t i = 0; i < top->domain_count; i++) {
		uint32_t package = top->domains[i].package;
		if (!top->have_watts[i] || strcmp(top->domains[i].name, "energy-pkg") != 0 ||
		    package >= TOP_MAX_PACKAGES)
			continue;
		joules[package] += top->watts[i] * interval_s; /* the dies of a package */
		packages = package + 1 > packages ? package + 1 : packages;
		any = true;
	}
	top->previous_seconds = top->set_seconds;
	int status = mon_top_by_print(top->by, top->format, &top->header_done, top->set_seconds,
				      interval_s, joules, any ? packages : 0, top->simulated);
	if (status < 0)
		return mon_fail("charging the energy to processes: %s", strerror(-status));
	if (any)
		top->rows_done++;
	return any && top->wanted_rows > 0 && top->rows_done >= top->wanted_rows ? -ECANCELED : 0;
}

/* Watts of domain `i`'s name in `package`: the sum of its dies (a Cascade Lake-AP package has
 * two, each with its own registers); false when none of them has watts yet. */
static bool package_watts(const struct top *top, size_t i, uint32_t package, double *watts)
{
	size_t found = 0, have = 0;

	*watts = 0.0;
	for (size_t j = i; j < top->domain_count; j++) {
		if (strcmp(top->domains[j].name, top->domains[i].name) != 0 ||
		    top->domains[j].package != package)
			continue;
		found++;
		if (top->have_watts[j]) {
			have++;
			*watts += top->watts[j];
		}
	}
	return found > 0 && have == found;
}

/* One row per package for the gathered set (when it has watts: not the first set). */
static int print_set(struct top *top)
{
	bool any = false;

	if (top->by && top->have_set)
		return print_set_by(top);
	for (size_t i = 0; i < top->domain_count; i++)
		any = any || top->have_watts[i];
	if (!top->have_set || !any)
		return 0;
	for (uint32_t package = 0; package < top->packages; package++) {
		struct mon_row *row = &top->row;
		mon_row_reset(row);
		mon_row_number(row, "seconds", 12, "%.3f", top->set_seconds);
		mon_row_number(row, "package", 7, "%" PRIu32, package);
		for (size_t i = 0; i < top->domain_count; i++) {
			/* Columns: every domain name once; a domain of another package (or PSYS,
			 * read through package 0) is absent in this package's row. */
			bool first_of_name = true;
			for (size_t j = 0; j < i; j++)
				first_of_name = first_of_name &&
						strcmp(top->domains[j].name, top->domains[i].name) != 0;
			if (!first_of_name)
				continue;
			double watts;
			const char *column = top->columns[i];
			if (package_watts(top, i, package, &watts))
				mon_row_number(row, column, 20, "%.3f", watts);
			else
				mon_row_absent(row, column, 20);
		}
		/* Whatever a simulated CPU gives must say so, in every format. */
		mon_row_string(row, "source", -10, top->simulated ? "simulated" : "hardware");
		mon_row_string(row, "backend", -9, top->backend);
		mon_row_print(stdout, top->format, row, &top->header_done);
	}
	fflush(stdout);
	top->rows_done++;
	return top->wanted_rows > 0 && top->rows_done >= top->wanted_rows ? -ECANCELED : 0;
}

static int take_reading(void *context, const struct mon_reading *reading)
{
	struct top *top = context;
	int status = 0;

	if (reading->counter_id >= top->domain_count)
		return 0;
	if (!top->have_set || reading->timestamp != top->set_timestamp) {
		status = print_set(top);
		memset(top->have_watts, 0, sizeof(top->have_watts));
		top->have_set = true;
		top->set_timestamp = reading->timestamp;
		top->set_seconds = reading->seconds;
	}
	top->have_watts[reading->counter_id] = reading->have_watts;
	top->watts[reading->counter_id] = reading->watts;
	return status;
}

static int note_lost(void *context, uint64_t lost, uint64_t lost_total)
{
	(void)context;
	tool_warn("%" PRIu64 " samples lost (%" PRIu64 " in all)", lost,
		  lost_total);
	return 0;
}

/* Register the batch and start the schedule; the ring's instance in *instance. */
static int start_schedule(struct haecer_conn *conn, const struct top *top, unsigned interval_ms,
			  const struct mon_ring_key *key, uint32_t *schedule, uint32_t *instance)
{
	struct haecer_msr_op ops[TOP_MAX_DOMAINS];
	struct haecer_schedule_spec spec = { .period_ns = interval_ms * 1000000ull,
					     .major = key->major, .minor = key->minor,
					     .capacity = 256 };
	uint32_t handle;
	int status;

	memset(ops, 0, sizeof(ops));
	for (size_t i = 0; i < top->domain_count; i++)
		ops[i] = (struct haecer_msr_op){ .kind = HAECER_MSR_ENERGY_READ,
						 .cpu = top->domains[i].cpu,
						 .address = top->domains[i].address };
	status = haecer_batch_register(conn, ops, top->domain_count, &handle);
	if (status < 0)
		return mon_fail("msrd refused reading the energy registers: %s",
				haecer_conn_error(conn)[0] != '\0' ? haecer_conn_error(conn)
								  : haecer_msrd_strerror(status));
	spec.handle = handle;
	status = haecer_schedule_start(conn, &spec, schedule, instance);
	haecer_batch_release(conn, handle);
	if (status < 0)
		return mon_fail("msrd refused the sampling schedule (ring %u.%u; top MAJOR MINOR "
				"picks another): %s", key->major, key->minor,
				haecer_conn_error(conn)[0] != '\0' ? haecer_conn_error(conn)
								   : haecer_msrd_strerror(status));
	return 0;
}

int mon_top_main(const struct mon_options *options, int count, char *const *words)
{
	struct top top = { .format = options->format, .wanted_rows = options->count };
	struct mon_watch_handler handler = { take_reading, note_lost, NULL, &top };
	unsigned interval_ms = options->given & MON_OPT_INTERVAL ? options->interval_ms
								   : TOP_DEFAULT_INTERVAL_MS;
	struct mon_watch_options watch = { options->duration, 0, TOP_POLL_MS };
	struct haecer_machine_info *machine = NULL;
	struct haecer_conn *conn = NULL;
	struct mon_watch_result result;
	uint32_t schedule = 0, instance = 0;
	struct mon_ring ring;
	bool scheduled = false;
	int status;

	struct mon_ring_key key = { TOP_MAJOR, TOP_MINOR, 0 };
	if (count > 0) {
		status = mon_parse_ring_key(words, count, &key);
		if (status != 0)
			return status;
		if (count > 2)
			return tool_usage_error("top takes MAJOR MINOR, not an instance");
	}
	if (options->by != MON_BY_PACKAGE) {
		status = mon_top_by_open(options->by, &top.by);
		if (status < 0)
			return mon_fail("the attribution engine: %s", strerror(-status));
	}
	status = mon_connect(options->socket_path, &conn);
	if (status != 0)
		goto out;
	machine = calloc(1, sizeof(*machine));
	status = machine != NULL ? haecer_machine_info(conn, machine) : -ENOMEM;
	if (status < 0) {
		status = mon_fail("asking msrd for the machine: %s", haecer_msrd_strerror(status));
		goto out;
	}
	top.simulated = (machine->flags & HAECER_MACHINE_SIMULATED) != 0;
	top.backend = mon_msrd_backend(conn);
	top.packages = machine->package_count;
	top.domain_count = mon_energy_dies(machine, top.domains, TOP_MAX_DOMAINS);
	for (size_t i = 0; i < top.domain_count; i++)
		snprintf(top.columns[i], sizeof(top.columns[i]), "%s_watts", top.domains[i].name);
	if (top.domain_count == 0) {
		status = mon_fail("this CPU has no RAPL energy domains");
		goto out;
	}
	status = start_schedule(conn, &top, interval_ms, &key, &schedule, &instance);
	if (status != 0)
		goto out;
	scheduled = true;
	status = mon_ring_open(conn, key.major, key.minor, instance, &ring);
	if (status < 0) {
		key.instance = instance;
		status = mon_ring_open_failed(conn, &key, status);
		goto out;
	}
	if (top.simulated && top.format == MON_FORMAT_TEXT)
		printf("# SIMULATED CPU %s: msrd's simulator, not hardware\n", machine->sim_model);
	mon_catch_stop_signals();
	mon_watch(conn, &ring, &watch, &handler, &result);
	mon_ring_close(&ring);
	if (result.end == MON_END_ERROR && result.error != -ECANCELED)
		status = mon_fail("reading the samples failed: %s", strerror(-result.error));
out:
	if (scheduled)
		haecer_schedule_stop(conn, schedule);
	free(machine);
	haecer_close(conn);
	mon_top_by_close(top.by);
	return status;
}
