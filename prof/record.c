/*
 * prof/record.c — haecer-prof record: run the program under task-clock sampling and record
 * msrd's energy readings of every package and domain beside the samples.
 *
 * Order matters for what is measured: the child is forked and waits on a pipe; the sampling
 * events (disabled, enable_on_exec) and the energy schedule are set up; the first energy set is
 * in the ring; only then does the child exec. So the first interval begins before the program's
 * first instruction, and the last ends after its exit (the loop waits for one more set).
 *
 * The recorder itself only copies records (when a perf ring is a quarter full, at the program's
 * exit, and at least every second) and never pins or touches the child.
 */
#include "prof/prof.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "haecer/msrd.h"
#include "hw/msr.h"
#include "hw/rapl_quirks.h"
#include "prof/sample_event.h"
#include "shm/ring.h"

#define PERF_DATA_PAGES 128u
/* How long record sleeps when nothing wakes it sooner. A perf ring wakes it at a quarter full
 * (the other three quarters hold seconds of samples while it copies) and the program's exit
 * wakes it through a pidfd, so with perf it need only wake in time for msrd's energy ring: at
 * most every POLL_MS_MAX, and four times per filling of that ring. Each wake costs the machine
 * the program runs on: about 0.1 ms of CPU time on a small VM, which the simulated CPU draws as
 * power (waking every 100 ms, it used 0.1-0.2 % of a CPU while a 1 kHz profile ran). The timer
 * agent's pipe is not polled (it would wake record at every sample) and holds about a second,
 * so that sampler keeps 100 ms. Without a pidfd (before Linux 5.3) the exit is seen only on a
 * wake, so the wakes come often enough not to stretch the run much. */
#define POLL_MS_MAX 1000
#define POLL_MS_TIMER 100
#define POLL_MS_NO_PIDFD 5
#define RING_MAJOR_DEFAULT 42u
#define RING_MAJOR_ENV "HAECER_PROF_RING_MAJOR"
/* msrd's energy ring holds ENERGY_RING_SECONDS of sets: record copies it at least every
 * POLL_MS_MAX, so that is eight times what it needs. msrd keeps a ring for a grace period (a
 * minute) after its schedule stops, against the user's ring memory quota: at minutes of sets a
 * ring (2 MiB), a few dozen profiles a minute (calm -n 30) reached the default 128 MiB. */
#define ENERGY_RING_SECONDS 8u
#define ENERGY_MIN_CAPACITY 1024u
#define ENERGY_MAX_CAPACITY 65536u
#define FIRST_SET_WAIT_MS 2000
#define EXIT_CODE_CANNOT_RUN 127

struct perf_cpu {
	int fd;
	void *base;
	size_t bytes;
};

struct energy_op {
	uint32_t package;
	uint32_t domain;
};

struct recorder {
	struct prof_writer writer;
	struct perf_cpu *cpus;
	int cpu_count;
	unsigned char *record_buffer;
	bool dwarf;
	bool kernel_unsampled;      /* perf refused kernel-mode samples (perf_event_paranoid) */
	uint64_t lost;
	uint64_t samples;
	/* energy */
	struct haecer_conn *conn;
	struct haecer_machine_info machine;
	struct energy_op ops[HAECER_SCHEDULE_MAX_OPS];
	uint32_t op_count;
	uint32_t schedule_id;
	bool schedule_running;
	struct ring_consumer energy;
	bool energy_attached;
	struct ring_record *energy_records;
	uint32_t energy_capacity;
	uint64_t energy_sets;
	uint64_t energy_lost;
	uint64_t last_energy_ns;
};

static uint64_t now_raw_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC_RAW, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static uint64_t own_cpu_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
	return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static void meta(struct recorder *recorder, const char *format, ...)
	__attribute__((format(printf, 2, 3)));
static void meta(struct recorder *recorder, const char *format, ...)
{
	char line[4096];
	va_list args;
	int length;

	va_start(args, format);
	length = vsnprintf(line, sizeof(line) - 1, format, args);
	va_end(args);
	if (length < 0)
		return;
	if ((size_t)length > sizeof(line) - 2)
		length = sizeof(line) - 2;
	line[length++] = '\n';
	prof_write(&recorder->writer, PROF_REC_META, line, (size_t)length, NULL, 0);
}

/* ---- /proc/stat: what the host CPUs did, to tell other processes from idle ---- */

