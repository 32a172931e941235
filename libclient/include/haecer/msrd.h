/*
 * <haecer/msrd.h> — the low-level client API of msrd, the haecer MSR server.
 *
 * Blocking and simple: every call is one request and one reply over the connection's UNIX
 * socket (one round trip), and none allocates memory after haecer_connect. A connection may be
 * used by one thread at a time. The higher-level HAECER API is built on top of this one.
 *
 * Every function returns 0 (or a count) on success and a negative errno-style value on failure;
 * none sets errno. Refusals and errors reported by the server map as follows:
 *   -EPERM      the policy does not grant this (address, ring major, simulator control)
 *   -EACCES     a write would change bits outside the policy's write mask (nothing was written)
 *   -EIO        the register does not exist on this CPU, or the CPU refused the access
 *   -ENXIO      no such CPU
 *   -ECANCELED  (batch op) not run because another op of the batch was refused
 *   -EINVAL     a field has a value the server does not accept
 *   -ENOSPC     a per-client or server-wide limit is reached (rings, memory)
 *   -ENOENT     no such ring
 *   -ENODEV     simulator control on a server that runs real hardware
 *   -EOPNOTSUPP the server does not implement the operation
 *   -EPROTO, -EBADMSG   the server's reply was not what the protocol says (connection unusable)
 *   -EPIPE, -ECONNRESET the server closed the connection
 * haecer_conn_error() gives the server's text for the last failure on a connection.
 */
#ifndef HAECER_MSRD_H
#define HAECER_MSRD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HAECER_DEFAULT_SOCKET "/run/haecer/msrd.sock"
#define HAECER_SOCKET_ENV "HAECER_SOCKET"
#define HAECER_MAX_CPUS 1024u
#define HAECER_NAME_MAX 32u
#define HAECER_RING_MAX_COUNTERS 16u

struct haecer_conn;

/* What the server told this connection at HELLO. */
struct haecer_server_info {
	uint16_t version;          /* protocol version in use */
	uint16_t backend;          /* 1 msr, 2 msr-safe, 3 simulated CPU */
	uint32_t max_frame;
	uint32_t max_batch_ops;
	uint32_t max_in_flight;
	uint32_t max_rings;
	uint32_t uid;              /* the identity the server sees for this connection */
	uint32_t gid;
	uint32_t pid;
	uint64_t features;         /* HAECER_FEATURE_* */
	char server_version[HAECER_NAME_MAX];
};
#define HAECER_FEATURE_MSR (1ull << 0)
#define HAECER_FEATURE_RINGS (1ull << 1)
#define HAECER_FEATURE_SIM_CONTROL (1ull << 2)
#define HAECER_FEATURE_SLOTS (1ull << 3)
#define HAECER_FEATURE_ENERGY (1ull << 4)
#define HAECER_FEATURE_HANDLES (1ull << 5)
#define HAECER_FEATURE_SCHEDULES (1ull << 6)

#define HAECER_BACKEND_MSR 1
#define HAECER_BACKEND_MSR_SAFE 2
#define HAECER_BACKEND_SIM 3

/* Connect to msrd at `path`; NULL means $HAECER_SOCKET, or HAECER_DEFAULT_SOCKET when that is
 * unset. Performs HELLO, so a returned connection speaks a version both sides know. */
int haecer_connect(const char *path, struct haecer_conn **out);

/* Close the connection and free it; NULL is fine. */
void haecer_close(struct haecer_conn *conn);

/* The connection's socket, e.g. to poll for the server closing it. Owned by the connection. */
int haecer_conn_fd(const struct haecer_conn *conn);

/* The HELLO answer cached at connect time. */
const struct haecer_server_info *haecer_server_info(const struct haecer_conn *conn);

/* Send HELLO again (e.g. after the server reloaded its policy: features may change). */
int haecer_hello(struct haecer_conn *conn, struct haecer_server_info *out);

/* Text of the last failure on this connection: the server's detail when it sent one (e.g.
 * "uid 1000 may not write 0x611 on cpu 0"), otherwise the status text. "" after a success. */
const char *haecer_conn_error(const struct haecer_conn *conn);

/* Protocol text for a value returned by this API ("denied by policy" for -EPERM, ...). */
const char *haecer_msrd_strerror(int negative_errno);

/* ---- machine ---- */

#define HAECER_RAPL_DOMAINS 8u
#define HAECER_MACHINE_HAS_SMI_COUNT 0x1u
#define HAECER_MACHINE_PMC_FULL_WIDTH 0x2u
#define HAECER_MACHINE_SIMULATED 0x4u

