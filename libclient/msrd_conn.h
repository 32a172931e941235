/*
 * libclient/msrd_conn.h — libclient-internal: one request/reply exchange with msrd.
 *
 * The public calls of <haecer/msrd.h> and later libclient code (counter slots, energy totals,
 * registered batches) are all built on haecer__begin/haecer__call: encode the payload in place
 * in the connection's send buffer, then exchange it for the reply, which stays valid in the
 * connection's receive buffer until the next call. No allocation.
 */
#ifndef HAECER_LIBCLIENT_MSRD_CONN_H
#define HAECER_LIBCLIENT_MSRD_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "haecer/msrd.h"
#include "proto/wire.h"

struct haecer_reply {
	uint16_t op;
	uint16_t status;         /* enum wire_status */
	const uint8_t *payload;  /* valid until the next call on the connection */
	size_t length;
	int fd;                  /* descriptor that came with the reply (caller owns it), or -1 */
};

/* A writer over the connection's send buffer, positioned at the payload. */
struct wire_writer haecer__begin(struct haecer_conn *conn);

/* Send the request whose payload the writer holds and wait for its reply. Returns 0 when a reply
 * arrived (whatever its status; the connection's error text is set from it), -errno when the
 * exchange itself failed (the connection is then unusable: -EPIPE, -ECONNRESET, -EPROTO ...). */
int haecer__call(struct haecer_conn *conn, uint16_t op, const struct wire_writer *request,
		 struct haecer_reply *reply);

/* haecer__call, then: 0 for an OK reply, its errno-style value otherwise. A descriptor that came
 * with a failed reply is closed. */
int haecer__call_checked(struct haecer_conn *conn, uint16_t op, const struct wire_writer *request,
			 struct haecer_reply *reply);

/* Send a BATCH-shaped request (BATCH, BATCH_REGISTER) and wait for its reply, as haecer__call;
 * -EINVAL for a count of 0 or over WIRE_MAX_BATCH_OPS. */
int haecer__call_batch(struct haecer_conn *conn, uint16_t op, const struct haecer_msr_op *ops,
		       size_t count, struct haecer_reply *reply);

/* Fill ops' statuses (and the values and totals of reads) from a BATCH-shaped reply; returns the
 * reply's errno-style status, or -EPROTO for results that do not match `count`. */
int haecer__take_batch_results(const struct haecer_reply *reply, struct haecer_msr_op *ops,
			       size_t count);

/* An ENERGY_READ that tells msrd a region begins: its precise windows for this connection run
 * region_edges_us more, then stop until the next request (-EOPNOTSUPP: an msrd without it). */
int haecer__energy_read_region(struct haecer_conn *conn, uint32_t cpu, uint32_t address,
			       uint32_t region_edges_us);

#endif
