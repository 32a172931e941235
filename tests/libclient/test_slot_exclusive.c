/*
 * Two processes never share a counter: two processes released at the same moment each take every
 * counter of CPU 0 they can (programmable ones, and each fixed counter) and report which they
 * got while holding them. No counter is reported by both, and together they hold exactly the
 * CPU's counters (4 programmable, 3 fixed on the simulated Sandy Bridge); the loser of each
 * fixed counter hears -EBUSY, of the last programmable ones -ENOSPC.
 */
#include <sys/wait.h>

#include "tests/lib/test_check.h"
#include "tests/libclient/libclient_test.h"

#define PROGRAMMABLE_COUNTERS 4
#define FIXED_COUNTERS 3
#define MAX_TAKEN (PROGRAMMABLE_COUNTERS + FIXED_COUNTERS)

struct taker {
	pid_t pid;
	int go;          /* parent writes a byte: start taking; another: release and exit */
	int report;      /* child writes its report */
};

struct report {
	int count;
	uint16_t kind[MAX_TAKEN];
	uint16_t index[MAX_TAKEN];
};

static int take_all(struct haecer_context *ctx, struct report *report)
{
	struct haecer_counter *counter;
	struct haecer_counter_info info;
	int error;

	for (unsigned fixed = 0; fixed < FIXED_COUNTERS; fixed++) {
		error = haecer_counter_open_fixed(ctx, 0, fixed, 0, &counter);
		if (error == -EBUSY)
			continue;
		CHECK_EQ(error, 0);
		CHECK_EQ(haecer_counter_info(counter, &info), 0);
		report->kind[report->count] = info.kind;
		report->index[report->count++] = info.hardware_index;
	}
	while ((error = haecer_counter_open_arch(ctx, 0, LL_CACHE_MISSES, 0, 0, &counter)) == 0) {
		CHECK(report->count < MAX_TAKEN);
		CHECK_EQ(haecer_counter_info(counter, &info), 0);
		report->kind[report->count] = info.kind;
		report->index[report->count++] = info.hardware_index;
	}
	CHECK_EQ(error, -ENOSPC);
	return 0;
}

static int taker_main(int go, int out)
{
	struct haecer_context *ctx;
	struct report report = {0};
	char byte;

	CHECK_EQ(haecer_context_open(server.socket_path, &ctx), 0);
	CHECK_EQ(read(go, &byte, 1), 1);
	CHECK_EQ(take_all(ctx, &report), 0);
	CHECK_EQ(write(out, &report, sizeof(report)), (ssize_t)sizeof(report));
	/* Hold them until the parent has compared both reports. */
	CHECK_EQ(read(go, &byte, 1), 1);
	haecer_context_close(ctx);
	return 0;
}

static void start_taker(struct taker *taker)
{
	int go[2], report[2];

	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(report), 0);
	taker->pid = fork();
	assert_true(taker->pid >= 0);
	if (taker->pid == 0) {
		close(go[1]);
		close(report[0]);
		_exit(taker_main(go[0], report[1]));
	}
	close(go[0]);
	close(report[1]);
	taker->go = go[1];
	taker->report = report[0];
}

static void test_two_processes_never_share(void **state)
{
	struct taker takers[2];
	struct report reports[2];
	int programmable = 0, fixed = 0;
	int status;

	(void)state;
	start_taker(&takers[0]);
	start_taker(&takers[1]);
	for (int i = 0; i < 2; i++)
		assert_int_equal(write(takers[i].go, "g", 1), 1);
	for (int i = 0; i < 2; i++)
		assert_int_equal(read(takers[i].report, &reports[i], sizeof(reports[i])),
				 (ssize_t)sizeof(reports[i]));
	for (int a = 0; a < reports[0].count; a++)
		for (int b = 0; b < reports[1].count; b++)
			assert_false(reports[0].kind[a] == reports[1].kind[b] &&
				     reports[0].index[a] == reports[1].index[b]);
	for (int i = 0; i < 2; i++) {
		for (int c = 0; c < reports[i].count; c++) {
			if (reports[i].kind[c] == HAECER_COUNTER_FIXED)
				fixed++;
			else
				programmable++;
		}
		fprintf(stderr, "process %d holds %d counters\n", i, reports[i].count);
	}
	assert_int_equal(fixed, FIXED_COUNTERS);
	assert_int_equal(programmable, PROGRAMMABLE_COUNTERS);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(write(takers[i].go, "r", 1), 1);
		close(takers[i].go);
		assert_int_equal(waitpid(takers[i].pid, &status, 0), takers[i].pid);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		close(takers[i].report);
	}
}

int main(void)
{
	const char *arguments[] = {"--sim-virtual-time", NULL};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_processes_never_share),
	};

	return LIBCLIENT_RUN_GROUP("sandybridge", NULL, arguments, tests);
}
