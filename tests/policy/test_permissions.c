/*
 * policy_load refuses a policy anyone but root (or msrd's own user) could change, as sshd's
 * StrictModes does: a group- or world-writable file, a file owned by another user, or a
 * writable directory on its path; sticky directories such as /tmp are fine. The explicit
 * option accepts them all. The path is walked one directory at a time by descriptor, as the
 * kernel resolves it: the directory holding a symbolic link is checked too (whoever can write
 * it can point the link elsewhere), as are the directories a link leads through, and the file
 * read is the one the walk opened. Real files, directories and links in a temporary directory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy_test.h"

static const char policy_text[] = "version: 1\ndefault: deny\n"
				  "msrs:\n  - {name: TSC, address: 0x10, read: true, set: t}\n"
				  "rules:\n  - match: {any: true}\n    allow: [t]\n";

struct scratch {
	char root[64]; /* mkdtemp under /tmp: root-owned and sticky */
};

static char *path_in(const struct scratch *scratch, const char *relative)
{
	char *path = NULL;
	assert_true(asprintf(&path, "%s/%s", scratch->root, relative) > 0);
	return path;
}

static char *make_dir(const struct scratch *scratch, const char *relative, mode_t mode)
{
	char *path = path_in(scratch, relative);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(chmod(path, mode), 0); /* chmod: the umask does not apply */
	return path;
}

static char *make_policy(const struct scratch *scratch, const char *relative, mode_t mode)
{
	char *path = path_in(scratch, relative);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, policy_text, strlen(policy_text)), (ssize_t)strlen(policy_text));
	assert_int_equal(close(fd), 0);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

static int setup(void **state)
{
	struct scratch *scratch = calloc(1, sizeof(*scratch));
	assert_non_null(scratch);
	snprintf(scratch->root, sizeof(scratch->root), "/tmp/haecer-policy-XXXXXX");
	assert_non_null(mkdtemp(scratch->root));
	*state = scratch;
	return 0;
}

static int remove_entry(const char *path, const struct stat *status, int flag, struct FTW *ftw)
{
	(void)status;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	struct scratch *scratch = *state;
	int result = nftw(scratch->root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(scratch);
	return result;
}

/* Load strictly; return the result and leave the formatted error in `message`. */
static int load_strict(const char *path, char *message, size_t size)
{
	struct policy *policy = NULL;
	struct policy_error error;

	int result = policy_load(path, NULL, &policy, &error);
	if (result < 0) {
		assert_null(policy);
		assert_int_equal(error.line, 0);
		assert_true(policy_error_format(&error, message, size) > 0);
	} else {
		assert_non_null(policy);
		message[0] = '\0';
	}
	policy_free(policy);
	return result;
}

static void assert_loads_with_override(const char *path)
{
	const struct policy_load_options insecure = { .allow_insecure_permissions = true };
	struct policy *policy = NULL;
	struct policy_error error;

	assert_int_equal(policy_load(path, &insecure, &policy, &error), 0);
	assert_non_null(policy);
	policy_free(policy);
}

static void assert_contains(const char *text, const char *part)
{
	if (strstr(text, part) == NULL)
		fail_msg("'%s' does not contain '%s'", text, part);
}

static void test_private_file_loads(void **state)
{
	char message[600];
	char *path = make_policy(*state, "policy.yaml", 0644);

	assert_int_equal(load_strict(path, message, sizeof(message)), 0);
	free(path);
}

static void test_group_writable_file_is_refused(void **state)
{
	char message[600];
	char *path = make_policy(*state, "policy.yaml", 0664);

	assert_int_equal(load_strict(path, message, sizeof(message)), -EACCES);
	assert_contains(message, "is writable by its group (mode 0664)");
	assert_contains(message, path);
	assert_loads_with_override(path);
	free(path);
}

static void test_world_writable_file_is_refused(void **state)
{
	char message[600];
	char *path = make_policy(*state, "policy.yaml", 0646);

	assert_int_equal(load_strict(path, message, sizeof(message)), -EACCES);
	assert_contains(message, "is writable by others (mode 0646)");
	assert_loads_with_override(path);
	free(path);
}

static void test_world_writable_directory_is_refused(void **state)
{
	char message[600];
	char *directory = make_dir(*state, "open", 0777);
	char *path = make_policy(*state, "open/policy.yaml", 0644);

	assert_int_equal(load_strict(path, message, sizeof(message)), -EACCES);
	assert_contains(message, "directory");
	assert_contains(message, directory);
	assert_contains(message, "writable by others (mode 0777)");
	assert_loads_with_override(path);
	free(directory);
	free(path);
}

/* A writable directory anywhere above the file is as bad as its own directory. */
static void test_group_writable_ancestor_is_refused(void **state)
{
	char message[600];
	char *top = make_dir(*state, "shared", 0775);
	char *middle = make_dir(*state, "shared/etc", 0755);
	char *path = make_policy(*state, "shared/etc/policy.yaml", 0600);

	assert_int_equal(load_strict(path, message, sizeof(message)), -EACCES);
	assert_contains(message, top);
	assert_contains(message, "writable by its group (mode 0775)");
	free(top);
	free(middle);
	free(path);
}

/* Entries of a sticky directory can only be renamed by their owners, so it is no hole. */
static void test_sticky_directory_is_accepted(void **state)
{
	char message[600];
	char *directory = make_dir(*state, "sticky", 01777);
	char *path = make_policy(*state, "sticky/policy.yaml", 0644);

	assert_int_equal(load_strict(path, message, sizeof(message)), 0);
	free(directory);
	free(path);
}

static void test_file_of_another_user_is_refused(void **state)
{
	char message[600];
	char *path = make_policy(*state, "policy.yaml", 0644);

	if (geteuid() != 0) {
		free(path);
		skip(); /* only root can give a file away */
	}
	assert_int_equal(chown(path, 4242, 4242), 0);
	assert_int_equal(load_strict(path, message, sizeof(message)), -EACCES);
	assert_contains(message, "is owned by uid 4242, not by root or uid 0");
	assert_loads_with_override(path);
	free(path);
}

static char *make_link(const struct scratch *scratch, const char *relative, const char *target)
{
	char *path = path_in(scratch, relative);
	assert_int_equal(symlink(target, path), 0);
	return path;
}

/* The link's own directory is world-writable: anyone could replace the link. realpath() saw
 * only the target's directories and accepted it. */
static void test_link_in_writable_directory_is_refused(void **state)
{
	char message[600];
	char *safe = make_dir(*state, "safe", 0755);
	char *policy = make_policy(*state, "safe/policy.yaml", 0644);
	char *open_dir = make_dir(*state, "open", 0777);
	char *link = make_link(*state, "open/policy.yaml", policy);

	assert_int_equal(load_strict(link, message, sizeof(message)), -EACCES);
	assert_contains(message, open_dir);
	assert_contains(message, "writable by others (mode 0777)");
	assert_loads_with_override(link);
	free(safe);
	free(policy);
	free(open_dir);
	free(link);
}

/* Links between safe directories are fine, relative targets resolve from the link's
 * directory, and a relative policy path from the working directory. */
static void test_links_between_safe_directories_load(void **state)
{
	const struct scratch *scratch = *state;
	char message[600];
	char *etc = make_dir(*state, "etc", 0755);
	char *real = make_dir(*state, "real", 0755);
	char *policy = make_policy(*state, "real/policy.yaml", 0644);
	char *to_file = make_link(*state, "etc/policy.yaml", "../real/policy.yaml");
	char *to_dir = make_link(*state, "conf", "real");
	char *through = path_in(*state, "conf/../etc/./policy.yaml");
	char cwd[PATH_MAX];

	assert_int_equal(load_strict(to_file, message, sizeof(message)), 0);
	assert_int_equal(load_strict(through, message, sizeof(message)), 0);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(scratch->root), 0);
	assert_int_equal(load_strict("conf/policy.yaml", message, sizeof(message)), 0);
	assert_int_equal(chdir(cwd), 0);
	free(etc);
	free(real);
	free(policy);
	free(to_file);
	free(to_dir);
	free(through);
}

