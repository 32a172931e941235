/*
 * The example monitor (examples/ring_monitor.c) builds against an installed haecer alone: the
 * library is installed into a temporary DESTDIR with scripts/install.sh (with <haecer/ring.h>,
 * <haecer/haecer.h> and haecer_ring(3)), and the example is
 * compiled with -std=c11 -Werror and nothing but `pkg-config --cflags --libs haecer` (no path
 * into the source tree). Run against the real msrd, it attaches to the ring of a producer
 * process that used setupFerretMonitor's seed capacity (3000, so 4096 records), and reports
 * exactly what the producer did: its 20 readings, its 4 application events each after the
 * reading it followed, nothing lost. It runs a compiler and an installed program: the valgrind
 * pass skips it.
 */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "haecer/haecer.h"
#include "tests/lib/install_stage.h"
#include "tests/lib/test_check.h"
#include "tests/libclient/libclient_test.h"

#define PREFIX "/usr/local"
#define MAJOR 11
#define READS 20
#define EVENT_EVERY 5

static char stage[64];

static void install_and_build_monitor(void)
{
	char *out = NULL;

	assert_int_equal(stage_install(stage, PREFIX), 0);
	assert_int_equal(stage_shell(stage, "cd \"$STAGE" PREFIX "\" && test -f include/haecer/ring.h "
				     "&& test -f include/haecer/haecer.h "
				     "&& test -f share/man/man3/haecer_ring.3", &out), 0);
	free(out);
	/* A sanitized build installs a sanitized library: the example is built the same way. */
	assert_int_equal(stage_shell(stage,
		"set -e; export PKG_CONFIG_PATH=\"$STAGE" PREFIX "/lib/pkgconfig\" "
		"PKG_CONFIG_SYSROOT_DIR=\"$STAGE\"; cc=cc; flags=; "
		"lib=\"$STAGE" PREFIX "/lib/libhaecer.so\"; "
		"if nm -D \"$lib\" | grep -q __asan_; then cc=clang; "
		"flags='-fsanitize=address,undefined'; fi; "
		"if nm -D \"$lib\" | grep -q __tsan_; then cc=clang; flags='-fsanitize=thread'; fi; "
		"cflags=$(pkg-config --cflags haecer); "
		"case \"$cflags\" in *\"$SOURCE\"*) exit 3;; esac; "
		"$cc -std=c11 -Wall -Wextra -Werror $flags -o \"$STAGE/ring_monitor\" "
		"\"$SOURCE/examples/ring_monitor.c\" $cflags $(pkg-config --libs haecer)", &out), 0);
	free(out);
}

/* The instrumented program: a counter with the seed's monitor, readings and events. */
static int produce(int ready, int go)
{
	struct haecer_counter_info info;
	PerfCounter energy;
	char byte;

	/* A child has no default context of its parent's: this connects anew ($HAECER_SOCKET). */
	energy = setupEnergyCounter(RAPL_PKG);
	CHECK(energy.valid);
	CHECK_EQ(setupFerretMonitor(&energy, MAJOR, 1), 0);
	CHECK_EQ(haecer_counter_info(haecer_perf_counter(&energy), &info), 0);
	CHECK_EQ(write(ready, &info.ring_capacity, sizeof(info.ring_capacity)),
		 sizeof(info.ring_capacity));
	CHECK_EQ(read(go, &byte, 1), 1);
	for (uint64_t i = 1; i <= READS; i++) {
		CHECK(readCounter(&energy) != ~0ull);
		if (i % EVENT_EVERY == 0)
			CHECK_EQ(haecer_ring_post(haecer_perf_counter(&energy), 1, i), 0);
	}
	haecer_shutdown();
	return 0;
}

static pid_t start_monitor(int *output)
{
	char program[128], library[128];
	int pipe_fds[2];
	pid_t pid;

	snprintf(program, sizeof(program), "%s/ring_monitor", stage);
	snprintf(library, sizeof(library), "%s" PREFIX "/lib", stage);
	assert_int_equal(pipe(pipe_fds), 0);
	pid = fork();
	if (pid == 0) {
		dup2(pipe_fds[1], STDOUT_FILENO);
		close(pipe_fds[0]);
		setenv("HAECER_SOCKET", server.socket_path, 1);
		setenv("LD_LIBRARY_PATH", library, 1);
		setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
		execl(program, program, "11", "1", "30", (char *)NULL);
		_exit(127);
	}
	close(pipe_fds[1]);
	*output = pipe_fds[0];
	return pid;
}

/* Append what the monitor printed within `timeout_ms` to text; false at EOF. */
static bool read_output(int fd, char *text, size_t size, size_t *used, int timeout_ms)
{
	struct pollfd ready = { .fd = fd, .events = POLLIN };
	ssize_t got;

	if (poll(&ready, 1, timeout_ms) <= 0)
		return true;
	got = read(fd, text + *used, size - 1 - *used);
	if (got <= 0)
		return false;
	*used += (size_t)got;
	text[*used] = '\0';
	return true;
}

static int exit_status(pid_t pid)
{
	int status = 0;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_monitor_built_against_installed(void **state)
{
	static char text[16384];
	int ready[2], go[2], output;
	pid_t producer, monitor;
	uint32_t capacity = 0;
	size_t used = 0;
	char expected[96];

	(void)state;
	install_and_build_monitor();
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(go), 0);
	fflush(NULL);
	producer = fork();
	if (producer == 0)
		_exit(produce(ready[1], go[0]));
	assert_int_equal(read(ready[0], &capacity, sizeof(capacity)), sizeof(capacity));
	assert_int_equal(capacity, 4096);
	monitor = start_monitor(&output);
	/* The monitor has attached once it describes the ring's counter. */
	for (int waited = 0; strstr(text, "\ncounter ") == NULL && waited < 300; waited++)
		if (!read_output(output, text, sizeof(text), &used, 100))
			break;
	if (strstr(text, "\ncounter ") == NULL) {
		kill(producer, SIGKILL);
		fail_msg("the monitor did not attach:\n%s", text);
	}
	assert_int_equal(write(go[1], "g", 1), 1);
	assert_int_equal(exit_status(producer), 0);
	while (read_output(output, text, sizeof(text), &used, 30000))
		;
	close(output);
	assert_int_equal(exit_status(monitor), 0);
	printf("%s", text);
	assert_non_null(strstr(text, "capacity 4096 records"));
	for (int i = EVENT_EVERY; i <= READS; i += EVENT_EVERY) {
		snprintf(expected, sizeof(expected), "event 1 value %d after %d readings\n", i, i);
		assert_non_null(strstr(text, expected));
	}
	assert_non_null(strstr(text, "summary: 20 readings, 4 events, 0 lost, 24 pushed\n"));
	for (int fd = 0; fd < 2; fd++) {
		close(ready[fd]);
		close(go[fd]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_monitor_built_against_installed),
	};
	int status;

	snprintf(stage, sizeof(stage), "%s", "/tmp/haecer-ring-install-XXXXXX");
	if (mkdtemp(stage) == NULL)
		return 1;
	status = LIBCLIENT_RUN_GROUP("sandybridge", NULL, NULL, tests);
	harness_remove_tree(stage);
	return status;
}
