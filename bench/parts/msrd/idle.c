/*
 * bench/parts/msrd/idle.c — idle connections: what msrd's memory grows by per idle client, and
 * what msrd's CPU per read is for a few busy clients beside thousands of idle ones (it must not
 * grow with them: nothing in msrd may cost per connection on a request or a loop turn).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "proto/wire.h"
#include "harness/msrd_harness.h"
#include "harness/process_figures.h"
#include "harness/raw_client.h"
#include "bench/parts/msrd/msrd_bench.h"

/* `count` connections to msrd, each with its HELLO answered, so msrd has set every one of them
 * up (accepted, identified, its receive armed) before the caller measures anything. */
static int *open_idle_clients(unsigned count)
{
	int *fds = calloc(count, sizeof(*fds));
	uint8_t frame[128], reply[256];
	struct wire_hello_request hello = { .min_version = 1, .max_version = 1 };
	struct wire_writer writer;
	struct wire_header header;
	size_t length;

	if (fds == NULL)
		die("out of memory");
	wire_writer_init(&writer, frame + WIRE_HEADER_SIZE, sizeof(frame) - WIRE_HEADER_SIZE);
	wire_put_hello_request(&writer, &hello);
	length = (size_t)wire_frame_finish(frame, sizeof(frame), WIRE_OP_HELLO, 0, 0, 1,
					   writer.used);
	for (unsigned i = 0; i < count; i++) {
		fds[i] = raw_connect(server.socket_path);
		if (fds[i] < 0 || raw_send(fds[i], frame, length) < 0 ||
		    raw_read_frame(fds[i], reply, sizeof(reply), &header, 60000, NULL) < 0)
			die("idle client");
	}
	return fds;
}

static void close_idle_clients(int *fds, unsigned count)
{
	for (unsigned i = 0; i < count; i++)
		close(fds[i]);
	free(fds);
}

double kib_per_idle_client(unsigned count)
{
	long before = harness_process_status_kib(server.pid, "VmRSS:"), after;
	int *fds = open_idle_clients(count);

	usleep(100000);
	after = harness_process_status_kib(server.pid, "VmRSS:");
	close_idle_clients(fds, count);
	return (double)(after - before) / count;
}

struct throughput throughput_beside_idle(unsigned busy, unsigned idle, double seconds)
{
	int *fds = open_idle_clients(idle);
	struct throughput out;

	/* Let msrd's accept backlog and the connections' first turns settle. */
	usleep(200000);
	out = throughput(server.pid, NULL, busy, seconds);
	close_idle_clients(fds, idle);
	/* Until msrd has seen every idle connection close, they would still be there. */
	usleep(200000);
	return out;
}
