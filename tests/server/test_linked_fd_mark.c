/*
 * A descriptor-carrying reply queued behind a failed linked READ arrives on its own first byte.
 *
 * On a device backend (--backend msr on a stand-in tree) msrd links a plain READ's device read
 * to the send of its reply (one io_uring_enter); a failed read cancels that send and the error
 * reply goes instead. A client that pipelines, in one write, such a READ (a register past the
 * end of the stand-in file: the driver's EIO) and an ENERGY_PAGE (whose reply carries the page's
 * descriptor as SCM_RIGHTS) used to get the descriptor 24 bytes late — with the middle of the
 * ENERGY_PAGE reply instead of its header — because the descriptor's place in the stream was
 * counted with the dropped 24-byte READ reply still in it. The client library matches a
 * descriptor to the reply it arrives on, so it took it for the wrong reply's or lost it.
 *
 * Here: the ENERGY_PAGE reply's 16 header bytes, received alone, come with the descriptor, and
 * the descriptor is the page (it attaches and its entry reads the register's total).
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "haecer/msrd.h"
#include "proto/wire.h"
#include "shm/energy_page.h"
#include "tests/lib/msrd_group.h"
#include "harness/msrd_harness.h"
#include "harness/raw_client.h"
#include "harness/standin_tree.h"

#define BEYOND 0x2000u /* past the stand-in file's end: the driver's EIO */
#define PKG_ENERGY 0x611u
#define PKG_START 0x1234567u
#define TIMEOUT_MS 10000u

static const char policy[] =
	"version: 1\n"
	"default: deny\n"
	"msrs:\n"
	"  - {name: TSC, address: 0x10, read: true, set: base}\n"
	"  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: base}\n"
	"  - {name: PKG_ENERGY_STATUS, address: 0x611, read: true, set: base}\n"
	"  - {name: BEYOND, address: 0x2000, read: true, set: base}\n"
	"rules:\n"
	"  - {match: {uid: 0}, allow: [base]}\n";

static struct msrd_server server;
static char tree[PATH_MAX + 16];
static const char *const arguments[] = { "--backend", "msr", "--dev-root", tree, NULL };

/* Exactly `length` bytes with one recvmsg: the descriptor that came with them, or -1. */
static int receive_with_fd(int socket_fd, uint8_t *buffer, size_t length)
{
	union {
		struct cmsghdr align;
		char buffer[CMSG_SPACE(sizeof(int))];
	} control;
	struct iovec vector = { .iov_base = buffer, .iov_len = length };
	struct msghdr message = { .msg_iov = &vector, .msg_iovlen = 1,
				  .msg_control = control.buffer,
				  .msg_controllen = sizeof(control.buffer) };
	struct pollfd poller = { .fd = socket_fd, .events = POLLIN };
	struct cmsghdr *cmsg;
	int received = -1;

	assert_int_equal(poll(&poller, 1, TIMEOUT_MS), 1);
	assert_int_equal(recvmsg(socket_fd, &message, MSG_WAITALL | MSG_CMSG_CLOEXEC),
			 (ssize_t)length);
	for (cmsg = CMSG_FIRSTHDR(&message); cmsg != NULL; cmsg = CMSG_NXTHDR(&message, cmsg))
		if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS)
			memcpy(&received, CMSG_DATA(cmsg), sizeof(int));
	return received;
}

static void test_descriptor_rides_on_its_reply(void **state)
{
	uint8_t frames[512], reply[4096];
	uint8_t payload[WIRE_ENERGY_PAGE_REQUEST_SIZE];
	struct wire_energy_page_request request = { .address = PKG_ENERGY, .rate_hz = 1000 };
	struct wire_energy_page page;
	struct wire_header header;
	struct wire_writer writer;
	struct energy_page_reader reader;
	struct energy_page_reading reading;
	uint64_t register_value = 0;
	size_t length;
	int socket_fd, page_fd, stray = -1;

	(void)state;
	socket_fd = raw_connect(server.socket_path);
	assert_true(socket_fd >= 0);
	length = raw_hello_and_read(frames, "test_linked_fd_mark", 1);
	assert_int_equal(raw_send(socket_fd, frames, length), 0);
	assert_int_equal(raw_read_frame(socket_fd, reply, sizeof(reply), &header, TIMEOUT_MS, NULL),
			 0);
	assert_int_equal(raw_read_frame(socket_fd, reply, sizeof(reply), &header, TIMEOUT_MS, NULL),
			 0);
	assert_int_equal(header.status, WIRE_STATUS_OK); /* the TSC: a linked read that worked */

	/* One write: a READ that msrd links and that fails, then an ENERGY_PAGE. */
	length = raw_read_request(frames, sizeof(frames), 10, 0, BEYOND);
	assert_true(length > 0);
	wire_writer_init(&writer, payload, sizeof(payload));
	wire_put_energy_page_request(&writer, &request);
	length += raw_frame(frames + length, sizeof(frames) - length, WIRE_OP_ENERGY_PAGE, 11,
			    payload, writer.used);
	assert_int_equal(raw_send(socket_fd, frames, length), 0);

	assert_int_equal(raw_read_frame(socket_fd, reply, sizeof(reply), &header, TIMEOUT_MS,
					&stray), 0);
	assert_int_equal(header.request_id, 10);
	assert_int_not_equal(header.status, WIRE_STATUS_OK);
	assert_int_equal(stray, -1); /* no descriptor on the error reply */

	page_fd = receive_with_fd(socket_fd, reply, WIRE_HEADER_SIZE);
	assert_int_equal(wire_header_decode(reply, WIRE_HEADER_SIZE, sizeof(reply), &header), 0);
	assert_int_equal(header.op, WIRE_OP_ENERGY_PAGE);
	assert_int_equal(header.request_id, 11);
	assert_int_equal(header.status, WIRE_STATUS_OK);
	assert_true(page_fd >= 0); /* with the reply's first bytes, not later */
	assert_int_equal(receive_with_fd(socket_fd, reply + WIRE_HEADER_SIZE,
					 header.length - WIRE_HEADER_SIZE), -1);
	assert_int_equal(wire_get_energy_page(reply + WIRE_HEADER_SIZE,
					      header.length - WIRE_HEADER_SIZE, &page), 0);

	assert_int_equal(energy_page_attach(&reader, page_fd), 0);
	assert_int_equal(reader.info.address, PKG_ENERGY);
	assert_int_equal(energy_page_read(&reader, 0, &reading), 0);
	assert_int_equal(harness_standin_read(tree, 0, PKG_ENERGY, &register_value), 0);
	assert_int_equal(reading.total & 0xffffffffull, register_value & 0xffffffffull);
	energy_page_detach(&reader);
	close(page_fd);
	close(socket_fd);
}

static int prepare(const struct msrd_server *prepared)
{
	tree_prepare_sandybridge_rapl(prepared->dir, tree, sizeof(tree), PKG_START);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_descriptor_rides_on_its_reply),
	};

	return MSRD_RUN_GROUP_PREPARED(&server, policy, prepare, arguments, NULL, tests);
}
