/*
 * tests/attribution/test_standin.c — the attribution engine on stand-in /proc, /sys and cgroup
 * trees of regular files with known CPU times: exact shares, idle and other apart, the ± it
 * states, two packages, schedstat's ns, pid reuse, exits folding into their cgroup, a removed
 * cgroup, the table's bound, the cgroup v2 mount found in mountinfo, nested cgroups charged
 * without overlap, and 10 000 cgroups coming and going through the bounded cgroup table.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "attribution/attribution.h"
#include "harness/standin_tree.h"

/* 100 ticks per second: one tick is 10 ms. */
#define TICKS 100
#define TICK_NS 1e7

struct fixture {
	char root[64];
	char proc[128], sys[128], cgroup[128];
	struct attribution *engine;
};

static void put_process(const char *proc, int pid, const char *comm, unsigned long long ticks,
			unsigned long long start, unsigned cpu, const char *cgroup)
{
	char relative[64];
	snprintf(relative, sizeof(relative), "%d/stat", pid);
	/* fields 3..39: state .. processor; utime (14) holds all the ticks, stime (15) none */
	tree_write_text(proc, relative,
			"%d (%s) S 1 %d %d 0 -1 0 0 0 0 0 %llu 0 0 0 20 0 1 0 %llu 0 0 0 0 0 0 0 0 "
			"0 0 0 0 0 0 0 17 %u 0 0\n",
			pid, comm, pid, pid, ticks, start, cpu);
	snprintf(relative, sizeof(relative), "%d/cgroup", pid);
	tree_write_text(proc, relative, "0::%s\n", cgroup);
}

static void put_cpus(const char *proc, unsigned long long total0, unsigned long long idle0,
		     unsigned long long total1, unsigned long long idle1, double uptime_s)
{
	/* user nice system idle iowait irq softirq steal: the busy part in user */
	tree_write_text(proc, "stat",
			"cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 %llu 0 0 %llu 0 0 0 0 0 0\n"
			"cpu1 %llu 0 0 %llu 0 0 0 0 0 0\nintr 0\n",
			total0 - idle0, idle0, total1 - idle1, idle1);
	tree_write_text(proc, "uptime", "%.2f 0.00\n", uptime_s);
}

static void put_usage(const char *cgroup_root, const char *path, unsigned long long usec)
{
	char relative[256];
	snprintf(relative, sizeof(relative), "%s/cpu.stat", path);
	tree_write_text(cgroup_root, relative, "usage_usec %llu\nuser_usec 0\nsystem_usec 0\n", usec);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	/* tmpfs where there is one: the churn test writes some 40 000 files */
	snprintf(f->root, sizeof(f->root), "/dev/shm/haecer-attr-XXXXXX");
	if (!mkdtemp(f->root)) {
		snprintf(f->root, sizeof(f->root), "/tmp/haecer-attr-XXXXXX");
		assert_non_null(mkdtemp(f->root));
	}
	snprintf(f->proc, sizeof(f->proc), "%s/proc", f->root);
	snprintf(f->sys, sizeof(f->sys), "%s/sys", f->root);
	snprintf(f->cgroup, sizeof(f->cgroup), "%s/cgroup", f->root);
	tree_mkdir(f->root, "proc");
	tree_mkdir(f->root, "sys");
	tree_mkdir(f->root, "cgroup");
	tree_write_text(f->sys, "devices/system/cpu/cpu0/topology/physical_package_id", "0\n");
	tree_write_text(f->sys, "devices/system/cpu/cpu1/topology/physical_package_id", "0\n");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char command[160];
	attribution_close(f->engine);
	snprintf(command, sizeof(command), "rm -rf '%s'", f->root);
	assert_int_equal(system(command), 0);
	free(f);
	return 0;
}

static void open_engine(struct fixture *f, size_t max_processes)
{
	struct attribution_config config = { .proc_root = f->proc, .sys_root = f->sys,
					     .cgroup_root = f->cgroup, .ticks_per_second = TICKS,
					     .max_processes = max_processes };
	assert_int_equal(attribution_open(&f->engine, &config), 0);
}

static const struct attribution_cgroup *cgroup_named(struct attribution *engine, const char *path)
{
	const struct attribution_cgroup *cgroups;
	size_t count = attribution_cgroups(engine, &cgroups);
	for (size_t i = 0; i < count; i++)
		if (strcmp(cgroups[i].path, path) == 0)
			return &cgroups[i];
	return NULL;
}

