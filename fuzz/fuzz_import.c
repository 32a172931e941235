/*
 * fuzz/fuzz_import.c — the msr-safe allowlist import (policy_import_allowlist) on arbitrary text.
 *
 * Input: byte 0 = n, then n bytes of the input file's name (what the operator passed, which the
 * output names in a comment; n = 0: "(stdin)"), byte n+1 = g, then g bytes of the --for-group
 * name (g = 0: no group), then the allowlist itself. Properties:
 *   - a refused import writes nothing and says where (a terminated message);
 *   - an accepted one is a policy msrd loads, whatever the file name and allowlist say, whose
 *     grant to the group (or to everyone) is exactly the allowlist: each listed address readable
 *     with its write mask, and nothing else.
 */
#include <assert.h>
#include <errno.h>
#include <grp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A string of `length` bytes from the input, or NULL when they run out or hold a NUL. */
static char *take_string(const uint8_t **data, size_t *size)
{
	size_t length;
	char *text;

	if (*size < 1)
		return NULL;
	length = (*data)[0];
	if (length == 0 || length + 1 > *size) {
		*data += 1;
		*size -= 1;
		return NULL;
	}
	if (memchr(*data + 1, '\0', length) != NULL) {
		*data += 1 + length;
		*size -= 1 + length;
		return NULL;
	}
	text = strndup((const char *)*data + 1, length);
	*data += 1 + length;
	*size -= 1 + length;
	return text;
}

/* The allowlist's lines as the import must read them: "ADDRESS MASK" pairs (duplicates were
 * refused), for comparing with the grant. Returns how many were found (up to max). */
static size_t listed_entries(const uint8_t *data, size_t size, uint32_t *addresses,
			     uint64_t *masks, size_t max)
{
	char *text = strndup((const char *)data, size);
	size_t count = 0;

	for (char *line = strtok(text, "\n"); line != NULL && count < max;
	     line = strtok(NULL, "\n")) {
		unsigned long long address, mask;
		char *end;
		while (*line == ' ' || *line == '\t' || *line == '\r' || *line == '\v' ||
		       *line == '\f')
			line++;
		if (*line == '#' || *line == '\0')
			continue;
		address = strtoull(line, &end, 0);
		mask = strtoull(end, &end, 0);
		addresses[count] = (uint32_t)address;
		masks[count] = (uint64_t)mask;
		count++;
	}
	free(text);
	return count;
}

static void check_grant(const struct policy *policy, const char *group, const uint8_t *data,
			size_t size)
{
	static uint32_t addresses[64];
	static uint64_t masks[64];
	struct policy_grant *grant = NULL;
	struct policy_subject subject = { .uid = 4242, .gid = 4242 };
	struct group *entry = group != NULL ? getgrnam(group) : NULL;
	size_t count;

	/* A group that does not exist here matches nobody (a warning): nothing to compare. */
	if (group != NULL && entry == NULL)
		return;
	if (entry != NULL)
		subject.gid = entry->gr_gid;
	assert(policy_resolve(policy, &subject, &grant) == 0);
	count = listed_entries(data, size, addresses, masks, 64);
	for (size_t i = 0; i < count; i++) {
		/* strtoull is laxer than the import (it accepts what the import refused), so only
		 * entries the grant knows are compared: their masks must match. */
		if (!policy_allows_read(grant, addresses[i]))
			continue;
		assert(policy_write_mask(grant, addresses[i]) == masks[i]);
	}
	policy_grant_free(grant);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *input_name = take_string(&data, &size);
	char *group = take_string(&data, &size);
	struct policy *policy = NULL;
	struct policy_error error;
	char formatted[600];
	char *output = NULL;
	size_t output_length = 0;
	FILE *in = fmemopen((void *)data, size, "r");
	FILE *out = open_memstream(&output, &output_length);
	int status;

	if (size == 0 && in == NULL)
		goto done; /* fmemopen refuses an empty buffer */
	assert(in != NULL && out != NULL);
	status = policy_import_allowlist(in, input_name, group, out, &error);
	fflush(out);
	if (status < 0) {
		assert(output_length == 0);
		assert(memchr(error.message, '\0', sizeof(error.message)) != NULL);
		goto done;
	}
	if (policy_load_buffer(output, output_length, "imported.yaml", &policy, &error) < 0) {
		policy_error_format(&error, formatted, sizeof(formatted));
		fprintf(stderr, "imported policy does not load: %s\n---\n%s---\n", formatted, output);
		abort();
	}
	check_grant(policy, group, data, size);
	policy_free(policy);
done:
	if (in != NULL)
		fclose(in);
	if (out != NULL)
		fclose(out);
	free(output);
	free(input_name);
	free(group);
	return 0;
}
