/*
 * 1000 clients at once (200 under valgrind): all connect before any request, each sends a HELLO
 * and a READ in one write, every one gets both replies, then all disconnect together; msrd sees
 * every connection come and go and keeps serving. One more than --max-clients is turned away
 * with a LIMIT error frame. Repeated twice to catch state left behind by the first wave.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "proto/wire.h"
#include "tests/lib/msrd_group.h"
#include "harness/policy_text.h"
#include "harness/raw_client.h"

#define TIMEOUT_MS 120000u

static const char policy[] = POLICY_TSC_FOR_ANYONE;

static struct msrd_server server;
static unsigned clients;
static char max_clients[16];

/* A HELLO and a READ, from client "many-ID". */
static size_t hello_and_read(uint8_t *frames, uint32_t id)
{
	char name[32];

	snprintf(name, sizeof(name), "many-%u", id);
	return raw_hello_and_read(frames, name, id);
}

static void one_wave(unsigned wave)
{
	int *fds = calloc(clients, sizeof(int));
	uint8_t frames[256];
	size_t before = msrd_log_count(&server, "): disconnected");

	assert_non_null(fds);
	for (unsigned i = 0; i < clients; i++) {
		fds[i] = raw_connect(server.socket_path);
		assert_true(fds[i] >= 0);
	}
	for (unsigned i = 0; i < clients; i++) {
		size_t length = hello_and_read(frames, 2 * i + 1);
		assert_int_equal(raw_send(fds[i], frames, length), 0);
	}
	for (unsigned i = 0; i < clients; i++)
		assert_int_equal(raw_read_hello_and_read(fds[i], 2 * i + 1, TIMEOUT_MS), 1);
	for (unsigned i = 0; i < clients; i++)
		close(fds[i]);
	free(fds);
	/* msrd notices every one of them leaving. */
	for (unsigned waited = 0; waited < TIMEOUT_MS; waited += 50) {
		if (msrd_log_count(&server, "): disconnected") >= before + clients)
			break;
		usleep(50000);
	}
	assert_int_equal(msrd_log_count(&server, "): disconnected"), before + clients);
	(void)wave;
}

static void test_waves(void **state)
{
	(void)state;
	one_wave(1);
	one_wave(2);
}

static void test_limit(void **state)
{
	int *fds = calloc(clients + 1, sizeof(int));
	uint8_t reply[256];
	struct wire_header header;
	struct haecer_conn *conn;
	uint64_t value;

	(void)state;
	assert_non_null(fds);
	/* Each connection is known to msrd once its HELLO is answered. */
	for (unsigned i = 0; i < clients; i++) {
		uint8_t frames[256];
		size_t length = hello_and_read(frames, 1);
		fds[i] = raw_connect(server.socket_path);
		assert_true(fds[i] >= 0);
		assert_int_equal(raw_send(fds[i], frames, length), 0);
	}
	for (unsigned i = 0; i < clients; i++)
		assert_int_equal(raw_read_hello_and_read(fds[i], 1, TIMEOUT_MS), 1);
	fds[clients] = raw_connect(server.socket_path);
	assert_true(fds[clients] >= 0);
	assert_int_equal(raw_read_frame(fds[clients], reply, sizeof(reply), &header, TIMEOUT_MS,
					NULL),
			 0);
	assert_int_equal(header.op, WIRE_OP_ERROR);
	assert_int_equal(header.status, WIRE_STATUS_LIMIT);
	assert_int_equal(raw_wait_closed(fds[clients], TIMEOUT_MS), 0);
	for (unsigned i = 0; i <= clients; i++)
		close(fds[i]);
	free(fds);
	/* Room again once they are gone. */
	for (unsigned attempt = 0; attempt < 1000; attempt++) {
		if (haecer_connect(server.socket_path, &conn) == 0)
			break;
		conn = NULL;
		usleep(20000);
	}
	assert_non_null(conn);
	assert_int_equal(haecer_msr_read(conn, 0, 0x10, &value), 0);
	haecer_close(conn);
}

int main(void)
{
	/* All of them are one uid's: its share is the whole server here. */
	const char *arguments[] = { "--backend", "sim", "--max-clients", max_clients,
				    "--max-clients-per-uid", max_clients, NULL };
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_waves),
		cmocka_unit_test(test_limit),
	};

	clients = harness_small_scale() ? 200 : 1000;
	if (harness_raise_fd_limit(2 * clients + 64) < clients + 64) {
		fprintf(stderr, "cannot raise RLIMIT_NOFILE for %u clients\n", clients);
		return 77;
	}
	snprintf(max_clients, sizeof(max_clients), "%u", clients);
	return MSRD_RUN_GROUP(&server, policy, arguments, NULL, tests);
}
