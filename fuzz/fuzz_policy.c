/*
 * fuzz/fuzz_policy.c — the policy loader (policy_load_buffer) on arbitrary text.
 *
 * The policy is written by the operator, so it is trusted for what it grants but not for being
 * well formed: a typo must be an error with a place, never a crash, a leak or a grant nobody
 * wrote. Properties checked for every input the loader accepts:
 *   - its canonical form (policy_print) loads again and prints the same text (documented in
 *     policy.h: parsing the output gives the same canonical form again);
 *   - grants resolved for a few identities answer consistently: a write is allowed exactly when
 *     every changed bit is inside policy_write_mask, -EPERM without a mask, -EACCES outside it;
 *     and the reloaded canonical policy grants exactly what the original does;
 * and for every input it refuses: the error is a terminated text that formats.
 *
 * Speed (issue 14: one run should pass 10 M executions): the loader's cost is mostly libyaml's
 * and libcyaml's many small allocations, and under ASan each free goes through a quarantine of
 * 256 MiB by default, whose recycling and page faults cost more than the parsing itself. This
 * target keeps a smaller quarantine (a use after free is still caught within the last 8 MiB
 * of frees, i.e. across many executions of the few KiB a policy allocates) and records two
 * frames of each allocation's stack instead of 30 (unwinding on every malloc was a third of the
 * rest). A report still shows the faulting stack in full; to see the whole allocation stack,
 * run the saved input again with ASAN_OPTIONS=malloc_context_size=30, which overrides these.
 * The canonical forms are printed into buffers kept across executions, not a new memstream
 * each time.
 */
#include <assert.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__asan_default_options(void);

const char *__asan_default_options(void)
{
	return "quarantine_size_mb=8:malloc_context_size=2";
}

/*
 * A fixed account database in place of the system's (these definitions take the place of
 * libc's getpwnam_r, getpwuid_r, getgrnam_r and getgrgid_r in this binary only). Every `user:`
 * and `group:` in a policy is looked up when it loads, twice per input here (the original and
 * its canonical form); through glibc's NSS each lookup of a name that does not exist opened
 * and scanned /etc/passwd or /etc/group and every systemd userdb directory, some 60 system
 * calls, and mutated names rarely exist: that was over half of an accepted input's time. The
 * loader's code is the same with either database (found, not found, a buffer too small), and
 * a failure found here replays alike on any machine. Accounts like a Debian system's, and the
 * names the seeds use.
 */
struct account {
	const char *name;
	uint32_t id;
};

static const struct account users[] = {
	{ "root", 0 },	   { "daemon", 1 },	  { "bin", 2 },	      { "nobody", 65534 },
	{ "geopm", 990 },  { "systemd-network", 998 }, { "alice", 1000 }, { "bob", 1001 },
};
static const struct account groups_db[] = {
	{ "root", 0 },	   { "daemon", 1 },  { "adm", 4 },	 { "sudo", 27 },
	{ "users", 100 },  { "haecer", 995 }, { "hpc", 996 },	 { "alice", 1000 },
	{ "bob", 1001 },   { "nogroup", 65534 },
};

static const struct account *find_account(const struct account *table, size_t count,
					  const char *name, uint32_t id)
{
	for (size_t i = 0; i < count; i++) {
		if (name != NULL ? strcmp(table[i].name, name) == 0 : table[i].id == id)
			return &table[i];
	}
	return NULL;
}

/* The name copied into the caller's buffer as glibc does: ERANGE when it does not fit. */
static int copy_name(const struct account *account, char *buffer, size_t size, char **out)
{
	size_t length = strlen(account->name) + 1;

	if (length + 2 > size)
		return ERANGE;
	memcpy(buffer, account->name, length);
	buffer[length] = '\0'; /* the empty password and member list below */
	*out = buffer;
	return 0;
}

