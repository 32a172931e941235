/*
 * msr-safe allowlists to policy YAML.
 *
 * tests/policy/import/al_sample (in the style of msr-safe's allowlists/al_06_*) must import to
 * exactly al_sample.yaml; the output must load, and the loaded policy must grant each listed
 * register for reading with exactly the listed write mask, to everyone (or to the named group
 * only), and nothing else. tests/policy/import/bad/NAME.al must be refused with -EINVAL, the
 * error naming the line as NAME.err says, with nothing written.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <unistd.h>

#include "policy_test.h"

/* The registers al_sample grants, as its uncommented lines say. */
static const struct {
	uint32_t address;
	uint64_t write_mask;
} sample[] = {
	{ 0x10, 0 },		  { 0x34, 0 },	 { 0xC1, 0x0000FFFFFFFFFFFF },
	{ 0xC2, 0x0000FFFFFFFFFFFF }, { 0x186, 0xFFC7FFFF }, { 0x187, 0xFFC7FFFF },
	{ 0x38F, 0x7000000FF },	  { 0x606, 0 },	 { 0x611, 0 },
	{ 0x619, 0 },		  { 0xC001029B, 0 },
};

/* Import a file into a string (caller frees); returns the result and fills error. */
static int import_file(const char *path, const char *name, const char *group, char **yaml,
		       struct policy_error *error)
{
	size_t size = 0;
	FILE *in = fopen(path, "r");
	FILE *out = open_memstream(yaml, &size);

	assert_non_null(in);
	assert_non_null(out);
	int result = policy_import_allowlist(in, name, group, out, error);
	fclose(in);
	assert_int_equal(fclose(out), 0);
	return result;
}

static void assert_grants_exactly_the_sample(const struct policy_grant *grant)
{
	size_t listed = 0;

	for (size_t i = 0; i < sizeof(sample) / sizeof(sample[0]); i++) {
		assert_true(policy_allows_read(grant, sample[i].address));
		assert_int_equal(policy_write_mask(grant, sample[i].address), sample[i].write_mask);
	}
	for (uint32_t address = 0; address < 0x1000; address++)
		listed += policy_allows_read(grant, address);
	assert_int_equal(listed, sizeof(sample) / sizeof(sample[0]) - 1); /* all but 0xC001029B */
	assert_false(policy_allows_read(grant, 0x1B)); /* commented out */
}

static void test_sample_imports_to_golden_yaml(void **state)
{
	char *path = source_path("tests/policy/import/al_sample");
	char *expected_path = source_path("tests/policy/import/al_sample.yaml");
	char *expected = read_text(expected_path, NULL);
	struct policy_error error;
	char *yaml = NULL;

	(void)state;
	assert_int_equal(import_file(path, "allowlists/al_sample", NULL, &yaml, &error), 0);
	assert_non_null(expected);
	if (strcmp(expected, yaml) != 0)
		fail_msg("import differs\n--- expected\n%s--- actual\n%s---", expected, yaml);
	free(path);
	free(expected_path);
	free(expected);
	free(yaml);
}

/* Without a group, everyone gets what msr-safe's device would give them. */
static void test_import_loads_and_grants_the_list_to_everyone(void **state)
{
	char *path = source_path("tests/policy/import/al_sample");
	const struct policy_subject anyone = { 5000, 5000, NULL, 0 };
	struct policy_grant *grant = NULL;
	struct policy_error error;
	char *yaml = NULL;

	(void)state;
	assert_int_equal(import_file(path, "al_sample", NULL, &yaml, &error), 0);
	struct policy *policy = load_valid(yaml, "imported");
	assert_int_equal(policy_warning_count(policy), 0);
	assert_int_equal(policy_resolve(policy, &anyone, &grant), 0);
	assert_grants_exactly_the_sample(grant);
	assert_false(policy_allows_monitor(grant, 1));
	policy_grant_free(grant);
	policy_free(policy);
	free(yaml);
	free(path);
}

