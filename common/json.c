/*
 * common/json.c — JSON strings and numbers by the one rule of common/json.h.
 */
#include "common/json.h"

#include <math.h>
#include <stddef.h>

/* Length of the valid UTF-8 sequence at text (2 to 4), 0 when it is not one. */
static size_t utf8_length(const unsigned char *text)
{
	size_t length = text[0] >= 0xf0 && text[0] <= 0xf4 ? 4
			: text[0] >= 0xe0			  ? 3
			: text[0] >= 0xc2 && text[0] < 0xe0	  ? 2
								  : 0;

	for (size_t i = 1; i < length; i++)
		if ((text[i] & 0xc0) != 0x80)
			return 0;
	return length;
}

void json_write_string(FILE *out, const char *text)
{
	const unsigned char *at = (const unsigned char *)(text != NULL ? text : "");

	fputc('"', out);
	while (*at != '\0') {
		size_t length;

		if (*at == '"' || *at == '\\') {
			fprintf(out, "\\%c", *at++);
		} else if (*at < 0x20 || *at == 0x7f) {
			fprintf(out, "\\u%04x", *at++);
		} else if (*at < 0x80) {
			fputc(*at++, out);
		} else if ((length = utf8_length(at)) == 0) {
			fputs("\\ufffd", out);
			at++;
		} else {
			fwrite(at, 1, length, out);
			at += length;
		}
	}
	fputc('"', out);
}

void json_write_number(FILE *out, double value)
{
	if (isfinite(value))
		fprintf(out, "%.17g", value);
	else
		fputs("null", out);
}
