/*
 * prof/calm.c — haecer-prof calm (seed 003 §3.2): is the profile to be trusted?
 */
#include "prof/prof.h"

#include <errno.h>

int prof_calm(const struct prof_calm_options *options)
{
	(void)options;
	prof_error("calm: not built yet");
	return -ENOSYS;
}
