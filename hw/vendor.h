/*
 * hw/vendor.h — which vendor's rules a CPU follows, from its CPUID leaf 0 vendor string.
 * Hygon's Dhyana is AMD's family 18h under another name (same MSRs, same RAPL), so it counts as
 * AMD everywhere. Header only.
 */
#ifndef HAECER_HW_VENDOR_H
#define HAECER_HW_VENDOR_H

#include <stdbool.h>
#include <string.h>

enum cpu_vendor {
	CPU_VENDOR_UNKNOWN = 0,
	CPU_VENDOR_INTEL = 1,
	CPU_VENDOR_AMD = 2,     /* "AuthenticAMD" or "HygonGenuine" */
};

/* The vendor of a CPUID vendor string (12 characters; at most 16 bytes are looked at, so a
 * field of a fixed-size struct need not be terminated). */
static inline enum cpu_vendor cpu_vendor_of(const char *vendor)
{
	if (strncmp(vendor, "GenuineIntel", 16) == 0)
		return CPU_VENDOR_INTEL;
	if (strncmp(vendor, "AuthenticAMD", 16) == 0 || strncmp(vendor, "HygonGenuine", 16) == 0)
		return CPU_VENDOR_AMD;
	return CPU_VENDOR_UNKNOWN;
}

static inline bool cpu_vendor_is_intel(const char *vendor)
{
	return cpu_vendor_of(vendor) == CPU_VENDOR_INTEL;
}

static inline bool cpu_vendor_is_amd(const char *vendor)
{
	return cpu_vendor_of(vendor) == CPU_VENDOR_AMD;
}

#endif