static int user_result(const struct account *account, struct passwd *user, char *buffer,
		       size_t size, struct passwd **result)
{
	*result = NULL;
	if (account == NULL)
		return 0;
	int status = copy_name(account, buffer, size, &user->pw_name);
	if (status != 0)
		return status;
	user->pw_passwd = user->pw_gecos = user->pw_dir = user->pw_shell =
		buffer + strlen(buffer) + 1;
	user->pw_uid = account->id;
	user->pw_gid = account->id;
	*result = user;
	return 0;
}

static int group_result(const struct account *account, struct group *group, char *buffer,
			size_t size, struct group **result)
{
	static char *no_members[] = { NULL };

	*result = NULL;
	if (account == NULL)
		return 0;
	int status = copy_name(account, buffer, size, &group->gr_name);
	if (status != 0)
		return status;
	group->gr_passwd = buffer + strlen(buffer) + 1;
	group->gr_gid = account->id;
	group->gr_mem = no_members;
	*result = group;
	return 0;
}

#define COUNT(table) (sizeof(table) / sizeof((table)[0]))

int getpwnam_r(const char *name, struct passwd *user, char *buffer, size_t size,
	       struct passwd **result)
{
	return user_result(find_account(users, COUNT(users), name, 0), user, buffer, size, result);
}

int getpwuid_r(uid_t uid, struct passwd *user, char *buffer, size_t size, struct passwd **result)
{
	return user_result(find_account(users, COUNT(users), NULL, uid), user, buffer, size,
			   result);
}

int getgrnam_r(const char *name, struct group *group, char *buffer, size_t size,
	       struct group **result)
{
	return group_result(find_account(groups_db, COUNT(groups_db), name, 0), group, buffer,
			    size, result);
}

int getgrgid_r(gid_t gid, struct group *group, char *buffer, size_t size, struct group **result)
{
	return group_result(find_account(groups_db, COUNT(groups_db), NULL, gid), group, buffer,
			    size, result);
}

/* A canonical form is at most a few times its input, which is at most max_len (run.sh). */
#define PRINT_ROOM (4u << 20)

struct printed {
	char text[PRINT_ROOM];
	FILE *out;
};

static struct printed first_form, second_form;

/* policy's canonical form into `printed` (reused: no allocation per execution); its length. */
static size_t print_policy(const struct policy *policy, struct printed *printed)
{
	long length;

	if (printed->out == NULL)
		printed->out = fmemopen(printed->text, sizeof(printed->text), "w");
	assert(printed->out != NULL);
	rewind(printed->out);
	assert(policy_print(policy, printed->out) == 0);
	assert(fflush(printed->out) == 0);
	length = ftell(printed->out);
	assert(length >= 0 && (size_t)length < sizeof(printed->text));
	return (size_t)length;
}

static const gid_t groups[] = { 27, 100, 1000, 1001 };
static const struct policy_subject subjects[] = {
	{ .uid = 0, .gid = 0 },
	{ .uid = 1000, .gid = 1000, .groups = groups, .group_count = 4 },
	{ .uid = 1001, .gid = 100, .groups = groups + 1, .group_count = 1 },
	{ .uid = 65534, .gid = 65534 },
};

/* Registers worth asking about: the shipped policies' and their neighbours, and a few the
 * input itself names (any 4 bytes of it read as an address). */
static const uint32_t fixed_addresses[] = {
	0x0,	0x10,	0x34,  0xC1,  0xC8,  0xC9,	 0x186,	     0x18D,	 0x309,
	0x38D,	0x38F,	0x606, 0x611, 0x619, 0x639,	 0x641,	     0x64D,	 0x4C1,
	0xFFFF, 0x1000, 0x1FFF, 0x2000, 0xC0010299, 0xC001029B, 0xC0000080, 0xFFFFFFFF,
};

