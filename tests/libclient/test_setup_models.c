/*
 * Every HAECER setup function on every shipped simulated model (sandybridge, skylake-sp, zen3,
 * zen4),
 * against the real msrd: what the model has sets up, counts on the calling thread's CPU (the
 * thread is pinned there only with HAECER_FLAG_PIN), reads, and frees; what it lacks fails with -EOPNOTSUPP and a reason.
 * Architectural events land on the fixed counter that counts the same event when there is one;
 * on AMD the architectural events with a core-counter equivalent are mapped to it. Energy
 * counters carry their domain's unit (skylake-sp DRAM: the fixed 2^-16 J server unit), and
 * getEnergyUnit() is the package domain's.
 */
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/libclient/libclient_test.h"

#define BIT(n) (1u << (n))

struct model_expectation {
	const char *model;
	uint8_t arch_valid;          /* ARCH_counter bits expected to set up */
	uint8_t arch_fixed;          /* ... of those, on a fixed counter */
	uint8_t fixed_valid;         /* FF_counter bits */
	uint16_t raw_event;          /* a non-architectural pair of the model */
	uint8_t raw_umask;
	const char *named;           /* a libpfm4 name of the model */
	uint8_t rapl_valid;          /* RAPLCounter bits */
	int8_t exponent[RAPL_DOMAIN_COUNT];
	int8_t package_exponent;
};

static const struct model_expectation models[] = {
	{"sandybridge", 0x7F, BIT(1) | BIT(0) | BIT(2), 0x7, 0xD0, 0x81, "L1D.REPLACEMENT",
	 BIT(RAPL_PKG) | BIT(RAPL_PP0) | BIT(RAPL_PP1), {16, 16, 16, 0, 0, 0, 0}, 16},
	{"skylake-sp", 0x7F, BIT(1) | BIT(0) | BIT(2), 0x7, 0xD0, 0x81,
	 "MEM_LOAD_RETIRED.L1_HIT", BIT(RAPL_PKG) | BIT(RAPL_DRAM), {14, 0, 0, 16, 0, 0, 0}, 14},
	/* The seed's RAPL_PKG and RAPL_PP0 are AMD's package and core energy there. */
	{"zen3", BIT(0) | BIT(1) | BIT(5) | BIT(6), 0, 0, 0xC0, 0x00, "RETIRED_INSTRUCTIONS",
	 BIT(RAPL_PKG) | BIT(RAPL_PP0) | BIT(RAPL_AMD_CORE) | BIT(RAPL_AMD_PKG),
	 {16, 16, 0, 0, 0, 16, 16}, 16},
	/* PerfMonV2: counters count only with msrd's PerfCntrGlobalCtl bit. */
	{"zen4", BIT(0) | BIT(1) | BIT(5) | BIT(6), 0, 0, 0xC0, 0x00, "RETIRED_INSTRUCTIONS",
	 BIT(RAPL_PKG) | BIT(RAPL_PP0) | BIT(RAPL_AMD_CORE) | BIT(RAPL_AMD_PKG),
	 {16, 16, 0, 0, 0, 16, 16}, 16},
};

static bool running;

static void unpin(void)
{
	cpu_set_t all;

	CPU_ZERO(&all);
	for (int cpu = 0; cpu < (int)sysconf(_SC_NPROCESSORS_ONLN) && cpu < CPU_SETSIZE; cpu++)
		CPU_SET(cpu, &all);
	assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
}

/* The thread runs on exactly one CPU now, the one the counter counts on (mod the model). */
static void assert_pinned_to(const struct haecer_counter_info *info)
{
	struct haecer_context *ctx;
	cpu_set_t set;
	int host = -1;

	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	assert_int_equal(CPU_COUNT(&set), 1);
	for (int cpu = 0; cpu < CPU_SETSIZE && host < 0; cpu++)
		if (CPU_ISSET(cpu, &set))
			host = cpu;
	assert_int_equal(haecer_default_context(&ctx), 0);
	assert_int_equal((uint32_t)host % haecer_context_machine(ctx)->cpu_count, info->cpu);
}

/* The thread kept its mask: the library pins only with HAECER_FLAG_PIN. */
static void assert_not_pinned(void)
{
	cpu_set_t set;

	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	assert_true(CPU_COUNT(&set) > 1 || sysconf(_SC_NPROCESSORS_ONLN) == 1);
}

/* A counter that should have set up: check it, read it, free it. Event counters set up with
 * HAECER_FLAG_PIN (the fixed ones here) pinned the thread; the others did not. */
