/*
 * What a resolved grant answers: default deny for subjects no rule matches, the union of every
 * matching rule (uid, primary gid, supplementary groups, any), the most permissive grant per
 * address (full read beats coarse read, write masks OR together), write masks enforced with
 * read-modify-write allowed, coarse energy limits, ring majors and capabilities.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>

#include "policy_test.h"

/* IA32_PERFEVTSEL bits (hw/msr.h) */
#define USR (1ull << 16)
#define OS (1ull << 17)
#define INT (1ull << 20)
#define ANY (1ull << 21)
#define EN (1ull << 22)

static const char people[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: time}\n"
	"  - {name: PERFEVTSEL, range: [0x186, 0x18d], read: true, write_mask: 0xffc7ffff,\n"
	"     set: pmu}\n"
	"  - {name: PMC, address: 0xc1, count: 8, read: true, write_mask: 0xffffffffffff,\n"
	"     set: pmu}\n"
	"  - {name: GLOBAL_CTRL, address: 0x38f, read: true, write_mask: 0x7000000ff, set: pmu}\n"
	"  - {name: POWER_LIMIT, address: 0x610, read: false, set: pmu}\n"
	"rules:\n"
	"  - match: {uid: 1000}\n"
	"    allow: [pmu]\n"
	"    read_only: true\n"
	"    monitor_rings: [1-9]\n"
	"  - match: {gid: 2000}\n"
	"    allow: [pmu, time]\n"
	"    create_rings: [10-19]\n"
	"    monitor_rings: [10-19]\n"
	"  - match: {uid: 0}\n"
	"    allow: [all]\n"
	"    capabilities: [persistent_schedules, sim_control]\n"
	"  - match: {group: haecer-no-such-group}\n"
	"    allow: [all]\n"
	"    monitor_rings: [0-65535]\n";

static const char energy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"
	"  - {name: PKG_POWER_LIMIT, address: 0x610, read: false, set: rapl}\n"
	"  - {name: ENERGY, range: [0x611, 0x619], read: true, set: rapl}\n"
	"  - {name: AMD_RAPL, range: [0xC0010299, 0xC001029B], read: true, set: amd}\n"
	"rules:\n"
	"  - match: {any: true}\n"
	"    allow: [rapl, amd]\n"
	"    energy: {min_interval_ms: 1000, resolution_uj: 1000000}\n"
	"  - match: {gid: 3000}\n"
	"    allow: [amd]\n"
	"    energy: {min_interval_ms: 100, resolution_uj: 5000000}\n"
	"  - match: {uid: 0}\n"
	"    allow: [all]\n";

static struct policy_grant *resolve(const struct policy *policy, uid_t uid, gid_t gid,
				    const gid_t *groups, size_t group_count)
{
	const struct policy_subject subject = { uid, gid, groups, group_count };
	struct policy_grant *grant = NULL;

	assert_int_equal(policy_resolve(policy, &subject, &grant), 0);
	assert_non_null(grant);
	return grant;
}

static int setup_people(void **state)
{
	*state = load_valid(people, "people");
	return 0;
}

static int setup_energy(void **state)
{
	*state = load_valid(energy, "energy");
	return 0;
}

static int teardown(void **state)
{
	policy_free(*state);
	return 0;
}

static void test_unmatched_subject_gets_nothing(void **state)
{
	struct policy_grant *grant = resolve(*state, 5000, 5000, NULL, 0);
	struct policy_energy_limit limit;

	assert_false(policy_grant_matched(grant));
	for (uint32_t address = 0; address < 0x1000; address++) {
		assert_false(policy_allows_read(grant, address));
		assert_int_equal(policy_write_mask(grant, address), 0);
		assert_int_equal(policy_allows_write(grant, address, 0, 0), -EPERM);
	}
	assert_false(policy_allows_read(grant, UINT32_MAX));
	for (uint32_t major = 0; major <= UINT16_MAX; major++) {
		assert_false(policy_allows_create_ring(grant, (uint16_t)major));
		assert_false(policy_allows_monitor(grant, (uint16_t)major));
	}
	assert_false(policy_allows_persistent_schedule(grant));
	assert_false(policy_allows_sim_control(grant));
	assert_int_equal(policy_energy_limit(grant, 0x611, &limit), 0);
	policy_grant_free(grant);
}

