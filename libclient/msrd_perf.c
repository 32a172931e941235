/*
 * libclient/msrd_perf.c — perf events through msrd's broker (PERF_OPEN, <haecer/msrd.h>): the
 * request, the descriptor it hands back, and reading it with its enabled/running times; and the
 * names of msrd's backends, which outputs print beside their figures.
 */
#include "libclient/haecer_internal.h"
#include "libclient/msrd_conn.h"

#include <errno.h>
#include <unistd.h>

_Static_assert(HAECER_PERF_CPU_WIDE == WIRE_PERF_CPU_WIDE &&
		       HAECER_PERF_EXCLUDE_KERNEL == WIRE_PERF_EXCLUDE_KERNEL &&
		       HAECER_PERF_DISABLED == WIRE_PERF_DISABLED &&
		       HAECER_PERF_PROFILE == WIRE_PERF_PROFILE &&
		       HAECER_PERF_PROFILE_STACK == WIRE_PERF_PROFILE_STACK &&
		       HAECER_PERF_EXCLUDE_USER == WIRE_PERF_EXCLUDE_USER,
	       "the public perf flags are the wire's");

int haecer_perf_open(struct haecer_conn *conn, const struct haecer_perf_spec *spec, int *fd,
		     uint32_t *open)
{
	struct wire_perf_open request;
	struct wire_perf_opened opened;
	struct wire_writer writer;
	struct haecer_reply reply;
	int status;

	if (!conn || !spec || !fd || spec->tid < 0 || spec->cpu < -1 ||
	    (spec->flags & ~WIRE_PERF_FLAGS) != 0)
		return -EINVAL;
	*fd = -1;
	request = (struct wire_perf_open){
		.type = spec->type, .flags = spec->flags, .config = spec->config,
		.config1 = spec->config1, .sample_period = spec->sample_period,
		.tid = spec->tid, .cpu = spec->cpu,
	};
	writer = haecer__begin(conn);
	wire_put_perf_open(&writer, &request);
	status = haecer__call_checked(conn, WIRE_OP_PERF_OPEN, &writer, &reply);
	if (status < 0)
		return status;
	if (reply.fd < 0 || wire_get_perf_opened(reply.payload, reply.length, &opened) < 0) {
		if (reply.fd >= 0)
			close(reply.fd);
		return -EPROTO;
	}
	if (open)
		*open = opened.open;
	*fd = reply.fd;
	return 0;
}

int haecer_perf_read(int fd, struct haecer_perf_value *out)
{
	uint64_t values[3];
	ssize_t got = read(fd, values, sizeof(values));

	if (got < 0)
		return -errno;
	if (got != (ssize_t)sizeof(values))
		return -EIO;
	haecer__perf_value(values[0], values[1], values[2], out);
	return 0;
}

void haecer__perf_value(uint64_t raw, uint64_t time_enabled, uint64_t time_running,
			struct haecer_perf_value *out)
{
	out->raw = raw;
	out->time_enabled = time_enabled;
	out->time_running = time_running;
	out->scaled = time_running != 0 && time_running < time_enabled;
	out->value = out->scaled ? (uint64_t)((unsigned __int128)raw * time_enabled / time_running)
				 : raw;
}

const char *haecer_backend_name(uint16_t backend)
{
	static const char *const names[] = { "unknown", "msr", "msr-safe", "sim", "powercap",
					     "perf" };

	return backend < sizeof(names) / sizeof(names[0]) ? names[backend] : "unknown";
}
