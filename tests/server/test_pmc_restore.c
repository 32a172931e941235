/*
 * A programmable counter's count survives msrd's restores (review finding 7). A write through
 * the legacy IA32_PMCx keeps only bits 31:0, sign-extended, so:
 *   - a freed slot gives its counter back the 48-bit count it had (Skylake-SP: msrd writes it
 *     through the full-width IA32_A_PMCx);
 *   - at SIGTERM a PMC a client first wrote through IA32_PMCx, over a count past 2^32, is
 *     restored whole through IA32_A_PMCx, and the log says so;
 *   - on a part without full-width writes (a Sandy Bridge variant with PERF_CAPABILITIES bit 13
 *     clear) what can be restored is, and the log names the value it could not restore, for the
 *     SIGTERM restore and the slot alike.
 * Virtual time: the count past 2^32 comes from 3 s of simulated full load.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "harness/msrd_harness.h"
#include "harness/policy_text.h"

#define NS_PER_S 1000000000ull
#define CYCLES (0x3Cull | PERFEVTSEL_USR | PERFEVTSEL_OS | PERFEVTSEL_EN)
#define COUNT 0x123456789ABCull

static const char policy[] = POLICY_HEADER POLICY_PMU_MSRS
	"rules:\n"
	"  - {match: {uid: 0}, allow: [pmu], capabilities: [sim_control]}\n";

static struct msrd_server server;

static int teardown(void **state)
{
	(void)state;
	if (server.pid > 0)
		msrd_kill(&server);
	return 0;
}

static struct haecer_conn *start(const char *models_dir, const char *model)
{
	const char *arguments[] = { "--backend", "sim", "--sim-model", model,
				    "--sim-virtual-time", "--models-dir", models_dir, NULL };
	char shipped[PATH_MAX + 32];
	struct haecer_conn *conn;

	snprintf(shipped, sizeof(shipped), "%s/configs/models", harness_source_dir());
	if (models_dir == NULL) {
		arguments[6] = shipped;
		assert_int_equal(msrd_start(&server, policy, arguments), 0);
	} else {
		assert_int_equal(msrd_launch(&server, arguments), 0); /* prepared by the caller */
	}
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	return conn;
}

/* PMC0 and PMC1 count past 2^32 (3 s of full load), then stop; their counts. */
static void count_past_32_bits(struct haecer_conn *conn, uint64_t counts[2])
{
	assert_int_equal(haecer_sim_set_load(conn, -1, 1.0), 0);
	for (uint32_t i = 0; i < 2; i++)
		assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PERFEVTSEL0 + i, CYCLES), 0);
	assert_int_equal(haecer_sim_advance(conn, 3 * NS_PER_S, NULL), 0);
	for (uint32_t i = 0; i < 2; i++) {
		assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PERFEVTSEL0 + i, 0), 0);
		assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PMC0 + i, &counts[i]), 0);
		assert_true(counts[i] >> 32 != 0);
	}
}

static uint64_t legacy_result(uint64_t count)
{
	return (uint64_t)(int64_t)(int32_t)(uint32_t)count & 0xFFFFFFFFFFFFull;
}

/* SIGTERM, and the log line msrd wrote about restoring PMC0. */
static void stop_expecting(const char *line)
{
	bool found;

	assert_int_equal(msrd_signal(&server, SIGTERM), 0);
	assert_true(msrd_wait_log(&server, "stopped:", 60000));
	found = msrd_log_contains(&server, line);
	if (!found)
		msrd_print_log(&server);
	assert_true(found);
	assert_int_equal(msrd_stop(&server), 0);
}

static void test_full_width_part(void **state)
{
	struct haecer_conn *conn = start(NULL, "skylake-sp");
	struct haecer_slot slot;
	uint64_t value, counts[2];
	char line[160];

	(void)state;
	/* A slot taken over a 48-bit count and freed gives it back whole. */
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_A_PMC0 + 1, COUNT), 0);
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, 1, &slot), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PMC0 + 1, &value), 0);
	assert_int_equal(value, 0);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PMC0 + 1, &value), 0);
	assert_int_equal(value, COUNT);
	/* First written through the legacy address over a count past 2^32. */
	count_past_32_bits(conn, counts);
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PMC0, 5), 0);
	haecer_close(conn);
	snprintf(line, sizeof(line),
		 "restored cpu 0 MSR 0xc1 to 0x%llx through its full-width alias 0x4c1",
		 (unsigned long long)counts[0]);
	stop_expecting(line);
}

static void test_legacy_only_part(void **state)
{
	const char *replace[] = { "perf_capabilities: 0x31C3", "perf_capabilities: 0x11C3" };
	char models[PATH_MAX + 16], line[200];
	struct haecer_conn *conn;
	struct haecer_slot slot;
	uint64_t counts[2], value;

	(void)state;
	assert_int_equal(msrd_prepare(&server, policy), 0);
	snprintf(models, sizeof(models), "%s", server.dir);
	assert_int_equal(harness_model_variant(models, "snb-nofw", "sandybridge", replace, 1, NULL),
			 0);
	conn = start(models, "snb-nofw");
	count_past_32_bits(conn, counts);
	/* PMC1's slot: taken over the count, freed, and what a legacy write can hold is back. */
	assert_int_equal(haecer_slot_alloc(conn, 0, HAECER_SLOT_PROGRAMMABLE, 1, &slot), 0);
	assert_int_equal(haecer_slot_free(conn, slot.id), 0);
	assert_int_equal(haecer_msr_read(conn, 0, MSR_IA32_PMC0 + 1, &value), 0);
	assert_int_equal(value, legacy_result(counts[1]));
	snprintf(line, sizeof(line), "cpu 0 counter 1: 0x%llx cannot be written back whole",
		 (unsigned long long)counts[1]);
	assert_true(msrd_log_contains(&server, line));
	/* PMC0 first written through its only address over a count past 2^32. */
	assert_int_equal(haecer_msr_write(conn, 0, MSR_IA32_PMC0, 5), 0);
	haecer_close(conn);
	snprintf(line, sizeof(line), "restored cpu 0 MSR 0xc1 to 0x%llx, not 0x%llx",
		 (unsigned long long)legacy_result(counts[0]), (unsigned long long)counts[0]);
	stop_expecting(line);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_full_width_part, teardown),
		cmocka_unit_test_teardown(test_legacy_only_part, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
