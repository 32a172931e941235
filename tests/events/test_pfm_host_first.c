/*
 * tests/events/test_pfm_host_first.c — an application that initialises libpfm4 itself before
 * haecer (PAPI does). libpfm4 initialises once per process, so each case runs in its own
 * child process:
 *  - the application initialised plainly: a model other than the host's cannot resolve, and
 *    the error says why and what to set; the host's own model still resolves;
 *  - the application exported LIBPFM_ENCODE_INACTIVE=1 first: the model resolves;
 *  - the application forced another PMU with LIBPFM_FORCE_PMU: the error names the variable.
 * Children report through their exit status (cmocka's asserts must not run in a fork).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <perfmon/pfmlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/events/machines.h"

#define USR_OS (EVENT_FLAG_USR | EVENT_FLAG_OS)

enum app_setup { APP_PLAIN, APP_ENCODE_INACTIVE, APP_FORCE_OTHER_PMU };

/* Whether libpfm4, as the application initialised it, detected `name` on this host. */
static bool host_has_pmu(const char *name)
{
	for (int id = PFM_PMU_NONE + 1; id < PFM_PMU_MAX; id++) {
		pfm_pmu_info_t info;

		memset(&info, 0, sizeof(info));
		info.size = sizeof(info);
		if (pfm_get_pmu_info((pfm_pmu_t)id, &info) == PFM_SUCCESS && info.name &&
		    strcmp(info.name, name) == 0)
			return info.is_present;
	}
	return false;
}

/* 0 when haecer behaved as documented for this application setup. */
static int child_case(enum app_setup setup)
{
	struct event_machine machine = machine_sandy_bridge();
	struct event_encoding encoding;
	char why[EVENT_DB_WHY_SIZE] = "";
	struct event_db *db;
	bool resolvable;
	int error;

	unsetenv("LIBPFM_ENCODE_INACTIVE");
	unsetenv("LIBPFM_FORCE_PMU");
	if (setup == APP_ENCODE_INACTIVE)
		setenv("LIBPFM_ENCODE_INACTIVE", "1", 1);
	if (setup == APP_FORCE_OTHER_PMU)
		setenv("LIBPFM_FORCE_PMU", "amd64_fam19h_zen4", 1);
	if (pfm_initialize() != PFM_SUCCESS)
		return 10;
	resolvable = setup == APP_ENCODE_INACTIVE || host_has_pmu("snb");
	if (event_db_open(&machine, &db) != 0)
		return 11;
	error = event_db_pfm_encode(db, "L1D:REPLACEMENT", USR_OS, 0, &encoding, why, sizeof(why));
	event_db_close(db);
	if (resolvable)
		return error == 0 && encoding.evtsel == 0x00030151 ? 0 : 12;
	if (error != -EOPNOTSUPP)
		return 13;
	if (setup == APP_FORCE_OTHER_PMU)
		return strstr(why, "LIBPFM_FORCE_PMU=amd64_fam19h_zen4") ? 0 : 14;
	return strstr(why, "LIBPFM_ENCODE_INACTIVE=1") ? 0 : 15;
}

static int run_in_child(enum app_setup setup)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(child_case(setup));
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void application_initialised_plainly(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(APP_PLAIN), 0);
}

static void application_exported_encode_inactive(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(APP_ENCODE_INACTIVE), 0);
}

static void application_forced_another_pmu(void **state)
{
	(void)state;
	assert_int_equal(run_in_child(APP_FORCE_OTHER_PMU), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(application_initialised_plainly),
		cmocka_unit_test(application_exported_encode_inactive),
		cmocka_unit_test(application_forced_another_pmu),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
