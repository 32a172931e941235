/*
 * common/callgrind.h — the one writer of the Callgrind format's shared parts, for both files
 * the project writes in it (haecer-prof's profile, prof/report.c; the region report of
 * libhaecer, libclient/haecer_region_formats.c), which KCachegrind and callgrind_annotate read:
 *
 *   the preamble     "# callgrind format", "version: 1", "creator: ..."
 *   names            fl=/fi=/fe=/cfi= files and fn=/cfn= functions in name compression:
 *                    "key=(id) name" the first time, "key=(id)" after it
 *   the name rule    a control byte (below 0x20, or 0x7f) becomes '?', so no name can end a
 *                    line early or hide in a terminal; everything else is kept
 *
 * What each file counts (its events, cost lines and summary) is its own.
 */
#ifndef HAECER_COMMON_CALLGRIND_H
#define HAECER_COMMON_CALLGRIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The files named so far, for their ids (a file is found by its name). */
struct callgrind_files {
	const char **names; /* not owned: each must outlive the writing */
	size_t count, capacity;
};

/* "# callgrind format", "version: 1" and "creator: CREATOR" lines. */
void callgrind_write_preamble(FILE *out, const char *creator);

/* Text by the name rule, without a newline. */
void callgrind_write_printable(FILE *out, const char *text);

/* A file line (key "fl", "fi", "fe" or "cfi"): its id, with its name the first time. Returns 0
 * or -ENOMEM (nothing written). */
int callgrind_write_file(FILE *out, const char *key, struct callgrind_files *files,
			 const char *name);
void callgrind_files_free(struct callgrind_files *files);

/* A function line (key "fn" or "cfn") for the caller's id (from 1) of the function: with its
 * name when *named is false, which it then sets. */
void callgrind_write_function(FILE *out, const char *key, size_t id, const char *name,
			      bool *named);

#endif
