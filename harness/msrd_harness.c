/*
 * harness/msrd_harness.c — the real msrd in a temporary directory, for tests and benchmarks.
 */
#include "harness/msrd_harness.h"
#include "harness/tool_argv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READY_TIMEOUT_MS 120000
#define STOP_TIMEOUT_MS 120000
#define MAX_ARGUMENTS 64

const char *harness_build_dir(void)
{
	const char *build = getenv("HAECER_BUILD");
	return build != NULL && build[0] != '\0' ? build : "build";
}

const char *harness_source_dir(void)
{
	const char *source = getenv("HAECER_SOURCE");
	return source != NULL && source[0] != '\0' ? source : ".";
}

bool harness_small_scale(void)
{
	const char *scale = getenv("HAECER_TEST_SCALE");
	return scale != NULL && strcmp(scale, "small") == 0;
}

void harness_spin_ns(uint64_t ns)
{
	uint64_t until = clock_monotonic_raw_ns() + ns;

	while (clock_monotonic_raw_ns() < until)
		;
}

pid_t harness_start_duty_cycle(uint64_t spin_ns, useconds_t sleep_us)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid > 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		harness_spin_ns(spin_ns);
		if (sleep_us)
			usleep(sleep_us);
	}
}

unsigned harness_free_loopback_port(void)
{
	struct sockaddr_in address = { .sin_family = AF_INET };
	socklen_t size = sizeof(address);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unsigned port = 0;

	if (fd < 0)
		return 0;
	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&address, sizeof(address)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&address, &size) == 0)
		port = ntohs(address.sin_port);
	close(fd);
	return port;
}

bool harness_valgrind(void)
{
	const char *valgrind = getenv("HAECER_VALGRIND");
	return valgrind != NULL && strcmp(valgrind, "1") == 0;
}

int harness_drop_capabilities(void)
{
	cap_t none = cap_init();
	int ret = 0;

	if (none == NULL)
		return -errno;
	if (cap_set_proc(none) != 0)
		ret = -errno;
	cap_free(none);
	return ret;
}

int harness_write_file(const char *path, const char *text, unsigned mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t length = strlen(text);
	int status = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, length) != (ssize_t)length)
		status = -EIO;
	if (fchmod(fd, mode) < 0 && status == 0)
		status = -errno;
	close(fd);
	return status;
}

