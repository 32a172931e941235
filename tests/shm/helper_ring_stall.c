/*
 * helper_ring_stall MODE STALL AFTER — a producer with a writer that claims a slot and never
 * commits it, as one preempted forever or killed mid-write would.
 *
 * It compiles shm/ring.c itself with RING_TEST_CLAIMED defined, so the stalled writer runs the
 * real push path and stops exactly between claiming its slot and writing the payload.
 *
 * Receives the ring over the socket at descriptor 3. The main thread pushes positions
 * 0 .. STALL-1, then a writer thread pushes position STALL and stalls in the hook; "claimed" is
 * printed. MODE "single" (RING_SINGLE_PRODUCER ring) stops there. MODE "shared" then pushes
 * AFTER more records from the main thread and prints "pushed"; for each number N read from
 * stdin it pushes N more and prints "pushed=P dropped=D" (totals). Records are
 * ring_test_record(0, position). The process waits to be killed.
 */
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

static void stall_hook(uint64_t position);
#define RING_TEST_CLAIMED(position) stall_hook(position)
#include "shm/ring.c"

#include "tests/shm/ring_testing.h"

static uint64_t stall_position;
static sem_t claimed;

static void stall_hook(uint64_t position)
{
	if (position != stall_position)
		return;
	sem_post(&claimed);
	for (;;)
		pause();
}

struct pusher {
	struct ring_producer *producer;
	uint64_t next;
	uint64_t dropped;
};

static int push_up_to(struct pusher *pusher, uint64_t end)
{
	for (; pusher->next < end; pusher->next++) {
		struct ring_record record = ring_test_record(0, pusher->next);
		int rc = ring_push(pusher->producer, &record);

		if (rc == -EAGAIN)
			pusher->dropped++;
		else if (rc)
			return rc;
	}
	return 0;
}

static void *stalling_writer(void *argument)
{
	struct pusher *pusher = argument;
	struct ring_record record = ring_test_record(0, stall_position);

	ring_push(pusher->producer, &record);
	return NULL;
}

static int push_on_request(struct pusher *pusher)
{
	char line[64];

	while (fgets(line, sizeof(line), stdin)) {
		int rc = push_up_to(pusher, pusher->next + strtoull(line, NULL, 10));

		if (rc)
			return rc;
		printf("pushed=%" PRIu64 " dropped=%" PRIu64 "\n", pusher->next, pusher->dropped);
		fflush(stdout);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ring_producer producer;
	struct pusher pusher = {.producer = &producer};
	pthread_t writer;
	bool shared;
	int rc;

	if (argc != 4)
		return 2;
	shared = strcmp(argv[1], "shared") == 0;
	stall_position = strtoull(argv[2], NULL, 10);
	rc = ring_test_receive_fd(RING_TEST_CHILD_FD);
	if (rc < 0 || sem_init(&claimed, 0, 0) || ring_producer_attach(&producer, rc))
		return 1;
	rc = push_up_to(&pusher, stall_position);
	if (rc || pthread_create(&writer, NULL, stalling_writer, &pusher))
		return 1;
	while (sem_wait(&claimed))
		;
	pusher.next = stall_position + 1;
	printf("claimed\n");
	fflush(stdout);
	if (shared) {
		if (push_up_to(&pusher, pusher.next + strtoull(argv[3], NULL, 10)))
			return 1;
		printf("pushed\n");
		fflush(stdout);
		if (push_on_request(&pusher))
			return 1;
	}
	for (;;)
		pause();
}