/* Two CPUs of one package, 200 ticks of capacity: 60 and 20 ticks of two processes, 100 idle,
 * 20 other; 200 J split 60 / 20 / 100 / 20 exactly, ± 2 ticks a process and 2 a CPU. */
static void test_exact_shares(void **state)
{
	struct fixture *f = *state;
	struct attribution_interval interval;
	double joules = 200;

	put_cpus(f->proc, 1000, 500, 1000, 500, 10.0);
	put_process(f->proc, 10, "busy", 100, 50, 0, "/system.slice/a.service");
	put_process(f->proc, 20, "sleepy", 50, 60, 1, "/user.slice/b.scope");
	put_usage(f->cgroup, "/system.slice/a.service", 1000000);
	put_usage(f->cgroup, "/user.slice/b.scope", 500000);
	open_engine(f, 0);
	assert_int_equal(attribution_step(f->engine, &joules, 1, &interval), 0);
	assert_true(interval.package_joules == 0);

	put_cpus(f->proc, 1100, 520, 1100, 580, 11.0);
	put_process(f->proc, 10, "busy", 160, 50, 0, "/system.slice/a.service");
	put_process(f->proc, 20, "sleepy", 70, 60, 1, "/user.slice/b.scope");
	put_usage(f->cgroup, "/system.slice/a.service", 1600000);
	put_usage(f->cgroup, "/user.slice/b.scope", 700000);
	assert_int_equal(attribution_step(f->engine, &joules, 1, &interval), 0);

	const struct attribution_process *busy = attribution_find(f->engine, 10);
	const struct attribution_process *sleepy = attribution_find(f->engine, 20);
	assert_non_null(busy);
	assert_non_null(sleepy);
	assert_string_equal(busy->comm, "busy");
	assert_string_equal(busy->cgroup, "/system.slice/a.service");
	assert_float_equal(busy->interval_cpu_ns, 60 * TICK_NS, 1);
	assert_float_equal(busy->interval_joules, 60.0, 1e-9);
	assert_float_equal(sleepy->interval_joules, 20.0, 1e-9);
	assert_float_equal(busy->error_joules, 2.0, 1e-9);
	assert_float_equal(interval.idle_joules, 100.0, 1e-9);
	assert_float_equal(interval.other_joules, 20.0, 1e-9);
	assert_float_equal(interval.process_joules + interval.idle_joules + interval.other_joules,
			   joules, 1e-9);
	assert_float_equal(interval.error_joules, 8.0, 1e-9);
	assert_float_equal(interval.interval_ns, 1e9, 1);
	assert_true(interval.cgroup_accounting);
	assert_float_equal(cgroup_named(f->engine, "/system.slice/a.service")->interval_joules, 60.0,
			   1e-9);
	assert_float_equal(cgroup_named(f->engine, "/user.slice/b.scope")->interval_joules, 20.0,
			   1e-9);
}

/* Two packages, per-task schedstat in ns: each package's energy goes to its own CPUs' work. */
static void test_packages_and_schedstat(void **state)
{
	struct fixture *f = *state;
	struct attribution_interval interval;
	double joules[2] = { 50, 80 };

	tree_write_text(f->sys, "devices/system/cpu/cpu1/topology/physical_package_id", "1\n");
	put_cpus(f->proc, 1000, 500, 1000, 500, 10.0);
	put_process(f->proc, 10, "a", 0, 50, 0, "/");
	put_process(f->proc, 20, "b", 0, 60, 1, "/");
	tree_write_text(f->proc, "10/task/10/schedstat", "%llu 0 0\n", 1000000000ull);
	tree_write_text(f->proc, "20/task/20/schedstat", "%llu 0 0\n", 2000000000ull);
	tree_write_text(f->proc, "20/task/21/schedstat", "%llu 0 0\n", 0ull);
	open_engine(f, 0);
	assert_int_equal(attribution_step(f->engine, joules, 2, &interval), 0);

	put_cpus(f->proc, 1100, 550, 1100, 500, 11.0);
	tree_write_text(f->proc, "10/task/10/schedstat", "%llu 0 0\n", 1250000000ull);
	tree_write_text(f->proc, "20/task/20/schedstat", "%llu 0 0\n", 2500000000ull);
	tree_write_text(f->proc, "20/task/21/schedstat", "%llu 0 0\n", 500000000ull);
	assert_int_equal(attribution_step(f->engine, joules, 2, &interval), 0);

	const struct attribution_process *a = attribution_find(f->engine, 10);
	const struct attribution_process *b = attribution_find(f->engine, 20);
	assert_false(a->tick_counted);
	assert_int_equal(b->package, 1);
	/* package 0: 1 s capacity, 0.25 s of a, 0.5 s idle; package 1: 1 s of b's two threads */
	assert_float_equal(a->interval_joules, 50 * 0.25, 1e-9);
	assert_float_equal(b->interval_joules, 80.0, 1e-9);
	assert_float_equal(interval.idle_joules, 25.0, 1e-9);
	assert_float_equal(interval.other_joules, 50 * 0.25, 1e-9);
	assert_float_equal(interval.package_joules, 130, 1e-9);
	assert_float_equal(a->error_joules, 50 * 4000e-9, 1e-12);
}

