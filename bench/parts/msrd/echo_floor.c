/*
 * bench/parts/msrd/echo_floor.c — the floor at many clients: a bare io_uring echo server with
 * the same receive pattern as msrd, for bench/msrd's 16- and 10 000-client points.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <liburing.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "haecer/haecer.h"
#include "haecer/msrd.h"
#include "proto/wire.h"
#include "shm/ring.h"
#include "bench/lib/bench_stats.h"
#include "harness/msrd_harness.h"
#include "harness/process_figures.h"
#include "harness/raw_client.h"
#include "harness/standin_tree.h"
#include "bench/parts/msrd/msrd_bench.h"

/* ---- the floor at many clients ----
 *
 * What any io_uring server pays per round trip at a number of connections: a process that
 * accepts them all, receives with one multishot recv per connection from shared provided
 * buffers (512 at first, doubled when a receive finds none, consumed incrementally where the
 * kernel can: as msrd does) and answers each
 * 24-byte request with one 24-byte send, nothing else. Its CPU per round trip beside msrd's at
 * the same count tells what of msrd's growth is the kernel's (sockets and the wake-ups of
 * thousands of threads) and what is msrd's own. */

#define ECHO_BUFFER_GROUP 1
#define ECHO_BUFFERS_MOST 16384u
#define ECHO_BUFFER_SIZE 2048u
#ifndef IOU_PBUF_RING_INC /* Linux 6.12; liburing 2.3's headers lack both */
#define IOU_PBUF_RING_INC 2
#endif
#ifndef IORING_CQE_F_BUF_MORE
#define IORING_CQE_F_BUF_MORE (1u << 4)
#endif

struct echo {
	struct io_uring ring;
	struct io_uring_buf_ring *buffers;
	uint8_t *memory;
	unsigned count;
	int *fds;
	uint8_t (*replies)[WIRE_HEADER_SIZE + 8];
	uint16_t taken[ECHO_BUFFERS_MOST]; /* bytes handed out of each buffer (incremental) */
};

static struct io_uring_sqe *echo_sqe(struct echo *echo)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&echo->ring);

	while (sqe == NULL) {
		io_uring_submit(&echo->ring);
		sqe = io_uring_get_sqe(&echo->ring);
	}
	return sqe;
}

static void echo_add_buffers(struct echo *echo, unsigned count)
{
	for (unsigned id = echo->count; id < count; id++)
		io_uring_buf_ring_add(echo->buffers, echo->memory + (size_t)id * ECHO_BUFFER_SIZE,
				      ECHO_BUFFER_SIZE, (unsigned short)id, ECHO_BUFFERS_MOST - 1,
				      (int)(id - echo->count));
	io_uring_buf_ring_advance(echo->buffers, (int)(count - echo->count));
	echo->count = count;
}

