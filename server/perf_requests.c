/*
 * server/perf_requests.c — PERF_OPEN: msrd as a perf_event broker (issue 24, item 2).
 *
 * Where the kernel's perf_event_paranoid keeps an unprivileged program from perf (Debian's 3
 * forbids it every event), msrd opens the event for it, as the policy allows (policy_perf_grant:
 * which event classes, whether CPU-wide, whether sampling, how many at once per uid), and hands
 * the event's descriptor over the socket (SCM_RIGHTS, as rings are handed). The kernel then does
 * the rest: counts follow the client's thread across CPUs, multiplexing is scaled by
 * time_enabled / time_running, and the client reads with read(). msrd keeps no copy: once sent,
 * the descriptor is the client's alone (passing it on or never closing it costs msrd nothing).
 *
 * A client never gets an event on another process: a pid-scoped event must name a thread of
 * the connected process itself (SO_PEERCRED's pid), checked in /proc/TID/status (Tgid and real
 * uid) before the open and again after it, so a thread that exited and whose id was reused by
 * another process in between is caught and the event closed. (perf_event_open takes no pidfd.)
 *
 * The bound counts events handed out over a uid's live connections (ACCOUNT_PERF_EVENTS); they
 * count back when the connection closes.
 */
#include "server/server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "proto/perf_profile.h"

/* sys/bus/event_source/devices/PMU/`file` under the sysfs root. */
static void pmu_path(const struct msrd *server, const char *pmu, const char *file, char *path,
		     size_t size)
{
	const struct backend_options *options = &server->config->backend;
	const char *root = options->sysfs_root ? options->sysfs_root : options->dev_root;

	snprintf(path, size, "%s/sys/bus/event_source/devices/%s/%s",
		 root && strcmp(root, "/") != 0 ? root : "", pmu, file);
}

