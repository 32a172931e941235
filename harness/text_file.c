#include "harness/text_file.h"

#include <stdio.h>
#include <stdlib.h>

char *harness_read_text(const char *path, size_t max)
{
	FILE *in;
	char *text;
	size_t size;

	if (max == 0)
		return NULL;
	in = fopen(path, "r");
	if (in == NULL)
		return NULL;
	text = malloc(max);
	if (text != NULL) {
		size = fread(text, 1, max - 1, in);
		text[size] = '\0';
	}
	fclose(in);
	return text;
}
