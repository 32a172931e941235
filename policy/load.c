/*
 * policy/load.c — reading a policy file safely, and the policy object's lifetime.
 */
#include "policy/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void error_start(struct policy_error *error, const char *name)
{
	if (error == NULL)
		return;
	memset(error, 0, sizeof(*error));
	snprintf(error->file, sizeof(error->file), "%s", name != NULL ? name : "(policy)");
}

static int fail_errno(struct policy_error *error, int negative_errno, const char *what)
{
	policy_fail(error, 0, 0, "%s: %s", what, strerror(-negative_errno));
	return negative_errno;
}

static void free_rule(struct policy_rule *rule)
{
	free(rule->match_name);
	free(rule->match_comment);
	policy_free_strings(rule->allow, rule->allow_count);
	free(rule->entries);
	free(rule->create_rings.ranges);
	free(rule->monitor_rings.ranges);
}

void policy_free(struct policy *policy)
{
	if (policy == NULL)
		return;
	for (size_t i = 0; i < policy->msr_count; i++) {
		free(policy->msrs[i].name);
		policy_free_strings(policy->msrs[i].sets, policy->msrs[i].set_count);
	}
	free(policy->msrs);
	free(policy->by_address);
	for (size_t i = 0; i < policy->rule_count; i++)
		free_rule(&policy->rules[i]);
	free(policy->rules);
	policy_free_strings(policy->warnings, policy->warning_count);
	free(policy->name);
	free(policy);
}

static int load_text(const char *yaml, size_t length, const char *name, struct policy **out,
		     struct policy_error *error)
{
	struct policy *policy = calloc(1, sizeof(*policy));
	int result = -ENOMEM;

	if (policy == NULL)
		goto out;
	policy->name = policy_strdup(name);
	if (policy->name == NULL)
		goto out;
	result = policy_parse(yaml, length, policy, error);
out:
	if (result < 0) {
		policy_free(policy);
		policy = NULL;
		if (result == -ENOMEM)
			fail_errno(error, result, "loading the policy");
	}
	*out = policy;
	return result;
}

int policy_load_buffer(const char *yaml, size_t length, const char *name, struct policy **out,
		       struct policy_error *error)
{
	struct policy_error ignored;

	if (error == NULL)
		error = &ignored;
	if (name == NULL)
		name = "(policy)";
	error_start(error, name);
	if (out == NULL)
		return -EINVAL;
	*out = NULL;
	if (yaml == NULL)
		return policy_fail(error, 0, 0, "no policy text");
	if (length > POLICY_MAX_FILE_BYTES) {
		policy_fail(error, 0, 0, "policy of %zu bytes is larger than the limit of %u",
			    length, POLICY_MAX_FILE_BYTES);
		return -EFBIG;
	}
	return load_text(yaml, length, name, out, error);
}

/* sshd's StrictModes: whoever can change the file or rename entries on its path can grant
 * themselves any register. Owner must be root or us; no group or other write bit. A directory
 * with the sticky bit (/tmp) is accepted with write bits, since only an entry's owner may
 * rename or delete it there, and the next entry on the path is checked in turn. */
static int check_mode(const struct stat *status, const char *what, const char *path,
		      struct policy_error *error)
{
	uid_t self = geteuid();

	if (status->st_uid != 0 && status->st_uid != self) {
		policy_fail(error, 0, 0,
			    "refusing policy: %s %s is owned by uid %u, not by root or uid %u",
			    what, path, (unsigned)status->st_uid, (unsigned)self);
		return -EACCES;
	}
	if ((status->st_mode & (S_IWGRP | S_IWOTH)) == 0)
		return 0;
	if (S_ISDIR(status->st_mode) && (status->st_mode & S_ISVTX))
		return 0;
	policy_fail(error, 0, 0,
		    "refusing policy: %s %s is writable by %s (mode %04o); run chmod go-w on "
		    "it or allow insecure permissions explicitly",
		    what, path, (status->st_mode & S_IWOTH) ? "others" : "its group",
		    (unsigned)(status->st_mode & 07777));
	return -EACCES;
}

