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
 *   -ENOSPC     a per-connection, per-uid or server-wide limit is reached (connections, rings,
 *               ring memory, handles, schedules); haecer_conn_error names the server option
 *   -ENOENT     no such ring
 *   -ESTALE     a handle or counter slot a policy reload invalidated
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

#include <haecer/machine_fields.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HAECER_DEFAULT_SOCKET "/run/haecer/msrd.sock"
#define HAECER_SOCKET_ENV "HAECER_SOCKET"
#define HAECER_NAME_MAX 32u
#define HAECER_RING_MAX_COUNTERS 16u

struct haecer_conn;

/* What the server told this connection at HELLO. */
struct haecer_server_info {
	uint16_t version;          /* protocol version in use */
	uint16_t backend;          /* HAECER_BACKEND_*: 1 msr, 2 msr-safe, 3 simulated CPU, ... */
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
#define HAECER_FEATURE_ENERGY_PAGE (1ull << 7)
#define HAECER_FEATURE_PERF (1ull << 8)  /* msrd's perf broker: haecer_perf_open */
#define HAECER_FEATURE_ENERGY_REGION (1ull << 9) /* energy regions pause msrd's precise edges
						  * through their bodies */

#define HAECER_BACKEND_MSR 1
#define HAECER_BACKEND_MSR_SAFE 2
#define HAECER_BACKEND_SIM 3
#define HAECER_BACKEND_POWERCAP 4  /* energy from the kernel's powercap zones */
#define HAECER_BACKEND_PERF 5      /* no registers: perf events through the broker only */

/* msrd's name of a HAECER_BACKEND_* value ("msr", "msr-safe", "sim", "powercap", "perf"), as
 * outputs name the backend behind a figure; "unknown" for others. */
const char *haecer_backend_name(uint16_t backend);

/* Connect to msrd at `path`; NULL means $HAECER_SOCKET, or HAECER_DEFAULT_SOCKET when that is
 * unset. Performs HELLO, so a returned connection speaks a version both sides know. */
int haecer_connect(const char *path, struct haecer_conn **out);

/* What a user can do about a failed haecer_connect (its negative errno): for a missing socket
 * or a refused connection how to start msrd or point HAECER_SOCKET at it, for a permission
 * error the group the socket is meant for (haecer). "" when there is no advice. */
const char *haecer_connect_hint(int error);

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

/* HAECER_MACHINE_* (what flags says), HAECER_MAX_CPUS and HAECER_RAPL_DOMAINS are in
 * <haecer/machine_fields.h>, which lists the fields of struct haecer_machine_info. */
#define HAECER_TSC_UNKNOWN 0u
#define HAECER_TSC_SIMULATED 1u
#define HAECER_TSC_CPUID_15 2u
#define HAECER_TSC_CPUID_16 3u
#define HAECER_TSC_PLATFORM_INFO 4u
#define HAECER_TSC_AMD_P0 5u
#define HAECER_TSC_CALIBRATED 6u
#define HAECER_TSC_CRYSTAL_TABLE 7u /* CPUID 0x15's ratio x the SDM's crystal for the model */

/* "CPUID 0x15", "MSR_PLATFORM_INFO", "calibration against CLOCK_MONOTONIC_RAW", ... (static). */
const char *haecer_tsc_source_name(unsigned source);
#define HAECER_CORE_TYPE_ATOM 0x20u /* E-core (CPUID 0x1A EAX[31:24]) */
#define HAECER_CORE_TYPE_CORE 0x40u /* P-core */

/* What the machine is: the fields <haecer/machine_fields.h> lists, in its order, with what
 * each holds (vendor, model_name, family/model/stepping, cpu_count, flags, the RAPL units, tsc_hz,
 * and each CPU's package, core type and die). */
struct haecer_machine_info {
	HAECER_MACHINE_MEMBERS
};

int haecer_machine_info(struct haecer_conn *conn, struct haecer_machine_info *out);

/* ---- MSR access (checked against the server's policy for this connection's uid/gid) ---- */

int haecer_msr_read(struct haecer_conn *conn, uint32_t cpu, uint32_t address, uint64_t *value);

/* Refused with -EACCES when a bit outside the write mask would change; rewriting the current
 * value of such bits (read-modify-write) is fine. */
int haecer_msr_write(struct haecer_conn *conn, uint32_t cpu, uint32_t address, uint64_t value);

#define HAECER_MSR_READ 1
#define HAECER_MSR_WRITE 2
#define HAECER_MSR_ENERGY_READ 3   /* energy-status register: value = raw, total = 64-bit total */
#define HAECER_MSR_SLOT_READ 4     /* `address` is a slot id of this connection; cpu is ignored */

struct haecer_msr_op {
	uint16_t kind;      /* HAECER_MSR_* */
	uint32_t cpu;
	uint32_t address;
	uint64_t value;     /* write: what to write; read: the result */
	int status;         /* set by haecer_msr_batch: 0 or a negative errno-style value */
	uint64_t total;     /* HAECER_MSR_ENERGY_READ: the 64-bit total (haecer_energy_read) */
};

/* Run `count` ops in order in one round trip. The server checks the whole batch against the
 * policy before any op runs. Returns 0 when the batch ran (each op's status says how it went:
 * -EIO for a register the CPU lacks); a negative value when it was refused whole, with nothing
 * run: the refused op(s) carry the reason, every other op -ECANCELED. */
int haecer_msr_batch(struct haecer_conn *conn, struct haecer_msr_op *ops, size_t count);

/* ---- counter slots: the server owns every PMC and fixed counter of every CPU ---- */

#define HAECER_SLOT_PROGRAMMABLE 1   /* a general-purpose counter (Intel IA32_PMCx, AMD PERF_CTRx) */
#define HAECER_SLOT_FIXED 2          /* an Intel fixed-function counter */

struct haecer_slot {
	uint32_t id;              /* valid on this connection only */
	uint32_t cpu;
	uint16_t kind;            /* HAECER_SLOT_* */
	uint16_t index;           /* which PMC / which fixed counter */
	uint8_t width;            /* counter width in bits (from CPUID / the model) */
	uint32_t counter_address; /* the counter MSR, for information */
	uint32_t control_address; /* its event-select register (PERFEVTSELx, PERF_CTLx) or, for a
				   * fixed counter, IA32_FIXED_CTR_CTRL */
};

/* Take a counter on `cpu`: FIXED with index = the fixed counter wanted; PROGRAMMABLE with index -1
 * (any free one) or a specific index. The counter is cleared to 0 and stopped. Errors:
 *   -EBUSY      that counter is held by another client (or by this one)
 *   -ENOSPC     index -1 and every programmable counter whose registers the policy grants is
 *               held, or this connection holds 256 slots already
 *   -EOPNOTSUPP the CPU has no such counter (or none at all: no HAECER_FEATURE_SLOTS)
 *   -EPERM      the policy does not grant read+write of its registers (counter, event select
 *               with EN or the fixed counter's field of IA32_FIXED_CTR_CTRL, and its bit of
 *               IA32_PERF_GLOBAL_CTRL where the CPU has one); with index -1: it grants those of
 *               none of the programmable counters (no need to probe a counter by number)
 *   -ENXIO      no such CPU;  -EINVAL  unknown kind, index below -1, or -1 for a fixed counter
 *   -EIO        its registers could not be read or written (then it is not taken) */
int haecer_slot_alloc(struct haecer_conn *conn, uint32_t cpu, uint16_t kind, int index,
		      struct haecer_slot *out);

/* Select what it counts: a PERFEVTSEL / PERF_CTL value (EN is managed by haecer_slot_control and
 * ignored here), or for a fixed counter its 4-bit FIXED_CTR_CTRL field. Checked against the policy
 * write mask of the event-select register like a WRITE would be (-EACCES), -EINVAL for a fixed
 * field over 4 bits, -EIO when the CPU refuses the value (reserved bits). Does not start
 * counting; a running slot keeps running with the new selection.
 * A slot id this connection does not hold (freed, or another connection's): -ENOENT.
 * Slots and policy reloads: a reload (SIGHUP) releases every slot whose registers the new
 * policy does not grant this connection, restoring them; the next haecer_slot_program,
 * haecer_slot_control, haecer_slot_read, batch slot read or haecer_slot_free of that id is
 * -ESTALE (haecer_slot_free says so once; the id is unknown after that). */
int haecer_slot_program(struct haecer_conn *conn, uint32_t slot_id, uint64_t config);

#define HAECER_SLOT_ENABLE 1
#define HAECER_SLOT_DISABLE 2
#define HAECER_SLOT_RESET 3       /* counter := 0, running state unchanged */

/* Apply `action` to `count` (1..HAECER_SLOT_MAX_IDS) slots: -ENOENT when any id is not held by
 * this connection (then nothing is done), -EINVAL for an unknown action or count, -EIO when the
 * CPU refused a register access. Enabling sets each programmable slot's EN bit, then the slots'
 * IA32_PERF_GLOBAL_CTRL bits with one GLOBAL_CTRL write per CPU, so slots enabled together start
 * together (disabling the other way round). */
int haecer_slot_control(struct haecer_conn *conn, const uint32_t *slot_ids, size_t count,
			uint16_t action);

/* Read counters (raw, `width` bits) in one round trip. synchronized: the server stops the
 * enabled ones together (one GLOBAL_CTRL write per CPU), reads them, and restarts them (on AMD,
 * which has no global control, each counter's EN bit is cleared and set again). Errors as
 * haecer_slot_control. */
int haecer_slot_read(struct haecer_conn *conn, const uint32_t *slot_ids, size_t count,
		     uint64_t *values, bool synchronized);

/* Release: counting stops and the counter's registers get back the values they had before the
 * slot was taken. Disconnecting (or dying) frees every slot the client held the same way.
 * -ENOENT for an id this connection does not hold. */
int haecer_slot_free(struct haecer_conn *conn, uint32_t slot_id);

#define HAECER_SLOT_MAX_IDS 256u  /* slot ids per haecer_slot_control / haecer_slot_read */

/* ---- energy: 64-bit totals kept by the server ---- */

/* raw = the 32-bit energy-status register; total = its 64-bit extension (total & 0xffffffff ==
 * raw, the upper bits count the wraps since msrd began sampling the register), exact however far
 * apart reads are. With a coarse grant: rounded down to the grant's resolution and, within the
 * grant's minimum interval, the previous reading again (the interval is per uid, over all its
 * connections and schedules). Either pointer may be NULL.
 * -EPERM not granted for reading; -EINVAL `address` is not an energy-status register msrd keeps
 * a total for on this CPU (RAPL PKG/PP0/PP1/DRAM/PSYS, AMD package and core energy); -ENXIO no
 * such CPU; -EIO the register does not exist on this CPU. */
int haecer_energy_read(struct haecer_conn *conn, uint32_t cpu, uint32_t address, uint64_t *raw,
		       uint64_t *total);

/* An energy page (shm/energy_page.h): msrd's totals of one energy-status register (an entry per
 * package, or per CPU for AMD core energy) in read-only shared memory that msrd keeps current,
 * sampling at `rate_hz` (0: the policy's bound, energy_page.max_rate_hz; a higher rate is cut to
 * it) while any client holds a page. Under a coarse grant the page holds only values rounded to
 * the grant's resolution, published at most once per its interval. The connection holds the
 * page until it closes; a policy reload marks the page stale (ask again).
 * *fd is a read-only descriptor for energy_page_attach (the caller closes it).
 * -EPERM not granted for reading; -EINVAL no energy register msrd keeps a total for; -ENOSPC
 * this connection holds 8 pages; -EOPNOTSUPP an msrd without energy pages. */
struct haecer_energy_page_info {
	uint32_t address;
	bool coarse;
	bool precise_edges;        /* granted: msrd brackets each update to a few microseconds */
	uint32_t entry_count;
	uint32_t rate_hz;          /* the sampling rate msrd granted */
	uint32_t min_interval_ms;  /* coarse only */
	uint64_t resolution_uj;    /* coarse only */
	uint64_t bytes;
};
int haecer_energy_page_open(struct haecer_conn *conn, uint32_t address, uint32_t rate_hz,
			    struct haecer_energy_page_info *info, int *fd);

/* The same, with flags. HAECER_ENERGY_PAGE_PRECISE asks for precise edges while this connection
 * holds the page: msrd learns the register's update grid and reads it densely (every few
 * microseconds) only in a short window around each predicted update, so the page's bracket of
 * the last update (update_lo_ns .. update_ns, shm/energy_page.h) is a few microseconds wide; a
 * window that missed its update (an SMI, a late wake) leaves a wide bracket, which says so. It
 * costs msrd about 13 register reads per update of the register while held. Granted only on a
 * fine page (info->precise_edges): a coarse grant gets its coarse page without them. */
#define HAECER_ENERGY_PAGE_PRECISE 0x1u
int haecer_energy_page_request(struct haecer_conn *conn, uint32_t address, uint32_t rate_hz,
			       uint32_t flags, struct haecer_energy_page_info *info, int *fd);

/* How finely this connection's uid may read the energy-status register `address` (one msrd
 * keeps a total for), and the running policy's coarse setting: the coarsest interval and
 * resolution of its rules' energy limits (configs/policies/coarse-energy.yaml: 1000 ms, 1 J).
 * A program that republishes energy to users the policy does not trust (haecer-mon serve)
 * should publish nothing finer than the policy's coarse setting, whatever its own grant.
 * -EPERM the uid may not read the register at all (no grant, full or coarse); -EINVAL no energy
 * register msrd keeps a total for; -EOPNOTSUPP an msrd that predates ENERGY_GRANT. */
#define HAECER_ENERGY_GRANT_COARSE 0x1u        /* this uid's grant is coarse (else full) */
#define HAECER_ENERGY_GRANT_POLICY_COARSE 0x2u /* the policy has a coarse setting */
struct haecer_energy_grant {
	uint32_t address;
	uint32_t flags;                  /* HAECER_ENERGY_GRANT_* */
	uint32_t min_interval_ms;        /* this uid's, when coarse: one fresh value per interval */
	uint32_t policy_min_interval_ms; /* the policy's coarse setting, 0 when it has none */
	uint64_t resolution_uj;          /* this uid's, when coarse: readings rounded down to it */
	uint64_t policy_resolution_uj;   /* the policy's coarse setting, 0 when it has none */
};
int haecer_energy_grant(struct haecer_conn *conn, uint32_t address,
			struct haecer_energy_grant *out);

/* ---- perf events msrd opens for the caller (its perf_event broker) ---- */

/* What perf_event_open(2) would be given (see perf_event_open(2) for type and config; the
 * PMU's type number is /sys/bus/event_source/devices/PMU/type). Scope: the caller's own thread
 * `tid` (0: the calling process; a thread id of the caller's process, gettid()) counting on
 * any CPU it runs on (cpu -1) — counts follow the thread across CPUs — or with
 * HAECER_PERF_CPU_WIDE every task on CPU `cpu` (the policy must grant scope cpu). A
 * sample_period other than 0 samples (the policy must grant sampling). */
#define HAECER_PERF_CPU_WIDE 0x1u
#define HAECER_PERF_EXCLUDE_KERNEL 0x2u
#define HAECER_PERF_DISABLED 0x4u  /* start disabled: ioctl PERF_EVENT_IOC_ENABLE to count */
/* A profiler's sampling event (haecer-prof's): the task clock sampled every sample_period ns
 * with call chains, inherited, enabled at exec, mmap/comm records, CLOCK_MONOTONIC_RAW times,
 * the reader woken at config1 bytes of its ring; type and config must be the software task
 * clock. _STACK adds user registers and stack copies (DWARF unwinding). */
#define HAECER_PERF_PROFILE 0x8u
#define HAECER_PERF_PROFILE_STACK 0x10u
#define HAECER_PERF_EXCLUDE_USER 0x20u /* the kernel's level only (exclude_user) */
struct haecer_perf_spec {
	uint32_t type;
	uint32_t flags;            /* HAECER_PERF_* */
	uint64_t config;
	uint64_t config1;
	uint64_t sample_period;
	int tid;
	int cpu;
};

/* msrd opens the event as the policy allows (its `perf:` grant) and hands over the descriptor:
 * *fd is the caller's (close it when done; msrd keeps no copy). *open (may be NULL) gets how
 * many events this uid holds through msrd's live connections, this one included.
 * -EPERM the policy does not grant this class, scope or sampling, or tid is not a thread of
 * the caller's process (never another uid's); -ENOSPC the uid holds the policy's max_open
 * events already (they count back when their connection closes), or msrd is out of
 * descriptors (EMFILE); -EOPNOTSUPP msrd's broker is off, the type is no class msrd brokers, or
 * the kernel's PMU cannot do it; -ENOENT the kernel has no such event; -EACCES the kernel
 * refused msrd; haecer_conn_error says which. */
int haecer_perf_open(struct haecer_conn *conn, const struct haecer_perf_spec *spec, int *fd,
		     uint32_t *open);

/* perf's name of an event into *spec (type, config, config1; the rest 0, cpu -1): a software
 * event ("context-switches", "cs", "page-faults", "task-clock", ...) or a PMU's event as perf
 * writes it, "msr/tsc/", "msr/event=0x1/", resolved from the PMU's sysfs type, events/ and
 * format/ files (under $HAECER_SYSFS_ROOT when set). -ENOENT no such event or PMU; -EINVAL or
 * -ERANGE a term the PMU's format cannot hold. Whether msrd opens it is the policy's word. */
int haecer_perf_event_by_name(const char *name, struct haecer_perf_spec *spec);
/* The software event names haecer_perf_event_by_name knows, aliases included ("cs" follows
 * "context-switches", with the same config): index 0, 1, ...; NULL beyond. */
const char *haecer_perf_software_event_name(size_t index);

/* One read() of a brokered event: value scaled by time_enabled / time_running when the kernel
 * multiplexed it (scaled true; raw keeps the count as read). -errno of read(), or -EIO for a
 * short read (the descriptor is not such an event). */
struct haecer_perf_value {
	uint64_t value;
	uint64_t raw;
	uint64_t time_enabled;
	uint64_t time_running;
	bool scaled;
};
int haecer_perf_read(int fd, struct haecer_perf_value *out);

/* A brokered event read from its mmap page (perf_event_open(2), "MMAP layout") without a
 * system call where the kernel allows it: the page says cap_user_rdpmc and a non-zero index
 * (the event is on a hardware counter now) and the caller is the thread the event counts;
 * then the count is the page's offset plus RDPMC of that counter, its times the page's
 * (extrapolated to now when the page says cap_user_time). Otherwise — a software event (index
 * 0), a kernel or VM without RDPMC for user space, another thread, a CPU-wide event — it is
 * read() (haecer_perf_read). *path says which (HAECER_PERF_PATH_*), why (may be NULL) why. */
#define HAECER_PERF_PATH_RDPMC 1u   /* the mmap page and RDPMC: no system call */
#define HAECER_PERF_PATH_READ 2u    /* read() of the descriptor */
struct haecer_perf_map;
/* Map the first page of event `fd` (the caller keeps fd open, and closes it after unmapping);
 * tid: the thread the event counts, as its haecer_perf_spec said (0: the process's main
 * thread, getpid(); a thread's gettid()); -1: a CPU-wide event, never read with RDPMC.
 * -errno of mmap, -ENOMEM. */
int haecer_perf_map(int fd, int tid, struct haecer_perf_map **out);
void haecer_perf_unmap(struct haecer_perf_map *map);
int haecer_perf_read_mapped(struct haecer_perf_map *map, struct haecer_perf_value *out,
			    unsigned *path, char *why, size_t why_size);
/* The page's own time_enabled / time_running, read under its seqlock (extrapolated to now when
 * the event is on a counter and the page says cap_user_time). The kernel writes them when the
 * event is scheduled in or reset, so without cap_user_time they trail read()'s. */
int haecer_perf_map_times(const struct haecer_perf_map *map, uint64_t *time_enabled,
			  uint64_t *time_running);

/* In batches (haecer_msr_batch, haecer_batch_register/run): kind HAECER_MSR_ENERGY_READ gives
 * value = raw and total = the 64-bit total; kind HAECER_MSR_SLOT_READ reads slot `address`
 * (value = the raw counter; -ENOENT when this connection does not hold that slot). */

/* ---- registered batches and schedules ---- */

#define HAECER_MAX_HANDLES 64u    /* registered batches per connection */

/* Check a batch against the policy once; run it many times by handle with no re-check beyond
 * what a write's mask needs. Refusals are those of haecer_msr_batch for the first refused op
 * (-EPERM, -ENXIO, -EOPNOTSUPP, and -ENOENT for a slot read of a slot this connection does not
 * hold, -EINVAL for an energy read of a register without a total), with the reason in
 * haecer_conn_error; -ENOSPC: this connection holds HAECER_MAX_HANDLES handles already. */
int haecer_batch_register(struct haecer_conn *conn, const struct haecer_msr_op *ops, size_t count,
			  uint32_t *handle);

/* Run a registered batch. `count` must be the registered number of ops (-EINVAL otherwise,
 * nothing run); ops[i] receives op i's status, and for reads its value (and total), as
 * haecer_msr_batch fills them; kind, cpu and address of `ops` are not used. At run time only
 * what can change is checked again: a slot read's slot must still be held (-ENOENT), a write's
 * bits outside the mask must keep the register's current value (-EACCES), and no write may
 * touch a counter slot another connection holds (-EBUSY); any of these refuses the whole run.
 * After a policy reload every handle is stale: -ESTALE, release it and register again.
 * -ENOENT: no such handle on this connection. */
int haecer_batch_run(struct haecer_conn *conn, uint32_t handle, struct haecer_msr_op *ops,
		     size_t count);

/* Forget a handle (stale ones too; schedules keep their own copy). -ENOENT unknown handle. */
int haecer_batch_release(struct haecer_conn *conn, uint32_t handle);

#define HAECER_SCHEDULE_PERSISTENT 0x1 /* keep running after this client disconnects (policy) */
#define HAECER_SCHEDULE_MIN_PERIOD_NS 1000000ull
#define HAECER_SCHEDULE_MAX_OPS 16u  /* ops of a scheduled batch (the ring's counters) */

struct haecer_schedule_spec {
	uint32_t handle;          /* a registered batch (reads only) */
	uint64_t period_ns;       /* 1 ms .. 1 day */
	uint16_t major, minor;    /* ring the results go to (policy: create_rings) */
	uint32_t capacity;        /* ring records, power of two */
	uint32_t flags;           /* HAECER_SCHEDULE_* */
};

/* msrd runs the batch every period (timer-driven) and pushes each result set, timestamped (one
 * record per op that succeeded, counter_id = op index, energy reads as energy counters carrying
 * the 64-bit total with their unit exponent, other reads the raw register, one timestamp for
 * the set), into a ring it produces itself, which monitors open by (major, minor, instance).
 * The ring's counters are named NAME@N: the policy's name of the MSR (at most 24 characters), '@'
 * and the CPU number, e.g. "PKG_ENERGY_STATUS@0" ("MSR_0x611@0" when the policy has no name for
 * it); the ring's clock is RING_CLOCK_MONOTONIC_RAW. Periods lie on a grid from the first run (at once): each
 * record's flags hold its period number mod 2^16, which is floor((timestamp - the first set's
 * timestamp) / period_ns); a period msrd could not serve in time is skipped, not run late in a
 * burst, and shows as a gap in those numbers. The batch is copied: releasing its handle later
 * does not stop the schedule. A coarse energy grant applies to the schedule's readings.
 * Errors: -EINVAL period < 1 ms, an op that is not a READ or ENERGY_READ, more than
 * HAECER_SCHEDULE_MAX_OPS ops, a capacity that is not a power of two or holds fewer records
 * than one set, unknown flags; -ENOENT unknown handle; -ESTALE stale handle; -EPERM the major is
 * not granted for creating rings, or PERSISTENT without the policy's persistent_schedules;
 * -ENOSPC ring memory (all, or this uid's share), or this uid's schedules (64 by default) are
 * running already. A ring msrd fills can be opened only by clients allowed to read each of its
 * registers at least as coarsely as the schedule reads them. */
int haecer_schedule_start(struct haecer_conn *conn, const struct haecer_schedule_spec *spec,
			  uint32_t *schedule_id, uint32_t *ring_instance);

/* Stop a schedule: this connection's, or a persistent one started by a client of the same uid
 * (ids are server-wide). -ENOENT no such schedule; -EPERM someone else's. The ring stays in the
 * directory for monitors to drain, as a ring whose producer left. */
int haecer_schedule_stop(struct haecer_conn *conn, uint32_t schedule_id);

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
	/* Who created it: anyone with create_rings for a major may publish a newer instance of
	 * any (major, minor), so a monitor that cares checks the owner (SECURITY.md). For a ring
	 * msrd fills for a schedule, the schedule's owner. */
	uint32_t owner_uid;
	int32_t owner_pid;
};

/* Create a ring in the server's directory; *fd is a read-write descriptor of its sealed shared
 * memory (attach with ring_producer_attach), the caller closes it. entry may be NULL. */
int haecer_ring_create(struct haecer_conn *conn, const struct haecer_ring_spec *spec,
		       struct haecer_ring_entry *entry, int *fd);

/* Open a ring by (major, minor, instance); instance 0 means the newest one. *fd is read-only
 * (attach with ring_consumer_attach), the caller closes it. entry may be NULL. -EPERM also for
 * a ring msrd fills for a schedule that reads a register this client may not read, or reads
 * an energy register more finely than this client's coarse grant. */
int haecer_ring_open(struct haecer_conn *conn, uint16_t major, uint16_t minor, uint32_t instance,
		     struct haecer_ring_entry *entry, int *fd);

/* List the rings this connection may monitor, in (major, minor, instance) order. Stores up to
 * max entries and returns how many exist (which may be more than max). */
int haecer_ring_list(struct haecer_conn *conn, struct haecer_ring_entry *entries, size_t max);

#ifdef __cplusplus
}
#endif

#endif
