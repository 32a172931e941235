/*
 * harness/text_file.h — a small text file's content as one string, for tests that look into
 * reports, logs and installed files. No cmocka asserts, so usable in child processes too.
 */
#ifndef HAECER_HARNESS_TEXT_FILE_H
#define HAECER_HARNESS_TEXT_FILE_H

#include <stddef.h>

/* The first max - 1 bytes (at most) of path, NUL-terminated, malloc'ed; NULL when it cannot be
 * opened or memory runs out. */
char *harness_read_text(const char *path, size_t max);

#endif
