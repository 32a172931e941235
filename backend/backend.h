/*
 * backend/backend.h — the ways msrd reaches model-specific registers: the one public header of
 * the backend layer (backend/, below msrd; it depends only on hw/ and common/). Nothing outside
 * the layer sees a device descriptor: synchronous calls, batches, and io_uring verbs in liburing's
 * style (backend_prep_read / backend_prep_write) for msrd's asynchronous path.
 *
 *   msr       /dev/cpu/N/msr of the Linux msr driver: pread/pwrite of 8 bytes at offset = address
 *   msr-safe  /dev/cpu/N/msr_safe of LLNL's msr-safe, and its batch ioctl on /dev/cpu/msr_batch
 *   sim       a simulated CPU described by configs/models/NAME.yaml (configs/models/README.md)
 *   powercap  the kernel's powercap zones (sys/class/powercap/intel-rapl:N[:M]/energy_uj): RAPL
 *             energy only, answered as the energy-status registers would (backend/powercap.c)
 *
 * Every device path is looked up under options->dev_root, so tests point the real code at
 * stand-in files with the same read/write-at-offset interface.
 *
 * Errors of one operation are that operation's status, as the driver gives them: -EIO for an MSR
 * the CPU does not have or a write the CPU refuses (#GP), -ENXIO for a CPU that does not exist.
 * All functions return 0 (or a count) on success and -errno on failure; none sets errno.
 */
#ifndef HAECER_BACKEND_BACKEND_H
#define HAECER_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "haecer/machine_fields.h"
#include "hw/msr.h"

#define MACHINE_MAX_CPUS HAECER_MAX_CPUS

enum backend_kind {
	BACKEND_AUTO = 0,
	BACKEND_MSR = 1,
	BACKEND_MSR_SAFE = 2,
	BACKEND_SIM = 3,
	BACKEND_POWERCAP = 4,    /* RAPL energy from sys/class/powercap zones (backend/powercap.c) */
	BACKEND_PERF = 5,        /* no registers: msrd serves perf events only (its perf broker) */
};

struct backend_options {
	enum backend_kind kind;
	const char *dev_root;      /* prefix of dev/cpu/N/msr, sys/..., proc/...; NULL or "/" = real */
	const char *sysfs_root;    /* powercap: prefix of sys/class/powercap and sys/devices/system/
				    * cpu; NULL = dev_root */
	const char *sim_model;     /* model name (file configs/models/NAME.yaml); NULL = default */
	const char *models_dir;    /* directory of model files; NULL = built-in search path */
	bool sim_virtual_time;     /* deterministic mode: time moves only by backend_sim_advance */
	const char *sim_load_script; /* scripted load file (format in backend/sim/sim_load.h), or
				      * NULL */
	uint32_t sim_late_energy_reads; /* every Nth read of an energy register returns the value
					 * of a read N-1 earlier (an out-of-order completion); 0 off */
	const char *sim_kernel_counters; /* counters the simulated kernel holds (sim_kernel.c) */
	bool allow_sim_fallback;   /* auto: the simulated CPU when no device is usable (opt-in) */
	uint64_t sim_access_step_ns; /* virtual time: advance this much per register access, so a
				      * loop waiting for the next 1 ms energy update ends */
	bool sim_ideal;            /* exact CPU: updates every 1 ms in phase, SMIs take no time,
				    * a busy CPU runs at core_hz */
	uint64_t sim_seed;         /* seeds the rough behaviour (replayable) */
	const char *sim_power_script; /* power trace file (format in backend/sim/sim_power.c), or
				       * NULL */
};

/* What the machine offers, from CPUID and the unit registers (real or simulated): the fields
 * every client is told (<haecer/machine_fields.h> lists them, msrd's MACHINE_INFO reply copies
 * them from the list), then what only msrd needs. The client's flags are derived from the
 * fields below (server/msrd.c), so the list's flags are left out. */
