/*
 * server/privsep_parent.c — msrd's privileged parent (server/privsep.h): the only process with
 * CAP_SYS_RAWIO and read-write device descriptors once msrd serves.
 *
 * It trusts nothing the server sends. Each packet must be exactly one request; a write is
 * checked against the union of every rule's write masks (policy_resolve_everyone), read from
 * the policy file by the parent itself: at start, and again at SIGHUP before the server is told
 * to reload, so a narrower policy binds the parent first. The union, not a client's grant: the
 * parent cannot know which client a write is for (the server could lie about it), so it bounds
 * what any client could be allowed; the per-client check stays in the server. Before the first
 * write of a register its original value is remembered and journalled (msrstate.c,
 * journal.c), from the parent's own read, not from a value the server reports.
 *
 * The server's end closes when it exits, cleanly or not: then every register goes back
 * (msrstate_restore) and the parent exits with the server's status (1 when it died). It does not
 * start a new server: a supervisor (systemd's Restart=) restarts the pair, and a restart loop
 * would be more trusted code. SIGTERM and SIGINT are passed on to the server, which stops
 * cleanly; its channel's end then closes.
 */
#include "server/server.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct parent {
	struct msrd *server;
	struct policy_grant *everyone;  /* every rule's grant together */
	int channel;
	int signal_fd;
	pid_t child;
	bool keep_journal;              /* the server's own slot restores failed */
};

/* The policy file as the parent reads it: 0, or -errno with the old union kept. */
static int load_union(struct parent *parent)
{
	struct policy *policy = NULL;
	struct policy_grant *everyone = NULL;
	int status = msrd_load_policy(parent->server->config, &policy);

	if (status == 0)
		status = policy_resolve_everyone(policy, &everyone);
	policy_free(policy);
	if (status < 0) {
		log_warn_errno(status, "privsep: the parent keeps its write masks");
		return status;
	}
	policy_grant_free(parent->everyone);
	parent->everyone = everyone;
	return 0;
}

/* The parent's own read of the register is what the mask is checked against and what is
 * restored: the server's word is taken for nothing. */
static int write_register(struct parent *parent, const struct privsep_request *request)
{
	struct msrd *server = parent->server;
	uint64_t current;
	int status = backend_read(server->backend, request->cpu, request->address, &current);

	if (status < 0)
		return status;
	status = policy_allows_write(parent->everyone, request->address, current, request->value);
	if (status < 0) {
		log_warnx("privsep: refused the server's write of cpu %u MSR 0x%x = 0x%llx (now "
			  "0x%llx): outside every rule's write mask (0x%llx)", request->cpu,
			  request->address, (unsigned long long)request->value,
			  (unsigned long long)current,
			  (unsigned long long)policy_write_mask(parent->everyone, request->address));
		return status;
	}
	status = msrstate_remember(&server->saved, request->cpu, request->address, current);
	if (status == 0)
		status = journal_note(server, request->cpu, request->address, current);
	if (status < 0)
		return status;
	msrstate_touch(&server->saved, request->cpu, request->address, current, request->value);
	return backend_write(server->backend, request->cpu, request->address, request->value);
}

static int answer(struct parent *parent, const struct privsep_request *request)
{
	if (request->zero != 0 || (request->op != PRIVSEP_WRITE && request->value != 0) ||
	    request->cpu >= backend_cpu_count(parent->server->backend))
		return -EBADMSG;
	switch (request->op) {
	case PRIVSEP_WRITE:
		return write_register(parent, request);
	case PRIVSEP_FORGET:
		return journal_forget(parent->server, request->cpu, request->address);
	case PRIVSEP_KEEP_JOURNAL:
		parent->keep_journal = true;
		return 0;
	default:
		return -EBADMSG;
	}
}

/* One packet: 1 served (or refused), 0 when the server's end is closed, -errno. MSG_TRUNC
 * makes recv say a longer packet's real length, so it is refused, not cut. */
