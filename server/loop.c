/*
 * server/loop.c — msrd's one io_uring: set-up, provided receive buffers, the completion loop.
 *
 * Everything msrd waits for is an SQE on this ring: the multishot accept, each client's
 * multishot recv (buffers picked from one shared provided-buffer ring, so an idle client holds
 * no receive memory), sends, MSR I/O on device-backed backends, the signalfd read, and a tick
 * timeout that runs only while something has a deadline. One io_uring_enter per turn submits
 * what the previous turn queued and waits for the next completions; a turn that queued a few
 * replies waits for their completions and one more, so a request and its reply cost one enter
 * (submit_and_wait). The energy sampler and each schedule have a timeout of their own. Nothing
 * here costs per connection on a turn: only the completions that came are looked at.
 */
#include "server/server.h"
#include "common/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <valgrind/memcheck.h>

#define TAG_BITS 0xFull
#define INDEX_SHIFT 48

uint64_t loop_user_data(const void *object, enum loop_tag tag, uint32_t index)
{
	return (uint64_t)(uintptr_t)object | (uint64_t)tag | ((uint64_t)index << INDEX_SHIFT);
}

enum loop_tag loop_tag_of(uint64_t user_data)
{
	return (enum loop_tag)(user_data & TAG_BITS);
}

void *loop_object_of(uint64_t user_data)
{
	return (void *)(uintptr_t)(user_data & ((1ull << INDEX_SHIFT) - 1) & ~TAG_BITS);
}

uint32_t loop_index_of(uint64_t user_data)
{
	return (uint32_t)(user_data >> INDEX_SHIFT);
}

uint64_t msrd_now_ns(void)
{
	return clock_monotonic_ns();
}

struct io_uring_sqe *loop_sqe(struct loop *loop)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&loop->ring);

	while (sqe == NULL) {
		/* The kernel consumes submitted SQEs synchronously (no SQPOLL), so one submit
		 * frees the whole queue. */
		io_uring_submit(&loop->ring);
		sqe = io_uring_get_sqe(&loop->ring);
	}
	return sqe;
}

bool loop_work_waiting(struct loop *loop)
{
	return (IO_URING_READ_ONCE(*loop->ring.sq.kflags) & IORING_SQ_TASKRUN) != 0 ||
	       io_uring_cq_ready(&loop->ring) != 0;
}

void loop_reserve(struct loop *loop, unsigned count)
{
	if (io_uring_sq_space_left(&loop->ring) < count)
		io_uring_submit(&loop->ring);
}

static uint16_t received_buffer(const struct io_uring_cqe *cqe)
{
	return (uint16_t)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
}

/*
 * The buffers are consumed incrementally (IOU_PBUF_RING_INC): the kernel puts each receive
 * right behind the previous one in the same buffer and moves on to the next buffer only when
 * one is full, so a receive's bytes start where the buffer's previous receives ended
 * (buffer_taken). Small requests are then packed into a few lines, in the order they came: at
 * 10 000 busy clients one buffer per receive had every receive write (in the kernel) and read
 * (here) a cold line of 16 384 buffers cycling through 1 MiB, where packed 24-byte requests
 * share a line with two others and the lines in use stay few.
 */
const uint8_t *loop_received(struct loop *loop, const struct io_uring_cqe *cqe)
{
	uint16_t id = received_buffer(cqe);

	return loop->buffer_memory + (size_t)id * LOOP_BUFFER_SIZE + loop->buffer_taken[id];
}

void loop_release_received(struct loop *loop, const struct io_uring_cqe *cqe)
{
	uint16_t id = received_buffer(cqe);

	if (cqe->flags & IORING_CQE_F_BUF_MORE) {
		/* The kernel fills the rest of it with later receives. */
		loop->buffer_taken[id] = (uint16_t)(loop->buffer_taken[id] + cqe->res);
		return;
	}
	/* With incremental consumption a completion that carried no bytes took none of the
	 * buffer: it is still the kernel's (and still in the ring). */
	if (cqe->res <= 0 && loop->buffers_incremental)
		return;
	loop->buffer_taken[id] = 0;
	io_uring_buf_ring_add(loop->buffers, loop->buffer_memory + (size_t)id * LOOP_BUFFER_SIZE,
			      LOOP_BUFFER_SIZE, id, io_uring_buf_ring_mask(loop->buffer_max), 0);
	io_uring_buf_ring_advance(loop->buffers, 1);
}

