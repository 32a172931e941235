/*
 * backend/standin_allowlist.c — msr-safe's write masking on a stand-in tree. The real module
 * applies its allowlist (/dev/cpu/msr_allowlist: "0xADDRESS 0xWRITEMASK" a line) to every write
 * without an error: bits outside the mask keep their old value (msr-safe's msr_safe.c,
 * msr_allowlist.c). A stand-in device is a regular file that stores whatever is written, so
 * msrd's tests could not see that masking; with a dev/cpu/msr_allowlist beside stand-in
 * msr_safe files, writes are masked here as the module would mask them. Never active on a real
 * device (a character device), where the module itself masks.
 */
#include "backend/backend_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define STANDIN_ALLOWLIST_MAX 256u

struct standin_allowlist {
	size_t count;
	uint32_t address[STANDIN_ALLOWLIST_MAX];
	uint64_t mask[STANDIN_ALLOWLIST_MAX];
};

static bool is_standin(const char *dev_root)
{
	char path[PATH_MAX];
	struct stat st;

	return backend_root_path(path, sizeof(path), dev_root, "dev/cpu/0/msr_safe") == 0 &&
	       stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int backend_standin_allowlist_open(struct msr_backend *backend, const char *dev_root)
{
	char path[PATH_MAX], line[128];
	struct standin_allowlist *list;
	FILE *file;

	if (!is_standin(dev_root) ||
	    backend_root_path(path, sizeof(path), dev_root, "dev/cpu/msr_allowlist") < 0)
		return 0;
	file = fopen(path, "re");
	if (file == NULL)
		return 0;
	list = calloc(1, sizeof(*list));
	while (list != NULL && list->count < STANDIN_ALLOWLIST_MAX && fgets(line, sizeof(line), file)) {
		unsigned long long address, mask;
		if (sscanf(line, "%llx %llx", &address, &mask) != 2)
			continue; /* comments and blank lines */
		list->address[list->count] = (uint32_t)address;
		list->mask[list->count++] = mask;
	}
	fclose(file);
	backend->standin_allowlist = list;
	return list != NULL ? 0 : -ENOMEM;
}

void backend_standin_allowlist_close(struct msr_backend *backend)
{
	free(backend->standin_allowlist);
	backend->standin_allowlist = NULL;
}

uint64_t backend_standin_allowlist_apply(const struct msr_backend *backend, uint32_t cpu,
					 uint32_t address, uint64_t value)
{
	const struct standin_allowlist *list = backend->standin_allowlist;
	uint64_t old;

	for (size_t i = 0; list != NULL && i < list->count; i++) {
		if (list->address[i] != address)
			continue;
		if (backend_device_read(backend, cpu, address, &old) < 0)
			return value;
		return (old & ~list->mask[i]) | (value & list->mask[i]);
	}
	return value;
}
