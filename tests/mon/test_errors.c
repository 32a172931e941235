/*
 * haecer-mon's refusals: bad arguments exit 2 with a message naming the problem and nothing on
 * stdout; an unknown (major, minor) exits 1 saying there is no such ring; a ring the policy does
 * not let the caller monitor exits 1 with msrd's reason; each failure is one line on stderr.
 */
#include "tests/mon/mon_test.h"

#include "tests/lib/msrd_group.h"

static struct msrd_server server;

static void expect_exit(const char *const *arguments, int status, const char *in_err)
{
	char *out = NULL, *err = NULL;
	int got = mon_run(server.socket_path, arguments, &out, &err);

	if (got != status || strstr(err, in_err) == NULL)
		fprintf(stderr, "haecer-mon %s %s: exit %d\nstdout: %s\nstderr: %s\n",
			arguments[0], arguments[1] != NULL ? arguments[1] : "", got, out, err);
	assert_int_equal(got, status);
	assert_string_equal(out, "");
	assert_non_null(strstr(err, in_err));
	if (status == 1) {
		assert_non_null(strchr(err, '\n'));
		assert_int_equal(strchr(err, '\n')[1], '\0');
	}
	free(out);
	free(err);
}

static void test_bad_arguments(void **state)
{
	static const struct {
		const char *arguments[8];
		const char *message;
	} cases[] = {
		{ { NULL }, "missing command" },
		{ { "watch", NULL }, "unknown command 'watch'" },
		{ { "follow", "1", NULL }, "missing MAJOR and MINOR" },
		{ { "follow", "70000", "1", NULL }, "bad MAJOR '70000'" },
		{ { "follow", "1", "x", NULL }, "bad MINOR 'x'" },
		{ { "follow", "1", "-1", NULL }, "unknown option '-1'" },
		{ { "follow", "1", "1", "1", "1", NULL }, "unexpected argument '1'" },
		{ { "follow", "1", "1", "abc", NULL }, "bad INSTANCE 'abc'" },
		{ { "follow", "--format", "xml", "1", "1", NULL }, "--format takes text, csv or json" },
		{ { "follow", "--count", "0", "1", "1", NULL }, "--count takes a positive number" },
		{ { "follow", "--count", "many", "1", "1", NULL }, "--count takes" },
		{ { "follow", "--duration", "0", "1", "1", NULL }, "--duration takes" },
		{ { "follow", "--duration", "nan", "1", "1", NULL }, "--duration takes" },
		{ { "follow", "--interval", "0", "1", "1", NULL }, "--interval takes" },
		{ { "follow", "--output", "x.png", "1", "1", NULL }, "--output does not apply to follow" },
		{ { "follow", "1", "1", "--count", NULL }, "--count needs a value" },
		{ { "list", "extra", NULL }, "list takes no arguments" },
		{ { "list", "--count", "1", NULL }, "--count does not apply to list" },
		{ { "plot", "1", "1", NULL }, "plot needs -o FILE.png" },
		{ { "plot", "--format", "csv", "1", "1", "-o", "x.png", NULL }, "does not apply" },
		{ { "serve", "extra", NULL }, "serve takes no arguments" },
		{ { "serve", "--listen", "nocolon", NULL }, "--listen takes HOST:PORT" },
		{ { "serve", "--listen", "127.0.0.1:99999", NULL }, "--listen takes HOST:PORT" },
		{ { "--bogus", "list", NULL }, "unknown option '--bogus'" },
		/* The option itself (optopt), never the program's name or a neighbour. */
		{ { "-x,", "list", NULL }, "unknown option '-x'" },
		{ { "-x", ",", "list", NULL }, "unknown option '-x'" },
		{ { "--format=xml", "list", NULL }, "--format takes text, csv or json" },
		{ { "top", "1", "2", "3", NULL }, "top takes MAJOR MINOR" },
		{ { "top", "--output", "x.png", NULL }, "--output does not apply to top" },
		{ { "plot", "1", "1", "-o", "x.jpg", NULL }, "FILE.png or FILE.svg" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		expect_exit(cases[i].arguments, 2, cases[i].message);
	}
}

static void test_unknown_ring(void **state)
{
	char png[PATH_MAX + 16];

	(void)state;
	snprintf(png, sizeof(png), "%s/never.png", server.dir);
	expect_exit((const char *[]){ "follow", "3", "9", NULL }, 1, "no ring 3.9");
	expect_exit((const char *[]){ "follow", "3", "9", "42", NULL }, 1, "no ring 3.9.42");
	expect_exit((const char *[]){ "plot", "3", "9", "-o", png, NULL }, 1, "no ring 3.9");
	assert_int_equal(access(png, F_OK), -1);
}

static void test_denied_by_policy(void **state)
{
	struct producer producer;
	char png[PATH_MAX + 16];

	(void)state;
	snprintf(png, sizeof(png), "%s/denied.png", server.dir);
	/* Root may create rings of major 15 but monitor only 1-9. */
	producer_start(&producer, server.socket_path, 15, 1, 16);
	producer_say(&producer, "push 0 1 1");
	producer_sync(&producer);
	expect_exit((const char *[]){ "follow", "15", "1", NULL }, 1,
		    "uid 0 may not monitor rings of major 15");
	expect_exit((const char *[]){ "plot", "15", "1", "-o", png, NULL }, 1,
		    "may not monitor rings of major 15");
	assert_int_equal(producer_end(&producer, "exit"), 0);
	assert_true(msrd_log_contains(&server, "major not granted for monitoring"));
}

static void test_help(void **state)
{
	const char *arguments[] = { "--help", NULL };
	char *out, *err;

	(void)state;
	assert_int_equal(mon_run(server.socket_path, arguments, &out, &err), 0);
	assert_non_null(strstr(out, "Usage: haecer-mon"));
	assert_string_equal(err, "");
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_unknown_ring),
		cmocka_unit_test(test_denied_by_policy),
		cmocka_unit_test(test_help),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, NULL, tests);
}