static void test_read_only_rule_grants_no_writes(void **state)
{
	struct policy_grant *grant = resolve(*state, 1000, 1000, NULL, 0);

	assert_true(policy_grant_matched(grant));
	assert_true(policy_allows_read(grant, 0x186));
	assert_true(policy_allows_read(grant, 0xc1));
	assert_false(policy_allows_read(grant, 0x10)); /* time is the group's */
	assert_int_equal(policy_write_mask(grant, 0x186), 0);
	assert_int_equal(policy_allows_write(grant, 0x186, 0, EN), -EPERM);
	assert_true(policy_allows_monitor(grant, 1));
	assert_true(policy_allows_monitor(grant, 9));
	assert_false(policy_allows_monitor(grant, 10));
	assert_false(policy_allows_create_ring(grant, 1));
	policy_grant_free(grant);
}

/* uid 1000 in supplementary group 2000: both rules apply, the union of their grants. */
static void test_matching_rules_unite(void **state)
{
	const gid_t groups[] = { 7, 2000 };
	struct policy_grant *grant = resolve(*state, 1000, 1000, groups, 2);

	assert_true(policy_allows_read(grant, 0x10));
	assert_true(policy_allows_read(grant, 0x18d));
	/* the read-only rule gives no mask, the group's gives the entry's: OR is the entry's */
	assert_int_equal(policy_write_mask(grant, 0x186), 0xffc7ffffull);
	assert_int_equal(policy_write_mask(grant, 0x38f), 0x7000000ffull);
	for (uint16_t major = 1; major <= 19; major++)
		assert_true(policy_allows_monitor(grant, major));
	assert_false(policy_allows_monitor(grant, 0));
	assert_false(policy_allows_monitor(grant, 20));
	assert_false(policy_allows_create_ring(grant, 9));
	assert_true(policy_allows_create_ring(grant, 10));
	assert_true(policy_allows_create_ring(grant, 19));
	assert_false(policy_allows_sim_control(grant));
	policy_grant_free(grant);
}

static void test_group_matches_by_primary_or_supplementary_gid(void **state)
{
	const gid_t other_groups[] = { 1, 2, 3 };
	const gid_t member[] = { 1, 2000, 3 };
	struct policy_grant *primary = resolve(*state, 5000, 2000, NULL, 0);
	struct policy_grant *supplementary = resolve(*state, 5000, 5000, member, 3);
	struct policy_grant *outsider = resolve(*state, 5000, 5000, other_groups, 3);

	assert_true(policy_allows_read(primary, 0x10));
	assert_true(policy_allows_read(supplementary, 0x10));
	assert_false(policy_allows_read(outsider, 0x10));
	assert_false(policy_grant_matched(outsider));
	policy_grant_free(primary);
	policy_grant_free(supplementary);
	policy_grant_free(outsider);
}

/* Bits inside the mask may change; bits outside must keep their current value, whatever it is:
 * read-modify-write of a register whose INT bit someone else set is fine, changing INT is not. */
static void test_write_mask_allows_read_modify_write_only(void **state)
{
	struct policy_grant *grant = resolve(*state, 5000, 2000, NULL, 0);

	assert_int_equal(policy_allows_write(grant, 0x186, 0, EN | OS | USR | 0x3c), 0);
	assert_int_equal(policy_allows_write(grant, 0x18d, 0xff00ffff, 0), 0);
	assert_int_equal(policy_allows_write(grant, 0x186, 0, EN | INT | 0x3c), -EACCES);
	assert_int_equal(policy_allows_write(grant, 0x186, 0, ANY), -EACCES);
	assert_int_equal(policy_allows_write(grant, 0x186, 0, 1ull << 32), -EACCES);
	assert_int_equal(policy_allows_write(grant, 0x186, INT, INT | EN | 0xc0), 0);
	assert_int_equal(policy_allows_write(grant, 0x186, INT | EN, EN), -EACCES);
	assert_int_equal(policy_allows_write(grant, 0x186, ~0ull, ~0ull), 0);
	/* neighbours of the range are not granted; read: false entries give nothing */
	assert_int_equal(policy_allows_write(grant, 0x185, 0, 0), -EPERM);
	assert_int_equal(policy_allows_write(grant, 0x18e, 0, 0), -EPERM);
	assert_false(policy_allows_read(grant, 0x610));
	/* counters: 48 bits may change */
	assert_int_equal(policy_allows_write(grant, 0xc8, 0, 0xffffffffffffull), 0);
	assert_int_equal(policy_allows_write(grant, 0xc8, 0, 1ull << 48), -EACCES);
	assert_int_equal(policy_allows_write(grant, 0x10, 0, 1), -EPERM); /* TSC: read only */
	policy_grant_free(grant);
}

