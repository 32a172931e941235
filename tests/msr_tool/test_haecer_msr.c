/*
 * haecer-msr against a real msrd on the msr backend with a stand-in device tree, so every value
 * is known: rdmsr's output options (hex default, -X, -c, -0, -d, -u, -o, -f HI:LO), --all-cpus,
 * writes that reach the device, batch files, and the exit statuses: 0 success, 1 with one line
 * for a refusal, a device error or no server, 2 for bad usage.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/lib/msrd_group.h"

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: base}\n"
	"  - {name: NEGATIVE, address: 0x100, read: true, set: base}\n"
	"  - {name: PERFEVTSEL0, address: 0x186, read: true, write_mask: 0xFFCFFFFF, set: base}\n"
	"  - {name: MISSING, address: 0x2000, read: true, set: base}\n"
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: other}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [base]}\n";

static struct msrd_server server;
static char tree[PATH_MAX + 16];
static char tool[PATH_MAX + 16];

/* haecer-msr --socket SOCKET arguments...; checks the exit status and exact stdout, and that
 * stderr contains `in_err` and is at most one line. */
static void expect(const char *const *arguments, int status, const char *out_exact,
		   const char *in_err)
{
	const char *argv[24] = { tool, "--socket", server.socket_path };
	size_t count = 3;
	char *out = NULL;
	char *err = NULL;
	int got;

	for (size_t i = 0; arguments[i] != NULL && count < 23; i++)
		argv[count++] = arguments[i];
	argv[count] = NULL;
	got = harness_run(argv, &out, &err);
	if (got != status || (out_exact != NULL && strcmp(out, out_exact) != 0) ||
	    (in_err != NULL && strstr(err, in_err) == NULL))
		fprintf(stderr, "haecer-msr %s ...: exit %d\nstdout:\n%s\nstderr:\n%s\n",
			arguments[0], got, out, err);
	assert_int_equal(got, status);
	if (out_exact != NULL)
		assert_string_equal(out, out_exact);
	if (in_err != NULL)
		assert_non_null(strstr(err, in_err));
	if (status == 1) {
		char *newline = strchr(err, '\n');
		assert_non_null(newline);
		assert_int_equal(newline[1], '\0'); /* exactly one line */
	}
	free(out);
	free(err);
}

static uint64_t file_value(unsigned cpu, uint32_t address)
{
	uint64_t value = 0;

	assert_int_equal(harness_standin_read(tree, cpu, address, &value), 0);
	return value;
}

static void test_output_formats(void **state)
{
	(void)state;
	expect((const char *[]){ "read", "0", "0x10", NULL }, 0, "1122334455667788\n", NULL);
	expect((const char *[]){ "read", "0", "16", NULL }, 0, "1122334455667788\n", NULL);
	expect((const char *[]){ "-X", "read", "0", "0x10", NULL }, 0, "1122334455667788\n", NULL);
	expect((const char *[]){ "-X", "read", "0", "0x100", NULL }, 0, "FFFFFFFFFFFFFFFE\n", NULL);
	expect((const char *[]){ "-c", "read", "0", "0x10", NULL }, 0, "0x1122334455667788\n",
	       NULL);
	expect((const char *[]){ "-f", "15:8", "read", "0", "0x10", NULL }, 0, "77\n", NULL);
	expect((const char *[]){ "-f", "11:0", "read", "0", "0x10", NULL }, 0, "788\n", NULL);
	expect((const char *[]){ "-0", "-f", "15:4", "read", "0", "0x10", NULL }, 0, "778\n", NULL);
	expect((const char *[]){ "-0", "-f", "19:16", "read", "1", "0x10", NULL }, 0, "0\n", NULL);
	expect((const char *[]){ "-0", "read", "1", "0x10", NULL }, 0, "0000000000000099\n", NULL);
	expect((const char *[]){ "-d", "read", "0", "0x100", NULL }, 0, "-2\n", NULL);
	expect((const char *[]){ "-u", "read", "0", "0x100", NULL }, 0, "18446744073709551614\n",
	       NULL);
	expect((const char *[]){ "-d", "read", "1", "0x10", NULL }, 0, "153\n", NULL);
	expect((const char *[]){ "-o", "-f", "5:0", "read", "0", "0x10", NULL }, 0, "10\n", NULL);
	expect((const char *[]){ "-c", "-o", "-f", "5:0", "read", "0", "0x10", NULL }, 0, "010\n",
	       NULL);
	/* Options may follow the command, as with getopt's permutation. */
	expect((const char *[]){ "read", "0", "0x10", "-f", "7:0", NULL }, 0, "88\n", NULL);
}

static void test_all_cpus(void **state)
{
	(void)state;
	expect((const char *[]){ "read", "--all-cpus", "0x10", NULL }, 0,
	       "1122334455667788\n99\n", NULL);
	expect((const char *[]){ "-a", "write", "0x186", "0x5", NULL }, 0, "", NULL);
	assert_int_equal(file_value(0, 0x186), 0x5);
	assert_int_equal(file_value(1, 0x186), 0x5);
}

static void test_writes_and_refusals(void **state)
{
	(void)state;
	expect((const char *[]){ "write", "1", "0x186", "0x43003c", NULL }, 0, "", NULL);
	assert_int_equal(file_value(1, 0x186), 0x43003c);
	expect((const char *[]){ "read", "1", "0x186", NULL }, 0, "43003c\n", NULL);
	expect((const char *[]){ "write", "1", "0x186", "0x53003c", NULL }, 1, "",
	       "outside the mask");
	assert_int_equal(file_value(1, 0x186), 0x43003c);
	expect((const char *[]){ "read", "0", "0x611", NULL }, 1, "", "denied by policy");
	expect((const char *[]){ "read", "0", "0x2000", NULL }, 1, "", "cpu 0 MSR 0x2000");
	expect((const char *[]){ "read", "7", "0x10", NULL }, 1, "", "no such CPU");
}

