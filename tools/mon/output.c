/*
 * tools/mon/output.c — one row of fields printed as aligned text, CSV (RFC 4180 quoting) or a JSON
 * line.
 *
 * Every subcommand that prints tables builds rows here, so the three formats always carry the
 * same fields under the same names. Field text is ASCII by construction (numbers, and names
 * passed through mon_safe_name); a JSON string is written by common/json.h's one rule.
 */
#include "tools/mon/mon.h"
#include "common/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

bool mon_parse_format(const char *text, enum mon_format *format)
{
	if (strcmp(text, "text") == 0)
		*format = MON_FORMAT_TEXT;
	else if (strcmp(text, "csv") == 0)
		*format = MON_FORMAT_CSV;
	else if (strcmp(text, "json") == 0)
		*format = MON_FORMAT_JSON;
	else
		return false;
	return true;
}

void mon_row_reset(struct mon_row *row)
{
	row->count = 0;
}

/* The next field, or NULL when the row is full (a programming error: rows are fixed shapes). */
static char *add_field(struct mon_row *row, const char *name, int width, bool quoted,
		       bool present)
{
	if (row->count == MON_ROW_FIELDS)
		return NULL;
	row->fields[row->count].name = name;
	row->fields[row->count].width = width;
	row->fields[row->count].quoted = quoted;
	row->fields[row->count].present = present;
	row->fields[row->count].text[0] = '\0';
	return row->fields[row->count++].text;
}

void mon_row_string(struct mon_row *row, const char *name, int width, const char *value)
{
	char *text = add_field(row, name, width, true, true);

	if (text != NULL)
		snprintf(text, MON_FIELD_TEXT, "%s", value);
}

void mon_row_number(struct mon_row *row, const char *name, int width, const char *format, ...)
{
	char *text = add_field(row, name, width, false, true);
	va_list arguments;

	if (text == NULL)
		return;
	va_start(arguments, format);
	vsnprintf(text, MON_FIELD_TEXT, format, arguments);
	va_end(arguments);
}

void mon_row_absent(struct mon_row *row, const char *name, int width)
{
	add_field(row, name, width, false, false);
}

/* A CSV field in double quotes, a quote doubled (RFC 4180). */
static void print_csv_quoted(FILE *out, const char *text)
{
	fputc('"', out);
	for (const char *c = text; *c != '\0'; c++) {
		if (*c == '"')
			fputc('"', out);
		fputc(*c, out);
	}
	fputc('"', out);
}

/* Whether an unquoted field is a JSON value (a finite number or a literal): printf's "inf" and
 * "nan" (joules from a producer-chosen unit exponent, watts from them) are not, and such a
 * value is null. */
static bool json_number(const char *text)
{
	char *end;
	double value;

	if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0 || strcmp(text, "null") == 0)
		return true;
	value = strtod(text, &end);
	return end != text && *end == '\0' && isfinite(value);
}

static void print_json(FILE *out, const struct mon_row *row)
{
	bool first = true;

	fputc('{', out);
	for (size_t i = 0; i < row->count; i++) {
		if (!row->fields[i].present)
			continue;
		fprintf(out, "%s\"%s\":", first ? "" : ",", row->fields[i].name);
		if (row->fields[i].quoted)
			json_write_string(out, row->fields[i].text);
		else
			fputs(json_number(row->fields[i].text) ? row->fields[i].text : "null", out);
		first = false;
	}
	fputs("}\n", out);
}

static void print_csv(FILE *out, const struct mon_row *row, bool header)
{
	for (size_t i = 0; i < row->count; i++) {
		const char *text = header ? row->fields[i].name : row->fields[i].text;
		if (i > 0)
			fputc(',', out);
		if (!header && !row->fields[i].present)
			continue;
		if (strpbrk(text, ",\"\r\n") != NULL)
			print_csv_quoted(out, text);
		else
			fputs(text, out);
	}
	fputc('\n', out);
}

static void print_text(FILE *out, const struct mon_row *row, bool header)
{
	size_t last = 0;
	bool first = true;

	for (size_t i = 0; i < row->count; i++)
		if (row->fields[i].width != 0)
			last = i;
	for (size_t i = 0; i < row->count; i++) {
		const char *text = header ? row->fields[i].name
			: row->fields[i].present ? row->fields[i].text : "-";
		int width = row->fields[i].width;
		if (width == 0)
			continue;
		if (i == last && width < 0)
			width = 0; /* no trailing blanks */
		fprintf(out, "%s%*s", first ? "" : " ", width, text);
		first = false;
	}
	fputc('\n', out);
}

void mon_row_print(FILE *out, enum mon_format format, const struct mon_row *row,
		   bool *header_done)
{
	switch (format) {
	case MON_FORMAT_JSON:
		print_json(out, row);
		break;
	case MON_FORMAT_CSV:
		if (!*header_done)
			print_csv(out, row, true);
		print_csv(out, row, false);
		break;
	case MON_FORMAT_TEXT:
	default:
		if (!*header_done)
			print_text(out, row, true);
		print_text(out, row, false);
		break;
	}
	*header_done = true;
}
