/*
 * server/ringdir.h — msrd's ring directory (ringdir.c): its state and calls, private to msrd
 * (server/server.h gathers every subsystem's header).
 */
#ifndef HAECER_SERVER_RINGDIR_H
#define HAECER_SERVER_RINGDIR_H

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

struct accounts;
struct client;
struct uid_account;

/* What a counter of a ring msrd produces (a schedule's) reads, so that opening the ring can be
 * held to the opener's own grant: a monitor must be allowed to read the register, at least as
 * coarsely as the schedule read it. */
struct ring_reading {
	uint32_t address;
	bool coarse;
	struct policy_energy_limit limit;
};

struct ring_entry {
	uint16_t major;
	uint16_t minor;
	uint32_t instance;
	int fd;                        /* read-write memfd, kept by the server */
	uint32_t capacity;
	int32_t producer_pid;
	uint64_t bytes;
	struct uid_account *account;   /* charged for `bytes` until the entry is dropped */
	uid_t owner_uid;               /* its creator (a schedule's owner for msrd's rings) */
	int32_t owner_pid;
	struct client *producer;       /* NULL once the producer disconnected (or msrd produces) */
	bool scheduled;                /* msrd produces it for a running schedule */
	struct ring_reading *readings; /* msrd-produced rings: per counter; NULL otherwise */
	uint32_t reading_count;
	uint32_t consumers;            /* references held by connected clients that opened it */
	uint64_t orphaned_ns;          /* producer gone (or schedule stopped) since; 0 otherwise */
	bool dropped;                  /* out of the directory, memory given back; kept only for
					* the consumers that still reference it */
	struct ring_entry *next_dropped;
};

struct ringdir {
	struct ring_entry **entries;   /* sorted by (major, minor, instance) */
	struct ring_entry *dropped;    /* dropped entries connected consumers still reference */
	size_t count;
	size_t capacity;
	uint32_t next_instance;
	uint64_t total_bytes;
	uint64_t max_bytes;
	uint64_t grace_ns;
	struct accounts *accounts;
};

void ringdir_init(struct ringdir *dir, uint64_t max_bytes, uint64_t grace_ns,
		  struct accounts *accounts);
void ringdir_free(struct ringdir *dir);
/* Create and register a ring, its memory charged to `account`; *fd_out is a new read-write
 * descriptor for the producer. A NULL producer means msrd produces it for a schedule (until
 * ringdir_release_scheduled). -ENOSPC when all ring memory is taken, -EDQUOT when the
 * account's share is. */
int ringdir_create(struct ringdir *dir, struct client *producer, struct uid_account *account,
		   int32_t producer_pid, const struct wire_ring_create *request,
		   struct ring_entry **out, int *fd_out);
/* Find (major, minor, instance), instance 0 = newest; a new read-only fd for a consumer. */
int ringdir_find(struct ringdir *dir, uint16_t major, uint16_t minor, uint32_t instance,
		 struct ring_entry **out);
int ringdir_open(struct ringdir *dir, struct ring_entry *entry, int *fd_out);
/* Index of the first entry whose key is >= (major, minor, instance). */
size_t ringdir_lower_bound(const struct ringdir *dir, uint16_t major, uint16_t minor,
			   uint32_t instance);
/* A client dropped its reference (disconnect). */
void ringdir_release(struct ringdir *dir, struct ring_entry *entry, bool producer, uint64_t now_ns);
/* The schedule producing a ring stopped. */
void ringdir_release_scheduled(struct ringdir *dir, struct ring_entry *entry, uint64_t now_ns);
/* Remove orphans whose grace period has passed; true while some orphan is still waiting. */
bool ringdir_expire(struct ringdir *dir, uint64_t now_ns);
void ringdir_entry_to_wire(const struct ring_entry *entry, struct wire_ring_entry *out);

#endif
