/*
 * tests/policy/policy_test.h — small helpers the policy tests share (header only: each test is
 * one standalone program). Include after the cmocka prerequisites and cmocka.h.
 */
#ifndef HAECER_TESTS_POLICY_TEST_H
#define HAECER_TESTS_POLICY_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

/* $HAECER_SOURCE/relative, or relative to the working directory when run by hand from the
 * source root. The caller frees. */
static inline char *source_path(const char *relative)
{
	const char *root = getenv("HAECER_SOURCE");
	char *path = NULL;

	assert_true(asprintf(&path, "%s/%s", root && *root ? root : ".", relative) > 0);
	return path;
}

/* The whole file as a NUL-terminated string, or NULL when it does not exist. */
static inline char *read_text(const char *path, size_t *length)
{
	FILE *file = fopen(path, "r");
	char *text = NULL;
	size_t size = 0;

	if (file == NULL)
		return NULL;
	FILE *memory = open_memstream(&text, &size);
	assert_non_null(memory);
	char buffer[4096];
	size_t count;
	while ((count = fread(buffer, 1, sizeof(buffer), file)) > 0)
		assert_int_equal(fwrite(buffer, 1, count, memory), count);
	fclose(file);
	assert_int_equal(fclose(memory), 0);
	if (length != NULL)
		*length = size;
	return text;
}

/* policy_print into a string the caller frees. */
static inline char *print_policy(const struct policy *policy)
{
	char *text = NULL;
	size_t size = 0;
	FILE *memory = open_memstream(&text, &size);

	assert_non_null(memory);
	assert_int_equal(policy_print(policy, memory), 0);
	assert_int_equal(fclose(memory), 0);
	return text;
}

/* Load policy text that must be valid; fails the test with the error otherwise. */
static inline struct policy *load_valid(const char *yaml, const char *name)
{
	struct policy *policy = NULL;
	struct policy_error error;
	char message[600];

	int result = policy_load_buffer(yaml, strlen(yaml), name, &policy, &error);
	if (result < 0) {
		policy_error_format(&error, message, sizeof(message));
		fail_msg("%s", message);
	}
	return policy;
}

#endif
