/*
 * msrd killed with SIGKILL and restarted. On the msr backend over a stand-in device tree (the
 * files are the registers, and they outlive msrd like the hardware does): what the killed msrd
 * wrote stays in the registers, since it could not restore anything; its journal (in
 * --state-dir) names each register it changed and the value it had before; the next msrd writes
 * every one of them back before it accepts a client, and the files' bytes prove it. A client of
 * the killed msrd gets a clear error (-ECONNRESET or -EPIPE, "connection to msrd closed") and
 * can connect to the new one. A clean stop removes the journal.
 *
 * The journal is refused when it could be forged: a state directory or journal writable by
 * others, or a journal naming another device; and two msrds cannot use one device's journal at
 * once. A torn last line (msrd killed while writing it, before the register it names was
 * written) is ignored, and so is a journal of an earlier boot. The simulated CPU keeps no
 * journal: a new simulation starts from reset.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/text_file.h"

#define FILE_SIZE 0x2000u
#define PERFEVTSEL0 0x186u
#define SCRATCH 0x800u
#define CPUS 2u

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: base}\n"
	"  - {name: PERFEVTSEL0, address: 0x186, read: true, write_mask: 0xFFCFFFFF, set: base}\n"
	"  - {name: SCRATCH, range: [0x800, 0xFFF], read: true, write_mask: 0xFFFFFFFFFFFFFFFF,\n"
	"     set: base}\n"
	"rules:\n"
	"  - {match: {any: true}, allow: [base]}\n";

struct device {
	struct msrd_server server;
	char tree[PATH_MAX + 16];
	char state[PATH_MAX + 16];     /* --state-dir: the journal's directory */
	const char *arguments[7];
};

/* The value a register has before any msrd touches it. */
static uint64_t original(unsigned cpu, uint32_t address)
{
	return address == PERFEVTSEL0 ? 0x5 + cpu : 0x1000 * (cpu + 1) + address;
}

static void prepare(struct device *device)
{
	assert_int_equal(msrd_prepare(&device->server, policy), 0);
	snprintf(device->tree, sizeof(device->tree), "%s/root", device->server.dir);
	assert_int_equal(harness_standin_msr_tree(device->tree, CPUS, FILE_SIZE), 0);
	for (unsigned cpu = 0; cpu < CPUS; cpu++) {
		assert_int_equal(harness_standin_write(device->tree, cpu, PERFEVTSEL0,
						       original(cpu, PERFEVTSEL0)),
				 0);
		for (uint32_t address = SCRATCH; address < SCRATCH + 0x100; address += 8)
			assert_int_equal(harness_standin_write(device->tree, cpu, address,
							       original(cpu, address)),
					 0);
	}
	snprintf(device->state, sizeof(device->state), "%s/state", device->server.dir);
	assert_int_equal(mkdir(device->state, 0755), 0);
	device->arguments[0] = "--backend";
	device->arguments[1] = "msr";
	device->arguments[2] = "--dev-root";
	device->arguments[3] = device->tree;
	device->arguments[4] = "--state-dir";
	device->arguments[5] = device->state;
	device->arguments[6] = NULL;
}

static uint64_t register_value(const struct device *device, unsigned cpu, uint32_t address)
{
	uint64_t value = 0;

	assert_int_equal(harness_standin_read(device->tree, cpu, address, &value), 0);
	return value;
}

static bool all_original(const struct device *device)
{
	for (unsigned cpu = 0; cpu < CPUS; cpu++) {
		if (register_value(device, cpu, PERFEVTSEL0) != original(cpu, PERFEVTSEL0))
			return false;
		for (uint32_t address = SCRATCH; address < SCRATCH + 0x100; address += 8)
			if (register_value(device, cpu, address) != original(cpu, address))
				return false;
	}
	return true;
}

/* Write PERFEVTSEL0 and 32 scratch registers on each CPU, some twice. */
static void change_registers(struct haecer_conn *conn)
{
	struct haecer_msr_op ops[2 * 32 + 2];
	size_t count = 0;

	assert_int_equal(haecer_msr_write(conn, 0, PERFEVTSEL0, 0x43003c), 0);
	assert_int_equal(haecer_msr_write(conn, 0, PERFEVTSEL0, 0x4300c0), 0);
	assert_int_equal(haecer_msr_write(conn, 1, PERFEVTSEL0, 0x4301c2), 0);
	for (unsigned cpu = 0; cpu < CPUS; cpu++)
		for (uint32_t i = 0; i < 32; i++)
			ops[count++] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .cpu = cpu,
							       .address = SCRATCH + 8 * i,
							       .value = 0xdead0000 + i };
	ops[count++] = (struct haecer_msr_op){ .kind = HAECER_MSR_WRITE, .cpu = 1,
					       .address = SCRATCH, .value = 0xbeef };
	assert_int_equal(haecer_msr_batch(conn, ops, count), 0);
}