static void test_root_rule_and_capabilities(void **state)
{
	struct policy_grant *grant = resolve(*state, 0, 0, NULL, 0);

	assert_true(policy_allows_persistent_schedule(grant));
	assert_true(policy_allows_sim_control(grant));
	assert_true(policy_allows_read(grant, 0x10));
	assert_int_equal(policy_write_mask(grant, 0xc1), 0xffffffffffffull);
	assert_false(policy_allows_read(grant, 0x610)); /* all = every entry, as each says */
	assert_false(policy_allows_monitor(grant, 1));  /* root's rule names no majors */
	policy_grant_free(grant);
}

/* A rule for a group this system lacks matches no one, whatever their groups, and says so. */
static void test_rule_for_unknown_group_matches_nobody(void **state)
{
	const struct policy *policy = *state;
	const gid_t groups[] = { 0, 100, 65534, (gid_t)-2 };

	assert_int_equal(policy_warning_count(policy), 1);
	assert_string_equal(policy_warning(policy, 0),
			    "people:23: group 'haecer-no-such-group' does not exist on this "
			    "system: its rule matches nobody");
	struct policy_grant *grant = resolve(policy, 5000, 65534, groups, 4);
	assert_false(policy_grant_matched(grant));
	assert_false(policy_allows_monitor(grant, 100));
	policy_grant_free(grant);
}

static void test_grant_outlives_its_policy(void **state)
{
	struct policy *policy = load_valid(people, "people");
	struct policy_grant *grant = resolve(policy, 5000, 2000, NULL, 0);

	(void)state;
	policy_free(policy); /* a reload frees the old policy while clients keep their grants */
	assert_true(policy_allows_read(grant, 0x10));
	assert_int_equal(policy_write_mask(grant, 0x186), 0xffc7ffffull);
	assert_true(policy_allows_create_ring(grant, 15));
	policy_grant_free(grant);
}

static void test_entry_names(void **state)
{
	const struct policy *policy = *state;

	assert_string_equal(policy_msr_name(policy, 0x10), "TSC");
	assert_string_equal(policy_msr_name(policy, 0x18a), "PERFEVTSEL");
	assert_string_equal(policy_msr_name(policy, 0xc8), "PMC");
	assert_null(policy_msr_name(policy, 0xc9));
	assert_null(policy_msr_name(policy, 0));
}

static void test_coarse_energy_for_everyone(void **state)
{
	struct policy_grant *grant = resolve(*state, 5000, 5000, NULL, 0);
	struct policy_energy_limit limit = { 0, 0 };

	assert_true(policy_grant_matched(grant));
	assert_true(policy_allows_read(grant, 0x611));
	assert_int_equal(policy_energy_limit(grant, 0x611, &limit), 1);
	assert_int_equal(limit.min_interval_ms, 1000);
	assert_int_equal(limit.resolution_uj, 1000000);
	assert_int_equal(policy_energy_limit(grant, 0x619, &limit), 1);
	assert_int_equal(policy_energy_limit(grant, 0xC001029B, &limit), 1);
	assert_int_equal(policy_energy_limit(grant, 0xC001029A, &limit), 1);
	/* in the same granted range, registers that are not energy counters are read in full */
	assert_true(policy_allows_read(grant, 0x614));
	assert_int_equal(policy_energy_limit(grant, 0x614, &limit), 0);
	assert_int_equal(policy_energy_limit(grant, 0x606, &limit), 0);
	assert_int_equal(policy_energy_limit(grant, 0xC0010299, &limit), 0);
	assert_false(policy_allows_read(grant, 0x610));
	policy_grant_free(grant);
}