/* Buffers [buffer_count, count) into the ring. */
static void add_buffers(struct loop *loop, unsigned count)
{
	unsigned added = 0;

	for (unsigned id = loop->buffer_count; id < count; id++, added++)
		io_uring_buf_ring_add(loop->buffers, loop->buffer_memory + (size_t)id * LOOP_BUFFER_SIZE,
				      LOOP_BUFFER_SIZE, (unsigned short)id,
				      io_uring_buf_ring_mask(loop->buffer_max), (int)added);
	io_uring_buf_ring_advance(loop->buffers, (int)added);
	loop->buffer_count = count;
}

void loop_buffers_exhausted(struct loop *loop)
{
	loop->buffers_exhausted = true;
}

/*
 * More clients had input ready in one turn than there were buffers: each of them beyond the
 * buffers had its multishot receive end with ENOBUFS and re-armed, a few system-call-sized steps
 * per request that then recur every turn while that many clients stay busy (with 10 000 busy
 * clients, several per read). So the ring gets as many buffers again, up to buffer_max. The
 * memory is reserved at start and touched only once a buffer is used: msrd's memory follows the
 * most clients ever busy at once, never the idle ones.
 */
static void grow_buffers(struct loop *loop)
{
	unsigned count = loop->buffer_count * 2;

	loop->buffers_exhausted = false;
	if (loop->buffer_count >= loop->buffer_max)
		return;
	if (count > loop->buffer_max)
		count = loop->buffer_max;
	add_buffers(loop, count);
	log_info("receive buffers: %u (clients with input ready found them all in use)", count);
}

/* Register the ring with room for `entries` buffers, fewer when RLIMIT_MEMLOCK (the kernel
 * pins the ring's pages and counts them there, 16 bytes a buffer) holds it to fewer: msrd then
 * runs with at most what fits rather than not at all. */
static int register_buffers(struct loop *loop, unsigned entries)
{
	struct io_uring_buf_reg registration = {
		.ring_addr = (uint64_t)(uintptr_t)loop->buffers,
		.bgid = LOOP_BUFFER_GROUP,
		.pad = IOU_PBUF_RING_INC, /* the flags (liburing 2.3 names the field pad) */
	};
	int status;

	for (;;) {
		registration.ring_entries = entries;
		status = io_uring_register_buf_ring(&loop->ring, &registration, 0);
		if (status == -EINVAL && registration.pad != 0) {
			/* Before Linux 6.12: one buffer per receive. */
			registration.pad = 0;
			continue;
		}
		if (status != -ENOMEM || entries <= LOOP_BUFFER_START)
			break;
		entries /= 2;
	}
	loop->buffers_incremental = registration.pad != 0;
	if (status < 0)
		return status;
	if (entries < loop->buffer_max)
		log_notice("receive buffers: at most %u, not %u (RLIMIT_MEMLOCK)", entries,
			   loop->buffer_max);
	loop->buffer_max = entries;
	loop->buffers_registered = true;
	return 0;
}

/* liburing 2.3 lacks io_uring_setup_buf_ring: map the ring ourselves and register it. The
 * ring has room for buffer_max buffers from the start; the buffers' memory is reserved, not
 * committed (MAP_NORESERVE), so the buffers not yet added cost nothing. */
