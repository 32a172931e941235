/*
 * server/privilege.c — least privilege for msrd started as root.
 *
 * On a device backend msrd runs as two processes (server/privsep.h): the privileged parent keeps
 * only CAP_SYS_RAWIO (the msr driver checks it on open and on some ioctls; msr-safe's batch
 * ioctl too), the server keeps none of it (its device descriptors were opened before the drop).
 * Without devices msrd is one process, which keeps CAP_SYS_RAWIO when it had it. Everything else
 * is dropped from the permitted, effective, inheritable and bounding sets, so a compromised
 * process cannot regain it, not even across execve. With --user both become that user (its
 * groups too), keeping what they keep across the switch (PR_SET_KEEPCAPS): descriptors already
 * open stay usable, nothing new can be opened with root's rights.
 *
 * Last, a seccomp filter (libseccomp) allows only the system calls msrd makes while it serves
 * (allowed_syscalls): opening files read-only (policy reloads, ring descriptors for consumers),
 * memfds for rings, io_uring, the socket calls it makes outside io_uring, memory without
 * PROT_EXEC. The server beside a parent loses the calls only the journal and device writes
 * made; the parent has its own, shorter list (parent_syscalls). Any other call fails with EPERM
 * instead of running (SIGSYS, whose handler sets the result), and is logged: at once on
 * standard error, and through the log at the loop's next turn. The list was found by running
 * the whole test suite (gcc and ASan+UBSan builds) with --seccomp log, which lets every call
 * through and has the kernel log the ones not listed. io_uring operations do not pass through
 * seccomp; the ring itself is restricted to the operations msrd submits (loop.c).
 */
#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <seccomp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <termios.h>
#include <ucontext.h>
#include <unistd.h>

void privilege_raise_fd_limit(void)
{
	struct rlimit limit;

	if (getrlimit(RLIMIT_NOFILE, &limit) < 0 || limit.rlim_cur >= limit.rlim_max)
		return;
	limit.rlim_cur = limit.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &limit) < 0)
		log_warnx("cannot raise the descriptor limit to %llu",
			  (unsigned long long)limit.rlim_max);
}

/* ---- --user ---- */

int privilege_resolve_user(const char *name, struct privilege_user *out)
{
	struct passwd *entry;
	int count = PRIVILEGE_MAX_GROUPS;

	memset(out, 0, sizeof(*out));
	errno = 0;
	entry = getpwnam(name);
	if (entry == NULL) {
		char *end;
		unsigned long uid = strtoul(name, &end, 10);
		if (*end != '\0' || end == name || uid >= (unsigned long)(uid_t)-1)
			return errno != 0 ? -errno : -ENOENT;
		/* A bare number: that uid, its primary group the same number, no others. */
		out->uid = (uid_t)uid;
		out->gid = (gid_t)uid;
		out->groups[0] = out->gid;
		out->group_count = 1;
		snprintf(out->name, sizeof(out->name), "%s", name);
		return 0;
	}
	out->uid = entry->pw_uid;
	out->gid = entry->pw_gid;
	snprintf(out->name, sizeof(out->name), "%s", entry->pw_name);
	if (getgrouplist(entry->pw_name, entry->pw_gid, out->groups, &count) < 0)
		return -E2BIG;
	out->group_count = (size_t)count;
	return 0;
}

static bool has_any_capability(void)
{
	cap_t current = cap_get_proc();
	cap_t none = cap_init();
	bool any = true;

	if (current != NULL && none != NULL)
		any = cap_compare(current, none) != 0;
	cap_free(current);
	cap_free(none);
	return any;
}

static bool rawio_permitted(void)
{
	cap_t current = cap_get_proc();
	cap_flag_value_t value = CAP_CLEAR;

	if (current != NULL)
		cap_get_flag(current, CAP_SYS_RAWIO, CAP_PERMITTED, &value);
	cap_free(current);
	return value == CAP_SET;
}

static int errno_or(int fallback)
{
	return errno != 0 ? -errno : fallback;
}

/* setuid() keeps the permitted set only with PR_SET_KEEPCAPS (the effective set is cleared
 * either way and set again by the caller). */