/* Two coarse grants of one register: the smaller interval and the finer resolution. */
static void test_two_coarse_grants_give_the_least_restrictive(void **state)
{
	struct policy_grant *grant = resolve(*state, 5000, 3000, NULL, 0);
	struct policy_energy_limit limit = { 0, 0 };

	assert_int_equal(policy_energy_limit(grant, 0xC001029B, &limit), 1);
	assert_int_equal(limit.min_interval_ms, 100);
	assert_int_equal(limit.resolution_uj, 1000000);
	assert_int_equal(policy_energy_limit(grant, 0x611, &limit), 1);
	assert_int_equal(limit.min_interval_ms, 1000);
	policy_grant_free(grant);
}

static void test_full_read_beats_coarse_read(void **state)
{
	struct policy_grant *grant = resolve(*state, 0, 0, NULL, 0);
	struct policy_energy_limit limit;

	for (uint32_t address = 0x611; address <= 0x619; address++) {
		assert_true(policy_allows_read(grant, address));
		assert_int_equal(policy_energy_limit(grant, address, &limit), 0);
	}
	assert_int_equal(policy_energy_limit(grant, 0xC001029A, &limit), 0);
	policy_grant_free(grant);
}

/* Binary search over many entries: every address answers for exactly its own entry. */
static void test_many_entries(void **state)
{
	char *text = NULL;
	size_t size = 0;
	FILE *memory = open_memstream(&text, &size);

	(void)state;
	assert_non_null(memory);
	fputs("version: 1\ndefault: deny\nmsrs:\n", memory);
	for (unsigned i = 0; i < 2000; i++) /* even addresses, in descending order */
		fprintf(memory, "  - {name: M%u, address: %u, read: true, write_mask: %u, set: s}\n",
			i, 2 * (1999 - i), i + 1);
	fputs("rules:\n  - match: {any: true}\n    allow: [s]\n", memory);
	assert_int_equal(fclose(memory), 0);
	struct policy *policy = load_valid(text, "many");
	struct policy_grant *grant = resolve(policy, 5000, 5000, NULL, 0);
	for (uint32_t address = 0; address < 4000; address++) {
		bool even = address % 2 == 0;
		assert_int_equal(policy_allows_read(grant, address), even);
		assert_int_equal(policy_write_mask(grant, address), even ? 2000 - address / 2 : 0);
	}
	assert_false(policy_allows_read(grant, 4000));
	policy_grant_free(grant);
	policy_free(policy);
	free(text);
}

static void test_bad_arguments(void **state)
{
	const struct policy_subject subject = { 0, 0, NULL, 2 };
	struct policy_grant *grant = (struct policy_grant *)state;

	assert_int_equal(policy_resolve(*state, &subject, &grant), -EINVAL);
	assert_null(grant);
	assert_int_equal(policy_resolve(NULL, &subject, &grant), -EINVAL);
	assert_false(policy_allows_read(NULL, 0x10));
	assert_int_equal(policy_allows_write(NULL, 0x10, 0, 0), -EPERM);
	assert_false(policy_grant_matched(NULL));
	policy_grant_free(NULL);
	policy_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_unmatched_subject_gets_nothing, setup_people,
						teardown),
		cmocka_unit_test_setup_teardown(test_read_only_rule_grants_no_writes, setup_people,
						teardown),
		cmocka_unit_test_setup_teardown(test_matching_rules_unite, setup_people, teardown),
		cmocka_unit_test_setup_teardown(test_group_matches_by_primary_or_supplementary_gid,
						setup_people, teardown),
		cmocka_unit_test_setup_teardown(test_write_mask_allows_read_modify_write_only,
						setup_people, teardown),
		cmocka_unit_test_setup_teardown(test_root_rule_and_capabilities, setup_people,
						teardown),
		cmocka_unit_test_setup_teardown(test_rule_for_unknown_group_matches_nobody,
						setup_people, teardown),
		cmocka_unit_test(test_grant_outlives_its_policy),
		cmocka_unit_test_setup_teardown(test_entry_names, setup_people, teardown),
		cmocka_unit_test_setup_teardown(test_coarse_energy_for_everyone, setup_energy,
						teardown),
		cmocka_unit_test_setup_teardown(test_two_coarse_grants_give_the_least_restrictive,
						setup_energy, teardown),
		cmocka_unit_test_setup_teardown(test_full_read_beats_coarse_read, setup_energy,
						teardown),
		cmocka_unit_test(test_many_entries),
		cmocka_unit_test_setup_teardown(test_bad_arguments, setup_people, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
