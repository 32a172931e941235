/*
 * msrd's system call filter refuses what msrd never does, in a real process: a child of this test
 * installs the very filter msrd installs (privilege_seccomp from libmsrd, enforce mode), then
 * tries what an attacker who took over msrd would: execve a shell, send a signal (kill, or tgkill
 * at another process), become root
 * again, open a file for writing, create one, make memory executable (mmap and
 * mprotect), open an internet socket, change a file's mode. Each fails with EPERM instead of
 * running, each is reported on standard error ("msrd: seccomp: refused system call N") and
 * summed up in the log at the next privilege_log_refused, and the process carries on: what msrd
 * does need (reading a file, getpid, writing to a descriptor it holds) still works.
 * The whole test suite running msrd with this filter enforced is the proof that it allows what
 * msrd needs; this is the proof that it refuses the rest. Not under valgrind, whose own system
 * calls the filter refuses.
 * io_uring operations do not pass through seccomp; msrd's ring is restricted instead, and the
 * second test proves it refuses what msrd does not use.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "server/server.h"
#include "harness/msrd_harness.h"
#include "tests/lib/test_check.h"

static pid_t parent; /* the test process, which a hijacked msrd must not signal */

/* What a hijacked msrd would try; each must fail with EPERM. Returns the refusals seen. */
static int attempts(void)
{
	char *const argv[] = { "/bin/sh", "-c", "true", NULL };
	int refused = 0;
	void *page;

#define REFUSED(call)                                                                            \
	do {                                                                                     \
		errno = 0;                                                                       \
		CHECK((long)(call) == -1 && errno == EPERM);                                    \
		refused++;                                                                       \
	} while (0)

	REFUSED(execve("/bin/sh", argv, NULL));
	REFUSED(kill(getpid(), 0));
	REFUSED(syscall(SYS_tgkill, parent, parent, 0));
	REFUSED(setuid(0));
	REFUSED(open("/tmp/haecer-seccomp-test", O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	REFUSED(open("/etc/hostname", O_RDWR | O_CLOEXEC));
	REFUSED(socket(AF_INET, SOCK_STREAM, 0));
	REFUSED(chmod("/tmp/haecer-seccomp-test-none", 0777));
	errno = 0;
	CHECK(mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) ==
	      MAP_FAILED && errno == EPERM);
	refused++;
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(page != MAP_FAILED);
	REFUSED(mprotect(page, 4096, PROT_READ | PROT_EXEC));
	munmap(page, 4096);
#undef REFUSED
	return refused;
}

/* What msrd does need keeps working under the filter. */
static int still_allowed(void)
{
	char byte;
	int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0);
	CHECK(read(fd, &byte, 1) == 1);
	close(fd);
	CHECK(getpid() > 0);
	CHECK(syscall(SYS_tgkill, getpid(), gettid(), 0) == 0); /* at itself: what abort() does */
	CHECK(write(STDOUT_FILENO, "allowed\n", 8) == 8);
	return 0;
}

static int filtered_child(void)
{
	int refused;

	log_init("msrd", LOG_LEVEL_INFO, false);
	parent = getppid();
	CHECK_EQ(privilege_seccomp(MSRD_SECCOMP_ENFORCE), 0);
	refused = attempts();
	CHECK_EQ(refused, 10);
	privilege_log_refused();
	CHECK_EQ(still_allowed(), 0);
	return 0;
}

static void test_filter_refuses(void **state)
{
	char err_path[] = "/tmp/haecer-seccomp-err-XXXXXX";
	int err_fd = mkstemp(err_path);
	char text[8192];
	ssize_t length;
	int status;
	pid_t pid;

	(void)state;
	assert_true(err_fd >= 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		dup2(err_fd, STDERR_FILENO);
		/* _exit: nothing at exit may need a system call the filter refuses. */
		_exit(filtered_child());
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	length = pread(err_fd, text, sizeof(text) - 1, 0);
	close(err_fd);
	unlink(err_path);
	assert_true(length > 0);
	text[length] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fprintf(stderr, "child's standard error:\n%s\n", text);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* One line per refused call at once, then the log's summary. */
	assert_non_null(strstr(text, "msrd: seccomp: refused system call 59\n"));  /* execve */
	assert_non_null(strstr(text, "msrd: seccomp: refused system call 62\n"));  /* kill */
	assert_non_null(strstr(text, "msrd: seccomp: refused system call 41\n"));  /* socket */
	assert_non_null(strstr(text, "msrd: seccomp: refused system call 10\n"));  /* mprotect */
	assert_non_null(strstr(text, "msrd: seccomp: refused system call 234\n")); /* tgkill */
	assert_non_null(strstr(text, "seccomp: 10 system calls refused"));
}

/* One SQE on msrd's ring, waited for: the completion's result. */
static int ring_result(struct loop *loop, struct io_uring_sqe *sqe)
{
	struct io_uring_cqe *cqe;
	int result;

	(void)sqe;
	assert_int_equal(io_uring_submit_and_wait(&loop->ring, 1), 1);
	assert_int_equal(io_uring_peek_cqe(&loop->ring, &cqe), 0);
	result = cqe->res;
	io_uring_cqe_seen(&loop->ring, cqe);
	return result;
}

/* io_uring operations bypass seccomp, so msrd's ring (loop_init, as msrd makes it) refuses every
 * operation msrd does not use: opening or creating a file through it fails with EACCES, while a
 * read, which msrd uses, works. */
static void test_ring_refuses_other_operations(void **state)
{
	char path[] = "/tmp/haecer-ring-restricted-XXXXXX";
	struct io_uring_sqe *sqe;
	struct loop loop;
	char byte = 0;
	int fd;

	(void)state;
	assert_int_equal(loop_init(&loop, 8), 0);
	assert_non_null(mkdtemp(path));
	sqe = loop_sqe(&loop);
	io_uring_prep_openat(sqe, AT_FDCWD, "/etc/hostname", O_RDONLY | O_CLOEXEC, 0);
	assert_int_equal(ring_result(&loop, sqe), -EACCES);
	sqe = loop_sqe(&loop);
	io_uring_prep_mkdirat(sqe, AT_FDCWD, path, 0700);
	assert_int_equal(ring_result(&loop, sqe), -EACCES);
	sqe = loop_sqe(&loop);
	io_uring_prep_unlinkat(sqe, AT_FDCWD, path, AT_REMOVEDIR);
	assert_int_equal(ring_result(&loop, sqe), -EACCES);
	sqe = loop_sqe(&loop);
	io_uring_prep_socket(sqe, AF_INET, SOCK_STREAM, 0, 0);
	assert_int_equal(ring_result(&loop, sqe), -EACCES);
	/* A flag msrd never sets is refused too. */
	fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	sqe = loop_sqe(&loop);
	io_uring_prep_read(sqe, fd, &byte, 1, 0);
	sqe->flags |= IOSQE_ASYNC;
	assert_int_equal(ring_result(&loop, sqe), -EACCES);
	sqe = loop_sqe(&loop);
	io_uring_prep_read(sqe, fd, &byte, 1, 0);
	assert_int_equal(ring_result(&loop, sqe), 1);
	close(fd);
	assert_int_equal(rmdir(path), 0); /* still there: the unlinkat above did not run */
	loop_exit(&loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filter_refuses),
		cmocka_unit_test(test_ring_refuses_other_operations),
	};

#if !defined(__x86_64__)
	printf("the system call numbers checked are x86-64's\n");
	return 77;
#endif
	return cmocka_run_group_tests(tests, NULL, NULL);
}
