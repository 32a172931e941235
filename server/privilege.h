/*
 * server/privilege.h — msrd's privilege (privilege.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_PRIVILEGE_H
#define HAECER_SERVER_PRIVILEGE_H

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

#define PRIVILEGE_MAX_GROUPS 256

/* Who --user names: looked up before anything is dropped. */
struct privilege_user {
	char name[64];
	uid_t uid;
	gid_t gid;
	gid_t groups[PRIVILEGE_MAX_GROUPS];
	size_t group_count;
};

/* Raise the soft RLIMIT_NOFILE to the hard limit (1000s of clients need descriptors). */
void privilege_raise_fd_limit(void);
/* A user name (or a bare uid) with its groups; -ENOENT when unknown. */
int privilege_resolve_user(const char *name, struct privilege_user *out);
/* Which process of msrd drops its privileges (server/privsep.h). */
enum privilege_role {
	PRIVILEGE_WHOLE,   /* msrd in one process: a backend without devices */
	PRIVILEGE_SERVER,  /* the server beside a privileged parent: no CAP_SYS_RAWIO */
	PRIVILEGE_PARENT,  /* the privileged parent: CAP_SYS_RAWIO only */
};

/* When running with capabilities: become `user` (may be NULL: stay), then keep only
 * CAP_SYS_RAWIO (permitted and effective; none for PRIVILEGE_SERVER) and drop every other
 * capability from the bounding set. Without privileges: nothing to do, but -EPERM when `user`
 * is another user. keep_perfmon: also keep CAP_PERFMON and CAP_SYS_PTRACE (the perf broker
 * opens events for other uids' threads under any perf_event_paranoid; never the parent). */
int privilege_drop(const struct privilege_user *user, enum privilege_role role, bool keep_perfmon);
/* Install the system call filter (mode off: nothing). 0 or -errno (logged). */
int privilege_seccomp(enum msrd_seccomp mode);
/* The same for one role: the server's filter has no device writes and no journal calls; the
 * parent's allows only what it needs (its channel, its devices, its journal, reading the
 * policy, signalling `child`). */
int privilege_seccomp_role(enum msrd_seccomp mode, enum privilege_role role, pid_t child);
/* Log the system calls the filter refused since the last call (the loop calls it each turn). */
void privilege_log_refused(void);

#endif
