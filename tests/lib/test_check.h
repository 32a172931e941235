/*
 * tests/lib/test_check.h — checks for code that runs in a child process (run_as), where cmocka's
 * asserts cannot report: print where and what, and make the child exit non-zero.
 */
#ifndef HAECER_TESTS_LIB_TEST_CHECK_H
#define HAECER_TESTS_LIB_TEST_CHECK_H

#include <stdio.h>

#define CHECK(condition)                                                                   \
	do {                                                                               \
		if (!(condition)) {                                                        \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,  \
				#condition);                                               \
			return 1;                                                          \
		}                                                                          \
	} while (0)

#define CHECK_EQ(actual, expected)                                                         \
	do {                                                                               \
		long long check_actual_ = (long long)(actual);                            \
		long long check_expected_ = (long long)(expected);                        \
		if (check_actual_ != check_expected_) {                                    \
			fprintf(stderr, "%s:%d: %s is %lld, expected %lld\n", __FILE__,     \
				__LINE__, #actual, check_actual_, check_expected_);        \
			return 1;                                                          \
		}                                                                          \
	} while (0)

#endif
