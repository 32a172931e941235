/*
 * Several consumer processes read one ring at once, each through its own read-only descriptor
 * and at its own pace: one as fast as it can, one paced, one so slow it is lapped, and one that
 * attaches late (it starts at the oldest record still in the ring). Each must be exact on its
 * own: received + lost == positions pushed since its start, gaps == losses, nothing torn or out
 * of order. Consumers share nothing but the read-only mapping.
 */
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tests/shm/ring_testing.h"

#define CAPACITY 4096u
#define CONSUMERS 4

struct pace {
	const char *name;
	size_t batch;
	useconds_t pause_us;
	bool two_laps_behind; /* start reading only once the ring was overwritten twice */
	bool late;            /* ... and then from the oldest record left (a late attach) */
};

static const struct pace paces[CONSUMERS] = {
	{"fast", 4096, 0, false, false},
	{"paced", 256, 20, false, false},
	{"lapped", 16, 200, true, false},
	{"late", 1024, 0, true, true},
};

static bool producer_done(int done_fd)
{
	struct pollfd ready = {.fd = done_fd, .events = POLLIN};

	return poll(&ready, 1, 0) > 0;
}

/* Waiting two laps makes the overrun certain, whatever the machine's speed. A late consumer's
 * business starts at the oldest record still in the ring, so its tally starts there too. */
static uint64_t start_behind(struct ring_consumer *consumer, struct ring_test_tally *tally,
			     const struct pace *pace)
{
	if (!pace->two_laps_behind)
		return 0;
	while (ring_consumer_backlog(consumer) <= 2 * CAPACITY)
		usleep(100);
	if (!pace->late)
		return 0;
	ring_consumer_seek_oldest(consumer);
	tally->seen[0] = true;
	tally->last[0] = consumer->position - 1;
	return consumer->position;
}

/* Runs in a child process; the exit status is the verdict. */
static int consume_at_pace(int readonly, int done_fd, int ready_fd, const struct pace *pace)
{
	static struct ring_record records[4096];
	struct ring_test_tally tally = {0};
	struct ring_consumer consumer;
	struct ring_info info;
	uint64_t start;

	if (ring_consumer_attach(&consumer, readonly))
		return 10;
	close(readonly);
	if (write(ready_fd, "r", 1) != 1)
		return 11;
	close(ready_fd);
	start = start_behind(&consumer, &tally, pace);
	for (;;) {
		ssize_t count = ring_consume(&consumer, records, pace->batch, &tally.lost);

		if (count < 0)
			return 12;
		ring_test_tally_add(&tally, records, (size_t)count);
		if (count == 0 && producer_done(done_fd))
			break;
		if (pace->pause_us)
			usleep(pace->pause_us);
		else if (count == 0)
			sched_yield();
	}
	if (ring_test_drain_final(&consumer, &tally))
		return 13;
	ring_consumer_info(&consumer, &info);
	printf("%-6s start %" PRIu64 " received %" PRIu64 " lost %" PRIu64 " of %" PRIu64 "\n",
	       pace->name, start, tally.received, tally.lost, info.pushed - start);
	fflush(stdout);
	if (tally.torn || tally.out_of_order)
		return 14;
	if (tally.received + tally.lost != info.pushed - start || consumer.position != info.pushed)
		return 15;
	if (ring_test_final_gaps(&tally, info.pushed) != tally.lost)
		return 16;
	if (pace->two_laps_behind && !pace->late && tally.lost == 0)
		return 17;
	ring_consumer_detach(&consumer);
	return 0;
}

static pid_t fork_consumer(int fd, const int done[2], const int ready[2], const struct pace *pace)
{
	int readonly = ring_reopen_readonly(fd);
	pid_t pid;

	assert_true(readonly >= 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* Only the parent may hold the write end, or "done" would never be seen. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(done[1]);
		close(ready[0]);
		_exit(consume_at_pace(readonly, done[0], ready[1], pace));
	}
	close(readonly);
	return pid;
}

static void test_consumers_each_exact(void **state)
{
	char records_arg[32], line[64], byte;
	/* Paced (about 5 M records/s at most) so the fast consumers mostly keep up. */
	char *arguments[] = {"helper_ring_producer", records_arg, "1", "200", NULL};
	struct ring_params params = ring_test_params(CAPACITY, RING_SINGLE_PRODUCER);
	struct ring_test_child producer;
	pid_t consumers[CONSUMERS];
	int fd, done[2], ready[2];

	(void)state;
	snprintf(records_arg, sizeof(records_arg), "%" PRIu64,
		 ring_test_scaled(2000000, 100000));
	assert_int_equal(ring_test_spawn(&producer, arguments), 0);
	params.producer_pid = producer.pid;
	assert_int_equal(ring_memfd_create(&params, &fd), 0);
	assert_int_equal(pipe2(done, O_CLOEXEC), 0);
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	for (int i = 0; i < CONSUMERS; i++)
		consumers[i] = fork_consumer(fd, done, ready, &paces[i]);
	close(ready[1]);
	/* Every consumer is attached before the first push, so each starts at position 0. */
	for (int i = 0; i < CONSUMERS; i++)
		assert_int_equal(read(ready[0], &byte, 1), 1);
	assert_int_equal(ring_test_send_fd(producer.socket, fd), 0);
	close(fd);

	assert_int_equal(ring_test_read_line(&producer, line, sizeof(line)), 0);
	assert_int_equal(ring_test_wait(&producer), 0);
	close(done[1]);
	for (int i = 0; i < CONSUMERS; i++) {
		int status;

		assert_int_equal(waitpid(consumers[i], &status, 0), consumers[i]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	close(done[0]);
	close(ready[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_consumers_each_exact),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
