/*
 * tests/events/test_pfm_threads.c — the first libpfm4 use may come from several threads at
 * once (an application setting up counters per thread): libpfm4 is initialised exactly once,
 * a shared database builds its (event, umask) table once, and every thread gets the same
 * answers as a single thread would. Results are checked in the main thread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>

#include "tests/events/machines.h"

#define THREADS 4
#define ROUNDS 20
#define USR_OS (EVENT_FLAG_USR | EVENT_FLAG_OS)

struct worker {
	pthread_t thread;
	pthread_barrier_t *start;
	struct event_db *shared;
	int failures;
};

/* Each answer as the SDM / AMD PPR tables give it (see test_pfm.c). */
static int one_round(struct event_db *shared, struct event_db *own)
{
	struct event_encoding encoding;
	int failures = 0;

	if (event_db_pfm_check_raw(shared, 0x51, 0x01, &encoding, NULL, 0) != 0 ||
	    encoding.evtsel != 0x00030151)
		failures++;
	if (event_db_pfm_encode(shared, "MEM_LOAD_UOPS_RETIRED.L1_HIT", USR_OS, 0, &encoding, NULL,
				0) != 0 || encoding.evtsel != 0x000301D1)
		failures++;
	if (event_db_pfm_encode(own, "RETIRED_INSTRUCTIONS", USR_OS, 0, &encoding, NULL, 0) != 0 ||
	    encoding.evtsel != 0x000300C0)
		failures++;
	if (event_db_pfm_check_raw(own, 0x1D0, 0x00, NULL, NULL, 0) != 0)
		failures++;
	return failures;
}

static void *work(void *argument)
{
	struct worker *worker = argument;
	struct event_machine zen4 = machine_zen4();
	struct event_db *own;

	pthread_barrier_wait(worker->start);
	if (event_db_open(&zen4, &own) != 0) {
		worker->failures++;
		return NULL;
	}
	for (int round = 0; round < ROUNDS; round++)
		worker->failures += one_round(worker->shared, own);
	event_db_close(own);
	return NULL;
}

static void concurrent_first_use(void **state)
{
	struct worker workers[THREADS];
	pthread_barrier_t start;
	struct event_db *shared = OPEN_DB(machine_sandy_bridge());

	(void)state;
	assert_int_equal(pthread_barrier_init(&start, NULL, THREADS), 0);
	for (int i = 0; i < THREADS; i++) {
		workers[i] = (struct worker){.start = &start, .shared = shared};
		assert_int_equal(pthread_create(&workers[i].thread, NULL, work, &workers[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(workers[i].thread, NULL), 0);
		assert_int_equal(workers[i].failures, 0);
	}
	pthread_barrier_destroy(&start);
	event_db_close(shared);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(concurrent_first_use),
	};

	unsetenv("LIBPFM_ENCODE_INACTIVE");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