struct machine_info {
	HAECER_MACHINE_MEMBERS_BUT_FLAGS
	/* Dies: Intel RAPL is die-scope (the kernel's rapl.c; powercap's package-%d-die-%d zones):
	 * a package of several dies (Cascade Lake-AP, 06_55 with two dies a socket) has one set of
	 * energy registers per die. die_count counts (package, die) pairs densely; 0 or
	 * package_count when every package is one die (then cpu_die is not used). */
	uint32_t die_count;
	/* Hybrid parts (CPUID 07H EDX[15]: Alder/Raptor/Meteor Lake): each CPU's core type
	 * (cpu_core_type: enum cpu_core_type of hw/core_type.h, CPUID 1AH read on that CPU, or
	 * sysfs's cpu_core/cpu_atom lists) and its own counters (leaf 23H sub-leaf 1 on Meteor Lake
	 * and later, else that CPU's leaf 0AH; v5's fixed bitmap honoured). Not hybrid: every CPU
	 * has cpuid_0a's counters and type 0. */
	bool hybrid;
	uint32_t cpu_gp_mask[MACHINE_MAX_CPUS];    /* bit i: IA32_PMCi exists on this CPU */
	uint32_t cpu_fixed_mask[MACHINE_MAX_CPUS]; /* bit i: IA32_FIXED_CTRi exists on it */
	/* Domains whose status register reads but holds 0 at start (PP1 on a machine whose
	 * graphics has not run yet): not reported as existing, as the kernel does, but kept by
	 * msrd like the others, since the register may start counting at any time. */
	uint32_t rapl_dormant_domains;
	uint8_t tsc_source;         /* enum tsc_source of hw/msr.h */
	int8_t tsc_invariant;       /* CPUID 0x80000007 EDX[8]: 1, 0, or -1 when unreadable */
	char hypervisor[13];        /* CPUID 0x40000000's signature when CPUID 1 ECX[31] says a
				     * hypervisor runs us ("KVMKVMKVM", "VMwareVMware"), else "" */
	bool has_smi_count;         /* MSR_SMI_COUNT exists */
	bool pmc_full_width_writes; /* IA32_PERF_CAPABILITIES bit 13 */
	bool amd_perfmon_v2;        /* CPUID Fn8000_0022 EAX[0]: PerfCntrGlobalCtl gates counting */
	bool nmi_watchdog;          /* kernel.nmi_watchdog is on (it holds a cycles counter) */
	bool simulated;
	bool sim_virtual_time;      /* simulated time moves only when a client advances it */
};
_Static_assert(RAPL_DOMAIN_COUNT <= HAECER_RAPL_DOMAINS, "every RAPL domain has its slot");

/* One register access of a batch. */
struct msr_op {
	uint32_t cpu;
	uint32_t address;
	uint64_t value;  /* read: result; write: what to write */
	bool write;
	int32_t status;  /* 0 or -errno, filled by the backend */
};

/* What limits the real device on this machine (msrd(8), "device limit:" lines at start). */
struct backend_diagnosis {
	bool msr_device_present;    /* dev/cpu/0/msr exists */
	bool msr_module_loaded;     /* sys/module/msr exists */
	bool msr_safe_present;      /* dev/cpu/0/msr_safe exists */
	bool msr_safe_batch_present;/* dev/cpu/msr_batch exists */
	bool can_open;              /* dev/cpu/0/msr opens read-write */
	bool has_cap_sys_rawio;
	bool lockdown;              /* sys/kernel/security/lockdown is integrity or confidentiality */
	bool writes_allowed;        /* sys/module/msr/parameters/allow_writes is "on" (or absent) */
	bool writes_taint;          /* ... is "default": each write taints the kernel and logs */
	char advice[512];           /* what the operator should do, "" when nothing limits */
};

struct msr_backend;

/* Which energy register of `domain` a CPU reads: AMD's core energy per CPU, AMD's package
 * energy per package (the kernel's AMD/Hygon RAPL is package-scope), Intel's per die. */
static inline uint32_t machine_energy_key(const struct machine_info *machine, int domain,
					  uint32_t cpu)
{
	if (domain == RAPL_DOMAIN_AMD_CORE)
		return cpu;
	if (domain != RAPL_DOMAIN_AMD_PKG && machine->die_count > machine->package_count)
		return machine->cpu_die[cpu];
	return machine->cpu_package[cpu];
}

/* Open a backend. BACKEND_AUTO tries msr, then msr-safe, then powercap (energy only), then perf
 * (no registers: msrd's perf broker serves counters), and records why in `why` (e.g.
 * "msr: dev/cpu/0/msr: No such file or directory (load the msr module: modprobe msr); msr-safe:
 * ..."); it falls back to the simulated CPU only with options->allow_sim_fallback, and otherwise
 * fails with -ENODEV and that text, so a production msrd never invents values unasked. */
int backend_open(const struct backend_options *options, struct msr_backend **out, char *why,
		 size_t why_size);
void backend_close(struct msr_backend *backend);

