/*
 * Explicit contexts (the haecer_* API): several per process, each its own msrd connection, so
 * they compete for counters like separate clients; counters on explicit model CPUs (the
 * simulated skylake-sp has 64 CPUs in 2 packages, more than this host), energy per package;
 * HAECER_CPU_CURRENT is the host CPU modulo the model's CPU count; closing a context returns
 * its counters. A ring capacity that is not a power of two is rounded up, and the counter's
 * info says to what; one over 2^26 is refused.
 */
#include <sched.h>

#include "tests/libclient/libclient_test.h"

static void test_contexts_compete(void **state)
{
	struct haecer_context *first, *second;
	struct haecer_counter *mine, *theirs, *fallback;
	struct haecer_counter_info info;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &first), 0);
	assert_int_equal(haecer_context_open(NULL, &second), 0); /* $HAECER_SOCKET */
	assert_true(haecer_context_simulated(first)); /* msrd runs --backend sim */
	assert_false(haecer_context_simulated(NULL));
	assert_int_equal(haecer_counter_open_fixed(first, 40, CPU_CLK_UNHALTED_CORE, 0, &mine), 0);
	assert_int_equal(haecer_counter_open_fixed(second, 40, CPU_CLK_UNHALTED_CORE, 0, &theirs),
			 -EBUSY);
	assert_non_null(strstr(haecer_error_detail(), "held"));
	/* The architectural event falls back to a programmable counter. */
	assert_int_equal(haecer_counter_open_arch(second, 40, UNHALTED_CORE_CYCLES, 0, 0,
						  &fallback), 0);
	assert_int_equal(haecer_counter_info(fallback, &info), 0);
	assert_int_equal(info.kind, HAECER_COUNTER_PROGRAMMABLE);
	assert_int_equal(info.cpu, 40);
	assert_int_equal(info.package, 1);
	assert_int_equal(info.width, 48);
	haecer_context_close(first);
	assert_int_equal(haecer_counter_open_fixed(second, 40, CPU_CLK_UNHALTED_CORE, 0, &theirs),
			 0);
	haecer_context_close(second);
}

static void test_cpus_and_packages(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;
	struct haecer_counter_info info;
	const struct haecer_machine_info *machine;
	uint32_t cpu;
	cpu_set_t allowed, here;
	int host;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	machine = haecer_context_machine(ctx);
	assert_int_equal(machine->cpu_count, 64);
	assert_int_equal(haecer_counter_open_energy(ctx, 63, RAPL_DRAM, &counter), 0);
	assert_int_equal(haecer_counter_info(counter, &info), 0);
	assert_int_equal(info.package, 1);
	assert_int_equal(info.unit_exponent, 16);
	haecer_counter_free(counter);
	assert_int_equal(haecer_counter_open_energy(ctx, 64, RAPL_PKG, &counter), -ENXIO);
	assert_int_equal(haecer_counter_open_arch(ctx, -5, INSTRUCTIONS_RETIRED, 0, 0, &counter),
			 -ENXIO);
	assert_null(counter);

	/* On the CPU this thread runs on, pinned there for the checks: the scheduler may move it
	 * between two calls otherwise (a valgrind run with another test beside it did). */
	host = sched_getcpu();
	assert_true(host >= 0);
	assert_int_equal(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
	CPU_ZERO(&here);
	CPU_SET(host, &here);
	assert_int_equal(sched_setaffinity(0, sizeof(here), &here), 0);
	assert_int_equal(haecer_context_current_cpu(ctx, &cpu), 0);
	assert_int_equal(cpu, (uint32_t)host % machine->cpu_count);
	assert_int_equal(haecer_counter_open_energy(ctx, HAECER_CPU_CURRENT, RAPL_PKG, &counter),
			 0);
	assert_int_equal(sched_setaffinity(0, sizeof(allowed), &allowed), 0);
	assert_int_equal(haecer_counter_info(counter, &info), 0);
	assert_int_equal(info.cpu, cpu);
	haecer_context_close(ctx);
}

static struct haecer_counter_info info_of(const struct haecer_counter *counter)
{
	struct haecer_counter_info info;

	assert_int_equal(haecer_counter_info(counter, &info), 0);
	return info;
}

static void test_bad_arguments(void **state)
{
	struct haecer_context *ctx;
	struct haecer_counter *counter;

	(void)state;
	assert_int_equal(haecer_context_open(server.socket_path, NULL), -EINVAL);
	assert_int_equal(haecer_counter_open_energy(NULL, 0, RAPL_PKG, &counter), -EINVAL);
	assert_int_equal(haecer_context_open(server.socket_path, &ctx), 0);
	assert_int_equal(haecer_counter_open_named(ctx, 0, NULL, 0, 0, &counter), -EINVAL);
	assert_int_equal(haecer_counter_read(NULL, &(uint64_t){0}), -EBADF);
	assert_int_equal(haecer_counter_enable(NULL), -EBADF);
	assert_int_equal(haecer_counter_monitor(NULL, 1, 1, 0), -EBADF);
	assert_int_equal(haecer_counter_open_energy(ctx, 0, RAPL_PKG, &counter), 0);
	assert_int_equal(haecer_counter_monitor(counter, 1, 1, (1u << 26) + 1), -EINVAL);
	assert_false(info_of(counter).monitored);
	/* Not a power of two: rounded up, and the info says to what. */
	assert_int_equal(haecer_counter_monitor(counter, 1, 1, 1000), 0);
	assert_true(info_of(counter).monitored);
	assert_int_equal(info_of(counter).ring_capacity, 1024);
	haecer_counter_free(NULL);
	haecer_context_close(NULL);
	haecer_context_close(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_contexts_compete),
		cmocka_unit_test(test_cpus_and_packages),
		cmocka_unit_test(test_bad_arguments),
	};

	return LIBCLIENT_RUN_GROUP("skylake-sp", NULL, NULL, tests);
}
