/*
 * server/privilege.c — least privilege for msrd started as root.
 *
 * Once the MSR devices and the socket are open, msrd needs only CAP_SYS_RAWIO (the msr driver
 * checks it on open and on some ioctls; msr-safe's batch ioctl too). Everything else is dropped
 * from the permitted, effective, inheritable and bounding sets, so a compromised msrd cannot
 * regain it, not even across execve.
 */
#include "server/server.h"

#include <errno.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>

void privilege_raise_fd_limit(void)
{
	struct rlimit limit;

	if (getrlimit(RLIMIT_NOFILE, &limit) < 0 || limit.rlim_cur >= limit.rlim_max)
		return;
	limit.rlim_cur = limit.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &limit) < 0)
		log_warnx("cannot raise the descriptor limit to %llu",
			  (unsigned long long)limit.rlim_max);
}

static bool has_any_capability(void)
{
	cap_t current = cap_get_proc();
	cap_t none = cap_init();
	bool any = true;

	if (current != NULL && none != NULL)
		any = cap_compare(current, none) != 0;
	cap_free(current);
	cap_free(none);
	return any;
}

static bool rawio_permitted(void)
{
	cap_t current = cap_get_proc();
	cap_flag_value_t value = CAP_CLEAR;

	if (current != NULL)
		cap_get_flag(current, CAP_SYS_RAWIO, CAP_PERMITTED, &value);
	cap_free(current);
	return value == CAP_SET;
}

int privilege_drop(void)
{
	const cap_value_t keep[] = { CAP_SYS_RAWIO };
	int keep_count = 1;
	cap_t wanted = NULL;
	int status = 0;

	if (!has_any_capability())
		return 0;
	if (!rawio_permitted()) {
		/* Nothing to keep: clear every set (a harmless start without CAP_SYS_RAWIO, e.g.
		 * the simulated CPU under a partial capability set). */
		keep_count = 0;
	}
	/* The bounding set first: dropping from it needs CAP_SETPCAP, which goes next. */
	for (cap_value_t cap = 0; cap <= CAP_LAST_CAP; cap++) {
		if (cap == CAP_SYS_RAWIO || !CAP_IS_SUPPORTED(cap))
			continue;
		if (cap_drop_bound(cap) < 0 && errno != EINVAL) {
			status = errno != 0 ? -errno : -EPERM;
			log_warn_errno(status, "dropping capability %d from the bounding set", cap);
			goto out;
		}
	}
	wanted = cap_init();
	if (wanted == NULL) {
		status = -ENOMEM;
		goto out;
	}
	if ((keep_count > 0 && (cap_set_flag(wanted, CAP_PERMITTED, keep_count, keep, CAP_SET) < 0 ||
				cap_set_flag(wanted, CAP_EFFECTIVE, keep_count, keep, CAP_SET) < 0)) ||
	    cap_set_proc(wanted) < 0) {
		status = errno != 0 ? -errno : -EPERM;
		log_warn_errno(status, "keeping only CAP_SYS_RAWIO");
		goto out;
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	log_info("capabilities dropped: %s", keep_count > 0 ? "only cap_sys_rawio is kept" : "none kept");
out:
	if (wanted != NULL)
		cap_free(wanted);
	return status;
}