static void echo_arm(struct echo *echo, unsigned index)
{
	struct io_uring_sqe *sqe = echo_sqe(echo);

	io_uring_prep_recv_multishot(sqe, echo->fds[index], NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = ECHO_BUFFER_GROUP;
	io_uring_sqe_set_data64(sqe, (uint64_t)index << 1);
}

/* One receive completion: answer what came, re-arm an ended receive (ENOBUFS). */
static bool echo_received(struct echo *echo, const struct io_uring_cqe *cqe)
{
	unsigned index = (unsigned)(cqe->user_data >> 1);
	bool exhausted = cqe->res == -ENOBUFS;

	if (cqe->flags & IORING_CQE_F_BUFFER) {
		unsigned id = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		if (cqe->res > 0) {
			struct io_uring_sqe *sqe = echo_sqe(echo);
			memcpy(echo->replies[index],
			       echo->memory + (size_t)id * ECHO_BUFFER_SIZE + echo->taken[id],
			       sizeof(echo->replies[index]));
			io_uring_prep_send(sqe, echo->fds[index], echo->replies[index],
					   sizeof(echo->replies[index]), MSG_NOSIGNAL);
			io_uring_sqe_set_data64(sqe, cqe->user_data | 1);
		}
		if (cqe->flags & IORING_CQE_F_BUF_MORE) {
			echo->taken[id] = (uint16_t)(echo->taken[id] + cqe->res);
		} else if (cqe->res > 0) {
			echo->taken[id] = 0;
			io_uring_buf_ring_add(echo->buffers,
					      echo->memory + (size_t)id * ECHO_BUFFER_SIZE,
					      ECHO_BUFFER_SIZE, (unsigned short)id,
					      ECHO_BUFFERS_MOST - 1, 0);
			io_uring_buf_ring_advance(echo->buffers, 1);
		}
	}
	if ((cqe->flags & IORING_CQE_F_MORE) == 0 && cqe->res != 0)
		echo_arm(echo, index);
	return exhausted;
}

static __attribute__((noreturn)) void echo_serve(int listen_fd, unsigned clients)
{
	struct io_uring_params params = {
		.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER |
			 IORING_SETUP_DEFER_TASKRUN,
		.cq_entries = 65536,
	};
	static struct echo echo;
	struct io_uring_buf_reg registration = { .ring_entries = ECHO_BUFFERS_MOST,
						 .bgid = ECHO_BUFFER_GROUP,
						 .pad = IOU_PBUF_RING_INC /* flags */ };

	echo.fds = calloc(clients, sizeof(*echo.fds));
	echo.replies = calloc(clients, sizeof(*echo.replies));
	echo.buffers = mmap(NULL, ECHO_BUFFERS_MOST * sizeof(struct io_uring_buf),
			    PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	echo.memory = mmap(NULL, (size_t)ECHO_BUFFERS_MOST * ECHO_BUFFER_SIZE, PROT_READ | PROT_WRITE,
			   MAP_ANONYMOUS | MAP_PRIVATE | MAP_NORESERVE, -1, 0);
	registration.ring_addr = (uint64_t)(uintptr_t)echo.buffers;
	if (echo.fds == NULL || echo.replies == NULL || echo.buffers == MAP_FAILED ||
	    echo.memory == MAP_FAILED || io_uring_queue_init_params(4096, &echo.ring, &params) < 0)
		_exit(1);
	if (io_uring_register_buf_ring(&echo.ring, &registration, 0) < 0) {
		registration.pad = 0; /* before Linux 6.12: one buffer per receive */
		if (io_uring_register_buf_ring(&echo.ring, &registration, 0) < 0)
			_exit(1);
	}
	io_uring_buf_ring_init(echo.buffers);
	echo_add_buffers(&echo, 512);
	for (unsigned i = 0; i < clients; i++) {
		echo.fds[i] = accept(listen_fd, NULL, NULL);
		if (echo.fds[i] < 0)
			_exit(1);
		echo_arm(&echo, i);
	}
	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		bool exhausted = false;

		io_uring_submit_and_wait(&echo.ring, 1);
		io_uring_for_each_cqe(&echo.ring, head, cqe) {
			seen++;
			if ((cqe->user_data & 1) == 0 && echo_received(&echo, cqe))
				exhausted = true;
		}
		io_uring_cq_advance(&echo.ring, seen);
		if (exhausted && echo.count < ECHO_BUFFERS_MOST)
			echo_add_buffers(&echo, echo.count * 2);
	}
}

/* The floor's reads per second and CPU per round trip at `clients` connections. */
struct throughput echo_floor(unsigned clients, double seconds)
{
	struct sockaddr_un address = { .sun_family = AF_UNIX };
	struct throughput out;
	pid_t child;
	int fd;

	if (snprintf(address.sun_path, sizeof(address.sun_path), "%s/echo.sock", server.dir) >=
	    (int)sizeof(address.sun_path))
		die("the echo floor's socket path is too long");
	unlink(address.sun_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&address, sizeof(address)) < 0 ||
	    listen(fd, SOMAXCONN) < 0)
		die("the echo floor's socket");
	child = fork();
	if (child == 0)
		echo_serve(fd, clients);
	close(fd);
	out = throughput(child, address.sun_path, clients, seconds);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	unlink(address.sun_path);
	return out;
}
