/*
 * backend/diagnose.c — what stops msrd from using the real MSR device, and what the
 * operator can do about it (msrd(8): the "device limit:" lines). Everything is looked up under
 * options->dev_root, so a test builds a stand-in tree that simulates each limitation.
 *
 *   dev/cpu/0/msr                          the msr driver's device
 *   sys/module/msr                         the msr module is loaded (or built in)
 *   sys/module/msr/parameters/allow_writes "on", "off" or "default" (since Linux 5.9)
 *   sys/kernel/security/lockdown           "none [integrity] confidentiality": writes blocked
 *   proc/self/status                       CapEff bit 17 = CAP_SYS_RAWIO (the real one when
 *                                          the tree has none)
 *   dev/cpu/0/msr_safe, dev/cpu/msr_batch  LLNL's msr-safe
 */
#include "backend/backend.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CAP_SYS_RAWIO_BIT 17

static int tree_path(char *path, size_t size, const char *dev_root, const char *relative)
{
	const char *root = dev_root && *dev_root && strcmp(dev_root, "/") != 0 ? dev_root : "";

	if ((size_t)snprintf(path, size, "%s/%s", root, relative) >= size)
		return -ENAMETOOLONG;
	return 0;
}

static bool tree_exists(const char *dev_root, const char *relative)
{
	char path[PATH_MAX];
	struct stat st;

	return tree_path(path, sizeof(path), dev_root, relative) == 0 && stat(path, &st) == 0;
}

/* The first line of a small file, without its newline; -errno when it cannot be read. */
static int tree_read_line(const char *dev_root, const char *relative, char *line, size_t size)
{
	char path[PATH_MAX];
	FILE *file;
	int ret = tree_path(path, sizeof(path), dev_root, relative);

	if (ret < 0)
		return ret;
	file = fopen(path, "re");
	if (!file)
		return -errno;
	if (!fgets(line, (int)size, file))
		line[0] = '\0';
	line[strcspn(line, "\n")] = '\0';
	fclose(file);
	return 0;
}

/* The selected lockdown mode is the bracketed word. */
static bool lockdown_active(const char *dev_root)
{
	char line[128];

	if (tree_read_line(dev_root, "sys/kernel/security/lockdown", line, sizeof(line)) < 0)
		return false;
	return strstr(line, "[integrity]") || strstr(line, "[confidentiality]");
}

static bool effective_cap_sys_rawio(const char *dev_root)
{
	char path[PATH_MAX], line[256];
	bool found = false;
	unsigned long long mask = 0;
	FILE *file = NULL;

	if (tree_path(path, sizeof(path), dev_root, "proc/self/status") == 0)
		file = fopen(path, "re");
	if (!file)
		file = fopen("/proc/self/status", "re");
	if (!file)
		return false;
	while (!found && fgets(line, sizeof(line), file))
		found = sscanf(line, "CapEff: %llx", &mask) == 1;
	fclose(file);
	return found && (mask >> CAP_SYS_RAWIO_BIT) & 1;
}

static bool device_opens_read_write(const char *dev_root, int *error)
{
	char path[PATH_MAX];
	int fd = -1;

	*error = ENAMETOOLONG;
	if (tree_path(path, sizeof(path), dev_root, "dev/cpu/0/msr") == 0)
		fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		*error = errno;
		return false;
	}
	close(fd);
	return true;
}

static void advise(struct backend_diagnosis *out, const char *format, ...)
	__attribute__((format(printf, 2, 3)));

static void advise(struct backend_diagnosis *out, const char *format, ...)
{
	size_t used = strlen(out->advice);
	va_list arguments;

	if (used + 3 >= sizeof(out->advice))
		return;
	if (used) {
		strcpy(out->advice + used, "; ");
		used += 2;
	}
	va_start(arguments, format);
	vsnprintf(out->advice + used, sizeof(out->advice) - used, format, arguments);
	va_end(arguments);
}

static void write_advice(struct backend_diagnosis *out, int open_error)
{
	if (!out->msr_device_present && !out->msr_module_loaded)
		advise(out, "the msr driver is not loaded: modprobe msr");
	else if (!out->msr_device_present)
		advise(out, "dev/cpu/0/msr is missing although the msr module is loaded: check that "
			    "/dev is devtmpfs (or bind-mount /dev/cpu into the container)");
	if (!out->has_cap_sys_rawio)
		advise(out, "no CAP_SYS_RAWIO: run msrd as root or give it CAP_SYS_RAWIO "
			    "(setcap cap_sys_rawio+ep msrd)");
	else if (out->msr_device_present && !out->can_open)
		advise(out, "dev/cpu/0/msr does not open read-write (%s): run msrd as root",
		       strerror(open_error));
	if (out->lockdown)
		advise(out, "kernel lockdown blocks MSR writes: boot without lockdown "
			    "(lockdown=none, or Secure Boot off) or use msr-safe");
	if (!out->writes_allowed)
		advise(out, "writes are disabled: set msr.allow_writes=on "
			    "(echo on > /sys/module/msr/parameters/allow_writes)");
	if (out->writes_taint)
		advise(out, "msr.allow_writes is \"default\": every counter write taints the kernel "
			    "(CPU_OUT_OF_SPEC) and logs a warning; set msr.allow_writes=on, use "
			    "msr-safe, or count with the kernel's perf (perf stat) instead");
	if ((!out->msr_device_present || !out->can_open) && out->msr_safe_present)
		advise(out, "msr-safe is present: use --backend msr-safe");
}

/* Nothing is kept open; the result describes the tree at the time of the call. */
int backend_diagnose(const struct backend_options *options, struct backend_diagnosis *out)
{
	const char *root = options ? options->dev_root : NULL;
	char allow_writes[32];
	int open_error = 0;

	memset(out, 0, sizeof(*out));
	out->msr_device_present = tree_exists(root, "dev/cpu/0/msr");
	out->msr_module_loaded = tree_exists(root, "sys/module/msr");
	out->msr_safe_present = tree_exists(root, "dev/cpu/0/msr_safe");
	out->msr_safe_batch_present = tree_exists(root, "dev/cpu/msr_batch");
	out->can_open = out->msr_device_present && device_opens_read_write(root, &open_error);
	out->has_cap_sys_rawio = effective_cap_sys_rawio(root);
	out->lockdown = lockdown_active(root);
	out->writes_allowed = true;
	if (tree_read_line(root, "sys/module/msr/parameters/allow_writes", allow_writes,
			   sizeof(allow_writes)) == 0) {
		out->writes_allowed = strcmp(allow_writes, "off") != 0;
		/* arch/x86/kernel/msr.c (5.9+): with MSR_WRITES_DEFAULT, msr_write adds
		 * TAINT_CPU_OUT_OF_SPEC and filter_write warns (rate-limited) on every write. */
		out->writes_taint = strcmp(allow_writes, "default") == 0;
	}
	write_advice(out, open_error);
	return 0;
}