/* ---- opening a policy file strictly: the path walked by descriptor ---- */

#define MAX_SYMLINKS 40 /* the kernel's limit on links followed in one lookup */

/* Where the walk stands: a descriptor of the directory reached, and its path as walked (for
 * messages; symbolic links replaced by what they point to). */
struct walk {
	int directory;
	char where[PATH_MAX];
	unsigned links;
	struct policy_error *error;
};

/* The message names the whole path walked so far, not only the component ("cannot open
 * /etc/haecer", never "cannot open haecer"). */
static int walk_fail(struct walk *walk, int negative_errno, const char *what, const char *name)
{
	size_t length = strlen(walk->where);

	if (name[0] == '/' || length == 0)
		policy_fail(walk->error, 0, 0, "%s %s: %s", what, name, strerror(-negative_errno));
	else
		policy_fail(walk->error, 0, 0, "%s %s%s%s: %s", what, walk->where,
			    walk->where[length - 1] == '/' ? "" : "/", name,
			    strerror(-negative_errno));
	return negative_errno;
}

/* Continue the walk's displayed path with one component ("." is nothing, ".." one up). */
static void walk_note(struct walk *walk, const char *name)
{
	size_t length = strlen(walk->where);

	if (strcmp(name, ".") == 0)
		return;
	if (strcmp(name, "..") == 0) {
		char *slash = strrchr(walk->where, '/');
		if (slash != NULL)
			slash[slash == walk->where ? 1 : 0] = '\0';
		return;
	}
	snprintf(walk->where + length, sizeof(walk->where) - length, "%s%s",
		 length > 0 && walk->where[length - 1] == '/' ? "" : "/", name);
}

/* Step into directory `fd` (already opened from walk->directory, or "/" when name is NULL),
 * checking who may change it. */
static int walk_enter(struct walk *walk, int fd, const char *name)
{
	struct stat status;
	int result;

	if (fstat(fd, &status) < 0) {
		result = -errno;
		close(fd);
		return walk_fail(walk, result, "cannot inspect the directory", name ? name : "/");
	}
	if (name != NULL)
		walk_note(walk, name);
	else
		snprintf(walk->where, sizeof(walk->where), "/");
	result = check_mode(&status, "directory", walk->where, walk->error);
	if (result < 0) {
		close(fd);
		return result;
	}
	close(walk->directory);
	walk->directory = fd;
	return 0;
}

/* Restart at "/" for an absolute path. */
static int walk_root(struct walk *walk)
{
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return walk_fail(walk, -errno, "cannot open", "/");
	return walk_enter(walk, fd, NULL);
}

static int walk_path(struct walk *walk, const char *path, int *file);

/* Follow the symbolic link `name` in the walk's directory, as the kernel would: its target is
 * walked from the directory that holds the link (or from "/"). */
static int walk_link(struct walk *walk, const char *name, int *file)
{
	char target[PATH_MAX];
	ssize_t length;

	struct stat status;
	uid_t self = geteuid();

	if (++walk->links > MAX_SYMLINKS)
		return walk_fail(walk, -ELOOP, "cannot resolve", name);
	/* A link's own mode means nothing, but its owner may point it elsewhere at any time (in
	 * a sticky directory too, where only the owner may replace it): trusted like a file. */
	if (fstatat(walk->directory, name, &status, AT_SYMLINK_NOFOLLOW) < 0)
		return walk_fail(walk, -errno, "cannot inspect the link", name);
	if (status.st_uid != 0 && status.st_uid != self) {
		policy_fail(walk->error, 0, 0,
			    "refusing policy: symbolic link %s%s%s is owned by uid %u, not by root "
			    "or uid %u", walk->where,
			    walk->where[0] != '\0' && walk->where[strlen(walk->where) - 1] == '/'
				    ? "" : "/",
			    name, (unsigned)status.st_uid, (unsigned)self);
		return -EACCES;
	}
	length = readlinkat(walk->directory, name, target, sizeof(target) - 1);
	if (length < 0)
		return walk_fail(walk, -errno, "cannot read the link", name);
	target[length] = '\0';
	return walk_path(walk, target, file);
}

