/*
 * common/number.h — the one rule for a number a program of ours reads from text it was given
 * (a tool's option or argument, a line of a haecer-msr batch file, haecer-prof's data file and
 * the variables it hands its preloaded agent): the whole text, its first character a digit of
 * `base` (no blank, no sign: strtoull would take " 12" and "-1", the latter as 2^64 - 1), in
 * `base` (0: C's notation, decimal, 0x hex or 0 octal, as rdmsr takes an address), and at most
 * `max`. False for anything else; the caller's message names what was wrong. Header-only, so
 * the profiler's preloaded agent, which links nothing of ours, follows it too.
 */
#ifndef HAECER_COMMON_NUMBER_H
#define HAECER_COMMON_NUMBER_H

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

static inline bool number_parse(const char *text, int base, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long value;

	if (text == NULL || !(isdigit((unsigned char)text[0]) ||
			      (base == 16 && isxdigit((unsigned char)text[0]))))
		return false;
	errno = 0;
	value = strtoull(text, &end, base);
	if (errno != 0 || *end != '\0' || value > max)
		return false;
	*out = value;
	return true;
}

static inline bool number_parse_u32(const char *text, uint32_t *out)
{
	uint64_t value;

	if (!number_parse(text, 0, UINT32_MAX, &value))
		return false;
	*out = (uint32_t)value;
	return true;
}

static inline bool number_parse_u16(const char *text, uint16_t *out)
{
	uint64_t value;

	if (!number_parse(text, 0, UINT16_MAX, &value))
		return false;
	*out = (uint16_t)value;
	return true;
}

#endif
