/*
 * haecer-mon serve hands a stranger no more than the exporter publishes (issue 28, item 3).
 * serve runs under root's full energy grant; a process of uid 65534, which msrd does not serve
 * at all, scrapes GET /metrics as fast as it can for SPAN_MS:
 *   - it gets at most one fresh package total per --interval: distinct values - 1 <=
 *     span/interval + 1 (before: a fresh msrd read per scrape, every RAPL update);
 *   - every total it gets is a multiple of the running policy's coarse resolution, not msrd's
 *     2^-16 J units: the policy gives uid 65533 a coarse grant of 5 J and 2 s, coarser than
 *     serve's own default (1 J, 1 s), and serve, with no --resolution-uj, asks msrd for the
 *     policy's coarse setting (haecer_energy_grant) and publishes no finer than it;
 *   - it still sees the total move (the cache is refreshed each interval).
 * With neither --interval nor --resolution-uj, serve says on standard error at start that it
 * applied 2 s and 5 J, the policy's coarse setting, and a scrape shows a multiple of 5 J.
 */
#include "tests/mon/serve_test.h"

#include <sys/mman.h>

#include "tests/lib/msrd_group.h"

#define STRANGER_UID 65534
#define INTERVAL_MS 200u
#define SPAN_MS 1500u
#define MAX_VALUES 1024
#define POLICY_RESOLUTION_J 5.0

static struct msrd_server server;
static const char policy[] =
	MON_TEST_POLICY
	"  - match: {uid: 65533}\n"
	"    allow: [rapl]\n"
	"    energy: {min_interval_ms: 2000, resolution_uj: 5000000}\n";

static const char package[] =
	"haecer_energy_joules_total{domain=\"energy-pkg\",package=\"0\",simulated=\"1\"}";

struct scrape {
	unsigned port;
	double values[MAX_VALUES];
	unsigned count;          /* distinct values, in order */
	unsigned scrapes;
};

/* Runs as STRANGER_UID: scrape as fast as the exporter answers. Memory shared with the test. */
static int scrape_fast(void *argument)
{
	struct scrape *scrape = argument;
	uint64_t deadline = clock_monotonic_raw_ns() + SPAN_MS * 1000000ull;

	while (clock_monotonic_raw_ns() < deadline) {
		struct http_reply reply;
		double value;

		http_get(scrape->port, "/metrics", NULL, &reply);
		value = sample_value(reply.body, package);
		free(reply.text);
		scrape->scrapes++;
		if (isnan(value))
			continue;
		if (scrape->count > 0 && scrape->values[scrape->count - 1] == value)
			continue;
		if (scrape->count < MAX_VALUES)
			scrape->values[scrape->count++] = value;
	}
	return 0;
}

static void test_stranger_scraping_fast(void **state)
{
	struct scrape *scrape = mmap(NULL, sizeof(*scrape), PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct proc serve;
	char interval[16];

	(void)state;
	assert_true(scrape != MAP_FAILED);
	snprintf(interval, sizeof(interval), "%u", INTERVAL_MS);
	scrape->port = serve_start(&serve, server.socket_path, interval);
	assert_int_equal(run_as(STRANGER_UID, STRANGER_UID, NULL, 0, scrape_fast, scrape), 0);
	serve_stop(&serve, NULL);
	print_message("%u scrapes in %u ms: %u distinct package totals (interval %u ms)\n",
		      scrape->scrapes, SPAN_MS, scrape->count, INTERVAL_MS);
	assert_true(scrape->scrapes > scrape->count);
	assert_true(scrape->count >= 2);
	assert_true(scrape->count - 1 <= SPAN_MS / INTERVAL_MS + 1);
	for (unsigned i = 0; i < scrape->count; i++)
		assert_true(scrape->values[i] / POLICY_RESOLUTION_J ==
			    floor(scrape->values[i] / POLICY_RESOLUTION_J));
	munmap(scrape, sizeof(*scrape));
}

/* No --interval, no --resolution-uj: the running policy's coarse setting, logged at start. */
static void test_policy_setting_by_default(void **state)
{
	const char *arguments[] = { "serve", "--listen", "127.0.0.1:0", NULL };
	struct http_reply reply;
	struct proc serve;
	unsigned port;
	double value;
	char *err;

	(void)state;
	port = serve_start_arguments(&serve, server.socket_path, arguments);
	http_get(port, "/metrics", NULL, &reply);
	assert_int_equal(reply.code, 200);
	value = sample_value(reply.body, package);
	free(reply.text);
	serve_stop(&serve, &err);
	print_message("total %.6f J; serve said: %s", value, err);
	assert_false(isnan(value));
	assert_true(value / POLICY_RESOLUTION_J == floor(value / POLICY_RESOLUTION_J));
	assert_non_null(strstr(err, "energy totals at most once per 2 s, rounded down to 5 J "
				    "(no finer than the running policy's coarse setting"));
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_stranger_scraping_fast, serve_teardown),
		cmocka_unit_test_teardown(test_policy_setting_by_default, serve_teardown),
	};
	struct haecer_conn *sim;

	signal(SIGPIPE, SIG_IGN);
	/* Fully loaded (35 W), so that the total crosses many 5 J steps in SPAN_MS: at the model's
	 * idle 4 W a scraper might see one step only. */
	return msrd_run_sim_group(&server, policy, "sandybridge", FULL_LOAD_SCRIPT, NULL, &sim,
				  "test_serve_stranger", tests, sizeof(tests) / sizeof(tests[0]));
}
