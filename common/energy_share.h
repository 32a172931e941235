/*
 * common/energy_share.h — the one attribution rule of seed 003 §4 (CHAPPIE), shared by
 * haecer-prof (prof/profile.c) and the region markers (libclient/haecer_region.c).
 *
 * A package draws `joules` over an interval of `interval_ns`. It offers interval × cpus of CPU
 * time (its capacity: busy and idle, as /proc/stat counts the time of its CPUs). Work that used
 * `cpu_ns` of CPU time on it during the interval is charged joules × cpu_ns / capacity. What no
 * work of ours used — other processes and idle — keeps its energy: it is never spread over
 * ours. `used_ns` is the CPU time all of our work used on the package in the interval: should
 * clock jitter make it exceed the capacity, the capacity is taken to be `used_ns`, so our
 * charges never add up to more than `joules`.
 */
#ifndef HAECER_COMMON_ENERGY_SHARE_H
#define HAECER_COMMON_ENERGY_SHARE_H

static inline double energy_share(double joules, double cpu_ns, double interval_ns, double cpus,
				  double used_ns)
{
	double capacity = interval_ns * cpus;

	if (used_ns > capacity)
		capacity = used_ns;
	return capacity > 0 && cpu_ns > 0 ? joules * cpu_ns / capacity : 0.0;
}

#endif
