/*
 * A region report checked against known synthetic work. msrd runs the simulated Sandy Bridge in
 * virtual time with --sim-access-step-ns: time moves only when the test advances it (the
 * regions' "work") and by STEP_NS per register access, so every region's true time and energy
 * are known: its SIM_ADVANCEs at the loads the test set, and the simulator's ground truth of the
 * package energy around them.
 *
 *   solve                      1 call
 *     setup      50 ms at load 0.25
 *     iterate    3 calls, 40 ms at load 1 each, around
 *       kernel   3 calls, 60 ms at load 1 each
 *     (20 ms of its own work at load 1)
 *
 * What is exact: call counts; inclusive = exclusive + the children's inclusive, in every event
 * of the Callgrind file (integers); the summary is the outermost region's inclusive cost. What is
 * within the method's resolution: time (the markers' own register accesses, a few steps per
 * marker), energy (the RAPL register moves in 1 ms updates: up to one update's energy at each
 * end of a region) and cycles (the simulated rate, core_hz x load, over that time).
 * callgrind_annotate reads the file without a warning.
 */
#include <math.h>

#include "tests/region/region_test.h"

#define STEP_NS 100ull
#define MS 1000000ull
#define CORE_HZ 2.5e9    /* sandybridge.yaml core_hz */
#define IPC 1.2          /* sandybridge.yaml pmu.ipc */
/* Register accesses a marker pair adds to a region: the begin's batch after its TSC read and the
 * end's TSC read (TSC, energy, two counters each), and msrd's own energy sampling while the
 * region's SIM_ADVANCE runs: a generous bound, still microseconds. */
#define MARKER_NS (64 * STEP_NS)

struct expected {
	const char *name;
	uint64_t ns;          /* advanced inside, children included */
	double joules;        /* the simulator's truth over those advances */
	double cycles;        /* core_hz x load over them */
	unsigned instances;
};

static struct expected expected[] = {
	{ "solve", 0, 0, 0, 0 }, { "setup", 0, 0, 0, 0 }, { "iterate", 0, 0, 0, 0 },
	{ "kernel", 0, 0, 0, 0 },
};

static struct expected *expect_of(const char *name)
{
	for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
		if (strcmp(expected[i].name, name) == 0)
			return &expected[i];
	fail();
	return NULL;
}

/* Work inside the given open regions: advance virtual time at a load, and account the truth to
 * each of them. */
static void work(uint64_t ns, double load, const char *const *open, size_t open_count)
{
	struct haecer_sim_truth before, after;

	assert_int_equal(haecer_sim_set_load(sim, -1, load), 0);
	assert_int_equal(haecer_sim_energy_truth(sim, 0, 0, &before), 0);
	assert_int_equal(haecer_sim_advance(sim, ns, NULL), 0);
	assert_int_equal(haecer_sim_energy_truth(sim, 0, 0, &after), 0);
	for (size_t i = 0; i < open_count; i++) {
		struct expected *region = expect_of(open[i]);
		region->ns += ns;
		region->joules += after.joules - before.joules;
		region->cycles += CORE_HZ * load * (double)ns / 1e9;
	}
}

static void begin(const char *name)
{
	region_expect(haecer_region_begin(name), name);
	expect_of(name)->instances++;
}

static void end(const char *name)
{
	region_expect(haecer_region_end(name), name);
}

static void run_known_work(void)
{
	begin("solve");
	begin("setup");
	work(50 * MS, 0.25, (const char *[]){ "solve", "setup" }, 2);
	end("setup");
	for (int i = 0; i < 3; i++) {
		begin("iterate");
		work(40 * MS, 1.0, (const char *[]){ "solve", "iterate" }, 2);
		begin("kernel");
		work(60 * MS, 1.0, (const char *[]){ "solve", "iterate", "kernel" }, 3);
		end("kernel");
		end("iterate");
	}
	work(20 * MS, 1.0, (const char *[]){ "solve" }, 1);
	end("solve");
}

/* Inclusive cost of a region: from the arc of its (only) caller, or the summary for the
 * outermost one. */
