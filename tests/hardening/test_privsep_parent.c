/*
 * msrd's privileged parent (server/privsep.h) against a compromised server: the test takes the
 * server's own end of the channel (pidfd_getfd, as root) and speaks the parent's message format
 * to it directly, as code running in a compromised server would. On the msr backend over a
 * stand-in device tree:
 *   - the server has no capability left and its filter on; the parent keeps CAP_SYS_RAWIO only;
 *   - a write inside the union of the policy's write masks lands in the device file, also one
 *     only another uid's rule allows (the parent bounds what any client may do; the server
 *     still refuses this client that write, which a client's own request shows);
 *   - a write that changes a bit outside every mask, or names a register no rule lets anyone
 *     write, is refused and the file keeps its value;
 *   - short, long and malformed packets (unknown op, reserved field set, CPU out of range) are
 *     answered -EBADMSG and change nothing;
 *   - at SIGHUP the parent reads the policy file itself before the server reloads: a register
 *     the new policy lets no one write is refused from then on;
 *   - when the server is killed, the parent writes every register back, exits 1, and says why;
 *   - when the parent is killed, the server stops too (PR_SET_PDEATHSIG) and removes its socket;
 *   - msr-safe splits the same way: writes (alone and in a batch, which then runs op by op) go
 *     through the parent and come back at SIGTERM.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "harness/msrd_harness.h"
#include "harness/process_figures.h"
#include "harness/standin_tree.h"
#include "server/privsep.h"

#define WAIT_MS 60000u
#define ALLOWED 0x800u   /* root may change bits 7:0 */
#define OTHERS 0x900u    /* only uid 4001 may write (bits 15:0) */
#define UNGRANTED 0xA00u /* has a write mask, but no rule grants it */
#define TSC 0x10u        /* read-only for everyone */
#define CAP_SYS_RAWIO_MASK (1ull << 17)

static const char policy[] =
	"version: 1\ndefault: deny\nmsrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: base}\n"
	"  - {name: ALLOWED, address: 0x800, read: true, write_mask: 0xFF, set: base}\n"
	"  - {name: OTHERS, address: 0x900, read: true, write_mask: 0xFFFF, set: other}\n"
	"  - {name: UNGRANTED, address: 0xA00, read: true, write_mask: 0xFF, set: none}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [base]}\n"
	"  - {match: {uid: 4001}, allow: [other]}\n";

/* The server's end of the channel, taken as a compromised server holds it; -1 when the kernel
 * does not let this process take it (then the test is skipped). */
static int take_channel(pid_t pid, int descriptor)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int fd = pidfd >= 0 ? (int)syscall(SYS_pidfd_getfd, pidfd, descriptor, 0) : -1;

	if (pidfd >= 0)
		close(pidfd);
	return fd;
}

/* Send `length` bytes, return the reply's status (the reply must be one whole reply). */
static int32_t exchange(int fd, const void *packet, size_t length)
{
	struct privsep_reply reply;

	assert_int_equal(send(fd, packet, length, 0), (ssize_t)length);
	assert_int_equal(recv(fd, &reply, sizeof(reply) + 1, MSG_TRUNC), (ssize_t)sizeof(reply));
	return reply.status;
}

static int32_t request_write(int fd, uint32_t cpu, uint32_t address, uint64_t value)
{
	struct privsep_request request = { .op = PRIVSEP_WRITE, .cpu = cpu, .address = address,
					   .value = value };

	return exchange(fd, &request, sizeof(request));
}

static uint64_t file_register(const char *tree, unsigned cpu, uint32_t address)
{
	uint64_t value = 0;

	assert_int_equal(harness_standin_read(tree, cpu, address, &value), 0);
	return value;
}

static void check_privileges(pid_t parent, pid_t child)
{
	bool filtered = !harness_valgrind();

	assert_int_equal(harness_process_status_number(child, "CapEff:", 16), 0);
	assert_int_equal(harness_process_status_number(child, "CapPrm:", 16), 0);
	assert_int_equal(harness_process_status_number(child, "CapBnd:", 16), 0);
	assert_int_equal(harness_process_status_number(child, "Seccomp:", 10), filtered ? 2 : 0);
	assert_int_equal(harness_process_status_number(parent, "CapEff:", 16), CAP_SYS_RAWIO_MASK);
	assert_int_equal(harness_process_status_number(parent, "CapBnd:", 16), CAP_SYS_RAWIO_MASK);
	assert_int_equal(harness_process_status_number(parent, "Seccomp:", 10), filtered ? 2 : 0);
}

static void check_writes(int fd, const char *tree)
{
	assert_int_equal(request_write(fd, 0, ALLOWED, 0x55AB), 0);
	assert_int_equal(file_register(tree, 0, ALLOWED), 0x55AB);
	/* Bit 8 is outside every mask of ALLOWED. */
	assert_int_equal(request_write(fd, 0, ALLOWED, 0x56AB), -EACCES);
	assert_int_equal(file_register(tree, 0, ALLOWED), 0x55AB);
	/* Only uid 4001's rule allows it, but the parent cannot tell clients apart. */
	assert_int_equal(request_write(fd, 1, OTHERS, 0x1234), 0);
	assert_int_equal(file_register(tree, 1, OTHERS), 0x1234);
	assert_int_equal(request_write(fd, 0, UNGRANTED, 0x1), -EPERM);
	assert_int_equal(request_write(fd, 0, TSC, 0x1), -EPERM);
	assert_int_equal(file_register(tree, 0, UNGRANTED), 0);
	assert_int_equal(file_register(tree, 0, TSC), 0);
}