struct haecer_machine_info {
	char vendor[16];            /* CPUID leaf 0: "GenuineIntel", "AuthenticAMD" */
	char model_name[64];
	char sim_model[HAECER_NAME_MAX]; /* model name when simulated, "" otherwise */
	uint32_t family;
	uint32_t model;
	uint32_t stepping;
	uint32_t cpuid_0a[4];       /* leaf 0xA: eax, ebx, ecx, edx */
	uint32_t cpu_count;
	uint32_t package_count;
	uint32_t rapl_domains;      /* bit (1 << enum rapl_domain of hw/msr.h) per domain */
	uint32_t flags;             /* HAECER_MACHINE_* */
	uint64_t rapl_power_unit;   /* raw RAPL unit register */
	uint64_t tsc_hz;
	uint8_t rapl_energy_exponent[HAECER_RAPL_DOMAINS]; /* J = count * 2^-exponent */
	uint32_t rapl_max_power_mw[HAECER_RAPL_DOMAINS];
	uint16_t cpu_package[HAECER_MAX_CPUS];
};

int haecer_machine_info(struct haecer_conn *conn, struct haecer_machine_info *out);

/* ---- MSR access (checked against the server's policy for this connection's uid/gid) ---- */

int haecer_msr_read(struct haecer_conn *conn, uint32_t cpu, uint32_t address, uint64_t *value);

/* Refused with -EACCES when a bit outside the write mask would change; rewriting the current
 * value of such bits (read-modify-write) is fine. */
int haecer_msr_write(struct haecer_conn *conn, uint32_t cpu, uint32_t address, uint64_t value);

#define HAECER_MSR_READ 1
#define HAECER_MSR_WRITE 2

struct haecer_msr_op {
	uint16_t kind;      /* HAECER_MSR_READ or HAECER_MSR_WRITE */
	uint32_t cpu;
	uint32_t address;
	uint64_t value;     /* write: what to write; read: the result */
	int status;         /* set by haecer_msr_batch: 0 or a negative errno-style value */
};

/* Run `count` ops in order in one round trip. The server checks the whole batch against the
 * policy before any op runs. Returns 0 when the batch ran (each op's status says how it went:
 * -EIO for a register the CPU lacks); a negative value when it was refused whole, with nothing
 * run: the refused op(s) carry the reason, every other op -ECANCELED. */
int haecer_msr_batch(struct haecer_conn *conn, struct haecer_msr_op *ops, size_t count);

/* ---- rings ---- */

struct haecer_ring_counter {
	char name[HAECER_NAME_MAX];
	uint32_t id;
	uint16_t kind;              /* enum ring_counter_kind of shm/ring.h */
	int16_t unit_exponent;
	int32_t package;
	int32_t cpu;
};

struct haecer_ring_spec {
	uint16_t major;
	uint16_t minor;
	uint32_t capacity;          /* records, a power of two */
	uint32_t flags;             /* RING_SINGLE_PRODUCER of shm/ring.h */
	uint32_t clock;             /* enum ring_clock of shm/ring.h */
	uint64_t tsc_hz;
	uint32_t counter_count;
	struct haecer_ring_counter counters[HAECER_RING_MAX_COUNTERS];
};

#define HAECER_RING_PRODUCER_CONNECTED 0x1u

struct haecer_ring_entry {
	uint16_t major;
	uint16_t minor;
	uint32_t instance;          /* server-wide creation number, from 1 */
	uint32_t capacity;
	uint32_t flags;             /* HAECER_RING_PRODUCER_CONNECTED */
	int32_t producer_pid;
	uint32_t consumers;
	uint64_t bytes;
};

/* Create a ring in the server's directory; *fd is a read-write descriptor of its sealed shared
 * memory (attach with ring_producer_attach), the caller closes it. entry may be NULL. */
int haecer_ring_create(struct haecer_conn *conn, const struct haecer_ring_spec *spec,
		       struct haecer_ring_entry *entry, int *fd);

/* Open a ring by (major, minor, instance); instance 0 means the newest one. *fd is read-only
 * (attach with ring_consumer_attach), the caller closes it. entry may be NULL. */
int haecer_ring_open(struct haecer_conn *conn, uint16_t major, uint16_t minor, uint32_t instance,
		     struct haecer_ring_entry *entry, int *fd);

/* List the rings this connection may monitor, in (major, minor, instance) order. Stores up to
 * max entries and returns how many exist (which may be more than max). */
int haecer_ring_list(struct haecer_conn *conn, struct haecer_ring_entry *entries, size_t max);

/* ---- simulated CPU (server started with the sim backend and a policy granting sim control) ---- */

/* Virtual-time mode: move the simulated time forward; *now_ns (may be NULL) is the new time. */
int haecer_sim_advance(struct haecer_conn *conn, uint64_t ns, uint64_t *now_ns);

/* Set the load (0.0 .. 1.0) of one CPU, or of every CPU when cpu is -1. */
int haecer_sim_set_load(struct haecer_conn *conn, int cpu, double load);

struct haecer_sim_truth {
	uint64_t now_ns;
	double joules;              /* exact energy since the simulation started */
	uint64_t units_at_update;   /* energy units at the last 1 ms update, not wrapped */
	uint64_t last_update_ns;
};

/* Ground truth of one RAPL domain (enum rapl_domain of hw/msr.h) of one package. */
int haecer_sim_energy_truth(struct haecer_conn *conn, uint32_t package, uint32_t domain,
			    struct haecer_sim_truth *out);

#ifdef __cplusplus
}
#endif

#endif
