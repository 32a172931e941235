/*
 * server/journal.h — msrd's the journal of original values on disk (journal.c): its state and
 * calls, private to msrd (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_JOURNAL_H
#define HAECER_SERVER_JOURNAL_H

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

#include "server/msrstate.h"

struct msrd;

struct journal {
	int fd;                        /* -1: no journal (simulated CPU) */
	enum backend_kind backend;
	struct msrstate written;       /* registers whose original value is on disk */
	char root[PATH_MAX];           /* the device root it belongs to */
	char boot[40];                 /* the kernel's boot id, or "unknown" */
	/* Registers the journal named that could not be written back at start (a CPU offline or
	 * beyond the ones present now): still owed, so the fresh journal names them again and a
	 * clean stop keeps them for a later start. */
	struct msrstate carried;
	bool broken;                   /* a partial line could not be cut off: append nothing */
	char name[64];
	char path[PATH_MAX + 64];
};

/* Open (or create) the journal of this backend and device root under --state-dir, locked;
 * write back what a previous msrd left in it, and start it empty. Does nothing for the
 * simulated CPU. -EACCES for a directory or file others could write, -EBUSY when another msrd
 * holds it, -EINVAL when it belongs to another device; the reason is logged. */
int journal_open(struct msrd *server);
/* Before the first write of (cpu, address) since start: its original value `before` is on
 * disk when this returns 0. -EIO (logged) when it could not be recorded: the write must not
 * happen. */
int journal_note(struct msrd *server, uint32_t cpu, uint32_t address, uint64_t before);
/* Take a register back from the journal ("forget" line): a restart no longer writes its
 * original over it. For a counter slot reprogrammed outside msrd. 0 or -errno (logged). In the
 * server beside a privileged parent, a request to the parent, which keeps the journal. */
int journal_forget(struct msrd *server, uint32_t cpu, uint32_t address);
/* The same, reading the register's current value first (slot writes). */
int journal_note_current(struct msrd *server, uint32_t cpu, uint32_t address);
/* The server beside a privileged parent: close this process's descriptor and leave the file
 * and its lock to the parent; journal_note and journal_note_current then do nothing here (the
 * parent journals each write it makes). */
void journal_detach(struct msrd *server);
/* At exit: `restored` (every register msrd changed was written back) removes the journal; else
 * it is kept for the next start. */
void journal_close(struct msrd *server, bool restored);

#endif