/* One directory component: a directory to enter, or a link to follow to one. */
static int walk_directory(struct walk *walk, const char *name)
{
	struct stat status;
	int fd;

	if (strcmp(name, ".") == 0)
		return 0;
	fd = openat(walk->directory, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return walk_fail(walk, -errno, "cannot open", name);
	if (fstat(fd, &status) < 0) {
		int result = -errno;
		close(fd);
		return walk_fail(walk, result, "cannot inspect", name);
	}
	if (S_ISLNK(status.st_mode)) {
		close(fd);
		return walk_link(walk, name, NULL);
	}
	if (!S_ISDIR(status.st_mode)) {
		close(fd);
		return walk_fail(walk, -ENOTDIR, "cannot open", name);
	}
	return walk_enter(walk, fd, name);
}

/* The last component: the file itself, opened without following a link (a link is followed
 * by walking its target). */
static int walk_file(struct walk *walk, const char *name, int *file)
{
	int fd;

	if (name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		policy_fail(walk->error, 0, 0, "not a regular file");
		return -EINVAL;
	}
	/* O_NONBLOCK: a FIFO planted as the policy must not block msrd. */
	fd = openat(walk->directory, name,
		    O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ELOOP)
		return walk_link(walk, name, file);
	if (fd < 0)
		return fail_errno(walk->error, -errno, "cannot open");
	*file = fd;
	return 0;
}

/* Walk `path` from the walk's directory. file == NULL: every component is a directory (a
 * link's target); otherwise the last one is the file, opened into *file. */
static int walk_path(struct walk *walk, const char *path, int *file)
{
	char copy[PATH_MAX];
	char *component, *rest;
	int result = 0;

	if ((size_t)snprintf(copy, sizeof(copy), "%s", path) >= sizeof(copy))
		return walk_fail(walk, -ENAMETOOLONG, "cannot open", path);
	if (copy[0] == '/')
		result = walk_root(walk);
	rest = copy;
	while (result == 0 && (component = strsep(&rest, "/")) != NULL) {
		bool last = rest == NULL || rest[strspn(rest, "/")] == '\0';
		if (component[0] == '\0' && !last)
			continue;
		if (last && file != NULL)
			return walk_file(walk, component, file);
		if (component[0] != '\0')
			result = walk_directory(walk, component);
		if (last)
			break;
	}
	return result;
}

/* Open the policy at `path` the way the kernel would resolve it, one component at a time by
 * descriptor: every directory passed through, including the directories of symbolic links
 * followed, is checked as it is entered (check_mode), and the file read is the one the walk
 * opened, so nothing can be swapped between the check and the read. A relative path starts
 * from the working directory, whose own path is walked too. */
static int open_strictly(const char *path, struct policy_error *error, int *file)
{
	struct walk walk = { .directory = -1, .error = error };
	char start[PATH_MAX];
	int result;

	if (path[0] != '/') {
		if (getcwd(start, sizeof(start)) == NULL)
			return fail_errno(error, -errno, "cannot resolve the working directory");
		result = walk_path(&walk, start, NULL);
	} else {
		result = walk_root(&walk);
	}
	if (result == 0)
		result = walk_path(&walk, path[0] == '/' ? path + 1 : path, file);
	if (walk.directory >= 0)
		close(walk.directory);
	return result;
}

/* Read at most POLICY_MAX_FILE_BYTES + 1, so that a larger file is noticed, not truncated. */
static int read_all(int fd, char **text, size_t *length, struct policy_error *error)
{
	size_t capacity = POLICY_MAX_FILE_BYTES + 1, used = 0;
	char *buffer = malloc(capacity);

	if (buffer == NULL)
		return -ENOMEM;
	for (;;) {
		ssize_t count = read(fd, buffer + used, capacity - used);
		if (count < 0 && errno == EINTR)
			continue;
		if (count < 0) {
			int result = -errno;
			free(buffer);
			return fail_errno(error, result, "cannot read");
		}
		if (count == 0 || (used += (size_t)count) == capacity)
			break;
	}
	if (used > POLICY_MAX_FILE_BYTES) {
		free(buffer);
		policy_fail(error, 0, 0, "policy file is larger than the limit of %u bytes",
			    POLICY_MAX_FILE_BYTES);
		return -EFBIG;
	}
	*text = buffer;
	*length = used;
	return 0;
}

int policy_load(const char *path, const struct policy_load_options *options, struct policy **out,
		struct policy_error *error)
{
	struct policy_error ignored;
	bool strict = options == NULL || !options->allow_insecure_permissions;
	char *text = NULL;
	size_t length = 0;
	struct stat status;
	int result = 0;
	int fd = -1;

	if (error == NULL)
		error = &ignored;
	error_start(error, path);
	if (out == NULL || path == NULL)
		return -EINVAL;
	*out = NULL;
	if (strict) {
		result = open_strictly(path, error, &fd);
		if (result < 0)
			return result;
	} else {
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd < 0)
			return fail_errno(error, -errno, "cannot open");
	}
	if (fstat(fd, &status) < 0) {
		result = fail_errno(error, -errno, "cannot inspect");
		goto out;
	}
	if (!S_ISREG(status.st_mode)) {
		result = policy_fail(error, 0, 0, "not a regular file");
		goto out;
	}
	if (strict) {
		result = check_mode(&status, "file", path, error);
		if (result < 0)
			goto out;
	}
	result = read_all(fd, &text, &length, error);
	if (result == 0)
		result = load_text(text, length, path, out, error);
out:
	free(text);
	close(fd);
	return result;
}