/* /sys/bus/event_source/devices/PMU/type under the sysfs root, or -errno. */
static int pmu_type(const struct msrd *server, const char *pmu)
{
	char path[PATH_MAX], text[16] = "";
	ssize_t got;
	int fd;

	pmu_path(server, pmu, "type", path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	got = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (got <= 0 || text[0] < '0' || text[0] > '9')
		return -EIO;
	return atoi(text);
}

/* The policy's class of an event type: POLICY_PERF_*, or 0 for one msrd does not broker. */
static uint32_t event_class(const struct msrd *server, uint32_t type)
{
	if (type == PERF_TYPE_SOFTWARE)
		return POLICY_PERF_SOFTWARE;
	if (type == PERF_TYPE_HARDWARE || type == PERF_TYPE_HW_CACHE || type == PERF_TYPE_RAW ||
	    (int)type == pmu_type(server, "cpu") || (int)type == pmu_type(server, "cpu_core") ||
	    (int)type == pmu_type(server, "cpu_atom"))
		return POLICY_PERF_CORE;
	if ((int)type == pmu_type(server, "msr"))
		return POLICY_PERF_MSR;
	if ((int)type == pmu_type(server, "power"))
		return POLICY_PERF_POWER;
	return 0;
}

static bool refuse(struct client *client, const struct wire_header *header, uint16_t status,
		   const char *reason)
{
	client_reply_error(client, header->op, header->request_id, status, "%s", reason);
	return false;
}

/* The named PMU whose format files describe an event type, or NULL (software events have none;
 * raw events are the core PMU's: cpu, or a hybrid part's P-core PMU, which the kernel gives
 * PERF_TYPE_RAW). */
static const char *pmu_of_type(const struct msrd *server, uint32_t type)
{
	static const char *const named[] = { "msr", "power", "cpu", "cpu_core", "cpu_atom" };

	if (type == PERF_TYPE_RAW)
		return pmu_type(server, "cpu") < 0 && pmu_type(server, "cpu_core") >= 0 ? "cpu_core"
											  : "cpu";
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if ((int)type == pmu_type(server, named[i]))
			return named[i];
	return NULL;
}

/* Add the bits of one format file ("config:0-7", "config1:0-63", "config:0-7,21") to masks
 * (config, config1, config2). */
static void add_format_bits(const char *text, uint64_t masks[3])
{
	const char *colon = strchr(text, ':');
	int which = strncmp(text, "config1:", 8) == 0 ? 1 : strncmp(text, "config2:", 8) == 0 ? 2
											    : 0;

	while (colon != NULL) {
		unsigned low, high;
		int used = 0;

		if (sscanf(colon + 1, "%u%n", &low, &used) != 1 || low > 63)
			return;
		high = low;
		if (colon[1 + used] == '-' && sscanf(colon + 2 + used, "%u", &high) != 1)
			return;
		for (unsigned bit = low; bit <= high && bit < 64; bit++)
			masks[which] |= 1ull << bit;
		colon = strchr(colon + 1, ',');
	}
}

/* The config bits the PMU's format files define: 0, or -ENOENT without a format directory. */
static int format_masks(const struct msrd *server, const char *pmu, uint64_t masks[3])
{
	char path[PATH_MAX], file[PATH_MAX + 300], text[128];
	struct dirent *entry;
	DIR *directory;

	pmu_path(server, pmu, "format", path, sizeof(path));
	directory = opendir(path);
	if (!directory)
		return -ENOENT;
	while ((entry = readdir(directory)) != NULL) {
		FILE *format;

		if (entry->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s", path, entry->d_name);
		format = fopen(file, "re");
		if (format && fgets(text, sizeof(text), format))
			add_format_bits(text, masks);
		if (format)
			fclose(format);
	}
	closedir(directory);
	return 0;
}

/* An encoding with bits the PMU's sysfs format does not define is refused before the kernel
 * sees it: the libpfm4 encoding of another model, or a typo, gets a clear error. */
static bool encoding_fits(struct client *client, const struct wire_header *header,
			  const struct wire_perf_open *request)
{
	const char *pmu = pmu_of_type(client->server, request->type);
	uint64_t masks[3] = { 0, 0, 0 };
	char reason[200];

	if (!pmu || format_masks(client->server, pmu, masks) < 0)
		return true;
	if ((request->config & ~masks[0]) == 0 && (request->config1 & ~masks[1]) == 0)
		return true;
	snprintf(reason, sizeof(reason), "config %#llx / config1 %#llx has bits PMU %s does not "
		 "define (its sysfs format: config %#llx, config1 %#llx)",
		 (unsigned long long)request->config, (unsigned long long)request->config1, pmu,
		 (unsigned long long)masks[0], (unsigned long long)masks[1]);
	return refuse(client, header, WIRE_STATUS_INVALID, reason);
}

/* Thread `tid`'s thread group and real uid from /proc/TID/status: 0, -ESRCH when it is gone,
 * or msrd's own failure to look (EMFILE). */
static int thread_owner(pid_t tid, pid_t *tgid, uid_t *uid)
{
	char path[64], line[256];
	bool have_tgid = false, have_uid = false;
	FILE *file;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	file = fopen(path, "re");
	if (!file)
		return errno == EMFILE || errno == ENFILE || errno == ENOMEM ? -errno : -ESRCH;
	while (fgets(line, sizeof(line), file)) {
		unsigned value;

		if (sscanf(line, "Tgid: %u", &value) == 1) {
			*tgid = (pid_t)value;
			have_tgid = true;
		} else if (sscanf(line, "Uid: %u", &value) == 1) {
			*uid = (uid_t)value;
			have_uid = true;
		}
	}
	fclose(file);
	return have_tgid && have_uid ? 0 : -ESRCH;
}

/* 0 when `tid` is a thread of the client's own process, run by its uid; -EPERM when it is
 * not (or is gone); msrd's own failure to look otherwise. */
static int own_thread(const struct client *client, pid_t tid)
{
	pid_t tgid = 0;
	uid_t uid = 0;
	int error = client->pid > 0 ? thread_owner(tid, &tgid, &uid) : -ESRCH;

	if (error < 0 && error != -ESRCH)
		return error;
	return error == 0 && tgid == client->pid && uid == client->uid ? 0 : -EPERM;
}

/* The policy's word on the request; a refusal is replied (and logged) here. */
static bool request_allowed(struct client *client, const struct wire_header *header,
			    const struct wire_perf_open *request, const struct policy_perf *perf)
{
	struct msrd *server = client->server;
	uint32_t class = event_class(server, request->type);
	char reason[160];

	if (class == 0) {
		snprintf(reason, sizeof(reason), "perf event type %u is no class msrd brokers "
			 "(software, msr, power, core)", request->type);
		return refuse(client, header, WIRE_STATUS_UNSUPPORTED, reason);
	}
	if (!(perf->classes & class)) {
		snprintf(reason, sizeof(reason), "uid %u may not open perf events of type %u "
			 "(policy: perf events)", (unsigned)client->uid, request->type);
		return refuse(client, header, WIRE_STATUS_DENIED, reason);
	}
	if ((request->flags & WIRE_PERF_CPU_WIDE) && !perf->cpu_wide)
		return refuse(client, header, WIRE_STATUS_DENIED,
			      "CPU-wide perf events not granted (policy: perf scope own)");
	if ((request->flags & WIRE_PERF_CPU_WIDE) &&
	    (request->cpu < 0 || (uint32_t)request->cpu >= server->machine.cpu_count))
		return refuse(client, header, WIRE_STATUS_NO_CPU, "a CPU-wide event needs a CPU");
	if (request->sample_period != 0 && !perf->sampling)
		return refuse(client, header, WIRE_STATUS_DENIED,
			      "perf sampling not granted (policy: perf sampling)");
	if ((request->flags & WIRE_PERF_PROFILE) &&
	    (request->type != PERF_TYPE_SOFTWARE || request->config != PERF_COUNT_SW_TASK_CLOCK ||
	     request->sample_period == 0 || (request->flags & WIRE_PERF_CPU_WIDE)))
		return refuse(client, header, WIRE_STATUS_INVALID,
			      "a profile event samples the task clock of the client's own process");
	if (client->account->used[ACCOUNT_PERF_EVENTS] >= perf->max_open) {
		snprintf(reason, sizeof(reason), "uid %u holds %u perf events through msrd, its "
			 "bound (policy: perf max_open)", (unsigned)client->uid, perf->max_open);
		return refuse(client, header, WIRE_STATUS_LIMIT, reason);
	}
	return true;
}

static int open_event(const struct wire_perf_open *request, pid_t tid)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = request->type,
		.config = request->config,
		.config1 = request->config1,
		.sample_period = request->sample_period,
		.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING,
		.disabled = (request->flags & WIRE_PERF_DISABLED) != 0,
		.exclude_kernel = (request->flags & WIRE_PERF_EXCLUDE_KERNEL) != 0,
		.exclude_user = (request->flags & WIRE_PERF_EXCLUDE_USER) != 0,
	};
	bool cpu_wide = (request->flags & WIRE_PERF_CPU_WIDE) != 0;

	if (request->flags & WIRE_PERF_PROFILE)
		perf_profile_attr(&attr, request->sample_period,
				  (request->flags & WIRE_PERF_EXCLUDE_KERNEL) != 0,
				  (request->flags & WIRE_PERF_PROFILE_STACK) != 0,
				  (uint32_t)request->config1);
	long fd = syscall(SYS_perf_event_open, &attr, cpu_wide ? -1 : (int)tid,
			  request->cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : (int)fd;
}

/* What the kernel's refusal means for the client. A core-PMU event the kernel does not know
 * (ENOENT) means the kernel has no core PMU at all when sysfs lists none: a VM without a
 * virtual PMU, or a kernel without one for this CPU. */
static const char *kernel_hint(const struct msrd *server, const struct wire_perf_open *request,
			       int error)
{
	if (error == -ENOENT && event_class(server, request->type) == POLICY_PERF_CORE &&
	    pmu_type(server, "cpu") < 0 && pmu_type(server, "cpu_core") < 0)
		return "the kernel has no core PMU here (no sys/bus/event_source/devices/cpu: a VM "
		       "without a virtual PMU?), so no hardware event can be counted";
	switch (error) {
	case -EACCES:
	case -EPERM:
		return "the kernel refused msrd (perf_event_paranoid, or msrd lacks CAP_PERFMON)";
	case -ENOENT:
		return "the kernel has no such event";
	case -EOPNOTSUPP:
		return "the PMU cannot do this (e.g. sampling or per-thread on a CPU-wide PMU)";
	case -EMFILE:
	case -ENFILE:
		return "msrd is out of descriptors";
	case -EINVAL:
		return "the PMU refused this scope or encoding";
	default:
		return "";
	}
}

static void reply_kernel_error(struct client *client, const struct wire_header *header,
			       const struct wire_perf_open *request, int error)
{
	/* EMFILE has no status of its own: it is a limit reached. */
	uint16_t status = error == -EMFILE || error == -ENFILE ? WIRE_STATUS_LIMIT
							       : wire_status_from_errno(error);

	log_info("perf: uid %u pid %d: perf_event_open(type %u config %#llx) failed: %s",
		 (unsigned)client->uid, (int)client->pid, request->type,
		 (unsigned long long)request->config, strerror(-error));
	client_reply_error(client, header->op, header->request_id, status,
			   "perf_event_open(type %u config %#llx): %s; %s", request->type,
			   (unsigned long long)request->config, strerror(-error),
			   kernel_hint(client->server, request, error));
}

static void reply_opened(struct client *client, const struct wire_header *header,
			 const struct wire_perf_open *request, const struct policy_perf *perf,
			 int fd)
{
	struct wire_perf_opened reply = {
		.type = request->type,
		.flags = request->flags,
		.open = (uint32_t)client->account->used[ACCOUNT_PERF_EVENTS],
		.max_open = perf->max_open,
	};
	struct wire_writer writer;
	uint8_t *space = dispatch_reply_begin(client, WIRE_PERF_OPENED_SIZE, &writer);

	if (space == NULL) {
		close(fd);
		return;
	}
	wire_put_perf_opened(&writer, &reply);
	dispatch_reply_end(client, space, header, &writer, fd);
}

/* On explicitly, with --backend perf, and under auto when no register backend programs the
 * counters (powercap, perf, or an msr device that lockdown made read-only) but the kernel has
 * perf_event: the counters then come from perf. */
bool perf_broker_enabled(const struct msrd *server)
{
	const struct msrd_config *config = server->config;

	if (config->perf_broker || backend_kind(server->backend) == BACKEND_PERF)
		return true;
	return config->backend.kind == BACKEND_AUTO && !backend_programs_pmcs(server->backend) &&
	       backend_perf_available(&config->backend);
}

void perf_requests_handle_open(struct client *client, const struct wire_header *header,
			       const uint8_t *payload, size_t length)
{
	struct wire_perf_open request;
	struct policy_perf perf;
	pid_t tid;
	int owner, fd;

	if (wire_get_perf_open(payload, length, &request) < 0) {
		dispatch_malformed(client, header, length);
		return;
	}
	if (!perf_broker_enabled(client->server)) {
		refuse(client, header, WIRE_STATUS_UNSUPPORTED,
		       "msrd's perf broker is off (msrd --perf-broker or --backend perf)");
		return;
	}
	policy_perf_grant(client->grant, &perf);
	if (!request_allowed(client, header, &request, &perf) ||
	    !encoding_fits(client, header, &request))
		return;
	tid = request.tid == 0 ? client->pid : (pid_t)request.tid;
	owner = request.flags & WIRE_PERF_CPU_WIDE ? 0 : own_thread(client, tid);
	if (owner == -EPERM) {
		refuse(client, header, WIRE_STATUS_DENIED,
		       "perf events only on the client's own threads (not a thread of its "
		       "process, or another uid's)");
		return;
	}
	fd = owner < 0 ? owner : open_event(&request, tid);
	if (fd >= 0 && !(request.flags & WIRE_PERF_CPU_WIDE) && own_thread(client, tid) < 0) {
		close(fd); /* the thread exited and its id went to another process meanwhile */
		fd = -ESRCH;
	}
	if (fd < 0) {
		reply_kernel_error(client, header, &request, fd);
		return;
	}
	client->account->used[ACCOUNT_PERF_EVENTS]++;
	client->perf_open++;
	reply_opened(client, header, &request, &perf, fd);
}

void perf_requests_release_client(struct client *client)
{
	accounts_give_back(&client->server->accounts, client->account, ACCOUNT_PERF_EVENTS,
			   client->perf_open);
	client->perf_open = 0;
}