/* With a group, members get the list and others nothing (group root: gid 0 here). */
static void test_import_for_a_group(void **state)
{
	char *path = source_path("tests/policy/import/al_sample");
	const gid_t member_groups[] = { 0 };
	const struct policy_subject member = { 5000, 5000, member_groups, 1 };
	const struct policy_subject outsider = { 5000, 5000, NULL, 0 };
	struct policy_grant *grant = NULL, *denied = NULL;
	struct policy_error error;
	char *yaml = NULL;

	(void)state;
	assert_int_equal(import_file(path, "al_sample", "root", &yaml, &error), 0);
	assert_non_null(strstr(yaml, "  - match: {group: root}\n    allow: [al_sample]\n"));
	struct policy *policy = load_valid(yaml, "imported");
	assert_int_equal(policy_resolve(policy, &member, &grant), 0);
	assert_int_equal(policy_resolve(policy, &outsider, &denied), 0);
	assert_grants_exactly_the_sample(grant);
	assert_false(policy_grant_matched(denied));
	assert_false(policy_allows_read(denied, 0x10));
	policy_grant_free(grant);
	policy_grant_free(denied);
	policy_free(policy);
	free(yaml);
	free(path);
}

static void test_bad_group_name_is_refused(void **state)
{
	char *path = source_path("tests/policy/import/al_sample");
	struct policy_error error;
	char *yaml = NULL;

	(void)state;
	assert_int_equal(import_file(path, "al_sample", "a b: c", &yaml, &error), -EINVAL);
	assert_string_equal(error.message, "group name 'a b: c' is not valid");
	assert_string_equal(yaml, "");
	free(yaml);
	free(path);
}

static int is_allowlist(const struct dirent *entry)
{
	size_t length = strlen(entry->d_name);
	return length > 3 && strcmp(entry->d_name + length - 3, ".al") == 0;
}

static bool check_bad(const char *directory, const char *name)
{
	char *path = NULL, *err_path = NULL, *yaml = NULL, message[600];
	struct policy_error error;
	bool good = true;

	assert_true(asprintf(&path, "%s/%s", directory, name) > 0);
	assert_true(asprintf(&err_path, "%s/%.*s.err", directory, (int)strlen(name) - 3, name) > 0);
	char *expected = read_text(err_path, NULL);
	int result = import_file(path, name, NULL, &yaml, &error);
	policy_error_format(&error, message, sizeof(message));
	if (result != -EINVAL || yaml[0] != '\0') {
		print_message("%s: returned %d and wrote %zu bytes\n", name, result, strlen(yaml));
		good = false;
	}
	if (expected == NULL) {
		print_message("%s: %s is missing (error: %s)\n", name, err_path, message);
		good = false;
	} else if (expected[strcspn(expected, "\n")] = '\0', strcmp(expected, message) != 0) {
		print_message("%s: expected\n  %s\nactual\n  %s\n", name, expected, message);
		good = false;
	}
	free(path);
	free(err_path);
	free(expected);
	free(yaml);
	return good;
}

static void test_malformed_allowlists_name_their_line(void **state)
{
	char *directory = source_path("tests/policy/import/bad");
	struct dirent **entries = NULL;
	size_t failures = 0;

	(void)state;
	int count = scandir(directory, &entries, is_allowlist, alphasort);
	assert_true(count >= 8);
	for (int i = 0; i < count; i++) {
		failures += !check_bad(directory, entries[i]->d_name);
		free(entries[i]);
	}
	free(entries);
	free(directory);
	assert_int_equal(failures, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample_imports_to_golden_yaml),
		cmocka_unit_test(test_import_loads_and_grants_the_list_to_everyone),
		cmocka_unit_test(test_import_for_a_group),
		cmocka_unit_test(test_bad_group_name_is_refused),
		cmocka_unit_test(test_malformed_allowlists_name_their_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