static void check_malformed(int fd, const char *tree)
{
	struct privsep_request request = { .op = PRIVSEP_WRITE, .address = ALLOWED, .value = 0x11 };
	uint8_t long_packet[PRIVSEP_REQUEST_SIZE + 8];

	assert_int_equal(exchange(fd, &request, 10), -EBADMSG);
	memset(long_packet, 0, sizeof(long_packet));
	memcpy(long_packet, &request, sizeof(request));
	assert_int_equal(exchange(fd, long_packet, sizeof(long_packet)), -EBADMSG);
	request.op = 99;
	assert_int_equal(exchange(fd, &request, sizeof(request)), -EBADMSG);
	request.op = PRIVSEP_WRITE;
	request.zero = 1;
	assert_int_equal(exchange(fd, &request, sizeof(request)), -EBADMSG);
	request.zero = 0;
	request.cpu = 7;
	assert_int_equal(exchange(fd, &request, sizeof(request)), -EBADMSG);
	assert_int_equal(file_register(tree, 0, ALLOWED), 0x55AB);
}

/* The per-client check stays in the server: root's own request for OTHERS is refused there
 * (OTHERS holds `others`). */
static void check_client(const struct msrd_server *server, const char *tree, uint64_t others)
{
	struct haecer_conn *conn;

	assert_int_equal(haecer_connect(server->socket_path, &conn), 0);
	assert_int_equal(haecer_msr_write(conn, 0, ALLOWED, 0x55CC), 0);
	assert_int_equal(file_register(tree, 0, ALLOWED), 0x55CC);
	assert_true(haecer_msr_write(conn, 1, OTHERS, 0x4321) < 0);
	assert_int_equal(file_register(tree, 1, OTHERS), others);
	haecer_close(conn);
}

/* The same policy without uid 4001's rule. */
static const char narrower_policy[] =
	"version: 1\ndefault: deny\nmsrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: base}\n"
	"  - {name: ALLOWED, address: 0x800, read: true, write_mask: 0xFF, set: base}\n"
	"  - {name: OTHERS, address: 0x900, read: true, write_mask: 0xFFFF, set: other}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [base]}\n";

static void check_reload(const struct msrd_server *server, int fd, const char *tree)
{
	assert_int_equal(msrd_install_policy(server, narrower_policy, WAIT_MS), 0);
	assert_int_equal(request_write(fd, 1, OTHERS, 0x2222), -EPERM);
	assert_int_equal(file_register(tree, 1, OTHERS), 0x1234);
	assert_int_equal(request_write(fd, 0, ALLOWED, 0x55AB), 0);
}

static void test_compromised_server(void **state)
{
	const char *arguments[] = { "--backend", "msr", "--dev-root", NULL, NULL };
	char tree[PATH_MAX + 16];
	struct msrd_server server;
	pid_t child = -1;
	int descriptor = -1, fd, wstatus = 0;

	(void)state;
	assert_int_equal(msrd_prepare(&server, policy), 0);
	snprintf(tree, sizeof(tree), "%s/root", server.dir);
	arguments[3] = tree;
	assert_int_equal(harness_standin_msr_tree(tree, 2, 0x1000), 0);
	assert_int_equal(harness_standin_write(tree, 0, ALLOWED, 0x5500), 0);
	assert_int_equal(harness_standin_write(tree, 1, OTHERS, 0x11), 0);
	assert_int_equal(msrd_launch(&server, arguments), 0);
	assert_int_equal(msrd_privsep_server(&server, &child, &descriptor), 0);
	check_privileges(server.pid, child);
	fd = take_channel(child, descriptor);
	if (fd >= 0) {
		check_writes(fd, tree);
		check_malformed(fd, tree);
	} else {
		/* valgrind does not know pidfd_getfd: the rest still runs. */
		printf("cannot take the server's descriptor (%s): no requests of a compromised "
		       "server\n", strerror(errno));
	}
	check_client(&server, tree, fd >= 0 ? 0x1234 : 0x11);
	if (fd >= 0) {
		check_reload(&server, fd, tree);
		close(fd);
	}
	/* The server dies: the parent writes what was written back and exits 1. */
	assert_int_equal(kill(child, SIGKILL), 0);
	assert_int_equal(waitpid(server.pid, &wstatus, 0), server.pid);
	server.pid = -1;
	assert_true(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 1);
	assert_true(msrd_log_contains(&server, "the server ended by signal 9"));
	assert_true(msrd_log_contains(&server, fd >= 0 ? "stopped: 2 MSRs restored"
						       : "stopped: 1 MSRs restored"));
	assert_int_equal(file_register(tree, 0, ALLOWED), 0x5500);
	assert_int_equal(file_register(tree, 1, OTHERS), 0x11);
	msrd_kill(&server);
}

