/*
 * haecer-mon follow on a ring msrd produces itself: a registered batch reading the package
 * energy, scheduled every 20 ms on the simulated CPU. The follower sees the records live, named
 * after the policy's MSR, in joules, with a power between consecutive records that the
 * simulated package can draw (above 0, below twice its maximum: the sim's energy moves in 1 ms
 * steps); when the schedule stops, the follower drains the ring and ends by itself.
 */
#include "tests/mon/mon_test.h"

#include <math.h>

#include "hw/msr.h"
#include "tests/lib/msrd_group.h"

#define RECORDS_WANTED 10

static struct msrd_server server;
static struct haecer_conn *conn;

static double package_max_watts(void)
{
	struct haecer_machine_info *machine = calloc(1, sizeof(*machine));
	double watts;

	assert_non_null(machine);
	assert_int_equal(haecer_machine_info(conn, machine), 0);
	watts = machine->rapl_max_power_mw[RAPL_DOMAIN_PKG] / 1000.0;
	free(machine);
	assert_true(watts > 0);
	return watts;
}

static void check_record(const char *line, bool first, double max_watts)
{
	char field[64];
	double watts;

	assert_true(json_field(line, "counter", field, sizeof(field)));
	assert_memory_equal(field, "PKG_ENERGY_STATUS@0", 20);
	assert_true(json_field(line, "joules", field, sizeof(field)));
	/* The register counts from 0 when the simulated CPU starts: a first reading taken before
	 * its first update (about 1 ms, later under load) is legitimately 0 J. */
	if (!(first ? strtod(field, NULL) >= 0 : strtod(field, NULL) > 0))
		fail_msg("no energy in a record: %s", line);
	if (first)
		return;
	assert_true(json_field(line, "watts", field, sizeof(field)));
	watts = strtod(field, NULL);
	if (!(watts > 0 && watts < 2 * max_watts))
		fail_msg("%g W for a package of at most %g W: %s", watts, max_watts, line);
}

static void test_follow_scheduled_ring(void **state)
{
	struct haecer_msr_op op = { .kind = HAECER_MSR_ENERGY_READ, .cpu = 0,
				    .address = MSR_PKG_ENERGY_STATUS };
	struct haecer_schedule_spec spec = { .period_ns = 20000000, .major = 3, .minor = 7,
					     .capacity = 1024 };
	const char *arguments[] = { "follow", "--format", "json", "3", "7", NULL };
	double max_watts = package_max_watts();
	uint32_t schedule, instance;
	struct proc follower;
	char line[512];
	char *out, *err;

	(void)state;
	assert_int_equal(haecer_batch_register(conn, &op, 1, &spec.handle), 0);
	assert_int_equal(haecer_schedule_start(conn, &spec, &schedule, &instance), 0);
	mon_start(&follower, server.socket_path, arguments);
	for (int i = 0; i < RECORDS_WANTED; i++) {
		assert_true(read_line(follower.out, line, sizeof(line), MON_TEST_TIMEOUT_MS));
		if (strstr(line, "\"type\":\"lost\"") != NULL) {
			i--; /* a period msrd could not serve: counted, not a record */
			continue;
		}
		check_record(line, i == 0, max_watts);
	}
	assert_int_equal(haecer_schedule_stop(conn, schedule), 0);
	assert_int_equal(proc_finish(&follower, &out, &err, MON_TEST_TIMEOUT_MS), 0);
	assert_non_null(strstr(err, "producer gone, ring drained"));
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_follow_scheduled_ring),
	};
	const char *arguments[] = { "--backend", "sim", NULL };

	signal(SIGPIPE, SIG_IGN);
	return MSRD_RUN_GROUP(&server, MON_TEST_POLICY, arguments, &conn, tests);
}
