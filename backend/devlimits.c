/*
 * backend/devlimits.c — at start, say what limits the real MSR device on this machine (msrd(8)):
 * the msr module not loaded, no CAP_SYS_RAWIO, kernel lockdown, msr.allow_writes=off. One log
 * line per limitation, then what to do about them. backend_open then falls back (auto) or fails
 * (--backend msr) with the same advice in its own line.
 *
 * The inspection itself is backend_diagnose's (backend/diagnose.c), on the tree under
 * --dev-root, so tests simulate each limitation with a stand-in tree.
 */
#include "backend/backend.h"

#include "common/log.h"

void backend_log_device_limits(const struct backend_options *options)
{
	struct backend_diagnosis diagnosis;

	/* Asked for the simulated CPU: the device is not wanted, its limits are no news. */
	if (options->kind == BACKEND_SIM || backend_diagnose(options, &diagnosis) < 0)
		return;
	if (!diagnosis.msr_device_present && !diagnosis.msr_module_loaded)
		log_warnx("device limit: the msr module is not loaded (no dev/cpu/0/msr)");
	else if (!diagnosis.msr_device_present)
		log_warnx("device limit: dev/cpu/0/msr is missing although the msr module is loaded");
	if (!diagnosis.has_cap_sys_rawio)
		log_warnx("device limit: msrd lacks CAP_SYS_RAWIO, which the msr driver requires");
	else if (diagnosis.msr_device_present && !diagnosis.can_open)
		log_warnx("device limit: dev/cpu/0/msr cannot be opened for reading and writing");
	if (diagnosis.lockdown)
		log_warnx("device limit: the kernel is locked down: MSR writes are refused");
	if (!diagnosis.writes_allowed)
		log_warnx("device limit: msr.allow_writes is off: MSR writes are refused");
	if (diagnosis.writes_taint)
		log_warnx("device limit: msr.allow_writes is \"default\": every MSR write taints the "
			  "kernel (CPU_OUT_OF_SPEC) and logs a warning");
	if (diagnosis.advice[0] != '\0')
		log_warnx("device advice: %s", diagnosis.advice);
}
