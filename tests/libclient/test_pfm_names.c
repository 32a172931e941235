/*
 * Non-architectural events by libpfm4 name on the simulated model (not the host's): msrd's
 * machine description selects the libpfm4 table, the name becomes the model's PERFEVTSEL /
 * PERF_CTL encoding, and the counter counts at exactly the rate the simulated model gives that
 * event (virtual time, full load). Names of architectural events, also libpfm4's own spelling
 * of one, land on the fixed counter that counts the same event. Flags and a counter mask become
 * the encoding's bits.
 */
#include "tests/libclient/libclient_test.h"

#define USR_OS 0x00030000ull

struct named_event {
	const char *name;
	uint64_t config;        /* PERFEVTSEL / PERF_CTL (EN clear) or the fixed field */
	uint16_t kind;
	uint64_t per_ms;        /* events per ms at full load on the model */
};

/* sandybridge: 2.5 GHz, IPC 1.2 -> 3 M instructions/ms; UOPS_ISSUED 1100/kinst,
 * MEM_UOPS_RETIRED.ALL_LOADS 300/kinst (configs/models/sandybridge.yaml). */
static const struct named_event sandybridge[] = {
	{"UOPS_ISSUED:ANY", USR_OS | 0x010E, HAECER_COUNTER_PROGRAMMABLE, 3300000},
	{"snb::MEM_UOPS_RETIRED:ALL_LOADS", USR_OS | 0x81D0, HAECER_COUNTER_PROGRAMMABLE, 900000},
	{"INST_RETIRED:ANY_P", 0x3, HAECER_COUNTER_FIXED, 3000000},
	{"UNHALTED_REF_CYCLES", 0x3, HAECER_COUNTER_FIXED, 2500000},
	{NULL, 0, 0, 0},
};

/* zen3: 3.8 GHz, its IPC from configs/models/zen3.yaml. */
static const struct named_event zen3[] = {
	{"RETIRED_INSTRUCTIONS", USR_OS | 0xC0, HAECER_COUNTER_PROGRAMMABLE, 0},
	{"CYCLES_NOT_IN_HALT", USR_OS | 0x76, HAECER_COUNTER_PROGRAMMABLE, 3800000},
	{NULL, 0, 0, 0},
};

static void check_events(const struct named_event *events)
{
	struct haecer_counter_info info;

	assert_int_equal(haecer_sim_set_load(sim, -1, 1.0), 0);
	for (const struct named_event *event = events; event->name != NULL; event++) {
		PerfCounter ctr = setupNamedCounter(event->name, 0, 0);
		unsigned long long before;

		libclient_explain(event->name, ctr.error);
		assert_true(ctr.valid);
		assert_int_equal(haecer_counter_info(haecer_perf_counter(&ctr), &info), 0);
		assert_true(info.simulated); /* msrd runs the simulated CPU */
		fprintf(stderr, "%s: %s, config %#llx\n", event->name, info.name,
			(unsigned long long)info.config);
		assert_int_equal(info.kind, event->kind);
		assert_int_equal(info.config, event->config);
		before = readCounter(&ctr);
		assert_int_equal(haecer_sim_advance(sim, NS_PER_MS, NULL), 0);
		if (event->per_ms != 0)
			assert_int_equal(readCounter(&ctr) - before, event->per_ms);
		else
			assert_true(readCounter(&ctr) > before);
		freeCounter(&ctr);
	}
}

static void test_sandybridge_names(void **state)
{
	(void)state;
	check_events(sandybridge);
}

static void test_flags_and_mask(void **state)
{
	struct haecer_counter_info info;
	PerfCounter ctr = setupNamedCounter("UOPS_ISSUED:ANY", HAECER_FLAG_USR, 2);

	(void)state;
	libclient_explain("UOPS_ISSUED:ANY u c=2", ctr.error);
	assert_true(ctr.valid);
	assert_int_equal(haecer_counter_info(haecer_perf_counter(&ctr), &info), 0);
	/* USR only, CMASK 2 in bits 31:24. */
	assert_int_equal(info.config, 0x0201010Eull);
	freeCounter(&ctr);
	/* A counter mask keeps an architectural event off the fixed counter. */
	ctr = setupNamedCounter("INST_RETIRED:ANY_P", 0, 1);
	assert_true(ctr.valid);
	assert_int_equal(haecer_counter_info(haecer_perf_counter(&ctr), &info), 0);
	assert_int_equal(info.kind, HAECER_COUNTER_PROGRAMMABLE);
	freeCounter(&ctr);
}

static void test_zen3_names(void **state)
{
	(void)state;
	check_events(zen3);
}

int main(void)
{
	/* Exact counts per ms: the ideal CPU, whose clock is core_hz whenever busy. */
	const char *arguments[] = {"--sim-virtual-time", "--sim-ideal", NULL};
	const struct CMUnitTest intel[] = {
		cmocka_unit_test(test_sandybridge_names),
		cmocka_unit_test(test_flags_and_mask),
	};
	const struct CMUnitTest amd[] = {
		cmocka_unit_test(test_zen3_names),
	};
	int status = LIBCLIENT_RUN_GROUP("sandybridge", NULL, arguments, intel);

	return status | LIBCLIENT_RUN_GROUP("zen3", NULL, arguments, amd);
}
