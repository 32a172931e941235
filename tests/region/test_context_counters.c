/*
 * Regions read the counters the process set up before its first region, instead of the default
 * instructions and cycles: their names become the report's columns and their deltas follow the
 * simulated model (virtual time, every CPU busy): LLC references are 20 per 1000 instructions
 * on the Sandy Bridge model. A counter freed later is no longer read: regions that end after
 * that show "-" for it.
 */
#include <math.h>

#include "tests/region/region_test.h"

#define MS 1000000ull
#define LLC_PER_INSTRUCTION 0.020 /* sandybridge.yaml llc_references_per_kinst / 1000 */

static void work(const char *name, uint64_t ns)
{
	region_expect(haecer_region_begin(name), name);
	assert_int_equal(haecer_sim_advance(sim, ns, NULL), 0);
	region_expect(haecer_region_end(name), name);
}

static void test_regions_read_the_process_counters(void **state)
{
	const char *callgrind = region_report_path("counters.txt", ".callgrind");
	PerfCounter llc, instructions;
	struct cg_file file;
	char *text;

	(void)state;
	assert_int_equal(haecer_sim_set_load(sim, -1, 1.0), 0);
	llc = setupArchCounter(LL_CACHE_REFERENCES, 0, 0);
	instructions = setupFFCounter(INST_RETIRED_ANY, 0);
	assert_true(llc.valid);
	assert_true(instructions.valid);
	region_expect(haecer_region_begin("all"), "all");
	for (int i = 0; i < 3; i++)
		work("step", 10 * MS);
	freeCounter(&llc);
	work("after-free", 10 * MS);
	region_expect(haecer_region_end("all"), "all");
	freeCounter(&instructions);
	region_expect(haecer_region_report(region_report_path("counters.txt", "")), "report");

	text = region_read_text(region_report_path("counters.txt", ""));
	assert_non_null(text);
	fprintf(stderr, "%s", text);
	assert_non_null(strstr(text, "the context's own (LL_CACHE_REFERENCES, "));
	assert_null(strstr(text, " cycles "));
	/* "all" lost the LLC counter before its end and "after-free" never had it: "-" in the
	 * table. */
	const char *all = strstr(text, "\nall ");
	assert_non_null(all);
	assert_true(strstr(all, " - ") != NULL && strstr(all, " - ") < strchr(all + 1, '\n'));
	free(text);

	cg_read(callgrind, &file);
	/* time, the three Sandy Bridge domains, pkg-wide, then the context's two counters */
	assert_int_equal(file.event_count, 7);
	assert_string_equal(file.events[5], "LL_CACHE_REFERENCES");
	const struct cg_arc *step = cg_arc(&file, "all", "step");
	double references = (double)step->inclusive[5];
	double retired = (double)step->inclusive[6];
	fprintf(stderr, "step: %.0f LLC references, %.0f instructions\n", references, retired);
	assert_int_equal(step->calls, 3);
	assert_true(retired > 0);
	assert_true(fabs(references / retired - LLC_PER_INSTRUCTION) <= 0.001);
	assert_int_equal(cg_arc(&file, "all", "after-free")->inclusive[5], 0);
	assert_true(cg_arc(&file, "all", "after-free")->inclusive[6] > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_regions_read_the_process_counters),
	};
	const char *extra[] = { "--sim-virtual-time", "--sim-access-step-ns", "100", NULL };

	return REGION_RUN_GROUP(extra, tests);
}