struct name_key {
	uint32_t address;
	const struct policy_msr *msrs;
};

static int key_in_entry(const void *key, const void *element)
{
	const struct name_key *name_key = key;
	const struct policy_msr *msr = &name_key->msrs[*(const size_t *)element];

	return name_key->address < msr->first ? -1 : name_key->address > msr->last ? 1 : 0;
}

const char *policy_msr_name(const struct policy *policy, uint32_t address)
{
	if (policy == NULL || policy->msr_count == 0)
		return NULL;
	const struct name_key key = { address, policy->msrs };
	const size_t *index = bsearch(&key, policy->by_address, policy->msr_count,
				      sizeof(*policy->by_address), key_in_entry);
	return index != NULL ? policy->msrs[*index].name : NULL;
}

uint32_t policy_energy_page_max_hz(const struct policy *policy)
{
	return policy != NULL ? policy->energy_page_max_hz : POLICY_ENERGY_PAGE_DEFAULT_HZ;
}

uint32_t policy_edge_cpu_percent(const struct policy *policy)
{
	return policy != NULL ? policy->edge_cpu_percent : POLICY_EDGE_CPU_PERCENT_DEFAULT;
}

uint32_t policy_edge_cpu_percent_per_uid(const struct policy *policy)
{
	return policy != NULL ? policy->edge_cpu_percent_per_uid
			      : POLICY_EDGE_CPU_PERCENT_PER_UID_DEFAULT;
}

size_t policy_warning_count(const struct policy *policy)
{
	return policy != NULL ? policy->warning_count : 0;
}

const char *policy_warning(const struct policy *policy, size_t index)
{
	if (policy == NULL || index >= policy->warning_count)
		return NULL;
	return policy->warnings[index];
}

int policy_error_format(const struct policy_error *error, char *buffer, size_t size)
{
	int length;

	if (error == NULL || buffer == NULL || size == 0)
		return -EINVAL;
	if (error->line > 0)
		length = snprintf(buffer, size, "%s:%u:%u: %s", error->file, error->line,
				  error->column, error->message);
	else
		length = snprintf(buffer, size, "%s: %s", error->file, error->message);
	if (length < 0)
		return -EINVAL;
	return (size_t)length < size ? length : -ENOSPC;
}