static void check_write_rule(const struct policy_grant *grant, uint32_t address, uint64_t current,
			     uint64_t proposed)
{
	uint64_t mask = policy_write_mask(grant, address);
	int status = policy_allows_write(grant, address, current, proposed);

	if (mask == 0)
		assert(status == -EPERM);
	else if (((current ^ proposed) & ~mask) != 0)
		assert(status == -EACCES);
	else
		assert(status == 0);
}

static void compare_grants(const struct policy_grant *a, const struct policy_grant *b,
			   uint32_t address)
{
	struct policy_energy_limit la, lb;
	int ea = policy_energy_limit(a, address, &la);
	int eb = policy_energy_limit(b, address, &lb);

	assert(policy_allows_read(a, address) == policy_allows_read(b, address));
	assert(policy_write_mask(a, address) == policy_write_mask(b, address));
	assert(ea == eb);
	if (ea == 1)
		assert(la.min_interval_ms == lb.min_interval_ms &&
		       la.resolution_uj == lb.resolution_uj);
}

static void check_subject(const struct policy *policy, const struct policy *canonical,
			  const struct policy_subject *subject, const uint8_t *data, size_t size)
{
	struct policy_grant *grant = NULL;
	struct policy_grant *again = NULL;

	assert(policy_resolve(policy, subject, &grant) == 0);
	assert(policy_resolve(canonical, subject, &again) == 0);
	assert(policy_grant_matched(grant) == policy_grant_matched(again));
	assert(policy_allows_persistent_schedule(grant) ==
	       policy_allows_persistent_schedule(again));
	assert(policy_allows_sim_control(grant) == policy_allows_sim_control(again));
	for (size_t i = 0; i < sizeof(fixed_addresses) / sizeof(fixed_addresses[0]); i++) {
		uint32_t address = fixed_addresses[i];
		compare_grants(grant, again, address);
		check_write_rule(grant, address, 0, UINT64_MAX);
		check_write_rule(grant, address, 0x5555555555555555ull, 0x5555555555555554ull);
	}
	for (size_t at = 0; at + 4 <= size && at < 64; at += 4) {
		uint32_t address;
		memcpy(&address, data + at, sizeof(address));
		compare_grants(grant, again, address);
		check_write_rule(grant, address, address, ~(uint64_t)address);
	}
	for (uint32_t major = 0; major < 70000; major += 997) {
		assert(policy_allows_monitor(grant, (uint16_t)major) ==
		       policy_allows_monitor(again, (uint16_t)major));
		assert(policy_allows_create_ring(grant, (uint16_t)major) ==
		       policy_allows_create_ring(again, (uint16_t)major));
	}
	policy_grant_free(grant);
	policy_grant_free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct policy *policy = NULL, *canonical = NULL;
	struct policy_error error;
	char formatted[600];
	size_t first_length, second_length;

	if (policy_load_buffer((const char *)data, size, "fuzz.yaml", &policy, &error) < 0) {
		assert(policy == NULL);
		assert(memchr(error.message, '\0', sizeof(error.message)) != NULL);
		assert(policy_error_format(&error, formatted, sizeof(formatted)) != 0);
		return 0;
	}
	for (size_t i = 0; i < policy_warning_count(policy); i++)
		assert(policy_warning(policy, i) != NULL);
	first_length = print_policy(policy, &first_form);
	if (policy_load_buffer(first_form.text, first_length, "canonical.yaml", &canonical,
			       &error) < 0) {
		policy_error_format(&error, formatted, sizeof(formatted));
		fprintf(stderr, "canonical form does not load: %s\n---\n%.*s---\n", formatted,
			(int)first_length, first_form.text);
		abort();
	}
	second_length = print_policy(canonical, &second_form);
	assert(first_length == second_length &&
	       memcmp(first_form.text, second_form.text, first_length) == 0);
	for (size_t i = 0; i < sizeof(subjects) / sizeof(subjects[0]); i++)
		check_subject(policy, canonical, &subjects[i], data, size);
	(void)policy_msr_name(policy, 0x611);
	policy_free(canonical);
	policy_free(policy);
	return 0;
}