/* A link that leads through a group-writable directory is as bad as a path through it. */
static void test_link_through_writable_directory_is_refused(void **state)
{
	char message[600];
	char *shared = make_dir(*state, "shared", 0775);
	char *policy = make_policy(*state, "shared/policy.yaml", 0644);
	char *link = make_link(*state, "policy.yaml", "shared/policy.yaml");

	assert_int_equal(load_strict(link, message, sizeof(message)), -EACCES);
	assert_contains(message, shared);
	assert_contains(message, "writable by its group (mode 0775)");
	free(shared);
	free(policy);
	free(link);
}

static void test_link_loop_and_fifo(void **state)
{
	char message[600];
	char *loop = make_link(*state, "loop.yaml", "loop.yaml");
	char *fifo = path_in(*state, "fifo.yaml");

	assert_int_equal(load_strict(loop, message, sizeof(message)), -ELOOP);
	/* A FIFO in place of the policy: refused at once, not waited on. */
	assert_int_equal(mkfifo(fifo, 0644), 0);
	assert_int_equal(load_strict(fifo, message, sizeof(message)), -EINVAL);
	assert_contains(message, "not a regular file");
	free(loop);
	free(fifo);
}

static void test_unusable_paths(void **state)
{
	char message[600];
	char *missing = path_in(*state, "missing.yaml");
	char *directory = make_dir(*state, "dir.yaml", 0755);
	char *big = make_policy(*state, "big.yaml", 0644);

	assert_int_equal(load_strict(missing, message, sizeof(message)), -ENOENT);
	assert_contains(message, "cannot open: No such file or directory");
	assert_int_equal(load_strict(directory, message, sizeof(message)), -EINVAL);
	assert_contains(message, "not a regular file");
	/* a file grown past the size limit is refused, not read in part */
	assert_int_equal(truncate(big, 2 << 20), 0);
	assert_int_equal(load_strict(big, message, sizeof(message)), -EFBIG);
	assert_contains(message, "larger than the limit");
	free(missing);
	free(directory);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_private_file_loads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_group_writable_file_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_world_writable_file_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_world_writable_directory_is_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_group_writable_ancestor_is_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sticky_directory_is_accepted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_of_another_user_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unusable_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_in_writable_directory_is_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_links_between_safe_directories_load, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_link_through_writable_directory_is_refused,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_loop_and_fifo, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
