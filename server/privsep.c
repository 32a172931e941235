/*
 * server/privsep.c — the split of msrd into a privileged parent and the server
 * (server/privsep.h), and the server's end of their channel.
 *
 * The process that opened the devices forks: the parent keeps the read-write descriptors and
 * the journal; the child reopens its device descriptors read-only under the same numbers, closes
 * the journal, and hands every register write to the parent. The child dies with the parent
 * (PR_SET_PDEATHSIG: SIGTERM, a clean stop), the parent restores when the child ends.
 *
 * A request blocks the server's loop until the parent answers (one write: a read and a write of
 * the device in the parent, two context switches): writes are rare next to reads, which do not
 * cross.
 */
#include "server/server.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

static struct privsep channel = { .fd = -1 };

/* One request, one reply: the reply's status, or -EPIPE when the parent is gone (a server
 * without a parent writes nothing). */
static int ask(struct privsep *parent, const struct privsep_request *request)
{
	struct privsep_reply reply;
	ssize_t done;

	if (parent == NULL || parent->fd < 0)
		return -EPIPE;
	do
		done = send(parent->fd, request, sizeof(*request), MSG_NOSIGNAL);
	while (done < 0 && errno == EINTR);
	if (done != (ssize_t)sizeof(*request))
		return done < 0 ? -errno : -EPIPE;
	do
		done = recv(parent->fd, &reply, sizeof(reply), 0);
	while (done < 0 && errno == EINTR);
	if (done != (ssize_t)sizeof(reply) || reply.op != request->op)
		return done < 0 ? -errno : -EPIPE;
	return reply.status <= 0 ? reply.status : -EPROTO;
}

int privsep_write(void *context, uint32_t cpu, uint32_t address, uint64_t value)
{
	struct privsep_request request = { .op = PRIVSEP_WRITE, .cpu = cpu, .address = address,
					   .value = value };

	return ask(context, &request);
}

int privsep_forget(struct privsep *parent, uint32_t cpu, uint32_t address)
{
	struct privsep_request request = { .op = PRIVSEP_FORGET, .cpu = cpu, .address = address };

	return ask(parent, &request);
}

int privsep_keep_journal(struct privsep *parent)
{
	struct privsep_request request = { .op = PRIVSEP_KEEP_JOURNAL };

	return ask(parent, &request);
}

/* The parent's first packet says it has dropped what it drops and its filter is on: only then
 * does the server serve (nothing sees a parent with more than it keeps). */
static int await_parent(int fd)
{
	struct privsep_reply ready;
	ssize_t got;

	do
		got = recv(fd, &ready, sizeof(ready), 0);
	while (got < 0 && errno == EINTR);
	if (got == (ssize_t)sizeof(ready) && ready.op == 0 && ready.status == 0)
		return 0;
	log_error("privsep: the privileged parent did not start");
	return -ECHILD;
}

/* In the child, before anything is dropped: read-only devices, writes to the parent, no
 * journal, and an end with the parent. */
static int become_server(struct msrd *server, int fd, pid_t parent)
{
	int status;

	channel = (struct privsep){ .fd = fd, .parent = parent };
	if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0 || getppid() != parent) {
		log_error("privsep: the privileged parent is gone");
		return -ESRCH;
	}
	status = backend_delegate_writes(server->backend, privsep_write, &channel);
	if (status < 0) {
		log_warn_errno(status, "privsep: reopening the devices read-only");
		return status;
	}
	journal_detach(server);
	server->parent = &channel;
	return await_parent(fd);
}

int privsep_start(struct msrd *server, const struct privilege_user *user, int *exit_code)
{
	int pair[2];
	pid_t parent = getpid();
	pid_t child;

	if (!backend_has_devices(server->backend))
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
		log_warn_errno(-errno, "privsep: socketpair");
		return -errno;
	}
	child = fork();
	if (child < 0) {
		int status = -errno;
		log_warn_errno(status, "privsep: fork");
		close(pair[0]);
		close(pair[1]);
		return status;
	}
	if (child == 0) {
		close(pair[0]);
		return become_server(server, pair[1], parent);
	}
	close(pair[1]);
	/* The descriptor number is the server's too (tests speak to the parent through it). */
	log_info("privsep: server pid %d, channel descriptor %d; the privileged parent pid %d "
		 "keeps the writable devices", (int)child, pair[1], (int)parent);
	*exit_code = privsep_parent_run(server, user, pair[0], child);
	return 1;
}
