/*
 * server/privsep.h — msrd split in two on a device backend (msr, msr-safe), OpenBSD's way
 * (privsep.c starts it and is the server's side of the channel, privsep_parent.c is the parent):
 *
 *   the parent  keeps CAP_SYS_RAWIO, the only read-write device descriptors, the registers'
 *               original values (msrstate) and the journal; it answers one fixed-size request,
 *               "write value to (cpu, address)", checked against the union of the policy's write
 *               masks (policy_resolve_everyone), and writes every register back when the server
 *               ends, however it ends;
 *   the server  (its child) is everything else: clients' frames, the policy and its reloads, the
 *               io_uring loop, slots, energy. It keeps read-only device descriptors (reads keep
 *               their path and cost) and no capability to open new ones.
 *
 * The channel is a SOCK_SEQPACKET socket pair: one request per packet, one reply each, in order;
 * first of all the parent sends one reply of op 0 when it is set up (the server waits for it).
 * Every request is exactly PRIVSEP_REQUEST_SIZE bytes with `zero` 0 and a known op; anything
 * else is answered -EBADMSG and does nothing. The wire layout is the host's (both ends are one
 * binary on one machine). SECURITY.md says what a compromised server can still do.
 */
#ifndef HAECER_SERVER_PRIVSEP_H
#define HAECER_SERVER_PRIVSEP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct msrd;
struct privilege_user;

enum privsep_op {
	PRIVSEP_WRITE = 1,        /* write `value` to (cpu, address); reply: 0 or -errno */
	PRIVSEP_FORGET = 2,       /* take (cpu, address) out of the crash journal (journal_forget) */
	PRIVSEP_KEEP_JOURNAL = 3, /* a slot's own restore failed: keep the journal at exit */
};

struct privsep_request {
	uint32_t op;              /* enum privsep_op */
	uint32_t cpu;
	uint32_t address;
	uint32_t zero;            /* must be 0 */
	uint64_t value;           /* PRIVSEP_WRITE only; 0 otherwise */
};

struct privsep_reply {
	uint32_t op;              /* the request's op */
	int32_t status;           /* 0 or -errno */
};

#define PRIVSEP_REQUEST_SIZE 24u
#define PRIVSEP_REPLY_SIZE 8u
_Static_assert(sizeof(struct privsep_request) == PRIVSEP_REQUEST_SIZE, "request layout");
_Static_assert(sizeof(struct privsep_reply) == PRIVSEP_REPLY_SIZE, "reply layout");

/* The server's end of the channel. */
struct privsep {
	int fd;
	pid_t parent;
};

/*
 * Split when the backend has devices; before any capability is dropped (the server reopens its
 * devices read-only, which the msr driver allows only with CAP_SYS_RAWIO). In the server:
 * returns 0 with server->parent set, privileges not yet dropped. In the parent: runs it until
 * the server has ended and its registers are restored, then returns 1 with *exit_code. Without
 * devices: 0, nothing done (the simulated CPU, powercap and perf have no register to guard).
 * -errno when the split failed (logged).
 */
int privsep_start(struct msrd *server, const struct privilege_user *user, int *exit_code);

/* The server's requests: 0 or -errno (the parent's answer, or -EPIPE without a parent).
 * privsep_write is the backend's write delegate (backend_write_fn; context: struct privsep). */
int privsep_write(void *context, uint32_t cpu, uint32_t address, uint64_t value);
int privsep_forget(struct privsep *parent, uint32_t cpu, uint32_t address);
int privsep_keep_journal(struct privsep *parent);

/* privsep_parent.c: serve `channel` until the server `child` has ended, restore, return the
 * exit code (the server's, or 1 when it died or a restore failed). */
int privsep_parent_run(struct msrd *server, const struct privilege_user *user, int channel,
		       pid_t child);

#endif
