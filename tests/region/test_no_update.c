/*
 * A region that spans no update of an energy register is reported as "below one update", with
 * what such a call can hold (the domain's maximum power x 1 ms), never as a confident 0 J. The
 * register reads the same at its end as at its begin, so its charge is 0, but that 0 is no
 * measurement: the text table marks the cell "?" and says how many calls and how much each can
 * hold, the +-J/call of the package domain is its maximum power x 1 ms (not 0 W x 1 ms), and
 * the CSV table and the JSON document count the calls per domain. A region that spans updates
 * is not marked. (region/test_attribution once charged the gpu domain 0 J without a word: msrd
 * had frozen its total, tests/server/test_energy_above_max_power.)
 *
 * In virtual time with no step per access, so "no update" is exact: the simulated clock stands
 * still inside the first region and moves 20 ms inside the second. The ideal simulated Sandy
 * Bridge states 35 W (pkg), 27 W (cores) and 0.25 W (gpu) as its maximum powers.
 */
#include "hw/msr.h"
#include "tests/region/region_test.h"

#define NS_PER_MS 1000000ull

static void advance(uint64_t ns)
{
	assert_int_equal(haecer_sim_advance(sim, ns, NULL), 0);
}

/* The line of the text report that starts with `name` (padded), copied. */
static void report_row(const char *text, const char *name, char *out, size_t size)
{
	char start[64];
	const char *row;

	snprintf(start, sizeof(start), "\n%s ", name);
	row = strstr(text, start);
	assert_non_null(row);
	row++;
	snprintf(out, size, "%.*s", (int)strcspn(row, "\n"), row);
}

/* Python's strict parser prints "name pkg cores gpu" of each region's no_update_calls, and the
 * gpu span's update_max_nJ. */
static const char json_reader[] =
	"import json, sys\n"
	"with open(sys.argv[1], encoding='utf-8') as f:\n"
	"    doc = json.load(f)\n"
	"print('span', doc['span']['energy-gpu']['update_max_nJ'])\n"
	"for r in doc['regions']:\n"
	"    n = r['no_update_calls']\n"
	"    print(r['name'], n['energy-pkg'], n['energy-cores'], n['energy-gpu'])\n";

static void check_json(const char *path)
{
	const char *argv[] = { "/usr/bin/python3", "-c", json_reader, path, NULL };
	char *out = NULL, *err = NULL;
	int status = harness_run(argv, &out, &err);

	if (status != 0)
		fprintf(stderr, "python3 json: %s\n", err);
	assert_int_equal(status, 0);
	fprintf(stderr, "%s", out);
	assert_non_null(strstr(out, "span 250000\n"));
	assert_non_null(strstr(out, "still 1 1 1\n"));
	assert_non_null(strstr(out, "moving 0 0 0\n"));
	free(out);
	free(err);
}

/* The CSV's energy-gpu_no_update_calls column: 1 for still, 0 for moving. */
static void check_csv(const char *path)
{
	char *text = region_read_text(path);
	const char *header_end, *column;
	size_t index = 0;

	assert_non_null(text);
	header_end = strstr(text, "\r\n");
	column = strstr(text, ",energy-gpu_no_update_calls");
	assert_non_null(column);
	assert_true(column < header_end);
	for (const char *at = text; at < column; at++)
		index += *at == ',';
	index++;
	for (const char *row = header_end + 2; *row != '\0'; row = strstr(row, "\r\n") + 2) {
		const char *field = row;
		for (size_t i = 0; i < index; i++)
			field = strchr(field, ',') + 1;
		if (strncmp(row, "\"still\"", 7) == 0)
			assert_int_equal(atoi(field), 1);
		else if (strncmp(row, "\"moving\"", 8) == 0)
			assert_int_equal(atoi(field), 0);
	}
	free(text);
}

/* Whether a cell of the row is a plain number in [lo, hi]. */
static bool row_has_value_in(const char *row, double lo, double hi)
{
	for (const char *at = row; *at != '\0'; at++) {
		char *end;
		double value;

		if (at[0] != ' ' || at[1] == ' ')
			continue;
		value = strtod(at + 1, &end);
		if (end != at + 1 && (*end == ' ' || *end == '\0') && value >= lo && value <= hi)
			return true;
	}
	return false;
}

static void test_region_without_update_is_not_a_measured_zero(void **state)
{
	const char *report = region_report_path("updates.txt", "");
	char row[1024];
	char *text;

	(void)state;
	/* Half way between two updates, and every domain counting at once. */
	advance(10 * NS_PER_MS + NS_PER_MS / 2);
	region_expect(haecer_region_begin("still"), "begin still");
	region_expect(haecer_region_end("still"), "end still");
	region_expect(haecer_region_begin("moving"), "begin moving");
	advance(20 * NS_PER_MS);
	region_expect(haecer_region_end("moving"), "end moving");
	region_expect(haecer_region_report(report), "report");

	text = region_read_text(report);
	assert_non_null(text);
	fprintf(stderr, "%s", text);
	report_row(text, "still", row, sizeof(row));
	/* Every energy cell of the row is marked, and its +-J/call is 35 W over an update
	 * interval, its lateness and the reads' round trips (issue 23: the bound of a difference
	 * of two readings), at least 35 W x 1.05 ms. */
	assert_non_null(strstr(row, " 0.000000? "));
	assert_null(strstr(row, " 0.000000 "));
	assert_true(row_has_value_in(row, 0.035 * 1.05, 0.035 * 1.05 + 0.002));
	report_row(text, "moving", row, sizeof(row));
	assert_null(strstr(row, "?"));
	assert_non_null(strstr(text, "? some calls spanned no update"));
	assert_non_null(strstr(text, "energy-gpu: 1 such calls, up to 0.000250 J each (0.250 W x 1 ms)"));
	assert_non_null(strstr(text, "energy-pkg: 1 such calls, up to 0.035000 J each"));
	free(text);
	check_csv(region_report_path("updates.txt", ".csv"));
	check_json(region_report_path("updates.txt", ".json"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_region_without_update_is_not_a_measured_zero),
	};
	const char *extra[] = { "--sim-virtual-time", "--sim-ideal", NULL };

	return REGION_RUN_GROUP(extra, tests);
}