static int serve_one(struct parent *parent)
{
	struct privsep_request request;
	struct privsep_reply reply = { 0 };
	ssize_t length = recv(parent->channel, &request, sizeof(request), MSG_TRUNC | MSG_DONTWAIT);

	if (length < 0)
		return errno == EAGAIN || errno == EINTR ? 1 : -errno;
	if (length == 0)
		return 0;
	if (length != (ssize_t)sizeof(request)) {
		log_warnx("privsep: refused a %zd-byte request (a request is %u bytes)", length,
			  PRIVSEP_REQUEST_SIZE);
		reply.status = -EBADMSG;
	} else {
		reply.op = request.op;
		reply.status = answer(parent, &request);
		if (reply.status == -EBADMSG)
			log_warnx("privsep: refused a malformed request (op %u)", request.op);
	}
	if (send(parent->channel, &reply, sizeof(reply), MSG_NOSIGNAL) != (ssize_t)sizeof(reply))
		return -EPIPE;
	return 1;
}

static void on_signal(struct parent *parent)
{
	struct signalfd_siginfo info;

	while (read(parent->signal_fd, &info, sizeof(info)) == (ssize_t)sizeof(info)) {
		if (info.ssi_signo == SIGHUP)
			(void)load_union(parent);
		kill(parent->child, (int)info.ssi_signo);
	}
}

/* Serve until the server's end closes. */
static void serve(struct parent *parent)
{
	struct pollfd polled[2] = { { .fd = parent->channel, .events = POLLIN },
				    { .fd = parent->signal_fd, .events = POLLIN } };

	for (;;) {
		if (poll(polled, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_warn_errno(-errno, "privsep: poll");
			return;
		}
		if (polled[1].revents & POLLIN)
			on_signal(parent);
		if ((polled[0].revents & (POLLIN | POLLHUP | POLLERR)) && serve_one(parent) <= 0)
			return;
	}
}

/* The server's status once it is gone: its exit code, 1 when a signal ended it. Its end
 * closes only as it exits (its exit code is set by then); one that closed it and lives on (only
 * a compromised server can) is killed. */
static int reap(pid_t child)
{
	int wstatus = 0;

	kill(child, SIGKILL);
	while (waitpid(child, &wstatus, 0) < 0) {
		if (errno != EINTR)
			return 1;
	}
	if (WIFSIGNALED(wstatus)) {
		log_warnx("privsep: the server ended by signal %d; its registers are written back",
			  WTERMSIG(wstatus));
		return 1;
	}
	return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 1;
}

static int start(struct parent *parent, const struct privilege_user *user)
{
	const struct msrd_config *config = parent->server->config;
	sigset_t mask;
	int status;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	parent->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (parent->signal_fd < 0)
		return -errno;
	status = load_union(parent);
	if (status == 0)
		status = privilege_drop(user, PRIVILEGE_PARENT, false);
	if (status == 0)
		status = privilege_seccomp_role(config->seccomp, PRIVILEGE_PARENT, parent->child);
	if (status == 0 && send(parent->channel, &(struct privsep_reply){ 0 },
				sizeof(struct privsep_reply), MSG_NOSIGNAL) < 0)
		status = -errno;
	return status;
}

int privsep_parent_run(struct msrd *server, const struct privilege_user *user, int channel,
		       pid_t child)
{
	struct parent parent = { .server = server, .channel = channel, .signal_fd = -1,
				 .child = child };
	int exit_code;
	size_t failed;

	/* What only the server uses: its socket (it removes the file), its readiness pipe. */
	close(server->listen_fd);
	server->listen_fd = -1;
	if (server->config->ready_fd >= 0)
		close(server->config->ready_fd);
	if (start(&parent, user) < 0) {
		log_error("privsep: the privileged parent could not start; stopping the server");
		kill(child, SIGTERM);
	} else {
		serve(&parent);
	}
	close(channel);
	exit_code = reap(child);
	failed = msrstate_restore(&server->saved, server->backend, NULL);
	log_notice("stopped: %zu MSRs restored%s", server->saved.count - failed,
		   failed > 0 ? ", some restores failed" : "");
	journal_close(server, failed == 0 && !parent.keep_journal);
	msrstate_free(&server->saved);
	backend_close(server->backend);
	server->backend = NULL;
	policy_grant_free(parent.everyone);
	if (parent.signal_fd >= 0)
		close(parent.signal_fd);
	privilege_log_refused();
	return failed == 0 ? exit_code : 1;
}
