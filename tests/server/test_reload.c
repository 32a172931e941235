/*
 * SIGHUP reloads the policy: a valid new policy applies at once to clients already connected
 * (their grants are resolved again); an invalid one (syntax error, bad value, a file others may
 * write) is refused with the reason in the log and the old policy stays in force for old and new
 * connections.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "tests/lib/msrd_group.h"

#define HEADER "version: 1\ndefault: deny\nmsrs:\n" \
	"  - {name: TSC, address: 0x10, read: true, set: time}\n" \
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n" \
	"rules:\n"

static const char policy_time[] = HEADER "  - {match: {uid: 0}, allow: [time]}\n";
static const char policy_rapl[] = HEADER "  - {match: {uid: 0}, allow: [time, rapl]}\n";
static const char policy_broken_syntax[] = HEADER "  - {match: {uid: 0}, allow: [time, rapl]\n";
static const char policy_broken_value[] = HEADER "  - {match: {uid: 0}, allow: [no_such_set]}\n";

static struct msrd_server server;
static struct haecer_conn *conn;

/* Replace the policy the way an operator's editor or config management would: a new file. */
static void install_policy(const char *text, unsigned mode)
{
	char temporary[PATH_MAX + 8];

	snprintf(temporary, sizeof(temporary), "%s.new", server.policy_path);
	assert_int_equal(harness_write_file(temporary, text, mode), 0);
	assert_int_equal(rename(temporary, server.policy_path), 0);
}

static void reload_and_wait(const char *log_line)
{
	size_t before = msrd_log_count(&server, log_line);

	assert_int_equal(msrd_signal(&server, SIGHUP), 0);
	for (int i = 0; i < 3000 && msrd_log_count(&server, log_line) == before; i++)
		usleep(20000);
	assert_true(msrd_log_count(&server, log_line) > before);
}

static void test_good_reload_applies_to_connected_clients(void **state)
{
	uint64_t value;

	(void)state;
	assert_int_equal(haecer_msr_read(conn, 0, 0x10, &value), 0);
	assert_int_equal(haecer_msr_read(conn, 0, 0x611, &value), -EPERM);
	install_policy(policy_rapl, 0644);
	reload_and_wait("SIGHUP: policy reloaded");
	assert_int_equal(haecer_msr_read(conn, 0, 0x611, &value), 0);
}

static void check_still_rapl(void)
{
	struct haecer_conn *fresh;
	uint64_t value;

	assert_int_equal(haecer_msr_read(conn, 0, 0x611, &value), 0);
	assert_int_equal(haecer_connect(server.socket_path, &fresh), 0);
	assert_int_equal(haecer_msr_read(fresh, 0, 0x611, &value), 0);
	haecer_close(fresh);
}

static void test_bad_syntax_keeps_old_policy(void **state)
{
	(void)state;
	install_policy(policy_broken_syntax, 0644);
	reload_and_wait("keeping the current one");
	assert_true(msrd_log_contains(&server, "policy.yaml:8:1: syntax error"));
	check_still_rapl();
}

static void test_bad_value_keeps_old_policy(void **state)
{
	(void)state;
	install_policy(policy_broken_value, 0644);
	reload_and_wait("keeping the current one");
	assert_true(msrd_log_contains(&server, "no_such_set"));
	check_still_rapl();
}

static void test_insecure_file_keeps_old_policy(void **state)
{
	(void)state;
	install_policy(policy_time, 0666);
	reload_and_wait("keeping the current one");
	check_still_rapl();
	/* Made safe, the same file is accepted. */
	install_policy(policy_time, 0644);
	reload_and_wait("SIGHUP: policy reloaded");
	{
		uint64_t value;
		assert_int_equal(haecer_msr_read(conn, 0, 0x611, &value), -EPERM);
	}
}

int main(void)
{
	const char *arguments[] = { "--backend", "sim", NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_reload_applies_to_connected_clients),
		cmocka_unit_test(test_bad_syntax_keeps_old_policy),
		cmocka_unit_test(test_bad_value_keeps_old_policy),
		cmocka_unit_test(test_insecure_file_keeps_old_policy),
	};

	return MSRD_RUN_GROUP(&server, policy_time, arguments, &conn, tests);
}
