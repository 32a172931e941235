/*
 * haecer-mon's JSON is JSON for any record a producer can push (issue 14, item 12). The unit
 * exponent comes from the producer: -2000 makes joules 2^2000 x value, which is no double, and
 * haecer-mon printed "joules":inf, which no JSON parser accepts. Every line of
 * `haecer-mon follow -f json` is checked with a strict parser (python3's json, with the
 * Infinity/NaN extensions turned into errors); the impossible value is null, the record's other
 * fields are there, and the text format still shows what was computed.
 */
#include "tests/mon/mon_test.h"

#include "tests/lib/msrd_group.h"

static struct msrd_server server;

static const char strict_json[] =
	"import json, sys\n"
	"def refuse(constant):\n"
	"    raise ValueError('not JSON: ' + constant)\n"
	"for number, line in enumerate(open(sys.argv[1]), 1):\n"
	"    value = json.loads(line, parse_constant=refuse)\n"
	"    assert isinstance(value, dict), number\n"
	"print('ok')\n";

static void test_impossible_joules_are_null(void **state)
{
	const char *arguments[] = { "follow", "-f", "json", "1", "5", NULL };
	const char *text_arguments[] = { "follow", "1", "5", NULL };
	char path[PATH_MAX + 16];
	struct producer producer;
	char *out = NULL, *err = NULL, *checked = NULL;
	char joules[64];
	char *lines[8];

	(void)state;
	producer_start(&producer, server.socket_path, 1, 5, 64);
	producer_say(&producer, "push 0 16384 1000000000");
	producer_say(&producer, "pushx 0 16384 1100000000 -2000");
	producer_say(&producer, "pushx 0 3 1200000000 2000");
	assert_int_equal(producer_end(&producer, "exit"), 0);

	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 0);
	snprintf(path, sizeof(path), "%s/follow.json", server.dir);
	assert_int_equal(harness_write_file(path, out, 0644), 0);
	{
		const char *python[] = { "/usr/bin/python3", "-c", strict_json, path, NULL };
		int status = harness_run(python, &checked, NULL);
		if (status != 0)
			fprintf(stderr, "strict parser refused:\n%s\n", out);
		assert_int_equal(status, 0);
		assert_string_equal(checked, "ok\n");
	}
	assert_int_equal(split_lines(out, lines, 8), 3);
	assert_true(json_field(lines[0], "joules", joules, sizeof(joules)));
	assert_true(near(strtod(joules, NULL), 1.0));
	assert_true(json_field(lines[1], "joules", joules, sizeof(joules)));
	assert_string_equal(joules, "null");
	assert_true(json_field(lines[1], "value", joules, sizeof(joules)));
	assert_string_equal(joules, "16384");
	assert_true(json_field(lines[2], "joules", joules, sizeof(joules)));
	assert_true(near(strtod(joules, NULL), 0.0));
	free(out);
	free(err);
	free(checked);

	assert_int_equal(mon_run(server.socket_path, text_arguments, &out, &err), 0);
	assert_non_null(strstr(out, "inf"));
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_impossible_joules_are_null),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
}