static void check_valid(PerfCounter *ctr, const char *what, uint16_t kind, bool pinned)
{
	struct haecer_counter_info info;

	libclient_explain(what, ctr->error);
	assert_true(ctr->valid);
	assert_int_equal(ctr->error, 0);
	assert_int_equal(haecer_counter_info(haecer_perf_counter(ctr), &info), 0);
	assert_int_equal(info.kind, kind);
	if (pinned)
		assert_pinned_to(&info);
	else
		assert_not_pinned();
	assert_true(readCounter(ctr) != ULLONG_MAX);
	freeCounter(ctr);
	assert_false(ctr->valid);
	assert_true(readCounter(ctr) == ULLONG_MAX);
	unpin();
}

/* A counter that should not have: -EOPNOTSUPP with a reason, and the thread not pinned. */
static void check_unavailable(PerfCounter *ctr)
{
	cpu_set_t set;

	assert_false(ctr->valid);
	assert_int_equal(ctr->error, -EOPNOTSUPP);
	assert_true(strlen(haecer_error_detail()) > 0);
	assert_true(readCounter(ctr) == ULLONG_MAX);
	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	assert_true(CPU_COUNT(&set) > 1 || sysconf(_SC_NPROCESSORS_ONLN) == 1);
}

static void check_arch(const struct model_expectation *model)
{
	for (unsigned event = 0; event < 7; event++) {
		PerfCounter ctr = setupArchCounter((ARCH_counter)event, 0, 0);
		uint16_t kind = model->arch_fixed & BIT(event) ? HAECER_COUNTER_FIXED
							       : HAECER_COUNTER_PROGRAMMABLE;
		if (model->arch_valid & BIT(event))
			check_valid(&ctr, "setupArchCounter", kind, false);
		else
			check_unavailable(&ctr);
	}
}

static void check_fixed(const struct model_expectation *model)
{
	for (unsigned fixed = 0; fixed < 3; fixed++) {
		PerfCounter ctr = setupFFCounter((FF_counter)fixed,
						 HAECER_FLAG_USR | HAECER_FLAG_OS | HAECER_FLAG_PIN);
		if (model->fixed_valid & BIT(fixed))
			check_valid(&ctr, "setupFFCounter", HAECER_COUNTER_FIXED, true);
		else
			check_unavailable(&ctr);
	}
}

static void check_energy(const struct model_expectation *model)
{
	struct haecer_counter_info info;

	for (unsigned domain = 0; domain < RAPL_DOMAIN_COUNT; domain++) {
		PerfCounter ctr = setupEnergyCounter((RAPLCounter)domain);
		if (!(model->rapl_valid & BIT(domain))) {
			check_unavailable(&ctr);
			continue;
		}
		libclient_explain("setupEnergyCounter", ctr.error);
		assert_true(ctr.valid);
		assert_int_equal(haecer_counter_info(haecer_perf_counter(&ctr), &info), 0);
		assert_int_equal(info.unit_exponent, model->exponent[domain]);
		assert_true(info.unit == ldexp(1.0, -model->exponent[domain]));
		assert_string_equal(info.unit_name, "J");
		check_valid(&ctr, "setupEnergyCounter", HAECER_COUNTER_ENERGY, false);
	}
	assert_true(getEnergyUnit() == ldexp(1.0, -model->package_exponent));
}

static void run_model(const struct model_expectation *model)
{
	PerfCounter ctr;

	assert_int_equal(libclient_start(model->model, NULL, NULL), 0);
	running = true;
	unpin();
	check_arch(model);
	check_fixed(model);
	ctr = setupNonArchCounter(model->raw_event, model->raw_umask, HAECER_FLAG_PIN, 0);
	check_valid(&ctr, "setupNonArchCounter", HAECER_COUNTER_PROGRAMMABLE, true);
	ctr = setupNamedCounter(model->named, 0, 0);
	check_valid(&ctr, "setupNamedCounter", HAECER_COUNTER_PROGRAMMABLE, false);
	check_energy(model);
	running = false;
	assert_int_equal(libclient_stop(), 0);
}

static void test_sandybridge(void **state)
{
	(void)state;
	run_model(&models[0]);
}

static void test_skylake_sp(void **state)
{
	(void)state;
	run_model(&models[1]);
}

static void test_zen3(void **state)
{
	(void)state;
	run_model(&models[2]);
}

static void test_zen4(void **state)
{
	(void)state;
	run_model(&models[3]);
}

static int kill_leftover(void **state)
{
	(void)state;
	haecer_shutdown();
	if (running)
		msrd_kill(&server);
	running = false;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_sandybridge, kill_leftover),
		cmocka_unit_test_teardown(test_skylake_sp, kill_leftover),
		cmocka_unit_test_teardown(test_zen3, kill_leftover),
		cmocka_unit_test_teardown(test_zen4, kill_leftover),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