/* Ended: no such process, or a zombie its adopter has not reaped (not every init reaps). */
static bool ended(pid_t pid)
{
	char path[64], text[256];
	const char *after_name;
	FILE *stat;
	size_t got;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	stat = fopen(path, "r");
	if (stat == NULL)
		return true;
	got = fread(text, 1, sizeof(text) - 1, stat);
	fclose(stat);
	text[got] = '\0';
	after_name = strrchr(text, ')');
	return after_name != NULL && after_name[1] == ' ' && after_name[2] == 'Z';
}

static void test_parent_dies(void **state)
{
	const char *arguments[] = { "--backend", "msr", "--dev-root", NULL, NULL };
	char tree[PATH_MAX + 16];
	struct msrd_server server;
	pid_t child = -1;
	int descriptor = -1;
	bool gone = false;

	(void)state;
	assert_int_equal(msrd_prepare(&server, policy), 0);
	snprintf(tree, sizeof(tree), "%s/root", server.dir);
	arguments[3] = tree;
	assert_int_equal(harness_standin_msr_tree(tree, 1, 0x1000), 0);
	assert_int_equal(msrd_launch(&server, arguments), 0);
	assert_int_equal(msrd_privsep_server(&server, &child, &descriptor), 0);
	assert_int_equal(kill(server.pid, SIGKILL), 0);
	assert_int_equal(waitpid(server.pid, NULL, 0), server.pid);
	server.pid = -1;
	/* Its clean stop removes the socket, then it ends. */
	for (unsigned waited = 0; !gone && waited < WAIT_MS; waited += 10) {
		gone = access(server.socket_path, F_OK) < 0 && ended(child);
		if (!gone)
			usleep(10000);
	}
	assert_true(gone);
	msrd_kill(&server);
}

/* CPU 0's msr_safe stand-in at `address`. */
static uint64_t file_safe_register(const char *tree, uint32_t address)
{
	char path[PATH_MAX + 64];
	uint64_t value = 0;
	FILE *file;

	snprintf(path, sizeof(path), "%s/dev/cpu/0/msr_safe", tree);
	file = fopen(path, "rb");
	assert_non_null(file);
	assert_int_equal(fseek(file, (long)address, SEEK_SET), 0);
	assert_int_equal(fread(&value, sizeof(value), 1, file), 1);
	fclose(file);
	return value;
}

static void test_msr_safe(void **state)
{
	const char *arguments[] = { "--backend", "msr-safe", "--dev-root", NULL, NULL };
	struct haecer_msr_op ops[2] = {
		{ .kind = HAECER_MSR_READ, .address = ALLOWED },
		{ .kind = HAECER_MSR_WRITE, .address = ALLOWED, .value = 0x55AC },
	};
	static const uint64_t zero;
	/* Outside msrd's directory, which a clean stop removes: the restore is read after it. */
	char outside[] = "/tmp/haecer-privsep-XXXXXX";
	char tree[PATH_MAX + 16];
	struct msrd_server server;
	struct haecer_conn *conn;
	pid_t child = -1;
	int descriptor = -1;

	(void)state;
	assert_non_null(mkdtemp(outside));
	snprintf(tree, sizeof(tree), "%s/root", outside);
	tree_mkdir(outside, "root");
	arguments[3] = tree;
	assert_int_equal(msrd_prepare(&server, policy), 0);
	tree_write_at(tree, "dev/cpu/0/msr_safe", &zero, sizeof(zero), 0x1000 - sizeof(zero));
	tree_put_msr(tree, 0, "msr_safe", ALLOWED, 0x5500);
	tree_write_at(tree, "dev/cpu/msr_batch", &zero, sizeof(zero), 0);
	assert_int_equal(msrd_launch(&server, arguments), 0);
	assert_int_equal(msrd_privsep_server(&server, &child, &descriptor), 0);
	assert_int_equal(haecer_connect(server.socket_path, &conn), 0);
	assert_int_equal(haecer_msr_write(conn, 0, ALLOWED, 0x55AB), 0);
	assert_int_equal(haecer_msr_batch(conn, ops, 2), 0);
	assert_int_equal(ops[0].status, 0);
	assert_int_equal(ops[0].value, 0x55AB);
	assert_int_equal(ops[1].status, 0);
	assert_int_equal(file_safe_register(tree, ALLOWED), 0x55AC);
	haecer_close(conn);
	assert_int_equal(msrd_stop(&server), 0);
	assert_int_equal(file_safe_register(tree, ALLOWED), 0x5500);
	harness_remove_tree(outside);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compromised_server),
		cmocka_unit_test(test_parent_dies),
		cmocka_unit_test(test_msr_safe),
	};

	if (geteuid() != 0) {
		printf("needs root: the parent keeps CAP_SYS_RAWIO, and taking the server's "
		       "descriptor needs ptrace rights over it\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