/* pid 20 exits and is reused by a process started inside the interval, pid 30 is first seen
 * but started before it, pid 10 exits: the new 20 is charged all its time, 30 none, and the old
 * processes' totals fold into their cgroups; a removed cgroup keeps its totals. */
static void test_reuse_exit_and_removed_cgroup(void **state)
{
	struct fixture *f = *state;
	struct attribution_interval interval;
	double joules = 100;

	put_cpus(f->proc, 1000, 500, 1000, 500, 10.0);
	put_process(f->proc, 10, "old", 100, 50, 0, "/a");
	put_process(f->proc, 20, "first", 50, 60, 1, "/b");
	put_usage(f->cgroup, "/a", 100);
	put_usage(f->cgroup, "/b", 100);
	open_engine(f, 0);
	assert_int_equal(attribution_step(f->engine, &joules, 1, &interval), 0);
	put_cpus(f->proc, 1100, 500, 1100, 500, 11.0);
	put_process(f->proc, 10, "old", 150, 50, 0, "/a");
	put_process(f->proc, 20, "first", 60, 60, 1, "/b");
	assert_int_equal(attribution_step(f->engine, &joules, 1, &interval), 0);
	assert_float_equal(attribution_find(f->engine, 10)->joules_total, 25.0, 1e-9);
	assert_float_equal(attribution_find(f->engine, 20)->joules_total, 5.0, 1e-9);

	put_cpus(f->proc, 1200, 500, 1200, 500, 12.0);
	tree_write_text(f->proc, "10/stat", "%s", ""); /* gone: unparsable */
	put_process(f->proc, 20, "second", 40, 1150, 1, "/b"); /* started at 11.5 s */
	put_process(f->proc, 30, "late", 500, 900, 1, "/b");
	char command[300];
	snprintf(command, sizeof(command), "rm -rf '%s/a'", f->cgroup);
	assert_int_equal(system(command), 0);
	assert_int_equal(attribution_step(f->engine, &joules, 1, &interval), 0);

	const struct attribution_process *second = attribution_find(f->engine, 20);
	assert_null(attribution_find(f->engine, 10));
	assert_string_equal(second->comm, "second");
	assert_float_equal(second->interval_joules, 100 * 40.0 / 200, 1e-9);
	assert_float_equal(second->joules_total, 20.0, 1e-9);
	assert_float_equal(attribution_find(f->engine, 30)->interval_joules, 0, 0);
	assert_int_equal(interval.appeared, 2);
	assert_int_equal(interval.exited, 2);
	assert_float_equal(interval.other_joules, 80.0, 1e-9);
	const struct attribution_cgroup *a = cgroup_named(f->engine, "/a");
	assert_false(a->seen);
	assert_float_equal(a->exited_joules, 25.0, 1e-9);
	assert_float_equal(cgroup_named(f->engine, "/b")->exited_joules, 5.0, 1e-9);
}

/* More processes than the table holds: the rest are dropped and counted, their time is other. */
static void test_bounded_table(void **state)
{
	struct fixture *f = *state;
	struct attribution_interval interval;
	double joules = 10;

	put_cpus(f->proc, 1000, 500, 1000, 500, 10.0);
	for (int pid = 100; pid < 105; pid++)
		put_process(f->proc, pid, "p", 10, 50, 0, "/");
	open_engine(f, 3);
	assert_int_equal(attribution_step(f->engine, &joules, 1, &interval), 0);
	assert_int_equal(interval.processes, 3);
	assert_int_equal(interval.dropped, 2);
}