static void record_cpustat(struct recorder *recorder)
{
	FILE *file = fopen("/proc/stat", "r");
	char line[512];
	uint64_t now = now_raw_ns();

	if (!file)
		return;
	while (fgets(line, sizeof(line), file)) {
		unsigned cpu;
		unsigned long long v[8] = { 0 };
		if (strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9')
			continue;
		if (sscanf(line + 3, "%u %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1],
			   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 5)
			continue;
		struct prof_cpustat stat = { .time_ns = now, .cpu = cpu };
		stat.busy_ticks = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
		stat.total_ticks = stat.busy_ticks + v[3] + v[4];
		prof_write(&recorder->writer, PROF_REC_CPUSTAT, &stat, sizeof(stat), NULL, 0);
	}
	fclose(file);
}

/* ---- perf ---- */

static int perf_open(const struct perf_event_attr *attr, pid_t pid, int cpu)
{
	long fd = syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : (int)fd;
}

/* perf's x86-64 user registers AX..IP (0-8) and R8..R15 (16-23): what CFI unwinding needs. */
#define X86_64_UNWIND_REGS 0xff01ffull

/* What perf_event_open says when perf is not to be had here (paranoid setting, seccomp, no
 * software events, no such system call): the timer agent can sample instead. */
static bool perf_refused(int error)
{
	return error == -EACCES || error == -EPERM || error == -ENOENT || error == -ENOSYS;
}

/* quiet_refusal: say nothing when perf is refused (the caller falls back and says so). */
static int open_sampling(struct recorder *recorder, pid_t child, unsigned hz, bool dwarf,
			 bool quiet_refusal)
{
	struct perf_event_attr attr;
	long pages = dwarf ? 8 * PERF_DATA_PAGES : PERF_DATA_PAGES;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	int error = 0, opened = 0;

	prof_sample_event(&attr, hz);
	attr.enable_on_exec = 1;
	attr.inherit = 1;
	/* Kernel time too where perf allows it (perf_event_paranoid 1 or lower, CAP_PERFMON): a
	 * sample taken in the kernel carries the user call chain that entered it, so a function's
	 * system calls count as its own, and the program's start and exit (exec, the loader's and
	 * a sanitizer's page faults) as theirs. Without it that time is seen by no sample, and
	 * scaling each thread's samples to its task clock spreads it over whatever the thread ran
	 * most: under ASan on a loaded host the hot functions were charged up to 4 % (once 16 %)
	 * more than their CPU time. open_sampling falls back to user time only and says so. */
	attr.exclude_kernel = 0;
	if (dwarf) {
		attr.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		attr.sample_regs_user = X86_64_UNWIND_REGS;
		attr.sample_stack_user = PROF_USER_STACK_BYTES;
	}
	attr.mmap = 1;
	attr.comm = 1;
	attr.inherit_stat = 1;
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC_RAW;
	/* Wake the reader when a quarter of the ring is full, not every few samples. */
	attr.watermark = 1;
	attr.wakeup_watermark = (uint32_t)((size_t)pages * page / 4);

	recorder->cpu_count = (int)sysconf(_SC_NPROCESSORS_CONF);
	recorder->cpus = calloc((size_t)recorder->cpu_count, sizeof(*recorder->cpus));
	if (!recorder->cpus)
		return -ENOMEM;
	for (int cpu = 0; cpu < recorder->cpu_count; cpu++)
		recorder->cpus[cpu].fd = -1;
	/* One event per CPU: the kernel does not let an inherited per-task event be mapped. */
	for (int cpu = 0; cpu < recorder->cpu_count; cpu++) {
		struct perf_cpu *slot = &recorder->cpus[cpu];
		int fd = perf_open(&attr, child, cpu);
		if ((fd == -EACCES || fd == -EPERM) && !attr.exclude_kernel && opened == 0) {
			attr.exclude_kernel = 1;
			recorder->kernel_unsampled = true;
			fd = perf_open(&attr, child, cpu);
		}
		if (fd == -ENODEV || fd == -ENOENT)
			continue; /* offline CPU */
		if (fd < 0) {
			error = fd;
			if (quiet_refusal && perf_refused(fd))
				return error;
			prof_error("perf_event_open (task clock, CPU %d) failed: %s%s", cpu,
				   strerror(-fd),
				   fd == -EACCES || fd == -EPERM
					   ? " (see /proc/sys/kernel/perf_event_paranoid: 2 or lower "
					     "is needed; --sampler timer samples without perf)"
					   : "");
			return error;
		}
		slot->fd = fd;
		opened++;
		slot->bytes = (size_t)(pages + 1) * page;
		slot->base = mmap(NULL, slot->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (slot->base == MAP_FAILED) {
			error = -errno;
			slot->base = NULL;
			prof_error("cannot map the sample ring of CPU %d: %s", cpu, strerror(-error));
			return error;
		}
	}
	if (opened == 0) {
		if (!quiet_refusal)
			prof_error("perf_event_open: no CPU has a task-clock event");
		return -ENOENT;
	}
	recorder->record_buffer = malloc(65536);
	return recorder->record_buffer ? 0 : -ENOMEM;
}

/* After the call chain: regs_user (abi, then one u64 per register of the mask) and stack_user
 * (size, the bytes, dyn_size: how many of them are valid). */
static void handle_user_stack(struct recorder *recorder, const unsigned char *body, size_t size,
			      size_t offset)
{
	struct prof_user_stack stack;
	uint64_t abi, bytes, valid;

	if (offset + 8 > size)
		return;
	memcpy(&abi, body + offset, 8);
	offset += 8;
	if (abi == PERF_SAMPLE_REGS_ABI_NONE || offset + sizeof(stack.regs) > size)
		return; /* a kernel thread, or no user state */
	memcpy(stack.regs, body + offset, sizeof(stack.regs));
	offset += sizeof(stack.regs);
	if (offset + 8 > size)
		return;
	memcpy(&bytes, body + offset, 8);
	offset += 8;
	if (bytes == 0 || bytes > size - offset || offset + bytes + 8 > size)
		return;
	memcpy(&valid, body + offset + bytes, 8);
	stack.size = valid < bytes ? valid : bytes;
	prof_write(&recorder->writer, PROF_REC_USER_STACK, &stack, sizeof(stack), body + offset,
		   (size_t)stack.size);
}

static void handle_perf_record(struct recorder *recorder, int cpu,
			       const struct perf_event_header *header)
{
	const unsigned char *body = (const unsigned char *)(header + 1);
	size_t size = header->size - sizeof(*header);

	switch (header->type) {
	case PERF_RECORD_SAMPLE: {
		/* ip, pid/tid, time, cpu/res, period, nr, ips[nr] */
		uint64_t fixed[6], ips[PROF_MAX_FRAMES];
		struct prof_sample sample;
		uint32_t nr = 0;
		if (size < sizeof(fixed))
			return;
		memcpy(fixed, body, sizeof(fixed));
		uint64_t chain = fixed[5];
		if (chain > (size - sizeof(fixed)) / 8)
			return;
		for (uint64_t i = 0; i < chain && nr < PROF_MAX_FRAMES; i++) {
			uint64_t ip;
			memcpy(&ip, body + sizeof(fixed) + i * 8, 8);
			if (ip >= (uint64_t)-4095) /* PERF_CONTEXT_* marker */
				continue;
			ips[nr++] = ip;
		}
		if (nr == 0)
			ips[nr++] = fixed[0];
		sample.pid = (uint32_t)fixed[1];
		sample.tid = (uint32_t)(fixed[1] >> 32);
		sample.time_ns = fixed[2];
		sample.cpu = (uint32_t)fixed[3];
		sample.period_ns = fixed[4];
		sample.nr = nr;
		prof_write(&recorder->writer, PROF_REC_SAMPLE, &sample, sizeof(sample), ips, nr * 8u);
		recorder->samples++;
		if (recorder->dwarf)
			handle_user_stack(recorder, body, size,
					  sizeof(fixed) + (size_t)chain * 8);
		return;
	}
	case PERF_RECORD_MMAP: {
		struct prof_mmap map;
		uint32_t ids[2];
		uint64_t ranges[3];
		if (size < 32)
			return;
		memcpy(ids, body, 8);
		memcpy(ranges, body + 8, 24);
		map.pid = ids[0];
		map.tid = ids[1];
		map.addr = ranges[0];
		map.len = ranges[1];
		map.pgoff = ranges[2];
		size_t name_length = strnlen((const char *)body + 32, size - 32);
		prof_write(&recorder->writer, PROF_REC_MMAP, &map, sizeof(map), body + 32,
			   name_length);
		return;
	}
	case PERF_RECORD_COMM: {
		struct prof_comm comm;
		if (size < 8)
			return;
		memset(&comm, 0, sizeof(comm));
		memcpy(&comm.pid, body, 4);
		memcpy(&comm.tid, body + 4, 4);
		size_t name_length = strnlen((const char *)body + 8, size - 8);
		memcpy(comm.comm, body + 8, name_length < 15 ? name_length : 15);
		prof_write(&recorder->writer, PROF_REC_COMM, &comm, sizeof(comm), NULL, 0);
		return;
	}
	case PERF_RECORD_READ: {
		struct prof_task_time task = { .cpu = (uint32_t)cpu };
		if (size < 16)
			return;
		memcpy(&task.pid, body, 4);
		memcpy(&task.tid, body + 4, 4);
		memcpy(&task.ns, body + 8, 8);
		prof_write(&recorder->writer, PROF_REC_TASK_TIME, &task, sizeof(task), NULL, 0);
		return;
	}
	case PERF_RECORD_LOST: {
		uint64_t lost[2];
		if (size >= sizeof(lost)) {
			memcpy(lost, body, sizeof(lost));
			recorder->lost += lost[1];
		}
		return;
	}
	default:
		return;
	}
}

/* `size` bytes at ring position `at` (it wraps at data_size). */
static void copy_from_ring(void *to, const unsigned char *data, uint64_t data_size, uint64_t at,
			   size_t size)
{
	size_t offset = (size_t)(at % data_size);
	size_t first = size < data_size - offset ? size : (size_t)(data_size - offset);

	memcpy(to, data + offset, first);
	memcpy((unsigned char *)to + first, data, size - first);
}

static void drain_perf(struct recorder *recorder)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	for (int cpu = 0; cpu < recorder->cpu_count; cpu++) {
		struct perf_cpu *slot = &recorder->cpus[cpu];
		if (!slot->base)
			continue;
		struct perf_event_mmap_page *control = slot->base;
		const unsigned char *data = (const unsigned char *)slot->base + page;
		uint64_t data_size = slot->bytes - page;
		uint64_t head = __atomic_load_n(&control->data_head, __ATOMIC_ACQUIRE);
		uint64_t tail = control->data_tail;

		while (head - tail >= sizeof(struct perf_event_header)) {
			struct perf_event_header header;
			copy_from_ring(&header, data, data_size, tail, sizeof(header));
			if (header.size < sizeof(header) || header.size > head - tail)
				break;
			copy_from_ring(recorder->record_buffer, data, data_size, tail, header.size);
			handle_perf_record(recorder, cpu,
					   (const struct perf_event_header *)recorder->record_buffer);
			tail += header.size;
		}
		__atomic_store_n(&control->data_tail, tail, __ATOMIC_RELEASE);
	}
}

/* Each CPU's event counts every thread's task clock there (its own and its inherited ones'). */
static void record_task_totals(struct recorder *recorder)
{
	for (int cpu = 0; cpu < recorder->cpu_count; cpu++) {
		struct prof_task_time task = { .cpu = (uint32_t)cpu };
		if (recorder->cpus[cpu].fd < 0 ||
		    read(recorder->cpus[cpu].fd, &task.ns, sizeof(task.ns)) != sizeof(task.ns))
			continue;
		prof_write(&recorder->writer, PROF_REC_TASK_TIME, &task, sizeof(task), NULL, 0);
	}
}

static void close_sampling(struct recorder *recorder)
{
	for (int cpu = 0; cpu < recorder->cpu_count && recorder->cpus; cpu++) {
		if (recorder->cpus[cpu].base)
			munmap(recorder->cpus[cpu].base, recorder->cpus[cpu].bytes);
		if (recorder->cpus[cpu].fd >= 0)
			close(recorder->cpus[cpu].fd);
	}
	free(recorder->cpus);
	recorder->cpus = NULL;
	recorder->cpu_count = 0;
	free(recorder->record_buffer);
	recorder->record_buffer = NULL;
}

/* ---- energy through msrd ---- */

static const char *backend_name(uint16_t backend)
{
	switch (backend) {
	case HAECER_BACKEND_MSR: return "msr";
	case HAECER_BACKEND_MSR_SAFE: return "msr-safe";
	case HAECER_BACKEND_SIM: return "sim";
	default: return "unknown";
	}
}

/* Whether msrd lets this client read domain `domain` of the package through cpu. */
static bool energy_readable(struct haecer_conn *conn, uint32_t cpu, uint32_t address)
{
	uint64_t raw, total;

	return haecer_energy_read(conn, cpu, address, &raw, &total) == 0;
}

static int start_energy(struct recorder *recorder, const char *socket, uint64_t period_ns)
{
	struct haecer_msr_op ops[HAECER_SCHEDULE_MAX_OPS];
	struct haecer_schedule_spec spec;
	const char *major_text = getenv(RING_MAJOR_ENV);
	uint32_t instance;
	int status, fd;

	status = haecer_connect(socket, &recorder->conn);
	if (status < 0) {
		prof_error("cannot connect to msrd (%s): %s; energy comes from msrd", 
			   socket ? socket : (getenv(HAECER_SOCKET_ENV) ? getenv(HAECER_SOCKET_ENV)
								     : HAECER_DEFAULT_SOCKET),
			   haecer_msrd_strerror(status));
		return status;
	}
	status = haecer_machine_info(recorder->conn, &recorder->machine);
	if (status < 0) {
		prof_error("msrd machine info: %s", haecer_conn_error(recorder->conn));
		return status;
	}
	const struct haecer_machine_info *machine = &recorder->machine;
	for (uint32_t package = 0; package < machine->package_count &&
				   package < PROF_MAX_PACKAGES; package++) {
		uint32_t cpu = 0;
		while (cpu < machine->cpu_count && machine->cpu_package[cpu] != package)
			cpu++;
		if (cpu == machine->cpu_count)
			continue;
		for (int domain = 0; domain < RAPL_DOMAIN_COUNT; domain++) {
			/* AMD core energy counts one core, not the package. */
			if (!(machine->rapl_domains & (1u << domain)) ||
			    domain == RAPL_DOMAIN_AMD_CORE)
				continue;
			uint32_t address = rapl_energy_status_address((enum rapl_domain)domain);
			if (recorder->op_count == HAECER_SCHEDULE_MAX_OPS ||
			    !energy_readable(recorder->conn, cpu, address))
				continue;
			ops[recorder->op_count] = (struct haecer_msr_op){
				.kind = HAECER_MSR_ENERGY_READ, .cpu = cpu, .address = address };
			recorder->ops[recorder->op_count++] =
				(struct energy_op){ .package = package, .domain = (uint32_t)domain };
		}
	}
	if (recorder->op_count == 0) {
		prof_error("msrd lets this user read no RAPL energy register");
		return -EPERM;
	}
	memset(&spec, 0, sizeof(spec));
	spec.period_ns = period_ns;
	spec.major = (uint16_t)(major_text ? strtoul(major_text, NULL, 0) : RING_MAJOR_DEFAULT);
	spec.minor = (uint16_t)getpid();
	uint64_t wanted = (uint64_t)recorder->op_count * ENERGY_RING_SECONDS * 1000000000ull /
			  period_ns;
	spec.capacity = ENERGY_MIN_CAPACITY;
	while (spec.capacity < wanted && spec.capacity < ENERGY_MAX_CAPACITY)
		spec.capacity *= 2;
	recorder->energy_capacity = spec.capacity;
	status = haecer_batch_register(recorder->conn, ops, recorder->op_count, &spec.handle);
	if (status < 0) {
		prof_error("msrd refused the energy batch: %s", haecer_conn_error(recorder->conn));
		return status;
	}
	status = haecer_schedule_start(recorder->conn, &spec, &recorder->schedule_id, &instance);
	haecer_batch_release(recorder->conn, spec.handle);
	if (status < 0) {
		prof_error("msrd refused the energy schedule (ring major %u, %s to choose another): "
			   "%s", spec.major, RING_MAJOR_ENV, haecer_conn_error(recorder->conn));
		return status;
	}
	recorder->schedule_running = true;
	status = haecer_ring_open(recorder->conn, spec.major, spec.minor, instance, NULL, &fd);
	if (status < 0) {
		prof_error("cannot open the energy ring: %s", haecer_conn_error(recorder->conn));
		return status;
	}
	status = ring_consumer_attach(&recorder->energy, fd);
	close(fd);
	if (status < 0) {
		prof_error("cannot attach to the energy ring: %s", strerror(-status));
		return status;
	}
	recorder->energy_attached = true;
	recorder->energy_records = calloc(recorder->energy_capacity,
					  sizeof(*recorder->energy_records));
	return recorder->energy_records ? 0 : -ENOMEM;
}

static void drain_energy(struct recorder *recorder, bool final)
{
	ssize_t got;

	if (!recorder->energy_attached)
		return;
	do {
		got = final ? ring_consume_final(&recorder->energy, recorder->energy_records,
						 recorder->energy_capacity,
						 &recorder->energy_lost)
			    : ring_consume(&recorder->energy, recorder->energy_records,
					   recorder->energy_capacity, &recorder->energy_lost);
		for (ssize_t i = 0; i < got; i++) {
			const struct ring_record *record = &recorder->energy_records[i];
			if (record->counter_id >= recorder->op_count)
				continue;
			const struct energy_op *op = &recorder->ops[record->counter_id];
			struct prof_energy energy = {
				.time_ns = record->timestamp,
				.package = op->package,
				.domain = op->domain,
				.joules = rapl_units_to_joules(record->value,
							       record->unit_exponent),
			};
			prof_write(&recorder->writer, PROF_REC_ENERGY, &energy, sizeof(energy), NULL,
				   0);
			if (record->counter_id == 0)
				recorder->energy_sets++;
			recorder->last_energy_ns = record->timestamp;
		}
	} while (got > 0);
}

static void stop_energy(struct recorder *recorder)
{
	if (recorder->schedule_running)
		haecer_schedule_stop(recorder->conn, recorder->schedule_id);
	recorder->schedule_running = false;
	drain_energy(recorder, true);
	if (recorder->energy_attached)
		ring_consumer_detach(&recorder->energy);
	recorder->energy_attached = false;
	free(recorder->energy_records);
	recorder->energy_records = NULL;
	haecer_close(recorder->conn);
	recorder->conn = NULL;
}

static void write_machine_meta(struct recorder *recorder, const struct haecer_server_info *info)
{
	const struct haecer_machine_info *machine = &recorder->machine;
	char list[4096];
	size_t used = 0;
	long host_cpus = sysconf(_SC_NPROCESSORS_CONF);

	meta(recorder, "backend=%s", backend_name(info->backend));
	if (info->backend == HAECER_BACKEND_SIM || (machine->flags & HAECER_MACHINE_SIMULATED))
		meta(recorder, "sim_model=%s", machine->sim_model[0] ? machine->sim_model : "?");
	meta(recorder, "cpu_model=%s", machine->model_name);
	meta(recorder, "packages=%u", machine->package_count);
	/* Host CPU n counts for the package of CPU n of msrd's machine (the simulated CPU n
	 * follows host CPU n). */
	list[0] = '\0';
	for (long cpu = 0; cpu < host_cpus && used < sizeof(list) - 16; cpu++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%u", cpu ? "," : "",
					 (uint32_t)cpu < machine->cpu_count
						 ? machine->cpu_package[cpu]
						 : 0u);
	meta(recorder, "host_cpu_packages=%s", list);
	uint32_t mask = 0;
	for (uint32_t i = 0; i < recorder->op_count; i++)
		mask |= 1u << recorder->ops[i].domain;
	meta(recorder, "domains=0x%x", mask);
}

static uint64_t rusage_cpu_ns(const struct rusage *usage)
{
	return (uint64_t)(usage->ru_utime.tv_sec + usage->ru_stime.tv_sec) * 1000000000ull +
	       (uint64_t)(usage->ru_utime.tv_usec + usage->ru_stime.tv_usec) * 1000ull;
}

/* ---- the child ---- */

static void ignore_signal(int signal_number)
{
	(void)signal_number;
}

/* The go byte: run under perf's events, or with the timer agent preloaded. */
#define GO_PERF 'g'
#define GO_TIMER 't'

static void __attribute__((noreturn)) run_child(char *const *command, int go, int report,
						struct prof_timer *timer, unsigned hz)
{
	char byte = 0;
	int error;

	/* Wait until the parent has set up sampling and energy (or gave up: EOF). */
	while (read(go, &byte, 1) < 0 && errno == EINTR)
		;
	if (byte == GO_TIMER && timer)
		prof_timer_child(timer, hz);
	else if (byte != GO_PERF)
		_exit(EXIT_CODE_CANNOT_RUN);
	execvp(command[0], command);
	error = errno;
	if (write(report, &error, sizeof(error)) < 0) {
		/* nothing left to tell the parent with */
	}
	_exit(EXIT_CODE_CANNOT_RUN);
}

static int wait_first_energy(struct recorder *recorder)
{
	for (int waited = 0; waited < FIRST_SET_WAIT_MS; waited += 2) {
		drain_energy(recorder, false);
		if (recorder->energy_sets > 0)
			return 0;
		usleep(2000);
	}
	prof_error("msrd's energy schedule produced nothing in %d ms", FIRST_SET_WAIT_MS);
	return -ETIMEDOUT;
}

int prof_record(const struct prof_record_options *options)
{
	struct recorder recorder;
	struct sigaction action, saved[2];
	int go_pipe[2] = { -1, -1 }, report_pipe[2] = { -1, -1 };
	uint64_t period_ns = 1000000000ull / options->hz;
	/* RAPL counters (and the simulated ones) move about once a millisecond: an interval of one
	 * millisecond holds zero, one or two updates, an error of up to 100 % each that only
	 * averages out slowly. Twenty updates per interval keep it near 5 %, and the samples
	 * inside an interval (twenty at 1 kHz) say who used it. Each reading is an msrd wake-up,
	 * which the machine pays for: about 50-60 us of msrd's CPU time on a small VM (a third of
	 * it the simulated CPU reading /proc/stat), 0.6 % of a CPU at every 10 ms, the largest
	 * part of a 1 kHz profile's energy overhead after the samples themselves; at 20 ms half
	 * of that. (Seed 003's CHAPPIE chose tens of ms for the same reason, calmness.) */
	uint64_t energy_period_ns = options->energy_period_ns ? options->energy_period_ns
							      : PROF_DEFAULT_ENERGY_PERIOD_NS;
	if (energy_period_ns < period_ns)
		energy_period_ns = period_ns;
	if (energy_period_ns < HAECER_SCHEDULE_MIN_PERIOD_NS)
		energy_period_ns = HAECER_SCHEDULE_MIN_PERIOD_NS;
	int status = 0, raw_status = 0, exec_errno = 0;
	pid_t child = -1;
	bool exited = false, signals_caught = false, use_timer = false;
	struct prof_timer *timer = NULL;
	int timer_error = 0;

	memset(&recorder, 0, sizeof(recorder));
	if (options->sampler != PROF_SAMPLER_PERF) {
		if (options->dwarf_unwind && options->sampler == PROF_SAMPLER_TIMER) {
			prof_error("--call-graph dwarf needs perf's stack copies; the timer "
				   "sampler walks frame pointers only");
			return -EINVAL;
		}
		timer_error = prof_timer_open(&timer);
		if (timer_error < 0 && options->sampler == PROF_SAMPLER_TIMER) {
			prof_error("the timer sampler's %s: %s (set %s to its path)",
				   PROF_AGENT_LIBRARY, strerror(-timer_error),
				   PROF_AGENT_LIBRARY_ENV);
			return timer_error;
		}
	}
	status = prof_writer_open(&recorder.writer, options->output);
	if (status < 0) {
		prof_error("cannot write %s: %s", options->output, strerror(-status));
		return status;
	}
	if (pipe2(go_pipe, O_CLOEXEC) < 0 || pipe2(report_pipe, O_CLOEXEC) < 0) {
		status = -errno;
		prof_error("pipe: %s", strerror(errno));
		goto out;
	}
	status = start_energy(&recorder, options->socket, energy_period_ns);
	if (status < 0)
		goto out;

	memset(&action, 0, sizeof(action));
	action.sa_handler = ignore_signal;
	sigemptyset(&action.sa_mask);
	sigaction(SIGINT, &action, &saved[0]);
	sigaction(SIGQUIT, &action, &saved[1]);
	signals_caught = true;
	fflush(NULL);
	child = fork();
	if (child == 0) {
		sigaction(SIGINT, &saved[0], NULL);
		sigaction(SIGQUIT, &saved[1], NULL);
		close(go_pipe[1]);
		close(report_pipe[0]);
		run_child(options->command, go_pipe[0], report_pipe[1], timer, options->hz);
	}
	if (timer && child > 0)
		prof_timer_started(timer, child);
	close(go_pipe[0]);
	go_pipe[0] = -1;
	close(report_pipe[1]);
	report_pipe[1] = -1;
	if (child < 0) {
		status = -errno;
		prof_error("fork: %s", strerror(errno));
		goto out;
	}
	recorder.dwarf = options->dwarf_unwind;
	if (options->sampler == PROF_SAMPLER_TIMER) {
		use_timer = true;
	} else {
		bool may_fall_back = options->sampler == PROF_SAMPLER_AUTO && timer &&
				     !options->dwarf_unwind;
		status = open_sampling(&recorder, child, options->hz, options->dwarf_unwind,
				       may_fall_back);
		if (status < 0 && may_fall_back && perf_refused(status)) {
			close_sampling(&recorder);
			if (!options->quiet)
				fprintf(stderr,
					"haecer-prof: perf_event_open refused (%s): sampling with "
					"CPU-time timers in a preloaded agent instead\n",
					strerror(-status));
			use_timer = true;
		} else if (status < 0) {
			if (perf_refused(status) && options->sampler == PROF_SAMPLER_AUTO)
				prof_error("and the timer sampler cannot stand in: %s",
					   options->dwarf_unwind
						   ? "--call-graph dwarf needs perf"
						   : strerror(-timer_error));
			goto out;
		}
	}

	meta(&recorder, "version=1");
	{
		char line[3000];
		size_t used = 0;
		line[0] = '\0';
		for (char *const *word = options->command; *word && used < sizeof(line) - 2; word++)
			used += (size_t)snprintf(line + used, sizeof(line) - used, "%s%s",
						 word == options->command ? "" : " ", *word);
		meta(&recorder, "command=%s", line);
	}
	meta(&recorder, "pid=%d", (int)child);
	meta(&recorder, "frequency_hz=%u", options->hz);
	meta(&recorder, "period_ns=%" PRIu64, period_ns);
	meta(&recorder, "energy_period_ns=%" PRIu64, energy_period_ns);
	meta(&recorder, "unwinding=%s", options->dwarf_unwind ? "dwarf" : "frame-pointer");
	meta(&recorder, "sampler=%s", use_timer ? "timer" : "perf");
	if (!use_timer)
		meta(&recorder, "kernel_time=%s",
		     recorder.kernel_unsampled ? "unsampled" : "sampled");
	if (use_timer) {
		const char *signal_text = getenv(PROF_AGENT_SIGNAL_ENV);
		int signal_number = signal_text ? atoi(signal_text) : PROF_AGENT_DEFAULT_SIGNAL;
		if (signal_number < SIGRTMIN || signal_number > SIGRTMAX)
			signal_number = PROF_AGENT_DEFAULT_SIGNAL;
		meta(&recorder, "timer_signal=%d", signal_number);
		meta(&recorder, "timer_agent=%s", prof_timer_library(timer));
	}
	write_machine_meta(&recorder, haecer_server_info(recorder.conn));
	status = wait_first_energy(&recorder);
	if (status < 0)
		goto out;
	record_cpustat(&recorder);
	/* The whole machine's package energy at the two ends of the run, read as calm reads it
	 * around a plain run: calm compares the two, and interpolating between the schedule's
	 * readings would give the run's first and last interval the average power of the whole
	 * interval, idle part included. */
	double start_joules = NAN, end_joules = NAN;
	if (prof_package_joules(recorder.conn, &recorder.machine, &start_joules) < 0)
		start_joules = NAN;
	meta(&recorder, "start_ns=%" PRIu64, now_raw_ns());
	uint64_t run_cpu_start = own_cpu_ns(), run_cpu_end = 0;
	if (write(go_pipe[1], use_timer ? "t" : "g", 1) != 1) {
		status = -errno;
		goto out;
	}
	close(go_pipe[1]);
	go_pipe[1] = -1;
	{
		ssize_t got;
		do {
			got = read(report_pipe[0], &exec_errno, sizeof(exec_errno));
		} while (got < 0 && errno == EINTR);
		if (got != (ssize_t)sizeof(exec_errno))
			exec_errno = 0;
	}

	struct pollfd *fds = calloc((size_t)recorder.cpu_count + 1, sizeof(*fds));
	if (!fds) {
		status = -ENOMEM;
		goto out;
	}
	/* The exit wakes record at once, so the end of the run is when the program ended, not
	 * the next wake after it. (The timer agent's pipe is not polled: it would wake record at
	 * every sample; it holds about a second of them.) */
	int exit_fd = (int)syscall(SYS_pidfd_open, child, 0);
	uint64_t exit_ns = 0;
	uint64_t ring_ms = (uint64_t)recorder.energy_capacity / recorder.op_count *
			   energy_period_ns / 1000000u;
	int poll_ms = ring_ms / 4 < POLL_MS_MAX ? (int)(ring_ms / 4) : POLL_MS_MAX;
	struct rusage child_usage, own_usage;

	memset(&child_usage, 0, sizeof(child_usage));
	bool hung_up = false;
	while (!exited) {
		nfds_t count = 0, perf_fds;
		for (int cpu = 0; cpu < recorder.cpu_count && !hung_up; cpu++)
			if (recorder.cpus[cpu].fd >= 0)
				fds[count++] = (struct pollfd){ .fd = recorder.cpus[cpu].fd,
								.events = POLLIN };
		perf_fds = count;
		if (exit_fd >= 0)
			fds[count++] = (struct pollfd){ .fd = exit_fd, .events = POLLIN };
		poll(fds, count, exit_fd < 0 ? POLL_MS_NO_PIDFD
			  : use_timer || hung_up ? POLL_MS_TIMER : poll_ms);
		if (wait4(child, &raw_status, WNOHANG, &child_usage) == child) {
			exited = true;
			exit_ns = now_raw_ns();
			run_cpu_end = own_cpu_ns();
			if (prof_package_joules(recorder.conn, &recorder.machine, &end_joules) < 0)
				end_joules = NAN;
		}
		/* The events hang up when the program's first thread exits, a moment before the
		 * program can be waited for: wait for that (the pidfd) before copying, so copying a
		 * whole run's samples does not delay the end. Should other threads run on, the rings
		 * are copied every POLL_MS_TIMER meanwhile. */
		bool hanging_up = false;
		for (nfds_t i = 0; i < perf_fds; i++)
			hanging_up |= (fds[i].revents & (POLLHUP | POLLERR)) != 0;
		hung_up |= hanging_up;
		if (hanging_up && !exited && exit_fd >= 0)
			continue;
		if (use_timer)
			prof_timer_drain(timer, &recorder.writer);
		drain_perf(&recorder);
		drain_energy(&recorder, false);
	}
	if (exit_fd >= 0)
		close(exit_fd);
	free(fds);
	meta(&recorder, "end_ns=%" PRIu64, exit_ns);
	/* What record itself used while the program ran (start_ns to end_ns): the part of its
	 * CPU time inside the window calm measures; set-up and the last energy set are outside. */
	meta(&recorder, "recorder_run_cpu_ns=%" PRIu64, run_cpu_end - run_cpu_start);
	if (!isnan(start_joules) && !isnan(end_joules))
		meta(&recorder, "package_joules_at_start=%.9f\npackage_joules_at_end=%.9f",
		     start_joules, end_joules);
	record_cpustat(&recorder);
	/* One more energy set after the exit closes the last interval. */
	for (int waited = 0; waited < 500 && recorder.last_energy_ns < exit_ns + energy_period_ns;
	     waited += 2) {
		usleep(2000);
		drain_energy(&recorder, false);
	}
	drain_perf(&recorder);
	record_task_totals(&recorder);
	if (use_timer) {
		bool broken, started;
		uint64_t agent_lost;
		prof_timer_finish(timer, &recorder.writer);
		prof_timer_counts(timer, &recorder.samples, &agent_lost, &broken, &started);
		recorder.lost += agent_lost;
		if (broken)
			meta(&recorder, "timer_note=the agent sent a record that made no sense; "
					"what followed it was dropped");
		uint64_t unsampled_threads, unsampled_ns;
		prof_timer_unsampled(timer, &unsampled_threads, &unsampled_ns);
		if (unsampled_threads > 0) {
			meta(&recorder,
			     "timer_note=%" PRIu64 " thread(s) ran %.1f ms of CPU time in all but no "
			     "timer tick fell in their runs: they have no samples, and their energy "
			     "is under other/idle, not the program's (perf's sampler has no such gap)",
			     unsampled_threads, (double)unsampled_ns / 1e6);
			fprintf(stderr, "haecer-prof: %" PRIu64 " thread(s) with %.1f ms of CPU time got no "
				"timer sample; see the report's note\n", unsampled_threads,
				(double)unsampled_ns / 1e6);
		}
		if (!started) {
			static const char never[] =
				"the timer agent never started in the program: it does not load "
				"into a statically linked or set-user-ID program, nor into one "
				"whose LD_PRELOAD was cleared";
			meta(&recorder, "timer_note=%s", never);
			fprintf(stderr, "haecer-prof: %s\n", never);
		}
	}
	stop_energy(&recorder);
	if (exec_errno) {
		prof_error("cannot run '%s': %s", options->command[0], strerror(exec_errno));
		status = EXIT_CODE_CANNOT_RUN;
	} else {
		status = WIFEXITED(raw_status) ? WEXITSTATUS(raw_status)
					       : 128 + WTERMSIG(raw_status);
	}
	meta(&recorder, "exit_status=%d", status);
	/* CPU time of the program (its threads and the children it waited for) and of record
	 * itself: what the profile cost, apart from what the host's load did to the wall time. */
	meta(&recorder, "program_cpu_ns=%" PRIu64, rusage_cpu_ns(&child_usage));
	if (getrusage(RUSAGE_SELF, &own_usage) == 0)
		meta(&recorder, "recorder_cpu_ns=%" PRIu64, rusage_cpu_ns(&own_usage));
	meta(&recorder, "lost_samples=%" PRIu64, recorder.lost);
	meta(&recorder, "lost_energy_records=%" PRIu64, recorder.energy_lost);
	if (!options->quiet)
		fprintf(stderr,
			"haecer-prof: %" PRIu64 " samples, %" PRIu64 " energy sets%s into %s\n",
			recorder.samples, recorder.energy_sets,
			recorder.lost ? " (samples lost: the ring overflowed)" : "",
			options->output);
out:
	if (signals_caught) {
		sigaction(SIGINT, &saved[0], NULL);
		sigaction(SIGQUIT, &saved[1], NULL);
	}
	if (child > 0 && !exited) {
		/* Set-up failed: the child sees EOF on its pipe and exits without running. */
		if (go_pipe[1] >= 0) {
			close(go_pipe[1]);
			go_pipe[1] = -1;
		}
		waitpid(child, NULL, 0);
	}
	for (int i = 0; i < 2; i++) {
		if (go_pipe[i] >= 0)
			close(go_pipe[i]);
		if (report_pipe[i] >= 0)
			close(report_pipe[i]);
	}
	close_sampling(&recorder);
	prof_timer_close(timer);
	if (recorder.conn)
		stop_energy(&recorder);
	int closed = prof_writer_close(&recorder.writer);
	if (status >= 0 && closed < 0) {
		prof_error("writing %s failed: %s", options->output, strerror(-closed));
		status = closed;
	}
	/* No half profile is left behind to be reported as if it were one. */
	if (status < 0)
		unlink(options->output);
	return status;
}