/* A fresh device with msrd started on it, its registers changed by a client that has left. */
static void start_and_change(struct device *device)
{
	struct haecer_conn *conn;

	prepare(device);
	assert_int_equal(msrd_launch(&device->server, device->arguments), 0);
	assert_int_equal(haecer_connect(device->server.socket_path, &conn), 0);
	change_registers(conn);
	haecer_close(conn);
}

static void kill_msrd(struct msrd_server *server)
{
	int status;

	assert_int_equal(kill(server->pid, SIGKILL), 0);
	assert_int_equal(waitpid(server->pid, &status, 0), server->pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	server->pid = -1;
}

/* The journal file in `directory`, or "" when there is none. */
static void find_journal(const char *directory, char *path, size_t size)
{
	struct dirent *entry;
	DIR *dir = opendir(directory);

	path[0] = '\0';
	assert_non_null(dir);
	while ((entry = readdir(dir)) != NULL) {
		if (strstr(entry->d_name, ".journal") != NULL)
			snprintf(path, size, "%s/%s", directory, entry->d_name);
	}
	closedir(dir);
}

static void test_restart_restores(void **state)
{
	struct device device;
	struct haecer_conn *conn;
	char journal[PATH_MAX + 300];
	uint64_t value;
	int status;

	(void)state;
	prepare(&device);
	assert_int_equal(msrd_launch(&device.server, device.arguments), 0);
	assert_int_equal(haecer_connect(device.server.socket_path, &conn), 0);
	change_registers(conn);
	assert_int_equal(register_value(&device, 0, PERFEVTSEL0), 0x4300c0);
	assert_int_equal(register_value(&device, 1, SCRATCH), 0xbeef);
	find_journal(device.state, journal, sizeof(journal));
	assert_true(journal[0] != '\0');

	kill_msrd(&device.server);
	/* What the killed msrd wrote is still there: only the journal knows what was before. */
	assert_false(all_original(&device));
	status = haecer_msr_read(conn, 0, 0x10, &value);
	assert_true(status == -ECONNRESET || status == -EPIPE);
	assert_string_equal(haecer_conn_error(conn), "connection to msrd closed");
	assert_true(haecer_msr_read(conn, 0, 0x10, &value) < 0);
	haecer_close(conn);

	assert_int_equal(msrd_launch(&device.server, device.arguments), 0);
	assert_true(msrd_log_contains(&device.server, "journal: the previous msrd did not stop "
						      "cleanly; writing back the 66 registers"));
	assert_true(msrd_log_contains(&device.server, "journal: 66 registers restored"));
	assert_true(all_original(&device));
	assert_int_equal(haecer_connect(device.server.socket_path, &conn), 0);
	assert_int_equal(haecer_msr_read(conn, 0, PERFEVTSEL0, &value), 0);
	assert_int_equal(value, original(0, PERFEVTSEL0));
	change_registers(conn);
	haecer_close(conn);
	assert_int_equal(msrd_stop(&device.server), 0);
	/* msrd_stop removed the directory; a clean stop removed the journal before that. */
}

static void test_clean_stop_removes_the_journal(void **state)
{
	struct device device;
	char journal[PATH_MAX + 300];

	(void)state;
	start_and_change(&device);
	assert_int_equal(msrd_signal(&device.server, SIGTERM), 0);
	assert_true(msrd_wait_log(&device.server, "stopped: 66 MSRs restored", 60000));
	for (int i = 0; i < 3000; i++) {
		find_journal(device.state, journal, sizeof(journal));
		if (journal[0] == '\0')
			break;
		usleep(10000);
	}
	assert_string_equal(journal, "");
	assert_true(all_original(&device));
	assert_int_equal(msrd_stop(&device.server), 0);
}

/* SIGTERM, and msrd exits 0; unlike msrd_stop its directory (and --state-dir) stays. */
static void stop_keeping_state(struct msrd_server *server)
{
	int status;

	assert_int_equal(kill(server->pid, SIGTERM), 0);
	assert_int_equal(waitpid(server->pid, &status, 0), server->pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	server->pid = -1;
}

/* The journal's text (at most `max` bytes read), which must exist. */
static char *journal_text(const struct device *device, size_t max)
{
	char journal[PATH_MAX + 300];
	char *text;

	find_journal(device->state, journal, sizeof(journal));
	assert_true(journal[0] != '\0');
	text = harness_read_text(journal, max);
	assert_non_null(text);
	return text;
}

/* msrd must refuse to start; its log says why. */
static void expect_refused(struct device *device, const char *why)
{
	assert_int_equal(msrd_launch(&device->server, device->arguments), -1);
	assert_true(msrd_log_contains(&device->server, why));
	assert_true(msrd_log_contains(&device->server, "not starting"));
}

/* A journal with the given text, as a killed msrd could have left it (a fresh msrd names the
 * file; the one a previous plant left is removed first). */
static void plant_journal(struct device *device, const char *text, unsigned mode)
{
	char journal[PATH_MAX + 300];

	find_journal(device->state, journal, sizeof(journal));
	if (journal[0] != '\0')
		assert_int_equal(unlink(journal), 0);
	assert_int_equal(msrd_launch(&device->server, device->arguments), 0);
	find_journal(device->state, journal, sizeof(journal));
	assert_true(journal[0] != '\0');
	kill_msrd(&device->server);
	assert_int_equal(harness_write_file(journal, text, mode), 0);
}

/* The kernel's id of the running boot, as msrd names it in the journal's first line. */
static void this_boot(char *boot, size_t size)
{
	char *text = harness_read_text("/proc/sys/kernel/random/boot_id", 128);

	assert_non_null(text);
	text[strcspn(text, "\n")] = '\0';
	assert_true(strlen(text) == 36 && strlen(text) < size);
	snprintf(boot, size, "%s", text);
	free(text);
}

/* The first line of a journal of boot `boot` for the device root `root`, then `entries`. */
static void journal_with(char *text, size_t size, const char *boot, const char *root,
			 const char *entries)
{
	snprintf(text, size, "haecer-msrd journal 2 boot %s backend msr root %s\n%s", boot, root,
		 entries);
}

/* msrd started over the journal `text` while cpu 1's MSR 0x808 holds something else: it logs
 * `expected` and writes the journal's value back. msrd is left running. */
static void expect_replayed(struct device *device, const char *text, const char *expected)
{
	plant_journal(device, text, 0600);
	assert_int_equal(harness_standin_write(device->tree, 1, 0x808, 0x77), 0);
	assert_int_equal(msrd_launch(&device->server, device->arguments), 0);
	assert_true(msrd_log_contains(&device->server, expected));
	assert_int_equal(register_value(device, 1, 0x808), original(1, 0x808));
}

static void test_forged_journals_refused(void **state)
{
	char text[PATH_MAX + 256];
	char other_device[256];
	struct device device;
	char boot[64];

	(void)state;
	prepare(&device);
	this_boot(boot, sizeof(boot));
	/* Group-writable journal. */
	journal_with(text, sizeof(text), boot, device.tree, "");
	plant_journal(&device, text, 0660);
	expect_refused(&device, "is writable by its group");
	/* Another device's journal; refused, it is kept as it was (it is not this msrd's). */
	journal_with(other_device, sizeof(other_device), boot, "/", "cpu 0 msr 0x186 0x0\n");
	plant_journal(&device, other_device, 0600);
	expect_refused(&device, "belongs to another device");
	{
		char *kept = journal_text(&device, 4096);
		assert_string_equal(kept, other_device);
		free(kept);
	}
	/* A state directory others may write. */
	assert_int_equal(chmod(device.state, 0777), 0);
	expect_refused(&device, "state directory");
	assert_true(msrd_log_contains(&device.server, "is writable by others (mode 0777)"));
	assert_int_equal(chmod(device.state, 0755), 0);
	/* A torn last line is ignored; the whole lines before it are restored. */
	{
		char entries[128];
		snprintf(entries, sizeof(entries), "cpu 1 msr 0x808 0x%llx\ncpu 0 msr 0x1",
			 (unsigned long long)original(1, 0x808));
		journal_with(text, sizeof(text), boot, device.tree, entries);
	}
	expect_replayed(&device, text, "ignoring a torn last line");
	assert_int_equal(msrd_stop(&device.server), 0);
}

/* A journal kept in a --state-dir that outlived a reboot names values from a machine state that
 * is gone (the reset and the firmware have set the registers since): msrd writes none of them
 * back, says why, and starts a journal of this boot. */
static void test_journal_of_an_earlier_boot_discarded(void **state)
{
	const char *earlier = "00000000-0000-4000-8000-000000000000";
	char text[PATH_MAX + 256];
	struct device device;
	char boot[64];
	char *fresh;

	(void)state;
	prepare(&device);
	this_boot(boot, sizeof(boot));
	assert_string_not_equal(boot, earlier);
	journal_with(text, sizeof(text), earlier, device.tree,
		     "cpu 0 msr 0x186 0x0\ncpu 1 msr 0x808 0x1\n");
	plant_journal(&device, text, 0600);
	assert_int_equal(harness_standin_write(device.tree, 1, 0x808, 0x77), 0);
	assert_int_equal(msrd_launch(&device.server, device.arguments), 0);
	assert_true(msrd_log_contains(&device.server, "was written before the machine last booted"));
	assert_false(msrd_log_contains(&device.server, "registers restored"));
	assert_int_equal(register_value(&device, 0, PERFEVTSEL0), original(0, PERFEVTSEL0));
	assert_int_equal(register_value(&device, 1, 0x808), 0x77);
	journal_with(text, sizeof(text), boot, device.tree, "");
	fresh = journal_text(&device, 4096);
	assert_string_equal(fresh, text);
	free(fresh);
	kill_msrd(&device.server);
	/* An earlier boot's msrd that died writing the first line wrote no register after it. */
	journal_with(text, sizeof(text), earlier, device.tree, "");
	text[strlen(text) - 8] = '\0';
	plant_journal(&device, text, 0600);
	assert_int_equal(msrd_launch(&device.server, device.arguments), 0);
	assert_false(msrd_log_contains(&device.server, "belongs to another device"));
	assert_int_equal(msrd_stop(&device.server), 0);
}

/* A journal that cannot tell its boot (version 1, before boot ids; or "unknown", written where
 * /proc did not say) is replayed as it always was: skipping a restore that is owed is worse. */
static void test_journal_without_a_known_boot_replayed(void **state)
{
	char text[PATH_MAX + 256];
	char entries[64];
	struct device device;

	(void)state;
	prepare(&device);
	snprintf(entries, sizeof(entries), "cpu 1 msr 0x808 0x%llx\n",
		 (unsigned long long)original(1, 0x808));
	snprintf(text, sizeof(text), "haecer-msrd journal 1 backend msr root %s\n%s", device.tree,
		 entries);
	expect_replayed(&device, text, "journal: 1 registers restored");
	kill_msrd(&device.server);

	journal_with(text, sizeof(text), "unknown", device.tree, entries);
	expect_replayed(&device, text, "journal: 1 registers restored");
	assert_int_equal(msrd_stop(&device.server), 0);
}

/* The most a starting msrd reads (JOURNAL_MAX_BYTES in server/journal.c). */
#define JOURNAL_MAX_BYTES (16u << 20)

/* A journal larger than a starting msrd reads is refused and kept; the running msrd refuses a
 * write rather than grow its journal past that size, so its successor can still start. */
static void test_journal_size_limit(void **state)
{
	char journal[PATH_MAX + 300];
	struct haecer_conn *conn;
	struct device device;
	struct stat status;
	char *text;

	(void)state;
	prepare(&device);
	assert_int_equal(msrd_launch(&device.server, device.arguments), 0);
	assert_int_equal(haecer_connect(device.server.socket_path, &conn), 0);
	assert_int_equal(haecer_msr_write(conn, 0, SCRATCH, 0x1234), 0);
	/* The journal near its limit: the rest of the file is a line without its end, as if
	 * msrd had died writing it, which the next start ignores. */
	find_journal(device.state, journal, sizeof(journal));
	assert_int_equal(truncate(journal, JOURNAL_MAX_BYTES - 16), 0);
	assert_true(haecer_msr_write(conn, 0, SCRATCH + 8, 0x5678) < 0);
	assert_true(msrd_log_contains(&device.server, "would grow past 16777216 bytes"));
	assert_true(msrd_log_contains(&device.server, "the write is refused"));
	assert_int_equal(register_value(&device, 0, SCRATCH + 8), original(0, SCRATCH + 8));
	haecer_close(conn);
	kill_msrd(&device.server);
	assert_int_equal(stat(journal, &status), 0);
	assert_true(status.st_size <= (off_t)JOURNAL_MAX_BYTES);

	assert_int_equal(msrd_launch(&device.server, device.arguments), 0);
	assert_true(msrd_log_contains(&device.server, "ignoring a torn last line"));
	assert_int_equal(register_value(&device, 0, SCRATCH), original(0, SCRATCH));
	kill_msrd(&device.server);

	/* One byte past the limit: refused, and the file is left as it was. */
	text = journal_text(&device, 4096);
	assert_int_equal(truncate(journal, JOURNAL_MAX_BYTES + 1), 0);
	expect_refused(&device, "more than the 16777216 a journal msrd writes can have");
	assert_int_equal(stat(journal, &status), 0);
	assert_int_equal(status.st_size, JOURNAL_MAX_BYTES + 1);
	free(text);
	harness_remove_tree(device.server.dir);
}

/* A register of an offline CPU (its device file missing) cannot be written back at start: msrd
 * starts all the same, says so, and the fresh journal still names it with its original value,
 * through a clean stop too, until a start with the CPU back writes it. */
static void test_offline_cpu_kept_for_later(void **state)
{
	char offline[PATH_MAX + 64];
	char aside[PATH_MAX + 64];
	struct device device;
	char *text;

	(void)state;
	start_and_change(&device);
	kill_msrd(&device.server);

	snprintf(offline, sizeof(offline), "%s/dev/cpu/1/msr", device.tree);
	snprintf(aside, sizeof(aside), "%s/msr-of-cpu1", device.server.dir);
	assert_int_equal(rename(offline, aside), 0);
	assert_int_equal(msrd_launch(&device.server, device.arguments), 0);
	assert_true(msrd_log_contains(&device.server, "journal: 33 registers restored, some could "
						      "not be"));
	assert_true(msrd_log_contains(&device.server, "journal: 33 registers could not be written "
						      "back"));
	assert_int_equal(register_value(&device, 0, PERFEVTSEL0), original(0, PERFEVTSEL0));
	text = journal_text(&device, 1 << 16);
	assert_non_null(strstr(text, "cpu 1 msr 0x186 0x0000000000000006\n"));
	assert_null(strstr(text, "cpu 0 msr"));
	free(text);
	/* A clean stop restores what this msrd changed and keeps what is still owed. */
	stop_keeping_state(&device.server);
	text = journal_text(&device, 1 << 16);
	assert_non_null(strstr(text, "cpu 1 msr 0x186 0x0000000000000006\n"));
	free(text);

	assert_int_equal(rename(aside, offline), 0);
	assert_false(all_original(&device));
	assert_int_equal(msrd_launch(&device.server, device.arguments), 0);
	assert_true(msrd_log_contains(&device.server, "journal: 33 registers restored\n"));
	assert_true(all_original(&device));
	assert_int_equal(msrd_stop(&device.server), 0);
}

static void test_one_msrd_per_device(void **state)
{
	struct device first;
	struct msrd_server second;

	(void)state;
	prepare(&first);
	assert_int_equal(msrd_launch(&first.server, first.arguments), 0);
	/* Its own directory and socket, the same device and journal. */
	assert_int_equal(msrd_prepare(&second, policy), 0);
	assert_int_equal(msrd_launch(&second, first.arguments), -1);
	assert_true(msrd_log_contains(&second, "another msrd is using this device"));
	harness_remove_tree(second.dir);
	assert_int_equal(msrd_stop(&first.server), 0);
}

static void test_simulated_cpu_has_no_journal(void **state)
{
	const char *arguments[] = { "--backend", "sim", NULL };
	struct msrd_server server;
	struct haecer_conn *conn;
	char journal[PATH_MAX + 300];

	(void)state;
	assert_int_equal(msrd_start(&server, policy, arguments), 0);
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_msr_write(conn, 0, PERFEVTSEL0, 0x43003c), 0);
	kill_msrd(&server);
	haecer_close(conn);
	find_journal(server.dir, journal, sizeof(journal));
	assert_string_equal(journal, "");
	assert_int_equal(msrd_launch(&server, arguments), 0);
	assert_true(msrd_log_contains(&server, "journal: none for the simulated CPU"));
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	{
		uint64_t value = 1;
		assert_int_equal(haecer_msr_read(conn, 0, PERFEVTSEL0, &value), 0);
		assert_int_equal(value, 0); /* a new simulation, from reset */
	}
	haecer_close(conn);
	assert_int_equal(msrd_stop(&server), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restart_restores),
		cmocka_unit_test(test_clean_stop_removes_the_journal),
		cmocka_unit_test(test_forged_journals_refused),
		cmocka_unit_test(test_journal_of_an_earlier_boot_discarded),
		cmocka_unit_test(test_journal_without_a_known_boot_replayed),
		cmocka_unit_test(test_journal_size_limit),
		cmocka_unit_test(test_offline_cpu_kept_for_later),
		cmocka_unit_test(test_one_msrd_per_device),
		cmocka_unit_test(test_simulated_cpu_has_no_journal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
