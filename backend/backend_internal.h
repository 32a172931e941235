/*
 * backend/backend_internal.h — what the files of the backend layer share (private to backend/):
 * the state of an open backend and the calls one file makes into another. msrd sees none of it
 * (backend/backend.h is the layer's one public header).
 *
 *   backend.c    opening (auto: msr, then msr-safe, then on request the simulated CPU), closing,
 *                routing each register access to the backend that was opened
 *   msr.c        the msr driver's dev/cpu/N/msr: opening, pread/pwrite, the io_uring verbs
 *   msr_safe.c   LLNL's msr-safe and its batch ioctl
 *   probe.c      what the machine is: CPUID, topology, RAPL domains and units, TSC frequency
 *   probe_cores.c hybrid parts: each CPU's core type and counters
 *   standin_allowlist.c msr-safe's allowlist masking, emulated on a stand-in tree
 *   diagnose.c   what limits the real device (devlimits.c logs it at start)
 *   powercap.c   RAPL energy from the kernel's powercap zones, answered as registers
 *   sim/         the simulated CPU (sim/sim.h)
 */
#ifndef HAECER_BACKEND_INTERNAL_H
#define HAECER_BACKEND_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

struct sim;
struct powercap;
struct msr_safe_batch_op;

struct msr_backend {
	enum backend_kind kind;
	struct machine_info info;
	struct sim *sim;
	struct powercap *powercap; /* the powercap backend's zones, or NULL */
	struct standin_allowlist *standin_allowlist; /* msr-safe stand-in's masks, or NULL */
	uint32_t cpu_count;
	int *fds;              /* per CPU, -1 when the CPU has no device */
	bool *writable;        /* the device opened read-write (where writes go, see below) */
	const char *dev_root;  /* where the devices were opened, for backend_delegate_writes */
	const char *device;    /* "msr" or "msr_safe" */
	/* Why the msr driver's devices are read-only although they opened read-write (the kernel
	 * refuses every write: lockdown, msr.allow_writes=off), or NULL. */
	const char *read_only_why;
	/* Set by backend_delegate_writes: every descriptor here is read-only and each write goes
	 * to write_delegate (msrd's privileged parent), NULL otherwise. */
	backend_write_fn write_delegate;
	void *delegate_context;
	int batch_fd;          /* msr-safe's dev/cpu/msr_batch, or -1 */
	bool batch_unsupported;
	struct msr_safe_batch_op *batch_ops;
	size_t batch_capacity;
};

/* options->dev_root + "/" + format: 0, or -ENAMETOOLONG. */
int backend_root_path(char *path, size_t size, const char *dev_root, const char *format, ...)
	__attribute__((format(printf, 4, 5)));

/* ---- msr.c ---- */

/* Open dev/cpu/N/`device` of every CPU under dev_root (read-only when writing is refused);
 * `why` says what failed. */
int backend_msr_open(struct msr_backend *backend, const char *dev_root, const char *device,
		     char *why, size_t why_size);
/* Open a device read-write, or read-only (*writable false) when writing is what is refused:
 * the descriptor or -errno. */
int backend_open_device(const char *path, bool *writable);
/* pread/pwrite of 8 bytes at offset = address of the CPU's device: -ENXIO without one, -EPERM
 * for a write on a device opened read-only, -EIO for a short transfer. */
int backend_device_read(const struct msr_backend *backend, uint32_t cpu, uint32_t address,
			uint64_t *value);
int backend_device_write(const struct msr_backend *backend, uint32_t cpu, uint32_t address,
			 uint64_t value);
/* Replace every open device descriptor by a read-only one of the same device, under the same
 * number (io_uring requests prepared later use it): 0 or -errno. */
int backend_msr_reopen_read_only(struct msr_backend *backend);
/* Close the CPUs' devices (those that were opened). */
void backend_msr_close(struct msr_backend *backend);

/* ---- msr_safe.c ---- */

/* Open dev/cpu/msr_batch when there is one (without it batches run op by op): always 0. */
int backend_msr_safe_open_batch(struct msr_backend *backend, const char *dev_root);
/* Run the ops through the batch ioctl: 0 when they ran (each with its status), -errno when the
 * batch could not be used and the caller must run them one by one. */
int backend_msr_safe_run(struct msr_backend *backend, struct msr_op *ops, size_t count);
void backend_msr_safe_close(struct msr_backend *backend);
/* The same for dev/cpu/msr_batch: its batches then only read (writes go op by op). */
int backend_msr_safe_reopen_read_only(struct msr_backend *backend);

/* ---- powercap.c ---- */

/* Find the zones under root/sys/class/powercap and describe the machine (CPUs and packages from
 * root/sys/devices/system/cpu, RAPL domains from the zones); `why` says what failed. */
int backend_powercap_open(struct msr_backend *backend, const char *root, char *why,
			  size_t why_size);
/* The energy-status register of `address` as the zones of cpu's package give it (modulo 2^32, in
 * the units the unit register says), the unit register, or -EIO for any other register and for
 * a zone that cannot be read (logged). */
int backend_powercap_read(struct msr_backend *backend, uint32_t cpu, uint32_t address,
			  uint64_t *value);
void backend_powercap_close(struct msr_backend *backend);
/* CPUs are root/sys/devices/system/cpu/cpuN: the highest N + 1 (at least 1). */
uint32_t backend_sysfs_cpu_count(const char *root);

/* ---- backend.c ---- */

/* Run each op (but those skip[i] names) with backend_read / backend_write. */
void backend_run_one_by_one(struct msr_backend *backend, struct msr_op *ops, size_t count,
			    const bool *skip);

/* ---- probe.c ---- */

/* Fill backend->info for a device backend: CPUID, packages, RAPL, TSC, what the PMU offers. */
void backend_probe_machine(struct msr_backend *backend, const char *dev_root);
/* What the simulated CPU says of itself through its CPUID, read as on a machine: on Intel each
 * CPU's core type and counters (backend_probe_core_types) and the TSC rate where its CPUID 0x15
 * gives one; invariant TSC. The rest of backend->info is the model's. */
void backend_probe_simulated(struct msr_backend *backend);
/* CPUID `leaf`/`subleaf` as CPU `cpu` answers it: the simulated CPU's answer, or from
 * dev/cpu/N/cpuid (a stand-in file holds
 * 16-byte records at 16 * ((subleaf << 32) | leaf)): 0, or -ENOENT without the device. */
int backend_read_cpuid_on(const struct msr_backend *backend, const char *dev_root, uint32_t cpu,
			  uint32_t leaf, uint32_t subleaf, uint32_t regs[4]);

/* ---- standin_allowlist.c ---- */

/* On a stand-in msr-safe tree with dev/cpu/msr_allowlist: load its masks (0 also when there is
 * none, or the devices are real). */
int backend_standin_allowlist_open(struct msr_backend *backend, const char *dev_root);
void backend_standin_allowlist_close(struct msr_backend *backend);
/* What msr-safe leaves of a write of `value`: the allowlist's bits from `value`, the others as
 * they were; `value` itself without a stand-in allowlist. */
uint64_t backend_standin_allowlist_apply(const struct msr_backend *backend, uint32_t cpu,
					 uint32_t address, uint64_t value);

/* ---- probe_cores.c ---- */

/* Intel: info->hybrid, and each CPU's core type and counter bitmaps (backend.h). Needs vendor,
 * cpuid_0a and cpu_count filled in. */
void backend_probe_core_types(const struct msr_backend *backend, const char *dev_root,
			      struct machine_info *info);

#endif