/* The cgroup v2 hierarchy found in PROC/self/mountinfo: the hybrid layout's
 * /sys/fs/cgroup/unified (v1 controllers beside it), an escaped mount point, none at all. */
static void test_cgroup2_mount(void **state)
{
	struct fixture *f = *state;
	struct attribution_config config = { .proc_root = f->proc, .sys_root = f->sys };
	static const char hybrid[] =
		"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
		"32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
		"40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime shared:9 - cgroup cgroup "
		"rw,name=systemd\n"
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw\n";

	tree_write_text(f->proc, "self/mountinfo", "%s", hybrid);
	assert_int_equal(attribution_open(&f->engine, &config), 0);
	assert_string_equal(attribution_cgroup_root(f->engine), "/sys/fs/cgroup/unified");
	attribution_close(f->engine);

	tree_write_text(f->proc, "self/mountinfo",
			"50 1 0:40 /sub /elsewhere rw - cgroup2 cgroup2 rw\n"
			"51 1 0:40 / /my\\040cgroups rw - cgroup2 cgroup2 rw\n");
	assert_int_equal(attribution_open(&f->engine, &config), 0);
	assert_string_equal(attribution_cgroup_root(f->engine), "/my cgroups");
	attribution_close(f->engine);

	tree_write_text(f->proc, "self/mountinfo",
			"32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
	assert_int_equal(attribution_open(&f->engine, &config), 0);
	assert_string_equal(attribution_cgroup_root(f->engine), "");
}

/* cgroup v2 counts a child's usage in its parents: the root "/" (usage 150 ticks of the 200,
 * as PROC/stat's busy time) and its children /a (60) and /a/b (40) are charged their own usage
 * only: "/" 90, /a 20, /a/b 40 of 200 J, which with idle (50) make the package's 200 J. */
static void test_nested_cgroups(void **state)
{
	struct fixture *f = *state;
	struct attribution_interval interval;
	double joules = 200;

	put_cpus(f->proc, 1000, 500, 1000, 500, 10.0);
	put_process(f->proc, 10, "a", 0, 50, 0, "/a");
	put_process(f->proc, 20, "b", 0, 50, 1, "/a/b");
	put_process(f->proc, 30, "init", 0, 50, 1, "/");
	put_usage(f->cgroup, "", 1000000);
	put_usage(f->cgroup, "/a", 1000000);
	put_usage(f->cgroup, "/a/b", 1000000);
	open_engine(f, 0);
	assert_int_equal(attribution_step(f->engine, &joules, 1, &interval), 0);
	put_cpus(f->proc, 1100, 525, 1100, 525, 11.0);
	put_usage(f->cgroup, "", 2500000);
	put_usage(f->cgroup, "/a", 1600000);
	put_usage(f->cgroup, "/a/b", 1400000);
	assert_int_equal(attribution_step(f->engine, &joules, 1, &interval), 0);
	assert_float_equal(cgroup_named(f->engine, "/")->interval_joules, 90.0, 1e-9);
	assert_float_equal(cgroup_named(f->engine, "/a")->interval_joules, 20.0, 1e-9);
	assert_float_equal(cgroup_named(f->engine, "/a/b")->interval_joules, 40.0, 1e-9);
	assert_float_equal(interval.idle_joules, 50.0, 1e-9);
	assert_float_equal(interval.cgroup_joules + interval.idle_joules, joules, 1e-9);
	/* 2 ticks per CPU and per charged cgroup: 10 ticks of 200 */
	assert_float_equal(interval.cgroup_error_joules, 10.0, 1e-9);
}

#define CHURN_ROUNDS 100
#define CHURN_WIDTH 100 /* cgroups made each round: 10 000 in all, over the table's 4 096 */

/* Round k's cgroup j: /churn/rK/cJ, its process pid 1000 + (k % 3) × 100 + j. */
static void put_churn_round(struct fixture *f, int round, bool new, unsigned long long usage)
{
	for (int j = 0; j < CHURN_WIDTH; j++) {
		char path[64];
		snprintf(path, sizeof(path), "/churn/r%d/c%d", round, j);
		if (new)
			put_process(f->proc, 1000 + (round % 3) * 100 + j, "c", 0,
				    (10ull + round) * TICKS - 50, 0, path);
		put_usage(f->cgroup, path, usage);
	}
}

/* Round's processes and cgroups gone (each a directory of the files put_churn_round wrote). */
static void remove_churn_round(struct fixture *f, int round)
{
	char path[300];
	for (int j = 0; j < CHURN_WIDTH; j++) {
		int pid = 1000 + (round % 3) * 100 + j;
		static const char *const process_files[] = { "stat", "cgroup", "" };
		for (size_t i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s/%d/%s", f->proc, pid, process_files[i]);
			assert_int_equal(i < 2 ? unlink(path) : rmdir(path), 0);
		}
		snprintf(path, sizeof(path), "%s/churn/r%d/c%d/cpu.stat", f->cgroup, round, j);
		assert_int_equal(unlink(path), 0);
		*strrchr(path, '/') = '\0';
		assert_int_equal(rmdir(path), 0);
	}
	snprintf(path, sizeof(path), "%s/churn/r%d", f->cgroup, round);
	assert_int_equal(rmdir(path), 0);
}

/* The cgroups ended in the last step (removed, in no process): each with its final total. */
static size_t count_ended(struct attribution *engine, double *ended_joules)
{
	const struct attribution_cgroup *cgroups;
	size_t count = attribution_cgroups(engine, &cgroups), ended = 0;
	for (size_t i = 0; i < count; i++) {
		if (i > 0)
			assert_true(cgroups[i].id > cgroups[i - 1].id);
		if (!cgroups[i].ended)
			continue;
		assert_false(cgroups[i].seen);
		assert_float_equal(cgroups[i].joules_total, 1.0, 1e-9);
		*ended_joules += cgroups[i].joules_total;
		ended++;
	}
	return ended;
}

/* Containers come and go: each round makes 100 cgroups with a process each, charges the
 * previous round's 10 ms (1 J of 200 J over 2 s of capacity) and removes the round before
 * (processes and directories). 10 000 cgroups pass through a table of 4 096: it holds the live
 * ones plus those ended in the last interval, every new one is tracked (none falls over the
 * bound), each removed one's final total is listed exactly once, and a long-lived cgroup's total
 * is exact throughout. */
static void test_cgroup_churn(void **state)
{
	struct fixture *f = *state;
	struct attribution_interval interval;
	double joules = 200, ended_joules = 0;
	char command[300];

	put_process(f->proc, 10, "live", 0, 50, 1, "/live");
	open_engine(f, 0);
	for (int k = 0; k < CHURN_ROUNDS; k++) {
		put_cpus(f->proc, 1000 + 100ull * k, 500 + 50ull * k, 1000 + 100ull * k,
			 500 + 50ull * k, 10.0 + k);
		put_usage(f->cgroup, "/live", 1000000 + 500000ull * k);
		put_churn_round(f, k, true, 1000);
		if (k >= 1)
			put_churn_round(f, k - 1, false, 11000);
		if (k >= 2)
			remove_churn_round(f, k - 2);
		assert_int_equal(attribution_step(f->engine, &joules, 1, &interval), 0);

		const struct attribution_cgroup *cgroups;
		size_t count = attribution_cgroups(f->engine, &cgroups);
		assert_true(count <= 1 + 3 * CHURN_WIDTH);
		assert_int_equal(count_ended(f->engine, &ended_joules), k >= 2 ? CHURN_WIDTH : 0);
		snprintf(command, sizeof(command), "/churn/r%d/c%d", k, CHURN_WIDTH - 1);
		assert_non_null(cgroup_named(f->engine, command));
		assert_true(cgroup_named(f->engine, command)->seen);
		if (k == 0)
			continue;
		assert_float_equal(cgroup_named(f->engine, "/live")->interval_joules, 50.0, 1e-9);
		snprintf(command, sizeof(command), "/churn/r%d/c0", k - 1);
		assert_float_equal(cgroup_named(f->engine, command)->interval_joules, 1.0, 1e-9);
	}
	assert_float_equal(cgroup_named(f->engine, "/live")->joules_total, 50.0 * (CHURN_ROUNDS - 1),
			   1e-6);
	assert_float_equal(ended_joules, 1.0 * CHURN_WIDTH * (CHURN_ROUNDS - 2), 1e-6);
	snprintf(command, sizeof(command), "/churn/r%d/c0", CHURN_ROUNDS - 4);
	assert_null(cgroup_named(f->engine, command)); /* ended two steps ago: dropped */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_exact_shares, setup, teardown),
		cmocka_unit_test_setup_teardown(test_packages_and_schedstat, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reuse_exit_and_removed_cgroup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bounded_table, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cgroup2_mount, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nested_cgroups, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cgroup_churn, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