static int become(const struct privilege_user *user)
{
	int status = 0;

	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		return errno_or(-EPERM);
	if (setgroups(user->group_count, user->groups) < 0 ||
	    setresgid(user->gid, user->gid, user->gid) < 0 ||
	    setresuid(user->uid, user->uid, user->uid) < 0) {
		status = errno_or(-EPERM);
		log_warn_errno(status, "becoming user %s (uid %u gid %u)", user->name,
			       (unsigned)user->uid, (unsigned)user->gid);
	}
	prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
	if (status == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		status = errno_or(-EPERM);
	return status;
}

static bool kept(cap_value_t cap, const cap_value_t *keep, int keep_count)
{
	for (int i = 0; i < keep_count; i++)
		if (keep[i] == cap)
			return true;
	return false;
}

static int drop_bounding_set(const cap_value_t *keep, int keep_count)
{
	/* Dropping from the bounding set needs CAP_SETPCAP, which goes last. */
	for (cap_value_t cap = 0; cap <= CAP_LAST_CAP; cap++) {
		if (kept(cap, keep, keep_count) || !CAP_IS_SUPPORTED(cap))
			continue;
		if (cap_drop_bound(cap) < 0 && errno != EINVAL) {
			int status = errno_or(-EPERM);
			log_warn_errno(status, "dropping capability %d from the bounding set", cap);
			return status;
		}
	}
	return 0;
}

/* What a role keeps (when CAP_SYS_RAWIO is there to keep), into `keep`; its count. */
static int kept_for(enum privilege_role role, bool keep_perfmon, cap_value_t keep[3])
{
	int count = 0;

	if (role != PRIVILEGE_SERVER)
		keep[count++] = CAP_SYS_RAWIO;
	/* The perf broker opens events on clients' threads: CAP_PERFMON for any
	 * perf_event_paranoid, CAP_SYS_PTRACE for the ptrace access check on another uid's task. */
	if (keep_perfmon && role != PRIVILEGE_PARENT) {
		keep[count++] = CAP_PERFMON;
		keep[count++] = CAP_SYS_PTRACE;
	}
	return count;
}

int privilege_drop(const struct privilege_user *user, enum privilege_role role, bool keep_perfmon)
{
	cap_value_t keep[3];
	int keep_count;
	cap_t wanted = NULL;
	int status = 0;

	if (!has_any_capability()) {
		if (user != NULL && user->uid != geteuid()) {
			log_error("--user %s needs msrd started as root", user->name);
			return -EPERM;
		}
		return 0;
	}
	/* Without CAP_SYS_RAWIO nothing is kept: every set is cleared (a harmless start without
	 * it, e.g. the simulated CPU under a partial capability set). */
	keep_count = rawio_permitted() ? kept_for(role, keep_perfmon, keep) : 0;
	status = drop_bounding_set(keep, keep_count);
	if (status == 0 && user != NULL)
		status = become(user);
	if (status < 0)
		goto out;
	wanted = cap_init();
	if (wanted == NULL) {
		status = -ENOMEM;
		goto out;
	}
	if ((keep_count > 0 && (cap_set_flag(wanted, CAP_PERMITTED, keep_count, keep, CAP_SET) < 0 ||
				cap_set_flag(wanted, CAP_EFFECTIVE, keep_count, keep, CAP_SET) < 0)) ||
	    cap_set_proc(wanted) < 0) {
		status = errno_or(-EPERM);
		log_warn_errno(status, "keeping only %d capabilities", keep_count);
		goto out;
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (user != NULL)
		log_notice("running as user %s (uid %u gid %u)", user->name, (unsigned)user->uid,
			   (unsigned)user->gid);
	log_info("capabilities dropped%s: %s", role == PRIVILEGE_PARENT ? " (privileged parent)"
						: role == PRIVILEGE_SERVER ? " (server)" : "",
		 keep_count == 3   ? "cap_sys_rawio, cap_perfmon and cap_sys_ptrace are kept (perf "
				     "broker)"
		 : keep_count == 2 ? "cap_perfmon and cap_sys_ptrace are kept (perf broker)"
		 : keep_count > 0  ? "only cap_sys_rawio is kept"
				   : "none kept");
out:
	if (wanted != NULL)
		cap_free(wanted);
	return status;
}

/* ---- the system call filter ---- */

/* Refused calls, counted by the SIGSYS handler, logged by the loop (privilege_log_refused). */
static volatile sig_atomic_t refused_count;
static volatile sig_atomic_t refused_last;
static sig_atomic_t refused_logged;

/* Async-signal-safe: a fixed text and a number, one write(). */
static void say_refused(int number)
{
	char line[64] = "msrd: seccomp: refused system call ";
	size_t length = strlen(line);
	char digits[12];
	size_t count = 0;

	do {
		digits[count++] = (char)('0' + number % 10);
		number /= 10;
	} while (number > 0 && count < sizeof(digits));
	while (count > 0 && length + 2 < sizeof(line))
		line[length++] = digits[--count];
	line[length++] = '\n';
	(void)!write(STDERR_FILENO, line, length);
}

static void on_sigsys(int signal_number, siginfo_t *info, void *context)
{
	ucontext_t *machine = context;

	(void)signal_number;
	refused_last = info->si_syscall;
	refused_count++;
	say_refused(info->si_syscall);
#if defined(__x86_64__)
	machine->uc_mcontext.gregs[REG_RAX] = -EPERM;
#elif defined(__aarch64__)
	machine->uc_mcontext.regs[0] = (unsigned long long)-EPERM;
#else
#error "set the refused system call's result for this architecture"
#endif
}

void privilege_log_refused(void)
{
	sig_atomic_t count = refused_count;

	if (count == refused_logged)
		return;
	log_warnx("seccomp: %d system calls refused (the last: number %d); a bug in msrd, or an "
		  "attack: please report it (SECURITY.md)",
		  (int)(count - refused_logged), (int)refused_last);
	refused_logged = count;
}

struct allowed {
	int number;
	unsigned arg_count;
	struct scmp_arg_cmp args[1];
};

/* gcc says __SANITIZE_ADDRESS__, clang __has_feature(address_sanitizer). */
#if defined(__SANITIZE_ADDRESS__)
#define MSRD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MSRD_SANITIZED 1
#endif
#endif
#ifndef MSRD_SANITIZED
#define MSRD_SANITIZED 0
#endif

/* libseccomp's SCMP_Ax macros leave fields out, which -Wmissing-field-initializers refuses. */
#define ARG_EQ(index, value) \
	{ .arg = (index), .op = SCMP_CMP_EQ, .datum_a = (value), .datum_b = 0 }
#define ARG_BITS_CLEAR(index, bits) \
	{ .arg = (index), .op = SCMP_CMP_MASKED_EQ, .datum_a = (bits), .datum_b = 0 }
#define ALLOW(name) { SCMP_SYS(name), 0, { ARG_EQ(0, 0) } }
#define ALLOW_IF(name, cmp) { SCMP_SYS(name), 1, { cmp } }

/* The sanitizer runtime: its leak check stops the world from a cloned task that ptraces the
 * others, then reads /proc/self with raw system calls (ASan+UBSan test builds only). */
#if MSRD_SANITIZED
#define SANITIZER_SYSCALLS \
	ALLOW(clone), ALLOW(ptrace), ALLOW(wait4), ALLOW(prctl), ALLOW(getppid), ALLOW(getdents), \
	ALLOW(sched_getaffinity), ALLOW(arch_prctl), \
	ALLOW_IF(open, ARG_BITS_CLEAR(1, O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)),
#else
#define SANITIZER_SYSCALLS
#endif

/* What msrd calls while it serves, outside io_uring. Writes to files go only through
 * descriptors opened before the filter (the journal, the log); new files are opened read-only. */
static const struct allowed allowed_syscalls[] = {
	/* descriptors */
	ALLOW(read), ALLOW(write), ALLOW(readv), ALLOW(writev), ALLOW(pread64), ALLOW(pwrite64),
	ALLOW(close), ALLOW(fstat), ALLOW(newfstatat), ALLOW(statx), ALLOW(lseek), ALLOW(fcntl),
	ALLOW(dup), ALLOW(fsync), ALLOW(fdatasync), ALLOW(flock), ALLOW(ftruncate),
	ALLOW_IF(fallocate, ARG_EQ(1, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)), /* rings */
	ALLOW(fchmod), ALLOW(memfd_create), ALLOW(unlink), ALLOW(unlinkat), ALLOW(getdents64),
	ALLOW(readlink), ALLOW(readlinkat), ALLOW(poll), ALLOW(ppoll),
	ALLOW_IF(openat, ARG_BITS_CLEAR(2, O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)),
	ALLOW_IF(ioctl, ARG_EQ(1, TCGETS)), /* stdio asks whether the log is a tty */
	/* memory, never executable */
	ALLOW_IF(mmap, ARG_BITS_CLEAR(2, PROT_EXEC)),
	ALLOW_IF(mprotect, ARG_BITS_CLEAR(2, PROT_EXEC)),
	ALLOW(munmap), ALLOW(mremap), ALLOW(madvise), ALLOW(brk),
	/* the loop and its sockets */
	ALLOW(io_uring_enter), ALLOW(io_uring_register), ALLOW(getsockopt), ALLOW(shutdown),
	ALLOW(sendto), ALLOW(sendmsg), ALLOW(recvfrom), ALLOW(recvmsg),
	ALLOW_IF(socket, ARG_EQ(0, AF_UNIX)), ALLOW(connect),
	/* process */
	ALLOW(getpid), ALLOW(gettid), ALLOW(getuid), ALLOW(geteuid), ALLOW(getgid), ALLOW(getegid),
	ALLOW(clock_gettime), ALLOW(clock_nanosleep), ALLOW(nanosleep), ALLOW(futex),
	ALLOW(getrandom), ALLOW(sched_yield), ALLOW(rt_sigreturn), ALLOW(rt_sigprocmask),
	ALLOW(rt_sigaction), ALLOW(sigaltstack), ALLOW(restart_syscall), ALLOW(uname),
	ALLOW(prlimit64), ALLOW(exit), ALLOW(exit_group),
	/* the perf broker (perf_requests.c); harmless without CAP_PERFMON */
	ALLOW(perf_event_open),
	SANITIZER_SYSCALLS
};

/* What the server beside a privileged parent no longer calls: the journal's and the device
 * writes' (the parent makes them). */
static const int server_dropped[] = {
	SCMP_SYS(pwrite64), SCMP_SYS(fsync), SCMP_SYS(fdatasync), SCMP_SYS(flock),
};

/* What the privileged parent calls (privsep_parent.c): its channel and signals, its devices,
 * its journal, the policy file at SIGHUP, the log (stderr or syslog), and the server's end. */
static const struct allowed parent_syscalls[] = {
	ALLOW(read), ALLOW(write), ALLOW(close), ALLOW(fstat), ALLOW(newfstatat), ALLOW(statx),
	ALLOW(lseek), ALLOW(fcntl), ALLOW(pread64), ALLOW(pwrite64), ALLOW(fsync),
	ALLOW(fdatasync), ALLOW(ftruncate), ALLOW(unlink), ALLOW(readlink), ALLOW(readlinkat),
	ALLOW(poll), ALLOW(ppoll),
	ALLOW_IF(openat, ARG_BITS_CLEAR(2, O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)),
	ALLOW_IF(ioctl, ARG_EQ(1, TCGETS)),
	ALLOW_IF(mmap, ARG_BITS_CLEAR(2, PROT_EXEC)),
	ALLOW_IF(mprotect, ARG_BITS_CLEAR(2, PROT_EXEC)),
	ALLOW(munmap), ALLOW(mremap), ALLOW(madvise), ALLOW(brk),
	ALLOW(sendto), ALLOW(sendmsg), ALLOW(recvfrom), ALLOW(recvmsg),
	ALLOW_IF(socket, ARG_EQ(0, AF_UNIX)), ALLOW(connect),
	ALLOW(getpid), ALLOW(gettid), ALLOW(getuid), ALLOW(geteuid), ALLOW(getgid), ALLOW(getegid),
	ALLOW(clock_gettime), ALLOW(futex), ALLOW(getrandom), ALLOW(sched_yield),
	ALLOW(nanosleep), ALLOW(clock_nanosleep), ALLOW(rt_sigreturn), ALLOW(rt_sigprocmask),
	ALLOW(rt_sigaction), ALLOW(restart_syscall), ALLOW(exit), ALLOW(exit_group), ALLOW(wait4),
	SANITIZER_SYSCALLS
#if MSRD_SANITIZED
	/* The leak check's tracer lists /proc/self/task on its own signal stack. */
	ALLOW(getdents64), ALLOW(sigaltstack), ALLOW(prlimit64), ALLOW(uname), ALLOW(dup),
	ALLOW(readv), ALLOW(writev),
#endif
};

static bool dropped_for(enum privilege_role role, int number)
{
	for (size_t i = 0; role == PRIVILEGE_SERVER && i < sizeof(server_dropped) /
							   sizeof(server_dropped[0]); i++) {
		if (server_dropped[i] == number)
			return true;
	}
	return false;
}

static int allow_list(scmp_filter_ctx filter, enum privilege_role role, size_t *count)
{
	const struct allowed *list = role == PRIVILEGE_PARENT ? parent_syscalls : allowed_syscalls;
	size_t length = role == PRIVILEGE_PARENT ? sizeof(parent_syscalls) / sizeof(*list)
						 : sizeof(allowed_syscalls) / sizeof(*list);

	*count = 0;
	for (size_t i = 0; i < length; i++) {
		int status;
		if (dropped_for(role, list[i].number))
			continue;
		status = seccomp_rule_add_array(filter, SCMP_ACT_ALLOW, list[i].number,
						list[i].arg_count, list[i].args);
		if (status < 0) {
			log_warn_errno(status, "seccomp: allowing system call %d", list[i].number);
			return status;
		}
		(*count)++;
	}
	return 0;
}

/* Calls allowed with an argument only this process knows. */
static int allow_own(scmp_filter_ctx filter, enum privilege_role role, pid_t child)
{
	/* abort() on an impossible state signals msrd itself, and nothing else: msrd may still be
	 * uid 0, which could signal any root process. */
	int status = seccomp_rule_add_array(filter, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
					    &(struct scmp_arg_cmp)ARG_EQ(0, (scmp_datum_t)getpid()));

	if (status < 0 || role == PRIVILEGE_PARENT) {
		/* The parent passes SIGTERM and SIGHUP on to its server, and to nobody else. */
		if (status == 0)
			status = seccomp_rule_add_array(filter, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
							&(struct scmp_arg_cmp)ARG_EQ(
								0, (scmp_datum_t)child));
		return status;
	}
	/* msr-safe's batch ioctl, whose number only the backend knows. */
	return seccomp_rule_add_array(filter, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				      &(struct scmp_arg_cmp)ARG_EQ(1, backend_ioctl_request()));
}

int privilege_seccomp(enum msrd_seccomp mode)
{
	return privilege_seccomp_role(mode, PRIVILEGE_WHOLE, 0);
}

int privilege_seccomp_role(enum msrd_seccomp mode, enum privilege_role role, pid_t child)
{
	struct sigaction action = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	scmp_filter_ctx filter;
	size_t count = 0;
	int status = 0;

	if (mode == MSRD_SECCOMP_OFF) {
		log_notice("seccomp: no system call filter (--seccomp off)");
		return 0;
	}
	if (mode == MSRD_SECCOMP_ENFORCE && sigaction(SIGSYS, &action, NULL) < 0)
		return errno_or(-EINVAL);
	filter = seccomp_init(mode == MSRD_SECCOMP_LOG ? SCMP_ACT_LOG : SCMP_ACT_TRAP);
	if (filter == NULL)
		return -ENOMEM;
	status = allow_list(filter, role, &count);
	if (status == 0)
		status = allow_own(filter, role, child);
	if (status == 0)
		status = seccomp_load(filter);
	if (status < 0) {
		log_warn_errno(status, "seccomp: loading the filter");
		goto out;
	}
	log_info("seccomp%s: %zu system calls allowed, others %s",
		 role == PRIVILEGE_PARENT ? " (privileged parent)"
		 : role == PRIVILEGE_SERVER ? " (server)" : "", count,
		 mode == MSRD_SECCOMP_LOG ? "allowed and logged by the kernel (--seccomp log)"
					  : "refused (EPERM) and logged");
out:
	seccomp_release(filter);
	return status;
}