static const uint64_t *inclusive_costs(const struct cg_file *file, const char *name)
{
	if (strcmp(name, "solve") == 0)
		return file->summary;
	return cg_arc(file, strcmp(name, "kernel") == 0 ? "iterate" : "solve", name)->inclusive;
}

static void check_region(const struct cg_file *file, const struct expected *region)
{
	const uint64_t *costs = inclusive_costs(file, region->name);
	double ns = (double)costs[cg_event(file, "Time_ns")];
	double joules = (double)costs[cg_event(file, "PkgWide_nJ")] / 1e9;
	double cycles = (double)costs[cg_event(file, "cycles")];
	double instructions = (double)costs[cg_event(file, "instructions")];
	double watts = region->joules / ((double)region->ns / 1e9);
	/* One RAPL update (1 ms) at each end of each instance, plus the marker's own time. */
	double energy_tolerance = region->instances * (2 * 35.0 * 1e-3 + watts * MARKER_NS / 1e9);

	fprintf(stderr, "%-8s %u calls: %.6f ms (known %.6f), %.6f J (known %.6f +- %.6f), "
		"%.0f cycles (known %.0f), IPC %.3f\n", region->name, region->instances, ns / 1e6,
		(double)region->ns / 1e6, joules, region->joules, energy_tolerance, cycles,
		region->cycles, instructions / cycles);
	assert_true(ns >= (double)region->ns);
	assert_true(ns - (double)region->ns <= region->instances * MARKER_NS * 4.0);
	assert_true(fabs(joules - region->joules) <= energy_tolerance);
	assert_true(fabs(cycles - region->cycles) <= 0.01 * region->cycles);
	assert_true(fabs(instructions / cycles - IPC) <= 0.01);
}

/* inclusive(function) = self + its calls' inclusive, and that is what its caller's arc says. */
static void check_exact_relations(const struct cg_file *file)
{
	for (size_t e = 0; e < file->event_count; e++) {
		assert_int_equal(cg_inclusive(cg_find(file, "solve"), e), file->summary[e]);
		assert_int_equal(cg_inclusive(cg_find(file, "iterate"), e),
				 cg_arc(file, "solve", "iterate")->inclusive[e]);
		assert_int_equal(cg_inclusive(cg_find(file, "kernel"), e),
				 cg_arc(file, "iterate", "kernel")->inclusive[e]);
		assert_int_equal(cg_inclusive(cg_find(file, "setup"), e),
				 cg_arc(file, "solve", "setup")->inclusive[e]);
		/* Leaves: all of it is their own. */
		assert_int_equal(cg_find(file, "kernel")->arc_count, 0);
	}
	assert_int_equal(cg_arc(file, "solve", "setup")->calls, 1);
	assert_int_equal(cg_arc(file, "solve", "iterate")->calls, 3);
	assert_int_equal(cg_arc(file, "iterate", "kernel")->calls, 3);
}

static void check_text(const char *path)
{
	char *text = region_read_text(path);

	assert_non_null(text);
	fprintf(stderr, "%s", text);
	assert_non_null(strstr(text, "simulated TSC"));
	assert_non_null(strstr(text, "package-wide"));
	assert_non_null(strstr(text, "\nsolve "));
	assert_non_null(strstr(text, "\n  setup "));
	assert_non_null(strstr(text, "\n  iterate "));
	assert_non_null(strstr(text, "\n    kernel "));
	free(text);
}

static void test_report_matches_known_work(void **state)
{
	const char *callgrind = region_report_path("regions.txt", ".callgrind");
	struct cg_file file;

	(void)state;
	run_known_work();
	region_expect(haecer_region_report(region_report_path("regions.txt", "")), "report");
	check_text(region_report_path("regions.txt", ""));
	cg_read(callgrind, &file);
	check_exact_relations(&file);
	for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
		check_region(&file, &expected[i]);
	cg_annotate_accepts(callgrind, "test_known_work.c:solve");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_matches_known_work),
	};
	/* Exact cycles of known work: the ideal CPU (a rough one spends ~0.9 % in SMIs). */
	const char *extra[] = { "--sim-virtual-time", "--sim-access-step-ns", "100", "--sim-ideal",
				NULL };

	return REGION_RUN_GROUP(extra, tests);
}