void harness_remove_tree(const char *path)
{
	pid_t pid;

	if (path == NULL || path[0] == '\0')
		return;
	pid = fork();
	if (pid == 0) {
		execlp("rm", "rm", "-rf", "--", path, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

int msrd_prepare(struct msrd_server *server, const char *policy_yaml)
{
	char template[] = "/tmp/haecer-msrd-XXXXXX";
	int status;

	memset(server, 0, sizeof(*server));
	server->pid = -1;
	server->valgrind = harness_valgrind();
	if (mkdtemp(template) == NULL)
		return -errno;
	/* Other uids must reach the socket inside. */
	if (chmod(template, 0755) < 0)
		return -errno;
	snprintf(server->dir, sizeof(server->dir), "%s", template);
	snprintf(server->socket_path, sizeof(server->socket_path), "%s/msrd.sock", template);
	snprintf(server->policy_path, sizeof(server->policy_path), "%s/policy.yaml", template);
	snprintf(server->log_path, sizeof(server->log_path), "%s/msrd.log", template);
	snprintf(server->valgrind_log_path, sizeof(server->valgrind_log_path), "%s/valgrind.log",
		 template);
	status = harness_write_file(server->policy_path, policy_yaml, 0644);
	return status;
}

static bool arguments_name_backend(const char *const *arguments)
{
	for (size_t i = 0; arguments != NULL && arguments[i] != NULL; i++) {
		if (strcmp(arguments[i], "--backend") == 0 ||
		    strncmp(arguments[i], "--backend=", 10) == 0)
			return true;
	}
	return false;
}

static bool runs_simulated_cpu(const char *const *arguments)
{
	for (size_t i = 0; arguments != NULL && arguments[i] != NULL; i++) {
		if (strcmp(arguments[i], "--backend") == 0 && arguments[i + 1] != NULL &&
		    strcmp(arguments[i + 1], "sim") == 0)
			return true;
	}
	return false;
}

/* Build the command line: [valgrind ...] msrd <harness options> <test options>. */
static size_t build_command(const struct msrd_server *server, int ready_fd,
			    const char *const *arguments, char storage[][PATH_MAX + 32],
			    const char **argv)
{
	size_t count = 0;
	size_t stored = 0;
#define STORE(...) (snprintf(storage[stored], sizeof(storage[0]), __VA_ARGS__), storage[stored++])

	if (server->valgrind) {
		count = harness_valgrind_prefix(argv);
		argv[count++] = STORE("--log-file=%s", server->valgrind_log_path);
	}
	argv[count++] = STORE("%s/msrd", harness_build_dir());
	argv[count++] = "--foreground";
	argv[count++] = "--log-level";
	/* debug: tests count lines msrd logs only there ("precise edges on/off"). */
	argv[count++] = getenv("HAECER_MSRD_LOG_LEVEL") != NULL ? getenv("HAECER_MSRD_LOG_LEVEL")
							       : "debug";
	argv[count++] = "--socket";
	argv[count++] = server->socket_path;
	argv[count++] = "--policy";
	argv[count++] = server->policy_path;
	argv[count++] = "--models-dir";
	argv[count++] = STORE("%s/configs/models", harness_source_dir());
	argv[count++] = "--ready-fd";
	argv[count++] = STORE("%d", ready_fd);
	/* The journal of changed registers stays in msrd's own directory. */
	argv[count++] = "--state-dir";
	argv[count++] = server->dir;
	/* The system call filter is on, as in production, so the whole suite proves it allows
	 * what msrd needs; valgrind makes calls of its own the filter would refuse. */
	argv[count++] = "--seccomp";
	argv[count++] = getenv("HAECER_MSRD_SECCOMP") != NULL ? getenv("HAECER_MSRD_SECCOMP")
			: server->valgrind			? "off"
								: "enforce";
	/* The simulated CPU is always asked for by name (msrd never falls back to it unasked);
	 * a test that wants another backend says so. A rough simulated CPU rolls the same dice in
	 * every run (a test's own --sim-seed, later, wins): virtual-time tests are then
	 * deterministic. */
	bool named = arguments_name_backend(arguments);

	if (!named) {
		argv[count++] = "--backend";
		argv[count++] = "sim";
	}
	if (!named || runs_simulated_cpu(arguments)) {
		argv[count++] = "--sim-seed";
		argv[count++] = HARNESS_SIM_SEED;
	}
	/* Every refusal logged: tests count them one by one. test_log_flood sets its own. */
	argv[count++] = "--refusal-log-burst";
	argv[count++] = "0";
	for (size_t i = 0; arguments != NULL && arguments[i] != NULL; i++) {
		if (count + 1 >= MAX_ARGUMENTS)
			break;
		argv[count++] = arguments[i];
	}
	argv[count] = NULL;
#undef STORE
	return count;
}

static void exec_msrd(const struct msrd_server *server, int ready_fd,
		      const char *const *arguments)
{
	static char storage[8][PATH_MAX + 32];
	const char *argv[MAX_ARGUMENTS + 1];
	int log_fd = open(server->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);

	if (log_fd < 0)
		_exit(126);
	dup2(log_fd, STDOUT_FILENO);
	dup2(log_fd, STDERR_FILENO);
	close(log_fd);
	build_command(server, ready_fd, arguments, storage, argv);
	/* Only the signals msrd expects; a test's blocked set must not leak into it. */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execvp(argv[0], (char *const *)argv);
	fprintf(stderr, "harness: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

static bool wait_ready(int fd, unsigned timeout_ms)
{
	struct pollfd poller = { .fd = fd, .events = POLLIN };
	char byte;

	if (poll(&poller, 1, (int)timeout_ms) <= 0)
		return false;
	return read(fd, &byte, 1) == 1;
}

int msrd_launch(struct msrd_server *server, const char *const *arguments)
{
	int ready[2];
	pid_t pid;
	bool ready_ok;

	if (pipe2(ready, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		/* The write end must survive exec: a copy without close-on-exec. */
		int keep = dup(ready[1]);
		close(ready[0]);
		exec_msrd(server, keep, arguments);
	}
	close(ready[1]);
	server->pid = pid;
	ready_ok = wait_ready(ready[0], READY_TIMEOUT_MS);
	close(ready[0]);
	if (!ready_ok) {
		fprintf(stderr, "harness: msrd did not get ready\n");
		msrd_print_log(server);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		server->pid = -1;
		return -1;
	}
	return 0;
}

int msrd_start(struct msrd_server *server, const char *policy_yaml, const char *const *arguments)
{
	if (msrd_prepare(server, policy_yaml) < 0) {
		fprintf(stderr, "harness: cannot prepare a directory for msrd\n");
		harness_remove_tree(server->dir);
		return -1;
	}
	if (msrd_launch(server, arguments) < 0) {
		harness_remove_tree(server->dir);
		return -1;
	}
	return 0;
}

int msrd_signal(const struct msrd_server *server, int signal_number)
{
	return server->pid > 0 && kill(server->pid, signal_number) == 0 ? 0 : -1;
}

static char *read_whole_file(const char *path)
{
	FILE *file = fopen(path, "r");
	char *text = NULL;
	size_t size = 0;
	size_t used = 0;

	if (file == NULL)
		return NULL;
	for (;;) {
		if (used + 4096 + 1 > size) {
			size = size > 0 ? size * 2 : 16384;
			char *bigger = realloc(text, size);
			if (bigger == NULL) {
				free(text);
				fclose(file);
				return NULL;
			}
			text = bigger;
		}
		size_t got = fread(text + used, 1, 4096, file);
		used += got;
		if (got == 0)
			break;
	}
	text[used] = '\0';
	fclose(file);
	return text;
}

char *msrd_log(const struct msrd_server *server)
{
	return read_whole_file(server->log_path);
}

size_t msrd_log_count(const struct msrd_server *server, const char *needle)
{
	char *log = msrd_log(server);
	size_t needle_length = strlen(needle);
	size_t count = 0;
	const char *at = log;
	const char *end;

	if (log == NULL || needle_length == 0) {
		free(log);
		return 0;
	}
	/* memmem over a known length: ASan's strstr measures the whole rest of the haystack on
	 * every call, which made counting in a log of 65 000 lines take minutes. */
	end = log + strlen(log);
	while ((at = memmem(at, (size_t)(end - at), needle, needle_length)) != NULL) {
		count++;
		at++;
	}
	free(log);
	return count;
}

int msrd_privsep_server(const struct msrd_server *server, pid_t *pid, int *descriptor)
{
	char *log = msrd_log(server);
	const char *line = log != NULL ? strstr(log, "privsep: server pid ") : NULL;
	int got = line != NULL ? sscanf(line, "privsep: server pid %d, channel descriptor %d", pid,
					descriptor)
			       : 0;

	free(log);
	return got == 2 ? 0 : -1;
}

bool msrd_log_contains(const struct msrd_server *server, const char *needle)
{
	return msrd_log_count(server, needle) > 0;
}

bool msrd_wait_log(const struct msrd_server *server, const char *needle, unsigned timeout_ms)
{
	for (unsigned waited = 0; waited <= timeout_ms; waited += 20) {
		if (msrd_log_contains(server, needle))
			return true;
		usleep(20000);
	}
	return false;
}

#define RELOADED "SIGHUP: policy reloaded"

int msrd_reload(const struct msrd_server *server, unsigned timeout_ms)
{
	size_t before = msrd_log_count(server, RELOADED);

	if (msrd_signal(server, SIGHUP) != 0)
		return -1;
	for (unsigned waited = 0; waited < timeout_ms && msrd_log_count(server, RELOADED) == before;
	     waited += 10)
		usleep(10000);
	return msrd_log_count(server, RELOADED) > before ? 0 : -1;
}

int msrd_install_policy(const struct msrd_server *server, const char *policy_yaml,
			unsigned timeout_ms)
{
	char temporary[PATH_MAX + 8];

	/* A rename, so that msrd never reads a half-written file. */
	snprintf(temporary, sizeof(temporary), "%s.new", server->policy_path);
	if (harness_write_file(temporary, policy_yaml, 0644) != 0 ||
	    rename(temporary, server->policy_path) != 0)
		return -1;
	return msrd_reload(server, timeout_ms);
}

void msrd_print_log(const struct msrd_server *server)
{
	char *log = msrd_log(server);
	char *valgrind = server->valgrind ? read_whole_file(server->valgrind_log_path) : NULL;

	fprintf(stderr, "---- msrd log (%s) ----\n%s---- end of msrd log ----\n", server->log_path,
		log != NULL ? log : "(unreadable)\n");
	if (valgrind != NULL && valgrind[0] != '\0')
		fprintf(stderr, "---- valgrind ----\n%s---- end of valgrind ----\n", valgrind);
	free(log);
	free(valgrind);
}

static bool log_is_clean(const struct msrd_server *server)
{
	static const char *const reports[] = {
		"AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:",
		"seccomp: refused", /* a system call msrd made that its filter does not allow */
	};
	char *log = msrd_log(server);
	char *valgrind = server->valgrind ? read_whole_file(server->valgrind_log_path) : NULL;
	bool clean = log != NULL;

	for (size_t i = 0; clean && i < sizeof(reports) / sizeof(reports[0]); i++)
		clean = strstr(log, reports[i]) == NULL;
	if (valgrind != NULL && valgrind[0] != '\0')
		clean = false;
	free(log);
	free(valgrind);
	return clean;
}

static int wait_exit(pid_t pid, unsigned timeout_ms, int *status)
{
	for (unsigned waited = 0; waited <= timeout_ms; waited += 10) {
		pid_t done = waitpid(pid, status, WNOHANG);
		if (done == pid)
			return 0;
		if (done < 0)
			return -1;
		usleep(10000);
	}
	return -1;
}

int msrd_stop(struct msrd_server *server)
{
	int status = 0;
	bool ok;

	if (server->pid <= 0)
		return -1;
	kill(server->pid, SIGTERM);
	if (wait_exit(server->pid, STOP_TIMEOUT_MS, &status) < 0) {
		fprintf(stderr, "harness: msrd did not stop after SIGTERM\n");
		kill(server->pid, SIGKILL);
		waitpid(server->pid, &status, 0);
		server->pid = -1;
		msrd_print_log(server);
		return -1;
	}
	server->pid = -1;
	ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && log_is_clean(server);
	if (!ok) {
		if (WIFEXITED(status))
			fprintf(stderr, "harness: msrd exited with status %d\n", WEXITSTATUS(status));
		else if (WIFSIGNALED(status))
			fprintf(stderr, "harness: msrd was killed by signal %d\n", WTERMSIG(status));
		else
			fprintf(stderr, "harness: msrd's log reports errors\n");
		msrd_print_log(server);
		return -1;
	}
	if (getenv("HAECER_TEST_KEEP") == NULL)
		harness_remove_tree(server->dir);
	return 0;
}

void msrd_kill(struct msrd_server *server)
{
	if (server->pid > 0) {
		kill(server->pid, SIGKILL);
		waitpid(server->pid, NULL, 0);
		server->pid = -1;
	}
	harness_remove_tree(server->dir);
}

/* ---- other identities ---- */

int run_as(uid_t uid, gid_t gid, const gid_t *groups, size_t group_count,
	   int (*fn)(void *argument), void *argument)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (setgroups(group_count, groups) < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
			fprintf(stderr, "run_as: cannot become %u/%u: %s\n", (unsigned)uid,
				(unsigned)gid, strerror(errno));
			_exit(125);
		}
		_exit(fn(argument) & 0xff);
	}
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* ---- running programs ---- */

static char *drain(int fd)
{
	size_t size = 4096;
	size_t used = 0;
	char *text = malloc(size);

	while (text != NULL) {
		ssize_t got;
		if (used + 1 >= size) {
			char *bigger = realloc(text, size * 2);
			if (bigger == NULL)
				break;
			text = bigger;
			size *= 2;
		}
		got = read(fd, text + used, size - used - 1);
		if (got <= 0)
			break;
		used += (size_t)got;
	}
	if (text != NULL)
		text[used] = '\0';
	return text;
}

int harness_run(const char *const *argv, char **out, char **err)
{
	char out_path[] = "/tmp/haecer-run-out-XXXXXX";
	char err_path[] = "/tmp/haecer-run-err-XXXXXX";
	int out_fd = mkstemp(out_path);
	int err_fd = mkstemp(err_path);
	int status = -1;
	pid_t pid;

	if (out_fd < 0 || err_fd < 0)
		goto out;
	pid = fork();
	if (pid == 0) {
		dup2(out_fd, STDOUT_FILENO);
		dup2(err_fd, STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		goto out;
	status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	if (out != NULL) {
		lseek(out_fd, 0, SEEK_SET);
		*out = drain(out_fd);
	}
	if (err != NULL) {
		lseek(err_fd, 0, SEEK_SET);
		*err = drain(err_fd);
	}
out:
	if (out_fd >= 0) {
		close(out_fd);
		unlink(out_path);
	}
	if (err_fd >= 0) {
		close(err_fd);
		unlink(err_path);
	}
	return status;
}

/* ---- stand-in device trees ---- */

int harness_standin_msr_tree(const char *dir, unsigned cpus, uint64_t size)
{
	char path[PATH_MAX];

	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	for (unsigned cpu = 0; cpu < cpus; cpu++) {
		int fd;
		snprintf(path, sizeof(path), "%s/dev", dir);
		mkdir(path, 0755);
		snprintf(path, sizeof(path), "%s/dev/cpu", dir);
		mkdir(path, 0755);
		snprintf(path, sizeof(path), "%s/dev/cpu/%u", dir, cpu);
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -errno;
		snprintf(path, sizeof(path), "%s/dev/cpu/%u/msr", dir, cpu);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		if (ftruncate(fd, (off_t)size) < 0) {
			close(fd);
			return -errno;
		}
		close(fd);
	}
	return 0;
}

static int standin_io(const char *dir, unsigned cpu, uint32_t address, uint64_t *value,
		      bool write_it)
{
	char path[PATH_MAX];
	ssize_t done;
	int fd;

	snprintf(path, sizeof(path), "%s/dev/cpu/%u/msr", dir, cpu);
	fd = open(path, (write_it ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	done = write_it ? pwrite(fd, value, sizeof(*value), address)
			: pread(fd, value, sizeof(*value), address);
	close(fd);
	return done == (ssize_t)sizeof(*value) ? 0 : -EIO;
}

int harness_standin_read(const char *dir, unsigned cpu, uint32_t address, uint64_t *value)
{
	return standin_io(dir, cpu, address, value, false);
}

int harness_standin_write(const char *dir, unsigned cpu, uint32_t address, uint64_t value)
{
	return standin_io(dir, cpu, address, &value, true);
}

unsigned long harness_raise_fd_limit(unsigned long wanted)
{
	struct rlimit limit;

	if (getrlimit(RLIMIT_NOFILE, &limit) < 0)
		return 0;
	if (limit.rlim_cur < wanted) {
		limit.rlim_cur = wanted < limit.rlim_max ? wanted : limit.rlim_max;
		setrlimit(RLIMIT_NOFILE, &limit);
		getrlimit(RLIMIT_NOFILE, &limit);
	}
	return (unsigned long)limit.rlim_cur;
}

/* ---- simulated models ---- */

int harness_model_variant(const char *dir, const char *name, const char *from,
			  const char *const *replace, size_t pairs, const char *extra)
{
	char path[PATH_MAX + 64];
	char text[16384];
	size_t length;
	FILE *file;

	snprintf(path, sizeof(path), "%s/configs/models/%s.yaml", harness_source_dir(), from);
	file = fopen(path, "r");
	if (file == NULL) {
		fprintf(stderr, "harness: %s: %s\n", path, strerror(errno));
		return -1;
	}
	length = fread(text, 1, sizeof(text) - 1, file);
	fclose(file);
	text[length] = '\0';
	for (size_t i = 0; i < pairs; i++) {
		char *at = strstr(text, replace[2 * i]);
		size_t old_length = strlen(replace[2 * i]);
		size_t new_length = strlen(replace[2 * i + 1]);
		if (at == NULL || strlen(text) - old_length + new_length >= sizeof(text)) {
			fprintf(stderr, "harness: model %s has no '%s'\n", from, replace[2 * i]);
			return -1;
		}
		memmove(at + new_length, at + old_length, strlen(at + old_length) + 1);
		memcpy(at, replace[2 * i + 1], new_length);
	}
	snprintf(path, sizeof(path), "%s/%s.yaml", dir, name);
	if (strlen(text) + (extra != NULL ? strlen(extra) : 0) + 1 > sizeof(text)) {
		fprintf(stderr, "harness: model %s too long\n", name);
		return -1;
	}
	if (extra != NULL)
		strcat(text, extra);
	return harness_write_file(path, text, 0644) == 0 ? 0 : -1;
}
