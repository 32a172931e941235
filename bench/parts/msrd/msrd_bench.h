/*
 * bench/parts/msrd/msrd_bench.h — what bench/msrd's parts share: the msrd under test, its
 * policy, the throughput loop, and the figures each part measures. bench/msrd.c runs them;
 * echo_floor.c is the bare io_uring echo server at many clients, syscalls.c counts system
 * calls per read, backends.c measures the perf broker and the powercap backend, idle.c what idle
 * connections cost.
 */
#ifndef HAECER_BENCH_PARTS_MSRD_MSRD_BENCH_H
#define HAECER_BENCH_PARTS_MSRD_MSRD_BENCH_H

#include <stdint.h>
#include <sys/types.h>

#include "harness/msrd_harness.h"

#define ADDRESS 0x611u /* PKG_ENERGY_STATUS: what an energy-measuring client reads */
#define COUNTED_READS 5000 /* reads whose system calls syscalls.c counts */

extern struct msrd_server server;
extern const char policy[];

/* Stop msrd and exit 1, naming what failed. */
__attribute__((noreturn)) void die(const char *what);

struct throughput {
	double ops;             /* reads per second over all clients */
	double msrd_us_per_read; /* the server's CPU time (utime + stime) over the interval per read */
};

/* `clients` threads, one connection each, against msrd (echo_path NULL) or the echo floor;
 * the CPU time is that of `target`. */
struct throughput throughput(pid_t target, const char *echo_path, unsigned clients,
			     double seconds);
/* echo_floor.c: the same load against a bare io_uring echo server, in its own process. */
struct throughput echo_floor(unsigned clients, double seconds);

/* idle.c: msrd's memory per idle connection (RSS grown by `count` of them, each HELLO'd). */
double kib_per_idle_client(unsigned count);
/* idle.c: `busy` clients' throughput and msrd's CPU per read with `idle` connections open beside
 * them that send nothing after their HELLO. */
struct throughput throughput_beside_idle(unsigned busy, unsigned idle, double seconds);

struct syscall_count {
	double total;       /* both processes, per read */
	double server;      /* msrd's io_uring_enter per read */
	bool counted;
};

/* syscalls.c: system calls per read of `address` on `cpu`, client and server together (strace
 * -c), against msrd as it runs, and against an msrd on the msr backend's stand-in device. */
struct syscall_count count_syscalls(const struct msrd_server *target, uint32_t address, int cpu);
struct syscall_count count_syscalls_msr_backend(int cpu);

/* backends.c: a read() of a broker-handed perf event over the same event opened here; an
 * unprivileged page read of a powercap domain over root's pread of energy_uj. */
double broker_read_ratio(uint64_t *broker_ns, uint64_t *own_ns);
double powercap_read_ratio(uint64_t *page_ns, uint64_t *pread_ns);

/* device_writes.c: a WRITE round trip over a READ of the same register, msr backend on
 * stand-in devices (issue 30: the write crosses to the privileged parent). */
double device_write_ratio(uint64_t *write_ns, uint64_t *read_ns);

#endif
