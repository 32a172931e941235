/*
 * Region markers from several threads at once: every thread has its own stack, regions with the
 * same path add up in one row, and the counts are exact however the threads interleave. One
 * thread measures through an explicit context of its own (haecer_region_begin_ctx). A thread that
 * exits with a region open leaves it "not ended" without disturbing anything else, and
 * haecer_region_reset works afterwards.
 */
#include <pthread.h>

#include "tests/region/region_test.h"

#define THREADS 4

static unsigned iterations(void)
{
	return harness_small_scale() ? 20 : 200;
}

struct worker {
	struct haecer_context *ctx; /* NULL: the default context */
	int failures;
};

static int region(struct worker *worker, bool begin, const char *name)
{
	int error;

	if (worker->ctx != NULL)
		error = begin ? haecer_region_begin_ctx(worker->ctx, name)
			      : haecer_region_end_ctx(worker->ctx, name);
	else
		error = begin ? haecer_region_begin(name) : haecer_region_end(name);
	if (error < 0) {
		fprintf(stderr, "%s(\"%s\"): %s (%s)\n", begin ? "begin" : "end", name,
			haecer_strerror(error), haecer_error_detail());
		worker->failures++;
	}
	return error;
}

static void *work(void *argument)
{
	struct worker *worker = argument;

	region(worker, true, "thread");
	for (unsigned i = 0; i < iterations(); i++) {
		region(worker, true, "worker");
		region(worker, true, "step");
		region(worker, false, "step");
		region(worker, false, "worker");
	}
	region(worker, false, "thread");
	return NULL;
}

static void *leave_open(void *argument)
{
	(void)argument;
	haecer_region_begin("orphan");
	return NULL;
}

static void test_threads_add_up_exactly(void **state)
{
	const char *text = region_report_path("threads.txt", "");
	const char *callgrind = region_report_path("threads.txt", ".callgrind");
	struct worker workers[THREADS] = { 0 };
	pthread_t threads[THREADS];
	struct cg_file file;
	uint64_t expected = (uint64_t)THREADS * iterations();

	(void)state;
	region_expect(haecer_context_open(server.socket_path, &workers[0].ctx), "context");
	for (int i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&threads[i], NULL, work, &workers[i]), 0);
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(threads[i], NULL), 0);
		assert_int_equal(workers[i].failures, 0);
	}
	region_expect(haecer_region_report(text), "report");
	cg_read(callgrind, &file);
	assert_int_equal(cg_arc(&file, "thread", "worker")->calls, expected);
	assert_int_equal(cg_arc(&file, "worker", "step")->calls, expected);
	for (size_t e = 0; e < file.event_count; e++) {
		assert_int_equal(cg_inclusive(cg_find(&file, "worker"), e),
				 cg_arc(&file, "thread", "worker")->inclusive[e]);
		assert_int_equal(cg_inclusive(cg_find(&file, "thread"), e), file.summary[e]);
	}
	assert_true(file.summary[cg_event(&file, "Time_ns")] > 0);
	cg_annotate_accepts(callgrind, "test_threads.c:worker");
	haecer_context_close(workers[0].ctx);
}

static void test_thread_exit_with_open_region(void **state)
{
	const char *text = region_report_path("orphan.txt", "");
	pthread_t thread;
	char *content;

	(void)state;
	region_expect(haecer_region_reset(), "reset");
	assert_int_equal(pthread_create(&thread, NULL, leave_open, NULL), 0);
	assert_int_equal(pthread_join(thread, NULL), 0);
	region_expect(haecer_region_begin("after"), "begin");
	region_expect(haecer_region_end("after"), "end");
	region_expect(haecer_region_report(text), "report");
	content = region_read_text(text);
	assert_non_null(content);
	fprintf(stderr, "%s", content);
	assert_non_null(strstr(content, "(1 not ended: thread exited)"));
	assert_non_null(strstr(content, "\nafter "));
	free(content);
	/* Nothing is open any more. */
	region_expect(haecer_region_reset(), "reset after the thread exited");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_threads_add_up_exactly),
		cmocka_unit_test(test_thread_exit_with_open_region),
	};

	return REGION_RUN_GROUP(NULL, tests);
}
