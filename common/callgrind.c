/*
 * common/callgrind.c — the Callgrind format's preamble and compressed names (common/callgrind.h).
 */
#include "common/callgrind.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void callgrind_write_preamble(FILE *out, const char *creator)
{
	fputs("# callgrind format\nversion: 1\ncreator: ", out);
	callgrind_write_printable(out, creator);
	fputc('\n', out);
}

void callgrind_write_printable(FILE *out, const char *text)
{
	for (const unsigned char *c = (const unsigned char *)(text != NULL ? text : ""); *c; c++)
		fputc(*c < 0x20 || *c == 0x7f ? '?' : *c, out);
}

static void write_named(FILE *out, const char *key, size_t id, const char *name)
{
	fprintf(out, "%s=(%zu) ", key, id);
	callgrind_write_printable(out, name);
	fputc('\n', out);
}

int callgrind_write_file(FILE *out, const char *key, struct callgrind_files *files,
			 const char *name)
{
	for (size_t i = 0; i < files->count; i++) {
		if (strcmp(files->names[i], name) == 0) {
			fprintf(out, "%s=(%zu)\n", key, i + 1);
			return 0;
		}
	}
	if (files->count == files->capacity) {
		size_t capacity = files->capacity > 0 ? 2 * files->capacity : 16;
		const char **names = realloc(files->names, capacity * sizeof(*names));
		if (names == NULL)
			return -ENOMEM;
		files->names = names;
		files->capacity = capacity;
	}
	files->names[files->count++] = name;
	write_named(out, key, files->count, name);
	return 0;
}

void callgrind_files_free(struct callgrind_files *files)
{
	free(files->names);
	*files = (struct callgrind_files){ 0 };
}

void callgrind_write_function(FILE *out, const char *key, size_t id, const char *name,
			      bool *named)
{
	if (*named) {
		fprintf(out, "%s=(%zu)\n", key, id);
		return;
	}
	write_named(out, key, id, name);
	*named = true;
}
