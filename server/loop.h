/*
 * server/loop.h — msrd's the io_uring loop (loop.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_LOOP_H
#define HAECER_SERVER_LOOP_H

#include <limits.h>
#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "common/log.h"
#include "policy/policy.h"
#include "proto/wire.h"
#include "shm/energy_page.h"

/* What a completion belongs to: the low 4 bits of user_data (objects are 16-byte aligned),
 * an op index in bits 48..63 for MSR I/O. */
enum loop_tag {
	TAG_IGNORE = 0,   /* cancellations, timeout removals */
	TAG_ACCEPT = 1,
	TAG_SIGNAL = 2,
	TAG_TICK = 3,
	TAG_RECV = 4,
	TAG_SEND = 5,
	TAG_MSR_CHECK = 6,
	TAG_MSR_RUN = 7,
	TAG_ENERGY = 8,   /* the energy sampler's timeout */
	TAG_SCHEDULE = 9, /* a schedule's period timeout */
	TAG_ENERGY_PAGE = 10, /* the energy pages' sampling timeout */
	TAG_ENERGY_EDGE = 11, /* the precise edges' window timeout */
};

/* Incrementally consumed provided buffers (Linux 6.12; liburing 2.3's headers lack both). */
#ifndef IOU_PBUF_RING_INC
#define IOU_PBUF_RING_INC 2
#endif
#ifndef IORING_CQE_F_BUF_MORE
#define IORING_CQE_F_BUF_MORE (1u << 4)
#endif

#define LOOP_BUFFER_GROUP 1
#define LOOP_BUFFER_COUNT 16384u    /* default most; a power of two */
#define LOOP_BUFFER_START 512u      /* buffers at start; doubled while clients exhaust them */
#define LOOP_BUFFER_SIZE 2048u
#define LOOP_SQ_ENTRIES 2048u       /* >= WIRE_MAX_BATCH_OPS: a linked batch fits one submit */
#define LOOP_CQ_ENTRIES 16384u
#define LOOP_TICK_MS 100u
/* How long a turn waits for something besides its quiet sends' completions before it looks at
 * them alone (a send that went out only in part, or one the client is too slow to take: then
 * other clients' work can wait this long, once). Measured on kernel 6.18: a limit of 200 us or
 * 1 ms made a same-CPU round trip 2.5 times slower (21.5 against 8.6 us), 5 ms and 20 ms did
 * not. */
#define LOOP_QUIET_SEND_NS 5000000u
/* The most quiet sends a turn waits for (loop.c, submit_and_wait): about as many pending
 * receives as the kernel runs in one enter when it waits for one completion (20 on 6.18). */
#define LOOP_QUIET_SEND_BATCH 16u

struct loop {
	struct io_uring ring;
	struct io_uring_buf_ring *buffers;
	uint8_t *buffer_memory;
	size_t buffer_ring_bytes;
	unsigned buffer_count;         /* provided receive buffers now in the ring */
	size_t buffer_memory_bytes;    /* reserved for --recv-buffers buffers */
	unsigned buffer_max;           /* the ring's entries (--recv-buffers, or fewer when
					* RLIMIT_MEMLOCK holds it), a power of two */
	uint16_t *buffer_taken;        /* per buffer: bytes the kernel handed out of it so far
					* (incremental consumption; always 0 without it) */
	bool buffers_registered;
	bool buffers_incremental;      /* registered with IOU_PBUF_RING_INC */
	bool buffers_exhausted;        /* a receive found none this turn: add more */
	/* Sends queued this turn whose completion leads to no further work (a client's whole
	 * output, nothing waiting behind it): the next io_uring_enter submits them and waits for
	 * their completions and one more, so a request costs one enter, not two. */
	unsigned quiet_sends;
};

uint64_t loop_user_data(const void *object, enum loop_tag tag, uint32_t index);
enum loop_tag loop_tag_of(uint64_t user_data);
void *loop_object_of(uint64_t user_data);
uint32_t loop_index_of(uint64_t user_data);

/* An SQE; submits pending ones first when the queue is full, so it never returns NULL. */
struct io_uring_sqe *loop_sqe(struct loop *loop);
/* A completion is waiting for the loop (posted, or still deferred to the next enter): a
 * busy-wait asks this to give way. */
bool loop_work_waiting(struct loop *loop);
/* Make sure `count` SQEs fit without an intermediate submit (for linked chains). */
void loop_reserve(struct loop *loop, unsigned count);
/* The bytes a receive completion carries (cqe->res of them, in one of the provided buffers). */
const uint8_t *loop_received(struct loop *loop, const struct io_uring_cqe *cqe);
/* After the completion's bytes are handled: its buffer goes back to the kernel once the kernel
 * has handed out all of it. */
void loop_release_received(struct loop *loop, const struct io_uring_cqe *cqe);
/* A receive found every buffer in use: the turn's end adds as many again (up to buffer_max). */
void loop_buffers_exhausted(struct loop *loop);

/* CLOCK_MONOTONIC in ns (clock_monotonic_ns): client timeouts, which io_uring times in it. */
uint64_t msrd_now_ns(void);

#endif
