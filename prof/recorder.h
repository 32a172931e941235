/*
 * prof/recorder.h — what haecer-prof record's parts share (private to prof/record*.c): the
 * recorder's state, its meta lines, the perf sampling (record_perf.c) and msrd's energy
 * schedule (record_energy.c) that record.c runs around the program.
 */
#ifndef HAECER_PROF_RECORDER_H
#define HAECER_PROF_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "haecer/msrd.h"
#include "prof/prof.h"
#include "shm/ring.h"

struct perf_cpu {
	int fd;
	void *base;
	size_t bytes;
};

struct energy_op {
	uint32_t package;
	uint32_t domain;
};

struct recorder {
	struct prof_writer writer;
	struct perf_cpu *cpus;
	int cpu_count;
	unsigned char *record_buffer;
	bool dwarf;
	bool kernel_unsampled;      /* perf refused kernel-mode samples (perf_event_paranoid) */
	uint64_t lost;
	uint64_t samples;
	/* energy */
	struct haecer_conn *conn;
	bool brokered;                 /* the sampling events came from msrd's perf broker */
	struct haecer_machine_info machine;
	struct energy_op ops[HAECER_SCHEDULE_MAX_OPS];
	uint32_t op_count;
	uint32_t schedule_id;
	bool schedule_running;
	struct ring_consumer energy;
	bool energy_attached;
	struct ring_record *energy_records;
	uint32_t energy_capacity;
	uint64_t energy_sets;
	uint64_t energy_lost;
	uint64_t last_energy_ns;
};

/* One meta line ("key=value") into the data file. */
void recorder_meta(struct recorder *recorder, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

/* record_perf.c. What perf_event_open says when perf is not to be had here (paranoid setting,
 * seccomp, no software events, no such system call): the timer agent can sample instead. */
bool recorder_perf_refused(int error);
/* Task-clock sampling of child and its threads on every CPU, at hz, with DWARF stacks when
 * dwarf; quiet_refusal: say nothing when perf is refused (the caller falls back and says so). */
int recorder_open_sampling(struct recorder *recorder, pid_t child, unsigned hz, bool dwarf,
			   bool quiet_refusal);
/* Through msrd's perf broker: in the child, before it execs the program, ask msrd for the same
 * events on itself (tid 0: msrd opens events only on its client's own process) and send each
 * CPU's descriptor to the parent over `channel` (a SOCK_SEQPACKET socket); in the parent,
 * receive and map them: 0, or the error that made the child stop (the parent then opens perf
 * itself). */
void recorder_broker_child(const char *socket_path, int channel, unsigned hz, bool dwarf);
int recorder_broker_receive(struct recorder *recorder, int channel, bool dwarf);
/* Copy every perf ring's new records into the data file. */
void recorder_drain_perf(struct recorder *recorder);
/* Each CPU's event counts every thread's task clock there (its own and its inherited ones'). */
void recorder_record_task_totals(struct recorder *recorder);
void recorder_close_sampling(struct recorder *recorder);

/* record_energy.c. msrd's schedule of every readable RAPL domain of every package, every
 * period_ns, into a ring record attaches to. */
int recorder_start_energy(struct recorder *recorder, const char *socket, uint64_t period_ns);
/* Copy the ring's complete sets into the data file (final: the last drain, after the exit). */
void recorder_drain_energy(struct recorder *recorder, bool final);
void recorder_stop_energy(struct recorder *recorder);
/* The machine, the backend and the domains recorded, as meta lines. */
void recorder_write_machine_meta(struct recorder *recorder,
				 const struct haecer_server_info *info);

#endif
