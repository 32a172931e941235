/*
 * helper_ring_producer RECORDS THREADS [PAUSE_US] — a producer process for the ring tests.
 *
 * Receives the ring over the socket at descriptor 3 (as from msrd), attaches, and pushes RECORDS
 * records from each of THREADS threads (RECORDS 0: forever, until killed). Thread t pushes
 * ring_test_record(t, 0), (t, 1), ...; a dropped push (-EAGAIN) still uses up its sequence
 * number, as it uses up a ring position. When done it prints "pushed=N dropped=D" and exits 0.
 * PAUSE_US: sleep that long after every 1024 records, for tests whose consumers should mostly
 * keep up.
 */
#include <inttypes.h>
#include <pthread.h>

#include "tests/shm/ring_testing.h"

struct producer_thread {
	pthread_t thread;
	struct ring_producer *producer;
	uint32_t index;
	uint64_t records;
	useconds_t pause_us;
	uint64_t dropped;
	int error;
};

static void *produce(void *argument)
{
	struct producer_thread *self = argument;

	for (uint64_t sequence = 0; self->records == 0 || sequence < self->records; sequence++) {
		struct ring_record record = ring_test_record(self->index, sequence);
		int rc = ring_push(self->producer, &record);

		if (rc == -EAGAIN) {
			self->dropped++;
		} else if (rc) {
			self->error = rc;
			break;
		}
		if (self->pause_us && sequence % 1024 == 1023)
			usleep(self->pause_us);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct producer_thread threads[RING_TEST_MAX_THREADS] = {0};
	struct ring_producer producer;
	uint64_t records, pushed = 0, dropped = 0;
	useconds_t pause_us;
	uint32_t count;
	int fd, rc;

	if (argc != 3 && argc != 4)
		return 2;
	pause_us = argc == 4 ? (useconds_t)strtoul(argv[3], NULL, 10) : 0;
	records = strtoull(argv[1], NULL, 10);
	count = (uint32_t)strtoul(argv[2], NULL, 10);
	if (count == 0 || count > RING_TEST_MAX_THREADS)
		return 2;
	fd = ring_test_receive_fd(RING_TEST_CHILD_FD);
	rc = fd < 0 ? fd : ring_producer_attach(&producer, fd);
	if (rc) {
		fprintf(stderr, "helper_ring_producer: attach: %s\n", strerror(-rc));
		return 1;
	}
	for (uint32_t t = 0; t < count; t++) {
		threads[t] = (struct producer_thread){
			.producer = &producer, .index = t, .records = records, .pause_us = pause_us};
		if (pthread_create(&threads[t].thread, NULL, produce, &threads[t]))
			return 1;
	}
	for (uint32_t t = 0; t < count; t++) {
		pthread_join(threads[t].thread, NULL);
		if (threads[t].error) {
			fprintf(stderr, "helper_ring_producer: push: %s\n",
				strerror(-threads[t].error));
			return 1;
		}
		pushed += records;
		dropped += threads[t].dropped;
	}
	printf("pushed=%" PRIu64 " dropped=%" PRIu64 "\n", pushed, dropped);
	ring_producer_detach(&producer);
	return 0;
}
