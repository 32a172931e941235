/*
 * server/options.h — msrd's configuration (options.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_OPTIONS_H
#define HAECER_SERVER_OPTIONS_H

#include <limits.h>
#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "common/log.h"
#include "policy/policy.h"
#include "proto/wire.h"
#include "shm/energy_page.h"

enum msrd_action {
	MSRD_RUN = 0,
	MSRD_HELP,
	MSRD_VERSION_ACTION,
	MSRD_CHECK_POLICY,
	MSRD_IMPORT_ALLOWLIST,
	MSRD_LIST_SIM_MODELS,
	MSRD_PROBE,
};

enum msrd_seccomp {
	MSRD_SECCOMP_ENFORCE = 0,      /* unexpected system calls fail with EPERM and are logged */
	MSRD_SECCOMP_LOG,              /* allowed, but the kernel logs them (audit) */
	MSRD_SECCOMP_OFF,
};

struct msrd_config {
	enum msrd_action action;
	const char *socket_path;
	const char *policy_path;
	const char *action_file;       /* --check-policy / --import-allowlist argument */
	const char *for_group;
	const char *ring_majors;       /* --ring-majors, for --import-allowlist */
	bool strict;                   /* --strict: --check-policy fails on warnings */
	struct backend_options backend;
	enum log_level log_level;
	bool foreground;
	bool perf_broker;              /* --perf-broker: PERF_OPEN beside a register backend */
	bool insecure_policy_permissions;
	unsigned socket_mode;
	const char *socket_group;
	const char *socket_owner;
	const char *state_dir;         /* the journal's directory */
	const char *user;              /* --user: run as this user after start-up; NULL stays */
	enum msrd_seccomp seccomp;
	int ready_fd;                  /* -1 none */
	unsigned ring_grace_ms;        /* an orphaned ring without consumers lives this long */
	unsigned frame_timeout_ms;     /* a started frame must complete within this */
	unsigned client_timeout_ms;    /* a reply that cannot be sent for this long drops the client */
	unsigned max_clients;
	unsigned max_rings_per_client;
	uint64_t ring_memory_max;      /* bytes of ring memory over all rings */
	unsigned max_clients_per_uid;  /* the per-uid limits (accounts.c) */
	unsigned max_rings_per_uid;
	uint64_t ring_memory_per_uid;  /* bytes */
	unsigned max_handles_per_uid;
	unsigned max_schedules_per_uid;
	unsigned recv_buffers;         /* most shared receive buffers of LOOP_BUFFER_SIZE bytes */
	unsigned refusal_log_burst;    /* refusal lines per connection per 5 s (4x per uid); 0 all */
};

/* Parse argv. Returns 0, or -EINVAL after printing "msrd: ..." to stderr (exit 2). */
int options_parse(int argc, char **argv, struct msrd_config *config);
void options_usage(FILE *out);

#endif