static int setup_buffers(struct loop *loop, unsigned buffer_max)
{
	void *mapping;
	int status;

	loop->buffer_max = buffer_max;
	loop->buffer_ring_bytes = buffer_max * sizeof(struct io_uring_buf);
	mapping = mmap(NULL, loop->buffer_ring_bytes, PROT_READ | PROT_WRITE,
		       MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (mapping == MAP_FAILED)
		return -ENOMEM;
	loop->buffers = mapping;
	loop->buffer_memory_bytes = (size_t)buffer_max * LOOP_BUFFER_SIZE;
	mapping = mmap(NULL, loop->buffer_memory_bytes, PROT_READ | PROT_WRITE,
		       MAP_ANONYMOUS | MAP_PRIVATE | MAP_NORESERVE, -1, 0);
	if (mapping == MAP_FAILED)
		return -ENOMEM;
	loop->buffer_memory = mapping;
	loop->buffer_taken = calloc(buffer_max, sizeof(*loop->buffer_taken));
	if (loop->buffer_taken == NULL)
		return -ENOMEM;
	status = register_buffers(loop, buffer_max);
	if (status < 0)
		return status;
	io_uring_buf_ring_init(loop->buffers);
	add_buffers(loop, loop->buffer_max < LOOP_BUFFER_START ? loop->buffer_max
							       : LOOP_BUFFER_START);
	return 0;
}

/*
 * io_uring operations never pass through seccomp: an msrd taken over could open, create, link
 * or unlink files or open internet sockets through its ring while the filter refuses the same
 * system calls. So the ring is created disabled and restricted, before it is enabled, to the
 * operations, SQE flags (hard links for write batches, soft links for a device read and its
 * reply, provided buffers) and registrations msrd uses; anything else completes with -EACCES.
 */
static const uint8_t allowed_operations[] = {
	IORING_OP_ACCEPT,  IORING_OP_RECV,    IORING_OP_SEND,           IORING_OP_SENDMSG,
	IORING_OP_READ,    IORING_OP_WRITE,   IORING_OP_TIMEOUT,        IORING_OP_TIMEOUT_REMOVE,
	IORING_OP_ASYNC_CANCEL,
};

/* io_uring_register(2) itself: Debian's liburing 2.3 declares io_uring_register_restrictions
 * and io_uring_enable_rings but does not export them. */
static int ring_register(struct loop *loop, unsigned opcode, void *argument, unsigned count)
{
	long status = syscall(__NR_io_uring_register, loop->ring.ring_fd, opcode, argument, count);

	return status < 0 ? -errno : 0;
}

static int restrict_ring(struct loop *loop)
{
	struct io_uring_restriction restrictions[sizeof(allowed_operations) + 2];
	unsigned count = 0;
	int status;

	memset(restrictions, 0, sizeof(restrictions));
	for (size_t i = 0; i < sizeof(allowed_operations); i++) {
		restrictions[count].opcode = IORING_RESTRICTION_SQE_OP;
		restrictions[count++].sqe_op = allowed_operations[i];
	}
	restrictions[count].opcode = IORING_RESTRICTION_SQE_FLAGS_ALLOWED;
	restrictions[count++].sqe_flags = IOSQE_IO_HARDLINK | IOSQE_IO_LINK | IOSQE_BUFFER_SELECT;
	restrictions[count].opcode = IORING_RESTRICTION_REGISTER_OP;
	restrictions[count++].register_op = IORING_UNREGISTER_PBUF_RING; /* at loop_exit */
	status = ring_register(loop, IORING_REGISTER_RESTRICTIONS, restrictions, count);
	if (status < 0)
		return status;
	return ring_register(loop, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
}

int loop_init(struct loop *loop, unsigned buffer_max)
{
	struct io_uring_params params = {
		/* TASKRUN_FLAG: with DEFER_TASKRUN a completion is posted only inside
		 * io_uring_enter, so the CQ looks empty while a request waits; the flag is what
		 * says work waits (loop_work_waiting). */
		.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER |
			 IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG |
			 IORING_SETUP_R_DISABLED,
		.cq_entries = LOOP_CQ_ENTRIES,
	};
	int status;

	memset(loop, 0, sizeof(*loop));
	status = io_uring_queue_init_params(LOOP_SQ_ENTRIES, &loop->ring, &params);
	if (status == -EINVAL) {
		/* Kernels before 6.1 know neither SINGLE_ISSUER nor DEFER_TASKRUN. */
		params = (struct io_uring_params){
			.flags = IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED,
			.cq_entries = LOOP_CQ_ENTRIES,
		};
		status = io_uring_queue_init_params(LOOP_SQ_ENTRIES, &loop->ring, &params);
	}
	if (status < 0)
		return status;
	status = setup_buffers(loop, buffer_max);
	if (status == 0)
		status = restrict_ring(loop);
	if (status < 0)
		loop_exit(loop);
	return status;
}

void loop_exit(struct loop *loop)
{
	if (loop->ring.ring_fd <= 0)
		return;
	if (loop->buffers_registered)
		io_uring_unregister_buf_ring(&loop->ring, LOOP_BUFFER_GROUP);
	io_uring_queue_exit(&loop->ring);
	if (loop->buffers != NULL)
		munmap(loop->buffers, loop->buffer_ring_bytes);
	if (loop->buffer_memory != NULL)
		munmap(loop->buffer_memory, loop->buffer_memory_bytes);
	free(loop->buffer_taken);
	memset(loop, 0, sizeof(*loop));
}

void loop_arm_accept(struct msrd *server)
{
	struct io_uring_sqe *sqe;

	if (server->accept_armed || server->stopping || server->listen_fd < 0)
		return;
	sqe = loop_sqe(&server->loop);
	io_uring_prep_multishot_accept(sqe, server->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, loop_user_data(server, TAG_ACCEPT, 0));
	server->accept_armed = true;
}

static void arm_signal_read(struct msrd *server)
{
	struct io_uring_sqe *sqe = loop_sqe(&server->loop);

	io_uring_prep_read(sqe, server->signal_fd, &server->signal_info,
			   sizeof(server->signal_info), 0);
	io_uring_sqe_set_data64(sqe, loop_user_data(server, TAG_SIGNAL, 0));
}

void loop_want_tick(struct msrd *server)
{
	struct io_uring_sqe *sqe;

	if (server->tick_armed || server->done)
		return;
	server->tick_interval = (struct __kernel_timespec){
		.tv_sec = 0,
		.tv_nsec = (long long)LOOP_TICK_MS * 1000000,
	};
	sqe = loop_sqe(&server->loop);
	io_uring_prep_timeout(sqe, &server->tick_interval, 0, 0);
	io_uring_sqe_set_data64(sqe, loop_user_data(server, TAG_TICK, 0));
	server->tick_armed = true;
}

static void on_signal(struct msrd *server, const struct io_uring_cqe *cqe)
{
	if (cqe->res != (int)sizeof(server->signal_info)) {
		if (cqe->res < 0 && cqe->res != -EINTR && cqe->res != -ECANCELED)
			log_warn_errno(cqe->res, "reading signals");
		if (!server->done && cqe->res != -ECANCELED)
			arm_signal_read(server);
		return;
	}
	VALGRIND_MAKE_MEM_DEFINED(&server->signal_info, sizeof(server->signal_info));
	switch (server->signal_info.ssi_signo) {
	case SIGHUP:
		msrd_reload_policy(server);
		break;
	case SIGTERM:
	case SIGINT:
		msrd_begin_shutdown(server, server->signal_info.ssi_signo == SIGTERM ? "SIGTERM"
										     : "SIGINT");
		break;
	default:
		break;
	}
	if (!server->done)
		arm_signal_read(server);
}

static void on_tick(struct msrd *server)
{
	uint64_t now = msrd_now_ns();
	bool needed;

	server->tick_armed = false;
	needed = clients_check_timeouts(server, now);
	if (ringdir_expire(&server->rings, now))
		needed = true;
	if (server->accept_rearm) {
		server->accept_rearm = false;
		loop_arm_accept(server);
	}
	if (needed)
		loop_want_tick(server);
}

static void on_accept_done(struct msrd *server, const struct io_uring_cqe *cqe)
{
	if ((cqe->flags & IORING_CQE_F_MORE) == 0)
		server->accept_armed = false;
	listener_on_accept(server, cqe);
	if (!server->accept_armed && !server->accept_rearm)
		loop_arm_accept(server);
}

static void dispatch_completion(struct msrd *server, const struct io_uring_cqe *cqe)
{
	uint64_t user_data = io_uring_cqe_get_data64(cqe);

	switch (loop_tag_of(user_data)) {
	case TAG_ACCEPT:
		on_accept_done(server, cqe);
		break;
	case TAG_SIGNAL:
		on_signal(server, cqe);
		break;
	case TAG_TICK:
		on_tick(server);
		break;
	case TAG_RECV:
		client_on_recv(loop_object_of(user_data), cqe);
		break;
	case TAG_SEND:
		client_on_send(loop_object_of(user_data), cqe);
		break;
	case TAG_MSR_CHECK:
	case TAG_MSR_RUN:
		msr_exec_on_completion(server, cqe);
		break;
	case TAG_ENERGY:
		energy_on_timeout(server, cqe);
		break;
	case TAG_SCHEDULE:
		schedule_on_timeout(server, cqe);
		break;
	case TAG_ENERGY_PAGE:
		energy_pages_on_timeout(server, cqe);
		break;
	case TAG_ENERGY_EDGE:
		energy_edges_on_timeout(server, cqe);
		break;
	case TAG_IGNORE:
	default:
		break;
	}
}

/*
 * With thousands of clients, the one a completion names has not been touched since its previous
 * request: its state is not in any cache, and a request reads and writes lines all over it
 * (input, reply queue, flags, deadlines). Those of the next completion's client are fetched
 * while this one is handled, so the misses overlap with work instead of following each other:
 * its hot part only (client.h), what a request and its reply touch.
 */
static void prefetch_next_client(const struct io_uring *ring, unsigned head)
{
	const struct io_uring_cqe *next;
	enum loop_tag tag;
	const char *object;

	if (head + 1 == io_uring_smp_load_acquire(ring->cq.ktail))
		return;
	next = &ring->cq.cqes[(head + 1) & ring->cq.ring_mask];
	tag = loop_tag_of(next->user_data);
	if (tag != TAG_RECV && tag != TAG_SEND)
		return;
	object = loop_object_of(next->user_data);
	for (size_t offset = 0; offset < CLIENT_HOT_BYTES; offset += 64)
		__builtin_prefetch(object + offset, 1);
}

/* Work queued during a turn that must wait for the whole turn: replies are coalesced into one
 * send per client, and receives that ran out of buffers are re-armed once buffers are back (and
 * more of them added, grow_buffers).
 * Both lists may name clients closed during the turn (client_rearm_recv and client_flush skip
 * those), so clients are freed only after them. */
static void finish_turn(struct msrd *server)
{
	if (server->loop.buffers_exhausted)
		grow_buffers(&server->loop);
	while (server->rearm != NULL) {
		struct client *client = server->rearm;
		server->rearm = client->next_rearm;
		client->next_rearm = NULL;
		client->recv_rearm = false;
		client_rearm_recv(client);
	}
	while (server->dirty != NULL) {
		struct client *client = server->dirty;
		server->dirty = client->next_dirty;
		client->next_dirty = NULL;
		client->dirty = false;
		client_flush(client);
	}
	client_free_retired(server);
}

/*
 * One enter: submit what the turn queued and wait for the next work. When the turn queued a few
 * quiet sends, the enter waits for their completions and one more, so a request and its reply
 * cost one enter; a send that went out only in part is looked at after LOOP_QUIET_SEND_NS at
 * most. When it queued more than LOOP_QUIET_SEND_BATCH, their completions alone end the wait:
 * the kernel runs as many pending receives as an enter waits for completions before it returns
 * (with DEFER_TASKRUN), so waiting for thousands made msrd take thousands of requests in one
 * turn and answer each only after all of them were received. Each client was then woken twice
 * from sleep (once by the receive freeing its request, unix_write_space, once by the reply),
 * where a reply sent soon after the receive finds it still awake: at 10 000 busy clients msrd's
 * CPU per read was 1.5 times the echo floor's, every turn took as long, and its receives
 * overflowed the CQ.
 */
static int submit_and_wait(struct loop *loop)
{
	struct __kernel_timespec limit = { .tv_nsec = LOOP_QUIET_SEND_NS };
	struct io_uring_cqe *cqe;
	unsigned quiet = loop->quiet_sends;

	loop->quiet_sends = 0;
	if (quiet == 0 || quiet > LOOP_QUIET_SEND_BATCH)
		return io_uring_submit_and_wait(&loop->ring, 1);
	return io_uring_submit_and_wait_timeout(&loop->ring, &cqe, quiet + 1, &limit, NULL);
}

int loop_run(struct msrd *server)
{
	struct loop *loop = &server->loop;
	int status = 0;

	arm_signal_read(server);
	loop_arm_accept(server);
	while (!server->done) {
		struct io_uring_cqe *cqe;
		unsigned head;
		unsigned seen = 0;

		finish_turn(server);
		if (server->stopping && server->client_count == 0 && server->write_owner == NULL) {
			server->done = true;
			break;
		}
		status = submit_and_wait(loop);
		if (status < 0 && status != -EINTR && status != -ETIME && status != -EBUSY) {
			log_warn_errno(status, "io_uring_submit_and_wait");
			break;
		}
		status = 0;
		io_uring_for_each_cqe(&loop->ring, head, cqe) {
			prefetch_next_client(&loop->ring, head);
			dispatch_completion(server, cqe);
			seen++;
		}
		io_uring_cq_advance(&loop->ring, seen);
		privilege_log_refused();
		if (energy_edges_spin_due(server)) {
			/* Replies first: the spin stops at the next completion, never before it. */
			finish_turn(server);
			io_uring_submit(&loop->ring);
			energy_edges_spin(server);
		}
	}
	return status;
}
