/*
 * proto/wire_ops.h — the one table of protocol v1's ops, from which the rest follows: the op
 * codes (enum wire_op, proto/wire.h), their names (wire_op_name), whether an op may write a
 * register (wire_op_writes: msrd's exclusive-writer lock waits only for those), and msrd's
 * dispatch (server/dispatch.c names a handler for every op here, or the build fails).
 *
 * X(NAME, CODE, WRITES): WIRE_OP_NAME = CODE; WRITES is NEVER, ALWAYS (every such request may
 * touch a register's value or a counter's state), or BY_PAYLOAD (a batch: when one of its ops
 * writes). Ranges are reserved per family so later work adds ops without a version bump; a
 * server answers an op it does not implement with WIRE_STATUS_UNSUPPORTED and keeps the
 * connection, and HELLO's feature bits say which families a server implements.
 */
#ifndef HAECER_PROTO_WIRE_OPS_H
#define HAECER_PROTO_WIRE_OPS_H

#define WIRE_OPS(X)                                                                     \
	X(HELLO, 0x0001, NEVER)                                                         \
	X(MACHINE_INFO, 0x0002, NEVER)                                                  \
	/* 0x0010-0x001f: MSR access */                                                 \
	X(READ, 0x0010, NEVER)                                                          \
	X(WRITE, 0x0011, ALWAYS)                                                        \
	X(BATCH, 0x0012, BY_PAYLOAD)                                                    \
	/* 0x0020-0x002f: ring directory */                                             \
	X(RING_CREATE, 0x0020, NEVER)                                                   \
	X(RING_OPEN, 0x0021, NEVER)                                                     \
	X(RING_LIST, 0x0022, NEVER)                                                     \
	/* 0x0030-0x003f: simulated CPU control (messages in proto/wire_sim.h) */       \
	X(SIM_ADVANCE, 0x0030, NEVER)                                                   \
	X(SIM_SET_LOAD, 0x0031, NEVER)                                                  \
	X(SIM_ENERGY_TRUTH, 0x0032, NEVER)                                              \
	X(SIM_ENERGY_AT, 0x0033, NEVER)                                                 \
	X(SIM_POWER_TRACE, 0x0034, NEVER)                                               \
	/* 0x0040-0x004f: counter slots (SLOT_CONTROL enables, disables or resets) */   \
	X(SLOT_ALLOC, 0x0040, ALWAYS)                                                   \
	X(SLOT_PROGRAM, 0x0041, ALWAYS)                                                 \
	X(SLOT_CONTROL, 0x0042, ALWAYS)                                                 \
	X(SLOT_READ, 0x0043, ALWAYS)                                                    \
	X(SLOT_FREE, 0x0044, ALWAYS)                                                    \
	/* 0x0050-0x005f: 64-bit energy totals; ENERGY_PAGE a read-only page of them; */ \
	/* ENERGY_GRANT how finely the caller may read them (and the policy's coarse) */  \
	X(ENERGY_READ, 0x0050, NEVER)                                                   \
	X(ENERGY_PAGE, 0x0051, NEVER)                                                   \
	X(ENERGY_GRANT, 0x0052, NEVER)                                                  \
	/* 0x0060-0x006f: registered batches and schedules */                          \
	X(BATCH_REGISTER, 0x0060, NEVER)                                                \
	X(BATCH_RUN, 0x0061, BY_PAYLOAD)                                                \
	X(BATCH_RELEASE, 0x0062, NEVER)                                                 \
	X(SCHEDULE_START, 0x0063, NEVER)                                                \
	X(SCHEDULE_STOP, 0x0064, NEVER)                                                 \
	/* a perf event msrd opens for the client (the broker) */                       \
	X(PERF_OPEN, 0x0070, NEVER)                                                     \
	/* server to client only: the connection is about to be closed */              \
	X(ERROR, 0x00ff, NEVER)

/* Whether requests of an op may write a register (the WRITES column). */
enum wire_op_writes {
	WIRE_WRITES_NEVER,
	WIRE_WRITES_ALWAYS,
	WIRE_WRITES_BY_PAYLOAD,
};

#endif