static void test_usage_errors(void **state)
{
	(void)state;
	expect((const char *[]){ NULL }, 2, "", "missing command");
	expect((const char *[]){ "read", "0", NULL }, 2, "", "read takes");
	expect((const char *[]){ "read", "zero", "0x10", NULL }, 2, "", "bad CPU");
	expect((const char *[]){ "read", "0", "0x1g", NULL }, 2, "", "bad MSR address");
	expect((const char *[]){ "write", "0", "0x186", NULL }, 2, "", "write takes");
	expect((const char *[]){ "write", "0", "0x186", "0x1zz", NULL }, 2, "", "bad value");
	expect((const char *[]){ "frobnicate", NULL }, 2, "", "unknown command");
	expect((const char *[]){ "-f", "3:9", "read", "0", "0x10", NULL }, 2, "", "-f takes");
	expect((const char *[]){ "-f", "64:0", "read", "0", "0x10", NULL }, 2, "", "-f takes");
	expect((const char *[]){ "--bogus", "read", "0", "0x10", NULL }, 2, "", "--help");
	expect((const char *[]){ "--help", NULL }, 0, NULL, NULL);
	/* tools/common: the option named by optopt, and --version like every haecer binary. */
	expect((const char *[]){ "-Z", "read", "0", "0x10", NULL }, 2, "", "unknown option '-Z'");
	expect((const char *[]){ "-f", NULL }, 2, "", "-f needs a value");
	expect((const char *[]){ "--version", NULL }, 0, "haecer-msr " HAECER_VERSION "\n", NULL);
}

static void test_batch(void **state)
{
	char good[PATH_MAX + 32];
	char refused[PATH_MAX + 32];
	char broken[PATH_MAX + 32];

	(void)state;
	snprintf(good, sizeof(good), "%s/good.batch", server.dir);
	snprintf(refused, sizeof(refused), "%s/refused.batch", server.dir);
	snprintf(broken, sizeof(broken), "%s/broken.batch", server.dir);
	assert_int_equal(harness_write_file(good,
					    "# program, then read back\n"
					    "write 0 0x186 0x4300c0\n"
					    "\n"
					    "read 0 0x186   # the value just written\n"
					    "read 1 0x10\n",
					    0644),
			 0);
	assert_int_equal(harness_write_file(refused,
					    "write 0 0x186 0x12345\n"
					    "read 0 0x611\n",
					    0644),
			 0);
	assert_int_equal(harness_write_file(broken, "read 0 0x10\nread 0\n", 0644), 0);
	expect((const char *[]){ "batch", good, NULL }, 0, "4300c0\n99\n", NULL);
	expect((const char *[]){ "-c", "batch", good, NULL }, 0, "0x4300c0\n0x99\n", NULL);
	/* Checked whole: the refused read on line 2 means the write on line 1 never ran. */
	expect((const char *[]){ "batch", refused, NULL }, 1, "", "line 2: read cpu 0 MSR 0x611");
	assert_int_equal(file_value(0, 0x186), 0x4300c0);
	expect((const char *[]){ "batch", broken, NULL }, 2, "", "broken.batch:2:");
	expect((const char *[]){ "batch", NULL }, 2, "", "batch takes");
}

static void test_no_server(void **state)
{
	const char *argv[] = { tool, "--socket", "/nonexistent/msrd.sock", "read", "0", "0x10",
			       NULL };
	char *err = NULL;

	(void)state;
	assert_int_equal(harness_run(argv, NULL, &err), 1);
	assert_non_null(strstr(err, "cannot connect to msrd at /nonexistent/msrd.sock"));
	free(err);
	/* $HAECER_SOCKET names the socket when --socket is absent. */
	setenv("HAECER_SOCKET", server.socket_path, 1);
	{
		const char *plain[] = { tool, "read", "1", "0x10", NULL };
		char *out = NULL;
		assert_int_equal(harness_run(plain, &out, NULL), 0);
		assert_string_equal(out, "99\n");
		free(out);
	}
	unsetenv("HAECER_SOCKET");
}

/* The stand-in device tree msrd reads, with the values the tests expect. */
static int make_tree(const struct msrd_server *msrd)
{
	snprintf(tree, sizeof(tree), "%s/root", msrd->dir);
	if (harness_standin_msr_tree(tree, 2, 0x1000) < 0 ||
	    harness_standin_write(tree, 0, 0x10, 0x1122334455667788ull) < 0 ||
	    harness_standin_write(tree, 1, 0x10, 0x99) < 0 ||
	    harness_standin_write(tree, 0, 0x100, 0xFFFFFFFFFFFFFFFEull) < 0)
		return -1;
	return 0;
}

int main(void)
{
	const char *arguments[] = { "--backend", "msr", "--dev-root", tree, NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_output_formats),
		cmocka_unit_test(test_all_cpus),
		cmocka_unit_test(test_writes_and_refusals),
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_batch),
		cmocka_unit_test(test_no_server),
	};

	snprintf(tool, sizeof(tool), "%s/haecer-msr", harness_build_dir());
	return MSRD_RUN_GROUP_PREPARED(&server, policy, make_tree, arguments, NULL, tests);
}
