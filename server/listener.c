/*
 * server/listener.c — msrd's listening UNIX socket, and what happens when a client arrives.
 */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define LISTEN_BACKLOG 4096

static int errno_or(int fallback)
{
	return errno != 0 ? -errno : fallback;
}

/* Whoever may write the socket's directory, or any directory on its path, or owns a symbolic
 * link on it, may put their own socket where clients look, and every client would then talk
 * to them. So the path is walked from "/" one component at a time by descriptor, never
 * following a link (O_NOFOLLOW; a link on the path is refused: give msrd the real path, /run
 * rather than /var/run): every directory on it belongs to root or msrd's user, and none is
 * writable by others unless sticky; the socket's own directory is not writable by others at
 * all (a sticky bit does not help there: a name nobody holds yet can be taken). Returns a
 * descriptor of the socket's directory, through which the socket's owner is then set. */
static int open_socket_directory(const char *directory)
{
	char copy[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *component, *rest = copy;
	uid_t self = geteuid();
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int status = 0;

	snprintf(copy, sizeof(copy), "%s", directory);
	if (fd < 0)
		return errno_or(-ENOENT);
	for (;;) {
		struct stat info;
		bool last;
		if (fstat(fd, &info) < 0) {
			status = errno_or(-EIO);
			break;
		}
		do
			component = strsep(&rest, "/");
		while (component != NULL && component[0] == '\0');
		last = component == NULL;
		if (info.st_uid != 0 && info.st_uid != self) {
			log_error("refusing the socket directory %s: a directory on its path "
				  "belongs to uid %u, not to root or uid %u", directory,
				  (unsigned)info.st_uid, (unsigned)self);
			status = -EACCES;
			break;
		}
		if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0 &&
		    (last || (info.st_mode & S_ISVTX) == 0)) {
			log_error("refusing the socket directory %s: %s is writable by %s (mode "
				  "%04o); run chmod go-w on it", directory,
				  last ? "it" : "a directory on its path",
				  (info.st_mode & S_IWOTH) ? "others" : "its group",
				  (unsigned)(info.st_mode & 07777));
			status = -EACCES;
			break;
		}
		if (last)
			return fd;
		{
			int next = openat(fd, component,
					  O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (next < 0 && (errno == ENOTDIR || errno == ELOOP) &&
			    fstatat(fd, component, &info, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(info.st_mode)) {
				log_error("refusing the socket directory %s: %s on its path is a "
					  "symbolic link; give the real path", directory,
					  component);
				status = -ELOOP;
				break;
			}
			if (next < 0) {
				status = errno_or(-ENOENT);
				break;
			}
			close(fd);
			fd = next;
		}
	}
	close(fd);
	return status;
}

/* Create the socket's directory when it is missing (e.g. /run/haecer after boot); only the last
 * component, as a daemon's runtime directory. Returns a descriptor of the checked directory. */
static int make_socket_directory(const char *path)
{
	char copy[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *directory;

	snprintf(copy, sizeof(copy), "%s", path);
	directory = dirname(copy);
	if (mkdir(directory, 0755) < 0 && errno != EEXIST)
		return errno_or(-EACCES);
	return open_socket_directory(directory);
}

/*
 * Whether something accepts connections on `address`. A server killed with SIGKILL keeps
 * its listening socket open a little after it has been reaped: the kernel tears its
 * io_uring (and the accept pending in it) down asynchronously. So a probe that connects is
 * repeated for up to STALE_SOCKET_GRACE_MS before the socket counts as another server's.
 */
#define STALE_SOCKET_GRACE_MS 2000
#define STALE_SOCKET_PROBE_MS 20

static bool socket_answers(const struct sockaddr_un *address)
{
	int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool answers;

	if (probe < 0)
		return false;
	answers = connect(probe, (const struct sockaddr *)address, sizeof(*address)) == 0;
	close(probe);
	return answers;
}

/* A socket file left by a server that died is removed; one a live server answers on is not. */
static int clear_stale_socket(const struct sockaddr_un *address)
{
	struct stat info;
	int waited_ms;

	if (lstat(address->sun_path, &info) < 0)
		return errno == ENOENT ? 0 : errno_or(-EACCES);
	if (!S_ISSOCK(info.st_mode))
		return -EEXIST;
	for (waited_ms = 0; socket_answers(address); waited_ms += STALE_SOCKET_PROBE_MS) {
		if (waited_ms >= STALE_SOCKET_GRACE_MS)
			return -EADDRINUSE;
		usleep(STALE_SOCKET_PROBE_MS * 1000);
	}
	if (unlink(address->sun_path) < 0 && errno != ENOENT)
		return errno_or(-EACCES);
	return 0;
}

/* The socket's owner and group, set through the checked directory's descriptor and never
 * through a link (fchown on the socket's own descriptor would change the socket object, not the
 * name clients connect to). Its mode was set at bind by the umask. */
static int apply_socket_owner(const struct msrd_config *config, int directory, const char *name)
{
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;

	if (config->socket_owner != NULL) {
		struct passwd *user = getpwnam(config->socket_owner);
		char *end;
		unsigned long number = strtoul(config->socket_owner, &end, 10);
		if (user != NULL)
			number = user->pw_uid;
		else if (*end != '\0' || end == config->socket_owner)
			return -ENOENT;
		uid = (uid_t)number;
	}
	if (config->socket_group != NULL) {
		struct group *group = getgrnam(config->socket_group);
		char *end;
		unsigned long number = strtoul(config->socket_group, &end, 10);
		if (group != NULL)
			number = group->gr_gid;
		else if (*end != '\0' || end == config->socket_group)
			return -ENOENT;
		gid = (gid_t)number;
	}
	if ((uid != (uid_t)-1 || gid != (gid_t)-1) &&
	    fchownat(directory, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return errno_or(-EPERM);
	return 0;
}

int listener_open(const struct msrd_config *config)
{
	struct sockaddr_un address = { .sun_family = AF_UNIX };
	char base[sizeof(address.sun_path)];
	const char *name;
	mode_t mask;
	int directory;
	int fd = -1;
	int status;

	if (strlen(config->socket_path) >= sizeof(address.sun_path)) {
		log_error("socket path too long: %s", config->socket_path);
		return -ENAMETOOLONG;
	}
	memcpy(address.sun_path, config->socket_path, strlen(config->socket_path) + 1);
	directory = make_socket_directory(config->socket_path);
	if (directory < 0) {
		log_warn_errno(directory, "the directory of %s", config->socket_path);
		return directory;
	}
	snprintf(base, sizeof(base), "%s", config->socket_path);
	name = basename(base);
	status = clear_stale_socket(&address);
	if (status < 0) {
		log_warn_errno(status, "%s", status == -EADDRINUSE
						     ? "another msrd is listening on the socket"
						     : "removing the old socket file");
		goto out;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		status = errno_or(-EMFILE);
		goto out;
	}
	/* The socket is born with its mode (no moment with a wider one, no chmod by path). */
	mask = umask(~(mode_t)config->socket_mode & 0777);
	status = bind(fd, (struct sockaddr *)&address, sizeof(address)) < 0 ? errno_or(-EADDRINUSE)
									       : 0;
	umask(mask);
	if (status < 0) {
		log_warn_errno(status, "bind %s", config->socket_path);
		goto out;
	}
	status = apply_socket_owner(config, directory, name);
	if (status < 0) {
		log_warn_errno(status, "setting owner and group of %s", config->socket_path);
		unlink(config->socket_path);
		goto out;
	}
	if (listen(fd, LISTEN_BACKLOG) < 0) {
		status = errno_or(-EINVAL);
		unlink(config->socket_path);
		goto out;
	}
	close(directory);
	return fd;
out:
	if (fd >= 0)
		close(fd);
	close(directory);
	return status;
}

/* The peer's supplementary groups; SO_PEERGROUPS says how much room it needs. */
static int peer_groups(int fd, gid_t **groups, uint32_t *count)
{
	socklen_t length = 16 * sizeof(gid_t);
	gid_t *list = NULL;

	for (int attempt = 0; attempt < 4; attempt++) {
		gid_t *bigger = realloc(list, length > 0 ? length : sizeof(gid_t));
		if (bigger == NULL)
			break;
		list = bigger;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, list, &length) == 0) {
			*groups = list;
			*count = (uint32_t)(length / sizeof(gid_t));
			return 0;
		}
		if (errno != ERANGE)
			break;
	}
	free(list);
	*groups = NULL;
	*count = 0;
	return -ENOMEM;
}

static void refuse_connection(int fd, uint16_t status, const char *detail)
{
	uint8_t frame[WIRE_HEADER_SIZE + WIRE_MAX_DETAIL];
	int length = wire_encode_error(frame, sizeof(frame), WIRE_OP_ERROR, status, 0, detail);

	if (length > 0)
		(void)!send(fd, frame, (size_t)length, MSG_DONTWAIT | MSG_NOSIGNAL);
	close(fd);
}

void listener_on_accept(struct msrd *server, const struct io_uring_cqe *cqe)
{
	int fd = cqe->res;
	int status;

	if (fd < 0) {
		if (fd == -ECANCELED)
			return;
		log_warn_errno(fd, "accept");
		/* Out of descriptors: wait a tick instead of spinning on the same error. */
		if (fd == -EMFILE || fd == -ENFILE || fd == -ENOMEM || fd == -ENOBUFS) {
			server->accept_rearm = true;
			loop_want_tick(server);
		}
		return;
	}
	if (server->stopping) {
		refuse_connection(fd, WIRE_STATUS_SHUTDOWN, "msrd is shutting down");
		return;
	}
	if (server->client_count >= server->config->max_clients) {
		log_warnx("refused a connection: %u clients connected (--max-clients)",
			  server->client_count);
		refuse_connection(fd, WIRE_STATUS_LIMIT, "too many clients connected");
		return;
	}
	status = client_accept(server, fd);
	if (status == -EUSERS) {
		refuse_connection(fd, WIRE_STATUS_LIMIT, "too many connections of this uid");
		return;
	}
	if (status < 0) {
		log_warn_errno(status, "setting up a new client");
		refuse_connection(fd, wire_status_from_errno(status), "cannot set up the connection");
	}
}

/* Kept here since it is where a client's identity is learned. */
int msrd_resolve_grant(struct msrd *server, struct client *client, struct policy_grant **out)
{
	struct policy_subject subject = {
		.uid = client->uid,
		.gid = client->gid,
		.groups = client->groups,
		.group_count = client->group_count,
	};

	return policy_resolve(server->policy, &subject, out);
}

int listener_identify(int fd, pid_t *pid, uid_t *uid, gid_t *gid, gid_t **groups,
		      uint32_t *group_count)
{
	struct ucred credentials;
	socklen_t length = sizeof(credentials);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) < 0)
		return errno_or(-EINVAL);
	*pid = credentials.pid;
	*uid = credentials.uid;
	*gid = credentials.gid;
	return peer_groups(fd, groups, group_count);
}
