/*
 * Golden tests in the OpenBSD style.
 *
 * tests/policy/good/NAME.yaml must load; its canonical print must equal NAME.ok byte for byte,
 * its warnings (one per line) NAME.warn or nothing, and parsing the canonical print again must
 * print the same text (the canonical form is a fixed point).
 * tests/policy/bad/NAME.yaml must be refused with -EINVAL and the formatted error must equal the
 * line in NAME.err, which names file, line and column.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <unistd.h>

#include "policy_test.h"

static const struct policy_load_options source_tree = {
	/* a checkout's permissions are the developer's business; test_permissions covers them */
	.allow_insecure_permissions = true,
};

static int is_yaml(const struct dirent *entry)
{
	size_t length = strlen(entry->d_name);
	return length > 5 && strcmp(entry->d_name + length - 5, ".yaml") == 0;
}

/* NAME.yaml -> NAME.suffix, caller frees */
static char *sibling(const char *name, const char *suffix)
{
	char *path = NULL;
	assert_true(asprintf(&path, "%.*s%s", (int)(strlen(name) - 5), name, suffix) > 0);
	return path;
}

static char *warnings_of(const struct policy *policy)
{
	char *text = NULL;
	size_t size = 0;
	FILE *memory = open_memstream(&text, &size);

	assert_non_null(memory);
	for (size_t i = 0; i < policy_warning_count(policy); i++)
		fprintf(memory, "%s\n", policy_warning(policy, i));
	assert_null(policy_warning(policy, policy_warning_count(policy)));
	assert_int_equal(fclose(memory), 0);
	return text;
}

static bool same_text(const char *what, const char *name, const char *expected,
		      const char *actual)
{
	if (strcmp(expected, actual) == 0)
		return true;
	print_message("%s: %s differs\n--- expected\n%s--- actual\n%s---\n", name, what, expected,
		      actual);
	return false;
}

/* The canonical print of the canonical print is itself. */
static bool canonical_is_fixed_point(const char *name, const char *canonical)
{
	struct policy *again = load_valid(canonical, "canonical");
	char *printed = print_policy(again);
	bool same = same_text("reprinted canonical form", name, canonical, printed);

	free(printed);
	policy_free(again);
	return same;
}

static bool check_good(const char *name)
{
	struct policy *policy = NULL;
	struct policy_error error;
	char message[600];

	if (policy_load(name, &source_tree, &policy, &error) < 0) {
		policy_error_format(&error, message, sizeof(message));
		print_message("%s: refused: %s\n", name, message);
		return false;
	}
	char *ok_path = sibling(name, ".ok"), *warn_path = sibling(name, ".warn");
	char *expected = read_text(ok_path, NULL), *expected_warnings = read_text(warn_path, NULL);
	char *printed = print_policy(policy), *warnings = warnings_of(policy);
	bool good = expected != NULL;

	if (expected == NULL)
		print_message("%s: %s is missing\n", name, ok_path);
	good = good && same_text("canonical form", name, expected, printed);
	good = same_text("warnings", name, expected_warnings ? expected_warnings : "", warnings) &&
	       good;
	good = canonical_is_fixed_point(name, printed) && good;
	free(ok_path);
	free(warn_path);
	free(expected);
	free(expected_warnings);
	free(printed);
	free(warnings);
	policy_free(policy);
	return good;
}

static bool check_bad(const char *name)
{
	struct policy *policy = (struct policy *)&policy; /* must be reset to NULL */
	struct policy_error error;
	char message[600];
	char *err_path = sibling(name, ".err");
	char *expected = read_text(err_path, NULL);
	bool good = true;

	int result = policy_load(name, &source_tree, &policy, &error);
	assert_int_equal(policy_error_format(&error, message, sizeof(message)) > 0, 1);
	if (result != -EINVAL || policy != NULL) {
		print_message("%s: load returned %d, expected -EINVAL and no policy\n", name,
			      result);
		good = false;
	}
	if (error.line == 0 || error.column == 0) {
		print_message("%s: error has no place: %s\n", name, message);
		good = false;
	}
	if (expected == NULL) {
		print_message("%s: %s is missing (error: %s)\n", name, err_path, message);
		good = false;
	} else {
		expected[strcspn(expected, "\n")] = '\0';
		good = same_text("error", name, expected, message) && good;
	}
	free(err_path);
	free(expected);
	return good;
}

/* Run check on every NAME.yaml of the directory; returns how many there were. */
static size_t check_directory(const char *relative, bool (*check)(const char *name),
			      size_t *failures)
{
	struct dirent **entries = NULL;
	char *directory = source_path(relative);
	char previous[4096];

	assert_non_null(getcwd(previous, sizeof(previous)));
	assert_int_equal(chdir(directory), 0); /* errors name files as the operator gave them */
	int count = scandir(".", &entries, is_yaml, alphasort);
	assert_true(count > 0);
	for (int i = 0; i < count; i++) {
		if (!check(entries[i]->d_name))
			(*failures)++;
		free(entries[i]);
	}
	free(entries);
	assert_int_equal(chdir(previous), 0);
	free(directory);
	return (size_t)count;
}

static void test_good_policies_print_their_golden_form(void **state)
{
	size_t failures = 0;

	(void)state;
	size_t count = check_directory("tests/policy/good", check_good, &failures);
	assert_true(count >= 5);
	assert_int_equal(failures, 0);
}

static void test_bad_policies_give_their_golden_error(void **state)
{
	size_t failures = 0;

	(void)state;
	size_t count = check_directory("tests/policy/bad", check_bad, &failures);
	assert_true(count >= 15);
	assert_int_equal(failures, 0);
}

static void test_error_format(void **state)
{
	struct policy_error error = { .file = "p.yaml", .line = 7, .column = 14,
				      .message = "write_mask too wide" };
	char buffer[64], tiny[8];

	(void)state;
	assert_int_equal(policy_error_format(&error, buffer, sizeof(buffer)),
			 (int)strlen("p.yaml:7:14: write_mask too wide"));
	assert_string_equal(buffer, "p.yaml:7:14: write_mask too wide");
	error.line = 0;
	assert_true(policy_error_format(&error, buffer, sizeof(buffer)) > 0);
	assert_string_equal(buffer, "p.yaml: write_mask too wide");
	assert_int_equal(policy_error_format(&error, tiny, sizeof(tiny)), -ENOSPC);
	assert_string_equal(tiny, "p.yaml:");
	assert_int_equal(policy_error_format(&error, NULL, 8), -EINVAL);
}

/* Errors in text loaded from memory carry the name the caller gave it. */
static void test_buffer_errors_use_the_given_name(void **state)
{
	static const char text[] = "version: 1\ndefault: deny\nmsrs:\n  - {name: A, address: x}\n";
	struct policy *policy = NULL;
	struct policy_error error;
	char message[400];

	(void)state;
	assert_int_equal(policy_load_buffer(text, strlen(text), "inline", &policy, &error),
			 -EINVAL);
	assert_null(policy);
	policy_error_format(&error, message, sizeof(message));
	assert_string_equal(message,
			    "inline:4:24: address 'x' is not a number (write 0x1f or 31)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_policies_print_their_golden_form),
		cmocka_unit_test(test_bad_policies_give_their_golden_error),
		cmocka_unit_test(test_error_format),
		cmocka_unit_test(test_buffer_errors_use_the_given_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
