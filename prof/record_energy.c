/*
 * prof/record_energy.c — haecer-prof record's energy: an msrd schedule reading every RAPL
 * domain of every package into a ring, which record copies into the data file beside the
 * samples.
 */
#include "prof/recorder.h"

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

#define RING_MAJOR_DEFAULT 42u
#define RING_MAJOR_ENV "HAECER_PROF_RING_MAJOR"
/* msrd's energy ring holds ENERGY_RING_SECONDS of sets: record copies it at least every
 * POLL_MS_MAX, so that is eight times what it needs. msrd keeps a ring for a grace period (a
 * minute) after its schedule stops, against the user's ring memory quota: at minutes of sets a
 * ring (2 MiB), a few dozen profiles a minute (calm -n 30) reached the default 128 MiB. */
#define ENERGY_RING_SECONDS 8u
#define ENERGY_MIN_CAPACITY 1024u
#define ENERGY_MAX_CAPACITY 65536u

/* Whether msrd lets this client read domain `domain` of the package through cpu. */
static bool energy_readable(struct haecer_conn *conn, uint32_t cpu, uint32_t address)
{
	uint64_t raw, total;

	return haecer_energy_read(conn, cpu, address, &raw, &total) == 0;
}

int recorder_start_energy(struct recorder *recorder, const char *socket, uint64_t period_ns)
{
	struct haecer_msr_op ops[HAECER_SCHEDULE_MAX_OPS];
	struct haecer_schedule_spec spec;
	const char *major_text = getenv(RING_MAJOR_ENV);
	uint32_t instance;
	int status, fd;

	status = haecer_connect(socket, &recorder->conn);
	if (status < 0) {
		tool_warn("cannot connect to msrd (%s): %s; energy comes from msrd", 
			  socket ? socket : (getenv(HAECER_SOCKET_ENV) ? getenv(HAECER_SOCKET_ENV)
			  : HAECER_DEFAULT_SOCKET),
			  haecer_msrd_strerror(status));
		return status;
	}
	status = haecer_machine_info(recorder->conn, &recorder->machine);
	if (status < 0) {
		tool_warn("msrd machine info: %s", haecer_conn_error(recorder->conn));
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
		tool_warn("msrd lets this user read no RAPL energy register");
		return -EPERM;
	}
	memset(&spec, 0, sizeof(spec));
	spec.period_ns = period_ns;
	if (!number_parse_u16(major_text, &spec.major))
		spec.major = RING_MAJOR_DEFAULT;
	spec.minor = (uint16_t)getpid();
	uint64_t wanted = (uint64_t)recorder->op_count * ENERGY_RING_SECONDS * 1000000000ull /
			  period_ns;
	spec.capacity = ENERGY_MIN_CAPACITY;
	while (spec.capacity < wanted && spec.capacity < ENERGY_MAX_CAPACITY)
		spec.capacity *= 2;
	recorder->energy_capacity = spec.capacity;
	status = haecer_batch_register(recorder->conn, ops, recorder->op_count, &spec.handle);
	if (status < 0) {
		tool_warn("msrd refused the energy batch: %s", haecer_conn_error(recorder->conn));
		return status;
	}
	status = haecer_schedule_start(recorder->conn, &spec, &recorder->schedule_id, &instance);
	haecer_batch_release(recorder->conn, spec.handle);
	if (status < 0) {
		tool_warn("msrd refused the energy schedule (ring major %u, %s to choose another): "
			  "%s", spec.major, RING_MAJOR_ENV, haecer_conn_error(recorder->conn));
		return status;
	}
	recorder->schedule_running = true;
	status = haecer_ring_open(recorder->conn, spec.major, spec.minor, instance, NULL, &fd);
	if (status < 0) {
		tool_warn("cannot open the energy ring: %s", haecer_conn_error(recorder->conn));
		return status;
	}
	status = ring_consumer_attach(&recorder->energy, fd);
	close(fd);
	if (status < 0) {
		tool_warn("cannot attach to the energy ring: %s", strerror(-status));
		return status;
	}
	recorder->energy_attached = true;
	recorder->energy_records = calloc(recorder->energy_capacity,
					  sizeof(*recorder->energy_records));
	return recorder->energy_records ? 0 : -ENOMEM;
}

void recorder_drain_energy(struct recorder *recorder, bool final)
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

void recorder_stop_energy(struct recorder *recorder)
{
	if (recorder->schedule_running)
		haecer_schedule_stop(recorder->conn, recorder->schedule_id);
	recorder->schedule_running = false;
	recorder_drain_energy(recorder, true);
	if (recorder->energy_attached)
		ring_consumer_detach(&recorder->energy);
	recorder->energy_attached = false;
	free(recorder->energy_records);
	recorder->energy_records = NULL;
	haecer_close(recorder->conn);
	recorder->conn = NULL;
}

void recorder_write_machine_meta(struct recorder *recorder, const struct haecer_server_info *info)
{
	const struct haecer_machine_info *machine = &recorder->machine;
	char list[4096];
	size_t used = 0;
	long host_cpus = sysconf(_SC_NPROCESSORS_CONF);

	recorder_meta(recorder, "backend=%s", haecer_backend_name(info->backend));
	if (info->backend == HAECER_BACKEND_SIM || (machine->flags & HAECER_MACHINE_SIMULATED))
		recorder_meta(recorder, "sim_model=%s", machine->sim_model[0] ? machine->sim_model : "?");
	recorder_meta(recorder, "cpu_model=%s", machine->model_name);
	recorder_meta(recorder, "packages=%u", machine->package_count);
	/* Host CPU n counts for the package of CPU n of msrd's machine (the simulated CPU n
	 * follows host CPU n). */
	list[0] = '\0';
	for (long cpu = 0; cpu < host_cpus && used < sizeof(list) - 16; cpu++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%u", cpu ? "," : "",
					 (uint32_t)cpu < machine->cpu_count
						 ? machine->cpu_package[cpu]
						 : 0u);
	recorder_meta(recorder, "host_cpu_packages=%s", list);
	uint32_t mask = 0;
	for (uint32_t i = 0; i < recorder->op_count; i++)
		mask |= 1u << recorder->ops[i].domain;
	recorder_meta(recorder, "domains=0x%x", mask);
}
