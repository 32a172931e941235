/*
 * common/json.h — the one way every writer of JSON in the project (haecer-stat, haecer-mon,
 * haecer-prof, the region report of libhaecer) turns a C string into a JSON string, so that a
 * name with a quote, a control character or a byte that is not UTF-8 comes out the same from
 * each of them, and as JSON a strict parser accepts (RFC 8259):
 *
 *   '"' and '\'                      backslash-escaped
 *   bytes below 0x20, and 0x7f       \u00XX
 *   a valid UTF-8 sequence           as it is
 *   any other byte                   \ufffd (the replacement character)
 *
 * NULL is written as the empty string.
 */
#ifndef HAECER_COMMON_JSON_H
#define HAECER_COMMON_JSON_H

#include <stdio.h>

/* Write text as a JSON string, quotes included, by the rule above. */
void json_write_string(FILE *out, const char *text);

/* Write a number JSON can carry: %.17g, or null for NaN and the infinities. */
void json_write_number(FILE *out, double value);

#endif
