/*
 * tests/hardening/hardening.h — what the hostile-client tests share.
 *
 * A bystander: an ordinary client in a thread of the test that reads the TSC through msrd,
 * over and over, while a test attacks the same msrd from other connections. Every one of its
 * requests must be answered, and answered correctly: an attack that stalls, starves or
 * disconnects other clients fails the test that made it, whatever else the test checks.
 *
 * msrd's descriptor count (/proc/PID/fd) shows what an attack leaves behind in the server.
 */
#ifndef HAECER_TESTS_HARDENING_HARDENING_H
#define HAECER_TESTS_HARDENING_HARDENING_H

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "haecer/msrd.h"

/* A policy for the tests here: root reads the TSC (the bystander's register) and the whole
 * architectural PMU, RAPL; everyone else only the TSC. Ring majors 1-9 for everyone. */
#define HARDENING_POLICY                                                                        \
	"version: 1\ndefault: deny\nmsrs:\n"                                                     \
	"  - {name: TSC, address: 0x10, read: true, set: time}\n"                                \
	"  - {name: PERFEVTSEL, range: [0x186, 0x18D], read: true, write_mask: 0xffc7ffff, "     \
	"set: pmu}\n"                                                                              \
	"  - {name: PMC, range: [0xC1, 0xC8], read: true, write_mask: 0xffffffffffff, set: pmu}\n" \
	"  - {name: FIXED_CTR, range: [0x309, 0x30B], read: true, write_mask: 0xffffffffffff, "   \
	"set: pmu}\n"                                                                              \
	"  - {name: FIXED_CTR_CTRL, address: 0x38D, read: true, write_mask: 0x333, set: pmu}\n"   \
	"  - {name: GLOBAL_CTRL, address: 0x38F, read: true, write_mask: 0x7000000ff, set: pmu}\n" \
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}\n"                   \
	"  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}\n"                        \
	"rules:\n"                                                                                \
	"  - {match: {uid: 0}, allow: [time, pmu, rapl], create_rings: [1-9], "                  \
	"monitor_rings: [1-9], capabilities: [persistent_schedules, sim_control]}\n"             \
	"  - {match: {any: true}, allow: [time], create_rings: [1-9], monitor_rings: [1-9]}\n"

struct bystander {
	pthread_t thread;
	const char *socket_path;
	/* Here rather than in the thread, so that a process forked meanwhile (run_as) can still
	 * reach it: valgrind would call the memory of a thread that does not exist there lost. */
	struct haecer_conn *conn;
	atomic_bool stop;
	atomic_uint_fast64_t reads;
	atomic_int failures;
	char error[256];
};

static inline void *bystander_run(void *argument)
{
	struct bystander *self = argument;
	uint64_t previous = 0;
	int status = haecer_connect(self->socket_path, &self->conn);

	if (status < 0) {
		snprintf(self->error, sizeof(self->error), "connect: %s", strerror(-status));
		atomic_fetch_add(&self->failures, 1);
		return NULL;
	}
	while (!atomic_load(&self->stop)) {
		uint64_t value = 0;
		status = haecer_msr_read(self->conn, 0, 0x10, &value);
		/* The simulated TSC never goes backwards: a stale or foreign reply would show. */
		if (status < 0 || value < previous) {
			snprintf(self->error, sizeof(self->error), "read %llu: %s (%s)",
				 (unsigned long long)atomic_load(&self->reads),
				 status < 0 ? strerror(-status) : "TSC went backwards",
				 haecer_conn_error(self->conn));
			atomic_fetch_add(&self->failures, 1);
			break;
		}
		previous = value;
		atomic_fetch_add(&self->reads, 1);
		usleep(1000);
	}
	haecer_close(self->conn);
	self->conn = NULL;
	return NULL;
}

/* Connect and start reading; returns once the first read was answered (so a process forked
 * afterwards never catches the thread half-way through connecting): 0, or -1 when the thread
 * could not start (it may still have failed to connect: bystander_progress says so). */
static inline int bystander_start(struct bystander *bystander, const char *socket_path)
{
	memset(bystander, 0, sizeof(*bystander));
	bystander->socket_path = socket_path;
	if (pthread_create(&bystander->thread, NULL, bystander_run, bystander) != 0)
		return -1;
	while (atomic_load(&bystander->reads) == 0 && atomic_load(&bystander->failures) == 0)
		usleep(1000);
	return 0;
}

/* Wait until it has been answered `count` more times (so it ran during what came before);
 * false when it failed meanwhile. */
static inline bool bystander_progress(struct bystander *bystander, uint64_t count)
{
	uint64_t target = atomic_load(&bystander->reads) + count;

	while (atomic_load(&bystander->reads) < target) {
		if (atomic_load(&bystander->failures) > 0)
			return false;
		usleep(1000);
	}
	return true;
}

/* Stop it; true when every one of its requests was answered correctly. */
static inline bool bystander_stop(struct bystander *bystander)
{
	atomic_store(&bystander->stop, true);
	pthread_join(bystander->thread, NULL);
	if (atomic_load(&bystander->failures) > 0)
		fprintf(stderr, "bystander: %s\n", bystander->error);
	return atomic_load(&bystander->failures) == 0 && atomic_load(&bystander->reads) > 0;
}

/* The cmocka setup and teardown of a test that runs beside a bystander of the group's msrd:
 * HARDENING_BYSTANDER_FIXTURES(server, bystander) defines bystander_setup and
 * bystander_teardown; the teardown fails the test if the bystander was ever let down. */
#define HARDENING_BYSTANDER_FIXTURES(server_, bystander_)                           \
	static int bystander_setup(void **state)                                    \
	{                                                                           \
		(void)state;                                                        \
		return bystander_start(&(bystander_), (server_).socket_path);       \
	}                                                                           \
	static int bystander_teardown(void **state)                                 \
	{                                                                           \
		(void)state;                                                        \
		return bystander_stop(&(bystander_)) ? 0 : -1;                      \
	}
#define BYSTANDER_TEST(test) cmocka_unit_test_setup_teardown(test, bystander_setup, bystander_teardown)

/* Open descriptors of process `pid`, or -1. */
static inline int process_fd_count(pid_t pid)
{
	char path[64];
	struct dirent *entry;
	DIR *dir;
	int count = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	if (dir == NULL)
		return -1;
	while ((entry = readdir(dir)) != NULL)
		count += entry->d_name[0] != '.';
	closedir(dir);
	return count;
}

/* msrd's descriptor count once it has settled at `expected` (closing connections takes a loop
 * turn or two); returns the last count seen within about 30 s. */
static inline int process_fd_count_settled(pid_t pid, int expected)
{
	int count = process_fd_count(pid);

	for (int i = 0; i < 3000 && count != expected; i++) {
		usleep(10000);
		count = process_fd_count(pid);
	}
	return count;
}

#endif
