/*
 * Misused markers get a clear error and change nothing: an end without a begin, an end of a
 * region that is not the innermost one, bad names, too deep nesting, contexts that do not match,
 * a reset while a region is open. The report afterwards holds exactly the regions that were
 * begun and ended correctly.
 */
#include "tests/region/region_test.h"

static void expect_refused(int error, int expected, const char *detail_part)
{
	fprintf(stderr, "refused: %s (%s)\n", haecer_strerror(error), haecer_error_detail());
	assert_int_equal(error, expected);
	assert_non_null(strstr(haecer_error_detail(), detail_part));
}

static void test_end_without_begin(void **state)
{
	(void)state;
	expect_refused(haecer_region_end("never"), -EINVAL, "no region is open");
}

static void test_mismatched_end(void **state)
{
	(void)state;
	region_expect(haecer_region_begin("outer"), "begin outer");
	region_expect(haecer_region_begin("inner"), "begin inner");
	expect_refused(haecer_region_end("outer"), -EINVAL, "innermost open region");
	expect_refused(haecer_region_end("elsewhere"), -EINVAL, "\"inner\"");
	/* Nothing changed: the right order still works. */
	region_expect(haecer_region_end("inner"), "end inner");
	region_expect(haecer_region_end("outer"), "end outer");
	expect_refused(haecer_region_end("outer"), -EINVAL, "no region is open");
}

static void test_bad_names(void **state)
{
	char long_name[HAECER_REGION_NAME_MAX + 2];

	(void)state;
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	expect_refused(haecer_region_begin(NULL), -EINVAL, "needs a name");
	expect_refused(haecer_region_begin(""), -EINVAL, "needs a name");
	expect_refused(haecer_region_begin(long_name), -EINVAL, "longer than");
	expect_refused(haecer_region_end(NULL), -EINVAL, "needs a name");
}

static void test_too_deep(void **state)
{
	(void)state;
	for (unsigned i = 0; i < HAECER_REGION_MAX_DEPTH; i++)
		region_expect(haecer_region_begin("deep"), "begin");
	expect_refused(haecer_region_begin("deep"), -E2BIG, "regions open");
	for (unsigned i = 0; i < HAECER_REGION_MAX_DEPTH; i++)
		region_expect(haecer_region_end("deep"), "end");
}

static void test_contexts_must_match(void **state)
{
	struct haecer_context *mine, *other;

	(void)state;
	region_expect(haecer_context_open(server.socket_path, &mine), "context");
	region_expect(haecer_context_open(server.socket_path, &other), "context");
	expect_refused(haecer_region_begin_ctx(NULL, "x"), -EINVAL, "no context");
	region_expect(haecer_region_begin_ctx(mine, "explicit"), "begin_ctx");
	expect_refused(haecer_region_end("explicit"), -EINVAL, "haecer_region_end_ctx");
	expect_refused(haecer_region_end_ctx(other, "explicit"), -EINVAL, "another context");
	region_expect(haecer_region_end_ctx(mine, "explicit"), "end_ctx");
	haecer_context_close(other);
	haecer_context_close(mine);
}

static void test_reset_refused_while_open(void **state)
{
	(void)state;
	region_expect(haecer_region_begin("open"), "begin");
	expect_refused(haecer_region_reset(), -EBUSY, "open");
	region_expect(haecer_region_end("open"), "end");
}

/* Runs last: the report holds the correctly paired regions only, once each. */
static void test_report_holds_what_was_paired(void **state)
{
	const char *callgrind = region_report_path("misuse.txt", ".callgrind");
	struct cg_file file;

	(void)state;
	region_expect(haecer_region_report(region_report_path("misuse.txt", "")), "report");
	cg_read(callgrind, &file);
	assert_int_equal(cg_arc(&file, "outer", "inner")->calls, 1);
	assert_int_equal(cg_arc(&file, "deep", "deep")->calls, HAECER_REGION_MAX_DEPTH - 1);
	assert_int_equal(cg_find(&file, "explicit")->arc_count, 0);
	assert_int_equal(cg_find(&file, "open")->arc_count, 0);
	for (size_t i = 0; i < file.count; i++) {
		assert_string_not_equal(file.functions[i].name, "never");
		assert_string_not_equal(file.functions[i].name, "elsewhere");
	}
	region_expect(haecer_region_reset(), "reset");
}

/* Programs built before haecer_region_begin became a macro call the functions of the plain
 * names: they still work, without a call site ("???" at line 0 in Callgrind, null in JSON);
 * a later begin with a call site gives the region its place. */
static void test_plain_functions_without_call_site(void **state)
{
	const char *callgrind = region_report_path("plain.txt", ".callgrind");
	char *text, *json;

	(void)state;
	region_expect((haecer_region_begin)("plain"), "plain begin");
	region_expect(haecer_region_end("plain"), "plain end");
	region_expect((haecer_region_begin_ctx)(NULL, "x") == -EINVAL ? 0 : -1, "ctx refused");
	region_expect(haecer_region_report(region_report_path("plain.txt", "")), "report");
	text = region_read_text(callgrind);
	json = region_read_text(region_report_path("plain.txt", ".json"));
	assert_non_null(text);
	assert_non_null(json);
	assert_non_null(strstr(text, "???\nfn=("));
	assert_non_null(strstr(json, "\"name\": \"plain\", \"file\": null, \"line\": 0"));
	free(text);
	free(json);
	region_expect(haecer_region_reset(), "reset");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_end_without_begin),
		cmocka_unit_test(test_mismatched_end),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_too_deep),
		cmocka_unit_test(test_contexts_must_match),
		cmocka_unit_test(test_reset_refused_while_open),
		cmocka_unit_test(test_report_holds_what_was_paired),
		cmocka_unit_test(test_plain_functions_without_call_site),
	};

	return REGION_RUN_GROUP(NULL, tests);
}
