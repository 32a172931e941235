/*
 * policy/util.c — small pieces every file of policy/ uses: errors, warnings, numbers, names.
 */
#include "policy/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hw/msr.h"

const uint32_t policy_energy_registers[] = {
	MSR_PKG_ENERGY_STATUS,	     MSR_DRAM_ENERGY_STATUS,	 MSR_PP0_ENERGY_STATUS,
	MSR_PP1_ENERGY_STATUS,	     MSR_PLATFORM_ENERGY_STATUS, MSR_AMD_CORE_ENERGY_STATUS,
	MSR_AMD_PKG_ENERGY_STATUS,
};
const size_t policy_energy_register_count =
	sizeof(policy_energy_registers) / sizeof(policy_energy_registers[0]);

int policy_fail(struct policy_error *error, unsigned line, unsigned column, const char *format,
		...)
{
	va_list args;

	if (error == NULL)
		return -EINVAL;
	error->line = line;
	error->column = column;
	va_start(args, format);
	vsnprintf(error->message, sizeof(error->message), format, args);
	va_end(args);
	return -EINVAL;
}

int policy_warn(struct policy *policy, unsigned line, const char *format, ...)
{
	char text[256], *line_text = NULL;
	va_list args;

	va_start(args, format);
	vsnprintf(text, sizeof(text), format, args);
	va_end(args);
	if (asprintf(&line_text, "%s:%u: %s", policy->name, line, text) < 0)
		return -ENOMEM;
	char **grown = realloc(policy->warnings, (policy->warning_count + 1) * sizeof(*grown));
	if (grown == NULL) {
		free(line_text);
		return -ENOMEM;
	}
	policy->warnings = grown;
	policy->warnings[policy->warning_count++] = line_text;
	return 0;
}

static int digit_value(char c, unsigned base)
{
	int value = -1;

	if (c >= '0' && c <= '9')
		value = c - '0';
	else if (c >= 'a' && c <= 'f')
		value = c - 'a' + 10;
	else if (c >= 'A' && c <= 'F')
		value = c - 'A' + 10;
	return value >= 0 && (unsigned)value < base ? value : -1;
}

int policy_parse_u64(const char *text, uint64_t *out)
{
	unsigned base = 10;
	uint64_t value = 0;
	bool overflow = false;

	if (text == NULL)
		return -EINVAL;
	if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
		base = 16;
		text += 2;
	} else if (text[0] == '0' && text[1] != '\0') {
		return -EINVAL; /* 0644 would be octal to C and decimal to a reader: refuse both */
	}
	if (*text == '\0')
		return -EINVAL;
	for (; *text != '\0'; text++) {
		int digit = digit_value(*text, base);
		if (digit < 0)
			return -EINVAL;
		if (value > (UINT64_MAX - (uint64_t)digit) / base)
			overflow = true;
		value = value * base + (uint64_t)digit;
	}
	if (overflow)
		return -ERANGE;
	*out = value;
	return 0;
}

bool policy_name_valid(const char *name)
{
	size_t length = name != NULL ? strlen(name) : 0;

	if (length == 0 || length > POLICY_MAX_NAME || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < length; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return true;
}

bool policy_account_name_valid(const char *name)
{
	size_t length = name != NULL ? strlen(name) : 0;

	if (length == 0 || length > 32 || name[0] == '-')
		return false;
	for (size_t i = 0; i < length; i++) {
		char c = name[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-' ||
			  (c == '$' && i == length - 1);
		if (!ok)
			return false;
	}
	return true;
}

char *policy_strdup(const char *text)
{
	return text != NULL ? strdup(text) : NULL;
}

void policy_free_strings(char **strings, size_t count)
{
	if (strings == NULL)
		return;
	for (size_t i = 0; i < count; i++)
		free(strings[i]);
	free(strings);
}