/* Whether the kernel has perf_event (proc/sys/kernel/perf_event_paranoid under the sysfs root). */
bool backend_perf_available(const struct backend_options *options);
/* Whether this backend programs core counters itself (a writable msr or msr-safe device, or the
 * simulated CPU); otherwise msrd's perf broker is the way to them. */
bool backend_programs_pmcs(const struct msr_backend *backend);
/* `msrd --probe`: one line per event class (energy, core PMCs, msr PMU, power PMU, software
 * events) saying which backend serves it here, or what is missing. */
void backend_probe_report(const struct backend_options *options, FILE *out);

/* Inspect the device tree under options->dev_root without opening anything for good. */
int backend_diagnose(const struct backend_options *options, struct backend_diagnosis *out);

/* Log what limits the real device, one "device limit:" line each, then the advice (msrd(8));
 * nothing when the simulated CPU was asked for. */
void backend_log_device_limits(const struct backend_options *options);

enum backend_kind backend_kind(const struct msr_backend *backend);
const char *backend_kind_name(enum backend_kind kind);
int backend_kind_parse(const char *name, enum backend_kind *out);

int backend_machine_info(const struct msr_backend *backend, struct machine_info *out);
uint32_t backend_cpu_count(const struct msr_backend *backend);

/* Synchronous access. */
int backend_read(struct msr_backend *backend, uint32_t cpu, uint32_t address, uint64_t *value);
int backend_write(struct msr_backend *backend, uint32_t cpu, uint32_t address, uint64_t value);

/* ---- privilege separation (msrd's parent holds the only writable descriptors) ---- */

/* A write done elsewhere: 0 or -errno, as backend_write says it. */
typedef int (*backend_write_fn)(void *context, uint32_t cpu, uint32_t address, uint64_t value);

/* Reopen every device read-only (the same device, under the same descriptor number) and hand
 * every write to `write` from then on, so this process keeps no descriptor that can write a
 * register; reads keep their path and cost. Call it while the devices can still be opened (the
 * msr driver checks CAP_SYS_RAWIO at open). -EOPNOTSUPP for a backend without devices (sim,
 * powercap, perf); -errno of a reopen. Writes are then never prepared for io_uring
 * (backend_prep_supported: -EOPNOTSUPP), and a batch that writes runs op by op. */
int backend_delegate_writes(struct msr_backend *backend, backend_write_fn write, void *context);
/* Whether this backend reaches registers through device files (msr, msr-safe). */
bool backend_has_devices(const struct msr_backend *backend);

/* Run every op in order, each with its own status; returns 0 unless the batch as a whole could not
 * run (then -errno and statuses are undefined). msr-safe uses its batch ioctl when present. */
int backend_run_batch(struct msr_backend *backend, struct msr_op *ops, size_t count);

/* ---- the asynchronous path: io_uring verbs (liburing's io_uring_prep_* style) ---- */

struct io_uring_sqe;

/* Whether an access of `cpu` can be prepared with backend_prep_read / backend_prep_write: 0, or
 * -EOPNOTSUPP when this backend runs synchronously (sim; writes after backend_delegate_writes),
 * -ENXIO for a CPU without a device
 * (offline), -EPERM for a write when the device could only be opened read-only (backend_write
 * says EPERM there). msr-safe's devices can be prepared; its batches go through
 * backend_run_batch. */
int backend_prep_supported(const struct msr_backend *backend, uint32_t cpu, bool write);

/* Prepare `sqe` to read the 8 bytes of MSR `address` of `cpu` into `buffer`, or to write them
 * from `buffer`: the completion's result is 8 on success or what the driver says (-EIO for an
 * MSR the CPU refuses). Only after backend_prep_supported said 0 for the access; otherwise the
 * completion says -EBADF. `buffer` (8 bytes, any alignment) must stay valid until the
 * completion; the sqe's flags and user data are the caller's. */
void backend_prep_read(const struct msr_backend *backend, struct io_uring_sqe *sqe, uint32_t cpu,
		       uint32_t address, void *buffer);
void backend_prep_write(const struct msr_backend *backend, struct io_uring_sqe *sqe, uint32_t cpu,
			uint32_t address, const void *buffer);

/* The one ioctl request a backend makes (msr-safe's batch), for msrd's system call filter. */
unsigned long backend_ioctl_request(void);

/* The simulated CPU's own calls (its control and truth) are in backend/backend_sim.h. */

#endif
